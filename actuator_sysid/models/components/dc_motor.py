"""The four-quadrant DC-motor clamp (§A.4 Isaac Lab DCMotor, §C.2 Newton ClampingDCMotor).

`window` is the envelope once, array-generic (numpy for plots, torch for the actuator networks); the Warp kernel
keeps its own fused copy (models/kernels.py `dc_motor_clip`) and the oracle its own (models/oracle.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import Component, Model, Param, PlantBound

SATURATION = Param(
    "saturation_effort",
    "N·m",
    1e-2,
    1e3,
    "log",
    math.inf,
    "newton:saturationEffort",
    "DC-motor stall effort: the torque–speed line's intercept at zero velocity.",
    plant=PlantBound(20.0, ("effort",), decades=4.5),
)
VELOCITY_LIMIT = Param(
    "actuator_velocity_limit",
    "rad/s",
    1e-1,
    1e3,
    "log",
    math.inf,
    "newton:velocityLimit",
    "DC-motor no-load speed: where the torque–speed line reaches zero torque.",
    plant=PlantBound(100.0, ("max_speed",), lower=0.05),
)
EFFORT_LIMIT = Param(
    "actuator_effort_limit",
    "N·m",
    1e-2,
    1e3,
    "log",
    math.inf,
    "newton:maxEffort",
    "Rated (continuous) effort: the box clip of the model output (newton:maxMotorEffort in a DC clamp).",
    plant=PlantBound(20.0, ("effort",), decades=4.5),
)
# the clamp's attributes by parameter: Param.newton, except that inside NewtonDCMotorClampingAPI the rated effort
# is `newton:maxMotorEffort` (§C.3; `newton:maxEffort` is the box clamp's)
NEWTON_NAMES = {
    SATURATION.name: SATURATION.newton_attr,
    VELOCITY_LIMIT.name: VELOCITY_LIMIT.newton_attr,
    EFFORT_LIMIT.name: "maxMotorEffort",
}


def window(qd: Any, sat: Any, vlim: Any, elim: Any, xp: Any = np) -> tuple[Any, Any]:
    """(min, max) effort at velocities qd: the torque–speed lines, the rated effort, velocity clipped at the corner
    (`xp` is numpy or torch; with torch, give the limits as tensors)."""
    corner = vlim * (1 + elim / sat)
    v = xp.maximum(xp.minimum(qd, corner), -corner)
    return xp.maximum(sat * (-1 - v / vlim), -elim), xp.minimum(sat * (1 - v / vlim), elim)


class DCMotor(Component):
    """NewtonDCMotorClampingAPI, always applied, with whichever of its three attributes are finite."""

    def envelope(self, v: np.ndarray, params: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        return window(
            v, params[SATURATION.name], params[VELOCITY_LIMIT.name], params.get(EFFORT_LIMIT.name, np.inf)
        )

    def newton_actuator(self, m: Model) -> tuple[list[str], dict[str, Any]]:
        return [self.newton_api], {
            attr: v for name, attr in NEWTON_NAMES.items() if (v := m.value(name)) is not None
        }


COMPONENT = DCMotor(
    "dc_motor",
    "clamp",
    20,
    "Four-quadrant DC-motor torque–speed envelope.",
    defines=(SATURATION, VELOCITY_LIMIT, EFFORT_LIMIT),
    flag=2,
    isaaclab_fields=(SATURATION.name, VELOCITY_LIMIT.name, EFFORT_LIMIT.name),
    newton_api="NewtonDCMotorClampingAPI",
)
