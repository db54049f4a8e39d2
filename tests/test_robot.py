"""Whole robots (issue 16, first slice): the robot model, the coupled rollout against Newton's own actuators,
a recovery through Newton, and the CLI on the real Go2 in-air chirp."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import warp as wp

wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines
from robot_sim import simulate_newton_log  # noqa: E402

from actuator_sysid.cli import main  # noqa: E402
from actuator_sysid.datasets.recording import JointInfo, Recording, Segment  # noqa: E402
from actuator_sysid.fitting.robot import (  # noqa: E402
    RobotFitOptions,
    fit_robot,
    isaaclab_dict,
    parse_groups,
    resolve_groups,
)
from actuator_sysid.models.articulated import ArticulatedRollout, JointTerms, physics_targets  # noqa: E402
from actuator_sysid.models.robot import RobotError, RobotModel, load_robot, map_joints  # noqa: E402

GO2_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "go2-in-air"
GO2_XML = GO2_DIR / "go2.xml"
GO2_LOG = GO2_DIR / "go2_chirp_train.pt"
PACE_ORDER = [f"{leg}_{part}_joint" for leg in ("FL", "FR", "RL", "RR") for part in ("hip", "thigh", "calf")]
GROUPS = {"hip": ".*_hip_joint", "thigh": ".*_thigh_joint", "calf": ".*_calf_joint"}
KP, KD = 20.0, 1.5
LOG_DT = 0.005

needs_go2 = pytest.mark.skipif(not GO2_XML.is_file(), reason="shared/data/go2-in-air is not here")


@pytest.fixture(scope="module")
def go2() -> RobotModel:
    return load_robot(GO2_XML)


def chirps(robot: RobotModel, samples: int, seed: int = 0) -> np.ndarray:
    """(samples + 1, J) position targets: a chirp per joint about mid-range, frequencies differing by joint."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples + 1) * LOG_DT
    mid = (robot.lower + robot.upper) / 2
    amp = 0.3 * (robot.upper - robot.lower) / 2
    f0 = 0.3 + 0.1 * np.arange(len(mid))
    phase = rng.uniform(0, 2 * math.pi, len(mid))
    return mid + amp * np.sin(2 * math.pi * (f0 * t[:, None] + 0.4 * t[:, None] ** 2) + phase)


def newton_reference(
    robot: RobotModel,
    cmd: np.ndarray,
    decimation: int,
    delay: int,
    armature: np.ndarray,
    damping: np.ndarray,
    friction: np.ndarray,
    **kw: object,
) -> tuple[np.ndarray, np.ndarray]:
    """The robot stepped by Newton alone (tests/robot_sim.py) with this file's gains, at log samples."""
    return simulate_newton_log(
        robot,
        cmd,
        decimation=decimation,
        delay=delay,
        armature=armature,
        damping=damping,
        friction=friction,
        kp=KP,
        kd=KD,
        log_dt=LOG_DT,
        **kw,
    )  # type: ignore[arg-type]


@needs_go2
def test_go2_loads_without_meshes(go2: RobotModel) -> None:
    """The MJCF's meshes are absent: visuals and collisions are skipped; 12 actuated joints in the PACE order."""
    assert not (GO2_DIR / "assets").exists()
    assert go2.joint_names == PACE_ORDER
    assert go2.base == "base" and go2.fixed_base
    assert go2.builder.shape_count == 0
    assert "visuals, collision shapes and meshes skipped" in go2.summary()["notes"][0]
    np.testing.assert_allclose(go2.armature, 0.01)
    np.testing.assert_allclose(go2.viscous_friction, 0.6)
    np.testing.assert_allclose(go2.friction, 0.2)
    np.testing.assert_allclose(go2.effort_limit, [23.7, 23.7, 45.43] * 4)
    np.testing.assert_allclose(go2.lower[2], -2.7227, atol=1e-4)
    assert go2.parent[:3] == [-1, 0, 1]
    assert list(go2.component) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]  # the legs never load each other


@needs_go2
def test_mapping_and_model_errors(go2: RobotModel, tmp_path: Path) -> None:
    """Names exact or with the _joint suffix; an unnamed log in model order; each mismatch named with both sides."""
    short = [n.removesuffix("_joint") for n in PACE_ORDER]
    order, how = map_joints(go2, short[::-1])
    assert order == list(range(12))[::-1] and "_joint suffix" in how
    assert map_joints(go2, None, 12)[0] == list(range(12))
    with pytest.raises(RobotError, match=r"FL_knee.*not in the robot model.*the model has FL_hip_joint"):
        map_joints(go2, [*PACE_ORDER[:-1], "FL_knee"])
    with pytest.raises(RobotError, match=r"11 unnamed joint column\(s\).*12 actuated joint"):
        map_joints(go2, None, 11)
    with pytest.raises(RobotError, match=r"RR_calf_joint are not in the log"):
        map_joints(go2, PACE_ORDER[:-1])
    bad = tmp_path / "broken.xml"
    bad.write_text("<mujoco><worldbody><body name='a'><joint name='j'/></worldbody></mujoco>")
    with pytest.raises(RobotError, match="Newton could not import this robot model"):
        load_robot(bad)
    with pytest.raises(RobotError, match="unknown robot model type"):
        load_robot(GO2_LOG)
    with pytest.raises(RobotError, match="'FL_calf' is not the root link"):
        load_robot(GO2_XML, fixed_base="FL_calf")
    with pytest.raises(RobotError, match=r"FR_thigh_joint.*match no group"):
        resolve_groups(go2.joint_names, parse_groups("hip='.*_hip_joint',calf=.*_calf_joint"))
    with pytest.raises(RobotError, match=r"matches no joint"):
        resolve_groups(go2.joint_names, {"knee": ".*_knee"})


@needs_go2
def test_rollout_matches_newton_actuators(go2: RobotModel) -> None:
    """Our batched Warp rollout vs Newton's own DrivePD (+ ClampingDCMotor) + MuJoCo C over 1 s, with frictionloss,
    delay, bias and, in world 2, a DC-motor envelope that cuts the PD effort."""
    samples, dec, delay = 200, 2, 2
    cmd = chirps(go2, samples)
    bias = np.linspace(-0.02, 0.02, 12)
    arm = np.array([0.004, 0.01, 0.03] * 4)
    damp, fric = np.full(12, 0.6), np.array([0.1, 0.2, 0.3] * 4)
    sat, vlim, motor = (
        np.array([1.5, 4.0, 2.0] * 4),
        np.array([2.0, 3.0, 2.0] * 4),
        np.array([1.0, 3.0, 1.2] * 4),
    )
    ref_q, _ = newton_reference(go2, cmd, dec, delay, go2.armature, go2.viscous_friction, go2.friction)
    # world 1: other joint terms and an encoder bias; world 2: and a DC envelope (Newton's ClampingDCMotor)
    ref1_q, _ = newton_reference(go2, cmd, dec, delay, arm, damp, fric, bias=bias)
    ref2_q, _ = newton_reference(
        go2,
        cmd,
        dec,
        delay,
        arm,
        damp,
        fric,
        bias=bias,
        saturation_effort=sat,
        velocity_limit=vlim,
        effort_limit=motor,
    )
    ro = ArticulatedRollout(go2, 3)
    starts = np.zeros(3, int)
    tq = physics_targets(cmd, starts, samples, dec, delay)
    inf = np.full(12, np.inf)
    terms = JointTerms(
        stiffness=np.full((3, 12), KP),
        damping=np.full((3, 12), KD),
        armature=np.stack([go2.armature, arm, arm]),
        viscous_friction=np.stack([go2.viscous_friction, damp, damp]),
        friction=np.stack([go2.friction, fric, fric]),
        encoder_offset=np.stack([np.zeros(12), bias, bias]),
        joint_effort_limit=np.stack([go2.effort_limit] * 3),
        saturation_effort=np.stack([inf, inf, sat]),
        actuator_velocity_limit=np.stack([inf, inf, vlim]),
        actuator_effort_limit=np.stack([inf, inf, motor]),
    )
    q0 = np.stack([cmd[0]] * 3)  # measured; worlds 1-2's true angle is cmd[0] − bias, as Newton's start
    ours, _ = ro.run(q0, np.zeros((3, 12)), tq, np.zeros_like(tq), terms, dec, LOG_DT / dec)
    motion = np.ptp(ref_q, axis=0)
    assert motion.min() > 0.1
    # both are MuJoCo's update in float32; measured 2.4e-7 rad over the second without the envelope
    np.testing.assert_allclose(ours[:, 0], ref_q, atol=2e-5)
    np.testing.assert_allclose(ours[:, 1], ref1_q, atol=2e-5)
    np.testing.assert_allclose(ours[:, 2], ref2_q, atol=2e-5)
    assert np.abs(ref1_q - ref_q).max() > 0.01  # the second world's terms did change the motion
    assert np.abs(ref2_q - ref1_q).max() > 0.01  # and the envelope did
    assert ro.clip_fraction[2].min() > 0.05 and ro.clip_fraction[1].max() == 0.0, ro.clip_fraction
    # the fit's CPU path: MuJoCo's C backend, a model copy per world's terms, all three worlds in one run
    c = ArticulatedRollout(go2, 3, mujoco_cpu=True)
    ours_c, _ = c.run(q0, np.zeros((3, 12)), tq, np.zeros_like(tq), terms, dec, LOG_DT / dec)
    for w, ref in enumerate((ref_q, ref1_q, ref2_q)):
        np.testing.assert_allclose(ours_c[:, w], ref, atol=2e-5, err_msg=f"world {w}")
    np.testing.assert_allclose(c.clip_fraction, ro.clip_fraction, atol=0.01)
    # worlds shared by one native launch per core: each world as it was alone, to the last bit
    many = ArticulatedRollout(go2, 18, mujoco_cpu=True)
    tile = JointTerms(
        **{k: None if v is None else np.tile(v, (6, 1)) for k, v in vars(terms).items()}
    )  # no bodies
    ours_many, _ = many.run(
        np.tile(q0, (6, 1)),
        np.zeros((18, 12)),
        np.tile(tq, (1, 6, 1)),
        np.zeros((tq.shape[0], 18, 12)),
        tile,
        dec,
        LOG_DT / dec,
    )
    np.testing.assert_array_equal(ours_many, np.tile(ours_c, (1, 6, 1)))
    np.testing.assert_array_equal(many.clip_fraction, np.tile(c.clip_fraction, (6, 1)))


@needs_go2
def test_recovers_group_terms_from_a_newton_log(go2: RobotModel) -> None:
    """A log made by Newton alone with known per-group armature, damping and frictionloss is fitted back."""
    truth = {"hip": (0.006, 0.4, 0.12), "thigh": (0.015, 0.8, 0.25), "calf": (0.03, 0.5, 0.35)}
    part = [n.split("_")[1] for n in go2.joint_names]
    arm, damp, fric = (np.array([truth[p][i] for p in part]) for i in range(3))
    dec, samples = 2, 500
    cmd = chirps(go2, samples, seed=1)
    q, qd = newton_reference(go2, cmd, dec, 0, arm, damp, fric)
    z = np.zeros_like(q)
    seg = Segment(
        "0",
        np.arange(q.shape[0]) * LOG_DT,
        q=q,
        qd=qd,
        q_des=cmd,
        qd_des=z,
        tau_ff=z,
        metadata={"kp": KP, "kd": KD},
    )
    rec = Recording([JointInfo(n) for n in go2.joint_names], [seg])
    res = fit_robot(
        rec, go2, RobotFitOptions(groups=GROUPS, decimation=dec, delay=0, fit_bias=False, max_iterations=4)
    )
    # measured: every term back within 1e-5 (relative) after these 4 Jacobians from the equation-error start
    # (0.6 % from the model file's terms before it); 5 % leaves room for another machine's float32 rounding
    for g, (a, d, f) in truth.items():
        e = res.groups[g]
        assert e.armature == pytest.approx(a, rel=0.05), (g, e)
        assert e.viscous_friction == pytest.approx(d, rel=0.05), (g, e)
        assert e.friction == pytest.approx(f, rel=0.05), (g, e)
    v = res.validation
    assert v.rmse < 1e-3 and v.model_defaults_rmse > 5 * v.rmse, v
    assert res.training.start.startswith("equation error"), res.training
    side = v.decoupled_fit  # the decoupled fit beside the coupled one, replayed coupled on the same split
    assert side is not None
    assert set(side.per_joint_rmse) == set(go2.joint_names) and side.rmse < 0.2 * v.model_defaults_rmse, side
    lab = isaaclab_dict(res)
    assert lab["actuators"]["calf"]["joint_names_expr"] == [".*_calf_joint"]
    assert lab["sim"] == {"dt": pytest.approx(LOG_DT / dec), "decimation": dec}


@needs_go2
def test_cli_fits_the_real_go2_chirp(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`fit go2_chirp_train.pt --robot go2.xml --no-select` as it is (no names, no gains), on a small budget."""
    out = tmp_path / "fit"
    rc = main(
        [
            "fit",
            str(GO2_LOG),
            "--robot",
            str(GO2_XML),
            "--no-select",
            "--groups",
            "hip='.*_hip_joint',thigh='.*_thigh_joint',calf='.*_calf_joint'",
            "--decimation",
            "2",
            "--budget",
            "1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    err = capsys.readouterr().err
    assert "unnamed log taken in the model's actuated-joint order" in err
    assert "held-out RMSE (last 30% of the log in time" in err
    lab = json.loads((out / "isaaclab.json").read_text())
    assert set(lab["actuators"]) == {"hip", "thigh", "calf"}
    assert lab["actuators"]["hip"]["joint_names_expr"] == [".*_hip_joint"]
    assert lab["sim"]["dt"] == pytest.approx(0.005 / 2, rel=1e-3) and lab["sim"]["decimation"] == 2
    fit = json.loads((out / "fit.json").read_text())
    v = fit["validation"]
    assert v["split"] == "time" and v["split_time_s"] == pytest.approx(0.7 * 16.44, abs=0.05)
    assert set(v["per_joint_rmse"]) == set(PACE_ORDER)
    assert 0.0 < v["rmse"] < 0.1 and 0.0 < v["model_defaults_rmse"] < 0.1


@needs_go2
def test_cli_names_a_bad_robot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "robot.xml"
    bad.write_text("<mujoco><worldbody>")
    assert main(["fit", str(GO2_LOG), "--robot", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "could not import this robot model" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_refuses_a_floating_base_with_no_link_named(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The API's 422 for a floating base on no stand is the CLI's error too, before anything is read or written."""
    assert (
        main(["fit", str(GO2_LOG), "--robot", str(GO2_XML), "--floating", "--out", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err
    assert "floating base but no link named" in err and "--fixed-base" in err
    assert not (tmp_path / "o").exists()


@needs_go2
def test_decoupled_rollout_follows_a_newton_log(go2: RobotModel) -> None:
    """The fast search path's model: each joint's own 1-DoF rollout, fed by Newton's inverse dynamics along the
    measured motion, reproduces a log Newton alone made (DrivePD, delay, bias, DC envelope, MuJoCo C) far closer
    than the model file's terms do, and its MuJoCo C replay (one world, no Newton state copies) equals the Warp
    rollout's."""
    from actuator_sysid.models.articulated import DecoupledRollout

    samples, dec, delay = 300, 2, 2
    cmd = chirps(go2, samples, seed=2)
    bias = np.linspace(-0.02, 0.02, 12)
    arm, damp, fric = np.array([0.004, 0.01, 0.03] * 4), np.full(12, 0.6), np.array([0.1, 0.2, 0.3] * 4)
    sat, vlim, motor = (
        np.array([3.0, 6.0, 4.0] * 4),
        np.array([4.0, 6.0, 4.0] * 4),
        np.array([2.0, 5.0, 3.0] * 4),
    )
    q, qd = newton_reference(
        go2,
        cmd,
        dec,
        delay,
        arm,
        damp,
        fric,
        bias=bias,
        saturation_effort=sat,
        velocity_limit=vlim,
        effort_limit=motor,
    )
    dr = DecoupledRollout(go2, q, qd, cmd, np.zeros_like(cmd), 280, LOG_DT, bias)
    starts, length = np.array([0, 70, 140, 210]), 60

    def par(a: np.ndarray, d: np.ndarray, f: np.ndarray, envelope: bool) -> np.ndarray:
        env = (sat, vlim, motor) if envelope else (np.full(12, np.inf),) * 3
        return np.stack([np.full(12, KP), np.full(12, KD), a, d, f, bias, go2.effort_limit, *env, f], axis=1)

    res = dr.run(
        np.stack([par(arm, damp, fric, True), par(go2.armature, go2.viscous_friction, go2.friction, False)]),
        np.array([delay, delay]),
        starts,
        length,
        dec,
        LOG_DT / dec,
    )
    truth, defaults = (float(np.sqrt(np.mean(r**2))) for r in res)
    assert truth < 0.01 * defaults, (truth, defaults)  # measured 1.1e-4 against 0.055 rad
    eng = ArticulatedRollout(go2, 1, mujoco_cpu=True)
    terms = JointTerms(
        stiffness=np.full((1, 12), KP),
        damping=np.full((1, 12), KD),
        armature=arm[None],
        viscous_friction=damp[None],
        friction=fric[None],
        encoder_offset=bias[None],
        joint_effort_limit=go2.effort_limit[None],
        saturation_effort=sat[None],
        actuator_velocity_limit=vlim[None],
        actuator_effort_limit=motor[None],
    )
    tq = physics_targets(cmd, np.zeros(1, int), samples, dec, delay)
    c_q, _ = eng.run(q[:1], qd[:1], tq, np.zeros_like(tq), terms, dec, LOG_DT / dec)
    # measured 9e-7 rad from Newton's own log, the envelope cutting 59 % of the steps on the worst joint
    assert np.abs(c_q[:, 0] - q).max() < 1e-5 and eng.clip_fraction.max() > 0.02, eng.clip_fraction
