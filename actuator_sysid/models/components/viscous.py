"""Passive viscous joint damping, integrated implicitly (Newton `newton:damping` per degree, MJCF `damping`)."""

from __future__ import annotations

import math

from .base import Component, Model, Param, PlantBound

VISCOUS = Param(
    "viscous_friction",
    "N·m·s/rad",
    1e-5,
    1e2,
    "log",
    0.0,
    "newton:damping",
    "Passive viscous joint damping, integrated implicitly (the USD attribute is per degree).",
    plant=PlantBound(10.0, ("effort/speed",), decades=6.0),
)
RAD_PER_DEG = math.pi / 180.0  # Newton's importer multiplies an angular joint's damping by 180/π (§C.4)


class Viscous(Component):
    def newton_joint(self, m: Model, angular: bool) -> dict[str, float]:
        v = m.value(VISCOUS.name)
        return {} if v is None else {VISCOUS.newton_attr: v * (RAD_PER_DEG if angular else 1.0)}

    def mjcf_joint(self, m: Model) -> dict[str, float]:
        return {"damping": v} if (v := m.value(VISCOUS.name)) is not None else {}


COMPONENT = Viscous(
    "viscous",
    "joint",
    70,
    "Viscous joint damping.",
    defines=(VISCOUS,),
    isaaclab_fields=("viscous_friction",),
)
