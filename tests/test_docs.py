"""The committed model reference is exactly what the registry generates."""

from __future__ import annotations

import re
from pathlib import Path

from actuator_sysid.models.docs import render
from actuator_sysid.models.parameters import PARAMS

DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def test_models_doc_is_generated_from_the_registry() -> None:
    assert DOC.read_text() == render(), "regenerate: python -m actuator_sysid.models.docs > docs/models.md"
    for p in PARAMS:  # every registered quantity appears with its unit
        assert f"| `{p.name}` |" in DOC.read_text() and p.unit in DOC.read_text()


def _sections(doc: Path) -> set[str]:
    """Section ids of a doc by its headings: '## A. …' → 'A', '### A.4 …' → 'A.4', '## 2. …' → '2'."""
    return {m.group(1) for m in re.finditer(r"^#{2,4} ([0-9A-Z](?:\.[0-9]+)*)\.? ", doc.read_text(), re.M)}


def test_every_section_citation_in_the_code_resolves() -> None:
    """Each section cited in our code exists in docs/consumer-semantics.md (or docs/log-formats.md).

    A citation such as A.7.2 (step 2 of a section's numbered list) resolves when A.7 exists.
    """
    docs = DOC.parent
    known = {
        "consumer-semantics": _sections(docs / "consumer-semantics.md"),
        "log-formats": _sections(docs / "log-formats.md"),
    }
    assert {"0.2", "A.4", "A.11", "C.3", "D", "F"} <= known["consumer-semantics"]
    assert {str(k) for k in range(1, 8)} <= known["log-formats"]
    root = DOC.parents[1]
    bad = []
    for path in sorted([*(root / "actuator_sysid").rglob("*.py"), *(root / "tests").glob("*.py")]):
        text = path.read_text()
        for m in re.finditer(r"§\s?([0-9A-Z](?:\.[0-9]+)*)", text):
            before = text[max(0, m.start() - 200) : m.start()]  # the doc named last before it, even a line up
            doc = (
                "log-formats"
                if before.rfind("log-formats") > before.rfind("consumer-semantics")
                else "consumer-semantics"
            )
            sec = m.group(1)
            if sec not in known[doc] and not (sec.count(".") == 2 and sec.rpartition(".")[0] in known[doc]):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path.relative_to(root)}:{line}: §{sec} is not a section of docs/{doc}.md")
    assert not bad, "\n".join(bad)
