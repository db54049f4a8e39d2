"""One compute path and one kind object per fit (issue 23): pipeline.compute_robot_fit on a Newton-made arm log,
its progress and outputs, and service/kinds.py's kind_of lookup."""

from __future__ import annotations

import numpy as np
import pytest
from robot_sim import robot_recording, simulate_newton_log
from test_robot_torque import DEC, TRUTH, load_arm, multisine

from actuator_sysid.files import json_safe
from actuator_sysid.fitting.fit import FitRequestError
from actuator_sysid.fitting.result import RobotResult
from actuator_sysid.fitting.robot import RobotFitOptions
from actuator_sysid.pipeline import STAGE_STORE, compute_robot_fit
from actuator_sysid.service import robots
from actuator_sysid.service.kinds import JOINT, ROBOT, kind_of

KP, KD, DELAY = 150.0, 4.0, 2


@pytest.fixture(scope="module")
def arm_log(tmp_path_factory: pytest.TempPathFactory):
    """The two-link arm of test_robot_torque.py and a Newton-made log of it, joints unnamed in the log."""
    arm = load_arm(tmp_path_factory.mktemp("arm"))
    cmd = multisine(400, (0.8, 0.6), seed=3)
    q, qd = simulate_newton_log(arm, cmd, decimation=DEC, delay=DELAY, kp=KP, kd=KD, q0=np.zeros(2), **TRUTH)
    rec = robot_recording(arm, cmd, q, qd, kp=KP, kd=KD)
    rec.metadata["joint_names_from"] = (
        "robot"  # as the CLI and the upload mark a log read in the model's order
    )
    return arm, rec


def test_the_robot_path_fits_renders_replays_and_traces(arm_log) -> None:
    """Progress rises to the store stage; the result JSON is the typed result's; the exports are rendered and
    replayed, the model named as asked, the joint mapping stated and the traces drawn for every joint."""
    arm, rec = arm_log
    seen: list[tuple[float, str]] = []
    opts = RobotFitOptions(decimation=DEC, delay=DELAY, fit_bias=False, max_iterations=2)
    out = compute_robot_fit(rec, arm, opts, lambda f, m: seen.append((f, m)), model_name="arm2.xml")
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and 0.0 < fractions[0] and seen[-1] == (1.0, STAGE_STORE), seen
    assert any("whole robot: mujoco" in m for _, m in seen), seen  # the replays report through it too
    assert isinstance(out.typed, RobotResult)
    assert out.result == json_safe(out.typed.to_json())
    assert out.result["robot"]["path"] == "arm2.xml"
    assert out.result["joint_mapping"].startswith("unnamed log taken in the model's actuated-joint order")
    assert {"isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"} <= set(out.exports)
    assert set(out.result["replays"]["consumers"]) == {"isaaclab", "newton", "mujoco"}
    assert out.result["verdict"] == json_safe(out.typed.verdict.to_json())
    assert set(out.report["joints"]) == set(arm.joint_names) and len(out.report["t"]) > 0
    assert set(out.files()) == {"fit.json", *out.exports}


def test_the_robot_path_without_replays_or_traces(arm_log) -> None:
    """replay=False (the service's option) leaves the replays out; traces=False (the CLI) the report."""
    arm, rec = arm_log
    opts = RobotFitOptions(decimation=DEC, delay=DELAY, fit_bias=False, max_iterations=1)
    out = compute_robot_fit(rec, arm, opts, replay=False, traces=False)
    assert "replays" not in out.result and out.report == {}
    assert out.result["robot"]["path"] == str(arm.path) and "mjcf.xml" in out.exports


def test_kind_of_reads_the_request() -> None:
    """A request without a kind is a joint fit, "robot" a whole-robot fit, anything else a 4xx naming both."""
    assert kind_of({}) is JOINT and kind_of(None) is JOINT and kind_of({"kind": "robot"}) is ROBOT
    with pytest.raises(FitRequestError, match="'arm' is unknown; the kinds are joint, robot"):
        kind_of({"kind": "arm"})
    stored = {"verdict": {"verdict": "good"}}
    fit = {
        "result": {
            "kind": "robot",
            "exports": {"newton": {"dj001": []}},
            "replays": {"within_tolerance": True},
        }
    }
    assert JOINT.validation(fit, stored) is stored
    assert (
        ROBOT.validation(fit, None)
        == robots.export_validation(fit)
        == {
            "kind": "robot",
            "exports": {"newton": {"dj001": []}},
            "replays": {"within_tolerance": True},
        }
    )
