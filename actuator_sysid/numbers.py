"""Numbers as the package reads them from JSON, sidecars and stored results: one test for a real value."""

from __future__ import annotations

import math
from typing import TypeGuard


def is_real(v: object) -> TypeGuard[float]:
    """Whether `v` is a finite number (an int or a float, never a bool): what a stored value must be to be read
    as a quantity rather than left out."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
