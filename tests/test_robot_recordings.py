"""A whole-robot fit over several recordings (issue 23, acceptance 3), validated by whole recordings.

Three recordings of the two-link arm of tests/test_robot_torque.py, each made by Newton alone from its own rest
state (tests/robot_sim.py: Newton's DrivePD at the logged gains, its delay buffer, MuJoCo's C solver) under
its own multi-sine targets: the fit trains on the first two and replays the third whole from its first
measured state (the default, train earlier, validate later), or holds out the recording a KEY=VALUE names.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from robot_sim import simulate_newton_log
from test_robot_torque import DEC, LOG_DT, TERMS, TRUTH, load_arm, multisine

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.export.robot_common import replay_log
from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot, prepare_fit, result_lines
from actuator_sysid.models.robot import RobotError, RobotModel

KP, KD, DELAY, SAMPLES = 150.0, 4.0, 3, 300


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    return load_arm(tmp_path_factory.mktemp("arm"))


@pytest.fixture(scope="module")
def three(arm: RobotModel) -> Recording:
    """Three recordings ("a", "b", "c"; metadata day 1, 1, 2), each from rest, targets multi-sine about 0."""
    segs = []
    for k, (name, day) in enumerate((("a", 1), ("b", 1), ("c", 2))):
        cmd = multisine(SAMPLES, (0.8, 0.6), seed=10 + k)
        q, qd = simulate_newton_log(
            arm, cmd, decimation=DEC, delay=DELAY, kp=KP, kd=KD, log_dt=LOG_DT, q0=np.zeros(2), **TRUTH
        )
        z = np.zeros_like(q)
        meta = {"kp": KP, "kd": KD, "day": day}
        segs.append(Segment(name, np.arange(q.shape[0]) * LOG_DT, q, qd, cmd, z, z, metadata=meta))
    return Recording([JointInfo(n) for n in arm.joint_names], segs)


def test_several_recordings_recover_the_arm_and_validate_whole(arm: RobotModel, three: Recording) -> None:
    """Armature, viscous and Coulomb friction within 10 % on both joints and the delay exact from two
    recordings; the third, replayed whole from its own start, validates. Measured: every term within 1e-3
    relative, held-out RMSE 1e-5 rad against 0.05 rad for the model file's own terms."""
    res = fit_robot(three, arm, RobotFitOptions(decimation=DEC, max_iterations=3))
    v = res.validation
    assert v.split == "recordings"
    assert v.recordings["training"] == ["a", "b"] and v.validated_recordings == ["c"]
    assert res.delay_steps == DELAY and res.gains == "from the log"
    for k, nm in enumerate(arm.joint_names):
        for sim_name, term in TERMS.items():
            got = getattr(res.groups[nm], term)
            assert got == pytest.approx(TRUTH[sim_name][k], rel=0.1), (nm, term, got)
    assert v.rmse < 1e-3 and v.model_defaults_rmse > 10 * v.rmse, v
    assert "recordings c" in "\n".join(result_lines(res))
    lg = replay_log(res, three)  # the exports' replays run on the held-out recording, whole
    np.testing.assert_array_equal(lg.q, three.segments[2].q)


def test_holdout_names_the_validation_recordings_and_bad_splits_are_refused(
    arm: RobotModel, three: Recording
) -> None:
    """--holdout day=1 validates on a and b (the joint fit's KEY=VALUE semantics); a value no recording has,
    one that leaves nothing to train on, and recordings that state different gains are refused by name."""
    data, _, _ = prepare_fit(three, arm, RobotFitOptions(decimation=DEC, holdout="day=1"))
    assert data.recordings["validation"] == ["a", "b"] and data.recordings["training"] == ["c"]
    assert data.val_pieces == [(SAMPLES + 1, 2 * SAMPLES + 2), (2 * SAMPLES + 2, 3 * SAMPLES + 3)]
    assert (
        int(data.first_of(np.array([2 * SAMPLES + 10]))[0]) == 2 * SAMPLES + 2
    )  # no command from b before c
    assert np.all(data.starts + data.length < SAMPLES + 1)  # training windows stay inside c
    with pytest.raises(RobotError, match=r"no segment has day = 3"):
        prepare_fit(three, arm, RobotFitOptions(decimation=DEC, holdout="day=3"))
    one = Recording(three.joints, three.segments[:1])
    with pytest.raises(RobotError, match=r"none is left to train on"):
        prepare_fit(one, arm, RobotFitOptions(decimation=DEC, holdout="day=1"))
    odd = Recording(
        three.joints, [*three.segments[:2], Segment(**{**vars(three.segments[2]), "metadata": {"kp": 1.0}})]
    )
    with pytest.raises(
        RobotError, match=r"recording c states kp \[1.0, 1.0\] where a states \[150.0, 150.0\]"
    ):
        prepare_fit(odd, arm, RobotFitOptions(decimation=DEC))


def test_several_files_are_the_recordings_of_one_fit(
    arm: RobotModel, three: Recording, tmp_path: Path
) -> None:
    """Three PACE-style .pt files (no joint names, no gains) read as one log: each file is a recording, the last
    validates; the CLI's `fit a.pt b.pt c.pt --robot` reads them so (measured end to end: 0.0033 rad held out,
    every export replayed within 10 % of ours)."""
    import torch

    from actuator_sysid.datasets.readers import ReadOptions, read_paths

    paths = []
    for k, seg in enumerate(three.segments):
        paths.append(tmp_path / f"rec{k}.pt")
        torch.save(
            {
                "time": torch.tensor(seg.t),
                "dof_pos": torch.tensor(seg.q),
                "dof_vel": torch.tensor(seg.qd),
                "des_dof_pos": torch.tensor(seg.q_des),
            },
            paths[-1],
        )
    rec = read_paths(paths, None, ReadOptions(joint_names=arm.joint_names))
    data, _, _ = prepare_fit(rec, arm, RobotFitOptions(decimation=DEC, kp=KP, kd=KD))
    assert len(data.recordings["training"]) == 2 and data.recordings["validation"][0].startswith("rec2")
    np.testing.assert_array_equal(data.q[data.split :], three.segments[2].q)
