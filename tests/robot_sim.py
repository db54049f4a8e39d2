"""A whole robot stepped by Newton 1.8 alone, as an independent log generator for whole-robot recovery tests.

Nothing of our rollout is used: Newton's own actuators (DrivePD → ClampingDCMotor → ClampingMaxEffort, Newton's
delay buffer, docs/consumer-semantics.md §C.1–§C.2) compute the effort, MuJoCo's C solver (SolverMuJoCo with
use_mujoco_cpu) steps the imported robot, and the joint terms (armature, Coulomb frictionloss, viscous damping)
go in through the builder. Shared with the fit: only the imported robot (models/robot.py). bench/robot.py imports
this file too.
"""

from __future__ import annotations

import math
import os

import numpy as np
import warp as wp

wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines
import newton  # noqa: E402
from newton.actuators import ClampingDCMotor, ClampingMaxEffort, DrivePD  # noqa: E402

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment  # noqa: E402
from actuator_sysid.models.robot import RobotModel, load_robot  # noqa: E402

QUADRUPED_URDF = os.path.join(os.path.dirname(newton.__file__), "examples", "assets", "quadruped.urdf")
QUADRUPED_GROUPS = {"haa": ".*_HAA", "hfe": ".*_HFE", "kfe": ".*_KFE"}


def load_quadruped() -> RobotModel:
    """Newton's example quadruped (12 revolute joints, 4 legs) with its base fixed, as the fit would load it."""
    return load_robot(QUADRUPED_URDF)


def _per_joint(value: float | np.ndarray | None, n: int, default: float) -> np.ndarray:
    """A scalar or (J,) array as a (J,) float array; None → `default`."""
    if value is None:
        return np.full(n, default)
    return np.broadcast_to(np.asarray(value, float), (n,)).astype(float)


def simulate_newton_log(
    robot: RobotModel,
    cmd: np.ndarray,
    *,
    decimation: int,
    delay: int | np.ndarray = 0,
    armature: float | np.ndarray | None = None,
    damping: float | np.ndarray | None = None,
    friction: float | np.ndarray | None = None,
    saturation_effort: float | np.ndarray | None = None,
    velocity_limit: float | np.ndarray | None = None,
    effort_limit: float | np.ndarray | None = None,
    kp: float | np.ndarray = 20.0,
    kd: float | np.ndarray = 1.0,
    bias: float | np.ndarray | None = None,
    log_dt: float = 0.005,
    max_effort: float | np.ndarray | None = None,
    q0: np.ndarray | None = None,
    qd0: np.ndarray | None = None,
    effort_mode: str = "explicit",
    tau_ff: np.ndarray | None = None,
    body_mass: dict[str, float] | None = None,
    friction_upper: float | np.ndarray | None = None,
    friction_power: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Step the robot in Newton alone under position targets `cmd` (T, J) held for `decimation` physics steps,
    and feed-forward efforts `tau_ff` (T, J) N·m held alike (Newton's DrivePD reads them from control.joint_act
    and its delay buffer delays them with the targets; kp = kd = 0 makes a torque-driven arm). `body_mass`
    {link: kg} gives links another mass than the model's (a payload), their inertia about the COM scaled alike.

    Per joint (scalar or (J,)): armature (kg·m²), damping (viscous, N·m·s/rad), friction (Coulomb frictionloss,
    N·m) — None keeps the model file's; the DC envelope saturation_effort / velocity_limit / effort_limit
    (ClampingDCMotor's max_motor_effort) — None is inf (no envelope); kp, kd; bias, what the encoder adds to the
    true angle (the PD acts on the reading, so Newton sees the target shifted by −bias); max_effort, a
    ClampingMaxEffort after the DC clamp, default the model's effort limit. `delay` is Newton's delay_steps
    (physics steps, one or per joint). Starts from the measured q0 / qd0 (the true angle q0 − bias), default at
    rest at the reading cmd[0]. Returns the measured (q + bias, qd) at every log sample, (T, J) each, row 0 the
    start. `effort_mode` "implicit": every Newton actuator in Newton's implicit effort mode (see _implicit).
    `friction_upper` (scalar or (J,)): the frictionloss at each joint's upper limit, `friction` then being the
    one at its lower limit, linear between (`friction_power` p: along the stroke's share to the power p, a law a
    linear model only approximates): Newton's joint_friction set from the angle before every physics step
    (notify_model_changed).
    """
    n = len(robot.joint_names)
    arm = _per_joint(armature, n, 0.0) if armature is not None else robot.armature.copy()
    damp = _per_joint(damping, n, 0.0) if damping is not None else robot.viscous_friction.copy()
    fric = _per_joint(friction, n, 0.0) if friction is not None else robot.friction.copy()
    sat, vlim, elim = (_per_joint(v, n, math.inf) for v in (saturation_effort, velocity_limit, effort_limit))
    box = _per_joint(max_effort, n, math.inf) if max_effort is not None else robot.effort_limit.copy()
    kp_j, kd_j, b = _per_joint(kp, n, 0.0), _per_joint(kd, n, 0.0), _per_joint(bias, n, 0.0)
    lag = np.broadcast_to(np.asarray(delay, int), (n,))
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    builder.add_builder(robot.builder)
    links = [lab.rsplit("/", 1)[-1] for lab in builder.body_label]
    for name, m in (body_mass or {}).items():
        i = links.index(name)
        scale = m / builder.body_mass[i]
        inertia = np.asarray(builder.body_inertia[i], float).reshape(3, 3) * scale
        builder.body_mass[i], builder.body_inv_mass[i] = m, 1.0 / m
        builder.body_inertia[i] = wp.mat33(*inertia.reshape(-1))
        builder.body_inv_inertia[i] = wp.mat33(*np.linalg.inv(inertia).reshape(-1))
    for k, d in enumerate(robot.dof):
        builder.joint_armature[d], builder.joint_damping[d], builder.joint_friction[d] = (
            arm[k],
            damp[k],
            fric[k],
        )
        clamps: list = []
        if np.isfinite(sat[k]) or np.isfinite(elim[k]):
            clamps.append(
                (
                    ClampingDCMotor,
                    {
                        "saturation_effort": float(sat[k]),
                        "velocity_limit": float(vlim[k]),
                        "max_motor_effort": float(elim[k]),
                    },
                )
            )
        if np.isfinite(box[k]):
            clamps.append((ClampingMaxEffort, {"max_effort": float(box[k])}))
        builder.add_actuator(
            DrivePD,
            index=int(d),
            kp=float(kp_j[k]),
            kd=float(kd_j[k]),
            delay_steps=int(lag[k]) or None,
            clamping=clamps,
        )
    model = builder.finalize(device="cpu")
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True)
    s0, s1, control = model.state(), model.state(), model.control()
    q = s0.joint_q.numpy()
    q[robot.dof] = (cmd[0] if q0 is None else np.asarray(q0, float)) - b
    s0.joint_q.assign(q)
    if qd0 is not None:
        v = s0.joint_qd.numpy()
        v[robot.dof] = qd0
        s0.joint_qd.assign(v)
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    states = [(a, a.state(), a.state()) for a in model.actuators]
    refresh = _implicit(model, solver, s0) if effort_mode == "implicit" else None
    stroke = None
    if friction_upper is not None:
        up = _per_joint(friction_upper, n, 0.0)
        stroke = (robot.lower, robot.upper - robot.lower, fric, up, model.joint_friction.numpy())
    out_q, out_qd = [s0.joint_q.numpy()[robot.dof] + b], [s0.joint_qd.numpy()[robot.dof]]
    dt = log_dt / decimation
    target = control.joint_target_q.numpy()
    act = control.joint_act.numpy()
    for k in range((cmd.shape[0] - 1) * decimation):
        if k % decimation == 0:
            target[robot.dof] = cmd[k // decimation] - b
            control.joint_target_q.assign(target)
            if tau_ff is not None:
                act[robot.dof] = tau_ff[k // decimation]
                control.joint_act.assign(act)
        control.joint_f.zero_()
        if stroke is not None:  # the frictionloss at the angle, through Newton's model
            lo, span, f_lo, f_up, per_dof = stroke
            at = np.clip((s0.joint_q.numpy()[robot.dof] - lo) / span, 0.0, 1.0)
            per_dof[robot.dof] = f_lo + (f_up - f_lo) * at**friction_power
            model.joint_friction.assign(per_dof)
            solver.notify_model_changed(newton.ModelFlags.JOINT_DOF_FORCE_PROPERTIES)
        for i, (a, sa, sb) in enumerate(states):
            a.step(s0, control, sa, sb, dt=dt)
            states[i] = (a, sb, sa)
        solver.step(s0, s1, control, None, dt)
        if refresh is not None:
            refresh()
        s0, s1 = s1, s0
        if (k + 1) % decimation == 0:
            out_q.append(s0.joint_q.numpy()[robot.dof] + b)
            out_qd.append(s0.joint_qd.numpy()[robot.dof])
    return np.array(out_q, float), np.array(out_qd, float)


def _implicit(model: newton.Model, solver: newton.solvers.SolverMuJoCo, s0: newton.State):
    """Put the model's actuators in Newton's implicit effort mode on one JointSpaceResponse, primed at the start
    state with refresh(); returns the per-step refresh_from_solve() from MuJoCo C's own factorised inertia (the
    qLD that mj_step made at the step's start, mj_solveM), called after each solver step as Newton's tests do."""
    import mujoco

    response = newton.actuators.JointSpaceResponse(model)
    for a in model.actuators:
        a.set_effort_mode_implicit(response)
    response.refresh(s0)
    mm, md = solver.mj_model, solver.mj_data

    def solve(x: wp.array, y: wp.array) -> None:
        out = np.zeros((y.shape[0], mm.nv))
        mujoco.mj_solveM(mm, md, out, np.asarray(y.numpy(), float))
        x.assign(out.astype(np.float32))

    return lambda: response.refresh_from_solve(solve, dof_map=solver.mjc_dof_to_newton_dof)


def robot_recording(
    robot: RobotModel,
    cmd: np.ndarray,
    q: np.ndarray,
    qd: np.ndarray,
    *,
    log_dt: float = 0.005,
    kp: float | np.ndarray | None = None,
    kd: float | np.ndarray | None = None,
    named: bool = True,
    tau_ff: np.ndarray | None = None,
) -> Recording:
    """One-segment Recording of a simulated log: targets `cmd`, measured q / qd, gains stated when given.

    Gains go in the segment metadata as the fit reads them (a number, or {joint: value} when they differ);
    `named=False` leaves the joints unnamed, as a PACE `.pt` log, so the fit maps them in model order;
    `tau_ff` (T, J) is the logged feed-forward effort (zeros without).
    """
    names = robot.joint_names
    meta: dict = {}
    for key, v in (("kp", kp), ("kd", kd)):
        if v is not None:
            arr = _per_joint(v, len(names), 0.0)
            meta[key] = (
                float(arr[0])
                if np.all(arr == arr[0])
                else {nm: float(x) for nm, x in zip(names, arr, strict=True)}
            )
    z = np.zeros_like(q)
    seg = Segment(
        "0",
        np.arange(q.shape[0]) * log_dt,
        q=q,
        qd=qd,
        q_des=cmd,
        qd_des=z,
        tau_ff=z if tau_ff is None else np.asarray(tau_ff, float),
        metadata=meta,
    )
    joints = [JointInfo(n) for n in names] if named else [JointInfo(f"joint_{i}") for i in range(len(names))]
    return Recording(joints, [seg])


def torque_driven_log(
    robot: RobotModel, ff: np.ndarray, truth: dict, *, log_dt: float, decimation: int, delay: int
) -> dict:
    """A Newton-made log of `robot` driven by the feed-forward efforts `ff` (T + 1, J) alone (kp = kd = 0, the
    position command held at zero), with the joint terms `truth`: {ff, cmd, q, qd, rec}."""
    cmd = np.zeros_like(ff)
    q, qd = simulate_newton_log(
        robot,
        cmd,
        decimation=decimation,
        delay=delay,
        kp=0.0,
        kd=0.0,
        log_dt=log_dt,
        tau_ff=ff,
        q0=np.zeros(ff.shape[1]),
        **truth,
    )
    rec = robot_recording(robot, cmd, q, qd, log_dt=log_dt, kp=0.0, kd=0.0, tau_ff=ff)
    return {"ff": ff, "cmd": cmd, "q": q, "qd": qd, "rec": rec}


def chirp_targets(
    robot: RobotModel,
    samples: int,
    *,
    log_dt: float = 0.005,
    amplitude: float | np.ndarray = 0.5,
    center: float | np.ndarray | None = None,
    f0: float = 0.3,
    f1: float = 3.0,
    seed: int = 0,
) -> np.ndarray:
    """(samples + 1, J) position targets: every joint chirped at once, f0 → f1 Hz, a random phase per joint.

    Frequencies are offset a little per joint so no two joints move in lockstep; `center` defaults to the
    middle of the joint range where it is finite, else 0; amplitude in rad (scalar or (J,)).
    """
    rng = np.random.default_rng(seed)
    n = len(robot.joint_names)
    t = np.arange(samples + 1) * log_dt
    finite = np.isfinite(robot.lower) & np.isfinite(robot.upper) & (np.abs(robot.upper) < 1e6)
    mid = (
        np.where(finite, (robot.lower + robot.upper) / 2, 0.0)
        if center is None
        else _per_joint(center, n, 0.0)
    )
    dur = max(t[-1], log_dt)
    rate = (f1 - f0) / dur
    fj = f0 * (1.0 + 0.05 * np.arange(n))
    phase = rng.uniform(0, 2 * math.pi, n)
    arg = 2 * math.pi * (fj[None] * t[:, None] + 0.5 * rate * t[:, None] ** 2) + phase[None]
    return mid[None] + _per_joint(amplitude, n, 0.0)[None] * np.sin(arg)


# the two-link arm of the torque-driven tests: yaw without gravity load, pitch hanging; link masses {m1}, {m2} kg
ARM_TEMPLATE = """<mujoco model="arm2">
  <worldbody>
    <body name="base">
      <inertial pos="0 0 0" mass="20" diaginertia="0.1 0.1 0.1"/>
      <body name="link1">
        <joint name="yaw" type="hinge" axis="0 0 1"/>
        <inertial pos="0.1 0 0" mass="{m1}" diaginertia="0.02 0.04 0.04"/>
        <body name="link2" pos="0.2 0 0">
          <joint name="pitch" type="hinge" axis="0 1 0"/>
          <inertial pos="0 0 -0.15" mass="{m2}" diaginertia="0.04 0.04 0.005"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""
