"""MuJoCo `<dcmotor>` with a setpoint slew limit: the controller's setpoint moves at most slewmax rad/s."""

from __future__ import annotations

from .mujoco_dcmotor import BASE, SLEW_RATE, MujocoDCMotor

COMPONENT = MujocoDCMotor(
    "mujoco_dcmotor_slew",
    "drive",
    942,
    "setpoint slew: MuJoCo <dcmotor> whose setpoint moves at most slewmax rad/s.",
    params=(*BASE, SLEW_RATE.name),
)
