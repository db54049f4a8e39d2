"""MuJoCo `<dcmotor>` with LuGre friction: a bristle state whose stiffness and damping resist motion."""

from __future__ import annotations

from .mujoco_dcmotor import (
    BASE,
    LUGRE_COULOMB,
    LUGRE_DAMPING,
    LUGRE_STATIC,
    LUGRE_STIFFNESS,
    LUGRE_STRIBECK_VELOCITY,
    MujocoDCMotor,
)

COMPONENT = MujocoDCMotor(
    "mujoco_dcmotor_lugre",
    "drive",
    941,
    "LuGre friction: MuJoCo <dcmotor> with a bristle state (σ0, σ1, F_C, F_S, v_S).",
    params=(
        *BASE,
        LUGRE_STIFFNESS.name,
        LUGRE_DAMPING.name,
        LUGRE_COULOMB.name,
        LUGRE_STATIC.name,
        LUGRE_STRIBECK_VELOCITY.name,
    ),
)
