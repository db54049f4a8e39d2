"""Where a whole-robot search starts: the model file's joint terms, a gain scan, the equation-error regression
along the measured motion (Newton's inverse dynamics), the envelope scan and the delay scan."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from ...models.articulated import inverse_dynamics
from ...models.robot import RobotModel
from ..warmstart import fit_dc_envelope
from .data import FitData
from .plant import CoupledEvaluator, DecoupledEvaluator, rms
from .problem import DC_TERMS, POSITION_FRICTION, Problem

# the envelope's start scan, per group: max motor effort × the largest PD effort the log demands, saturation
# effort × that, velocity limit × the fastest logged speed
ENVELOPE_GRID = {"effort": (0.15, 0.25, 0.4, 0.6, 0.9), "ratio": (1.2, 2.0, 4.0), "speed": (1.2, 2.0, 4.0)}


def start_point(
    robot: RobotModel,
    prob: Problem,
    ev_scan: CoupledEvaluator | DecoupledEvaluator,
    gains_known: bool,
    delay: int,
    say: Callable[[str], None],
) -> np.ndarray:
    """The search's start: the model file's joint terms (group means), gains from a coarse scan if unknown."""
    x0 = []
    for g, idx in prob.groups.items():
        for t in prob.terms:
            limit = float(np.min(np.minimum(prob.effort_limit[idx], robot.servo_limits()[idx])))
            v = {
                "armature": robot.armature[idx].mean(),
                "viscous_friction": robot.viscous_friction[idx].mean(),
                "friction": robot.friction[idx].mean(),
                "friction_upper": robot.friction[idx].mean(),
                "stiffness": 20.0,
                "damping": 1.0,
                "saturation_effort": limit,
                "actuator_velocity_limit": 100.0,
                "actuator_effort_limit": limit,
            }[t]  # envelope: scanned
            x0.append(prob.clip_log(g, t, v))
    for k in range(len(prob.bodies)):  # payloads start at the model's mass and COM
        assert prob.body_mass0 is not None
        x0 += [math.log10(float(prob.body_mass0[k]))] + [0.0] * (prob.per_body - 1)
    x = np.array(x0 + [0.0] * (len(prob.names) if prob.fit_bias else 0))
    if gains_known:
        return x
    # (kp, kd) for every group, and (natural frequency rad/s, damping ratio) on each group's own inertia, so a
    # light servo horn or a heavy leg each has gains in scale with it
    grid = [("gains", a, b) for a in (5.0, 10.0, 20.0, 40.0, 80.0) for b in (0.3, 1.0, 3.0)]
    grid += [("scaled", w, z) for w in (5.0, 10.0, 20.0, 40.0) for z in (0.3, 0.7, 1.5)]
    xs = np.repeat(x[None], len(grid), axis=0)
    for gi, (kind, a, b) in enumerate(grid):
        for k, vn in enumerate(prob.var_names):
            g, _, t = vn.rpartition(".")
            if t in ("stiffness", "damping"):
                m = prob.scales[g]["inertia"] if kind == "scaled" else 1.0
                kp, kd = (m * a * a, 2.0 * b * m * a) if kind == "scaled" else (a, b)
                xs[gi, k] = prob.clip_log(g, t, kp if t == "stiffness" else kd)
    scan = rms(ev_scan.residuals(xs, np.full(len(grid), delay)))
    best = int(np.argmin(scan))
    kind, a, b = grid[best]
    said = f"kp {a}, kd {b}" if kind == "gains" else f"{a} rad/s at damping ratio {b} on each group's inertia"
    say(f"gain scan: best {said} (training RMSE {scan.min():.4f} rad)")
    return xs[best]


def _interval_demand(prob: Problem, data: FitData, n: int, decimation: int, delay: int) -> np.ndarray:
    """(n − 1, J) PD plus feed-forward effort over each training interval, averaged over its physics steps (states interpolated
    between samples, commands as the delay holds them); the PD acts on the reading, so the bias is in it."""
    kp = prob.kp if prob.kp is not None else np.zeros(len(prob.names))
    kd = prob.kd if prob.kd is not None else np.zeros(len(prob.names))
    q, qd, acc = data.q[:n], data.qd[:n], np.zeros((n - 1, len(prob.names)))
    for i in range(decimation):
        idx = np.floor_divide(np.arange(n - 1) * decimation + i - delay, decimation)
        idx = np.maximum(idx, data.first_of(np.arange(n - 1)))  # no command from before its recording
        w = i / decimation
        acc += (
            data.tau_ff[idx]
            + kp * (data.cmd[idx] - (q[:-1] + w * np.diff(q, axis=0)))
            + kd * (data.cmd_qd[idx] - (qd[:-1] + w * np.diff(qd, axis=0)))
        )
    return acc / decimation


def _regress_group(
    idx: list[int], lhs: np.ndarray, acc: np.ndarray, vel: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Armature, viscous and Coulomb friction shared by the group's joints, by least squares on
    lhs = demand − rigid-body effort = arm·qdd + visc·qd + fc·sign(qd) + an offset per joint (what the rigid-body
    effort misses, e.g. gravity at the biased reading) over moving samples the motor did not clip (robust
    reweighting: samples far off the fit are the envelope's, dropped). Returns (arm, visc, fc, offsets...), the
    residual (T, len(idx)) and its robust sigma."""
    t, k = lhs.shape[0], len(idx)
    rows = np.zeros((t, k, 3 + k))
    rows[..., 0], rows[..., 1], rows[..., 2] = acc[:, idx], vel[:, idx], np.sign(vel[:, idx])
    for m in range(k):
        rows[:, m, 3 + m] = 1.0
    y = lhs[:, idx]
    moving = np.abs(vel[:, idx]) > 0.02 * np.abs(vel[:, idx]).max(axis=0)
    keep = moving & (np.abs(y) <= np.quantile(np.abs(y), 0.4, axis=0))
    coef = np.zeros(3 + k)
    sigma = math.inf
    for _ in range(4):
        if keep.sum() < 3 + k:
            break
        coef = np.linalg.lstsq(rows[keep], y[keep], rcond=None)[0]
        res = y - rows @ coef
        sigma = 1.4826 * float(np.median(np.abs(res[keep]))) + 1e-9
        keep = moving & (np.abs(res) < 4.0 * sigma)
    return coef, y - rows @ coef, sigma


def equation_error_start(
    robot: RobotModel,
    prob: Problem,
    data: FitData,
    x0: np.ndarray,
    delays: np.ndarray,
    decimation: int,
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, bool, np.ndarray] | None:
    """A start from the log's own motion, with the gains known: the rigid-body effort Newton's MuJoCo model
    needs along the measured motion (inverse dynamics) against the PD effort the log demands gives, by linear
    least squares per group, armature, viscous and Coulomb friction on the samples the motor did not clip, and
    the DC envelope through those it did; the delay is the one fitting best; biases start at 0 (only gravity
    sees them). Returns (x, delay, envelope found, the start at every delay (D, d)), or None without gains."""
    if prob.kp is None:
        return None
    n = data.split
    h = data.dt * decimation
    acc = np.diff(data.qd[:n], axis=0) / h
    vel = 0.5 * (data.qd[1:n] + data.qd[: n - 1])
    rigid = inverse_dynamics(robot, 0.5 * (data.q[1:n] + data.q[: n - 1]), vel, acc)
    seams = [a - 1 for a, _ in data.pieces[1:]]  # intervals across two recordings: not motion, left out
    acc[seams], vel[seams] = 0.0, 0.0
    scores, points = [], []
    for d in delays:
        demand = _interval_demand(prob, data, n, decimation, int(d))
        fits = [(idx, *_regress_group(idx, demand - rigid, acc, vel)) for idx in prob.groups.values()]
        scores.append(sum(f[3] for f in fits))
        points.append(_ee_point(prob, x0, fits, demand, vel))
    b = int(np.argmin(scores))
    say(
        f"equation-error start: delay {int(delays[b])} physics steps"
        + (
            ", the envelope through the samples the motor clipped (flat above every effort where it clipped none)"
            if prob.dc_motor
            else ""
        )
    )
    return points[b], int(delays[b]), prob.dc_motor, np.array(points)


def _ee_point(prob: Problem, x0: np.ndarray, fits: list, demand: np.ndarray, vel: np.ndarray) -> np.ndarray:
    """The search variables from the equation-error regressions of every group (and its envelope)."""
    x = x0.copy()
    for idx, coef, res, sigma in fits:
        g = next(name for name, members in prob.groups.items() if members == idx)
        for t, v in zip(("armature", "viscous_friction", "friction"), coef[:3], strict=True):
            x[prob.var(g, t)] = prob.clip_log(g, t, v)
        if POSITION_FRICTION in prob.terms:  # constant along the stroke to start
            x[prob.var(g, POSITION_FRICTION)] = x[prob.var(g, "friction")]
        if prob.dc_motor:
            sign = np.sign(demand[:, idx])
            given = demand[:, idx] - res  # the effort the motor gave
            # the PD asked for clearly more than the motor gave (5 % of its largest effort, beyond the fit's noise)
            clipped = res * sign > max(4.0 * sigma, 0.05 * float(np.quantile(np.abs(given), 0.99)))
            env = fit_dc_envelope((sign * vel[:, idx])[clipped], (sign * given)[clipped], given, vel[:, idx])
            for t, v in zip(DC_TERMS, env, strict=True):
                x[prob.var(g, t)] = prob.clip_log(g, t, v)
    return x


def scan_envelope(
    prob: Problem,
    data: FitData,
    ev_scan: CoupledEvaluator | DecoupledEvaluator,
    x: np.ndarray,
    delay: int,
    decimation: int,
    say: Callable[[str], None],
) -> np.ndarray:
    """The envelope's start: a coarse grid (ENVELOPE_GRID) scaled per group by the PD effort the log demands from
    its measured state and delayed commands and by its fastest speed; the best training fit (one batch)."""
    v = prob.joint_values(x[None])
    n = data.split
    lag = np.maximum(np.arange(n) - int(round(delay / decimation)), data.first_of(np.arange(n)))
    demand = np.abs(
        data.tau_ff[lag]
        + v["stiffness"][0] * (data.cmd[lag] - data.q[:n])
        + v["damping"][0] * (data.cmd_qd[:n] - data.qd[:n])
    )
    speed = np.abs(data.qd[:n])
    grid = list(itertools.product(*ENVELOPE_GRID.values()))
    xs = np.repeat(x[None], len(grid), axis=0)
    for gi, (e, r, sp) in enumerate(grid):
        for g, idx in prob.groups.items():
            top, vmax = max(float(demand[:, idx].max()), 1e-3), max(float(speed[:, idx].max()), 1e-2)
            for t, val in (
                ("actuator_effort_limit", e * top),
                ("saturation_effort", r * e * top),
                ("actuator_velocity_limit", sp * vmax),
            ):
                xs[gi, prob.var(g, t)] = prob.clip_log(g, t, val)
    scan = rms(ev_scan.residuals(xs, np.full(len(grid), delay)))
    best = int(np.argmin(scan))
    say(
        f"envelope scan: best max motor effort {grid[best][0]} × the demanded effort, saturation × {grid[best][1]}, "
        f"velocity limit × {grid[best][2]} the fastest speed (training RMSE {scan.min():.4f} rad)"
    )
    return xs[best]


def scan_delay(
    ev_scan: CoupledEvaluator | DecoupledEvaluator, x: np.ndarray, max_delay: int, say: Callable[[str], None]
) -> int:
    """The integer physics-step delay with the lowest training error at x, over 0..max_delay (one batch)."""
    ds = np.arange(max_delay + 1)
    sc = rms(ev_scan.residuals(np.repeat(x[None], ds.size, axis=0), ds))
    say(
        f"delay scan (physics steps 0..{max_delay}): best {int(ds[np.argmin(sc)])} (training RMSE {sc.min():.4f} rad)"
    )
    return int(ds[np.argmin(sc)])
