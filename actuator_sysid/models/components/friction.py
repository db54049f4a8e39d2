"""Coulomb (dry) friction as a stopping constraint (MuJoCo frictionloss, Newton `newton:friction`, §F)."""

from __future__ import annotations

from .base import Component, Model, Param, PlantBound

FRICTION = Param(
    "friction",
    "N·m",
    1e-5,
    1e2,
    "log",
    0.0,
    "newton:friction",
    "Coulomb (dry) friction effort, applied as a stopping constraint as MuJoCo's frictionloss; "
    "with PhysX-style friction, the static (breakaway) effort.",
    plant=PlantBound(2.0, ("effort",), decades=5.5),
)


class Coulomb(Component):
    def mjcf_joint(self, m: Model) -> dict[str, float]:
        return {"frictionloss": v} if (v := m.value(FRICTION.name)) is not None else {}


COMPONENT = Coulomb(
    "friction", "joint", 50, "Coulomb friction effort.", defines=(FRICTION,), isaaclab_fields=("friction",)
)
