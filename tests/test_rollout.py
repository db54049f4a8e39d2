"""The Warp rollout kernel against its PyTorch oracle, and its actuator laws against the real Isaac Lab classes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from isaaclab.actuators import DCMotor, DCMotorCfg, IdealPDActuator, IdealPDActuatorCfg
from isaaclab.utils.types import ArticulationActions

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.models.families import FAMILIES, Family, get_family, is_mujoco_dcmotor
from actuator_sysid.models.oracle import oracle_traces
from actuator_sysid.models.parameters import TABLE_KNOTS
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params


def two_joint_recording(n: int = 300) -> Recording:
    """Two joints with different loads, three segments of different commands."""
    t = np.arange(n) * 0.005
    segs = []
    for i in range(3):
        q_des = np.stack(
            [1.4 * np.sin(2 * np.pi * (0.4 + i) * t), 0.8 * np.sign(np.sin(2 * np.pi * 0.7 * t))], 1
        )
        z = np.zeros_like(q_des)
        segs.append(
            Segment(str(i), t + 10 * i, q=z + 0.05 * i, qd=z, q_des=q_des, qd_des=z + 0.1, tau_ff=z + 0.05)
        )
    joints = [
        JointInfo("a", mass=1.0, com_distance=0.3),
        JointInfo("b", inertia=0.02, mass=0.5, com_distance=0.1),
    ]
    return Recording(joints, segs)


def random_params(family: Family, n_c: int, n_j: int, seed: int) -> np.ndarray:
    """Plausible random values for every parameter of a family."""
    rng = np.random.default_rng(seed)
    shape = (n_c, n_j)
    ranges = {
        "stiffness": (5, 40),
        "damping": (0.05, 1.0),
        "armature": (0.005, 0.05),
        "friction": (0.0, 0.5),
        "dynamic_friction": (0.0, 0.4),
        "viscous_friction": (0.0, 0.3),
        "actuator_effort_limit": (1.5, 5),
        "saturation_effort": (3, 9),
        "actuator_velocity_limit": (2, 10),
        "ki": (0.5, 20),
        "integral_max": (0.05, 1),
        "encoder_offset": (-0.1, 0.1),
        **{f"lookup_effort_{k}": (0.5, 5) for k in range(TABLE_KNOTS)},
        "stribeck_friction": (0.0, 0.5),
        "stribeck_velocity": (0.05, 2.0),
        "stribeck_exponent": (0.8, 3.0),
        "load_friction": (0.0, 0.3),
        "load_friction_stribeck": (0.0, 0.3),
        "load_friction_external": (0.0, 0.3),
        "load_friction_external_stribeck": (0.0, 0.3),
        "load_friction_quadratic_motor": (0.0, 0.3),
        "load_friction_quadratic_external": (0.0, 0.3),
    }
    free = {name: rng.uniform(*ranges[name], shape) for name in family.params if name != "delay"}
    if family.delay:
        free["delay"] = rng.integers(0, 5, shape).astype(float)
    return full_params(family, free, shape)


ALL_VARIANTS = [FAMILIES[n] for n in sorted(FAMILIES) if not is_mujoco_dcmotor(FAMILIES[n])] + [
    FAMILIES["dcmotor_delay"].with_terms(
        ("armature", "friction", "dynamic_friction", "viscous_friction", "encoder_offset")
    ),
    Family("every_clamp", clamps=("max_effort", "dc_motor", "position_table"), delay=True),
    # BAM's M4 budget as the static threshold of PhysX-style friction, under a PID drive with an offset
    FAMILIES["pid"].with_terms(
        ("armature", "friction", "dynamic_friction", "load_friction_stribeck", "encoder_offset")
    ),
]


@pytest.mark.parametrize("fam", ALL_VARIANTS, ids=lambda f: f"{f.name}-{'+'.join(f.joint_terms)}")
@pytest.mark.parametrize(("open_loop", "substeps"), [(False, 1), (False, 2), (True, 2)])
def test_kernel_matches_torch_oracle(fam: Family, substeps: int, open_loop: bool) -> None:
    # 0.75 s segments (the square command reverses at 0.71 s) in windows of 70 samples: rollouts restart from
    # the log but see the commands before them (delays). The oracle steps in Python, so its cost is the
    # samples times the substeps: two substeps check the held command as three did, at two thirds of the cost.
    # The kernel's substep and open-loop arithmetic are independent of each other: one substep is checked in
    # windows, the open loop at two substeps, which covers the one-substep open loop
    batch = SegmentBatch.from_recording(
        two_joint_recording(150), ["a", "b"], substeps=substeps, window=None if open_loop else 70
    )
    params = random_params(fam, 6, 2, seed=substeps)
    warp_tr = RolloutEngine(batch).traces(fam, params, open_loop=open_loop)
    ref = oracle_traces(batch, fam, params, open_loop=open_loop)
    for key in ("q", "qd", "computed", "applied"):
        scale = max(1.0, float(np.abs(ref[key]).max()))
        assert np.abs(warp_tr[key] - ref[key]).max() <= 2e-4 * scale, key
    if open_loop:
        return
    # loss-only launch gives the same sums as the launch that stores traces
    sums = RolloutEngine(batch).sums(fam, params)
    np.testing.assert_allclose(sums, warp_tr["sums"], rtol=1e-6)
    # and those sums are the squared errors of the stored traces
    sl = batch.segment_slice(1)
    err = (ref["q"][:, sl][:, 1:] - batch.q[sl][1:]) ** 2
    np.testing.assert_allclose(sums[:, 1, 0], err.sum(axis=1), rtol=2e-3)


def test_coulomb_friction_holds_the_joint_still() -> None:
    """A stopping-constraint friction larger than the net torque keeps the joint exactly at rest."""
    t = np.arange(200) * 0.005
    col = np.zeros((200, 1))
    rec = Recording(
        [JointInfo("j", mass=1.0, com_distance=0.2)],
        [Segment("0", t, q=col + 0.3, qd=col, q_des=col + 0.35, qd_des=col, tau_ff=col)],
    )
    batch = SegmentBatch.from_recording(rec, ["j"])
    fam = get_family("ideal_pd")
    # gravity torque 1·9.81·0.2·sin(0.3) ≈ 0.58 N·m, PD pushes 10·0.05 = 0.5 N·m the other way
    held = full_params(
        fam,
        {"stiffness": 10.0, "damping": 0.1, "actuator_effort_limit": 5.0, "armature": 0.01, "friction": 0.2},
        (1, 1),
    )
    slips = full_params(
        fam,
        {"stiffness": 10.0, "damping": 0.1, "actuator_effort_limit": 5.0, "armature": 0.01, "friction": 0.05},
        (1, 1),
    )
    eng = RolloutEngine(batch)
    assert np.all(eng.traces(fam, held)["q"] == np.float32(0.3))
    assert (
        eng.traces(fam, slips)["q"][0, -1] < 0.3 - 1e-3
    )  # slides down to where PD + friction balance gravity


@pytest.mark.parametrize("family", ["ideal_pd", "dcmotor"])
def test_actuator_law_matches_isaaclab_classes(family: str) -> None:
    """Per-step efforts of the kernel equal the real Isaac Lab actuator's on the same (q, qd, q_des) states."""
    rng = np.random.default_rng(5)
    n = 400
    q, qd = rng.uniform(-2, 2, n), rng.uniform(-12, 12, n)
    q_des = rng.uniform(-2, 2, n)
    truth = {
        "stiffness": 20.0,
        "damping": 0.8,
        "actuator_effort_limit": 4.0,
        "saturation_effort": 7.0,
        "actuator_velocity_limit": 6.0,
    }
    common = dict(
        joint_names_expr=[".*"],
        stiffness=truth["stiffness"],
        damping=truth["damping"],
        actuator_effort_limit=truth["actuator_effort_limit"],
    )
    if family == "dcmotor":
        act = DCMotor(
            DCMotorCfg(
                **common,
                saturation_effort=truth["saturation_effort"],
                actuator_velocity_limit=truth["actuator_velocity_limit"],
            ),
            joint_names=["j"],
            joint_ids=slice(None),
            num_envs=n,
            device="cpu",
        )
    else:
        act = IdealPDActuator(
            IdealPDActuatorCfg(**common), joint_names=["j"], joint_ids=slice(None), num_envs=n, device="cpu"
        )
    col = lambda a: torch.tensor(a, dtype=torch.float32)[:, None]  # noqa: E731
    out = act.compute(
        ArticulationActions(
            joint_positions=col(q_des), joint_velocities=col(np.zeros(n)), joint_efforts=col(np.zeros(n))
        ),
        col(q),
        col(qd),
    )
    expected = out.joint_efforts[:, 0].numpy()

    # one 1-sample segment per state: the kernel's last-sample effort is the law at that state
    segs = [
        Segment(
            str(i),
            np.array([0.0, 0.005]),
            q=np.full((2, 1), q[i]),
            qd=np.full((2, 1), qd[i]),
            q_des=np.full((2, 1), q_des[i]),
            qd_des=np.zeros((2, 1)),
            tau_ff=np.zeros((2, 1)),
        )
        for i in range(n)
    ]
    batch = SegmentBatch.from_recording(Recording([JointInfo("j", inertia=1.0)], segs), ["j"])
    fam = get_family(family)
    params = full_params(fam, {k: v for k, v in truth.items() if k in fam.params}, (1, 1))
    applied = RolloutEngine(batch).traces(fam, params)["applied"][0, batch.seg_start]
    np.testing.assert_allclose(applied, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "fam", [FAMILIES["dcmotor"], FAMILIES["remotized_pd"], FAMILIES["pid"]], ids=lambda f: f.name
)
def test_implicit_effort_mode_matches_oracle(fam: Family) -> None:
    """Newton's implicit effort mode (solve at the predicted end-of-step state) in the kernel and the oracle."""
    batch = SegmentBatch.from_recording(two_joint_recording(120), ["a", "b"])
    params = random_params(fam, 3, 2, seed=11)
    params[..., 0] *= 40  # stiff gains, where the implicit solve matters
    ours = RolloutEngine(batch, effort_mode="implicit").traces(fam, params)
    ref = oracle_traces(batch, fam, params, effort_mode="implicit")
    explicit = RolloutEngine(batch).traces(fam, params)
    # Both solves stop once the impulse update falls below Newton's 1e-5 N·m·s, i.e. 2e-3 N·m of effort at
    # dt = 5 ms, so float32 (kernel) and float64 (oracle) may stop an iteration apart: allow 5x that.
    np.testing.assert_allclose(ours["applied"], ref["applied"], rtol=0, atol=1e-2)
    for key in ("q", "qd"):
        scale = max(1.0, float(np.abs(ref[key]).max()))
        assert np.abs(ours[key] - ref[key]).max() <= 1e-3 * scale, key
    assert np.abs(explicit["applied"] - ours["applied"]).max() > 0.1  # the mode changes the efforts


def test_free_swing_segments_have_no_actuator_effort() -> None:
    """A torque-off stretch (BAM's torque_enable = false) swings under load and joint terms only."""
    rec = two_joint_recording(150)
    rec.segments[1].metadata["free_swing"] = True
    rec.segments[1].q[0] = 0.8  # released away from rest
    fam = FAMILIES["dcmotor_delay"]
    batch = SegmentBatch.from_recording(rec, ["a", "b"], window=60)
    params = random_params(fam, 3, 2, seed=5)
    ours = RolloutEngine(batch).traces(fam, params)
    ref = oracle_traces(batch, fam, params)
    free = [batch.segment_slice(s) for s in range(batch.n_segments) if batch.seg_free[s]]
    assert free and all(
        np.all(ours["applied"][:, sl] == 0) and np.all(ours["computed"][:, sl] == 0) for sl in free
    )
    for key in ("q", "qd", "applied"):
        assert np.abs(ours[key] - ref[key]).max() <= 2e-4 * max(1.0, float(np.abs(ref[key]).max())), key
    driven = [batch.segment_slice(s) for s in range(batch.n_segments) if not batch.seg_free[s]]
    assert any(np.any(ours["applied"][:, sl] != 0) for sl in driven)


def test_logged_gains_replace_the_fitted_ones_per_segment() -> None:
    rec = two_joint_recording(120)
    rec.segments[0].metadata.update(kp=33.0, kd=0.4)
    rec.segments[2].metadata["joints"] = {"b": {"kp": 7.0}}
    fam = FAMILIES["delayed_pd"]
    batch = SegmentBatch.from_recording(rec, ["a", "b"], logged_gains=True)
    assert list(batch.seg_kp) == [33.0, -1.0, -1.0, 33.0, -1.0, 7.0]
    params = random_params(fam, 3, 2, seed=9)
    ours = RolloutEngine(batch).traces(fam, params, open_loop=True)
    ref = oracle_traces(batch, fam, params, open_loop=True)
    np.testing.assert_allclose(ours["computed"], ref["computed"], rtol=1e-5, atol=1e-4)
    sl = batch.segment_slice(0)
    err = batch.q_des[sl] - batch.q[sl]
    assert (
        abs(
            ours["computed"][0, sl][0]
            - (33.0 * err[0] + 0.4 * (batch.qd_des[sl][0] - batch.qd[sl][0]) + batch.tau_ff[sl][0])
        )
        < 1e-4
    )
