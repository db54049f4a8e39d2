"""Newton's DrivePID (§C.2): the integral of the error, updated before use and clamped to ±integral_max."""

from __future__ import annotations

from typing import Any

from .base import Component, Model, Param
from .pd import DAMPING, STIFFNESS

KI = Param(
    "ki",
    "N·m/(rad·s)",
    1e-3,
    1e4,
    "log",
    0.0,
    "newton:ki",
    "PID integral gain (Newton DrivePID); the integral is updated before use.",
)
INTEGRAL_MAX = Param(
    "integral_max",
    "rad·s",
    1e-4,
    1e2,
    "log",
    float("inf"),
    "newton:integralMax",
    "Clamp of the PID integral state (Newton DrivePID).",
)


class PID(Component):
    """NewtonPIDControlAPI: kp, kd, ki always authored, integralMax when finite."""

    def newton_actuator(self, m: Model) -> tuple[list[str], dict[str, Any]]:
        attrs: dict[str, Any] = {p.newton_attr: m.value(p.name) or 0.0 for p in (STIFFNESS, DAMPING, KI)}
        if (integral_max := m.value(INTEGRAL_MAX.name)) is not None:
            attrs[INTEGRAL_MAX.newton_attr] = integral_max
        return [self.newton_api], attrs


COMPONENT = PID(
    "pid",
    "drive",
    130,
    "PID law with integral clamp (Newton DrivePID).",
    defines=(KI, INTEGRAL_MAX),
    params=(STIFFNESS.name, DAMPING.name, KI.name, INTEGRAL_MAX.name),
    flag=8,
    isaaclab_fields=("stiffness", "damping", "ki", "integral_max", "physics_dt"),
    newton_api="NewtonPIDControlAPI",
)
