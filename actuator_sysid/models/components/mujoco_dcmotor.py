"""MuJoCo's own `<dcmotor>` in position mode: a voltage-limited motor whose PD closes on the setpoint.

Its plant is MuJoCo itself (models/mujoco_dcmotor.py), never the fused kernel: the component has no flag bit.
The variants (LuGre friction, setpoint slew, cogging, electrical time constant) are drives of their own modules
that add their parameters (docs/consumer-semantics.md "MuJoCo `<dcmotor>`").
"""

from __future__ import annotations

import math

from .base import Component, Model, Note, Param
from .pd import DAMPING, STIFFNESS

MOTOR_CONSTANT = Param(
    "dcmotor_motor_constant",
    "N·m/A",
    1e-3,
    10.0,
    "log",
    1.0,
    "",
    "MuJoCo dcmotor motorconst K (torque and back-EMF constant, √(Kt·Ke)).",
)
RESISTANCE = Param(
    "dcmotor_resistance", "Ω", 1e-2, 1e3, "log", 1.0, "", "MuJoCo dcmotor winding resistance R."
)
VOLTAGE_LIMIT = Param(
    "dcmotor_voltage_limit",
    "V",
    0.1,
    1e3,
    "log",
    math.inf,
    "",
    "MuJoCo dcmotor controller Vmax: the drive voltage is clipped to ±Vmax (the supply).",
)
SLEW_RATE = Param(
    "dcmotor_slew_rate",
    "rad/s",
    1e-2,
    1e3,
    "log",
    math.inf,
    "",
    "MuJoCo dcmotor controller slewmax: the setpoint moves at most this fast.",
)
TIME_CONSTANT = Param(
    "dcmotor_time_constant",
    "s",
    1e-5,
    0.1,
    "log",
    0.0,
    "",
    "MuJoCo dcmotor electrical time constant L/R (inductance): the current lags the voltage.",
)
LUGRE_STIFFNESS = Param(
    "dcmotor_lugre_stiffness", "N·m/rad", 1.0, 1e5, "log", 0.0, "", "LuGre bristle stiffness σ0."
)
LUGRE_DAMPING = Param(
    "dcmotor_lugre_damping", "N·m·s/rad", 1e-4, 1e2, "log", 0.0, "", "LuGre bristle damping σ1."
)
LUGRE_COULOMB = Param(
    "dcmotor_lugre_coulomb", "N·m", 1e-5, 10.0, "log", 0.0, "", "LuGre Coulomb friction F_C."
)
LUGRE_STATIC = Param(
    "dcmotor_lugre_static", "N·m", 1e-5, 10.0, "log", 0.0, "", "LuGre static (breakaway) friction F_S."
)
LUGRE_STRIBECK_VELOCITY = Param(
    "dcmotor_lugre_stribeck_velocity",
    "rad/s",
    1e-3,
    10.0,
    "log",
    0.0,
    "",
    "LuGre Stribeck velocity v_S: F_S fades to F_C as exp(−(v/v_S)²).",
)
COGGING_AMPLITUDE = Param(
    "dcmotor_cogging_amplitude", "N·m", 1e-5, 10.0, "log", 0.0, "", "Cogging torque amplitude A."
)
COGGING_PERIODS = Param(
    "dcmotor_cogging_periods",
    "1/rad",
    1.0,
    200.0,
    "linear",
    0.0,
    "",
    "Cogging periods per radian Np (A·sin(Np·q + φ)): a datasheet value, held fixed by the fit.",
    integer=True,
)
COGGING_PHASE = Param(
    "dcmotor_cogging_phase", "rad", -math.pi, math.pi, "linear", 0.0, "", "Cogging phase φ."
)

BASE = (STIFFNESS.name, DAMPING.name, MOTOR_CONSTANT.name, RESISTANCE.name, VOLTAGE_LIMIT.name)
"""The parameters every `<dcmotor>` family fits: the controller's PD, the motor, the supply."""


class MujocoDCMotor(Component):
    """A drive only MuJoCo runs: Isaac Lab and Newton hold no `<dcmotor>`, so their exports say so."""

    def notes(self, consumer: str, m: Model) -> list[Note]:
        if consumer == "mjcf":
            return []
        return [
            (
                "mujoco_dcmotor",
                "warning",
                f"{m.family.name} is MuJoCo's own <dcmotor> ({self.doc}): this consumer has no class for it; "
                "use the mjcf.xml export, or fit dcmotor beside it",
            )
        ]


COMPONENT = MujocoDCMotor(
    "mujoco_dcmotor",
    "drive",
    940,
    "MuJoCo <dcmotor>, position mode: PD torque request, voltage limit and back-EMF.",
    defines=(
        MOTOR_CONSTANT,
        RESISTANCE,
        VOLTAGE_LIMIT,
        SLEW_RATE,
        TIME_CONSTANT,
        LUGRE_STIFFNESS,
        LUGRE_DAMPING,
        LUGRE_COULOMB,
        LUGRE_STATIC,
        LUGRE_STRIBECK_VELOCITY,
        COGGING_AMPLITUDE,
        COGGING_PERIODS,
        COGGING_PHASE,
    ),
    params=BASE,
)
