"""The one rule for names a user gives (joints, segments, robots, groups, bodies, renames).

Names reach generated files (Python, USD, MJCF, YAML, JSON) and pages. Writers quote them in each format's
own syntax; this rule is the second wall: a name holds only characters that no export format treats as
syntax, so a hostile one is refused where it enters, with a message that says which character and where.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import DatasetError

MAX_NAME = 128
"""Characters a name may have."""

NAME_PUNCTUATION = "_-.:/+@[]()"
"""Punctuation a name may hold besides letters, digits and inner spaces."""

NAME_RULE = (
    f"1 to {MAX_NAME} characters: letters, digits, inner spaces and {' '.join(NAME_PUNCTUATION)} "
    "(no quotes, backslashes, <, >, &, #, ;, $, braces or control characters)"
)
"""The rule as users read it, in every refusal."""

_ALLOWED = re.compile(r"[\w\-.:/+@\[\]() ]+")


def name_problem(name: object) -> str | None:
    """What is wrong with `name` under NAME_RULE, or None when it is fine."""
    if not isinstance(name, str):
        return f"a name must be text, not {type(name).__name__}"
    if not name:
        return "the name is empty"
    if len(name) > MAX_NAME:
        return f"the name has {len(name)} characters; at most {MAX_NAME}"
    if name != name.strip():
        return "the name starts or ends with a space"
    for i, ch in enumerate(name):
        bad = not _ALLOWED.fullmatch(ch) or unicodedata.category(ch)[0] in "CZ" and ch != " "
        if bad:
            return f"character {i + 1} ({_show(ch)}) is not allowed"
    return None


def check_name(name: object, what: str = "name", where: str = "") -> str:
    """`name` itself when it follows NAME_RULE; else DatasetError naming what, where and the rule."""
    problem = name_problem(name)
    if problem is None:
        assert isinstance(name, str)
        return name
    place = f"{where}: " if where else ""
    raise DatasetError(f"{place}{what} {quote_name(name)}: {problem}; a {what} has {NAME_RULE}")


def safe_name(name: str, fallback: str = "segment") -> str:
    """A name derived from something the user did not choose as a name (a file name): every character outside
    the rule becomes '_', cut to MAX_NAME."""
    out = "".join(ch if name_problem(ch) is None else "_" for ch in name).strip()[:MAX_NAME].strip()
    return out or fallback


def quote_name(name: object, limit: int = 60) -> str:
    """A name shown inside a message: its repr, cut to `limit` characters, so no message echoes a long input."""
    text = repr(name)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_text(text: object, limit: int = 300) -> str:
    """Longer text from the input (a header line, a cell, a parser's error) shown in a message: cut to `limit`
    characters with the count left out, so no message holds a whole input."""
    s = str(text)
    return s if len(s) <= limit else f"{s[:limit]}… ({len(s) - limit} more characters)"


def _show(ch: str) -> str:
    return repr(ch) if ch.isprintable() else f"U+{ord(ch):04X}"
