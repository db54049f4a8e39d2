"""Coulomb friction that changes along the joint's stroke: `friction` at the joint's lower limit,
`friction_upper` at its upper limit, linear between (a linkage or a cable whose preload changes with the angle).

A whole-robot fit holds it (fitting/robot/'s decoupled kernel and the coupled MuJoCo C rollout set MuJoCo's
frictionloss from the angle each physics step); it is robot_only, so no per-joint family takes it. No consumer
holds a position-dependent friction: the whole-robot exports (export/robot_common.py joint_models, fitting/robot/
isaaclab_dict) give Isaac Lab, Newton and MuJoCo the friction at mid-stroke (RobotGroup.consumer_friction), with
a note that says so.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Component
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


COMPONENT = Component(
    "friction_position",
    "joint",
    180,
    "Coulomb friction that changes linearly along the stroke (a whole-robot fit's term).",
    defines=(FRICTION_UPPER,),
    companions={FRICTION_UPPER.name: (FRICTION.name, FRICTION_UPPER.name)},
    newton_doc="NewtonJointAPI friction = the mid-stroke friction (the export notes it)",
    robot_only=True,
)
