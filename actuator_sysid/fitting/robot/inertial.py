"""A robot's link inertials and joint friction from torque logs: the inverse-dynamics regressor, its base
parameters and a physically consistent fit.

Torque is linear in each moving link's ten inertial parameters π = (m, m·c, I about the link frame origin:
xx yy zz xy xz yz) and in each joint's friction (Coulomb tanh(q̇/v0), viscous q̇, offset 1, armature q̈). The
rigid-body columns are MuJoCo's `mj_inverse` on the model Newton converts (models/articulated.py), one link's π
perturbed about the model file's values: τ(π0 + ε e_k) − τ(π0) over ε, exact by linearity. q, q̇ and q̈ come from
a zero-phase Savitzky–Golay filter of the logged q. The base parameters come from a pivoted QR of the weighted
regressor; the physical fit is trust-region least squares (fitting/search.py) over each link's log-Cholesky
pseudo-inertia (Rucker & Wensing 2022), so every fitted inertia is physically consistent.

    result = identify_inertials(robot, [train_log], validation=[held_out_log])
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
from scipy.ndimage import maximum_filter1d
from scipy.signal import savgol_filter

from ...datasets.recording import Recording
from ...models.articulated import id_model
from ...models.robot import RobotError, RobotModel, map_joints
from ..search import Tolerances, trust_region
from ..space import SearchSpace
from ..uncertainty import Z95, covariance
from .inertial_check import baselines, inertial_verdict, per_joint_rmse

PI_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz")
FRICTION_NAMES = ("coulomb", "viscous", "offset", "armature")


@dataclass
class InertialOptions:
    """How the log is filtered and the fit weighted; speeds in rad/s or m/s."""

    # Savitzky–Golay window (s) and order; shorten it where q is clean (the tests: 11 ms, order 5 at 1 kHz)
    filter_window_s: float = 0.05
    filter_order: int = 3
    coulomb_speed: float = 0.01  # v0 of tanh(q̇/v0)
    # a joint's rows slower than this are left out (stick phases), and those within half a filter window of
    # them: the filter smears the Coulomb step of a reversal into q̈ there
    min_speed: float = 0.0
    rank_rtol: float = 1e-6  # a direction weaker than this share of the strongest is not identifiable
    prior: float = 1e-3  # pull toward the model's log-Cholesky values, felt only where the data are silent
    torque: str = "auto"  # "measured" (the log's tau), "commanded" (tau_ff), "auto": measured where logged
    budget: int = 200  # trust-region evaluations
    stride: int = 1  # every stride-th filtered sample is a regression row (the filter runs on every sample)


@dataclass
class InertialResult:
    """Identified link inertials (link frame, SI), joint friction, identifiability and torque residuals.

    rmse "train" and "held_out" are the physical fit's torque residuals on the rows kept (min_speed), per joint;
    "model_file" the model file's inertials and joint terms on the training rows; `noise` and `base_rmse` the
    unconstrained least squares' training residual (the weights). `verdict` judges the held-out residual against
    the logged effort and the trivial predictors in `baselines` (inertial_check.py)."""

    # {link: mass kg, com [3] m, inertia_origin [xx yy zz xy xz yz] kg·m², pseudo_inertia_min_eig}
    links: dict[str, dict]
    # {joint: coulomb N·m, viscous N·m·s/rad, offset N·m, armature kg·m²} (N, N·s/m, kg on a slide)
    friction: dict[str, dict[str, float]]
    intervals: dict[str, tuple[float, float] | None]  # 95 % for friction, armature, mass; None: not alone
    identifiability: dict[str, str]  # {parameter: "alone" | "combination" | "none"}
    base_parameters: list[dict[str, float]]  # each identifiable combination {parameter: coefficient}
    rank: int
    noise: dict[str, float]
    rmse: dict[str, dict[str, float]]
    base_rmse: dict[str, float]
    filter: str
    samples: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # trivial predictors' held-out torque RMSE per joint (inertial_check.BASELINES), and the verdict they join
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    verdict: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """A JSON-ready copy, intervals as [lo, hi] lists."""
        out = dataclasses.asdict(self)
        out["intervals"] = {k: None if v is None else list(v) for k, v in self.intervals.items()}
        return {"kind": "robot_inertial", **out}


@dataclass
class _Rows:
    """Filtered states and torque of one side of the split, (T, J) in model joint order."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    moving: np.ndarray | None = None  # (T, J) bool: the rows a joint's fit keeps (None: all)


def _quat_mat(quat: np.ndarray) -> np.ndarray:
    import mujoco

    m = np.zeros(9)
    mujoco.mju_quat2Mat(m, np.asarray(quat, float))
    return m.reshape(3, 3)


def _skew_sq(c: np.ndarray) -> np.ndarray:
    """cᵀc E − c cᵀ: the parallel-axis term per unit mass."""
    return float(c @ c) * np.eye(3) - np.outer(c, c)


def _sym(v: np.ndarray) -> np.ndarray:
    xx, yy, zz, xy, xz, yz = v
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def body_pi(mm, b: int) -> np.ndarray:
    """(10,) π of MuJoCo body b from its mass, ipos, iquat and principal inertia (parallel-axis theorem)."""
    m, c = float(mm.body_mass[b]), np.asarray(mm.body_ipos[b], float)
    r = _quat_mat(mm.body_iquat[b])
    i_o = r @ np.diag(np.asarray(mm.body_inertia[b], float)) @ r.T + m * _skew_sq(c)
    return np.array([m, *(m * c), i_o[0, 0], i_o[1, 1], i_o[2, 2], i_o[0, 1], i_o[0, 2], i_o[1, 2]])


def set_body_pi(mm, b: int, pi: np.ndarray) -> None:
    """Write π into MuJoCo body b: mass, COM, and the COM inertia's eigenvalues and axes."""
    import mujoco

    m = float(pi[0])
    if m <= 0:
        raise RobotError(
            f"body {b}: mass {m:g} kg; the regressor needs a positive mass about which to perturb"
        )
    c = np.asarray(pi[1:4], float) / m
    i_c = _sym(pi[4:]) - m * _skew_sq(c)
    w, v = np.linalg.eigh(i_c)
    if np.linalg.det(v) < 0:
        v[:, 0] = -v[:, 0]
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, v.reshape(-1))
    mm.body_mass[b], mm.body_ipos[b], mm.body_inertia[b], mm.body_iquat[b] = m, c, w, quat
    mm.body_sameframe[b] = 0  # else MuJoCo skips ipos / iquat where the file's inertial frame was the body's
    mm.body_simple[b] = 0


def pseudo_inertia(pi: np.ndarray) -> np.ndarray:
    """(4, 4) J = [[½tr(I)E − I, m c], [m cᵀ, m]]: positive definite iff π is physically consistent."""
    i_o = _sym(pi[4:])
    out = np.zeros((4, 4))
    out[:3, :3] = 0.5 * np.trace(i_o) * np.eye(3) - i_o
    out[:3, 3] = out[3, :3] = pi[1:4]
    out[3, 3] = pi[0]
    return out


def pi_from_log_cholesky(th: np.ndarray) -> np.ndarray:
    """(10,) π of the log-Cholesky vector (α, d1 d2 d3, s12 s23 s13, t1 t2 t3): J = U Uᵀ, U upper-triangular."""
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = th
    u = math.exp(a) * np.array(
        [[math.exp(d1), s12, s13, t1], [0, math.exp(d2), s23, t2], [0, 0, math.exp(d3), t3], [0, 0, 0, 1.0]]
    )
    j = u @ u.T
    sigma = j[:3, :3]
    i_o = np.trace(sigma) * np.eye(3) - sigma
    return np.array([j[3, 3], *j[:3, 3], i_o[0, 0], i_o[1, 1], i_o[2, 2], i_o[0, 1], i_o[0, 2], i_o[1, 2]])


def log_cholesky_from_pi(pi: np.ndarray) -> np.ndarray:
    """The log-Cholesky vector of a physically consistent π (J = U Uᵀ with U upper-triangular)."""
    j = pseudo_inertia(pi)
    if np.linalg.eigvalsh(j).min() <= 0:
        raise RobotError(
            f"inertial {np.round(pi, 6).tolist()} is not physically consistent (pseudo-inertia ≤ 0)"
        )
    p = np.eye(4)[::-1]  # U Uᵀ = J ⇔ (P U P)(P U P)ᵀ = P J P, a lower Cholesky factor
    u = p @ np.linalg.cholesky(p @ j @ p) @ p
    a = math.log(u[3, 3])
    u = u / u[3, 3]
    return np.array(
        [a, *np.log(np.diag(u)[:3]), u[0, 1], u[1, 2], u[0, 2], u[0, 3], u[1, 3], u[2, 3]], dtype=float
    )


def moving_bodies(mm) -> list[int]:
    """MuJoCo bodies below at least one joint, with a mass: the links whose inertials load the joints."""
    moving = np.zeros(mm.nbody, bool)
    for b in range(1, mm.nbody):
        moving[b] = mm.body_dofnum[b] > 0 or moving[mm.body_parentid[b]]
    return [b for b in range(1, mm.nbody) if moving[b] and mm.body_mass[b] > 0]


def _link_name(mm, b: int, robot: RobotModel) -> str:
    """The link's short name: the MJCF/URDF body name the converter's path ends with."""
    name = mm.body(b).name
    builder = robot.builder
    labels = [lab.rsplit("/", 1)[-1] for lab in getattr(builder, "body_label", [])]
    for lab in sorted(labels, key=len, reverse=True):
        if name == lab or name.endswith("_" + lab):
            return lab
    return name


def _rows(recordings: Sequence[Recording], robot: RobotModel, opts: InertialOptions, what: str) -> _Rows:
    """Every segment's filtered q, q̇, q̈ and its torque, in model joint order; the filter's edges trimmed."""
    parts: list[tuple[np.ndarray, ...]] = []
    for rec in recordings:
        order, _ = map_joints(robot, rec.joint_names, len(rec.joint_names))
        perm = np.argsort(order)
        for seg in rec.segments:
            dt = seg.dt
            win = int(round(opts.filter_window_s / dt)) | 1 if dt > 0 else 0
            if win < opts.filter_order + 3 or seg.n < 3 * win:
                raise RobotError(
                    f"{what} recording segment {seg.name}: {seg.n} samples at {dt:.4g} s cannot take a "
                    f"{opts.filter_window_s} s Savitzky–Golay window (needs ≥ {opts.filter_order + 3} samples a "
                    "window and three windows a segment); log longer or change filter_window_s"
                )
            tau = _torque(seg, opts.torque, what)
            q = np.asarray(seg.q, float)[:, perm]
            if not (np.isfinite(q).all() and np.isfinite(tau).all()):
                raise RobotError(f"{what} recording segment {seg.name}: q or torque has NaN or inf values")
            cut = slice(win // 2, seg.n - win // 2, opts.stride)
            f = [savgol_filter(q, win, opts.filter_order, deriv=k, delta=dt, axis=0) for k in (0, 1, 2)]
            slow = np.abs(f[1]) < opts.min_speed  # and a reversal between two samples, where q̇ skips the band
            slow[1:] |= (np.sign(f[1][1:]) != np.sign(f[1][:-1])) & (opts.min_speed > 0)
            slow = maximum_filter1d(slow, win, axis=0)
            parts.append((*(x[cut] for x in f), tau[:, perm][cut], ~slow[cut]))
    if not parts:
        raise RobotError(f"no {what} recordings given")
    return _Rows(*(np.concatenate([p[k] for p in parts]) for k in range(5)))


def _torque(seg, which: str, what: str) -> np.ndarray:
    """The segment's measured torque (tau) or commanded one (tau_ff), as `which` asks."""
    if which not in ("auto", "measured", "commanded"):
        raise RobotError(f"torque {which!r}: one of auto, measured, commanded")
    if which == "measured" or (which == "auto" and seg.tau is not None):
        if seg.tau is None:
            raise RobotError(
                f"{what} recording segment {seg.name} has no measured torque (tau); use commanded"
            )
        return np.asarray(seg.tau, float)
    tau = np.asarray(seg.tau_ff, float)
    if not np.any(tau):
        raise RobotError(f"{what} recording segment {seg.name}: the commanded torque (tau_ff) is all zero")
    return tau


def rigid_regressor(
    mm, md, cols: np.ndarray, bodies: list[int], rows: _Rows
) -> tuple[np.ndarray, np.ndarray]:
    """(T, J, 10 L) rigid-body regressor and (T, J) nominal torque: mj_inverse at π0 + ε e_k minus at π0, / ε."""
    import mujoco

    work = copy.copy(mm)
    t, j = rows.q.shape
    qpos = np.tile(np.asarray(md.qpos, float), (t, 1))  # each row's MuJoCo state, contiguous, set once
    qpos[:, mm.jnt_qposadr[mm.dof_jntid]] = rows.q[:, cols]
    qvel, qacc = np.ascontiguousarray(rows.qd[:, cols]), np.ascontiguousarray(rows.qdd[:, cols])

    def torques() -> np.ndarray:
        tau = np.zeros((t, j))
        for k in range(t):
            md.qpos[:], md.qvel[:], md.qacc[:] = qpos[k], qvel[k], qacc[k]
            mujoco.mj_inverse(work, md)
            tau[k] = md.qfrc_inverse
        out = np.zeros((t, j))
        out[:, cols] = tau
        return out

    base = torques()
    y = np.zeros((t, j, 10 * len(bodies)))
    for li, b in enumerate(bodies):
        pi0 = body_pi(mm, b)
        length = max(float(np.linalg.norm(pi0[1:4])) / pi0[0], 0.05)
        scale = np.array([pi0[0]] + [pi0[0] * length] * 3 + [max(np.trace(_sym(pi0[4:])) / 3, 1e-6)] * 6)
        for k in range(10):
            eps = 1e-2 * scale[k]
            set_body_pi(work, b, pi0 + eps * np.eye(10)[k])
            y[:, :, 10 * li + k] = (torques() - base) / eps
        set_body_pi(work, b, pi0)
    return y, base - np.einsum("tjk,k->tj", y, np.concatenate([body_pi(mm, b) for b in bodies]))


def friction_regressor(rows: _Rows, v0: float) -> np.ndarray:
    """(T, J, 4 J): per joint Coulomb tanh(q̇/v0), viscous q̇, offset 1, armature q̈ (FRICTION_NAMES order)."""
    t, j = rows.q.shape
    y = np.zeros((t, j, 4 * j))
    for i in range(j):
        y[:, i, 4 * i : 4 * i + 4] = np.stack(
            [np.tanh(rows.qd[:, i] / v0), rows.qd[:, i], np.ones(t), rows.qdd[:, i]], axis=1
        )
    return y


def _check_options(opts: InertialOptions) -> None:
    """Options a user sets: named errors instead of a failed fit."""
    checks = (
        (opts.filter_window_s > 0, f"filter_window_s {opts.filter_window_s}: a positive time in s"),
        (opts.filter_order >= 2, f"filter_order {opts.filter_order}: at least 2 (q̈ needs a quadratic)"),
        (opts.coulomb_speed > 0, f"coulomb_speed {opts.coulomb_speed}: a positive speed"),
        (opts.min_speed >= 0, f"min_speed {opts.min_speed}: zero or a positive speed"),
        (0 < opts.rank_rtol < 1, f"rank_rtol {opts.rank_rtol}: between 0 and 1"),
        (opts.prior >= 0, f"prior {opts.prior}: zero or positive"),
        (opts.stride >= 1, f"stride {opts.stride}: a whole number ≥ 1"),
        (opts.budget >= 1, f"budget {opts.budget}: a whole number ≥ 1"),
    )
    for ok, msg in checks:
        if not ok:
            raise RobotError(f"inertial identification option {msg}")


def _system(y_rb: np.ndarray, rest: np.ndarray, rows: _Rows, opts: InertialOptions, joints: list[str]):
    """The kept rows (joint-major mask) of [Y_rb, Y_friction], the torque left to explain and each row's joint."""
    y = np.concatenate([y_rb, friction_regressor(rows, opts.coulomb_speed)], axis=2)
    keep = rows.moving if rows.moving is not None else np.abs(rows.qd) >= opts.min_speed
    few = [n for n, c in zip(joints, keep.sum(axis=0), strict=True) if c < 10]
    if few:
        raise RobotError(
            f"joint(s) {', '.join(few)}: fewer than 10 samples move faster than min_speed {opts.min_speed}; "
            "excite them more or lower min_speed"
        )
    joint = np.broadcast_to(np.arange(rows.q.shape[1]), rows.q.shape)
    return y[keep], (rows.tau - rest)[keep], joint[keep], rows.tau[keep]


def base_parameters(a: np.ndarray, names: list[str], rtol: float) -> tuple[int, dict[str, str], list[dict]]:
    """Rank, each parameter's identifiability and the identifiable combinations, from a pivoted QR of the
    column-normalised weighted regressor (dependent columns folded into the independent ones they equal)."""
    norm = np.linalg.norm(a, axis=0)
    blind = norm <= rtol * norm.max()
    scale = np.where(blind, 1.0, norm)
    an = np.where(blind, 0.0, a / scale)  # a round-off column must not count as a direction
    _, r, piv = scipy.linalg.qr(an, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > rtol * diag[0])) if diag.size else 0
    _, s, vt = np.linalg.svd(an, full_matrices=False)
    null = vt[int(np.sum(s > rtol * s[0])) :]
    in_null = np.linalg.norm(null, axis=0) if null.size else np.zeros(a.shape[1])
    status = {}
    for k, n in enumerate(names):
        status[n] = "none" if blind[k] else "alone" if in_null[k] < 1e-6 else "combination"
    ind, dep = piv[:rank], piv[rank:]
    k_n = scipy.linalg.solve_triangular(r[:rank, :rank], r[:rank, rank:]) if dep.size else np.zeros((rank, 0))
    k_real = k_n / scale[ind][:, None] * scale[dep][None, :]
    combos = []
    for i, c in enumerate(ind):
        combo = {names[c]: 1.0}
        for d, cd in enumerate(dep):
            if abs(k_n[i, d]) > 1e-6 and status[names[cd]] != "none":
                combo[names[cd]] = float(k_real[i, d])
        combos.append(combo)
    return rank, status, combos


def _physical_fit(
    aw: np.ndarray, bw: np.ndarray, n_rows: int, x0: np.ndarray, n_links: int, opts: InertialOptions
) -> np.ndarray:
    """Trust-region least squares over (log-Cholesky per link, friction ≥ 0, offset free, armature ≥ 0) of the
    weighted torque residual, plus a weak pull toward x0 that only directions the data leave free feel. The
    residual is linear in the parameters, so (aw, bw) is the weighted regressor's triangular factor and Qᵀb."""
    n_rb = 10 * n_links
    lam = opts.prior * math.sqrt(n_rows)

    def params(x: np.ndarray) -> np.ndarray:
        pis = [pi_from_log_cholesky(x[10 * i : 10 * i + 10]) for i in range(n_links)]
        return np.concatenate([*pis, x[n_rb:]])

    def run(xs: np.ndarray) -> np.ndarray:
        return np.stack([np.concatenate([aw @ params(x) - bw, lam * (x[:n_rb] - x0[:n_rb])]) for x in xs])

    def jac(x: np.ndarray) -> np.ndarray:
        d = np.eye(x.size)
        dp = np.zeros((x.size, x.size))
        dp[n_rb:, n_rb:] = np.eye(x.size - n_rb)
        for i in range(n_links):
            sl = slice(10 * i, 10 * i + 10)
            for k in range(10 * i, 10 * i + 10):
                h = 1e-6
                dp[sl, k] = (
                    pi_from_log_cholesky((x + h * d[k])[sl]) - pi_from_log_cholesky((x - h * d[k])[sl])
                ) / (2 * h)
        reg = np.zeros((n_rb, x.size))
        reg[:, :n_rb] = lam * np.eye(n_rb)
        return np.vstack([aw @ dp, reg])

    j = (x0.size - n_rb) // 4
    lower = np.full(x0.size, -np.inf)
    lower[n_rb:] = np.tile([0.0, 0.0, -np.inf, 0.0], j)
    space = SearchSpace(
        tuple(f"x{i}" for i in range(x0.size)),
        lower,
        np.full(x0.size, np.inf),
        np.zeros(x0.size, bool),
        np.zeros(x0.size, bool),
    )
    start = np.clip(x0, lower + 1e-9 * np.isfinite(lower), None)
    return trust_region(
        run,
        space,
        start,
        opts.budget,
        0.0,
        jac=jac,
        tol=Tolerances(xtol=1e-12, ftol=1e-12, gtol=1e-10, tr_solver="exact", unit_cube=False),
    ).x


def identify_inertials(
    robot: RobotModel,
    recordings: Recording | Sequence[Recording],
    validation: Recording | Sequence[Recording] = (),
    options: InertialOptions | None = None,
) -> InertialResult:
    """Identify every moving link's inertial and each joint's friction and armature from torque logs; the
    validation recordings give the held-out torque residual and its verdict against trivial predictors."""
    opts = options or InertialOptions()
    _check_options(opts)
    recordings = [recordings] if isinstance(recordings, Recording) else list(recordings)
    validation = [validation] if isinstance(validation, Recording) else list(validation)
    if robot.builder is None:
        raise RobotError(
            f"{robot.path.name}: a model summary has no dynamics; load the robot with load_robot"
        )
    mm, md, cols = id_model(robot)
    bodies = moving_bodies(mm)
    if not bodies:
        raise RobotError(f"{robot.path.name}: no link with a mass moves with the joints")
    joints = list(robot.joint_names)
    links = [_link_name(mm, b, robot) for b in bodies]
    names = [f"{lk}.{p}" for lk in links for p in PI_NAMES] + [
        f"{jn}.{p}" for jn in joints for p in FRICTION_NAMES
    ]
    train = _rows(recordings, robot, opts, "training")
    a, b, joint, _ = _system(*rigid_regressor(mm, md, cols, bodies, train), train, opts, joints)
    ols = np.linalg.lstsq(a, b, rcond=None)[0]
    res_ols = a @ ols - b
    sigma = np.array(
        [max(float(np.sqrt(np.mean(res_ols[joint == i] ** 2))), 1e-9) for i in range(len(joints))]
    )
    w = 1.0 / sigma[joint]
    # ‖W(A p − b)‖² = ‖R p − Qᵀb‖² + const: the rank, the combinations and the search read the (P, P) factor
    r_aug = np.asarray(np.linalg.qr(np.column_stack([a * w[:, None], b * w]), mode="r"))
    rank, status, combos = base_parameters(r_aug[:, :-1], names, opts.rank_rtol)
    pi0 = np.concatenate([body_pi(mm, bd) for bd in bodies])
    fr0 = np.stack([robot.friction, robot.viscous_friction, np.zeros(len(joints)), robot.armature], axis=1)
    x0 = np.concatenate(
        [*(log_cholesky_from_pi(pi0[10 * i : 10 * i + 10]) for i in range(len(bodies))), fr0.ravel()]
    )
    x = _physical_fit(r_aug[:, :-1], r_aug[:, -1], a.shape[0], x0, len(bodies), opts)
    p = np.concatenate(
        [*(pi_from_log_cholesky(x[10 * i : 10 * i + 10]) for i in range(len(bodies))), x[10 * len(bodies) :]]
    )
    fr = p[10 * len(bodies) :].reshape(len(joints), 4)
    res = a @ p - b
    sd = covariance(a * w[:, None], res * w, joint, None, None)[0]
    nominal = np.concatenate([pi0, fr0.ravel()])
    rmse = {
        "train": per_joint_rmse(res, joint, joints),
        "model_file": per_joint_rmse(a @ nominal - b, joint, joints),
    }
    samples = {"train_rows": int(a.shape[0])}
    base: dict[str, dict[str, float]] = {}
    if validation:
        val = _rows(validation, robot, opts, "validation")
        av, bv, jv, tv = _system(*rigid_regressor(mm, md, cols, bodies, val), val, opts, joints)
        rmse["held_out"] = per_joint_rmse(av @ p - bv, jv, joints)
        samples["held_out_rows"] = int(av.shape[0])
        base = baselines((a, b), (av, bv, tv, jv), nominal, 10 * len(bodies), joints)
    return InertialResult(
        links=_links_out(links, p, len(bodies)),
        friction={
            jn: dict(zip(FRICTION_NAMES, map(float, row), strict=True))
            for jn, row in zip(joints, fr, strict=True)
        },
        intervals=_intervals(names, p, sd, status),
        identifiability=status,
        base_parameters=combos,
        rank=rank,
        noise=dict(zip(joints, map(float, sigma), strict=True)),
        rmse=rmse,
        base_rmse=per_joint_rmse(res_ols, joint, joints),
        filter=(
            f"Savitzky–Golay (scipy.signal.savgol_filter), order {opts.filter_order}, "
            f"{opts.filter_window_s} s window, zero-phase, on q for q, q̇, q̈; torque unfiltered"
        ),
        samples=samples,
        notes=_notes(status, links),
        baselines=base,
        verdict=inertial_verdict(rmse.get("held_out", {}), base).to_json(),
    )


def _links_out(links: list[str], p: np.ndarray, n: int) -> dict[str, dict]:
    out = {}
    for i, lk in enumerate(links):
        pi = p[10 * i : 10 * i + 10]
        out[lk] = {
            "mass": float(pi[0]),
            "com": (pi[1:4] / pi[0]).tolist(),
            "inertia_origin": pi[4:].tolist(),
            "pseudo_inertia_min_eig": float(np.linalg.eigvalsh(pseudo_inertia(pi)).min()),
        }
    return out


def _intervals(names: list[str], p: np.ndarray, sd: np.ndarray, status: dict[str, str]) -> dict:
    """95 % intervals of friction, armature and mass where the data identify the parameter alone."""
    out: dict[str, tuple[float, float] | None] = {}
    for k, n in enumerate(names):
        if n.endswith((".m", ".coulomb", ".viscous", ".offset", ".armature")):
            ok = status[n] == "alone" and math.isfinite(sd[k])
            out[n] = (float(p[k] - Z95 * sd[k]), float(p[k] + Z95 * sd[k])) if ok else None
    return out


def _notes(status: dict[str, str], links: list[str]) -> list[str]:
    """A line per link whose mass the log does not identify alone, so that no one reads the value as measured."""
    notes = []
    for lk in links:
        s = status[f"{lk}.m"]
        if s == "none":
            notes.append(
                f"{lk}: its mass does not enter this log's joint torques (only its m·c and inertia do, or nothing); "
                "the physical fit holds it near the model file's value"
            )
        elif s == "combination":
            notes.append(
                f"{lk}: mass identifiable only in combination (see base_parameters); the physical fit holds the "
                "rest near the model file's value"
            )
    return notes
