"""The parameter registry: every fitted quantity described once, read by kernels, search, reports and exports.

Names are Isaac Lab 3.0 `ActuatorBaseCfg` field names where Isaac Lab has one; units are SI.
The position of a parameter in `PARAMS` is its column in the rollout kernel's parameter array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    """One fitted quantity: how it is named, measured, bounded and searched."""

    name: str  # Isaac Lab field name (or ours where Isaac Lab has none)
    unit: str
    lower: float
    upper: float
    scale: str  # "log" or "linear": how the search moves through [lower, upper]
    neutral: float  # value that switches the term off, used when a family does not include it
    newton: str  # Newton attribute the exporter writes
    doc: str
    integer: bool = False

    def clip(self, value: float) -> float:
        """Keep a value inside the registry bounds."""
        return min(max(value, self.lower), self.upper)


TABLE_KNOTS = 5
"""Knots of the position-dependent torque-limit table (RemotizedPD, Newton ClampingPositionBased)."""

PARAMS: tuple[Param, ...] = (
    Param("stiffness", "N·m/rad", 1e-2, 1e4, "log", 0.0, "newton:kp",
          "PD proportional gain Kp acting on q_des − q."),
    Param("damping", "N·m·s/rad", 1e-4, 1e2, "log", 0.0, "newton:kd",
          "PD derivative gain Kd acting on qd_des − qd."),
    Param("saturation_effort", "N·m", 1e-2, 1e3, "log", math.inf, "newton:saturationEffort",
          "DC-motor stall effort: the torque–speed line's intercept at zero velocity."),
    Param("actuator_velocity_limit", "rad/s", 1e-1, 1e3, "log", math.inf, "newton:velocityLimit",
          "DC-motor no-load speed: where the torque–speed line reaches zero torque."),
    Param("actuator_effort_limit", "N·m", 1e-2, 1e3, "log", math.inf, "newton:maxEffort",
          "Rated (continuous) effort: the box clip of the model output (newton:maxMotorEffort in a DC clamp)."),
    Param("armature", "kg·m²", 1e-6, 1e1, "log", 0.0, "newton:armature",
          "Reflected rotor inertia added to the joint's inertia."),
    Param("friction", "N·m", 1e-5, 1e2, "log", 0.0, "newton:friction",
          "Coulomb (dry) friction effort, applied as a stopping constraint as MuJoCo's frictionloss; "
          "with PhysX-style friction, the static (breakaway) effort."),
    Param("dynamic_friction", "N·m", 1e-5, 1e2, "log", 0.0, "physxJoint:dynamicFriction",
          "PhysX-style dynamic friction effort opposing motion once the joint slips (Newton ignores it)."),
    Param("viscous_friction", "N·m·s/rad", 1e-5, 1e2, "log", 0.0, "newton:damping",
          "Passive viscous joint damping, integrated implicitly (the USD attribute is per degree)."),
    # BAM's richer friction budget (docs/prior-art.md, M2–M6): the stopping constraint's bound becomes
    # friction + stribeck_friction·s + (load_friction + load_friction_stribeck·s)·|τ_m − τ_e|,
    # s = exp(−|qd / stribeck_velocity|^stribeck_exponent), with motor and external gains apart (M5) and
    # quadratic terms when motor and load oppose (M6); Isaac Lab and Newton have no such terms
    Param("stribeck_friction", "N·m", 1e-5, 1e2, "log", 0.0, "",
          "Stribeck peak above Coulomb friction at standstill (BAM Kcs), fading with speed as s(qd)."),
    Param("stribeck_velocity", "rad/s", 1e-3, 1e2, "log", 1.0, "",
          "Characteristic speed of the Stribeck fade (BAM q̇_s): s = exp(−|qd / q̇_s|^α)."),
    Param("stribeck_exponent", "1", 0.5, 10.0, "linear", 2.0, "",
          "Shape α of the Stribeck fade (BAM alpha; 2 is Gaussian, 1 exponential)."),
    Param("load_friction", "N·m/N·m", 1e-5, 1.0, "log", 0.0, "",
          "Load-dependent friction gain (BAM Kl): adds Kl·|τ_m − τ_e| of gearbox load to the friction bound."),
    Param("load_friction_stribeck", "N·m/N·m", 1e-5, 1.0, "log", 0.0, "",
          "Stribeck part of the load-dependent friction (BAM M4 Kls): adds Kls·s·|τ_m − τ_e| near standstill."),
    Param("load_friction_external", "N·m/N·m", 1e-5, 1.0, "log", 0.0, "",
          "BAM M5 external-side load gain Kle: the load term becomes |Kle·τ_e − Kl·τ_m| (Kl the motor side)."),
    Param("load_friction_external_stribeck", "N·m/N·m", 1e-5, 1.0, "log", 0.0, "",
          "BAM M5 external-side Stribeck load gain: the Stribeck load term becomes s·|Kles·τ_e − Kls·τ_m|."),
    Param("load_friction_quadratic_motor", "1/(N·m)", 1e-6, 1.0, "log", 0.0, "",
          "BAM M6: adds s·Kqm·τ_m² while motor and load oppose and the load is the larger torque."),
    Param("load_friction_quadratic_external", "1/(N·m)", 1e-6, 1.0, "log", 0.0, "",
          "BAM M6: adds s·Kqe·τ_e² while motor and load oppose and the motor is the larger torque."),
    Param("delay", "physics steps", 0, 20, "linear", 0.0, "newton:delaySteps",
          "Command delay counted in physics steps (Isaac Lab min_delay = max_delay).", integer=True),
    Param("ki", "N·m/(rad·s)", 1e-3, 1e4, "log", 0.0, "newton:ki",
          "PID integral gain (Newton DrivePID); the integral is updated before use."),
    Param("integral_max", "rad·s", 1e-4, 1e2, "log", math.inf, "newton:integralMax",
          "Clamp of the PID integral state (Newton DrivePID)."),
    Param("encoder_offset", "rad", -0.3, 0.3, "linear", 0.0, "",
          "Constant encoder bias: measured q = true q + offset; the controller sees the measured q."),
    *(Param(f"lookup_effort_{k}", "N·m", 1e-2, 1e3, "log", math.inf, f"newton:lookupEfforts[{k}]",
            f"Torque limit at knot {k} of the position table (Isaac Lab joint_parameter_lookup column 2).")
      for k in range(TABLE_KNOTS)),
)

INDEX: dict[str, int] = {p.name: i for i, p in enumerate(PARAMS)}
BY_NAME: dict[str, Param] = {p.name: p for p in PARAMS}
N_PARAMS = len(PARAMS)


def neutral_vector() -> list[float]:
    """Kernel parameter row with every term switched off."""
    return [p.neutral for p in PARAMS]


def get(name: str) -> Param:
    """Registry lookup with a helpful error."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown parameter {name!r}; known: {sorted(BY_NAME)}") from None
