"""Armature: reflected rotor inertia added to the joint's (Newton `newton:armature`, MJCF `armature`)."""

from __future__ import annotations

from .base import Component, Model, Param, PlantBound

ARMATURE = Param(
    "armature",
    "kg·m²",
    1e-6,
    1e1,
    "log",
    0.0,
    "newton:armature",
    "Reflected rotor inertia added to the joint's inertia.",
    plant=PlantBound(10.0, ("effort/acceleration", "inertia"), decades=6.0),
)


class Armature(Component):
    def mjcf_joint(self, m: Model) -> dict[str, float]:
        return {"armature": v} if (v := m.value(ARMATURE.name)) is not None else {}


COMPONENT = Armature(
    "armature", "joint", 40, "Reflected rotor inertia.", defines=(ARMATURE,), isaaclab_fields=("armature",)
)
