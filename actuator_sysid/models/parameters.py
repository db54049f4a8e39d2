"""The parameter registry: every fitted quantity described once, read by kernels, search, reports and exports.

Names are Isaac Lab 3.0 `ActuatorBaseCfg` field names where Isaac Lab has one; units are SI; `Param.newton` is
the one map of Newton attribute names. Each `Param` is declared by the component that owns it
(models/components/); the position of a parameter in `PARAMS` is its column in the rollout kernel's parameter
array.
"""

from __future__ import annotations

from .components import COMPONENTS, TABLE_KNOTS, Param

__all__ = ["BY_NAME", "INDEX", "N_PARAMS", "PARAMS", "TABLE_KNOTS", "Param", "get", "neutral_vector"]

# every component declares the parameters it owns (models/components/); their rank order is the column order
PARAMS: tuple[Param, ...] = tuple(p for c in COMPONENTS for p in c.defines)

INDEX: dict[str, int] = {p.name: i for i, p in enumerate(PARAMS)}
BY_NAME: dict[str, Param] = {p.name: p for p in PARAMS}
N_PARAMS = len(PARAMS)


def neutral_vector() -> list[float]:
    """Kernel parameter row with every term switched off."""
    return [p.neutral for p in PARAMS]


def unit(name: str) -> str:
    """A parameter's SI unit for tables and axes; "" for a name the registry does not know."""
    p = BY_NAME.get(name)
    return p.unit if p is not None else ""


def get(name: str) -> Param:
    """Registry lookup with a helpful error."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown parameter {name!r}; known: {sorted(BY_NAME)}") from None
