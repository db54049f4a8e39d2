"""Candidates × windows rolled out through a whole robot's coupled dynamics: Newton 1.8's SolverMuJoCo on Warp,
or on MuJoCo's C backend (the MuJoCo model Newton's solver converts, one copy per world's terms, one MjData per
world), which on the CPU steps a world several times faster than Warp's launches do.

One Newton model holds one world per (candidate, window); each world is the robot with its own armature,
viscous damping and frictionloss on every actuated joint (MuJoCo's joint terms, set per world) and our PD
actuator: τ = kp·(q_target − (q + bias)) + kd·(qd_target − qd), then Newton's ClampingDCMotor (saturation
effort, velocity limit, max motor effort; docs/consumer-semantics.md §C.2, Isaac Lab's DCMotor clip §A.4) where a
saturation effort is set, else a box at the max motor effort, then the model's effort limit (ClampingMaxEffort),
computed once per physics step from the current state (explicit effort, §A.3) and applied as joint effort.
With effort_mode "implicit" the same PD and clamps are Newton's own actuator objects (DrivePD, ClampingDCMotor,
ClampingMaxEffort) in Newton's implicit effort mode, solved against the predicted end-of-step state through a
newton.actuators.JointSpaceResponse refreshed each step from the solver's own factorised inertia
(refresh_from_solve), in the order Newton's own tests step it.
The encoder bias is what the encoder adds to the true angle: the PD sees q + bias, and so does the log. A delay
counts physics steps (§C.2); each logged command is held for `decimation` physics steps of dt = log dt /
decimation. Contacts are off (the robot hangs); rigid-body dynamics are Newton's, none of our own.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import numpy as np
import warp as wp

from .kernels import dc_motor_clip
from .mujoco_c import ROWS, step_worlds
from .robot import RobotError, RobotModel

if TYPE_CHECKING:
    import newton
    from newton.actuators import Actuator

EFFORT_MODES = ("explicit", "implicit")

wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines


@wp.kernel
def _pd_kernel(
    q: wp.array(dtype=wp.float32),
    qd: wp.array(dtype=wp.float32),
    target_q: wp.array2d(dtype=wp.float32),
    target_qd: wp.array2d(dtype=wp.float32),
    target_ff: wp.array2d(dtype=wp.float32),
    row: int,
    dof: wp.array(dtype=wp.int32),
    kp: wp.array(dtype=wp.float32),
    kd: wp.array(dtype=wp.float32),
    limit: wp.array(dtype=wp.float32),
    bias: wp.array(dtype=wp.float32),
    sat: wp.array(dtype=wp.float32),
    vlim: wp.array(dtype=wp.float32),
    motor: wp.array(dtype=wp.float32),
    joint_f: wp.array(dtype=wp.float32),
    clipped: wp.array(dtype=wp.float32),
):
    """One PD effort plus the feed-forward effort per (world, actuated joint) from the current state and this
    step's target row, clamped (Newton's DrivePD: feedforward + kp·e + kd·ė, then the clamps).

    DC clamp where the saturation effort is finite (Newton's ClampingDCMotor: with sat = inf it is the box at the
    max motor effort), then the model's box (ClampingMaxEffort); `clipped` counts steps the envelope cut.
    """
    i = wp.tid()
    d = dof[i]
    v = qd[d]
    tau = target_ff[row, i] + kp[i] * (target_q[row, i] - (q[d] + bias[i])) + kd[i] * (target_qd[row, i] - v)
    out = wp.clamp(tau, -motor[i], motor[i])
    if sat[i] < 1.0e30:
        out = dc_motor_clip(tau, v, sat[i], vlim[i], motor[i])
    if out != tau:
        clipped[i] = clipped[i] + 1.0
    joint_f[d] = wp.clamp(out, -limit[i], limit[i])


@wp.kernel
def _record_kernel(
    q: wp.array(dtype=wp.float32),
    qd: wp.array(dtype=wp.float32),
    dof: wp.array(dtype=wp.int32),
    bias: wp.array(dtype=wp.float32),
    row: int,
    out_q: wp.array2d(dtype=wp.float32),
    out_qd: wp.array2d(dtype=wp.float32),
):
    """The measured (biased) position and the velocity of every (world, joint) at one log sample."""
    i = wp.tid()
    out_q[row, i] = q[dof[i]] + bias[i]
    out_qd[row, i] = qd[dof[i]]


@wp.kernel
def _target_kernel(
    target_q: wp.array2d(dtype=wp.float32),
    target_qd: wp.array2d(dtype=wp.float32),
    target_ff: wp.array2d(dtype=wp.float32),
    row: int,
    dof: wp.array(dtype=wp.int32),
    bias: wp.array(dtype=wp.float32),
    out_q: wp.array(dtype=wp.float32),
    out_qd: wp.array(dtype=wp.float32),
    out_ff: wp.array(dtype=wp.float32),
):
    """This physics step's targets into Newton's per-DoF arrays; the PD acts on the reading q + bias, so Newton's
    actuator (which reads the true q) sees the position target shifted by −bias."""
    i = wp.tid()
    out_q[dof[i]] = target_q[row, i] - bias[i]
    out_qd[dof[i]] = target_qd[row, i]
    out_ff[dof[i]] = target_ff[row, i]


@wp.kernel
def _implicit_clip_kernel(
    computed: wp.array(dtype=wp.float32),
    applied: wp.array(dtype=wp.float32),
    dof: wp.array(dtype=wp.int32),
    clipped: wp.array(dtype=wp.float32),
):
    """Count the steps at which the clamps cut the implicit effort (applied below the drive law at the solved
    state by more than the solve's own tolerance), then clear the accumulated drive-law output."""
    i = wp.tid()
    c = computed[dof[i]]
    if wp.abs(applied[dof[i]]) < wp.abs(c) - (1.0e-4 * wp.abs(c) + 1.0e-3):
        clipped[i] = clipped[i] + 1.0
    computed[dof[i]] = 0.0


@dataclass
class JointTerms:
    """Per-world, per-joint parameters of one batched rollout; every array is (W, J) in SI units. The names are
    the registry's (models/parameters.py), and the model file's own joint effort limit beside them."""

    stiffness: np.ndarray  # PD kp, N·m/rad
    damping: np.ndarray  # PD kd, N·m·s/rad
    armature: np.ndarray
    viscous_friction: np.ndarray  # the joint's viscous damping, N·m·s/rad
    friction: np.ndarray  # frictionloss, N·m (at the joint's lower limit where friction_upper is given)
    encoder_offset: np.ndarray  # rad: the encoder reads the true angle plus it
    joint_effort_limit: np.ndarray  # the model's joint effort limit (a box after the motor's envelope), N·m
    saturation_effort: np.ndarray | None = None  # DC motor stall effort, N·m; None: no DC clamp
    actuator_velocity_limit: np.ndarray | None = None  # DC motor no-load speed, rad/s; None: inf
    actuator_effort_limit: np.ndarray | None = None  # the DC clamp's max motor effort, N·m; None: inf
    # link inertial corrections: builder body indices (B,), their mass (W, B) kg and COM (W, B, 3) m in the body
    # frame (None: the model's); the inertia about the COM scales with the mass
    bodies: np.ndarray | None = None
    body_mass: np.ndarray | None = None
    body_com: np.ndarray | None = None
    # frictionloss at the joint's upper limit (W, J), linear along the stroke from `friction` at the lower one;
    # None: constant
    friction_upper: np.ndarray | None = None

    def position_friction(self) -> bool:
        """Whether the friction changes along any joint's stroke."""
        return self.friction_upper is not None and not np.array_equal(
            np.broadcast_to(self.friction_upper, np.shape(self.friction)), self.friction
        )

    def envelope(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(saturation effort, velocity limit, max motor effort), inf where unset, broadcast to the PD gains."""
        shape = np.shape(self.stiffness)
        return tuple(
            np.broadcast_to(np.inf if x is None else np.asarray(x, float), shape)  # type: ignore[return-value]
            for x in (self.saturation_effort, self.actuator_velocity_limit, self.actuator_effort_limit)
        )


def newton_actuator(dofs: np.ndarray, terms: JointTerms, device: str) -> Actuator:
    """One Newton Actuator over Newton DoFs `dofs` (W·J,): DrivePD → ClampingDCMotor → ClampingMaxEffort with
    the (W, J) terms flattened alike, targets read from `joint_target_q` / `joint_target_qd`, the feed-forward
    effort from `joint_act` (Newton's default),
    the drive law also written to `joint_computed`. One actuator over every DoF: Newton's implicit mode then
    solves each articulation's DoFs as one coupled system, as it does for an actuator group the builder made."""
    from newton.actuators import Actuator, ClampingDCMotor, ClampingMaxEffort, DrivePD

    shape = np.shape(terms.stiffness)

    def arr(x: np.ndarray | float) -> wp.array:
        flat = np.ascontiguousarray(np.broadcast_to(np.asarray(x, float), shape).reshape(-1), np.float32)
        return wp.array(flat, dtype=wp.float32, device=device)

    sat, vlim, motor = terms.envelope()
    vlim = np.where(np.isfinite(sat), vlim, np.inf)  # no saturation: no speed limit (Newton's rule, inf·0)
    return Actuator(
        indices=wp.array(np.asarray(dofs, np.uint32), dtype=wp.uint32, device=device),
        drive=DrivePD(kp=arr(terms.stiffness), kd=arr(terms.damping)),
        clamping=[
            ClampingDCMotor(
                saturation_effort=arr(sat), velocity_limit=arr(vlim), max_motor_effort=arr(motor)
            ),
            ClampingMaxEffort(max_effort=arr(terms.joint_effort_limit)),
        ],
        control_feedforward_attr="joint_act",
        control_computed_output_attr="joint_computed",
    )


def limited(robot: RobotModel) -> np.ndarray:
    """(J,) whether each joint has a finite range in the model (an importer's ±1e10 "unlimited" is none)."""
    span = np.asarray(robot.upper, float) - np.asarray(robot.lower, float)
    return np.isfinite(span) & (span > 0) & (span < 1e3)


def stroke(robot: RobotModel) -> tuple[np.ndarray, np.ndarray]:
    """(J,) each joint's lower limit and range, rad (0 and 1 where the model gives none): where a
    position-dependent friction runs from `friction` to `friction_upper`."""
    lo, hi = np.asarray(robot.lower, float), np.asarray(robot.upper, float)
    ok = limited(robot)
    return np.where(ok, lo, 0.0), np.where(ok, hi - lo, 1.0)


def physics_targets(
    cmd: np.ndarray,
    starts: np.ndarray,
    samples: int,
    decimation: int,
    delay: int,
    first: np.ndarray | None = None,
) -> np.ndarray:
    """(samples·decimation, W, J) command each physics step sees: log sample ⌊(k − delay)/decimation⌋ of its window.

    `cmd` is (T, J) over the whole log and `starts` (W,) each window's first sample; commands from before the
    window (a delay reaching back) are the log's own, the first sample's before the log starts, or before the
    window's recording starts (`first` (W,), the first sample of each window's recording, in a log of several).
    """
    k = np.arange(samples * decimation)
    idx = starts[None, :] + np.floor_divide(k - delay, decimation)[:, None]
    if first is not None:
        idx = np.maximum(idx, np.asarray(first, int)[None, :])
    return cmd[np.clip(idx, 0, cmd.shape[0] - 1)]


def _req(a: wp.array | None) -> wp.array:
    """A Newton state / control array that this fixed-base model always has."""
    if a is None:
        raise RobotError("Newton returned a state without joint arrays")
    return a


class ArticulatedRollout:
    """A Newton model of `worlds` copies of the robot and its SolverMuJoCo (Warp, CPU unless told); with
    `mujoco_cpu`, MuJoCo's C backend: one Newton world whose converted MuJoCo model is copied per distinct set
    of joint terms, each world its own MjData (explicit mode at any world count, implicit at one);
    `effort_mode` "explicit" or Newton's "implicit"."""

    def __init__(
        self,
        robot: RobotModel,
        worlds: int,
        device: str = "cpu",
        iterations: int | None = None,
        ls_iterations: int | None = None,
        mujoco_cpu: bool = False,
        effort_mode: str = "explicit",
    ) -> None:
        import newton

        if effort_mode not in EFFORT_MODES:
            raise RobotError(f"effort_mode {effort_mode!r}: one of {', '.join(EFFORT_MODES)}")
        self.effort_mode = effort_mode
        self.robot, self.worlds, self.device = robot, int(worlds), device
        template = cast("newton.ModelBuilder", robot.builder)
        if mujoco_cpu and effort_mode == "implicit" and self.worlds != 1:
            raise RobotError("MuJoCo's C backend steps one world in implicit mode")
        builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
        builder.replicate(template, 1 if mujoco_cpu else self.worlds)  # C: one world, copied per terms
        self.model = builder.finalize(device=device)
        self.solver = newton.solvers.SolverMuJoCo(
            self.model,
            disable_contacts=True,
            iterations=iterations,
            ls_iterations=ls_iterations,
            use_mujoco_cpu=mujoco_cpu,
        )
        self.dofs_per_world = template.joint_dof_count
        self.coords_per_world = template.joint_coord_count
        j = len(robot.joint_names)
        w = np.arange(self.model.world_count)[:, None]
        self.dof_flat = (w * self.dofs_per_world + robot.dof[None, :]).reshape(-1)  # (W·J,)
        q_start = np.array(template.joint_q_start)
        qd_start = np.array(template.joint_qd_start)
        coord_of_dof = {int(qd_start[k]): int(q_start[k]) for k in range(len(q_start))}
        self.coord_flat = (
            w * self.coords_per_world + np.array([coord_of_dof[int(d)] for d in robot.dof])[None, :]
        ).reshape(-1)
        self._coord_wp: wp.array = wp.array(self.coord_flat.astype(np.int32), dtype=wp.int32, device=device)
        self.n = self.model.world_count * j
        if not np.array_equal(self.coord_flat, self.dof_flat):
            raise RobotError(
                f"{robot.path.name}: coordinates and DoFs differ (a free base); this version rolls out "
                "fixed-base robots only"
            )
        self.steps_run = 0
        self.clip_fraction = np.zeros((self.worlds, j))  # of the last run's physics steps, the envelope cut
        self.mujoco_cpu = mujoco_cpu
        self._c_datas: list = []  # MuJoCo C: one MjData per world, kept between runs
        self._response: newton.actuators.JointSpaceResponse | None = None

    def _c_data(self) -> list:
        """One MjData per world (the solver's own first), kept between runs and grown when the count grows."""
        import mujoco

        if not self._c_datas:
            self._c_datas.append(self.solver.mj_data)
        mm = self.solver.mj_model
        self._c_datas.extend(mujoco.MjData(mm) for _ in range(self.worlds - len(self._c_datas)))
        return self._c_datas[: self.worlds]

    def at_worlds(self, worlds: int) -> ArticulatedRollout:
        """This C-backend rollout stepping `worlds` worlds from its next run: one converted model serves any count
        (each world is a copy of it with its own MjData), so fits of one robot need not convert it again."""
        if not self.mujoco_cpu:
            raise RobotError("only MuJoCo's C backend changes its world count")
        if self.effort_mode == "implicit" and worlds != 1:
            raise RobotError("MuJoCo's C backend steps one world in implicit mode")
        self.worlds = int(worlds)
        return self

    def _solve_inverse(self) -> Callable[[wp.array2d, wp.array2d], None]:
        """x = M⁻¹ y from the factorisation the solver made at its last step's start (MuJoCo's qLD, armature in),
        (worlds, nv) in MuJoCo's DoF order: mujoco_warp's solve_m, or mj_solveM on the C backend."""
        if self.mujoco_cpu:
            import mujoco

            mm, md = self.solver.mj_model, self.solver.mj_data

            def solve_c(x: wp.array2d, y: wp.array2d) -> None:
                xa, ya = cast(wp.array, x), cast(wp.array, y)  # Warp's array2d stubs lack numpy() / assign()
                out = np.zeros((ya.shape[0], mm.nv))
                mujoco.mj_solveM(mm, md, out, ya.numpy().astype(np.float64))
                xa.assign(out.astype(np.float32))

            return solve_c
        import mujoco_warp

        def solve_warp(x: wp.array2d, y: wp.array2d) -> None:
            mujoco_warp.solve_m(self.solver.mjw_model, self.solver.mjw_data, x, y)

        return solve_warp

    def _c_models(self, terms: JointTerms, dt: float) -> list:
        """One MuJoCo model per world: the solver's converted model after Newton's notify_model_changed with that
        world's joint and body terms, copied once per distinct set (worlds of one candidate share it; with friction
        along the stroke every world has its own copy, and the frictionloss is not part of the set)."""
        import copy

        w = self.worlds
        per_world = [
            np.broadcast_to(np.asarray(x, float), (w, len(self.robot.joint_names)))
            for x in (terms.armature, terms.viscous_friction, terms.friction)
        ]
        if terms.bodies is not None and terms.body_mass is not None:
            nb = np.size(terms.bodies)
            per_world.append(np.broadcast_to(np.asarray(terms.body_mass, float), (w, nb)))
            if terms.body_com is not None:
                per_world.append(
                    np.broadcast_to(np.asarray(terms.body_com, float), (w, nb, 3)).reshape(w, -1)
                )
        along = terms.position_friction()  # each world writes its own frictionloss before every step
        parts = per_world[:2] + per_world[3:] if along else per_world  # frictionloss out of the set
        key = np.concatenate([np.asarray(x).reshape(w, -1) for x in parts], axis=1)
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        models: list = [None] * w
        for n, k in enumerate(first):
            one = slice(int(k), int(k) + 1)
            self._set_terms(
                JointTerms(
                    stiffness=terms.stiffness,
                    damping=terms.damping,
                    armature=per_world[0][one],
                    viscous_friction=per_world[1][one],
                    friction=per_world[2][one],
                    encoder_offset=terms.encoder_offset,
                    joint_effort_limit=terms.joint_effort_limit,
                    bodies=terms.bodies,
                    body_mass=None if terms.body_mass is None else per_world[3][one],
                    body_com=None if terms.body_com is None else per_world[4][one].reshape(1, -1, 3),
                )
            )
            mm = self.solver.mj_model
            mm.opt.timestep = dt
            # with friction along the stroke each world holds its own frictionloss, so its own copy
            shared = None if along else mm if w == 1 else copy.copy(mm)
            for i in np.flatnonzero(np.ravel(inverse) == n):
                models[i] = copy.copy(mm) if shared is None else shared
        return models

    def _c_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """Where our joints sit in MuJoCo's model: joint k is MuJoCo DoF order[k], its coordinate qpos[qidx[k]]."""
        mm = self.solver.mj_model
        mapping = self.solver.mjc_dof_to_newton_dof
        if mapping is None:
            raise RobotError(f"{self.robot.path.name}: Newton's MuJoCo model has no DoF mapping")
        col = {int(d): k for k, d in enumerate(self.robot.dof)}
        cols = np.array([col[int(n)] for n in np.asarray(mapping.numpy())[0]])  # type: ignore[attr-defined]
        order = np.argsort(cols)
        return order, mm.jnt_qposadr[mm.dof_jntid][order]

    def _run_c(
        self,
        q0: np.ndarray,
        qd0: np.ndarray,
        target_q: np.ndarray,
        target_qd: np.ndarray,
        terms: JointTerms,
        decimation: int,
        dt: float,
        target_ff: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """run() on MuJoCo's C backend: the MuJoCo model Newton's SolverMuJoCo converts (one per world's terms) and
        one MjData per world, each stepped as the solver's step() does (the effort as qfrc_applied, then mj_step),
        without Newton's per-step copies between its state and MuJoCo's data (the state lives in MuJoCo's data).
        Same PD and clamps as _pd_kernel, in float64, stepped in native code (models/mujoco_c.py)."""
        import mujoco

        models = self._c_models(terms, dt)
        datas = self._c_data()[: self.worlds]
        order, qidx = self._c_indices()
        w, j = self.worlds, len(self.robot.joint_names)
        rows = (
            terms.stiffness,
            terms.damping,
            terms.joint_effort_limit,
            terms.encoder_offset,
            *terms.envelope(),
            terms.friction,
            terms.friction if terms.friction_upper is None else terms.friction_upper,
        )
        params = np.stack([np.broadcast_to(np.asarray(x, float), (w, j)) for x in rows], axis=1)
        start_q = np.asarray(q0, float).reshape(w, j) - params[:, ROWS.index("bias")]
        start_v = np.asarray(qd0, float).reshape(w, j)
        for i, (m, d) in enumerate(zip(models, datas, strict=True)):
            mujoco.mj_resetData(m, d)
            d.qpos[qidx] = start_q[i]
            d.qvel[order] = start_v[i]
        along = np.stack(stroke(self.robot)) if terms.position_friction() else None
        # worlds are independent: one launch per core this process may use, each stepping its share of them
        threads = min(len(os.sched_getaffinity(0)), w)
        run = step_worlds(
            list(zip(models, datas, strict=True)),
            order,
            qidx,
            params,
            along,
            (target_q, target_qd, target_ff),
            decimation,
            threads,
        )
        self.steps_run += target_q.shape[0]
        self.clip_fraction = run.cut_steps / max(target_q.shape[0], 1)
        return run.q, run.qd

    def _set_bodies(self, terms: JointTerms) -> None:
        """Write the payload bodies' mass, COM and (mass-scaled) inertia per world, or put the model's back when
        the terms name none after a run that did, and tell the solver."""
        import newton

        template = cast("newton.ModelBuilder", self.robot.builder)
        nw = self.model.world_count
        if terms.bodies is None or terms.body_mass is None:
            if not getattr(self, "_bodies_set", False):
                return
            bodies = np.arange(template.body_count)
            mass = np.broadcast_to(np.array(template.body_mass, float), (nw, bodies.size))
            com = None
        else:
            bodies = np.asarray(terms.bodies, int)
            mass = np.broadcast_to(np.asarray(terms.body_mass, float), (nw, bodies.size))
            com = None if terms.body_com is None else np.broadcast_to(terms.body_com, (nw, bodies.size, 3))
        m0 = np.array(template.body_mass, float)[bodies]
        i0 = np.array([np.asarray(template.body_inertia[b], float).reshape(3, 3) for b in bodies])
        c0 = np.array([np.asarray(template.body_com[b], float) for b in bodies])
        idx = (np.arange(nw)[:, None] * template.body_count + bodies[None]).reshape(-1)
        scale = (mass / np.where(m0 > 0, m0, 1.0)[None]).reshape(-1)
        inertia = (i0[None] * (mass / np.where(m0 > 0, m0, 1.0)[None])[..., None, None]).reshape(-1, 3, 3)
        values = {
            "body_mass": mass.reshape(-1),
            "body_inv_mass": np.where(mass > 0, 1.0 / np.where(mass > 0, mass, 1.0), 0.0).reshape(-1),
            "body_inertia": inertia,
            "body_inv_inertia": np.linalg.inv(inertia + 1e-30 * np.eye(3)) * (scale > 0)[:, None, None],
            "body_com": (np.broadcast_to(c0[None], (nw, *c0.shape)) if com is None else com).reshape(-1, 3),
        }
        for name, v in values.items():
            arr = getattr(self.model, name)
            host = arr.numpy()
            host[idx] = v
            arr.assign(host)
        self._bodies_set = terms.bodies is not None
        self.solver.notify_model_changed(newton.ModelFlags.BODY_INERTIAL_PROPERTIES)

    def _set_terms(self, terms: JointTerms) -> None:
        """Write armature, damping and frictionloss per world into the model and tell the solver."""
        import newton

        self._set_bodies(terms)

        for name, values in (
            ("joint_armature", terms.armature),
            ("joint_damping", terms.viscous_friction),
            ("joint_friction", terms.friction),
        ):
            arr = getattr(self.model, name)
            host = arr.numpy()
            host[self.dof_flat] = np.asarray(values, float).reshape(-1)
            arr.assign(host)
        self.solver.notify_model_changed(newton.ModelFlags.JOINT_DOF_PROPERTIES)

    def _dev(self, a: np.ndarray) -> wp.array:
        """A float32 device copy: (P, W, J) → (P, W·J), anything else flattened."""
        x = np.asarray(a, np.float32)
        return wp.array(
            np.ascontiguousarray(x.reshape(x.shape[0], -1) if x.ndim == 3 else x.reshape(-1)),
            dtype=wp.float32,
            device=self.device,
        )

    def _initial_state(self, q0: np.ndarray, qd0: np.ndarray, bias: np.ndarray) -> newton.State:
        """The state at the measured (q0, qd0): the true angle is the reading minus the encoder bias."""
        import newton

        s0 = self.model.state()
        jq, jqd = _req(s0.joint_q), _req(s0.joint_qd)
        q = jq.numpy()
        q[self.coord_flat] = (np.asarray(q0, float) - bias).reshape(-1)
        jq.assign(q)
        qd = jqd.numpy()
        qd[self.dof_flat] = np.asarray(qd0, float).reshape(-1)
        jqd.assign(qd)
        newton.eval_fk(self.model, jq, jqd, s0)
        return s0

    def run(
        self,
        q0: np.ndarray,
        qd0: np.ndarray,
        target_q: np.ndarray,
        target_qd: np.ndarray,
        terms: JointTerms,
        decimation: int,
        dt: float,
        target_ff: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Roll out every world from measured (q0, qd0) (W, J) under per-physics-step targets (P, W, J) and
        feed-forward efforts `target_ff` (P, W, J) N·m, none when None (a torque-driven joint has kp = kd = 0).

        Returns the measured positions (q + bias) and velocities at each log sample, (P/decimation + 1, W, J),
        row 0 the initial state; dt is the physics step. `clip_fraction` then holds, per (world, joint), the
        share of physics steps at which the motor envelope cut the PD effort.
        """
        w, j = self.worlds, len(self.robot.joint_names)
        samples = target_q.shape[0] // decimation
        ff = np.zeros(np.shape(target_q)) if target_ff is None else np.asarray(target_ff, float)
        if self.mujoco_cpu and self.effort_mode == "explicit":
            return self._run_c(q0, qd0, target_q, target_qd, terms, decimation, dt, ff)
        if terms.position_friction():
            raise RobotError(
                "position-dependent friction runs on MuJoCo's C backend (the CPU, explicit effort) only"
            )
        self._set_terms(terms)
        if self.effort_mode == "implicit":
            return self._run_implicit(q0, qd0, target_q, target_qd, terms, decimation, dt, ff)
        tq, tqd, tff = self._dev(target_q), self._dev(target_qd), self._dev(ff)
        kp, kd, lim, bias, sat, vlim, motor = (
            self._dev(np.broadcast_to(x, (w, j)))
            for x in (
                terms.stiffness,
                terms.damping,
                terms.joint_effort_limit,
                terms.encoder_offset,
                *terms.envelope(),
            )
        )
        s0 = self._initial_state(q0, qd0, np.broadcast_to(terms.encoder_offset, (w, j)))
        s1 = self.model.state()
        control = self.model.control()
        joint_f = _req(control.joint_f)
        clipped = wp.zeros(self.n, dtype=wp.float32, device=self.device)
        out_q = wp.zeros((samples + 1, self.n), dtype=wp.float32, device=self.device)
        out_qd = wp.zeros((samples + 1, self.n), dtype=wp.float32, device=self.device)
        wp.launch(
            _record_kernel,
            self.n,
            [s0.joint_q, s0.joint_qd, self._coord_wp, bias, 0, out_q, out_qd],
            device=self.device,
        )
        for k in range(samples * decimation):
            joint_f.zero_()
            wp.launch(
                _pd_kernel,
                self.n,
                [
                    s0.joint_q,
                    s0.joint_qd,
                    tq,
                    tqd,
                    tff,
                    k,
                    self._coord_wp,
                    kp,
                    kd,
                    lim,
                    bias,
                    sat,
                    vlim,
                    motor,
                    joint_f,
                    clipped,
                ],
                device=self.device,
            )
            self.solver.step(s0, s1, control, None, dt)
            s0, s1 = s1, s0
            if (k + 1) % decimation == 0:
                wp.launch(
                    _record_kernel,
                    self.n,
                    [s0.joint_q, s0.joint_qd, self._coord_wp, bias, (k + 1) // decimation, out_q, out_qd],
                    device=self.device,
                )
        self.steps_run += samples * decimation
        self.clip_fraction = clipped.numpy().reshape(w, j).astype(float) / max(samples * decimation, 1)
        shape = (samples + 1, w, j)
        return out_q.numpy().reshape(shape).astype(float), out_qd.numpy().reshape(shape).astype(float)

    def _run_implicit(
        self,
        q0: np.ndarray,
        qd0: np.ndarray,
        target_q: np.ndarray,
        target_qd: np.ndarray,
        terms: JointTerms,
        decimation: int,
        dt: float,
        target_ff: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """run() in Newton's implicit effort mode, stepped as Newton's own tests step it: the response primed with
        refresh() at the start, then per physics step the actuator, the solver, and refresh_from_solve() from
        the factorisation the solver just made at that step's start (one step stale, Newton's phase)."""
        import newton

        w, j = self.worlds, len(self.robot.joint_names)
        samples = target_q.shape[0] // decimation
        dev = self.device
        if self._response is None:
            self._response = newton.actuators.JointSpaceResponse(self.model)
        response, solve = self._response, self._solve_inverse()
        actuator = newton_actuator(self.dof_flat, terms, dev)
        actuator.set_effort_mode_implicit(response)
        tq, tqd, tff = self._dev(target_q), self._dev(target_qd), self._dev(target_ff)
        bias_np = np.broadcast_to(terms.encoder_offset, (w, j))
        bias = self._dev(bias_np)
        s0, s1 = self._initial_state(q0, qd0, bias_np), self.model.state()
        control = self.model.control()
        joint_f = _req(control.joint_f)
        nd = self.model.joint_dof_count
        ctrl = SimpleNamespace(
            joint_target_q=wp.zeros(nd, dtype=wp.float32, device=dev),
            joint_target_qd=wp.zeros(nd, dtype=wp.float32, device=dev),
            joint_f=joint_f,
            joint_computed=wp.zeros(nd, dtype=wp.float32, device=dev),
            joint_act=wp.zeros(nd, dtype=wp.float32, device=dev),
        )
        clipped = wp.zeros(self.n, dtype=wp.float32, device=dev)
        out_q = wp.zeros((samples + 1, self.n), dtype=wp.float32, device=dev)
        out_qd = wp.zeros((samples + 1, self.n), dtype=wp.float32, device=dev)
        rec = [self._coord_wp, bias]
        wp.launch(_record_kernel, self.n, [s0.joint_q, s0.joint_qd, *rec, 0, out_q, out_qd], device=dev)
        response.refresh(s0)
        dof_map = self.solver.mjc_dof_to_newton_dof
        for k in range(samples * decimation):
            wp.launch(
                _target_kernel,
                self.n,
                [
                    tq,
                    tqd,
                    tff,
                    k,
                    self._coord_wp,
                    bias,
                    ctrl.joint_target_q,
                    ctrl.joint_target_qd,
                    ctrl.joint_act,
                ],
                device=dev,
            )
            joint_f.zero_()
            actuator.step(s0, ctrl, dt=dt)
            wp.launch(
                _implicit_clip_kernel,
                self.n,
                [ctrl.joint_computed, joint_f, self._coord_wp, clipped],
                device=dev,
            )
            self.solver.step(s0, s1, control, None, dt)
            response.refresh_from_solve(solve, dof_map=dof_map)
            s0, s1 = s1, s0
            if (k + 1) % decimation == 0:
                r = (k + 1) // decimation
                wp.launch(
                    _record_kernel, self.n, [s0.joint_q, s0.joint_qd, *rec, r, out_q, out_qd], device=dev
                )
        self.steps_run += samples * decimation
        self.clip_fraction = clipped.numpy().reshape(w, j).astype(float) / max(samples * decimation, 1)
        shape = (samples + 1, w, j)
        return out_q.numpy().reshape(shape).astype(float), out_qd.numpy().reshape(shape).astype(float)


@wp.func
def _lerp(a: wp.array2d(dtype=wp.float32), s: int, j: int, fr: float):
    return (1.0 - fr) * a[s, j] + fr * a[s + 1, j]


@wp.func
def _clamps(tau: float, v: float, sat: float, vlim: float, motor: float, limit: float):
    """_pd_kernel's clamp chain: the DC envelope (a box at the max motor effort without one), then the model's."""
    f = wp.clamp(tau, -motor, motor)
    if sat < 1.0e30:
        f = dc_motor_clip(tau, v, sat, vlim, motor)
    return wp.clamp(f, -limit, limit)


@wp.func
def _implicit_pd(
    q_des: float,
    qd_des: float,
    ff: float,
    y: float,
    v: float,
    kp: float,
    kd: float,
    hm: float,
    h: float,
    sat: float,
    vlim: float,
    motor: float,
    limit: float,
):
    """Newton's implicit effort for one DoF of inertia m (hm = h/m): f = clamp(ff + PD at qd' = v + hm·f, q' = y + h·qd')
    with the clamps at qd'. The linear law is solved exactly, then the clamps re-applied at the predicted speed
    (the DC bound moves with it, slowly): the root Newton's iterations reach (docs/consumer-semantics.md §C.2)."""
    f_lin = (ff + kp * (q_des - y - h * v) + kd * (qd_des - v)) / (1.0 + hm * (kd + h * kp))
    f = _clamps(f_lin, v + hm * f_lin, sat, vlim, motor, limit)
    for _it in range(3):
        f = _clamps(f_lin, v + hm * f, sat, vlim, motor, limit)
    return f


@wp.kernel
def _decoupled_kernel(
    y_meas: wp.array2d(dtype=wp.float32),
    v_meas: wp.array2d(dtype=wp.float32),
    cmd: wp.array2d(dtype=wp.float32),
    cmd_qd: wp.array2d(dtype=wp.float32),
    cmd_ff: wp.array2d(dtype=wp.float32),
    mass: wp.array2d(dtype=wp.float32),
    load: wp.array2d(dtype=wp.float32),
    stiff: wp.array2d(dtype=wp.float32),
    shift: wp.array3d(dtype=wp.float32),
    starts: wp.array(dtype=wp.int32),
    firsts: wp.array(dtype=wp.int32),
    delay: wp.array(dtype=wp.int32),
    par: wp.array3d(dtype=wp.float32),
    q_lo: wp.array(dtype=wp.float32),
    q_span: wp.array(dtype=wp.float32),
    length: int,
    dec: int,
    h: float,
    n_w: int,
    n_j: int,
    b_ref: float,
    leak: float,
    implicit: int,
    out: wp.array3d(dtype=wp.float32),
):
    """One joint's own 1-DoF rollout per (candidate, window, joint) over a whole window, in one thread.

    Along the measured motion: inertia `mass` (the joint-space diagonal) + armature, the effort the rest of the
    robot and gravity need `load`, the logged feed-forward effort `cmd_ff` (delayed as the targets), and its change with this joint's own angle `stiff` (∂load/∂q) and with the
    candidate's encoder biases `shift`; the PD and its clamps as _pd_kernel, MuJoCo's implicit damping
    (implicitfast) and its soft frictionloss constraint (reference −b_ref·v, regulariser `leak`/mass); with
    `implicit`, the effort in Newton's implicit mode on this 1-DoF plant (_implicit_pd).
    par[c, j] = kp, kd, armature, damping, friction, bias, limit, saturation, velocity limit, motor effort,
    friction at the upper limit (the friction runs linearly from the lower limit `q_lo` over the stroke `q_span`).
    """
    i = wp.tid()
    c = int(i / (n_w * n_j))  # type: ignore[operator]  # Warp: integer division; wp.tid()'s stub is a union
    rem = int(i - c * (n_w * n_j))  # type: ignore[operator]
    w = int(rem / n_j)
    j = int(rem - w * n_j)
    st = starts[w]
    kp, kd, arm, visc, fric = par[c, j, 0], par[c, j, 1], par[c, j, 2], par[c, j, 3], par[c, j, 4]
    limit, sat, vlim, motor = par[c, j, 6], par[c, j, 7], par[c, j, 8], par[c, j, 9]
    fric_up, bias = par[c, j, 10], par[c, j, 5]
    y = y_meas[st, j]
    v = v_meas[st, j]
    last = y_meas.shape[0] - 1
    for k in range(length * dec):
        s = st + k // dec
        fr = float(k % dec) / float(dec)
        kk = k - delay[c]
        ci = st + kk // dec
        if kk < 0:
            ci = st - (-kk + dec - 1) // dec
        ci = wp.clamp(ci, firsts[w], last)  # no command from before the window's recording
        m = _lerp(mass, s, j, fr) + arm
        # both targets delayed, as Isaac Lab's DelayBuffers and Newton's Delay hold them
        u = cmd_ff[ci, j]
        f = _clamps(u + kp * (cmd[ci, j] - y) + kd * (cmd_qd[ci, j] - v), v, sat, vlim, motor, limit)
        if implicit != 0:
            # this plant's own response to an impulse, 1/m (Newton's coupled A is not this plant's: measured worse)
            f = _implicit_pd(cmd[ci, j], cmd_qd[ci, j], u, y, v, kp, kd, h / m, h, sat, vlim, motor, limit)
        ext = _lerp(load, s, j, fr) + (1.0 - fr) * shift[c, s, j] + fr * shift[c, s + 1, j]
        ext = ext + _lerp(stiff, s, j, fr) * (y - _lerp(y_meas, s, j, fr))
        a_free = (f - ext - visc * v) / m
        fc = fric + (fric_up - fric) * wp.clamp(
            (y - bias - q_lo[j]) / q_span[j], 0.0, 1.0
        )  # along the stroke
        ff = wp.clamp(-(a_free + b_ref * v) * m / (1.0 + leak), -fc, fc)  # MuJoCo's soft frictionloss
        acc = a_free + ff / m
        v = v + h * m * acc / (m + h * visc)  # implicitfast: (M + h·D) Δv = h·M·qacc
        y = y + h * v
        if (k + 1) % dec == 0:
            r = (k + 1) // dec
            out[c * n_w + w, r - 1, j] = y - y_meas[st + r, j]


def _derivatives(q: np.ndarray, log_dt: float, cuts: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Savitzky–Golay velocity and acceleration of the log (T, J), each recording on its own: `cuts` are the
    first samples of the recordings after the first (a filter across a seam would see a jump)."""
    from scipy.signal import savgol_filter

    dq, ddq = np.zeros_like(q), np.zeros_like(q)
    edges = [0, *(int(c) for c in (cuts if cuts is not None else ()) if 0 < c < q.shape[0]), q.shape[0]]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        n = b - a
        if n < 5:  # a stub too short for the filter: plain differences
            dq[a:b] = np.gradient(q[a:b], log_dt, axis=0) if n > 1 else 0.0
            continue
        win = min(9, n - (1 - n % 2))
        dq[a:b] = savgol_filter(q[a:b], win, 3, deriv=1, delta=log_dt, axis=0)
        ddq[a:b] = savgol_filter(q[a:b], win, 3, deriv=2, delta=log_dt, axis=0)
    return dq, ddq


class DecoupledRollout:
    """Each joint's own 1-DoF rollout along the log's measured motion, batched over candidates and windows.

    Newton (MuJoCo's inverse dynamics on the model SolverMuJoCo converts) gives, at every log sample up to `n`,
    the joint-space inertia's diagonal, the effort the rest of the robot and gravity need, and its derivatives in
    the joint angles; every joint is then a 1-DoF plant fed those along the measured motion (exact when the
    other joints move as measured). A fast search path: every reported figure still comes from coupled rollouts.
    """

    # a candidate's parameter columns, JointTerms' names in the kernel's order
    COLUMNS = (
        "stiffness",
        "damping",
        "armature",
        "viscous_friction",
        "friction",
        "encoder_offset",
        "joint_effort_limit",
        "saturation_effort",
        "actuator_velocity_limit",
        "actuator_effort_limit",
        "friction_upper",
    )
    PARAMS = len(COLUMNS)

    def __init__(
        self,
        robot: RobotModel,
        q: np.ndarray,
        qd: np.ndarray,
        cmd: np.ndarray,
        cmd_qd: np.ndarray,
        n: int,
        log_dt: float,
        bias0: np.ndarray,
        device: str = "cpu",
        effort_mode: str = "explicit",
        tau_ff: np.ndarray | None = None,
        cuts: np.ndarray | None = None,
    ) -> None:

        if effort_mode not in EFFORT_MODES:
            raise RobotError(f"effort_mode {effort_mode!r}: one of {', '.join(EFFORT_MODES)}")
        self.device, self.implicit = device, int(effort_mode == "implicit")

        self.n, self.j = n, q.shape[1]
        dq, ddq = _derivatives(q[: n + 1], log_dt, cuts)
        self.bias0 = np.asarray(bias0, float)
        tau, diag, grad = joint_space_terms(robot, q[: n + 1] - self.bias0, dq, ddq)
        assert grad is not None
        own = np.einsum("tjj->tj", grad)
        self.grad = grad
        load = tau - diag * ddq  # what the joint's own inertia does not explain: coupling, gravity, Coriolis
        mm, _, _ = id_model(robot)
        solref, solimp = mm.dof_solref[0], mm.dof_solimp[0]
        self.b_ref = 2.0 / (float(solimp[1]) * float(solref[0]))  # MuJoCo's reference damping, ratio 1
        self.leak = (1.0 - float(solimp[0])) / float(solimp[0])  # R / A at zero violation
        ff = np.zeros_like(cmd) if tau_ff is None else tau_ff
        arrays = (q[: n + 1], qd[: n + 1], cmd[: n + 1], cmd_qd[: n + 1], ff[: n + 1], diag, load, own)
        self._arrays: list[wp.array] = [
            wp.array(np.ascontiguousarray(a, np.float32), dtype=wp.float32, device=device) for a in arrays
        ]
        lo, span = stroke(robot)
        self._stroke: list[wp.array] = [
            wp.array(x.astype(np.float32), dtype=wp.float32, device=device) for x in (lo, span)
        ]
        self.seconds = 0.0
        self.joint_steps = 0
        self.threads = max(1, min(2, len(os.sched_getaffinity(0))))  # one kernel launch per core, at most two

    def run(
        self,
        par: np.ndarray,
        delays: np.ndarray,
        starts: np.ndarray,
        length: int,
        decimation: int,
        dt: float,
        first: np.ndarray | None = None,
    ) -> np.ndarray:
        """(C, J, PARAMS) candidates with (C,) delays over windows `starts` (and `first`, the first sample of each
        window's recording, 0 by default) → (C, W, length, J) simulated minus measured positions after each
        window's first sample."""
        import time

        t0 = time.perf_counter()
        if par.ndim != 3 or par.shape[2] != self.PARAMS:
            raise ValueError(f"par {par.shape}: (candidates, joints, {self.PARAMS}) columns {self.COLUMNS}")
        c, w = par.shape[0], starts.size
        delays = np.asarray(delays)
        db = par[:, :, 5] - self.bias0[None]
        shift = -np.einsum("tjk,ck->ctj", self.grad, db)  # the candidate's biases move every joint's load
        dev = self.device
        st: wp.array = wp.array(starts.astype(np.int32), dtype=wp.int32, device=dev)
        fi: wp.array = wp.array(
            np.zeros(w, np.int32) if first is None else np.asarray(first, np.int32),
            dtype=wp.int32,
            device=dev,
        )

        def launch(lo: int, hi: int) -> np.ndarray:  # candidates lo..hi; Warp's CPU launch releases the GIL
            out = wp.zeros(((hi - lo) * w, length, self.j), dtype=wp.float32, device=dev)
            wp.launch(
                _decoupled_kernel,
                (hi - lo) * w * self.j,
                [
                    *self._arrays,
                    wp.array(np.ascontiguousarray(shift[lo:hi], np.float32), dtype=wp.float32, device=dev),
                    st,
                    fi,
                    wp.array(np.asarray(delays[lo:hi], np.int32), dtype=wp.int32, device=dev),
                    wp.array(
                        np.ascontiguousarray(np.minimum(par[lo:hi], 3.0e38), np.float32),
                        dtype=wp.float32,
                        device=dev,
                    ),
                    *self._stroke,
                    int(length),
                    int(decimation),
                    float(dt),
                    int(w),
                    int(self.j),
                    self.b_ref,
                    self.leak,
                    self.implicit,
                    out,
                ],
                device=dev,
            )
            return out.numpy()

        threads = self.threads if wp.get_device(dev).is_cpu else 1
        cuts = np.linspace(0, c, min(threads, c) + 1).round().astype(int)
        if cuts.size > 2:
            with ThreadPoolExecutor(cuts.size - 1) as pool:
                parts = list(pool.map(launch, cuts[:-1], cuts[1:]))
        else:
            parts = [launch(0, c)]
        res = np.concatenate(parts).reshape(c, w, length, self.j).astype(float)
        self.seconds += time.perf_counter() - t0
        self.joint_steps += c * w * self.j * length * decimation
        return res


_ID_MODELS: dict[int, tuple] = {}  # id(robot) -> id_model's answer, dropped with the robot


def id_model(robot: RobotModel):
    """MuJoCo's model and data as Newton's SolverMuJoCo converts the bare robot (no armature, damping,
    frictionloss, constraints), and the column of each MuJoCo DoF among the actuated joints; converted once per
    robot (a fit asks several times; every caller sets the data's state before it reads)."""
    key = id(robot)
    if key not in _ID_MODELS:
        _ID_MODELS[key] = _convert_bare(robot)
        weakref.finalize(robot, _ID_MODELS.pop, key, None)
    return _ID_MODELS[key]


def _convert_bare(robot: RobotModel):
    """id_model's conversion."""
    import mujoco
    import newton

    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    builder.add_builder(cast("newton.ModelBuilder", robot.builder))
    for d in robot.dof:
        builder.joint_armature[d] = builder.joint_damping[d] = builder.joint_friction[d] = 0.0
    model = builder.finalize(device="cpu")
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True)
    mm, md = solver.mj_model, solver.mj_data
    mm.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    mapping = solver.mjc_dof_to_newton_dof
    if mapping is None:
        raise RobotError(f"{robot.path.name}: Newton's MuJoCo model has no DoF mapping")
    to_newton = np.asarray(mapping.numpy())[0]  # type: ignore[attr-defined]  # warp array2d stubs lack numpy()
    col = {int(d): k for k, d in enumerate(robot.dof)}
    if mm.nv != len(col) or any(int(n) not in col for n in to_newton):
        raise RobotError(
            f"{robot.path.name}: MuJoCo's DoFs are not the actuated joints; inverse dynamics needs a "
            "fixed-base robot of hinge or slide joints"
        )
    return mm, md, np.array([col[int(n)] for n in to_newton])  # MuJoCo DoF i is our joint cols[i]


def inverse_dynamics(robot: RobotModel, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """(T, J) joint efforts the bare robot needs for (q, qd, qdd) (T, J): MuJoCo's mj_inverse on the model Newton's
    SolverMuJoCo converts, with no armature, damping, frictionloss or constraints (limits, contacts).

    For an equation-error start: the armature, friction and motor terms are what the log adds to these.
    """
    return joint_space_terms(robot, q, qd, qdd, derivatives=False)[0]


def joint_space_terms(
    robot: RobotModel, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, derivatives: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Newton's (MuJoCo's) inverse dynamics of the bare robot along (q, qd, qdd) (T, J): the efforts (T, J), the
    joint-space inertia's diagonal (T, J) and, with `derivatives`, ∂effort_j/∂q_k (T, J, J) by MuJoCo's own
    finite differences (mjd_inverseFD). For the decoupled search: each joint's own 1-DoF model along the
    measured motion (the coupling and gravity efforts from here, the joint's own inertia from the diagonal)."""
    import mujoco

    mm, md, cols = id_model(robot)
    qadr = mm.jnt_qposadr[mm.dof_jntid]
    n = mm.nv
    out, diag = np.zeros((q.shape[0], n)), np.zeros((q.shape[0], n))
    grad = np.zeros((q.shape[0], n, n)) if derivatives else None
    dfdq, full = np.zeros((n, n)), np.zeros((n, n))
    for t in range(q.shape[0]):
        md.qpos[qadr] = q[t, cols]
        md.qvel[:] = qd[t, cols]
        md.qacc[:] = qdd[t, cols]
        mujoco.mj_inverse(mm, md)
        out[t, cols] = md.qfrc_inverse
        mujoco.mj_fullM(mm, md, full)
        diag[t, cols] = np.diag(full)
        if grad is not None:
            mujoco.mjd_inverseFD(mm, md, 1e-6, 0, dfdq, None, None, None, None, None, None)
            grad[t][np.ix_(cols, cols)] = dfdq.T  # MuJoCo's is transposed: dfdq[k, j] = ∂f_j/∂q_k
    return out, diag, grad
