"""The DC-motor envelope exported as MuJoCo's own `<dcmotor input="pos">`: a dcmotor fit and an XL330-law fit
replayed in MuJoCo against our kernel's rollout, and a log with feed-forward kept in the `<general>` form.

Tolerances: 1e-6 rad between MuJoCo and our float32 kernel without friction (the two forms agree within 1e-8 rad,
the file's 9 significant digits); with Coulomb friction, MuJoCo's frictionloss constraint is not our stopping
friction, so the replay's RMSE against the log must lie within 10 % of ours, as every consumer replay does.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest
from export_helpers import MISFIT, make_result, model_entry, short_recording

from actuator_sysid.datasets.recording import Recording, Segment
from actuator_sysid.datasets.servo_laws import SERVO_LAWS
from actuator_sysid.export import replay
from actuator_sysid.export.mjcf import build_mjcf, render_model
from actuator_sysid.export.selection import bench_loads, choose, physics_dt
from actuator_sysid.fitting.fit import FitRequest, fit_result, simulate

pytestmark = pytest.mark.conformance

# an XL330 at its firmware's kp 400 on a 5 V supply: kt, R (in the law's 2–5 Ω range) and the 1.75 A limiter; the
# law the log states gives this unit's kt (the table's 0.378 is the prior of a fit)
KT, R, VIN, KP_FIRMWARE = 0.52, 2.5, 5.0, 400.0
XL330 = {**(SERVO_LAWS["xl330"].voltage_servo() or {}), "kt": KT}


def _xl330_params() -> dict[str, float]:
    """The XL330 law as PD + DC envelope in SI: kp = (kt/R)·vin·duty, kd = kt²/R, stall (kt/R)·vin·max_duty,
    no-load speed vin·max_duty/kt, rated effort kt·I_max."""
    assert XL330 is not None
    duty = XL330["duty_per_kp_rad"] * KP_FIRMWARE
    stall = KT / R * VIN * XL330["max_duty"]
    return {
        **MISFIT,
        "stiffness": KT / R * VIN * duty,
        "damping": KT * KT / R,
        "saturation_effort": stall,
        "actuator_velocity_limit": stall / (KT * KT / R),
        "actuator_effort_limit": KT * XL330["current_limit"],
        "armature": 0.002,
        "viscous_friction": 0.01,
    }


def _log(servo: bool = False, tau_ff: bool = False) -> Recording:
    """The Isaac Lab bench log, short; `servo`: an XL330's log (device kp, supply, law) on a light arm so the
    voltage and current limits both bind; `tau_ff`: a feed-forward torque besides q_des."""
    rec = short_recording(n_segments=2, n_samples=300)
    segs = []
    for s in rec.segments:
        meta = dict(s.metadata)
        if servo:
            meta |= {"gain_units": "device", "kp": KP_FIRMWARE, "vin": VIN, "voltage_servo": XL330}
        ff = 0.3 * np.sin(np.arange(s.n) * 0.05)[:, None] if tau_ff else s.tau_ff
        segs.append(dataclasses.replace(s, metadata=meta, tau_ff=ff))
    joints = (
        [dataclasses.replace(rec.joints[0], inertia=1e-3, mass=0.05, com_distance=0.05)]
        if servo
        else rec.joints
    )
    return dataclasses.replace(rec, joints=joints, segments=segs)


def _result(rec: Recording, family: str, params: dict[str, float], servo: bool = False) -> dict:
    res = make_result({"hinge": {family: model_entry(family, params)}}, rec)
    if servo:  # as fit_result writes a tied fit: the law, device units and the reference point
        res["joints"]["hinge"]["models"][family]["voltage_servo"] = XL330
        res["assumptions"] |= {
            "gain_units": {"hinge": "device"},
            "operating_point": {"hinge": {"kp": KP_FIRMWARE, "kd": None, "vin": VIN}},
        }
    return res


def _mujoco(text: str, seg: Segment, ctrl: np.ndarray, slew_from: float | None = None) -> np.ndarray:
    """The exported model stepped through one segment from its first measured state, ctrl held per sample, a
    delayed actuator's history filled with the first command, a slewed setpoint started at `slew_from`."""
    model = mujoco.MjModel.from_xml_string(text)
    data = mujoco.MjData(model)
    a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "hinge_actuator")
    c = int(model.actuator_ctrladr[a])
    data.qpos[0], data.qvel[0] = seg.q[0, 0], seg.qd[0, 0]
    if slew_from is not None:
        data.act[int(model.actuator_actadr[a])] = slew_from
    if (n := int(model.actuator_history[a][0])) > 0:
        times = (data.time - model.opt.timestep * np.arange(n)[::-1]).reshape(-1, 1)
        mujoco.mj_initCtrlHistory(model, data, a, times, np.full((n, 1), ctrl[0]))
    out = [float(data.qpos[0])]
    for u in ctrl[:-1]:
        data.ctrl[c] = u
        mujoco.mj_step(model, data)
        out.append(float(data.qpos[0]))
    return np.array(out)


def _native(text: str) -> bool:
    """Whether the file's one actuator is MuJoCo's <dcmotor> in position mode."""
    model = mujoco.MjModel.from_xml_string(text)
    return (
        model.nu == 1
        and model.actuator_dyntype[0] == mujoco.mjtDyn.mjDYN_DCMOTOR
        and model.actuator_ctrlspec[0] == 1
    )


def _worst(
    text: str,
    rec: Recording,
    family: str,
    params: dict[str, float],
    ctrl_of=None,
    terms: list[str] | None = None,
) -> float:
    """The largest |q_MuJoCo − q_ours| over every segment (`terms`: the fit's joint terms)."""
    ours = simulate(rec, "hinge", family, params, joint_terms=terms)
    worst = 0.0
    for seg in rec.segments:
        ctrl = seg.q_des[:, 0] if ctrl_of is None else ctrl_of(seg)
        worst = max(worst, float(np.max(np.abs(_mujoco(text, seg, ctrl) - ours[seg.name]["q"]))))
    return worst


@pytest.mark.parametrize(
    ("family", "servo"), [("dcmotor", False), ("dcmotor_delay", False), ("dcmotor", True)]
)
def test_the_dc_envelope_is_a_native_dcmotor_that_replays_our_rollout(family: str, servo: bool) -> None:
    """Without friction MuJoCo's <dcmotor> (delay included) follows our kernel within 1e-6 rad; an XL330-law
    fit's motor is the servo's own: K = kt, R its winding, vmax the supply, saturation kt·I_max."""
    rec = _log(servo=servo)
    params = {**(_xl330_params() if servo else MISFIT), "friction": 0.0, "delay": 3}
    text, findings = build_mjcf(_result(rec, family, params, servo), rec)
    model = mujoco.MjModel.from_xml_string(text)
    assert "<general" not in text and model.nu == 1 and model.na == 0  # no act state to start
    assert model.actuator_dyntype[0] == mujoco.mjtDyn.mjDYN_DCMOTOR and model.actuator_ctrlspec[0] == 1
    r, k, kp, kd, vmax = (model.actuator_gainprm[0][i] for i in (0, 1, 4, 6, 7))
    stall, c = params["saturation_effort"], params["saturation_effort"] / params["actuator_velocity_limit"]
    assert k * vmax / r == pytest.approx(stall, rel=1e-8) and k * k / r == pytest.approx(c, rel=1e-8)
    assert (kp, kd) == pytest.approx((params["stiffness"], params["damping"]), rel=1e-8)
    limit = params["actuator_effort_limit"]
    assert list(model.actuator_forcerange[0]) == pytest.approx([-limit, limit], rel=1e-8)
    if servo:
        assert (k, r, vmax) == pytest.approx((KT, R, VIN), rel=1e-8)
        assert limit < stall  # the current limiter binds below the stall torque
    else:
        assert (k, vmax) == (1.0, params["actuator_velocity_limit"])  # no supply logged: K = 1 N·m/A
    (note,) = [f for f in findings if f.code == "EXPORT.MJCF.dc_motor"]
    assert "<dcmotor" in note.message and ("kt" in note.message) == servo
    assert model.actuator_delay[0] == pytest.approx(0.015 if family == "dcmotor_delay" else 0.0)
    assert _worst(text, rec, family, params) < 1e-6
    traces = simulate(rec, "hinge", family, params)["0"]  # the envelope binds: voltage and current limits
    clipped = np.abs(traces["applied"] - traces["computed"]) > 1e-6
    at_limit = np.isclose(np.abs(traces["applied"]), limit, rtol=1e-5)
    assert np.any(clipped & ~at_limit) and np.any(at_limit)
    if family == "dcmotor_delay":  # the delay acts: the undelayed rollout is far off
        assert _worst(text, rec, "dcmotor", params) > 1e-3


def test_a_log_with_feed_forward_keeps_the_general_form_and_says_why() -> None:
    """<dcmotor input="pos"> has no tau_ff input: the two <general> actuators stay, driven by the virtual target,
    and still follow our kernel within 1e-6 rad."""
    rec = _log(tau_ff=True)
    params = {**MISFIT, "friction": 0.0}
    text, findings = build_mjcf(_result(rec, "dcmotor", params), rec)
    model = mujoco.MjModel.from_xml_string(text)
    assert model.nu == 2 and mujoco.mjtDyn.mjDYN_DCMOTOR not in model.actuator_dyntype
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "hinge_emf") >= 0
    (why,) = [f for f in findings if f.code == "EXPORT.MJCF.dc_motor_general"]
    assert why.where == "hinge" and "tau_ff" in why.message and "qd_des" not in why.message.split("which")[0]
    kp = params["stiffness"]
    assert _worst(text, rec, "dcmotor", params, lambda s: s.q_des[:, 0] + s.tau_ff[:, 0] / kp) < 1e-6
    bench = {"hinge": dataclasses.asdict(rec.joints[0])}
    plain, _ = build_mjcf(_result(rec, "dcmotor", params), loads=bench)  # no log to read: the native form
    assert _native(plain)


@pytest.mark.parametrize("servo", [False, True])
def test_with_friction_the_native_replay_is_within_ten_percent(servo: bool) -> None:
    """With Coulomb friction the <dcmotor> replay through the export's consumer check is within 10 % of ours."""
    rec = _log(servo=servo)
    res = _result(rec, "dcmotor", _xl330_params() if servo else MISFIT, servo)
    assert _native(build_mjcf(res, rec)[0])
    r = replay(res, rec, "mjcf.xml", segments=[s.name for s in rec.segments])
    assert r["status"] == "ok", r
    j = r["joints"]["hinge"]
    assert j["rmse_ours"] > 1e-3 and abs(j["rmse_replay"] - j["rmse_ours"]) <= 0.10 * j["rmse_ours"], j


def test_a_rich_friction_family_named_for_the_export_is_a_native_dcmotor_too() -> None:
    """BAM's friction families approximate dcmotor_delay in MuJoCo: named, the file holds a delayed <dcmotor>
    and the finding says which friction terms it drops."""
    rec = _log()
    rich = {**MISFIT, "stribeck_friction": 0.25, "stribeck_velocity": 0.3, "stribeck_exponent": 2.0}
    family = "dcmotor_stribeck_delay"
    res = make_result(
        {"hinge": {family: model_entry(family, rich), "dcmotor_delay": model_entry("dcmotor_delay", rich)}},
        rec,
    )
    text, findings = build_mjcf(res, rec, families=family)
    assert _native(text) and mujoco.MjModel.from_xml_string(text).actuator_delay[0] == pytest.approx(0.015)
    assert {"EXPORT.MJCF.friction_model", "EXPORT.MJCF.dc_motor"} <= {f.code for f in findings}


@pytest.mark.parametrize("servo", [False, True])
def test_a_pipeline_fit_exports_a_native_dcmotor_that_replays_it(servo: bool) -> None:
    """fit_result's own output (a short search, no Coulomb friction): the file is a <dcmotor> whose replay follows
    the fit within 1e-6 rad; an XL330 log's tied fit gets vmax = its supply and R within the law's winding range."""
    rec = _log(servo=servo)
    req = FitRequest(
        families=["dcmotor"],
        joint_terms=["armature", "viscous_friction"],
        generations=2,
        population=6,
        refine_iterations=1,
    )
    res = fit_result(rec, req)
    fit = res.joints["hinge"].models["dcmotor"]
    assert (fit.voltage_servo is not None) == servo
    text, _ = build_mjcf(res, rec)
    assert _native(text)
    model = mujoco.MjModel.from_xml_string(text)
    r, k, vmax = (model.actuator_gainprm[0][i] for i in (0, 1, 7))
    if servo:
        assert vmax == VIN and 2.0 - 1e-9 <= r <= 5.0 + 1e-9
        assert model.actuator_forcerange[0][1] == pytest.approx(k * XL330["current_limit"], rel=1e-8)
    assert _worst(text, rec, "dcmotor", dict(fit.params), terms=fit.joint_terms) < 1e-6
    general = render_model(choose(res), bench_loads(res, rec), physics_dt(res), motors={})  # today's form
    assert "hinge_emf" in general
    for seg in rec.segments:  # the two forms in float64: equal but for the file's nine digits
        native, two = (_mujoco(x, seg, seg.q_des[:, 0]) for x in (text, general))
        assert np.max(np.abs(native - two)) < 1e-8


@pytest.mark.parametrize("family", ["dcmotor", "dcmotor_delay"])
def test_a_servos_goal_slew_is_the_dcmotors_slewmax(family: str) -> None:
    """A servo fit whose goal moves at most goal_rate_limit (a Feetech law) is a `<dcmotor>` with slewmax = that
    rate, its slew state started where the file says: without friction MuJoCo follows our kernel within 1e-6 rad,
    delay included; the consumer replay does the same; the slew acts (without it the file is far off)."""
    rec = _log()
    rate, terms = 1.5, ["goal_rate_limit"]
    params = {**MISFIT, "friction": 0.0, "delay": 3, "goal_rate_limit": rate}
    res = make_result({"hinge": {family: model_entry(family, params, joint_terms=tuple(terms))}}, rec)
    text, findings = build_mjcf(res, rec)
    model = mujoco.MjModel.from_xml_string(text)
    assert _native(text) and model.na == 1 and model.actuator_dynprm[0][7] == pytest.approx(rate, rel=1e-8)
    assert "SLEW STATE" in text
    (note,) = [f for f in findings if f.code == "EXPORT.MJCF.goal_rate_limit"]
    assert note.severity == "info" and "slewmax" in note.message  # carried, not a warning to act on
    plain, _ = build_mjcf(make_result({"hinge": {family: model_entry(family, params)}}, rec), rec)
    assert mujoco.MjModel.from_xml_string(plain).na == 0  # no rate fitted: no slew, no state
    ours = simulate(rec, "hinge", family, params, joint_terms=terms)
    worst, unslewed = 0.0, 0.0
    for seg in rec.segments:
        q = _mujoco(text, seg, seg.q_des[:, 0], slew_from=seg.q[0, 0])
        worst = max(worst, float(np.max(np.abs(q - ours[seg.name]["q"]))))
        q = _mujoco(plain, seg, seg.q_des[:, 0])
        unslewed = max(unslewed, float(np.max(np.abs(q - ours[seg.name]["q"]))))
    assert worst < 1e-6 and unslewed > 1e-2
    r = replay(res, rec, "mjcf.xml")
    assert r["status"] == "ok" and r["joints"]["hinge"]["relative_difference"] < 1e-4
