"""MuJoCo `<dcmotor>` with cogging: a torque A·sin(Np·q + φ) beside the motor's (Np held fixed)."""

from __future__ import annotations

from .mujoco_dcmotor import BASE, COGGING_AMPLITUDE, COGGING_PERIODS, COGGING_PHASE, MujocoDCMotor

COMPONENT = MujocoDCMotor(
    "mujoco_dcmotor_cogging",
    "drive",
    943,
    "cogging: MuJoCo <dcmotor> with A·sin(Np·q + φ) added to its torque.",
    params=(*BASE, COGGING_AMPLITUDE.name, COGGING_PERIODS.name, COGGING_PHASE.name),
)
