"""A torque-driven arm's verdict reads short forward windows and the torque prediction, not the drifting replay.

The log is made by Newton alone (tests/robot_sim.py: DrivePD with kp = kd = 0 reading the logged effort, MuJoCo's
C solver) on a two-link arm whose links are heavier than the model the fit is given, as a real arm's CAD inertias
are approximate. Without a controller the long open-loop replay of the held-out span drifts even at the true
joint terms; the windows and the torque prediction do not.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from robot_sim import ARM_TEMPLATE as ARM_XML
from robot_sim import torque_driven_log

from actuator_sysid.files import json_safe
from actuator_sysid.fitting import robot_judge
from actuator_sysid.fitting.result import RobotResult
from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot, prepare_fit
from actuator_sysid.fitting.robot.output import result_lines
from actuator_sysid.fitting.robot.result import build_result
from actuator_sysid.fitting.robot.torque_check import window_replays
from actuator_sysid.fitting.robot.validate import replay_validation, validate, with_held_out_checks
from actuator_sysid.models.robot import RobotModel, load_robot

MODEL_MASS, TRUE_MASS = (10.0, 5.0), (10.4, 5.2)  # kg: the log's links are 4 % heavier than the model's
LOG_DT, DEC, DELAY, SAMPLES = 0.005, 2, 2, 1600
TRUTH = {  # per joint (yaw, pitch): armature kg·m², viscous N·m·s/rad, Coulomb frictionloss N·m
    "armature": np.array([0.1, 0.05]),
    "damping": np.array([1.0, 0.5]),
    "friction": np.array([6.0, 1.5]),
}


def _arm(folder: Path, name: str, mass: tuple[float, float]) -> RobotModel:
    path = folder / f"{name}.xml"
    path.write_text(ARM_XML.format(m1=mass[0], m2=mass[1]))
    return load_robot(path)


def multisine(samples: int, amplitude: tuple[float, ...], seed: int = 0) -> np.ndarray:
    """(samples + 1, J) efforts: four sines per joint (0.7–4.1 Hz), random phases, N·m."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples + 1) * LOG_DT
    out = np.zeros((samples + 1, len(amplitude)))
    for j, amp in enumerate(amplitude):
        for f in (0.7, 1.3, 2.9, 4.1):
            out[:, j] += amp / 2 * np.sin(2 * math.pi * f * t + rng.uniform(0, 2 * math.pi))
    return out


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The model the fit is given, the log its heavier twin made, and the fit's prepared data."""
    folder = tmp_path_factory.mktemp("arm")
    model, heavy = _arm(folder, "model", MODEL_MASS), _arm(folder, "heavy", TRUE_MASS)
    log = torque_driven_log(
        heavy, multisine(SAMPLES, (20.0, 10.0)), TRUTH, log_dt=LOG_DT, decimation=DEC, delay=DELAY
    )
    opts = RobotFitOptions(decimation=DEC)
    data, prob, gains_known = prepare_fit(log["rec"], model, opts)
    return {"model": model, "log": log, "opts": opts, "data": data, "prob": prob, "gains_known": gains_known}


def _terms(friction_scale: float) -> dict[str, np.ndarray]:
    z = np.zeros((1, 2))
    return {
        "armature": TRUTH["armature"][None],
        "viscous_friction": TRUTH["damping"][None],
        "friction": TRUTH["friction"][None] * friction_scale,
        "stiffness": z,
        "damping": z,
        "encoder_offset": z,
    }


def judged(case: dict, fitted: dict[str, np.ndarray], delay: int, dec: int) -> RobotResult:
    """The result of terms set by hand, validated and judged as fit_robot validates and judges its own."""
    model, prob, data, opts = case["model"], case["prob"], case["data"], case["opts"]
    v = validate(model, prob, data, fitted, delay, case["gains_known"], opts)
    v = replace(v, motion=robot_judge.motion_stats(data.q[data.split :], prob.names))
    v = with_held_out_checks(model, prob, data, fitted, delay, opts, v)
    # the training RMSE as the fit reports it: coupled windows of window_s over the training span
    train = replace(data, val_pieces=[(0, int(data.split))])
    err, _, _ = window_replays(model, prob, train, fitted, delay, dec, opts.window_s)
    stats = {"rmse": float(np.sqrt(np.mean(err**2)))}
    res = build_result(model, prob, data, fitted, delay, "fixed", v, stats, opts, {})
    return replace(res, verdict=robot_judge.robot_verdict(res))


def _judged(case: dict, fitted: dict[str, np.ndarray]) -> RobotResult:
    return judged(case, fitted, DELAY, DEC)


def assert_good_by_windows_and_torque(res: RobotResult) -> None:
    """A torque-driven fit judged good by its windows and torque prediction, the open-loop replay only shown:
    the verdict survives fit.json, and the replay alone would not pass it."""
    assert robot_judge.torque_driven_checked(res.validation)
    assert "shown, not judged" in res.validation.replay
    assert res.verdict is not None and res.verdict.verdict == "good", res.verdict.reasons
    checks = {c.check for c in res.verdict.checks}
    assert {"window_replay", "torque_prediction", "open_loop_shown"} <= checks
    assert "validation_error" not in checks
    stored = RobotResult.from_json(json.loads(json.dumps(json_safe(res.to_json()))))
    assert robot_judge.robot_verdict(stored) == res.verdict  # the figures survive fit.json
    shown = {k: {"range": m["range"], "noise": m["noise"]} for k, m in res.validation.motion.items()}
    by_replay = robot_judge.robot_verdict(replace(res, validation=replace(res.validation, motion=shown)))
    assert by_replay.verdict != "good", by_replay.reasons  # the drifting replay alone would not pass it


def _status(res: RobotResult, check: str, joint: str) -> str:
    assert res.verdict is not None
    return next(c.status for c in res.verdict.checks if c.check == check and c.reason.startswith(joint))


@pytest.mark.unit
def test_true_terms_are_good_though_the_open_loop_replay_drifts(case: dict) -> None:
    """At the true joint terms on the 4 %-light model: the long replay drifts past 0.1 rad and, judged as a
    position-controlled fit's, is worse than good (its error exceeds training's), yet the windows and the torque
    prediction are good. Measured: drift 0.10 rad (long-replay RMSE 0.035 rad against 0.013 rad training), window
    RMSE 1.7 % and 0.9 % of a window's motion, torque RMSE 5.0 % and 4.9 % of the effort (yaw, pitch)."""
    fitted = _terms(1.0)
    ((rep, _),) = replay_validation(
        case["model"], case["prob"], case["data"], fitted, DELAY, DEC, beside=False
    )
    drift = np.abs(rep - case["data"].q[case["data"].split :]).max()
    assert drift > 0.1, drift
    res = _judged(case, fitted)
    assert_good_by_windows_and_torque(res)
    for nm in ("yaw", "pitch"):
        m = res.validation.motion[nm]
        assert m["window_s"] == pytest.approx(0.25) and m["windows"] >= 5
        assert m["window_rmse"] < 0.03 * m["window_motion"], m
        assert m["torque_rmse"] < 0.08 * m["effort_rms"] and m["torque_r2"] > 0.99, m


@pytest.mark.unit
@pytest.mark.parametrize("scale", [0.7, 1.3])
def test_friction_thirty_percent_off_is_judged_worse(case: dict, scale: float) -> None:
    """Coulomb friction 30 % off on both joints, every other term true: the heavily rubbing yaw joint's windows
    leave the good band (measured ≈ 11–13 % of a window's motion) and the verdict is worse than good."""
    res = _judged(case, _terms(scale))
    assert res.verdict is not None and res.verdict.verdict in ("usable", "poor"), res.verdict.reasons
    assert _status(res, "window_replay", "yaw") != "ok"
    m = res.validation.motion["yaw"]
    good = _judged(case, _terms(1.0)).validation.motion["yaw"]
    assert m["window_rmse"] > 3 * good["window_rmse"] and m["torque_rmse"] > 1.5 * good["torque_rmse"]


@pytest.mark.slow
def test_whole_robot_fit_of_the_light_model_is_judged_good(case: dict) -> None:
    """fit_robot on the log with the approximate model, no encoder bias (the yaw joint carries no gravity, so a
    yaw bias is unidentified and flagged apart from this check): its verdict reads the torque-driven checks and is
    good, its friction near the truth, while the held-out replay it shows has drifted. Measured: friction 5.96
    and 1.45 N·m, windows 0.9 % of a window's motion, long-replay RMSE 0.029 rad, 1 s fit."""
    opts = RobotFitOptions(decimation=DEC, max_iterations=3, fit_bias=False)
    res = fit_robot(case["log"]["rec"], case["model"], opts)
    assert res.verdict is not None and res.verdict.verdict == "good", res.verdict.reasons
    assert robot_judge.torque_driven_checked(res.validation)
    assert any(c.check == "open_loop_shown" for c in res.verdict.checks)
    for k, nm in enumerate(("yaw", "pitch")):
        assert res.groups[nm].friction == pytest.approx(TRUTH["friction"][k], rel=0.1)
    lines = "\n".join(result_lines(res))
    assert "s windows" in lines and "shown, not judged" in lines
