"""mjlab 1.6 actuator cfgs from a joint fit: Python source for `EntityArticulationInfoCfg(actuators=ACTUATORS)`.

One cfg per joint, values SI. `ideal_pd` and `delayed_pd` become `IdealPdActuatorCfg`, `dcmotor` and
`dcmotor_delay` `DcMotorActuatorCfg` (the delay in mjlab's `delay_min_lag` = `delay_max_lag`, physics steps),
`implicit` `BuiltinPdActuatorCfg`, and a `mujoco_dcmotor*` family MuJoCo's own `<dcmotor>` through
`BuiltinDcMotorActuatorCfg`. Armature, Coulomb friction and viscous friction go to the cfg's `armature`,
`frictionloss` and `viscous_damping`, which mjlab writes on the joint.

mjlab's DC-motor clip (`dc_motor_clip`) is Isaac Lab's four-quadrant clip (docs/consumer-semantics.md §A.4)
term for term: the measured speed clipped at the corner speed, the window min(τs·(1 − v/vmax), τc) …
max(τs·(−1 − v/vmax), −τc). mjlab adds that `effort_limit` is also the `<motor>`'s ctrlrange and forcerange,
which the window already lies inside, and that it defaults to infinity (with a warning) where Isaac Lab takes
the USD effort limit.

mjlab 1.6 pins MuJoCo 3.11, whose `<dcmotor>` controller outputs volts, V = kp'·(u − q) − kd'·ω, where 3.17's
(the one our families fit) asks for a torque τ* = kp·(u − q) − kd·ω and serves it with V = R·τ*/K + K·ω. The
two are the same voltage, clipping included, with kp' = R·kp/K and kd' = R·kd/K − K (negative when the
back-EMF damping K²/R exceeds kd): the export writes those, and the source refuses to load on another MuJoCo.
"""

from __future__ import annotations

import math
import re

from ..fitting.result import ResultLike, as_result
from ..models.families import Family, is_mujoco_dcmotor
from .isaaclab import code_name
from .selection import ChosenModel, ExportError, choose, comment_line, physics_dt

MJLAB_VERSION = "1.6"
MUJOCO_VERSION = "3.11"  # what mjlab 1.6 pins: the <dcmotor> gains below are in its units
# our joint term → the ActuatorCfg field mjlab writes on the joint
JOINT_FIELDS = {"armature": "armature", "friction": "frictionloss", "viscous_friction": "viscous_damping"}
# (drive, clamps) → the mjlab cfg class that runs it exactly
CFG_CLASS: dict[tuple[str, tuple[str, ...]], str] = {
    ("pd", ("max_effort",)): "IdealPdActuatorCfg",
    ("pd", ("dc_motor",)): "DcMotorActuatorCfg",
    ("implicit", ("max_effort",)): "BuiltinPdActuatorCfg",
}
DCMOTOR_CLASS = "BuiltinDcMotorActuatorCfg"
# a joint term mjlab has no field for → why
_NO_TERM = {
    "dynamic_friction": "MuJoCo's frictionloss is one Coulomb value (no PhysX dynamic friction)",
    "encoder_offset": "mjlab has no encoder offset",
    "viscous_friction_negative_ratio": "MuJoCo's joint damping is the same in both directions",
    "goal_rate_limit": "mjlab has no setpoint rate limit on a PD actuator",
    "friction_upper": "MuJoCo's frictionloss does not vary with position",
}


class Code(str):
    """A field value written as code, built here from identifiers and number literals only."""


def refusal(fam: Family) -> str | None:
    """Why mjlab cannot hold this family (naming the nearest one it holds), or None when it can."""
    if fam.rich_friction:
        return (
            f"{fam.name} fits BAM's friction budget ({', '.join(fam.rich_friction)}), which no mjlab field "
            f"holds; export the {fam.approximates or 'dcmotor'} fit"
        )
    if "position_table" in fam.clamps:
        return f"{fam.name}'s position-dependent torque table has no mjlab cfg; export the delayed_pd fit"
    if fam.drive == "pid":
        return "mjlab has no PID actuator with an integral clamp; export the delayed_pd fit"
    extra = [t for t in fam.joint_terms if t not in JOINT_FIELDS]
    if extra:
        why = "; ".join(_NO_TERM.get(t, f"mjlab has no field for {t}") for t in extra)
        return f"{fam.name} is fitted with {', '.join(extra)}: {why}; fit {fam.name} without it"
    if is_mujoco_dcmotor(fam) or (fam.drive, fam.clamps) in CFG_CLASS:
        return None
    return f"mjlab has no cfg for {fam.name}; export the ideal_pd or dcmotor fit"


def expresses(fam: Family) -> bool:
    """Whether mjlab runs this family exactly."""
    return refusal(fam) is None


def _required(m: ChosenModel, name: str) -> float:
    v = m.value(name)
    if v is None:
        raise ExportError(
            f"joint {m.joint!r}: the {m.family.name} fit has no finite {name}, which mjlab requires "
            "(give it with --set)"
        )
    return v


def _finite(m: ChosenModel, name: str) -> dict[str, float]:
    """{name: value} for a finite fitted value, else nothing (the cfg's default applies)."""
    v = m.value(name)
    return {} if v is None or not math.isfinite(v) else {name: v}


def dcmotor_gains(kp: float, kd: float, k: float, r: float) -> tuple[float, float]:
    """MuJoCo 3.17's torque-request gains as MuJoCo 3.11's voltage gains: kp' = R·kp/K, kd' = R·kd/K − K."""
    return r * kp / k, r * kd / k - k


def _dcmotor_fields(m: ChosenModel) -> dict[str, object]:
    """BuiltinDcMotorActuatorCfg fields of a mujoco_dcmotor* fit, in position mode."""
    k, r = _required(m, "dcmotor_motor_constant"), _required(m, "dcmotor_resistance")
    if k <= 0 or r <= 0:
        raise ExportError(
            f"joint {m.joint!r}: the motor constant and resistance must be > 0 (K = {k}, R = {r})"
        )
    kp, kd = dcmotor_gains(_required(m, "stiffness"), _required(m, "damping"), k, r)
    out: dict[str, object] = {
        "motor_params": Code(f"DcMotorPhysicalParams(kt={k!r}, ke={k!r}, resistance={r!r})"),
        "mode": Code("DcMotorInputMode.POSITION"),
        "stiffness": kp,
        "damping": kd,
        "voltage_limit": _required(m, "dcmotor_voltage_limit"),
    }
    if (v := m.value("dcmotor_slew_rate")) is not None:
        out["slew_rate"] = v
    if (v := m.value("dcmotor_time_constant")) is not None:
        out["electrical_time_constant"] = v
    if m.value("dcmotor_lugre_stiffness") is not None:
        names = ("stiffness", "damping", "coulomb", "static", "stribeck_velocity")
        out["lugre"] = tuple(_required(m, f"dcmotor_lugre_{n}") for n in names)
    if m.value("dcmotor_cogging_amplitude") is not None:
        out["cogging"] = (
            _required(m, "dcmotor_cogging_amplitude"),
            float(m.params.get("dcmotor_cogging_periods", 0.0)),
            float(m.params.get("dcmotor_cogging_phase", 0.0)),
        )
    return out


def mjlab_cfg(m: ChosenModel) -> tuple[str, dict[str, object]]:
    """The mjlab cfg class and its fields for one joint's model; ExportError when mjlab cannot hold it."""
    why = refusal(m.family)
    if why is not None:
        raise ExportError(f"joint {m.joint!r}: {why}")
    fields: dict[str, object] = {"target_names_expr": (re.escape(m.joint),)}
    if is_mujoco_dcmotor(m.family):
        return DCMOTOR_CLASS, fields | _dcmotor_fields(m)
    cls = CFG_CLASS[(m.family.drive, m.family.clamps)]
    fields |= {"stiffness": _required(m, "stiffness"), "damping": _required(m, "damping")}
    if cls == "DcMotorActuatorCfg":
        fields["saturation_effort"] = _required(m, "saturation_effort")
        fields["velocity_limit"] = _required(m, "actuator_velocity_limit")
    if (v := m.value("actuator_effort_limit")) is not None and math.isfinite(v):
        fields["effort_limit"] = v
    for term, name in JOINT_FIELDS.items():
        if term in m.family.joint_terms and (v := m.value(term)) is not None:
            fields[name] = v
    if m.family.delay and (lag := int(round(_required(m, "delay")))) > 0:
        fields["delay_min_lag"] = fields["delay_max_lag"] = lag
    return cls, fields


def mjlab_cfgs(result: ResultLike, families: dict[str, str] | str | None = None) -> dict[str, tuple]:
    """{joint: (family, class, fields)}: each joint's named family, else its best-ranked one mjlab holds."""
    out = {}
    for m in choose(result, families, expresses):
        cls, fields = mjlab_cfg(m)
        out[m.joint] = (m.family.name, cls, fields)
    return out


def _literal(v: object) -> str:
    if isinstance(v, Code):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_literal(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, float):
        return repr(float(v))
    return repr(v)


_UNITS = {
    "stiffness": "N·m/rad",
    "damping": "N·m·s/rad",
    "effort_limit": "N·m",
    "saturation_effort": "N·m",
    "velocity_limit": "rad/s",
    "armature": "kg·m²",
    "frictionloss": "N·m",
    "viscous_damping": "N·m·s/rad",
    "delay_min_lag": "physics steps",
    "delay_max_lag": "physics steps",
    "voltage_limit": "V",
    "slew_rate": "rad/s",
    "electrical_time_constant": "s",
}
_DCMOTOR_UNITS = {"stiffness": "V/rad (MuJoCo 3.11)", "damping": "V·s/rad (MuJoCo 3.11)"}


def integrator(classes: set[str]) -> str:
    """The MuJoCo integrator that steps these cfgs as fitted: implicitfast for the implicit family's built-in
    PD (its kd integrated implicitly, as our rollout does), else Euler (joint damping implicit, the rest
    explicit)."""
    return "implicitfast" if "BuiltinPdActuatorCfg" in classes else "euler"


def _head(builtin_dc: bool, mixed: bool) -> list[str]:
    lines = [
        f'"""Actuator configs fitted by actuator-sysid for mjlab {MJLAB_VERSION} (MuJoCo {MUJOCO_VERSION}).',
        "",
        "Use: EntityArticulationInfoCfg(actuators=ACTUATORS). Units are SI; one cfg per fitted joint.",
        "The fit stepped PHYSICS_DT with commands held for DECIMATION steps:",
        "SimulationCfg(mujoco=MujocoCfg(timestep=PHYSICS_DT, integrator=INTEGRATOR)) replays it as fitted.",
        "frictionloss is MuJoCo's soft-constraint Coulomb friction on the joint.",
    ]
    if mixed:
        lines.append(
            "INTEGRATOR suits the implicit-family joints; the <dcmotor> ones were fitted with Euler."
        )
    if builtin_dc:
        lines += [
            "",
            "BuiltinDcMotorActuatorCfg is MuJoCo's <dcmotor> in position mode. Its stiffness and damping are",
            "MuJoCo 3.11's voltage gains kp' = R*kp/K and kd' = R*kd/K - K of the fitted torque gains kp, kd:",
            "other MuJoCo versions read them otherwise, so this file refuses to load there.",
        ]
    return [*lines, '"""', ""]


def render_mjlab(result: ResultLike, families: dict[str, str] | str | None = None) -> str:
    """Ready-to-paste mjlab source: imports, PHYSICS_DT, DECIMATION and an ACTUATORS tuple of cfgs."""
    typed = as_result(result)
    cfgs = mjlab_cfgs(typed, families)
    classes = sorted({cls for _, cls, _ in cfgs.values()})
    builtin_dc = DCMOTOR_CLASS in classes
    if builtin_dc:
        classes += ["DcMotorInputMode", "DcMotorPhysicalParams"]
    if typed.assumptions.effort_mode != "explicit":
        raise ExportError(
            f"the fit assumed effort mode {typed.assumptions.effort_mode!r} (Newton's); mjlab's actuators apply "
            "the effort explicitly: fit with effort mode 'explicit'"
        )
    integ = integrator(set(classes))
    lines = _head(builtin_dc, builtin_dc and integ != "euler")
    if builtin_dc:
        lines.append("import mujoco")
    lines += ["from mjlab.actuator import (", *(f"    {c}," for c in sorted(classes)), ")", ""]
    if builtin_dc:
        lines += [
            f'if mujoco.__version__.split(".")[:2] != {MUJOCO_VERSION.split(".")!r}:',
            "    raise ImportError(",
            f'        f"these <dcmotor> gains are MuJoCo {MUJOCO_VERSION}\'s; this is MuJoCo {{mujoco.__version__}}"',
            "    )",
            "",
        ]
    lines += [
        f"PHYSICS_DT = {physics_dt(typed)!r}  # s",
        f"DECIMATION = {int(typed.assumptions.decimation)!r}  # physics steps per command sample",
        f"INTEGRATOR = {integ!r}",
        "",
        "ACTUATORS = (",
    ]
    for joint, (family, cls, fields) in cfgs.items():
        lines.append(
            f"    {code_name(cls, 'cfg class')}(  # {comment_line(f'joint {joint!r}, family {family}')}"
        )
        units = {**_UNITS, **(_DCMOTOR_UNITS if cls == DCMOTOR_CLASS else {})}
        for name, v in fields.items():
            unit = f"  # {units[name]}" if name in units else ""
            lines.append(f"        {code_name(name, 'cfg field')}={_literal(v)},{unit}")
        lines.append("    ),")
    lines.append(")")
    return "\n".join(lines) + "\n"
