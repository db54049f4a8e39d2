"""PhysX-style friction: stick below the static `friction`, slide at `dynamic_friction` (Newton ignores it, §D)."""

from __future__ import annotations

from .base import Component, Model, Note, Param

DYNAMIC = Param(
    "dynamic_friction",
    "N·m",
    1e-5,
    1e2,
    "log",
    0.0,
    "physxJoint:dynamicFriction",
    "PhysX-style dynamic friction effort opposing motion once the joint slips (Newton ignores it).",
)


class PhysXFriction(Component):
    def notes(self, consumer: str, m: Model) -> list[Note]:
        if consumer == "newton":
            return [
                (
                    "dynamic_friction",
                    "warning",
                    "Newton ignores dynamic friction (§D): joint_friction is the "
                    f"static value {m.value('friction')} N·m applied as Coulomb friction",
                )
            ]
        if consumer == "mjcf":
            return [
                (
                    "dynamic_friction",
                    "warning",
                    "frictionloss is Coulomb friction at the static value; dynamic friction is dropped",
                )
            ]
        return []


COMPONENT = PhysXFriction(
    "friction_physx",
    "joint",
    60,
    "Static and dynamic friction (PhysX).",
    defines=(DYNAMIC,),
    flag=16,
    switch=DYNAMIC.name,
    isaaclab_fields=("dynamic_friction",),
    newton_doc="— (Newton ignores it: a finding)",
)
