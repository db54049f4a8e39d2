"""Coulomb friction that changes along the stroke, in the whole-robot fit (`position_friction`, friction_upper).

The log is made by Newton alone (tests/robot_sim.py): Newton's DrivePD, MuJoCo's C solver, and the joints'
frictionloss set through Newton's model (joint_friction, notify_model_changed) from each joint's angle before
every physics step, linear from `friction` at the lower limit to `friction_upper` at the upper. The robot is a
two-link arm written here with joint limits, a yaw joint and a pitch joint hanging under gravity, both chirped
across most of their stroke. Our coupled rollout (MuJoCo C, frictionloss written per world and step) and the
decoupled kernel must follow it; the fit must bring both frictions back; the exports carry the mid-stroke one.
"""

from __future__ import annotations

import numpy as np
import pytest
from robot_sim import chirp_targets, robot_recording, simulate_newton_log

from actuator_sysid.fitting.request import FitRequestError
from actuator_sysid.fitting.result import RobotResult
from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot, isaaclab_dict
from actuator_sysid.models.articulated import (
    ArticulatedRollout,
    DecoupledRollout,
    JointTerms,
    physics_targets,
)
from actuator_sysid.models.robot import RobotError, RobotModel, load_robot

ARM_XML = """<mujoco model="arm2_limited">
  <compiler angle="radian"/>
  <worldbody>
    <body name="base">
      <inertial pos="0 0 0" mass="20" diaginertia="0.1 0.1 0.1"/>
      <body name="link1">
        <joint name="yaw" type="hinge" axis="0 0 1" range="-1.5 1.5" limited="true"/>
        <inertial pos="0.1 0 0" mass="4" diaginertia="0.01 0.02 0.02"/>
        <body name="link2" pos="0.2 0 0">
          <joint name="pitch" type="hinge" axis="0 1 0" range="-1.2 1.2" limited="true"/>
          <inertial pos="0 0 -0.15" mass="2" diaginertia="0.02 0.02 0.002"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""
LOG_DT, DEC, DELAY, SAMPLES, KP, KD = 0.005, 2, 1, 800, 60.0, 2.0
TRUTH = {  # per joint (yaw, pitch): armature kg·m², viscous N·m·s/rad, frictionloss N·m at the lower limit
    "armature": np.array([0.04, 0.02]),
    "damping": np.array([0.5, 0.3]),
    "friction": np.array([0.5, 0.2]),
}
UPPER = np.array([2.0, 1.2])  # frictionloss at the upper limit, N·m


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    path = tmp_path_factory.mktemp("arm") / "arm2_limited.xml"
    path.write_text(ARM_XML)
    return load_robot(path)


@pytest.fixture(scope="module")
def log(arm: RobotModel) -> dict:
    cmd = chirp_targets(
        arm, SAMPLES, log_dt=LOG_DT, amplitude=np.array([1.2, 1.0]), center=0.0, f0=0.3, f1=2.0
    )
    q, qd = simulate_newton_log(
        arm, cmd, decimation=DEC, delay=DELAY, kp=KP, kd=KD, log_dt=LOG_DT, friction_upper=UPPER, **TRUTH
    )
    return {
        "cmd": cmd,
        "q": q,
        "qd": qd,
        "rec": robot_recording(arm, cmd, q, qd, log_dt=LOG_DT, kp=KP, kd=KD),
    }


def _terms(upper: np.ndarray | None) -> JointTerms:
    return JointTerms(
        stiffness=np.full((1, 2), KP),
        damping=np.full((1, 2), KD),
        armature=TRUTH["armature"][None],
        viscous_friction=TRUTH["damping"][None],
        friction=TRUTH["friction"][None],
        encoder_offset=np.zeros((1, 2)),
        joint_effort_limit=np.full((1, 2), 1e6),
        friction_upper=None if upper is None else upper[None],
    )


def test_rollouts_follow_newton_with_friction_along_the_stroke(arm: RobotModel, log: dict) -> None:
    """Our MuJoCo C rollout with the true frictions equals Newton's log; with the lower-limit friction held
    constant it is elsewhere (so the comparison can fail); the Warp path refuses the term; the decoupled kernel
    with friction_upper follows the log far closer than without."""
    n = 300
    q, qd, cmd = log["q"][: n + 1], log["qd"][: n + 1], log["cmd"][: n + 1]
    tq = physics_targets(cmd, np.zeros(1, int), n, DEC, DELAY)
    z = np.zeros_like(tq)
    moving, _ = ArticulatedRollout(arm, 1, mujoco_cpu=True).run(
        q[:1], qd[:1], tq, z, _terms(UPPER), DEC, LOG_DT / DEC
    )
    const, _ = ArticulatedRollout(arm, 1, mujoco_cpu=True).run(
        q[:1], qd[:1], tq, z, _terms(None), DEC, LOG_DT / DEC
    )
    np.testing.assert_allclose(moving[:, 0], q, atol=1e-5)
    assert np.abs(const[:, 0] - q).max() > 3e-3  # the friction changing along the stroke matters (8e-3 rad)
    with pytest.raises(RobotError, match="MuJoCo's C backend"):
        ArticulatedRollout(arm, 1).run(q[:1], qd[:1], tq, z, _terms(UPPER), DEC, LOG_DT / DEC)
    dr = DecoupledRollout(arm, q, qd, cmd, np.zeros_like(cmd), n - 1, LOG_DT, np.zeros(2))

    def par(upper: np.ndarray) -> np.ndarray:
        t = TRUTH
        inf = np.full(2, np.inf)
        cols = [np.full(2, KP), np.full(2, KD), t["armature"], t["damping"], t["friction"], np.zeros(2)]
        return np.stack([*cols, np.full(2, 1e6), inf, inf, inf, upper], axis=1)

    res = dr.run(
        np.stack([par(UPPER), par(TRUTH["friction"])]),
        np.array([DELAY] * 2),
        np.arange(0, 240, 60),
        60,
        DEC,
        LOG_DT / DEC,
    )
    truth, constant = (float(np.sqrt(np.mean(r**2))) for r in res)
    assert truth < 0.3 * constant, (truth, constant)
    with pytest.raises(ValueError, match="columns"):
        dr.run(par(UPPER)[None, :, :10], np.array([DELAY]), np.arange(0, 240, 60), 60, DEC, LOG_DT / DEC)


@pytest.fixture(scope="module")
def fitted(arm: RobotModel, log: dict) -> RobotResult:
    opts = RobotFitOptions(decimation=DEC, position_friction=True, fit_bias=False, max_iterations=8)
    return fit_robot(log["rec"], arm, opts)


def test_fit_recovers_friction_at_both_ends_of_the_stroke(
    arm: RobotModel, log: dict, fitted: RobotResult
) -> None:
    """Both frictions, armature and viscous damping within 10 % on both joints, the delay exact; the verdict
    says no consumer holds the term; constant friction (the same fit without it) validates far worse."""
    assert fitted.delay_steps == DELAY
    for g, k in (("yaw", 0), ("pitch", 1)):
        e = fitted.groups[g]
        assert e.friction == pytest.approx(TRUTH["friction"][k], rel=0.1), e
        assert e.friction_upper == pytest.approx(UPPER[k], rel=0.1), e
        assert e.armature == pytest.approx(TRUTH["armature"][k], rel=0.1), e
        assert e.viscous_friction == pytest.approx(TRUTH["damping"][k], rel=0.1), e
    assert "friction_upper" in fitted.to_json()["groups"]["yaw"]
    assert (
        RobotResult.from_json(fitted.to_json()).groups["pitch"].friction_upper
        == fitted.groups["pitch"].friction_upper
    )
    assert "yaw.friction_upper" in (fitted.intervals or {}), sorted(fitted.intervals or {})
    flagged = [c for c in fitted.verdict.checks if c.check == "friction_position"]
    assert flagged and flagged[0].status == "usable", fitted.verdict.checks
    plain = fit_robot(log["rec"], arm, RobotFitOptions(decimation=DEC, fit_bias=False, max_iterations=4))
    assert "friction_upper" not in plain.to_json()["groups"]["yaw"]
    assert fitted.validation.rmse < 0.3 * plain.validation.rmse, (
        fitted.validation.rmse,
        plain.validation.rmse,
    )


def test_exports_carry_the_mid_stroke_friction(fitted: RobotResult, arm: RobotModel, log: dict) -> None:
    """Isaac Lab's cfg and the MJCF hold one friction: the mid-stroke one, and the Isaac Lab note says so; a
    per-joint fit refuses the whole-robot term by name."""
    from actuator_sysid.export.robot_mjcf import render_robot_mjcf
    from actuator_sysid.fitting.request import FitRequest, check_fields

    doc = isaaclab_dict(fitted)
    for g, e in fitted.groups.items():
        assert e.friction_upper is not None
        assert doc["actuators"][g]["friction"] == pytest.approx((e.friction + e.friction_upper) / 2)
    assert "changes along the stroke" in doc["note"]
    text, _ = render_robot_mjcf(fitted, arm)
    yaw = fitted.groups["yaw"]
    assert f'frictionloss="{(yaw.friction + yaw.friction_upper) / 2:.6g}'[:22] in text, text
    with pytest.raises(FitRequestError, match="unknown joint term 'friction_upper'"):
        check_fields(log["rec"], FitRequest(joint_terms=["friction", "friction_upper"]))
