"""The committed model reference is exactly what the registry generates."""

from __future__ import annotations

from pathlib import Path

from actuator_sysid.models.docs import render
from actuator_sysid.models.parameters import PARAMS

DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def test_models_doc_is_generated_from_the_registry() -> None:
    assert DOC.read_text() == render(), "regenerate: python -m actuator_sysid.models.docs > docs/models.md"
    for p in PARAMS:  # every registered quantity appears with its unit
        assert f"| `{p.name}` |" in DOC.read_text() and p.unit in DOC.read_text()
