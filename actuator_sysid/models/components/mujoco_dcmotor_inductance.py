"""MuJoCo `<dcmotor>` with inductance: the current follows the voltage with the time constant L/R."""

from __future__ import annotations

from .mujoco_dcmotor import BASE, TIME_CONSTANT, MujocoDCMotor

COMPONENT = MujocoDCMotor(
    "mujoco_dcmotor_inductance",
    "drive",
    944,
    "inductance: MuJoCo <dcmotor> whose current lags the voltage by L/R.",
    params=(*BASE, TIME_CONSTANT.name),
)
