"""MuJoCo MJCF: joint and actuator attributes for MuJoCo / mjlab / BAM users, in a standalone pendulum model.

Each fitted joint becomes a `<default class="<joint>_fit">` holding the joint attributes (armature,
frictionloss = Coulomb friction, damping = viscous friction, all SI) and its actuator, so a robot model can
take them with `class=`. The standalone model hangs each joint's fitted test-bench load on a hinge (q = 0
hanging down) and loads with `mujoco.MjModel.from_xml_string`.

A PD drive with the DC-motor envelope (Isaac Lab DCMotor, §A.4; a voltage servo's law, whose envelope its
gains tie) is MuJoCo's own `<dcmotor input="pos">` (docs/consumer-semantics.md "MuJoCo `<dcmotor>`"): its
torque request kp·(q_des − q) − kd·qd is served through the voltage limit, so τ = clip(τ*, ±K·vmax/R −
(K²/R)·qd), and `saturation` clips ±actuator_effort_limit. That is the envelope exactly with
K·vmax/R = saturation_effort and K²/R = saturation_effort / actuator_velocity_limit; the log's supply (times
a servo's duty limit) sets vmax, else K = 1 N·m/A. ctrl = q_des: a log that commands qd_des or tau_ff keeps
the two-actuator `<general>` form below, said in a finding.

Every other drive is a `general` position actuator (gainprm = kp, biasprm = [0, −kp, −kd], forcerange = the
effort limit, delay in seconds) driven by a "virtual target": ctrl = q_des + (kd·qd_des + tau_ff)/kp gives
exactly kp·(q_des − q) + kd·(qd_des − qd) + tau_ff. The `<general>` DC envelope is two actuators: with
c = saturation_effort / actuator_velocity_limit, clip(tau_pd + c·qd, ±τs) − c·qd = clip(tau_pd, −τs − c·qd,
τs − c·qd), so the PD actuator carries c in its velocity bias and forcerange ±τs, a gain-less one adds −c·qd,
and the joint's actuatorfrcrange (a clamp of their sum) is ±actuator_effort_limit — which also reproduces
Isaac Lab's velocity clip at the corner speed. What MuJoCo cannot hold natively is approximated and said so
in `mjcf_warnings`: the position torque table (forcerange = its largest value), an encoder offset,
PhysX-style dynamic friction. Newton's DrivePID becomes MuJoCo's pid actuator, whose two controls are
[q_des, qd_des + tau_ff/kd] and whose integral clamp is integral_max. The integrator is Euler (joint damping
implicit, actuator Kd explicit, as Isaac Lab and Newton apply explicit actuators); a model made only of
`implicit`-family joints uses implicitfast instead. A `mujoco_dcmotor*` family is written as fitted: the same
MJCF its fit rolled out (models/mujoco_dcmotor.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

import numpy as np

from ..datasets.recording import JointInfo, Recording
from ..fitting.result import FitResult, ResultLike, as_result
from ..models.components.servo_goal import GOAL_RATE, slew_rate
from ..models.families import Family, is_mujoco_dcmotor
from ..models.mujoco_dcmotor import attrs_text, dcmotor_attrs
from .newton_usd import MIN_INERTIA, MIN_MASS, prim_name
from .selection import ChosenModel, Finding, bench_loads, choose, comment_line, physics_dt, substitutions


def _num(x: float) -> str:
    return f"{float(x):.9g}"


def expresses(family: Family) -> bool:
    """Whether MuJoCo runs this family exactly: not BAM's friction budgets (frictionloss is a constant) and not a
    position-dependent torque table (forcerange is a constant)."""
    return not family.rich_friction and "position_table" not in family.clamps


def effort_limit(m: ChosenModel) -> float | None:
    """The static effort bound MuJoCo's forcerange can hold for this model (None: unlimited)."""
    if "position_table" in m.family.clamps:
        return max(float(m.params[f"lookup_effort_{k}"]) for k in range(len(m.table_positions or [0] * 5)))
    return m.value("actuator_effort_limit")


def _dc_findings(m: ChosenModel, motor: DCMotor | None, kept: list[str] | None) -> list[Finding]:
    """How the DC-motor envelope is written: MuJoCo's `<dcmotor>`, or two `<general>` actuators and why."""
    if motor is not None:
        msg = (
            f'MuJoCo\'s own <dcmotor input="pos">: ctrl = q_des, controller kp and kd as fitted; K = '
            f"{motor.motorconst:.6g} N·m/A, R = {motor.resistance:.6g} Ω, vmax = {motor.vmax:.6g} V give the stall "
            "effort K·vmax/R = saturation_effort and the back-EMF damping K²/R = saturation_effort / "
            f"actuator_velocity_limit ({motor.basis}); saturation = ±actuator_effort_limit"
        )
        return [Finding("EXPORT.MJCF.dc_motor", "info", m.joint, msg)]
    msg = (
        "the DC-motor envelope is two actuators on the joint: copy both classes "
        f"({prim_name(m.joint)}_fit and {prim_name(m.joint)}_fit_emf) and the joint's actuatorfrcrange; "
        "a single position actuator would lose the speed derating"
    )
    out = [Finding("EXPORT.MJCF.dc_motor", "info", m.joint, msg)]
    if kept:
        why = (
            f'the log commands {" and ".join(kept)}, which MuJoCo\'s <dcmotor input="pos"> has no input for '
            "(its ctrl is q_des alone): the envelope stays two exact <general> actuators driven by ctrl = q_des + "
            "(kd·qd_des + tau_ff)/kp"
        )
        out.append(Finding("EXPORT.MJCF.dc_motor_general", "info", m.joint, why))
    return out


def mjcf_warnings(
    m: ChosenModel, motor: DCMotor | None = None, kept: list[str] | None = None
) -> list[Finding]:
    """What the MJCF export approximates for one joint's model; `motor`: its `<dcmotor>` (dcmotors), `kept`: the
    feed-forward that keeps its DC envelope `<general>`."""
    out = []

    def add(code: str, msg: str) -> None:
        out.append(Finding(f"EXPORT.MJCF.{code}", "warning", m.joint, msg))

    if "dc_motor" in m.family.clamps:
        out += _dc_findings(m, motor, kept)
    if is_mujoco_dcmotor(m.family):
        out.append(Finding("EXPORT.MJCF.dcmotor", "info", m.joint, DCMOTOR_NOTE))
    if "position_table" in m.family.clamps:
        add(
            "position_table",
            f"the position-dependent torque limit becomes forcerange = ±{effort_limit(m)} N·m, "
            "the table's largest value",
        )
    if m.family.drive == "pid":
        out.append(
            Finding(
                "EXPORT.MJCF.pid",
                "info",
                m.joint,
                (
                    "MuJoCo's pid actuator takes two controls, [q_des, qd_des + tau_ff/kd]; its integral of q_des − q, "
                    "clamped to ±integral_max, gains this step's error after the force (Newton's DrivePID before)"
                ),
            )
        )
    budget_said = False
    for comp in m.family.components:  # each joint term says what MuJoCo cannot hold of it
        if comp.budget and not budget_said:  # BAM's friction budget: one finding for all its terms
            budget_said = True
            from .isaaclab import bam_carrier

            add(
                "friction_model",
                f"frictionloss is the Coulomb part {m.value('friction')} N·m; BAM's friction "
                "budget (Stribeck / load-dependent terms, which BAM sets on dof_frictionloss every step) is dropped: "
                + ", ".join(
                    f"{t} = {m.value(t):.4g}" for t in m.family.rich_friction if m.value(t) is not None
                )
                + f"; {bam_carrier(m.family)}",
            )
        out += [
            Finding(f"EXPORT.MJCF.{code}", severity, m.joint, msg)
            for code, severity, msg in comp.notes("mjcf", m)
            if not (motor is not None and code == GOAL_RATE.name)  # the <dcmotor> slews: said below
        ]
    if motor is not None and slew_rate(m) > 0:
        msg = (
            f"the servo's goal slew is the <dcmotor>'s slewmax = {slew_rate(m):.6g} rad/s; start its slew state "
            "(the actuator's first act) at the joint's first measured position, as the file's SLEW STATE says"
        )
        out.append(Finding(f"EXPORT.MJCF.{GOAL_RATE.name}", "info", m.joint, msg))
    return out


DCMOTOR_NOTE = (
    "MuJoCo's own <dcmotor> in position mode: ctrl = q_des (qd_des and tau_ff are no inputs); its kp and kd are "
    "in N·m/rad and N·m·s/rad. Start a replay from the fit's actuator state: the slew state at the first setpoint, "
    "the current settled (models/mujoco_dcmotor.initial_act)"
)


def dc_slope(m: ChosenModel) -> float:
    """The back-EMF slope c = saturation_effort / actuator_velocity_limit of a DC-envelope model (0 otherwise)."""
    if "dc_motor" not in m.family.clamps:
        return 0.0
    v_max, sat = m.value("actuator_velocity_limit"), m.value("saturation_effort")
    return 0.0 if not v_max or sat is None or not math.isfinite(v_max) else float(sat) / v_max


@dataclass(frozen=True)
class DCMotor:
    """A DC envelope as MuJoCo's `<dcmotor>` constants: K [N·m/A], R [Ω], the voltage limit vmax [V], and what
    fixed the scale (only K·vmax/R and K²/R are fitted)."""

    motorconst: float
    resistance: float
    vmax: float
    basis: str


def native_dcmotor(m: ChosenModel) -> bool:
    """Whether a model's drive is MuJoCo's own `<dcmotor>` exactly: the PD law with the DC-motor clamp alone, with
    a stall effort and a finite no-load speed (the back-EMF slope K²/R > 0)."""
    sat = m.value("saturation_effort")
    return (
        m.family.drive == "pd"
        and m.family.clamps == ("dc_motor",)
        and sat is not None
        and sat > 0
        and dc_slope(m) > 0
    )


def dcmotor_constants(m: ChosenModel, vmax: float | None = None, basis: str = "") -> DCMotor:
    """The `<dcmotor>` holding a DC envelope: K·vmax/R = saturation_effort, K²/R = saturation_effort /
    actuator_velocity_limit; a known voltage limit `vmax` fixes K = vmax / actuator_velocity_limit, else
    K = 1 N·m/A."""
    c, sat = dc_slope(m), float(m.value("saturation_effort") or 0.0)
    if vmax is None or not vmax > 0:
        return DCMotor(1.0, 1.0 / c, sat / c, "no supply voltage logged: K = 1 N·m/A by convention")
    k = c * vmax / sat
    return DCMotor(k, k * k / c, vmax, basis)


def feed_forward(rec: Recording | None, joint: str) -> list[str]:
    """The commands besides q_des a joint's log sends (qd_des, tau_ff), which `<dcmotor input="pos">` lacks."""
    if rec is None or joint not in rec.joint_names:
        return []
    j = rec.joint_index(joint)
    return [
        ch for ch in ("qd_des", "tau_ff") if any(np.any(getattr(s, ch)[:, j] != 0.0) for s in rec.segments)
    ]


def supply(result: FitResult, rec: Recording | None, joint: str) -> float | None:
    """The supply voltage a joint's fit is stated at: the fit's reference, else the one `vin` its log states."""
    ref = (result.assumptions.operating_point or {}).get(joint) or {}
    if isinstance(ref, Mapping) and isinstance(ref.get("vin"), int | float) and ref["vin"] > 0:
        return float(ref["vin"])
    if rec is None or joint not in rec.joint_names:
        return None
    vins = set()
    for seg in rec.segments:
        v = seg.metadata.get("joints", {}).get(joint, {}).get("vin", seg.metadata.get("vin"))
        vins.add(float(v) if isinstance(v, int | float) and v > 0 else None)
    return vins.pop() if len(vins) == 1 and None not in vins else None


def dcmotors(
    result: ResultLike, models: list[ChosenModel], rec: Recording | None = None
) -> tuple[dict[str, DCMotor], dict[str, list[str]]]:
    """(joint → its `<dcmotor>`, joint → the feed-forward commands that keep it `<general>`) for the models a
    `<dcmotor>` holds. vmax is a voltage servo's supply × duty limit (then K = kt), else the log's supply."""
    typed = as_result(result)
    out, kept = {}, {}
    for m in models:
        if not native_dcmotor(m):
            continue
        if sent := feed_forward(rec, m.joint):
            kept[m.joint] = sent
            continue
        vin = supply(typed, rec, m.joint)
        fit = typed.joints[m.joint].models.get(m.family.name) if m.joint in typed.joints else None
        servo = (fit.voltage_servo if fit is not None else None) or {}
        duty = float(servo.get("max_duty") or 1.0)
        if vin is None:
            out[m.joint] = dcmotor_constants(m)
        elif servo:
            out[m.joint] = dcmotor_constants(
                m,
                vin * duty,
                f"vmax = the supply {vin:g} V × the servo's duty limit {duty:g}: K = kt, R = its winding",
            )
        else:
            out[m.joint] = dcmotor_constants(m, vin, f"vmax = the log's supply vin = {vin:g} V")
    return out, kept


def _dcmotor_attrs(m: ChosenModel, motor: DCMotor, dt: float) -> dict[str, str]:
    """The `<dcmotor>` of a DC envelope: position input, controller [kp, ki, kd, slewmax, imax, vmax]."""
    kp, kd = m.value("stiffness") or 0.0, m.value("damping") or 0.0
    out = {
        "motorconst": _num(motor.motorconst),
        "resistance": _num(motor.resistance),
        "input": "pos",
        "controller": f"{_num(kp)} 0 {_num(kd)} {_num(slew_rate(m))} 0 {_num(motor.vmax)}",
    }
    lim = m.value("actuator_effort_limit")
    if lim is not None and lim > 0:
        out["saturation"] = _num(lim)  # forcerange ±τ_max of the motor torque
    if (delay := _delay(m)) >= 1:
        out |= {"delay": _num(delay * dt), "nsample": str(delay + 2)}
    return out


def _range(lim: float | None) -> str | None:
    return f"{_num(-lim)} {_num(lim)}" if lim is not None and math.isfinite(lim) else None


def _joint_attrs(m: ChosenModel) -> dict[str, str]:
    # a term the export leaves out (unidentified: selection.prepare) is absent, so MuJoCo's default (0) applies
    out = {attr: _num(v) for comp in m.family.components for attr, v in comp.mjcf_joint(m).items()}
    if "dc_motor" in m.family.clamps and (r := _range(m.value("actuator_effort_limit"))):
        out["actuatorfrcrange"] = r  # clamps the sum of both actuators: the envelope's ±effort limit
    return out


def _actuator_attrs(m: ChosenModel, dt: float) -> dict[str, str]:
    kp, kd = m.value("stiffness") or 0.0, m.value("damping") or 0.0
    kv = kd - dc_slope(m)  # velocity gain inside the clamp; negative for a DC envelope steeper than kd
    lim = m.value("saturation_effort") if "dc_motor" in m.family.clamps else effort_limit(m)
    # MuJoCo reads a positive biasprm[2] of a position-like actuator (gainprm[0] == −biasprm[1]) as a damping
    # ratio; gear g = 2 (force ×g, length and velocity ×g) keeps the same joint torque with unequal gains.
    g = 2.0 if kv < 0 else 1.0
    out = {
        "gainprm": _num(kp / g),
        "biastype": "affine",
        "biasprm": f"0 {_num(-kp / g**2)} {_num(-kv / g**2)}",
    }
    if m.family.drive == "pid":  # MuJoCo's pid actuator: act = ∫(ctrl − q) dt clamped to ±dynprm[0] (0: none)
        i_max = m.value("integral_max")
        out = {
            "dyntype": "pid",
            "dynprm": _num(i_max if i_max is not None and math.isfinite(i_max) else 0.0),
            "gaintype": "pid",
            "gainprm": _num(m.value("ki") or 0.0),
            "biastype": "affine",
            "biasprm": f"0 {_num(-kp)} {_num(-kd)}",
        }
    if g != 1.0:
        out["gear"] = _num(g)
    if r := _range(None if lim is None else lim / g):
        out |= {"forcelimited": "true", "forcerange": r}
    delay = _delay(m)
    if delay >= 1:  # ctrl read `delay` physics steps back from its history (zero-order hold)
        out |= {"delay": _num(delay * dt), "nsample": str(delay + 2)}
    return out


def _delay(m: ChosenModel) -> int:
    """The model's command delay in physics steps (0 for a family without one)."""
    return int(round(m.params.get("delay", 0))) if m.family.delay else 0


# MuJoCo starts an actuator's ctrl history at zero and MJCF cannot fill it; Isaac Lab's and Newton's delays (and
# the fit) start full of the first command, so the file says how to match them
DELAY_HISTORY = [
    "  <!-- DELAY HISTORY: MuJoCo starts a delayed actuator's ctrl history at 0, while the fit (like Isaac Lab's",
    "       and Newton's delays) starts it full of the first command. Before the first step, fill it with the",
    "       first ctrl: n = model.actuator_history[a][0]; mujoco.mj_initCtrlHistory(model, data, a,",
    "       (data.time - model.opt.timestep * np.arange(n)[::-1]).reshape(-1, 1), np.full((n, 1), ctrl0)) -->",
]


# MuJoCo starts a <dcmotor>'s slewed setpoint (its first act) at 0; the fit starts a servo's goal at the joint's
# first measured position, so the file says how to match it
SLEW_STATE = [
    "  <!-- SLEW STATE: a <dcmotor> with a slewmax keeps its slewed setpoint in act, which MuJoCo starts at 0,",
    "       while the fit starts a servo's goal at the joint's first measured position. Before the first step set",
    "       data.act[model.actuator_actadr[a]] = q0 (mujoco_dcmotor* families: the first setpoint, ctrl0). -->",
]


CTRL_DCMOTOR = [
    "       a DC motor's <dcmotor input=pos> takes ctrl = q_des (its log commands no qd_des or tau_ff)."
]


def _attrs(d: dict[str, str]) -> str:
    return " ".join(f"{k}={quoteattr(v)}" for k, v in d.items())


def _default_class(m: ChosenModel, dt: float, motor: DCMotor | None) -> list[str]:
    """A joint's `<default>` classes: the joint and its actuator (the back-EMF one of a `<general>` envelope)."""
    name = prim_name(m.joint)
    head = f'    <default class="{name}_fit">  <!-- {comment_line("family " + m.family.name, xml=True)} -->'
    joint = _joint_attrs(m)
    if is_mujoco_dcmotor(m.family):
        return [
            head,
            f"      <joint {_attrs(joint)}/>",
            f"      <dcmotor {attrs_text(dcmotor_attrs(m.params))}/>",
            "    </default>",
        ]
    if motor is not None:  # the <dcmotor>'s saturation clamps the motor torque: no joint-level clamp
        joint.pop("actuatorfrcrange", None)
        note = (
            f"<dcmotor>: stall K*vmax/R = saturation_effort {_num(m.value('saturation_effort') or 0.0)} N·m, "
            f"back-EMF K^2/R = {_num(dc_slope(m))} N·m·s/rad; {motor.basis}"
        )
        return [
            head,
            f"      <!-- {comment_line(note, xml=True)} -->",
            f"      <joint {_attrs(joint)}/>",
            f"      <dcmotor {_attrs(_dcmotor_attrs(m, motor, dt))}/>",
            "    </default>",
        ]
    out = [
        head,
        f"      <joint {_attrs(joint)}/>",
        f"      <general {_attrs(_actuator_attrs(m, dt))}/>",
        "    </default>",
    ]
    if dc_slope(m) > 0:  # the back-EMF half of the DC envelope: force −c·qd, no control input
        out += [
            f'    <default class="{name}_fit_emf">',
            f'      <general gainprm="0" biastype="affine" biasprm="0 0 {_num(-dc_slope(m))}"/>',
            "    </default>",
        ]
    return out


def render_model(
    models: list[ChosenModel],
    loads: dict[str, JointInfo],
    dt: float,
    motors: dict[str, DCMotor] | None = None,
) -> str:
    """The MJCF document: defaults per joint, one pendulum per joint, one actuator per joint. `motors`: the DC
    envelopes written as `<dcmotor>` (dcmotors; default: every one a `<dcmotor>` holds, K = 1 N·m/A). Every name
    in it is prim_name's (ASCII letters, digits, '_'), every other value quoteattr's: no joint name is written as
    XML."""
    if motors is None:
        motors = {m.joint: dcmotor_constants(m) for m in models if native_dcmotor(m)}
    implicit_only = all(m.family.drive == "implicit" for m in models)
    gravities = [loads[m.joint].gravity for m in models if loads[m.joint].gravity_coeff > 0]
    g = gravities[0] if gravities else 9.81
    lines = [
        '<mujoco model="actuator_sysid_fit">',
        "  <!-- Fitted by actuator-sysid. Units SI (rad, N·m, kg·m²); copy a <default class> into your model and "
        "set class= on the joint and actuator.",
        "       ctrl = q_des + (kd*qd_des + tau_ff)/kp; a pid actuator takes ctrl = [q_des, qd_des + tau_ff/kd]"
        + (";" if motors else "."),
        *(CTRL_DCMOTOR if motors else []),
        "       Delays count physics steps of the timestep below. -->",
        *(DELAY_HISTORY if any(_delay(m) >= 1 for m in models) else []),
        *(SLEW_STATE if any(m.joint in motors and slew_rate(m) > 0 for m in models) else []),
        '  <compiler angle="radian" autolimits="true"/>',
        f'  <option timestep="{_num(dt)}" gravity="0 0 {_num(-g)}" '
        f'integrator="{"implicitfast" if implicit_only else "Euler"}"/>',
        "  <default>",
    ]
    for m in models:
        lines += _default_class(m, dt, motors.get(m.joint))
    lines += ["  </default>", "  <worldbody>"]
    for i, m in enumerate(models):
        name, info = prim_name(m.joint), loads[m.joint]
        prismatic = info.joint_type == "prismatic"
        mass = max(info.load_inertia if prismatic else info.mass, MIN_MASS)
        com = 0.0 if prismatic or info.mass <= 0 else info.com_distance
        inertia = _num(max(info.inertia, MIN_INERTIA))
        axis = "1 0 0" if prismatic else ("0 1 0" if info.gravity_coeff > 0 else "0 0 1")
        lines += [
            f'    <body name="{name}_link" pos="{i} 0 0">',
            f'      <joint name="{name}" class="{name}_fit" type="{"slide" if prismatic else "hinge"}" '
            f'axis="{axis}" limited="false"/>',
            f'      <inertial pos="0 0 {_num(-com)}" mass="{_num(mass)}" '
            f'diaginertia="{inertia} {inertia} {inertia}"/>',
            "    </body>",
        ]
    lines += ["  </worldbody>", "  <actuator>"]
    for m in models:
        name = prim_name(m.joint)
        kind = "dcmotor" if is_mujoco_dcmotor(m.family) or m.joint in motors else "general"
        lines.append(f'    <{kind} name="{name}_actuator" class="{name}_fit" joint="{name}"/>')
        if kind == "general" and dc_slope(m) > 0:
            lines.append(f'    <general name="{name}_emf" class="{name}_fit_emf" joint="{name}"/>')
    lines += ["  </actuator>", "</mujoco>"]
    return "\n".join(lines) + "\n"


def model_findings(
    result: ResultLike, models: list[ChosenModel], rec: Recording | None = None
) -> list[Finding]:
    """Per joint: the fit written in place of a best model MuJoCo cannot hold, and what the written one loses
    (`rec`: the log whose feed-forward commands keep a DC envelope `<general>`)."""
    motors, kept = dcmotors(result, models, rec)
    return substitutions(result, models, "MuJoCo", "EXPORT.MJCF") + [
        f for m in models for f in mjcf_warnings(m, motors.get(m.joint), kept.get(m.joint))
    ]


def build_mjcf(
    result: ResultLike,
    rec: Recording | None = None,
    *,
    families: dict[str, str] | str | None = None,
    loads: dict[str, dict] | None = None,
) -> tuple[str, list[Finding]]:
    """(MJCF text, findings): the standalone model and what it approximates."""
    typed = as_result(result)
    models = choose(typed, families, expresses)
    motors, _ = dcmotors(typed, models, rec)
    text = render_model(models, bench_loads(typed, rec, loads), physics_dt(typed), motors)
    findings = model_findings(typed, models, rec)
    if any(m.family.drive == "implicit" for m in models) and not all(
        m.family.drive == "implicit" for m in models
    ):
        findings.append(
            Finding(
                "EXPORT.MJCF.integrator",
                "warning",
                "option",
                "explicit and implicit-family joints share one model: Euler integrates the implicit "
                "joints' Kd explicitly (Newton's implicitfast does not)",
            )
        )
    return text, findings


def render_mjcf(result: ResultLike, rec: Recording | None = None, **kwargs) -> str:
    """The MJCF export as text (see build_mjcf)."""
    return build_mjcf(result, rec, **kwargs)[0]
