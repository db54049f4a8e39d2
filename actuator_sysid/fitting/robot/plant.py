"""The robot's rollouts a fit runs: batched coupled rollouts of candidates over the training windows (Newton
SolverMuJoCo), each joint's own 1-DoF rollout along the measured motion (the decoupled search), and single
replays from a measured state (validation)."""

from __future__ import annotations

import time

import numpy as np

from ...models.articulated import ArticulatedRollout, DecoupledRollout, JointTerms, physics_targets
from ...models.robot import RobotModel
from .data import FitData
from .problem import OFFSET, POSITION_FRICTION, Problem

# the last robot's explicit C rollout, shared by its fits' evaluators
_C_ROLLOUT: list[tuple[RobotModel, ArticulatedRollout]] = []


def c_rollout(robot: RobotModel) -> ArticulatedRollout:
    """The explicit-mode MuJoCo C rollout of `robot`, converted once per robot object (a selection fits one robot
    many times); only the last robot's is kept."""
    if not _C_ROLLOUT or _C_ROLLOUT[0][0] is not robot:
        _C_ROLLOUT[:] = [(robot, ArticulatedRollout(robot, 1, device="cpu", mujoco_cpu=True))]
    return _C_ROLLOUT[0][1]


def joint_terms(
    v: dict[str, np.ndarray], effort_limit: np.ndarray, bodies: np.ndarray | None = None
) -> JointTerms:
    """The rollout's per-world terms from per-joint values {term: (W, J)}; the model's box limit `effort_limit`;
    the payload bodies' (builder indices `bodies`) mass (W, B) and COM (W, B, 3) where the values have them."""
    return JointTerms(
        stiffness=v["stiffness"],
        damping=v["damping"],
        armature=v["armature"],
        viscous_friction=v["viscous_friction"],
        friction=v["friction"],
        friction_upper=v.get(POSITION_FRICTION),
        encoder_offset=v[OFFSET],
        joint_effort_limit=effort_limit,
        saturation_effort=v.get("saturation_effort"),
        actuator_velocity_limit=v.get("actuator_velocity_limit"),
        actuator_effort_limit=v.get("actuator_effort_limit"),
        bodies=bodies if "body_mass" in v else None,
        body_mass=v.get("body_mass"),
        body_com=v.get("body_com"),
    )


class CoupledEvaluator:
    """Batched coupled rollouts of candidates over fixed windows, one Newton model per world count."""

    def __init__(
        self,
        robot: RobotModel,
        prob: Problem,
        q: np.ndarray,
        qd: np.ndarray,
        cmd: np.ndarray,
        cmd_qd: np.ndarray,
        starts: np.ndarray,
        length: int,
        decimation: int,
        dt: float,
        device: str,
        tau_ff: np.ndarray | None = None,
        first: np.ndarray | None = None,
    ):
        self.robot, self.prob = robot, prob
        self.q, self.qd, self.cmd, self.cmd_qd = q, qd, cmd, cmd_qd
        self.tau_ff = np.zeros_like(cmd) if tau_ff is None else tau_ff
        self.first = first  # (T,) each sample's recording's first sample, None: one recording
        self.starts, self.length, self.dec, self.dt, self.device = starts, length, decimation, dt, device
        self._models: dict[int, ArticulatedRollout] = {}
        self.world_steps = 0
        self.seconds = 0.0

    def engine(self, worlds: int) -> ArticulatedRollout:
        """The rollout for `worlds` worlds: on the CPU in explicit mode MuJoCo's C backend of the same Newton
        solver (it steps a world several times faster than Warp's CPU backend, whose cost is kernel launches),
        else Newton's SolverMuJoCo on Warp."""
        explicit_cpu = self.prob.effort_mode == "explicit" and str(self.device).startswith("cpu")
        if explicit_cpu:
            return c_rollout(self.robot).at_worlds(worlds)
        if worlds not in self._models:
            self._models[worlds] = ArticulatedRollout(
                self.robot,
                worlds,
                device=self.device,
                effort_mode=self.prob.effort_mode,
            )
        return self._models[worlds]

    def simulate(self, x: np.ndarray, delays: np.ndarray, q0: np.ndarray | None = None) -> np.ndarray:
        """(C, d) candidates with (C,) delays → measured positions (C, windows, length + 1, J); `q0` (C, windows,
        J) starts each candidate's windows from other measured positions than the log's."""
        c, nw, j = x.shape[0], self.starts.size, len(self.prob.names)
        vals = self.prob.joint_values(x)
        rep = {k: np.repeat(v, nw, axis=0) for k, v in vals.items()}  # world = candidate · nw + window
        starts = np.tile(self.starts, c)
        firsts = None if self.first is None else self.first[self.starts]
        # both targets delayed, as Isaac Lab's DelayBuffers and Newton's Delay hold them
        tq, tqd, tff = (
            np.concatenate(
                [
                    physics_targets(cmd, starts[w0 : w0 + nw], self.length, self.dec, int(d), firsts)
                    for w0, d in zip(range(0, c * nw, nw), delays, strict=True)
                ],
                axis=1,
            )
            for cmd in (self.cmd, self.cmd_qd, self.tau_ff)
        )
        terms = joint_terms(rep, np.broadcast_to(self.prob.effort_limit, (c * nw, j)), self.prob.body_index)
        t0 = time.perf_counter()
        start_q = self.q[starts] if q0 is None else np.asarray(q0, float).reshape(c * nw, j)
        out_q, _ = self.engine(c * nw).run(start_q, self.qd[starts], tq, tqd, terms, self.dec, self.dt, tff)
        self.seconds += time.perf_counter() - t0
        self.world_steps += c * nw * self.length * self.dec
        return out_q.transpose(1, 0, 2).reshape(c, nw, self.length + 1, j)

    def residuals(self, x: np.ndarray, delays: np.ndarray) -> np.ndarray:
        """(C, J, windows·length) simulated minus measured positions after each window's first sample."""
        return self.residuals_of(self.simulate(x, delays))

    def residuals_of(self, positions: np.ndarray) -> np.ndarray:
        """residuals() of simulated positions (C, windows, length + 1, J)."""
        sim = positions[:, :, 1:]
        idx = self.starts[:, None] + np.arange(1, self.length + 1)[None]
        meas = self.q[idx]  # (nw, L, J)
        r = sim - meas[None]
        return np.nan_to_num(r.transpose(0, 3, 1, 2).reshape(sim.shape[0], len(self.prob.names), -1), nan=1.0)


class DecoupledEvaluator:
    """CoupledEvaluator's interface on the fast path: each joint's own 1-DoF rollout along the measured motion
    (models/articulated.py DecoupledRollout). It steers the search; no reported figure comes from it."""

    def __init__(
        self,
        robot: RobotModel,
        prob: Problem,
        data: FitData,
        starts: np.ndarray,
        decimation: int,
        bias0: np.ndarray,
        device: str = "cpu",
    ):
        self.prob, self.data, self.starts, self.dec = prob, data, starts, decimation
        self.roll = DecoupledRollout(
            robot,
            data.q,
            data.qd,
            data.cmd,
            data.cmd_qd,
            data.split,
            data.dt * decimation,
            bias0,
            device,
            prob.effort_mode,
            tau_ff=data.tau_ff,
            cuts=np.array([a for a, _ in data.pieces[1:]], int),
        )
        self.first = data.first_of(starts)
        self.calls = 0

    def residuals(self, x: np.ndarray, delays: np.ndarray) -> np.ndarray:
        """(C, J, windows·length) simulated minus measured positions, as CoupledEvaluator.residuals."""
        v = self.prob.joint_values(x)
        c, j = x.shape[0], len(self.prob.names)
        v["joint_effort_limit"] = np.broadcast_to(self.prob.effort_limit, (c, j))
        par = np.stack([v[t] for t in DecoupledRollout.COLUMNS], axis=2)
        r = self.roll.run(
            par, np.asarray(delays), self.starts, self.data.length, self.dec, self.data.dt, self.first
        )
        self.calls += 1
        return np.nan_to_num(r.transpose(0, 3, 1, 2).reshape(c, j, -1), nan=1.0, posinf=1.0, neginf=-1.0)


def replay_coupled(
    robot: RobotModel,
    vals: list[dict[str, np.ndarray]],
    delays: list[int],
    q: np.ndarray,
    qd: np.ndarray,
    cmd: np.ndarray,
    cmd_qd: np.ndarray,
    start: int,
    decimation: int,
    dt: float,
    effort: np.ndarray,
    effort_mode: str = "explicit",
    tau_ff: np.ndarray | None = None,
    spans: list[tuple[int, int, int]] | None = None,
    bodies: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each parameter set replayed alone from the measured state at `start` to the log's end: positions
    (T − start, J) and the share of physics steps at which the motor envelope cut the PD effort (J,); the
    logged feed-forward effort `tau_ff` (T, J) joins the PD effort as the targets do. `spans` (start, stop,
    first sample of its recording) replaces that one stretch by several, each replayed from its own measured
    start; their positions follow each other in the output (whole validation recordings).

    One world per replay on MuJoCo's C backend through the same Newton solver (the Warp backend agrees with it
    to float32 precision; tests/test_robot.py), because one world gains nothing from Warp's batching.
    """
    spans = spans or [(start, q.shape[0], 0)]
    out = []
    eng = ArticulatedRollout(robot, 1, device="cpu", mujoco_cpu=True, effort_mode=effort_mode)
    for v, d in zip(vals, delays, strict=True):
        terms = joint_terms({k: x[:1] for k, x in v.items()}, effort[None], bodies)
        parts, cut, steps = [], np.zeros(q.shape[1]), 0
        for a, b, first in spans:
            s, f, length = np.array([a]), np.array([first]), b - 1 - a
            rq, _ = eng.run(
                q[s],
                qd[s],
                physics_targets(cmd, s, length, decimation, d, f),
                physics_targets(cmd_qd, s, length, decimation, d, f),
                terms,
                decimation,
                dt,
                None if tau_ff is None else physics_targets(tau_ff, s, length, decimation, d, f),
            )
            parts.append(rq[:, 0])
            cut += eng.clip_fraction[0] * length
            steps += length
        out.append((np.concatenate(parts), cut / max(steps, 1)))
    return out


def rms(r: np.ndarray) -> np.ndarray:
    """(C,) the RMS of each candidate's residuals (C, ...)."""
    return np.sqrt(np.mean(r.reshape(r.shape[0], -1) ** 2, axis=1))
