"""MuJoCo's <dcmotor> outside MuJoCo, and a slewed goal in Isaac Lab.

The base `mujoco_dcmotor` family exports to Isaac Lab as DCMotorCfg and to Newton as DrivePD + ClampingDCMotor
(saturation_effort = K·vmax/R, actuator_velocity_limit = vmax/K); `mujoco_dcmotor_slew` and a kernel fit of the
servo goal rate (BAM's STS3215 logs) run in Isaac Lab through the consumer package's slewed-target classes. Each
export is replayed by the real consumer and compared with our own rollout (MuJoCo for the <dcmotor> families, the
kernel for the servo): the replay's RMSE against the log within 10 % of ours (export/consumer_replay.py), and the
two trajectories within a few mrad of each other.
"""

from __future__ import annotations

import json

import pytest
from bam_logs import write_feetech_logs
from export_helpers import make_result, model_entry
from test_mujoco_dcmotor import BASE, EXTENSIONS, SUBSTEPS, _log

from actuator_sysid.consumers.schema import SLEW_PD_API
from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.datasets.recording import Recording
from actuator_sysid.export import render_all, replay
from actuator_sysid.export.isaaclab import actuator_cfgs, cfg_hazards, render_json, render_python
from actuator_sysid.export.newton_usd import build_stage
from actuator_sysid.export.selection import ExportError
from actuator_sysid.fitting.fit import FitRequest, fit_result

DT = 1.0 / 200 / SUBSTEPS  # the <dcmotor> logs: 200 Hz, 5 physics steps a sample
OFF = {"stiffness": 1.25, "damping": 0.8, "dcmotor_resistance": 1.2}  # the exported model is off the log
STS = {"kt": 1.21164, "R": 2.67617, "armature": 0.0284, "friction_base": 0.0524, "friction_viscous": 0.0591}
SERVO_TERMS = ("armature", "friction", "viscous_friction", "goal_rate_limit")


def _dcmotor_result(family: str) -> tuple[dict, object]:
    truth = BASE | EXTENSIONS[family]
    rec = _log(truth, noise=0.0)
    params = {k: v * OFF.get(k, 1.0) for k, v in truth.items()}
    return make_result({"hinge": {family: model_entry(family, params)}}, rec, DT, SUBSTEPS), rec


def _close(r: dict, agree: float) -> None:
    """The consumer's replay as good as our rollout (10 %), and the two trajectories within `agree` rad."""
    assert r["status"] == "ok", r
    for joint, j in r["joints"].items():
        assert j["rmse_ours"] > 1e-3, "the model must be off the log for the bound to mean something"
        assert j["within_tolerance"] and abs(j["rmse_replay"] - j["rmse_ours"]) <= 0.10 * j["rmse_ours"], (
            r["format"],
            joint,
            j,
        )
        assert max(s["rmse_replay_vs_ours"] for s in j["segments"]) < agree, (r["format"], j)


@pytest.mark.conformance
def test_base_dcmotor_replays_in_isaaclab_and_newton() -> None:
    """The mapped DCMotorCfg and the PD + DC clamp stage replay MuJoCo's own rollout of the fit."""
    res, rec = _dcmotor_result("mujoco_dcmotor")
    cfg = json.loads(render_json(res))["actuators"]["hinge"]
    assert cfg["class_type"] == "DCMotorCfg" and cfg["family"] == "mujoco_dcmotor"
    k, r, vmax = (
        BASE["dcmotor_motor_constant"],
        BASE["dcmotor_resistance"] * 1.2,
        BASE["dcmotor_voltage_limit"],
    )
    assert cfg["cfg"]["saturation_effort"] == pytest.approx(k * vmax / r)
    assert cfg["cfg"]["actuator_velocity_limit"] == pytest.approx(vmax / k)
    stage, _ = build_stage(res, rec)
    text = stage.GetRootLayer().ExportToString()
    hazards = {f.code for f in cfg_hazards(actuator_cfgs(res))}
    assert "EXPORT.ISAACLAB.mujoco_dcmotor" in hazards  # the mapping and the inputs MuJoCo does not read
    assert "NewtonDCMotorClampingAPI" in text and "NewtonPDControlAPI" in text
    for fmt in ("isaaclab.py", "isaaclab.json", "newton.usda"):
        _close(replay(res, rec, fmt, segments=["steps"]), 1e-5)


@pytest.mark.conformance
def test_slewed_dcmotor_replays_in_isaaclab_and_newton() -> None:
    """mujoco_dcmotor_slew: our DCMotorGoalSlewCfg in Isaac Lab and our slewed PD drive in Newton, each slew
    starting at the setpoint as MuJoCo's does (Newton's drive started at the joint position strays)."""
    res, rec = _dcmotor_result("mujoco_dcmotor_slew")
    src = render_python(res)
    assert "DCMotorGoalSlewCfg(" in src and "slew_from_target=True" in src
    assert "goal_rate_limit=8.0" in src
    _close(replay(res, rec, "isaaclab.py", segments=["steps"]), 1e-5)
    stage, findings = build_stage(res, rec, families={"hinge": "mujoco_dcmotor_slew"})
    text = stage.GetRootLayer().ExportToString()
    assert SLEW_PD_API in text and "newton:slewFromTarget = 1" in text and "newton:goalRateLimit = 8" in text
    assert "EXPORT.NEWTON.goal_rate_limit" in {f.code for f in findings}
    _close(replay(res, rec, "newton.usda", segments=["steps"]), 1e-5)


@pytest.mark.unit
@pytest.mark.parametrize(
    "family", ["mujoco_dcmotor_lugre", "mujoco_dcmotor_cogging", "mujoco_dcmotor_inductance"]
)
def test_extensions_without_a_consumer_class_are_refused(family: str) -> None:
    res, rec = _dcmotor_result(family)
    with pytest.raises(ExportError, match=f"{family}.*no class for.*'mujoco_dcmotor'"):
        render_json(res)
    with pytest.raises(ExportError, match=f"{family}.*no class for.*'mujoco_dcmotor'"):
        build_stage(res, rec, families={"hinge": family})


# family → ACTUATORS_BEST's class and the terms it adds: the delayed class slews the delayed target (a servo's bus
# delays the goal, its firmware slews it); BAM's friction budget rides on top
SLEWED_CLASSES = {
    "dcmotor": ("DCMotorGoalSlewCfg", {}),
    "dcmotor_delay": ("DelayedDCMotorGoalSlewCfg", {"delay": 3}),
    "dcmotor_stribeck_delay": (
        "DelayedDCMotorBAMFrictionGoalSlewCfg",
        {"delay": 3, "stribeck_friction": 0.03, "stribeck_velocity": 0.3, "stribeck_exponent": 2.0},
    ),
}


@pytest.fixture(scope="module")
def sts_log(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """BAM's STS3215 log the slewed classes replay, simulated once: every family reads the same recording."""
    paths = write_feetech_logs(  # the sine's target runs up to 12 rad/s: the goal rate acts
        tmp_path_factory.mktemp("sts"),
        {**STS, "max_velocity": 4.0},
        kps=(16,),
        runs=("sin_time_square", "lift_and_drop"),
    )
    return read_paths(paths)


@pytest.mark.conformance
@pytest.mark.parametrize("family", list(SLEWED_CLASSES))
def test_servo_goal_rate_replays_in_isaaclab(sts_log: Recording, family: str) -> None:
    """BAM's STS3215 (goal slewed at 4 rad/s): a kernel fit with goal_rate_limit is ACTUATORS_BEST's slewed
    class (with a delay, the delayed target slewed; with BAM's friction budget, that class), its goal starting at
    the measured position, replayed within 10 % of our kernel (the export at the log's own kp and vin: the law
    ties the envelope to the gain there)."""
    cls, extra = SLEWED_CLASSES[family]
    rec = sts_log
    joint = rec.joints[0].name
    vin = float(rec.segments[0].metadata["vin"])
    ktr, kp = STS["kt"] / STS["R"], float(rec.segments[0].metadata["kp"])
    sat = ktr * vin * 0.97
    damping = STS["kt"] ** 2 / STS["R"]
    params = {  # BAM's constants at the log's kp and vin (tests/test_servo_laws.py), the goal rate off
        "stiffness": ktr * vin * 0.166 * kp,
        "damping": damping,
        "saturation_effort": sat,
        "actuator_velocity_limit": sat / damping,
        "actuator_effort_limit": 1e3,
        "armature": STS["armature"],
        "friction": STS["friction_base"],
        "viscous_friction": STS["friction_viscous"],
        "goal_rate_limit": 3.0,
        **extra,
    }
    dt = float(rec.segments[0].dt) / 2
    terms = (*SERVO_TERMS, *(k for k in extra if k.startswith("stribeck")))
    res = make_result({joint: {family: model_entry(family, params, terms)}}, rec, dt, 2)
    src = render_python(res, rec=rec)
    assert "ACTUATORS_BEST" in src and f" {cls}(" in src
    names = [s.name for s in rec.segments]
    r = replay(res, rec, "isaaclab.py", segments=names)
    assert set(r["joints"]) == {joint, f"{joint} (best)"}, r
    best = {**r, "joints": {k: v for k, v in r["joints"].items() if k.endswith("(best)")}}
    _close(best, 1e-5)
    if family == "dcmotor":  # ACTUATORS: Isaac Lab's DCMotorCfg, which holds no goal rate
        unslewed = r["joints"][joint]
        assert max(s["rmse_replay_vs_ours"] for s in unslewed["segments"]) > 1e-2, unslewed
    stage, findings = build_stage(res, rec)  # Newton: the consumer package's PD drive on a slewed target
    text = stage.GetRootLayer().ExportToString()
    assert SLEW_PD_API in text and "newton:goalRateLimit = 3" in text
    (note,) = [f for f in findings if f.code == "EXPORT.NEWTON.goal_rate_limit"]
    assert note.severity == "info" and SLEW_PD_API in note.message
    # Coulomb friction is MuJoCo's soft frictionloss in Newton (2.2e-3 rad from our hard stop on these logs), a
    # hard stop in the friction budget's clamp (9e-8 rad)
    _close(replay(res, rec, "newton.usda", segments=names), 1e-5 if "stribeck" in family else 5e-3)


@pytest.mark.conformance
def test_a_fitted_servo_law_exports_pass_their_validation(tmp_path) -> None:
    """A Feetech fit through the pipeline (the law's goal rate fitted): every export validates and replays, the
    verdict is not poor, and ACTUATORS (Isaac Lab's own DCMotorCfg, no slew) is shown apart beside ACTUATORS_BEST
    rather than failing the fit."""
    paths = write_feetech_logs(
        tmp_path, {**STS, "max_velocity": 4.0}, kps=(16, 32), runs=("sin_time_square", "up_and_down")
    )
    rec = read_paths(paths)
    res = fit_result(rec, FitRequest(families=["dcmotor"], holdout="kp=32"))
    rate = res.joints[rec.joints[0].name].models["dcmotor"].params["goal_rate_limit"]
    assert rate == pytest.approx(4.0, rel=0.1)  # the law's goal rate comes back: the slew binds
    files = render_all(res, rec)
    doc = json.loads(files["validation.json"])
    assert doc["passed"] and not [f for f in doc["findings"] if f["severity"] == "error"], doc["findings"]
    assert SLEW_PD_API in files["newton.usda"] and "DCMotorGoalSlewCfg(" in files["isaaclab.py"]
    assert doc["verdict"]["verdict"] != "poor", doc["verdict"]
    row = doc["replay"]["isaaclab.py"]["joints"][rec.joints[0].name]
    assert row["shown_apart"] and row["approximates"] == ["goal_rate_limit"]
    assert any("shown apart" in r for r in doc["verdict"]["reasons"])
    for fmt in ("newton.usda", "mjcf.xml"):
        assert doc["replay"][fmt]["within_tolerance"], doc["replay"][fmt]


@pytest.mark.unit
@pytest.mark.parametrize(("from_target", "first_goal"), [(True, 1.0), (False, 0.02)])
def test_newtons_slewed_drive_starts_its_goal_where_it_is_told(from_target: bool, first_goal: float) -> None:
    """DriveSlewedPD's first goal after a reset: the target itself with slewFromTarget (MuJoCo's slew state starts
    at the setpoint), else one rate·dt step from the joint position; then it slews from the goal it kept."""
    import warp as wp

    from actuator_sysid.consumers.newton import DriveSlewedPD

    args = DriveSlewedPD.resolve_arguments(
        {"kp": 10.0, "goal_rate_limit": 2.0, "slew_from_target": from_target}
    )
    f32 = lambda v: wp.array([v], dtype=wp.float32, device="cpu")  # noqa: E731
    drive = DriveSlewedPD(
        f32(args["kp"]), f32(args["kd"]), f32(args["goal_rate_limit"]), None, f32(args["slew_from_target"])
    )
    drive.finalize(wp.get_device("cpu"), 1)
    state, after = drive.state(1, wp.get_device("cpu")), drive.state(1, wp.get_device("cpu"))
    idx = wp.array([0], dtype=wp.uint32, device="cpu")
    forces = f32(0.0)
    for step, target in enumerate((1.0, -1.0)):
        drive.compute(
            f32(0.0), f32(0.0), f32(target), f32(0.0), None, idx, idx, idx, idx, forces, state, 0.01
        )
        want = first_goal if step == 0 else first_goal - 0.02
        assert forces.numpy()[0] == pytest.approx(10.0 * want, rel=1e-6), (step, forces.numpy())
        drive.update_state(state, after)
        state, after = after, state
