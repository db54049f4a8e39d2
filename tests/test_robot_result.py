"""The whole-robot fit's typed result (fitting/result.py RobotResult): a real fit's record writes fit.json's keys in
their order, reads back from that JSON unchanged, and a stored result keeps the keys this version does not name.

The log is made by Newton alone (tests/robot_sim.py) on the two-link arm of tests/test_robot_torque.py; the fits
are short (one iteration), since only the result's form is under test here.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from robot_sim import robot_recording, simulate_newton_log
from test_robot_torque import DEC, TRUTH, load_arm, multisine

from actuator_sysid.datasets.recording import Recording
from actuator_sysid.fitting.result import BoundHit, RobotGroup, RobotResult, Verdict, as_robot_result
from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot, isaaclab_dict
from actuator_sysid.models.robot import RobotModel

KP, KD, DELAY = 150.0, 4.0, 2
TOP = [  # fit.json's top-level keys of a fit_robot result, in the order the fit has always written them
    "kind",
    "robot",
    "joint_mapping",
    "groups",
    "motor_envelope",
    "gains",
    "bounds",
    "encoder_bias",
    "delay_steps",
    "delay",
    "sim",
    "validation",
    "training",
    "wall_s",
    "world_steps",
    "world_steps_per_s",
    "effort_mode",
    "assumptions",
    "intervals",
    "correlations",
    "identifiability",
    "verdict",
]


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    return load_arm(tmp_path_factory.mktemp("arm"))


@pytest.fixture(scope="module")
def log(arm: RobotModel) -> Recording:
    cmd = multisine(200, (0.8, 0.6), seed=7)
    q, qd = simulate_newton_log(arm, cmd, decimation=DEC, delay=DELAY, kp=KP, kd=KD, q0=np.zeros(2), **TRUTH)
    return robot_recording(arm, cmd, q, qd, kp=KP, kd=KD)


@pytest.mark.parametrize("search", ["decoupled", "coupled"])
def test_a_real_robot_fit_round_trips_through_its_json(arm: RobotModel, log: Recording, search: str) -> None:
    """The record's JSON has fit.json's keys in order (the coupled path states its search after the figures, the
    decoupled path before them and with its own statistics); RobotResult.from_json gives it back exactly, and the
    typed fields read what the JSON holds."""
    res = fit_robot(log, arm, RobotFitOptions(decimation=DEC, delay=DELAY, search=search, max_iterations=1))
    doc = res.to_json()
    assert list(doc) == TOP
    back = RobotResult.from_json(json.loads(json.dumps(doc)))
    assert back.to_json() == doc and json.dumps(back.to_json()) == json.dumps(doc)
    assert not back.extra and all(not g.extra for g in back.groups.values())
    training = list(doc["training"])
    if search == "coupled":
        assert training[-3:] == ["search", "search_s", "start"] and "coupled_batches" not in training
        assert "decoupled_fit" not in doc["validation"]
    else:
        assert training[2] == "search" and "delay_coupled_rmse" in training
        assert doc["validation"]["decoupled_fit"]["delay_steps"] == DELAY
    assert isinstance(res.groups["pitch"], RobotGroup) and isinstance(res.verdict, Verdict)
    assert res.groups["pitch"].armature == doc["groups"]["pitch"]["armature"]
    assert res.validation.rmse == doc["validation"]["rmse"] and res.delay_steps == DELAY
    assert all(isinstance(e, BoundHit) for e in res.bounds.at_bound)
    assert isaaclab_dict(back) == isaaclab_dict(res)


def test_a_stored_result_keeps_the_keys_this_version_does_not_name(arm: RobotModel, log: Recording) -> None:
    """A fit.json with keys added by another version, at the top, in a group and in the validation, reads as a
    record and writes them back where they stood; as_robot_result passes a record through."""
    res = fit_robot(
        log, arm, RobotFitOptions(decimation=DEC, delay=DELAY, search="coupled", max_iterations=1)
    )
    doc = res.to_json()
    stored = {"future_top": {"x": 1}, **doc}
    stored["groups"] = {g: {**e, "future_term": 0.5} for g, e in doc["groups"].items()}
    stored["validation"] = {**doc["validation"], "future_split": [1, 2]}
    typed = as_robot_result(stored)
    assert typed.extra == {"future_top": {"x": 1}}
    assert typed.groups["yaw"].extra == {"future_term": 0.5} and typed.validation.extra["future_split"] == [
        1,
        2,
    ]
    again = typed.to_json()
    assert again == stored and list(again) == list(stored)
    assert list(again["groups"]["yaw"])[-1] == "future_term"
    assert as_robot_result(typed) is typed
