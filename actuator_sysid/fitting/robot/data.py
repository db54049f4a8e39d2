"""The log made ready for a whole-robot fit: mapped onto the model's joints, split into training and validation
(in time, or by whole recordings), cut into training windows; the gains, the payload bodies and the bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...datasets.names import check_name
from ...datasets.recording import Recording, Segment
from ...models import parameters
from ...models.articulated import EFFORT_MODES, joint_space_terms, limited
from ...models.families import get_family
from ...models.robot import RobotError, RobotModel, map_joints
from ..request import ROBOT_BOUNDS
from ..robot_judge import GAINS_GUESSED
from ..space import plant_range
from .options import RobotFitOptions
from .problem import (
    ALL_TERMS,
    ENVELOPE_FAMILY,
    OFFSET,
    POSITION_FRICTION,
    Problem,
    family_terms,
    resolve_groups,
)


@dataclass
class FitData:
    """The log in model joint order, its time split and the training windows."""

    q: np.ndarray
    qd: np.ndarray
    cmd: np.ndarray
    cmd_qd: np.ndarray
    tau_ff: np.ndarray  # the logged feed-forward effort, N·m (zeros where the log has none)
    t: np.ndarray
    dt: float  # physics step
    split: int
    starts: np.ndarray
    length: int
    how: str  # how log joints were mapped
    pieces: list[tuple[int, int]] = field(default_factory=list)  # training recordings' [start, end) samples
    val_pieces: list[tuple[int, int]] = field(default_factory=list)  # each replayed alone from its start
    first: np.ndarray | None = (
        None  # (T,) each sample's recording's first sample (a delay reaches no further)
    )
    recordings: dict = field(default_factory=dict)  # how the split was made, recording names on each side

    def first_of(self, starts: np.ndarray) -> np.ndarray:
        """(W,) the first sample of each window's recording."""
        return np.zeros(len(starts), int) if self.first is None else self.first[np.asarray(starts, int)]


def prepare_fit(rec: Recording, robot: RobotModel, opts: RobotFitOptions) -> tuple[FitData, Problem, bool]:
    """Map the log onto the model, resolve groups and gains, split it (in time for one recording, else by whole
    recordings); returns data, problem, gains known."""
    order, how = map_joints(robot, rec.joint_names, len(rec.joint_names))
    perm = np.argsort(order)  # model joint k is log column perm[k]
    names = robot.joint_names
    groups, exprs = resolve_groups(names, opts.groups)
    kp, kd = _gains(rec, opts, perm, len(names))
    gains_known = kp is not None
    data = _assemble(rec, perm, opts, how)
    if kp is not None and kd is not None:
        idle = [n for k, n in enumerate(names) if kp[k] == 0 and kd[k] == 0 and not np.any(data.tau_ff[:, k])]
        if idle:
            raise RobotError(
                f"joint(s) {', '.join(idle)}: the gains are zero (kp = kd = 0) and the log has no feed-forward "
                "effort (tau_ff) for them, so nothing drives them; give the gains the robot ran "
                "(--kp / --kd, or kp / kd in the log's metadata) or log the commanded effort as tau_ff"
            )
    servo = bool(np.isfinite(robot.servo_limits()).any())
    terms = family_terms(get_family(ENVELOPE_FAMILY[opts.dc_motor]), gains_known, servo_limit=servo)
    if opts.position_friction:
        open_ = [n for n, ok in zip(names, limited(robot), strict=True) if not ok]
        if open_:
            raise RobotError(
                f"joint(s) {', '.join(open_)}: position-dependent friction runs between the joint's limits, and "
                "these have none in the model; fit without it"
            )
        terms.insert(terms.index("friction") + 1, POSITION_FRICTION)
    # a replaced servo's force range is searched (family_terms), not held as a box
    box = robot.effort_limit if robot.box_effort_limit is None else robot.box_effort_limit
    effort = np.where(np.isfinite(box), box, 1e6)
    prob = Problem(
        names,
        groups,
        exprs,
        terms,
        opts.fit_bias,
        kp,
        kd,
        effort,
        np.asarray(robot.component),
        **_payload(robot, opts),
    )
    if opts.effort_mode not in EFFORT_MODES:
        raise RobotError(f"effort_mode {opts.effort_mode!r}: one of {', '.join(EFFORT_MODES)}")
    prob.effort_mode = opts.effort_mode
    prob.term_bounds, prob.bias_bound, prob.scales = model_bounds(robot, prob, data, opts.decimation)
    if opts.bias_limit is not None:
        lo, hi = ROBOT_BOUNDS["bias_limit"]
        if not lo <= opts.bias_limit <= hi:
            raise RobotError(f"bias_limit {opts.bias_limit} rad: between {lo:g} and {hi:g}")
        prob.bias_bound = np.minimum(prob.bias_bound, opts.bias_limit)
    prob.gains = _gains_note(prob, opts, bool(np.any(data.tau_ff)))
    return data, prob, gains_known


def _log_gains(seg: Segment, key: str, names: list[str]) -> np.ndarray | None:
    """Per-joint gain from a segment's metadata (a number, or a {joint: value} dict), if stated."""
    v = seg.metadata.get(key)
    if v is None:
        return None
    if isinstance(v, dict):
        return np.array([float(v[n]) for n in names])
    return np.full(len(names), float(v))


def _payload(robot: RobotModel, opts: RobotFitOptions) -> dict:
    """The payload bodies' Problem fields: names, builder indices, the model's mass and COM; every name must be
    a link of the model with a mass (a correction scales it)."""
    for b in opts.payload or []:  # a payload body's name reaches the result and its exports
        check_name(b, "payload body name", "payload")
    if not opts.payload or robot.builder is None:  # no builder: the service's pre-check, the fit checks
        return {}
    builder: Any = robot.builder
    links = [lab.rsplit("/", 1)[-1] for lab in builder.body_label]
    missing = [b for b in opts.payload if b not in links]
    if missing:
        raise RobotError(
            f"payload body {', '.join(missing)} is not a link of {robot.path.name}; its links: {', '.join(links)}"
        )
    idx = np.array([links.index(b) for b in opts.payload])
    mass = np.array([float(builder.body_mass[i]) for i in idx])
    if np.any(mass <= 0):
        light = [b for b, m in zip(opts.payload, mass, strict=True) if m <= 0]
        raise RobotError(f"payload body {', '.join(light)} has no mass in the model: give it a nominal one")
    com = np.array([np.asarray(builder.body_com[i], float) for i in idx])
    return {
        "bodies": list(opts.payload),
        "body_index": idx,
        "body_mass0": mass,
        "body_com0": com,
        "fit_com": opts.payload_com,
    }


def _gains(
    rec: Recording, opts: RobotFitOptions, perm: np.ndarray, j: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The PD gains in model joint order: the options', else the log's (every recording must state the same),
    else None (fitted); kd 0 where kp is known and kd is not."""
    logged: list[np.ndarray | None] = []
    for key, given in (("kp", opts.kp), ("kd", opts.kd)):
        if given is not None:
            logged.append(np.full(j, float(given)))
            continue
        per_seg = [_log_gains(seg, key, list(rec.joint_names)) for seg in rec.segments]
        first = per_seg[0]
        for seg, v in zip(rec.segments[1:], per_seg[1:], strict=True):
            if (v is None) != (first is None) or (v is not None and not np.array_equal(v, np.asarray(first))):
                raise RobotError(
                    f"recording {seg.name} states {key} {v if v is None else v.tolist()} where "
                    f"{rec.segments[0].name} states {first if first is None else first.tolist()}; this version "
                    f"fits one set of gains: give --{key}, or fit the recordings of each gain apart"
                )
        logged.append(None if first is None else first[perm])
    kp, kd = logged
    if kp is not None and kd is None:
        kd = np.zeros(j)
    return kp, kd


def _recording_split(rec: Recording, opts: RobotFitOptions) -> tuple[list[int], list[int], str]:
    """Training and validation segment indices of a log of several recordings, and how they were chosen: the
    named holdout (KEY=VALUE on segment metadata, as a joint fit's --holdout), else the last recordings (the
    validation fraction of them, at least one): train earlier, validate later."""
    from ..plan import plan_split, recordings
    from ..request import FitRequest, FitRequestError

    groups = recordings(rec)
    if opts.holdout:
        try:
            split = plan_split(rec, FitRequest(holdout=opts.holdout))
        except FitRequestError as e:
            raise RobotError(str(e)) from None
        return split.train, split.validation, split.method
    if len(groups) < 2:
        raise RobotError(
            f"the log's {len(rec.segments)} segments are one recording (split at time gaps); a robot fit "
            "validates on whole recordings: log another recording, or name a holdout (--holdout KEY=VALUE)"
        )
    k = min(len(groups) - 1, max(1, int(round(len(groups) * opts.validation_fraction))))
    val = sorted(i for g in groups[-k:] for i in g)
    return (
        [i for i in range(len(rec.segments)) if i not in val],
        val,
        f"the last {k} of {len(groups)} recordings",
    )


def _assemble(rec: Recording, perm: np.ndarray, opts: RobotFitOptions, how: str) -> FitData:
    """The log in model joint order, training recordings first, then the validation ones; one recording is split
    in time (the last validation_fraction validates, replayed from the measured state at the cut)."""
    segs = rec.segments
    dt_log = segs[0].dt
    for s_ in segs[1:]:
        if abs(s_.dt - dt_log) > 0.01 * dt_log:
            raise RobotError(
                f"recording {s_.name} is sampled every {s_.dt:.6g} s, {segs[0].name} every {dt_log:.6g} s; "
                "a robot fit needs one sample rate (resample the log)"
            )
    length = max(2, int(round(opts.window_s / dt_log)))
    if len(segs) == 1 and not opts.holdout:
        n = segs[0].n
        split = int(round(n * (1.0 - opts.validation_fraction)))
        if split < 10 or n - split < 10:
            raise RobotError(
                f"the log has {n} samples: too few to split {opts.validation_fraction:.0%} off for validation"
            )
        train_idx, val_idx, method = [0], list[int](), "time"
        pieces, val_pieces = [(0, split)], [(split, n)]
    else:
        train_idx, val_idx, method = _recording_split(rec, opts)
        sizes = [segs[i].n for i in train_idx + val_idx]
        edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        bounds = list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))
        pieces, val_pieces = bounds[: len(train_idx)], bounds[len(train_idx) :]
        split = pieces[-1][1]
    order = train_idx + val_idx
    cols = [
        np.concatenate([np.nan_to_num(np.asarray(getattr(segs[i], ch), float)) for i in order])[:, perm]
        for ch in ("q", "qd", "q_des", "qd_des", "tau_ff")
    ]
    first = np.zeros(cols[0].shape[0], int)
    for a, b in pieces + val_pieces:
        first[a:b] = a if len(order) > 1 else 0
    starts = np.concatenate([np.arange(a, b - length, length) for a, b in pieces]).astype(int)
    if starts.size == 0:
        raise RobotError(f"the training part ({split} samples) is shorter than one {opts.window_s} s window")
    t = segs[0].t if len(order) == 1 else np.arange(cols[0].shape[0]) * dt_log
    q, qd, cmd, cmd_qd, tau_ff = cols
    return FitData(
        q,
        qd,
        cmd,
        cmd_qd,
        tau_ff,
        t,
        dt_log / opts.decimation,
        split,
        starts,
        length,
        how,
        pieces=pieces,
        val_pieces=val_pieces,
        first=first,
        recordings={
            "method": method,
            "training": [segs[i].name for i in train_idx],
            "validation": [segs[i].name for i in val_idx],
        },
    )


def _gains_note(prob: Problem, opts: RobotFitOptions, feed_forward: bool) -> str:
    """Where the PD gains came from, and whether the log's feed-forward effort drives the joints."""
    if prob.kp is None:
        note = GAINS_GUESSED
    elif not np.any(prob.kp) and (prob.kd is None or not np.any(prob.kd)):
        return "zero (kp = kd = 0): the log's feed-forward effort (tau_ff) drives the joints"
    else:
        note = "as given (kp / kd options)" if opts.kp is not None else "from the log"
    return note + ("; plus the log's feed-forward effort (tau_ff)" if feed_forward else "")


def _demand(prob: Problem, data: FitData, n: int) -> np.ndarray:
    """(n, J) the effort the log asks of each joint over its first n samples at the known gains, N·m."""
    j = len(prob.names)
    kp = prob.kp if prob.kp is not None else np.zeros(j)
    kd = prob.kd if prob.kd is not None else np.zeros(j)
    return pd_effort(data, kp, kd, n)


def pd_effort(data: FitData, kp: np.ndarray, kd: np.ndarray, n: int | None = None) -> np.ndarray:
    """(n, J) the feed-forward effort plus the PD effort at gains kp, kd (J,) on the logged states and commands
    of the first n samples (all by default): open loop, no delay; the PD acts on the reading, bias included."""
    sl = slice(None, n)
    return data.tau_ff[sl] + kp * (data.cmd[sl] - data.q[sl]) + kd * (data.cmd_qd[sl] - data.qd[sl])


def model_bounds(
    robot: RobotModel, prob: Problem, data: FitData, decimation: int
) -> tuple[dict[str, dict[str, tuple[float, float]]], np.ndarray, dict[str, dict[str, float]]]:
    """Per group the log10 bounds of every term (the registry's plant rules, fitting/space.py plant_range),
    scaled to the model and the training log; per joint the encoder bias bound (the registry's share of its
    range); and the scales used, for the result.

    The rigid-body effort and the joint-space inertia come from Newton's (MuJoCo's) inverse dynamics along at
    most 200 training samples, so a heavy arm's friction or a light finger's armature is inside the bounds."""
    n = int(data.split)
    h = data.dt * decimation
    pick = np.unique(np.linspace(0, n - 1, min(200, n)).round().astype(int))
    acc = np.gradient(data.qd[:n], h, axis=0)
    if robot.builder is None:  # a model summary (the service's pre-check): no inverse dynamics
        rigid = diag = np.zeros((pick.size, len(prob.names)))
    else:
        rigid, diag, _ = joint_space_terms(robot, data.q[pick], data.qd[pick], acc[pick], derivatives=False)
    limit = np.where(np.isfinite(robot.effort_limit) & (robot.effort_limit < 1e5), robot.effort_limit, 0.0)
    demand = np.quantile(np.abs(_demand(prob, data, n)), 0.999, axis=0)
    effort = np.maximum.reduce(
        [limit, demand, np.quantile(np.abs(rigid), 0.99, axis=0), np.full(limit.shape, 1e-3)]
    )
    speed = np.maximum(np.quantile(np.abs(data.qd[:n]), 0.99, axis=0), 1e-2)
    vmax = np.maximum(np.abs(data.qd[:n]).max(axis=0), 1e-2)
    accel = np.maximum(np.quantile(np.abs(acc), 0.99, axis=0), 1e-1)
    inertia = np.maximum(diag.max(axis=0), 1e-9)
    out: dict[str, dict[str, tuple[float, float]]] = {}
    scales: dict[str, dict[str, float]] = {}
    for g, idx in prob.groups.items():
        e, v, a, m = (float(x[idx].max()) for x in (effort, speed, accel, inertia))
        scales[g] = {
            "effort": e,
            "speed": v,
            "max_speed": float(vmax[idx].max()),
            "acceleration": a,
            "inertia": m,
        }
        out[g] = {t: tuple(math.log10(b) for b in plant_range(t, scales[g])) for t in ALL_TERMS}  # type: ignore[misc]
    span = robot.upper - robot.lower
    finite = limited(robot)
    offset = parameters.get(OFFSET)
    assert offset.plant is not None
    # a share of the joint's range; the registry's range where the joint has no finite one
    bias = np.where(finite, offset.plant.multiple * np.where(finite, span, 0.0), offset.upper)
    return out, np.maximum(bias, 0.01), scales
