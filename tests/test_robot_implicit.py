"""Newton's implicit effort mode on a whole robot: a log Newton simulates in that mode (tests/robot_sim.py: the
builder's own actuators, MuJoCo's C solver, the response from mj_solveM) replays through our coupled rollout
(models/articulated.py: mujoco_warp's solve_m on the Warp backend, or MuJoCo C), and an explicit replay of the
same log misses it at stiff gains."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from robot_sim import (  # noqa: E402
    QUADRUPED_GROUPS,
    chirp_targets,
    load_quadruped,
    robot_recording,
    simulate_newton_log,
)

from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot  # noqa: E402
from actuator_sysid.models.articulated import ArticulatedRollout, JointTerms, physics_targets  # noqa: E402
from actuator_sysid.models.robot import RobotError, RobotModel  # noqa: E402

KP, KD = 100.0, 2.0  # stiff for this quadruped at a 1.25 ms step: explicit and implicit part by centiradians
DEC, DELAY, LOG_DT, SAMPLES = 4, 1, 0.005, 150
J = 12
BIAS = np.linspace(-0.02, 0.02, J)
ARM, DAMP, FRIC = np.array([0.01, 0.02, 0.01] * 4), np.full(J, 0.3), np.full(J, 0.05)
SAT, VLIM, MOTOR = np.array([20.0, 30.0, 20.0] * 4), np.full(J, 6.0), np.array([12.0, 18.0, 12.0] * 4)


@pytest.fixture(scope="module")
def quad() -> RobotModel:
    return load_quadruped()


def _newton(robot: RobotModel, cmd: np.ndarray, mode: str, envelope: bool) -> tuple[np.ndarray, np.ndarray]:
    """Measured positions and velocities of the robot stepped by Newton alone in effort mode `mode`."""
    env = {"saturation_effort": SAT, "velocity_limit": VLIM, "effort_limit": MOTOR} if envelope else {}
    return simulate_newton_log(
        robot,
        cmd,
        decimation=DEC,
        delay=DELAY,
        armature=ARM,
        damping=DAMP,
        friction=FRIC,
        kp=KP,
        kd=KD,
        bias=BIAS,
        log_dt=LOG_DT,
        effort_mode=mode,
        **env,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def implicit_logs(quad: RobotModel) -> dict[str, np.ndarray]:
    """Newton's implicit-mode logs of one chirp, without and with the DC envelope: {cmd, q, q_env, qd_env}."""
    cmd = chirp_targets(quad, SAMPLES, amplitude=0.4)
    q, _ = _newton(quad, cmd, "implicit", envelope=False)
    q_env, qd_env = _newton(quad, cmd, "implicit", envelope=True)
    return {"cmd": cmd, "q": q, "q_env": q_env, "qd_env": qd_env}


def _terms(robot: RobotModel, worlds: int, envelope: list[bool]) -> JointTerms:
    inf = np.full(J, np.inf)
    return JointTerms(
        stiffness=np.full((worlds, J), KP),
        damping=np.full((worlds, J), KD),
        armature=np.tile(ARM, (worlds, 1)),
        viscous_friction=np.tile(DAMP, (worlds, 1)),
        friction=np.tile(FRIC, (worlds, 1)),
        encoder_offset=np.tile(BIAS, (worlds, 1)),
        joint_effort_limit=np.tile(robot.effort_limit, (worlds, 1)),
        saturation_effort=np.stack([SAT if e else inf for e in envelope]),
        actuator_velocity_limit=np.stack([VLIM if e else inf for e in envelope]),
        actuator_effort_limit=np.stack([MOTOR if e else inf for e in envelope]),
    )


def test_an_implicit_newton_log_replays_through_the_coupled_rollout(
    quad: RobotModel, implicit_logs: dict[str, np.ndarray]
) -> None:
    """Both backends of our rollout in implicit mode reproduce Newton's implicit log, with and without a DC
    envelope that cuts the effort; our explicit mode on the same log misses it measurably."""
    cmd, ref, ref_env = implicit_logs["cmd"], implicit_logs["q"], implicit_logs["q_env"]
    tq = physics_targets(cmd, np.zeros(2, int), SAMPLES, DEC, DELAY)
    q0, qd0 = np.stack([cmd[0]] * 2), np.zeros((2, J))
    warp = ArticulatedRollout(quad, 2, effort_mode="implicit")
    ours, _ = warp.run(q0, qd0, tq, np.zeros_like(tq), _terms(quad, 2, [False, True]), DEC, LOG_DT / DEC)
    assert np.ptp(ref, axis=0).min() > 0.3  # every joint moves
    # MuJoCo C (float64) vs mujoco_warp (float32) under the same Newton actuators: measured 1.9e-7 rad
    np.testing.assert_allclose(ours[:, 0], ref, atol=2e-5)
    np.testing.assert_allclose(ours[:, 1], ref_env, atol=2e-5)
    assert np.abs(ref_env - ref).max() > 0.01  # the envelope did change the motion
    assert warp.clip_fraction[1].max() > 0.05 and warp.clip_fraction[0].max() == 0.0, warp.clip_fraction

    c = ArticulatedRollout(quad, 1, mujoco_cpu=True, effort_mode="implicit")
    one = _terms(quad, 1, [True])
    ours_c, _ = c.run(q0[:1], qd0[:1], tq[:, :1], np.zeros_like(tq[:, :1]), one, DEC, LOG_DT / DEC)
    np.testing.assert_allclose(ours_c[:, 0], ref_env, atol=2e-5)
    np.testing.assert_allclose(c.clip_fraction[0], warp.clip_fraction[1], atol=0.01)

    explicit = ArticulatedRollout(quad, 2, mujoco_cpu=True)  # the explicit mode as the fit runs it on the CPU
    ex, _ = explicit.run(q0, qd0, tq, np.zeros_like(tq), _terms(quad, 2, [False, True]), DEC, LOG_DT / DEC)
    # the explicit replay misses the implicit log by > 1e4 × the implicit replay's error (measured 0.023 rad)
    assert np.abs(ex[:, 0] - ref).max() > 0.01
    assert np.abs(ex[:, 0] - ref).max() > 1e3 * np.abs(ours[:, 0] - ref).max()


def test_the_decoupled_search_path_follows_an_implicit_log_in_implicit_mode(
    quad: RobotModel, implicit_logs: dict[str, np.ndarray]
) -> None:
    """The fast search path (each joint's own 1-DoF rollout along the measured motion) in implicit mode follows
    Newton's implicit log, envelope cutting, far closer than in explicit mode (a search path only: every figure
    the fit reports comes from the coupled rollout)."""
    from actuator_sysid.models.articulated import DecoupledRollout

    cmd, q, qd = implicit_logs["cmd"], implicit_logs["q_env"], implicit_logs["qd_env"]
    par = np.stack(
        [np.full(J, KP), np.full(J, KD), ARM, DAMP, FRIC, BIAS, quad.effort_limit, SAT, VLIM, MOTOR, FRIC], 1
    )
    starts, length = np.array([0, 30, 60, 90]), 50
    rms = {}
    for mode in ("implicit", "explicit"):
        dr = DecoupledRollout(quad, q, qd, cmd, np.zeros_like(cmd), 140, LOG_DT, BIAS, effort_mode=mode)
        res = dr.run(par[None], np.array([DELAY]), starts, length, DEC, LOG_DT / DEC)
        rms[mode] = float(np.sqrt(np.mean(res**2)))
    assert rms["implicit"] < 0.5 * rms["explicit"], rms  # measured 0.94e-3 against 3.8e-3 rad


def test_an_implicit_fit_recovers_the_joint_terms_of_an_implicit_log(quad: RobotModel) -> None:
    """RobotFitOptions(effort_mode="implicit") on a 1.5 s implicit log at stiff gains, groups HAA / HFE / KFE: every
    armature, viscous damping and frictionloss back within the fitting tolerances (10 %), the mode recorded.
    (The same fit in explicit mode, at the default windows, lands 40 % off in damping, measured; an unknown mode
    is refused.)"""
    cmd = chirp_targets(quad, 300, amplitude=0.4)
    q, qd = simulate_newton_log(
        quad, cmd, decimation=DEC, delay=DELAY, armature=ARM, damping=DAMP, friction=FRIC, kp=KP, kd=KD,
        log_dt=LOG_DT, effort_mode="implicit",
    )  # fmt: skip
    rec = robot_recording(quad, cmd, q, qd, log_dt=LOG_DT, kp=KP, kd=KD)
    with pytest.raises(RobotError, match="effort_mode 'semi'"):
        fit_robot(rec, quad, RobotFitOptions(effort_mode="semi"))
    # 0.15 s windows and 5 Jacobians instead of the defaults (0.5 s, 12): each implicit coupled step is some 200 Warp
    # launches on the CPU, so the fit's cost is window length x iterations (and the held-out replay the log's
    # length). Recovery is as exact either way: every term within 1e-4 relative, held-out RMSE 1.4e-7 rad, measured
    opts = RobotFitOptions(
        groups=QUADRUPED_GROUPS,
        decimation=DEC,
        delay=DELAY,
        fit_bias=False,
        effort_mode="implicit",
        window_s=0.15,
        max_iterations=5,
    )
    result = fit_robot(rec, quad, opts)
    assert result.effort_mode == "implicit"
    assert any("Newton's implicit effort mode" in a for a in result.assumptions)
    truth = {"haa": 0, "hfe": 1, "kfe": 2}
    for g, k in truth.items():
        got = result.groups[g]
        np.testing.assert_allclose(got.armature, ARM[k], rtol=0.1, err_msg=g)
        np.testing.assert_allclose(got.viscous_friction, DAMP[k], rtol=0.1, err_msg=g)
        np.testing.assert_allclose(got.friction, FRIC[k], rtol=0.1, err_msg=g)
    assert result.validation.rmse < 1e-4, result.validation  # measured 1.4e-7 rad
    # the exports' replay runs our rollout in the fit's mode, so it reproduces the fit's validation; the
    # consumers replay explicitly, which the replay says
    from actuator_sysid.export.robot import render_robot_exports, replay_robot_exports

    texts, info = render_robot_exports(result, quad)
    codes = [f["code"] for f in info["newton"]["findings"]]
    assert (
        "EXPORT.NEWTON.effort_mode_implicit" in codes
        and 'string effort_mode = "implicit"' in texts["newton.usda"]
    )
    replays = replay_robot_exports(result, rec, quad, texts)
    assert replays["ours"]["effort_mode"] == "implicit"
    np.testing.assert_allclose(replays["ours"]["rmse"], result.validation.rmse, rtol=1e-3, atol=1e-9)
    assert "explicit mode" in replays["note"]
