"""Our rollout against the real Newton 1.8 simulator and its actuator components (docs/consumer-semantics.md §C, §F)."""

from __future__ import annotations

import math

import newton
import numpy as np
import pytest
import warp as wp
from newton_sim import build, closed_loop, open_loop

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.models.families import FAMILIES, Family
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params

DT = 0.005
MASS, COM, I_COM = 1.0, 0.25, 1e-4
TABLE_X = (-1.2, -0.4, 0.0, 0.5, 1.3)
TABLE_Y = (3.0, 4.2, 4.5, 4.0, 2.5)
TRUTH = {
    "stiffness": 25.0,
    "damping": 0.6,
    "saturation_effort": 7.0,
    "actuator_velocity_limit": 9.0,
    "actuator_effort_limit": 4.5,
    "armature": 0.015,
    "friction": 0.1,
    "viscous_friction": 0.05,
    "delay": 3.0,
    **{f"lookup_effort_{k}": y for k, y in enumerate(TABLE_Y)},
}


def chirp(n: int, amplitude: float = 1.2, f0: float = 0.2, f1: float = 3.0) -> np.ndarray:
    t = np.arange(n) * DT
    return amplitude * np.sin(2 * math.pi * (f0 * t + (f1 - f0) * t**2 / (2 * t[-1])))


def our_rollout(family: Family, params: dict, q: np.ndarray, qd: np.ndarray, q_des: np.ndarray) -> dict:
    z = np.zeros((q.size, 1))
    seg = Segment(
        "0", np.arange(q.size) * DT, q=q[:, None], qd=qd[:, None], q_des=q_des[:, None], qd_des=z, tau_ff=z
    )
    rec = Recording([JointInfo("hinge", inertia=I_COM, mass=MASS, com_distance=COM)], [seg])
    batch = SegmentBatch.from_recording(rec, ["hinge"], knots=np.array([TABLE_X]))
    values = {k: v for k, v in params.items() if k in family.params}
    tr = RolloutEngine(batch).traces(family, full_params(family, values, (1, 1)))
    return {k: tr[k][0] for k in ("q", "qd", "applied")}


@pytest.mark.parametrize("friction", [0.0, 0.1])
def test_closed_loop_pendulum_matches_newton_mujoco(friction: float) -> None:
    """PD + DC-motor clamp + position table + 3-step delay, with armature, friction and damping, 6 s chirp."""
    truth = {**TRUTH, "friction": friction}
    model, act, dof = build(
        MASS,
        COM,
        I_COM,
        joint={"armature": truth["armature"], "friction": friction, "damping": truth["viscous_friction"]},
        drive="pd",
        drive_kwargs={"kp": truth["stiffness"], "kd": truth["damping"]},
        clamps=[
            (
                "dc_motor",
                {
                    "saturation_effort": truth["saturation_effort"],
                    "velocity_limit": truth["actuator_velocity_limit"],
                    "max_motor_effort": truth["actuator_effort_limit"],
                },
            ),
            ("position_table", {"lookup_positions": TABLE_X, "lookup_efforts": TABLE_Y}),
        ],
        delay_steps=3,
    )
    q_des = chirp(1200)
    newton_run = closed_loop(model, act, dof, q_des, DT)
    family = Family("newton_pd_dc_table_delay", clamps=("dc_motor", "position_table"), delay=True)
    ours = our_rollout(family, truth, newton_run["q"], newton_run["qd"], q_des)
    motion = np.ptp(newton_run["q"])
    rms = float(np.sqrt(np.mean((ours["q"] - newton_run["q"]) ** 2)))
    assert motion > 1.0
    # Without dry friction the §F update is MuJoCo's own: measured 3e-8 of the motion range (float32).
    # MuJoCo's frictionloss is a soft constraint that can creep; our hard stopping constraint differs from it
    # by a measured 0.05 % of the motion range at 0.1 N·m (0.12 % at 0.3 N·m). The bound is 1 %.
    assert rms <= (1e-4 if friction == 0 else 0.01) * motion, rms / motion
    assert np.abs(ours["applied"] - newton_run["applied"]).max() < (1e-3 if friction == 0 else 0.5)


OPEN_LOOP_CASES = {
    "pd+max_effort": (FAMILIES["ideal_pd"], "pd", [("max_effort", {"max_effort": 3.0})], None),
    "pd+dc+delay": (
        FAMILIES["dcmotor_delay"],
        "pd",
        [("dc_motor", {"saturation_effort": 7.0, "velocity_limit": 6.0, "max_motor_effort": 4.0})],
        4,
    ),
    "pd+table+delay": (
        FAMILIES["remotized_pd"],
        "pd",
        [("position_table", {"lookup_positions": TABLE_X, "lookup_efforts": TABLE_Y})],
        2,
    ),
    "pid+max_effort+delay": (FAMILIES["pid"], "pid", [("max_effort", {"max_effort": 6.0})], 3),
}


@pytest.mark.parametrize("case", list(OPEN_LOOP_CASES))
def test_open_loop_efforts_match_newton_actuators(case: str) -> None:
    family, drive, clamps, delay = OPEN_LOOP_CASES[case]
    drive_kwargs = {"kp": 18.0, "kd": 0.7}
    params = {"stiffness": 18.0, "damping": 0.7, "delay": float(delay or 0)}
    if drive == "pid":
        drive_kwargs |= {"ki": 9.0, "integral_max": 0.4}
        params |= {"ki": 9.0, "integral_max": 0.4}
    for name, kw in clamps:
        if name == "max_effort":
            params["actuator_effort_limit"] = kw["max_effort"]
        elif name == "dc_motor":
            params |= {
                "saturation_effort": kw["saturation_effort"],
                "actuator_velocity_limit": kw["velocity_limit"],
                "actuator_effort_limit": kw["max_motor_effort"],
            }
        else:
            params |= {f"lookup_effort_{k}": y for k, y in enumerate(kw["lookup_efforts"])}
    model, act, dof = build(
        MASS, COM, I_COM, joint={}, drive=drive, drive_kwargs=drive_kwargs, clamps=clamps, delay_steps=delay
    )
    rng = np.random.default_rng(7)
    n = 150
    seq = {
        "q": rng.uniform(-2, 2, n),
        "qd": rng.uniform(-10, 10, n),
        "q_des": rng.uniform(-2, 2, n),
        "qd_des": rng.uniform(-3, 3, n),
        "tau_ff": rng.uniform(-1, 1, n),
    }
    theirs = open_loop(model, act, dof, seq, DT)
    seg = Segment("0", np.arange(n) * DT, **{k: v[:, None] for k, v in seq.items()})
    batch = SegmentBatch.from_recording(
        Recording([JointInfo("j", inertia=0.1)], [seg]), ["j"], knots=np.array([TABLE_X])
    )
    values = {k: v for k, v in params.items() if k in family.params}
    ours = RolloutEngine(batch).traces(family, full_params(family, values, (1, 1)), open_loop=True)[
        "applied"
    ][0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max())


def implicit_newton_run(effort_limit: float, q_des: np.ndarray) -> dict[str, np.ndarray]:
    """Newton's own joint drive (joint_target_ke/kd), which SolverMuJoCo integrates with implicitfast."""
    b = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    link = b.add_link(com=wp.vec3(0.0, 0.0, -COM), mass=MASS, inertia=wp.mat33(np.eye(3) * I_COM))
    b.add_shape_sphere(
        link,
        xform=wp.transform(wp.vec3(0.0, 0.0, -COM), wp.quat_identity()),
        radius=0.02,
        cfg=newton.ModelBuilder.ShapeConfig(density=0.0, has_shape_collision=False),
    )
    j = b.add_joint_revolute(
        parent=-1,
        child=link,
        axis=newton.Axis.Y,
        armature=TRUTH["armature"],
        damping=TRUTH["viscous_friction"],
        friction=0.0,
        target_ke=TRUTH["stiffness"],
        target_kd=TRUTH["damping"],
        effort_limit=effort_limit,
        actuator_mode=newton.JointTargetMode.POSITION_VELOCITY,
    )
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True)
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    control = model.control()
    out = {"q": np.zeros(q_des.size), "qd": np.zeros(q_des.size)}
    for k in range(q_des.size):
        out["q"][k], out["qd"][k] = float(s0.joint_q.numpy()[0]), float(s0.joint_qd.numpy()[0])
        control.joint_target_q.assign(np.array([q_des[k]], dtype=np.float32))
        solver.step(s0, s1, control, None, DT)
        s0, s1 = s1, s0
    return out


@pytest.mark.parametrize("effort_limit", [1e6, 3.0])
def test_implicit_family_matches_newton_joint_drive(effort_limit: float) -> None:
    """The `implicit` family (Isaac Lab ImplicitActuator) against Newton's solver-side PD."""
    q_des = chirp(1200)
    run = implicit_newton_run(effort_limit, q_des)
    params = {k: TRUTH[k] for k in ("stiffness", "damping", "armature", "viscous_friction")}
    ours = our_rollout(
        FAMILIES["implicit"],
        {**params, "friction": 0.0, "actuator_effort_limit": effort_limit},
        run["q"],
        run["qd"],
        q_des,
    )
    rms = float(np.sqrt(np.mean((ours["q"] - run["q"]) ** 2)))
    assert rms <= 0.01 * np.ptp(run["q"]), rms / np.ptp(run["q"])


@pytest.mark.parametrize("gains", [(25.0, 0.6), (2000.0, 50.0)])
def test_implicit_effort_mode_matches_newton(gains: tuple[float, float]) -> None:
    """Newton's implicit effort mode with a refreshed JointSpaceResponse, against our effort_mode="implicit"."""
    kp, kd = gains
    truth = {**TRUTH, "stiffness": kp, "damping": kd, "friction": 0.0}
    model, act, dof = build(
        MASS,
        COM,
        I_COM,
        joint={"armature": truth["armature"], "friction": 0.0, "damping": truth["viscous_friction"]},
        drive="pd",
        drive_kwargs={"kp": kp, "kd": kd},
        clamps=[("dc_motor", {"saturation_effort": 7.0, "velocity_limit": 9.0, "max_motor_effort": 4.5})],
        delay_steps=None,
    )
    q_des = chirp(1200)
    run = closed_loop(model, act, dof, q_des, DT, implicit_effort=True)
    family = FAMILIES["dcmotor"]
    z = np.zeros((q_des.size, 1))
    seg = Segment(
        "0",
        np.arange(q_des.size) * DT,
        q=run["q"][:, None],
        qd=run["qd"][:, None],
        q_des=q_des[:, None],
        qd_des=z,
        tau_ff=z,
    )
    batch = SegmentBatch.from_recording(
        Recording([JointInfo("hinge", inertia=I_COM, mass=MASS, com_distance=COM)], [seg]), ["hinge"]
    )
    values = {k: v for k, v in truth.items() if k in family.params}
    ours = RolloutEngine(batch, effort_mode="implicit").traces(family, full_params(family, values, (1, 1)))
    explicit = RolloutEngine(batch).traces(family, full_params(family, values, (1, 1)))
    motion = np.ptp(run["q"])
    rms = lambda tr: float(np.sqrt(np.mean((tr["q"][0] - run["q"]) ** 2)))  # noqa: E731
    assert rms(ours) <= 1e-5 * motion, rms(ours) / motion  # measured 2e-7 (kp 2000) and 8e-8 (kp 25)
    assert rms(explicit) > 10 * rms(ours)  # the mode matters: explicit efforts differ by ~1 % of the range
