"""The search space of one family: registry bounds and scales, mapped to the unit cube and back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..models import parameters
from ..models.families import Family


@dataclass(frozen=True)
class SearchSpace:
    """Free parameters of a family with their bounds; u ∈ [0, 1]^d is the search coordinate."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    log: np.ndarray  # bool mask
    integer: np.ndarray  # bool mask: whole numbers (delays), searched on a grid

    @property
    def steps(self) -> np.ndarray:
        """Unit-cube grid step per dimension: 0 for continuous, 1/(upper − lower) for integers."""
        return np.where(self.integer, 1.0 / np.maximum(self.upper - self.lower, 1.0), 0.0)

    @classmethod
    def for_family(cls, family: Family, fixed: dict[str, float] | None = None) -> SearchSpace:
        """Every family parameter not fixed by the caller is free, with registry bounds."""
        names = tuple(n for n in family.params if n not in (fixed or {}))
        ps = [parameters.get(n) for n in names]
        return cls(
            names,
            np.array([p.lower for p in ps], float),
            np.array([p.upper for p in ps], float),
            np.array([p.scale == "log" for p in ps], bool),
            np.array([p.integer for p in ps], bool),
        )

    @property
    def dim(self) -> int:
        return len(self.names)

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        """Natural units → unit cube (clipped to the bounds)."""
        x = np.clip(np.asarray(x, float), self.lower, self.upper)
        lin = (x - self.lower) / (self.upper - self.lower)
        with np.errstate(divide="ignore", invalid="ignore"):  # the log branch is discarded for linear params
            lg = np.log(x / self.lower) / np.log(self.upper / self.lower)
        return np.where(self.log, lg, lin)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """Unit cube → natural units; works on (..., d) arrays."""
        u = np.clip(np.asarray(u, float), 0.0, 1.0)
        lin = self.lower + u * (self.upper - self.lower)
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = self.lower * (self.upper / self.lower) ** u
        return np.where(self.integer, np.round(lin), np.where(self.log, lg, lin))

    def dx_du(self, x: np.ndarray) -> np.ndarray:
        """The derivative of natural units by the unit-cube coordinate at x (the chain rule for a Jacobian)."""
        x = np.asarray(x, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = x * np.log(self.upper / self.lower)
        return np.where(self.log, lg, self.upper - self.lower)

    def as_dict(self, x: np.ndarray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, x, strict=True)}


def _quantity(of: str, scales: Mapping[str, float]) -> float:
    """A plant quantity by name, or a ratio of two ("effort/speed")."""
    top, _, bottom = of.partition("/")
    return scales[top] / scales[bottom] if bottom else scales[top]


def plant_range(name: str, scales: Mapping[str, float]) -> tuple[float, float]:
    """A registry parameter's (lower, upper) on one plant: its `plant` rule on the plant's scales (a robot
    group's effort, speeds, acceleration and inertia), so a heavy arm's friction or a light finger's armature is
    inside it."""
    p = parameters.get(name)
    if p.plant is None:
        raise KeyError(f"parameter {name!r} has no plant-scaled range (models/components: Param.plant)")
    upper = p.plant.multiple * max(_quantity(q, scales) for q in p.plant.of)
    lower = (
        p.plant.lower * upper / p.plant.multiple if p.plant.lower is not None else upper / 10**p.plant.decades
    )
    return lower, upper
