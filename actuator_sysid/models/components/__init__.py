"""Actuator components, one module each (the shape of Newton's `actuators` package): drives, clamps, a delay,
joint terms. A module here defines `COMPONENT`; it is found by name, so adding one is adding its module.

`COMPONENTS` is in rank order, the order of the registry's parameter columns (models/parameters.py), of the
clamps in the kernel and of the joint terms. Families (models/families.py) are compositions of them.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import CONSUMERS, KINDS, TABLE_KNOTS, Component, Note, Param

__all__ = [
    "BY_NAME",
    "COMPONENTS",
    "CONSUMERS",
    "KINDS",
    "TABLE_KNOTS",
    "Component",
    "Note",
    "Param",
    "get",
    "of_kind",
]


def _discover() -> tuple[Component, ...]:
    """Every module's COMPONENT, checked once: unique names, ranks and flag bits, each parameter owned once."""
    found = [
        importlib.import_module(f"{__name__}.{m.name}").COMPONENT
        for m in pkgutil.iter_modules(__path__)
        if m.name != "base" and not m.name.startswith("_")
    ]
    found.sort(key=lambda c: c.rank)
    for attr in ("name", "rank"):
        values = [getattr(c, attr) for c in found]
        assert len(set(values)) == len(values), f"components share a {attr}: {values}"
    flags = [c.flag for c in found if c.flag]
    assert all(f & (f - 1) == 0 for f in flags) and len(set(flags)) == len(flags), f"flag bits: {flags}"
    owned = [p.name for c in found for p in c.defines]
    assert len(set(owned)) == len(owned), f"a parameter is defined twice: {owned}"
    return tuple(found)


COMPONENTS: tuple[Component, ...] = _discover()
BY_NAME: dict[str, Component] = {c.name: c for c in COMPONENTS}


def get(name: str) -> Component:
    """Component lookup with an error that lists the known names."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown component {name!r}; known: {sorted(BY_NAME)}") from None


def of_kind(kind: str) -> tuple[Component, ...]:
    """The components of one kind (drive, clamp, delay, joint), in rank order."""
    return tuple(c for c in COMPONENTS if c.kind == kind)
