"""Candidates × windows rolled out through a whole robot's coupled dynamics: Newton 1.8's SolverMuJoCo on Warp.

One Newton model holds one world per (candidate, window); each world is the robot with its own armature,
viscous damping and frictionloss on every actuated joint (MuJoCo's joint terms, set per world) and our PD
actuator: τ = clip(kp·(q_target − (q + bias)) + kd·(qd_target − qd), ±effort_limit), computed once per physics
step from the current state (explicit effort, docs/consumer-semantics.md §A.3) and applied as joint effort.
The encoder bias is what the encoder adds to the true angle: the PD sees q + bias, and so does the log. A delay
counts physics steps (§C.2); each logged command is held for `decimation` physics steps of dt = log dt /
decimation. Contacts are off (the robot hangs); rigid-body dynamics are Newton's, none of our own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from .robot import RobotError, RobotModel

wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines


@wp.kernel
def _pd_kernel(q: wp.array(dtype=wp.float32), qd: wp.array(dtype=wp.float32),
               target_q: wp.array2d(dtype=wp.float32), target_qd: wp.array2d(dtype=wp.float32), row: int,
               dof: wp.array(dtype=wp.int32), kp: wp.array(dtype=wp.float32), kd: wp.array(dtype=wp.float32),
               limit: wp.array(dtype=wp.float32), bias: wp.array(dtype=wp.float32),
               joint_f: wp.array(dtype=wp.float32)):
    """One PD effort per (world, actuated joint) from the current state and this step's target row."""
    i = wp.tid()
    d = dof[i]
    tau = kp[i] * (target_q[row, i] - (q[d] + bias[i])) + kd[i] * (target_qd[row, i] - qd[d])
    joint_f[d] = wp.clamp(tau, -limit[i], limit[i])


@wp.kernel
def _record_kernel(q: wp.array(dtype=wp.float32), qd: wp.array(dtype=wp.float32), dof: wp.array(dtype=wp.int32),
                   bias: wp.array(dtype=wp.float32), row: int, out_q: wp.array2d(dtype=wp.float32),
                   out_qd: wp.array2d(dtype=wp.float32)):
    """The measured (biased) position and the velocity of every (world, joint) at one log sample."""
    i = wp.tid()
    out_q[row, i] = q[dof[i]] + bias[i]
    out_qd[row, i] = qd[dof[i]]


@dataclass
class JointTerms:
    """Per-world, per-joint parameters of one batched rollout; every array is (W, J) in SI units."""

    kp: np.ndarray
    kd: np.ndarray
    armature: np.ndarray
    damping: np.ndarray  # viscous, N·m·s/rad
    friction: np.ndarray  # frictionloss, N·m
    bias: np.ndarray  # encoder bias, rad
    effort_limit: np.ndarray


def physics_targets(cmd: np.ndarray, starts: np.ndarray, samples: int, decimation: int, delay: int) -> np.ndarray:
    """(samples·decimation, W, J) command each physics step sees: log sample ⌊(k − delay)/decimation⌋ of its window.

    `cmd` is (T, J) over the whole log and `starts` (W,) each window's first sample; commands from before the
    window (a delay reaching back) are the log's own, the first sample's before the log starts.
    """
    k = np.arange(samples * decimation)
    idx = starts[None, :] + np.floor_divide(k - delay, decimation)[:, None]
    return cmd[np.clip(idx, 0, cmd.shape[0] - 1)]


class ArticulatedRollout:
    """A Newton model of `worlds` copies of the robot and its SolverMuJoCo (Warp, CPU unless told)."""

    def __init__(self, robot: RobotModel, worlds: int, device: str = "cpu", iterations: int | None = None,
                 ls_iterations: int | None = None) -> None:
        import newton

        self.robot, self.worlds, self.device = robot, int(worlds), device
        builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
        builder.replicate(robot.builder, self.worlds)
        self.model = builder.finalize(device=device)
        self.solver = newton.solvers.SolverMuJoCo(self.model, disable_contacts=True, iterations=iterations,
                                                  ls_iterations=ls_iterations)
        self.dofs_per_world = robot.builder.joint_dof_count
        self.coords_per_world = robot.builder.joint_coord_count
        j = len(robot.joint_names)
        w = np.arange(self.worlds)[:, None]
        self.dof_flat = (w * self.dofs_per_world + robot.dof[None, :]).reshape(-1)  # (W·J,)
        q_start = np.array(robot.builder.joint_q_start)
        qd_start = np.array(robot.builder.joint_qd_start)
        coord_of_dof = {int(qd_start[k]): int(q_start[k]) for k in range(len(q_start))}
        self.coord_flat = (w * self.coords_per_world + np.array([coord_of_dof[int(d)] for d in robot.dof])[None, :]
                           ).reshape(-1)
        self._dof_wp = wp.array(self.dof_flat.astype(np.int32), dtype=wp.int32, device=device)
        self._coord_wp = wp.array(self.coord_flat.astype(np.int32), dtype=wp.int32, device=device)
        self.n = self.worlds * j
        if not np.array_equal(self.coord_flat, self.dof_flat):
            raise RobotError(f"{robot.path.name}: coordinates and DoFs differ (a free base); this version rolls out "
                             "fixed-base robots only")
        self.steps_run = 0

    def _set_terms(self, terms: JointTerms) -> None:
        """Write armature, damping and frictionloss per world into the model and tell the solver."""
        import newton

        for name, values in (("joint_armature", terms.armature), ("joint_damping", terms.damping),
                             ("joint_friction", terms.friction)):
            arr = getattr(self.model, name)
            host = arr.numpy()
            host[self.dof_flat] = np.asarray(values, float).reshape(-1)
            arr.assign(host)
        self.solver.notify_model_changed(newton.ModelFlags.JOINT_DOF_PROPERTIES)

    def run(self, q0: np.ndarray, qd0: np.ndarray, target_q: np.ndarray, target_qd: np.ndarray, terms: JointTerms,
            decimation: int, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Roll out every world from measured (q0, qd0) (W, J) under per-physics-step targets (P, W, J).

        Returns the measured positions (q + bias) and velocities at each log sample, (P/decimation + 1, W, J),
        row 0 the initial state; dt is the physics step.
        """
        import newton

        w, j = self.worlds, len(self.robot.joint_names)
        steps = target_q.shape[0]
        samples = steps // decimation
        self._set_terms(terms)
        f32 = np.float32

        def dev(a: np.ndarray) -> wp.array:
            return wp.array(np.ascontiguousarray(np.asarray(a, f32).reshape(a.shape[0], -1) if a.ndim == 3
                                                 else np.asarray(a, f32).reshape(-1)), device=self.device)

        tq, tqd = dev(target_q), dev(target_qd)
        kp, kd, lim, bias = (dev(np.broadcast_to(x, (w, j))) for x in (terms.kp, terms.kd, terms.effort_limit,
                                                                       terms.bias))
        bias_host = np.broadcast_to(terms.bias, (w, j))
        s0, s1 = self.model.state(), self.model.state()
        control = self.model.control()
        q = s0.joint_q.numpy()
        q[self.coord_flat] = (np.asarray(q0, float) - bias_host).reshape(-1)
        s0.joint_q.assign(q)
        qd = s0.joint_qd.numpy()
        qd[self.dof_flat] = np.asarray(qd0, float).reshape(-1)
        s0.joint_qd.assign(qd)
        newton.eval_fk(self.model, s0.joint_q, s0.joint_qd, s0)
        out_q = wp.zeros((samples + 1, self.n), dtype=wp.float32, device=self.device)
        out_qd = wp.zeros((samples + 1, self.n), dtype=wp.float32, device=self.device)
        wp.launch(_record_kernel, self.n, [s0.joint_q, s0.joint_qd, self._coord_wp, bias, 0, out_q, out_qd],
                  device=self.device)
        for k in range(samples * decimation):
            control.joint_f.zero_()
            wp.launch(_pd_kernel, self.n, [s0.joint_q, s0.joint_qd, tq, tqd, k, self._coord_wp, kp, kd, lim, bias,
                                           control.joint_f], device=self.device)
            self.solver.step(s0, s1, control, None, dt)
            s0, s1 = s1, s0
            if (k + 1) % decimation == 0:
                wp.launch(_record_kernel, self.n, [s0.joint_q, s0.joint_qd, self._coord_wp, bias, (k + 1) // decimation,
                                                   out_q, out_qd], device=self.device)
        self.steps_run += samples * decimation
        shape = (samples + 1, w, j)
        return out_q.numpy().reshape(shape).astype(float), out_qd.numpy().reshape(shape).astype(float)
