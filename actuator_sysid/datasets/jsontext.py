"""JSON a user sent (a sidecar, an upload's metadata field), parsed only once its nesting is known to be shallow.

Python's json module recurses once per nested array or object: a few kilobytes of brackets raise RecursionError
inside it, and code that walks the result recurses again. `loads_bounded` measures the depth first, without
recursion, and refuses deep text with a DatasetError naming where it came from.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from .recording import DatasetError

MAX_JSON_DEPTH = 64  # nested arrays and objects; a sidecar needs four or five
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # one JSON string, escapes included


def json_depth(text: str) -> int:
    """How deep arrays and objects nest in JSON text (strings skipped), counted without recursion."""
    bare = np.frombuffer(_STRING.sub("", text).encode("utf-8", "replace"), dtype=np.uint8)
    step = np.isin(bare, (ord("["), ord("{"))).astype(np.int64) - np.isin(bare, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def check_depth(text: str, label: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """DatasetError when JSON text nests deeper than `max_depth`: call it before json.loads on a user's text."""
    depth = json_depth(text)
    if depth > max_depth:
        raise DatasetError(
            f"{label}: JSON nested {depth} levels deep; the limit is {max_depth} levels (a sidecar needs a few)"
        )


def loads_bounded(text: str | bytes, label: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads, refusing text nested deeper than `max_depth` (DatasetError) before parsing it; invalid JSON
    is a DatasetError naming its line and column."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise DatasetError(f"{label}: not UTF-8 text; save it as UTF-8 JSON") from None
    check_depth(text, label, max_depth)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{label}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
