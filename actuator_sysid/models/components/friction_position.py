"""Coulomb friction that changes along the joint's stroke: `friction` at the joint's lower limit,
`friction_upper` at its upper limit, linear between (a linkage or a cable whose preload changes with the angle).

A whole-robot fit holds it (fitting/robot.py's decoupled kernel and the coupled MuJoCo C rollout set MuJoCo's
frictionloss from the angle each physics step). No consumer holds a position-dependent friction: Isaac Lab, Newton
and MuJoCo get the friction at mid-stroke, the mean of the two, with a finding that says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .base import Component, Model, Note
from .friction import FRICTION

FRICTION_UPPER = replace(  # friction's units, range and plant rule: the same friction at the other end
    FRICTION,
    name="friction_upper",
    newton="",
    doc="Coulomb friction at the joint's upper limit; friction is then the one at its lower limit, linear between.",
)


def mid_stroke(lower: float, upper: float) -> float:
    """The one Coulomb friction a consumer gets of one linear along the stroke: mid-stroke, the mean of the two
    ends [N·m]."""
    return (float(lower) + float(upper)) / 2.0


def mean_friction(m: Model) -> float | None:
    """mid_stroke of a model's two frictions; None where it states either not."""
    lo, hi = m.value(FRICTION.name), m.value(FRICTION_UPPER.name)
    return None if lo is None or hi is None else mid_stroke(lo, hi)


class PositionFriction(Component):
    """Overrides the Coulomb term's consumer value with the mid-stroke one; each consumer's finding says so."""

    def newton_joint(self, m: Model, angular: bool) -> dict[str, float]:
        mean = mean_friction(m)
        return {} if mean is None else {FRICTION.newton_attr: mean}

    def mjcf_joint(self, m: Model) -> dict[str, float]:
        mean = mean_friction(m)
        return {} if mean is None else {"frictionloss": mean}

    def isaaclab_values(self, values: dict[str, Any], m: Model) -> dict[str, Any]:
        mean = mean_friction(m)
        return values if mean is None else {**values, FRICTION.name: mean}

    def notes(self, consumer: str, m: Model) -> list[Note]:
        mean, lo, hi = mean_friction(m), m.value(FRICTION.name), m.value(FRICTION_UPPER.name)
        if mean is None or lo is None or hi is None or lo == hi:
            return []
        field = {"isaaclab": "friction", "newton": "newton:friction", "mjcf": "frictionloss"}[consumer]
        return [
            (
                "friction_position",
                "warning",
                f"{field} holds one Coulomb friction: the mid-stroke {mean:.4g} N·m of the fitted {lo:.4g} "
                f"(lower limit) to {hi:.4g} N·m (upper limit)",
            )
        ]


COMPONENT = PositionFriction(
    "friction_position",
    "joint",
    180,
    "Coulomb friction that changes linearly along the stroke (a whole-robot fit's term).",
    defines=(FRICTION_UPPER,),
    companions={FRICTION_UPPER.name: (FRICTION.name, FRICTION_UPPER.name)},
    newton_doc="NewtonJointAPI friction = the mid-stroke friction (a finding)",
    robot_only=True,
)
