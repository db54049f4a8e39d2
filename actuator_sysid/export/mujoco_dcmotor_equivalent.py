"""MuJoCo's `<dcmotor>` families as the kernel's DC-motor model, for the consumers that have no `<dcmotor>`.

In position mode without extensions a `<dcmotor>` applies τ = clip(kp·(q_des − q) − kd·ω, ±K·vmax/R − (K²/R)·ω),
then ±τ_max: exactly Isaac Lab's DCMotor (docs/consumer-semantics.md §A.4) and Newton's DrivePD + ClampingDCMotor
(§C.2) with saturation_effort = K·vmax/R, actuator_velocity_limit = vmax/K and no effort limit (the families leave
MuJoCo's saturation off). The setpoint slew becomes the kernel's goal_rate_limit, its goal starting at the first
target as MuJoCo's slew state does. LuGre, cogging and inductance have no consumer counterpart: refused, naming
the base family.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..fitting.result import ModelFit
from ..models.families import Family, get_family, is_mujoco_dcmotor
from .selection import ChosenModel, ExportError

BASE = "mujoco_dcmotor"
_REFUSED = {
    "mujoco_dcmotor_lugre": "LuGre friction (a bristle state that stiffens and damps the joint)",
    "mujoco_dcmotor_cogging": "cogging (A·sin(Np·q + φ) beside the motor's torque)",
    "mujoco_dcmotor_inductance": "an electrical time constant (the current lags the voltage)",
}
_TO_KERNEL = {  # the <dcmotor> parameters each kernel value is made of, for unidentified marks
    "saturation_effort": ("dcmotor_motor_constant", "dcmotor_resistance", "dcmotor_voltage_limit"),
    "actuator_velocity_limit": ("dcmotor_motor_constant", "dcmotor_voltage_limit"),
    "goal_rate_limit": ("dcmotor_slew_rate",),
}


def note(family: Family, params: dict) -> tuple[str, str, str]:
    """What the export states of a `<dcmotor>` written as the kernel model: the mapping, and the inputs MuJoCo's
    position mode does not read."""
    _, values = kernel_params(params)
    mapped = ", ".join(f"{k} = {v:.6g}" for k, v in values.items() if k not in ("stiffness", "damping"))
    return (
        "mujoco_dcmotor",
        "info",
        f"{family.name} is MuJoCo's <dcmotor> in position mode written as the DC-motor model it equals ("
        f"{mapped or 'no voltage limit: a plain PD'}; saturation_effort = K·vmax/R, actuator_velocity_limit = "
        "vmax/K). MuJoCo's controller reads neither qd_des nor tau_ff: send 0 for both to drive it as fitted",
    )


def check(family: Family, consumer: str) -> None:
    """Refuse a `<dcmotor>` extension the consumer cannot run, with the reason and the nearest family."""
    name = family.name
    if name in _REFUSED:
        what = _REFUSED[name]
        raise ExportError(
            f"family {name!r} adds {what}, which {consumer} has no class for: export the base family "
            f"{BASE!r} (--family JOINT={BASE}, fitted beside it) or use the mjcf.xml export"
        )


def kernel_params(params: dict) -> tuple[str, dict[str, float]]:
    """The kernel family and its values that a `<dcmotor>` fit equals: dcmotor with the mapped envelope, or
    ideal_pd when the voltage is unlimited (then τ = τ*: the motor is invisible)."""
    kp, kd = float(params["stiffness"]), float(params["damping"])
    k, r = float(params["dcmotor_motor_constant"]), float(params["dcmotor_resistance"])
    vmax = float(params.get("dcmotor_voltage_limit", math.inf))
    if not (k > 0 and r > 0):
        raise ExportError(f"a <dcmotor> fit needs K > 0 and R > 0, got K = {k!r}, R = {r!r}")
    out = {"stiffness": kp, "damping": kd}
    slew = float(params.get("dcmotor_slew_rate", math.inf))
    if math.isfinite(slew) and slew > 0:
        out["goal_rate_limit"] = slew
    if not (math.isfinite(vmax) and vmax > 0):
        return "ideal_pd", out
    return "dcmotor", out | {"saturation_effort": k * vmax / r, "actuator_velocity_limit": vmax / k}


def as_kernel_fit(family: Family, model: ModelFit, consumer: str) -> tuple[Family, ModelFit]:
    """The kernel family and fit a `<dcmotor>` fit equals (refused where the consumer cannot run it)."""
    check(family, consumer)
    name, values = kernel_params(dict(model.params))
    terms = ("goal_rate_limit",) if "goal_rate_limit" in values else ()
    kernel = get_family(name).with_terms(terms)
    marks = {
        k: dict(next(u for p, u in (model.unidentified or {}).items() if p in made_of))
        for k, made_of in _TO_KERNEL.items()
        if k in values and any(p in made_of for p in (model.unidentified or {}))
    }
    return kernel, replace(
        model, family=kernel.name, params=values, unidentified=marks or None, joint_terms=list(terms)
    )


def as_kernel_model(m: ChosenModel, consumer: str) -> ChosenModel:
    """A chosen `<dcmotor>` model as the kernel model it equals; any other model unchanged."""
    if not is_mujoco_dcmotor(m.family):
        return m
    check(m.family, consumer)
    name, values = kernel_params(dict(m.params))
    terms = ("goal_rate_limit",) if "goal_rate_limit" in values else ()
    return ChosenModel(m.joint, get_family(name).with_terms(terms), values, None)
