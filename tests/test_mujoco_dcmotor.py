"""MuJoCo's own <dcmotor> as fitted families: logs made by MuJoCo's `MjSpec.set_to_dcmotor` (position mode), the
parameters recovered by our MuJoCo-rollout fit, and the MJCF export replayed in MuJoCo."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.export.mjcf import build_mjcf, render_model
from actuator_sysid.export.selection import ChosenModel
from actuator_sysid.fitting.fit import FitRequest, fit_result, report_data, simulate
from actuator_sysid.fitting.mujoco_dcmotor_fit import fit_mujoco_dcmotor, simulate_dcmotor
from actuator_sysid.fitting.request import FitRequestError
from actuator_sysid.models.families import get_family
from actuator_sysid.models.mujoco_dcmotor import Bench, Trial, bench_xml, initial_act, set_fields

LOAD = JointInfo("hinge", inertia=0.002, mass=0.3, com_distance=0.1)
RATE, SUBSTEPS = 200, 5
BASE = {
    "stiffness": 20.0,
    "damping": 0.5,
    "dcmotor_motor_constant": 0.3,
    "dcmotor_resistance": 2.0,
    "dcmotor_voltage_limit": 6.0,
}
EXTENSIONS = {
    "mujoco_dcmotor": {},
    "mujoco_dcmotor_lugre": {
        "dcmotor_lugre_stiffness": 300.0,
        "dcmotor_lugre_damping": 1.0,
        "dcmotor_lugre_coulomb": 0.05,
        "dcmotor_lugre_static": 0.08,
        "dcmotor_lugre_stribeck_velocity": 0.2,
    },
    "mujoco_dcmotor_slew": {"dcmotor_slew_rate": 8.0},
    "mujoco_dcmotor_cogging": {
        "dcmotor_cogging_amplitude": 0.05,
        "dcmotor_cogging_periods": 8.0,
        "dcmotor_cogging_phase": 0.4,
    },
    "mujoco_dcmotor_inductance": {"dcmotor_time_constant": 0.003},
}


def _spec_model(p: dict[str, float]) -> mujoco.MjModel:
    """The bench pendulum with MuJoCo's own set_to_dcmotor: the generator, independent of our MJCF writer."""
    spec = mujoco.MjSpec()
    spec.option.timestep = 1.0 / RATE / SUBSTEPS
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.gravity = [0.0, 0.0, -LOAD.gravity]
    body = spec.worldbody.add_body(name="link")
    body.add_joint(name="hinge", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0])
    body.mass, body.ipos = LOAD.mass, [0, 0, -LOAD.com_distance]
    body.inertia, body.explicitinertial = [LOAD.inertia] * 3, True
    act = spec.add_actuator(target="hinge", trntype=mujoco.mjtTrn.mjTRN_JOINT)
    act.set_to_dcmotor(
        motorconst=[p["dcmotor_motor_constant"]] * 2,
        resistance=p["dcmotor_resistance"],
        inductance=[0.0, p.get("dcmotor_time_constant", 0.0)],
        cogging=[p.get(f"dcmotor_cogging_{k}", 0.0) for k in ("amplitude", "periods", "phase")],
        controller=[
            p["stiffness"],
            0.0,
            p["damping"],
            p.get("dcmotor_slew_rate", 0.0),
            0.0,
            p["dcmotor_voltage_limit"],
        ],
        lugre=[
            p.get(f"dcmotor_lugre_{k}", 0.0)
            for k in ("stiffness", "damping", "coulomb", "static", "stribeck_velocity")
        ],
        ctrlspec=1,
    )
    return spec.compile()


def _segment(p: dict[str, float], name: str, u: np.ndarray, noise: float, seed: int, vin: bool) -> Segment:
    model = _spec_model(p)
    data = mujoco.MjData(model)
    q, qd = np.zeros(u.size), np.zeros(u.size)
    for k in range(u.size):
        q[k], qd[k] = data.qpos[0], data.qvel[0]
        data.ctrl[0] = u[k]
        for _ in range(SUBSTEPS):
            mujoco.mj_step(model, data)
    rng = np.random.default_rng(seed)
    q += noise * rng.standard_normal(u.size)
    qd += 10 * noise * rng.standard_normal(u.size)
    t = np.arange(u.size) / RATE
    col = lambda a: a[:, None]  # noqa: E731
    meta = {"vin": p["dcmotor_voltage_limit"]} if vin else {}
    return Segment(name, t, col(q), col(qd), col(u), col(0 * u), col(0 * u), metadata=meta)


def _log(p: dict[str, float], slow: bool = False, noise: float = 5e-4, vin: bool = True) -> Recording:
    """Steps and a sine (the voltage limit pressed); `slow` adds slow tracking (LuGre's low speeds)."""
    t = np.arange(0.0, 2.0, 1.0 / RATE)
    segs = [_segment(p, "steps", 0.9 * np.sign(np.sin(4.4 * t)) + 0.3 * np.sin(14.5 * t), noise, 0, vin)]
    if slow:
        segs.append(_segment(p, "slow", 0.4 * np.sin(3.1 * t) + 0.05 * np.sin(19.5 * t), noise, 1, vin))
    return Recording([LOAD], segs)


def _start(truth: dict[str, float]) -> dict[str, float]:
    """A datasheet-quality start: every value 30 % off (the phase 0.3 rad)."""
    return {k: v + 0.3 if k == "dcmotor_cogging_phase" else 1.3 * v for k, v in truth.items()}


@pytest.mark.conformance
def test_compiled_fields_and_rollout_match_mujocos_own_dcmotor():
    """Our MJCF, our field writes and our batched rollout all equal MuJoCo's set_to_dcmotor stepped by mj_step."""
    truth = {k: v for ext in EXTENSIONS.values() for k, v in ext.items()} | BASE
    ours = mujoco.MjModel.from_xml_string(bench_xml(LOAD, truth, 1.0 / RATE / SUBSTEPS))
    theirs = _spec_model(truth)
    written = mujoco.MjModel.from_xml_string(bench_xml(LOAD, {k: 1.7 * v for k, v in truth.items()}, 1e-3))
    set_fields(written, truth)
    for f in ("actuator_gainprm", "actuator_dynprm", "actuator_biasprm", "actuator_ctrlspec"):
        np.testing.assert_allclose(getattr(ours, f), getattr(theirs, f), rtol=1e-15, err_msg=f)
        np.testing.assert_allclose(getattr(written, f), getattr(theirs, f), rtol=1e-15, err_msg=f)
    seg = _log(truth, noise=0.0).segments[0]
    bench = Bench(LOAD, truth, 1.0 / RATE / SUBSTEPS, SUBSTEPS)
    q = bench.rollout([truth], [Trial(seg.q_des[:, 0], 0.0, 0.0)]).q
    np.testing.assert_allclose(q[0][0], seg.q[:, 0], atol=1e-12)


def _assert_recovered(fit, truth: dict[str, float]) -> None:
    for name, iv in fit.analysis["intervals"].items():
        assert iv["identified"], (name, iv)
        err = abs(fit.params[name] - truth[name]) / abs(truth[name])
        assert err <= 0.10, (name, fit.params[name], truth[name])


@pytest.mark.parametrize(
    "family", ["mujoco_dcmotor", "mujoco_dcmotor_slew", "mujoco_dcmotor_cogging", "mujoco_dcmotor_inductance"]
)
def test_recovers_each_extension(family):
    """Logged by MuJoCo's own <dcmotor> with 0.5 mrad noise, each family's parameters come back within 10 %."""
    truth = BASE | EXTENSIONS[family]
    rec = _log(truth)
    fixed = {"dcmotor_cogging_periods": 8.0} if "cogging" in family else None
    fit = fit_mujoco_dcmotor(
        rec, "hinge", family, start=_start(truth), fixed=fixed, substeps=SUBSTEPS, budget=20
    )
    assert fit.fixed["dcmotor_voltage_limit"] == 6.0  # the log's vin holds the supply
    assert set(fit.analysis["intervals"]) == set(get_family(family).params) - set(fit.fixed)
    _assert_recovered(fit, truth)
    assert max(fit.position_rmse.values()) < 1e-3


@pytest.mark.slow
def test_recovers_lugre():
    """LuGre's five parameters from a log with steps and slow tracking, within 10 %."""
    truth = BASE | EXTENSIONS["mujoco_dcmotor_lugre"]
    fit = fit_mujoco_dcmotor(
        _log(truth, slow=True),
        "hinge",
        "mujoco_dcmotor_lugre",
        start=_start(truth),
        substeps=SUBSTEPS,
        budget=60,
    )
    _assert_recovered(fit, truth)


def test_motor_scale_unidentified_without_the_supply():
    """Without the supply voltage only K·Vmax/R and K²/R act: K, R and Vmax are flagged, the gains recovered."""
    rec = _log(BASE, vin=False)
    fit = fit_mujoco_dcmotor(rec, "hinge", "mujoco_dcmotor", start=_start(BASE), substeps=SUBSTEPS, budget=20)
    iv = fit.analysis["intervals"]
    assert sorted(fit.unidentified) == [
        "dcmotor_motor_constant",
        "dcmotor_resistance",
        "dcmotor_voltage_limit",
    ]
    assert all("K·Vmax/R" in iv[n]["reason"] for n in fit.unidentified)
    p = fit.params
    stall = p["dcmotor_motor_constant"] * p["dcmotor_voltage_limit"] / p["dcmotor_resistance"]
    assert stall == pytest.approx(0.3 * 6.0 / 2.0, rel=0.1)  # what does act is recovered
    for name in ("stiffness", "damping"):
        assert iv[name]["identified"] and p[name] == pytest.approx(BASE[name], rel=0.1)


@pytest.mark.parametrize("family", sorted(EXTENSIONS))
def test_mjcf_export_replays_our_rollout(family):
    """The export's <dcmotor> in MuJoCo, stepped from the fit's initial state, matches our rollout within 1e-6 rad."""
    params = BASE | EXTENSIONS[family]
    rec = _log(params, noise=0.0)
    ours = simulate_dcmotor(rec, "hinge", family, params, substeps=SUBSTEPS)["steps"]["q"]
    fam = get_family(family)
    chosen = ChosenModel("hinge", fam, {n: params[n] for n in fam.params})
    model = mujoco.MjModel.from_xml_string(render_model([chosen], {"hinge": LOAD}, 1.0 / RATE / SUBSTEPS))
    assert model.actuator_dyntype[0] == mujoco.mjtDyn.mjDYN_DCMOTOR and model.actuator_ctrlspec[0] == 1
    replay = _replay(model, rec.segments[0].q_des[:, 0])
    assert np.max(np.abs(replay - ours)) < 1e-6


def _replay(model: mujoco.MjModel, q_des: np.ndarray, q0: float = 0.0, qd0: float = 0.0) -> np.ndarray:
    """An exported model stepped from the fit's initial state, ctrl = q_des held for each sample's steps."""
    data = mujoco.MjData(model)
    data.qpos[0], data.qvel[0] = q0, qd0
    data.act[:] = initial_act(model, Trial(q_des, q0, qd0))
    out = [data.qpos[0]]
    for u in q_des[:-1]:
        data.ctrl[0] = u
        for _ in range(SUBSTEPS):
            mujoco.mj_step(model, data)
        out.append(data.qpos[0])
    return np.array(out)


def test_joint_fit_pipeline_fits_exports_and_replays():
    """fit_result with family mujoco_dcmotor: from the warm start's gains, one recording trains and one
    validates; the report traces and build_mjcf's file are MuJoCo's and replay the fit within 1e-6 rad."""
    t = np.arange(0.0, 2.0, 1.0 / RATE)
    rec = Recording(
        [LOAD],
        [
            _segment(BASE, "a", 0.9 * np.sign(np.sin(4.4 * t)) + 0.3 * np.sin(14.5 * t), 5e-4, 0, True),
            _segment(BASE, "b", 0.7 * np.sign(np.sin(3.0 * t)) + 0.2 * np.sin(11.0 * t), 5e-4, 1, True),
        ],
    )
    res = fit_result(rec, FitRequest(families=["mujoco_dcmotor"], decimation=SUBSTEPS))
    fit = res.joints["hinge"].models["mujoco_dcmotor"]
    for name in ("stiffness", "damping", "dcmotor_motor_constant", "dcmotor_resistance"):
        assert fit.intervals[name].identified and fit.params[name] == pytest.approx(BASE[name], rel=0.1), name
    assert fit.search is not None and fit.search["held"] == {"dcmotor_voltage_limit": 6.0}
    assert fit.metrics.validation is not None and fit.metrics.validation.position_rmse < 1e-3
    traces = report_data(rec, res)["joints"]["hinge"]["segments"]
    assert max(abs(a - b) for a, b in zip(traces[1]["q_sim"], traces[1]["q"], strict=True)) < 5e-3
    text, findings = build_mjcf(res, rec)
    assert "<dcmotor " in text and any(f.code == "EXPORT.MJCF.dcmotor" for f in findings)
    ours = simulate(rec, "hinge", "mujoco_dcmotor", dict(fit.params), decimation=SUBSTEPS)["b"]["q"]
    seg = rec.segments[1]
    replay = _replay(mujoco.MjModel.from_xml_string(text), seg.q_des[:, 0], seg.q[0, 0], seg.qd[0, 0])
    assert np.max(np.abs(replay - ours)) < 1e-6


def test_bad_requests_are_refused():
    rec = _log(BASE, noise=0.0)
    with pytest.raises(ValueError, match="not a MuJoCo <dcmotor> family"):
        fit_mujoco_dcmotor(rec, "hinge", "dcmotor")
    with pytest.raises(ValueError, match="cogging periods"):
        fit_mujoco_dcmotor(rec, "hinge", "mujoco_dcmotor_cogging")
    with pytest.raises(ValueError, match="not in the log"):
        fit_mujoco_dcmotor(rec, "knee", "mujoco_dcmotor")
    # through the joint fit a missing datasheet value is the request's fault (the API's 4xx, the CLI's message)
    with pytest.raises(FitRequestError, match="metadata cogging_periods"):
        fit_result(rec, FitRequest(families=["mujoco_dcmotor_cogging"]))


def test_a_log_at_several_device_gains_is_refused_with_the_points() -> None:
    """The <dcmotor> holds one kp and voltage limit: a log whose segments run a servo at two firmware kp (device
    units) is refused, naming them, before any rollout (the ladder skips the rung with this reason)."""
    rec = _log(BASE, slow=True, noise=0.0)
    device = [
        Segment(
            s.name, s.t, s.q, s.qd, s.q_des, s.qd_des, s.tau_ff, metadata={"gain_units": "device", "kp": kp}
        )
        for s, kp in zip(rec.segments, (100, 800), strict=True)
    ]
    with pytest.raises(FitRequestError, match=r"2 operating points \(kp 100, kp 800\).*dcmotor families"):
        fit_result(Recording(rec.joints, device), FitRequest(families=["mujoco_dcmotor"]))
