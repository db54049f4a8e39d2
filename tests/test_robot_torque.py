"""A torque-driven arm in the whole-robot fit (issue 23, acceptance 4): feed-forward effort and zero gains.

The log is made by Newton alone (tests/robot_sim.py: Newton's DrivePD with kp = kd = 0 reading the logged
feed-forward effort from control.joint_act, Newton's delay buffer, MuJoCo's C solver) on a two-link arm written
here in MJCF: a yaw joint with no gravity load and a pitch joint hanging under gravity, both driven by a
multi-sine effort only, as a current-controlled arm is logged. The arm is heavy enough that its yaw friction
(6 N·m) is beyond the 5.01 N·m cap the fit once had; its bounds now scale with the model and the log.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import pythonpath
from robot_sim import ARM_TEMPLATE, robot_recording, simulate_newton_log, torque_driven_log

from actuator_sysid.export.robot import write_robot_exports
from actuator_sysid.fitting.robot import RobotFitOptions, bound_report, fit_robot, prepare_fit
from actuator_sysid.models.articulated import ArticulatedRollout, JointTerms, physics_targets
from actuator_sysid.models.robot import RobotError, RobotModel, load_robot
from actuator_sysid.models.warmup import kernel_modules

ARM_XML = ARM_TEMPLATE.format(m1=10, m2=5)  # the link masses of the log
LOG_DT, DEC, DELAY, SAMPLES = 0.005, 2, 2, 600
TRUTH = {  # per joint (yaw, pitch): armature kg·m², viscous N·m·s/rad, Coulomb frictionloss N·m
    "armature": np.array([0.1, 0.05]),
    "damping": np.array([1.0, 0.5]),
    "friction": np.array([6.0, 1.5]),
}
TERMS = {"armature": "armature", "damping": "viscous_friction", "friction": "friction"}


def load_arm(folder: Path) -> RobotModel:
    """The two-link arm of ARM_XML, written into `folder` and loaded as the fit would load it."""
    path = folder / "arm2.xml"
    path.write_text(ARM_XML)
    return load_robot(path)


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    return load_arm(tmp_path_factory.mktemp("arm"))


def multisine(samples: int, amplitude: tuple[float, ...], seed: int = 0) -> np.ndarray:
    """(samples + 1, J) feed-forward efforts: four sines per joint (0.7–4.1 Hz), random phases, N·m."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples + 1) * LOG_DT
    out = np.zeros((samples + 1, len(amplitude)))
    for j, amp in enumerate(amplitude):
        for f in (0.7, 1.3, 2.9, 4.1):
            out[:, j] += amp / 2 * np.sin(2 * math.pi * f * t + rng.uniform(0, 2 * math.pi))
    return out


@pytest.fixture(scope="module")
def torque_log(arm: RobotModel) -> dict:
    ff = multisine(SAMPLES, (20.0, 10.0))
    return torque_driven_log(arm, ff, TRUTH, log_dt=LOG_DT, decimation=DEC, delay=DELAY)


def test_coupled_rollouts_take_the_feed_forward_effort(arm: RobotModel, torque_log: dict) -> None:
    """Our Warp rollout and the MuJoCo C replay path, with zero gains and the logged effort, against Newton's own
    DrivePD over the first half second; in Newton's implicit mode as well (our implicit path hands the effort to
    Newton's actuator as joint_act). Without the effort the arm is elsewhere, so the comparison can fail."""
    n = 100  # measured: within 4e-7 rad with the effort, 0.95 rad off without it
    ff, cmd = torque_log["ff"][: n + 1], torque_log["cmd"][: n + 1]
    ref_q = torque_log["q"][: n + 1]
    z = np.zeros((1, 2))
    terms = JointTerms(
        stiffness=z,
        damping=z,
        armature=TRUTH["armature"][None],
        viscous_friction=TRUTH["damping"][None],
        friction=TRUTH["friction"][None],
        encoder_offset=z,
        joint_effort_limit=np.full((1, 2), 1e6),
    )
    s = np.zeros(1, int)
    tq, tff = physics_targets(cmd, s, n, DEC, DELAY), physics_targets(ff, s, n, DEC, DELAY)
    for engine in (ArticulatedRollout(arm, 1), ArticulatedRollout(arm, 1, mujoco_cpu=True)):
        ours, _ = engine.run(z, z, tq, np.zeros_like(tq), terms, DEC, LOG_DT / DEC, tff)
        np.testing.assert_allclose(ours[:, 0], ref_q, atol=2e-4)
    dropped, _ = ArticulatedRollout(arm, 1, mujoco_cpu=True).run(
        z, z, tq, np.zeros_like(tq), terms, DEC, LOG_DT / DEC
    )
    assert np.abs(dropped[:, 0] - ref_q).max() > 0.1  # the effort matters
    imp_ref, _ = simulate_newton_log(
        arm,
        cmd,
        decimation=DEC,
        delay=DELAY,
        kp=0.0,
        kd=0.0,
        log_dt=LOG_DT,
        tau_ff=ff,
        q0=np.zeros(2),
        effort_mode="implicit",
        **TRUTH,
    )
    imp, _ = ArticulatedRollout(arm, 1, mujoco_cpu=True, effort_mode="implicit").run(
        z, z, tq, np.zeros_like(tq), terms, DEC, LOG_DT / DEC, tff
    )
    np.testing.assert_allclose(imp[:, 0], imp_ref, atol=2e-4)


def test_torque_driven_arm_recovers_friction_damping_armature(
    arm: RobotModel, torque_log: dict, tmp_path: Path
) -> None:
    """Friction, viscous damping and armature within 10 % on both joints, the delay exact, the gains stated as
    zero, no term at a bound. Measured: every term within 1e-4 relative, held-out RMSE 2e-6 rad against 1.1 rad
    for the model file's own terms, 11 s on the 2 shared cores."""
    res = fit_robot(torque_log["rec"], arm, RobotFitOptions(decimation=DEC, max_iterations=3))
    assert res.gains.startswith("zero (kp = kd = 0)"), res.gains
    assert res.delay_steps == DELAY
    for k, nm in enumerate(arm.joint_names):
        e = res.groups[nm]
        assert e.stiffness == 0.0 and e.damping == 0.0
        for sim_name, term in TERMS.items():
            assert getattr(e, term) == pytest.approx(TRUTH[sim_name][k], rel=0.1), (nm, term, e)
    assert res.bounds.at_bound == (), res.bounds.at_bound
    assert res.bounds.bounds["yaw.friction"][1] > TRUTH["friction"][0]
    v = res.validation
    assert v.rmse < 0.01 and v.model_defaults_rmse > 0.3, v
    # every export replayed by its consumer with the logged effort fed as each feeds it (Isaac Lab's
    # joint_efforts, the NewtonActuator's joint_act, MuJoCo's actuators with ctrl = tau_ff), beside our rollout
    res, files = write_robot_exports(res, torque_log["rec"], arm, tmp_path)
    assert set(files) == {"isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"}
    rep = res.replays
    assert set(rep["consumers"]) == {"isaaclab", "newton", "mujoco"}, rep
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["rmse_replay_vs_ours"] < 1e-4, (name, c)
    assert rep["ours"]["rmse"] == pytest.approx(v.rmse, rel=1e-3, abs=1e-6)


def test_zero_gains_without_effort_are_refused_and_bounds_are_flagged(
    arm: RobotModel, torque_log: dict
) -> None:
    """kp = kd = 0 and no feed-forward effort: nothing drives the arm, a RobotError names the joints. A term at
    its bound and a bias beyond a plausible calibration are both reported by name."""
    rec = robot_recording(
        arm, torque_log["cmd"], torque_log["q"], torque_log["qd"], log_dt=LOG_DT, kp=0.0, kd=0.0
    )
    with pytest.raises(RobotError, match=r"yaw, pitch: the gains are zero.*no feed-forward effort"):
        prepare_fit(rec, arm, RobotFitOptions(decimation=DEC))
    _, prob, _ = prepare_fit(torque_log["rec"], arm, RobotFitOptions(decimation=DEC))
    lo, hi = prob.bound("yaw", "friction")
    assert 10**lo < 0.01 and 10**hi > 20.0  # 2 × the effort the log demands (20 N·m of multi-sine)
    fitted = {t: np.array([[0.1, 0.05]]) for t in ("armature", "viscous_friction", "friction")}
    fitted["friction"] = np.array([[10**hi, 1.5]])
    fitted["encoder_offset"] = np.array([[0.0, 0.2]])
    rep = bound_report(prob, fitted)
    assert [(e.term, e.bound) for e in rep.at_bound] == [("yaw.friction", "upper")]
    assert [w.to_json() for w in rep.implausible_bias] == [{"joint": "pitch", "bias": 0.2}]
    assert any("absorbs model error" in n for n in rep.notes)


# a fresh interpreter fits the pickled log and writes the exports, then names every Warp module it ran on the CPU
_FIT_AND_LIST = """
import json, pickle, sys
import warp as wp
import warp._src.context as ctx
from actuator_sysid.export.robot import write_robot_exports
from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot
from actuator_sysid.models.robot import load_robot
wp.config.quiet = True
rec = pickle.loads(open(sys.argv[1], "rb").read())
arm = load_robot(sys.argv[2])
res = fit_robot(rec, arm, RobotFitOptions(decimation=int(sys.argv[4]), max_iterations=1))
write_robot_exports(res, rec, arm, sys.argv[3])
print(json.dumps(sorted(m.name for m in ctx.user_modules.values() if m.execs)))
"""


def test_the_warmup_builds_every_kernel_a_robot_fit_and_its_replays_run(
    torque_log: dict, tmp_path: Path
) -> None:
    """`actuator-sysid warmup` (run by `make install`) must build every Warp module a CPU robot fit and its
    exports' replays load, or the first fit after install compiles the rest itself."""
    (tmp_path / "rec.pkl").write_bytes(pickle.dumps(torque_log["rec"]))
    load_arm(tmp_path)
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            _FIT_AND_LIST,
            str(tmp_path / "rec.pkl"),
            str(tmp_path / "arm2.xml"),
            str(tmp_path / "out"),
            str(DEC),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": pythonpath()},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = set(json.loads(run.stdout.strip().splitlines()[-1]))
    assert {"actuator_sysid.models.mujoco_c", "newton._src.solvers.mujoco.kernels"} <= loaded, loaded
    warmed = {m.name for m in kernel_modules()}
    assert loaded <= warmed, loaded - warmed
