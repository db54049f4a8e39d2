"""The assembly pipeline every reader ends in: raw segments, gap splitting, resampling, a Recording.

A reader turns its file into `RawSegment`s (time stamps, per-channel (n, J) arrays, which channels each
joint really has, and the index of every sample in the file), then calls `assemble`, which applies the
sidecar, splits at gaps, converts units, resamples jittered time onto a uniform grid, differentiates a
missing velocity and builds the canonical `Recording`. So every format gets the same checks, the same
resampling and the same wording in its warnings.

Per-segment reading facts (raw rate, jitter, uneven stamps, resampling, bridged and split gaps, skipped,
repeated and dropped samples) go into ``Recording.metadata["timing"][<segment name>]``; the data-quality report
states them once per kind for the whole recording, however many files and segments it has.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..numbers import is_real
from .errors import cite
from .names import quote_name
from .quality import DEGREES_RANGE, median_rate
from .recording import DatasetError, JointInfo, Recording, Segment, check_names

MIN_SAMPLES = 10
"""A segment shorter than this cannot support a fit."""
GAP_PERIODS = 5.0
"""Without a segment column, a time step longer than this many median periods starts a new segment."""
JITTER_TOL = 0.02
"""A segment whose steps stray more than this fraction from the median step is resampled."""
SKIP_TOL = 0.25
"""A step within this many median periods of k ≥ 2 periods (k ≤ GAP_PERIODS) skipped k − 1 samples; a step
between (1.5 periods, say) is an uneven clock, not a missing sample."""

VELOCITY_METHOD = "differentiated from q: second-order central differences (numpy.gradient)"
"""What Recording.velocity_source says when qd was computed here."""
RESAMPLE_METHOD = "linear interpolation (numpy.interp) onto a uniform grid at the median sample period"
"""How jittered time stamps are made uniform; the summary repeats it with the rate."""

REQUIRED = ("q", "q_des")
OPTIONAL = ("qd", "tau", "qd_des", "tau_ff")
TABLE_CHANNELS = ("q", "qd", "tau", "q_des", "qd_des", "tau_ff")  # column order when writing
ANGLE_CHANNELS = ("q", "qd", "q_des", "qd_des")
JOINT_TYPES = ("revolute", "prismatic")
LOAD_FIELDS = {"inertia": "kg·m²", "mass": "kg", "com_distance": "m", "gravity": "m/s²"}
SIDECAR_KEYS = ("angle_unit", "velocity_source", "joints", "segments", "reader")


@dataclass
class RawSegment:
    """One segment as read from a file, before units, resampling and derived channels."""

    name: str
    t: np.ndarray
    rows: np.ndarray  # index of each sample in the file (1-based data row, entry or message number)
    data: dict[str, np.ndarray]  # channel -> (n, J); columns of absent joints are zeros
    present: dict[str, list[bool]]  # channel -> per joint: did the file have it
    split_by_gap: bool = False
    metadata: dict = field(default_factory=dict)  # reader-made segment metadata (the sidecar's wins)
    unit: str = "row"  # what messages call a place: "line", "data row" (DATA_ROW), "entry", "message", ...
    dropped: int = 0  # samples the reader dropped (NaN / empty arrays) before this point
    gap_before: float = 0.0  # s of missing time before this segment when a gap split it off
    repeated: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # rows of dropped repeats
    lines: Callable[[int], int] | None = None  # a text table's `rows` → its own lines (tablestream.LineMap)

    def place(self, row: int) -> int:
        """The file's own number of a value of `rows` (its line in a text table), as messages cite it."""
        return int(self.lines(int(row))) if self.lines is not None else int(row)


# --------------------------------------------------------------------------------------------- checks


def check_increasing(
    t: np.ndarray, rows: np.ndarray, where: str, unit: str = "row", lines: Callable[[int], int] | None = None
) -> None:
    """t must strictly increase; the error names the place (line, entry, message; `lines` maps a text table's
    data rows to its lines) and both times."""
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0)
    if bad.size == 0:
        return
    k = int(bad[0])
    a, b = (int(lines(int(r))) if lines is not None else int(r) for r in (rows[k], rows[k + 1]))
    if dt[k] == 0:
        raise DatasetError(
            f"{where}: duplicate t = {float(t[k])!r} at {cite(unit, a)} and {cite(unit, b)}; each time "
            f"stamp may appear once (per joint) in a segment — remove the repeated {unit}"
        )
    raise DatasetError(
        f"{where}: t is not increasing at {cite(unit, b)} (t = {float(t[k + 1])!r} after "
        f"{float(t[k])!r}); sort the {unit}s by t, or add a 'segment' column if the clock restarts there"
    )


def repeated_records(t: np.ndarray, channels: Iterable[np.ndarray]) -> np.ndarray:
    """(n,) bool: samples that repeat the one before exactly (same stamp, same value in every channel): the
    logger wrote one sample twice, so the copy can go; a repeated stamp with other values stays an error.
    `channels` is read only when a stamp repeats (a generator spares the copies of a clean log)."""
    rep = np.zeros(t.size, bool)
    if t.size < 2:
        return rep
    rep[1:] = t[1:] == t[:-1]
    if not rep.any():
        return rep
    for v in channels:
        a = np.asarray(v).reshape(t.size, -1)
        rep[1:] &= ((a[1:] == a[:-1]) | (np.isnan(a[1:]) & np.isnan(a[:-1]))).all(axis=1)
    return rep


def where(filename: str, segment: str | None = None, joint: str | None = None) -> str:
    """The "file, segment, joint" prefix of a message."""
    out = filename if segment is None else f"{filename}, segment {segment}"
    return out if joint is None else f"{out}, joint '{joint}'"


def finite(values: np.ndarray, filename: str, field_name: str, unit: str = "row", base: int = 1) -> None:
    """Every value must be finite; the error names the file, field and the first bad row/entry/message."""
    arr = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if not bad.any():
        return
    flat = np.flatnonzero(bad.reshape(arr.shape[0], -1).any(axis=1)) if arr.ndim else np.array([0])
    k = int(flat[0])
    v = arr[k] if arr.ndim == 1 else arr[k][~np.isfinite(arr[k])].flat[0]
    col = ""
    if arr.ndim == 2:
        col = f", column {int(np.flatnonzero(~np.isfinite(arr[k]))[0])}"
    shown = "NaN" if math.isnan(v) else repr(float(v))
    raise DatasetError(
        f"{filename}, {field_name}, {cite(unit, k + base)}{col}: the value is {shown}; every value of "
        f"{field_name} must be a finite number ({int(flat.size)} bad {unit}(s) in all)"
    )


def check_load_fields(d: dict, where_: str, warnings: list[str], allowed: dict[str, str]) -> dict:
    """Numeric load fields must be finite numbers ≥ 0 (gravity: any finite); unknown keys are reported."""
    out = {}
    for k, v in d.items():
        if k not in allowed:
            warnings.append(f"{where_}: unknown key {quote_name(k)} ignored (known: {', '.join(allowed)})")
            continue
        if k == "type":
            if v not in JOINT_TYPES:
                raise DatasetError(f'{where_}: invalid type {quote_name(v)}; use "revolute" or "prismatic"')
            out["joint_type"] = v
            continue
        ok = is_real(v)
        if not ok or (k != "gravity" and v < 0):
            bound = "" if k == "gravity" else " ≥ 0"
            raise DatasetError(
                f"{where_}: {k} must be a finite number{bound} in {allowed[k]}, got {quote_name(v)}"
            )
        out[k] = float(v)
    return out


# --------------------------------------------------------------------------------------------- time grid


def split_gaps(raw: RawSegment) -> list[RawSegment]:
    """Split a segment at time steps longer than GAP_PERIODS median periods.

    Pieces of an unnamed segment are named "0", "1", ...; of a named one "<name>.0", "<name>.1", ...
    (a segment without gaps keeps its name).
    """
    if raw.t.size < 2:
        return [_piece(raw, "0" if not raw.name else raw.name, 0, raw.t.size, 0.0)]
    dt = np.diff(raw.t)
    cuts = np.flatnonzero(dt > GAP_PERIODS * np.median(dt)) + 1
    bounds = [0, *cuts.tolist(), raw.t.size]
    out = []
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        name = str(i) if not raw.name else (raw.name if cuts.size == 0 else f"{raw.name}.{i}")
        gap = float(raw.t[a] - raw.t[a - 1]) if a > 0 else raw.gap_before
        out.append(_piece(raw, name, a, b, gap))
    return out


def _piece(raw: RawSegment, name: str, a: int, b: int, gap: float) -> RawSegment:
    return RawSegment(
        name,
        raw.t[a:b],
        raw.rows[a:b],
        {ch: v[a:b] for ch, v in raw.data.items()},
        raw.present,
        True,
        raw.metadata,
        raw.unit,
        raw.dropped if a == 0 else 0,
        gap,
        raw.repeated[
            (raw.repeated > raw.rows[a]) & (raw.repeated < (raw.rows[b] if b < raw.rows.size else np.inf))
        ],
        raw.lines,
    )


def skipped_steps(t: np.ndarray) -> np.ndarray:
    """(n − 1,) int: how many samples each step skipped (k − 1 for a step of k ± SKIP_TOL median periods,
    2 ≤ k ≤ GAP_PERIODS); longer steps are gaps, reported as such."""
    if t.size < 2:
        return np.zeros(0, np.int64)
    dt = np.diff(t)
    periods = dt / float(np.median(dt))
    k = np.rint(periods)
    skip = (k >= 2) & (periods <= GAP_PERIODS) & (np.abs(periods - k) <= SKIP_TOL)
    return np.where(skip, k - 1, 0).astype(np.int64)


def jitter(t: np.ndarray) -> tuple[float, float, float]:
    """(median step, standard deviation of the steps, largest deviation from the median) in s; steps that
    skipped whole samples are left out (they are counted as skipped samples, not as jitter)."""
    if t.size < 2:
        return 0.0, 0.0, 0.0
    dt = np.diff(t)
    med = float(np.median(dt))
    dt = dt[skipped_steps(t) == 0]
    return med, float(np.std(dt)), float(np.max(np.abs(dt - med)))


def resample(raw: RawSegment) -> tuple[np.ndarray, dict[str, np.ndarray], dict]:
    """Uniform-grid copy of a jittered segment or one with skipped samples (linear interpolation at the median
    rate), and its facts for the timing record: whether the stamps were uneven, and a gap the grid bridged
    inside a declared segment. The quality report states them once per kind over all segments
    (quality.stamp_warnings), so a log of many files or segments gets one warning, not one per segment."""
    t = raw.t
    med, _, dev = jitter(t)
    skipped = skipped_steps(t)
    uneven = bool(dev > JITTER_TOL * med)
    facts: dict = {"uneven": uneven}
    if not uneven and not skipped.any():
        return t, raw.data, facts
    n = int(math.floor((t[-1] - t[0]) / med + 1e-9)) + 1
    grid = t[0] + med * np.arange(n, dtype=np.float64)
    data = {}
    for ch in list(raw.data):
        v = raw.data[ch]
        out = np.empty((n, v.shape[1]))
        for j in range(v.shape[1]):
            out[:, j] = np.interp(grid, t, v[:, j])
        data[ch] = out
    dt = np.diff(t)
    big = np.flatnonzero(dt > GAP_PERIODS * med)
    if uneven and not raw.split_by_gap and big.size:
        k = int(big[0])
        facts.update(bridged_gap_s=float(dt[k]), bridged_at=raw.place(raw.rows[k + 1]))
    return grid, data, facts


def resampling_meta(timing: dict[str, dict]) -> dict | None:
    """The recording's `resampling` record from its segments' timing: the method, one rate (that of the
    resampled segments' median period, each segment on its own grid) with their range, and which segments."""
    done = {name: tm for name, tm in timing.items() if tm.get("resampled")}
    rates = [float(tm["source_rate_hz"]) for tm in done.values() if tm.get("source_rate_hz")]
    if not rates:
        return None
    return {
        "method": RESAMPLE_METHOD,
        "rate_hz": median_rate(rates),
        "rate_range_hz": [min(rates), max(rates)],
        "segments": list(done),
    }


# --------------------------------------------------------------------------------------------- assembly


def assemble(
    joints: list[str],
    raws: list[RawSegment],
    side: dict,
    filename: str,
    warnings: list[str],
    *,
    drop_short: bool = False,
    joint_defaults: dict[str, dict] | None = None,
    noun: str = "log",
) -> Recording:
    """Apply the sidecar, split, check, convert units, resample and derive channels; build the Recording.

    `drop_short`: drop segments under MIN_SAMPLES with a warning instead of failing (readers whose
    segments come from gaps or torque-off stretches, not from the user). `joint_defaults`: per-joint
    fields the file itself gave (the sidecar's win). `noun`: what messages call the file ("table", "log").
    """
    check_names(joints, [], filename)  # before any work: a name reaches generated files
    segs = _split_segments(raws, filename, warnings, drop_short)
    check_names([], [s.name for s in segs], filename)
    infos = _joint_infos(joints, side, filename, warnings, joint_defaults, noun)
    side_segs = side.get("segments", {})
    _check_segment_sidecar(side_segs, segs, joints, filename, warnings, noun)
    _check_lengths(segs, filename)

    unit = side.get("angle_unit", "rad")
    revolute = np.array([j.joint_type == "revolute" for j in infos])
    scale = np.where(revolute, math.pi / 180.0, 1.0) if unit == "deg" else None
    present = segs[0].present
    out: list[Segment] = []
    timing: dict[str, dict] = {}
    while segs:
        s = segs.pop(0)  # let the raw arrays go as soon as their segment is built
        out.append(_build_segment(s, len(joints), timing, scale, present, side_segs.get(s.name, {})))
        del s

    velocity_source = _channel_warnings(joints, present, side, warnings, noun)
    if unit == "rad" and "angle_unit" not in side:  # a declared rad is taken at its word: the joint turns
        _degree_warnings(infos, out, warnings)
    extras = {k: v for k, v in side.items() if k not in SIDECAR_KEYS}
    declared = "angle_unit" in side
    meta = {"source_file": filename, "angle_unit": unit, "angle_unit_declared": declared, **extras}
    meta["timing"] = timing
    resampling = resampling_meta(timing)
    if resampling:
        meta["resampling"] = resampling
    return Recording(
        joints=infos,
        segments=out,
        velocity_source=velocity_source,
        warnings=warnings,
        metadata=meta,
    )


def _split_segments(
    raws: list[RawSegment], filename: str, warnings: list[str], drop_short: bool
) -> list[RawSegment]:
    """The raw segments split at gaps (pieces of one run keep its name as `recording`), short ones dropped
    with a warning when `drop_short`; two segments of one name are an error."""
    segs: list[RawSegment] = []
    for raw in raws:
        pieces = split_gaps(raw) if raw.split_by_gap else [raw]
        for p in pieces if len(pieces) > 1 else []:  # one run's pieces: a fit's split keeps them together
            p.metadata = {"recording": raw.name or filename, **p.metadata}
        segs.extend(pieces)
    if drop_short:
        short = [s for s in segs if s.t.size < MIN_SAMPLES]
        for s in short:
            warnings.append(
                f"{where(filename, s.name)} ({cite(s.unit, s.place(s.rows[0]), s.place(s.rows[-1]))}): only "
                f"{s.t.size} samples (fewer than {MIN_SAMPLES}); dropped"
            )
        segs = [s for s in segs if s.t.size >= MIN_SAMPLES]
        if not segs:
            raise DatasetError(
                f"{filename}: no stretch of at least {MIN_SAMPLES} samples without a gap "
                f"(a gap is a time step > {GAP_PERIODS:g} sample periods); record a longer log"
            )
    seg_names = [s.name for s in segs]
    if len(set(seg_names)) != len(seg_names):
        dup = next(n for n in seg_names if seg_names.count(n) > 1)
        raise DatasetError(f"{filename}: two segments are named {dup!r}; give each segment its own name")
    return segs


def _joint_infos(
    joints: list[str],
    side: dict,
    filename: str,
    warnings: list[str],
    joint_defaults: dict[str, dict] | None,
    noun: str,
) -> list[JointInfo]:
    """Each joint's JointInfo from the file's own fields and the sidecar's `joints` (the sidecar wins)."""
    joint_fields = {"type": "revolute or prismatic", **LOAD_FIELDS}
    infos = []
    side_joints = side.get("joints", {})
    for name in side_joints:
        if name not in joints:
            raise DatasetError(
                f"sidecar for {filename}: joint {name!r} is not in the {noun}; the {noun}'s joints are "
                f"{joints} — fix the name or remove the entry"
            )
    for name in joints:
        d = {**(joint_defaults or {}).get(name, {}), **side_joints.get(name, {})}
        if "joint_type" in d:
            d["type"] = d.pop("joint_type")
        infos.append(
            JointInfo(name=name, **check_load_fields(d, f"sidecar joints.{name}", warnings, joint_fields))
        )
    return infos


def _check_segment_sidecar(
    side_segs: dict, segs: list[RawSegment], joints: list[str], filename: str, warnings: list[str], noun: str
) -> None:
    """The sidecar's `segments` must name existing segments, and their per-joint loads existing joints."""
    seg_names = [s.name for s in segs]
    for name, meta in side_segs.items():
        if name not in seg_names:
            how = "split at time gaps" if segs and segs[0].split_by_gap else "from the 'segment' column"
            raise DatasetError(
                f"sidecar for {filename}: segment {name!r} does not exist; the {noun}'s segments ({how}) are "
                f"{seg_names} — fix the key or remove it"
            )
        over = meta.get("joints", {})
        if not isinstance(over, dict):
            raise DatasetError(f"sidecar segments.{name}.joints must be an object keyed by joint name")
        for jn, jd in over.items():
            if jn not in joints:
                raise DatasetError(
                    f"sidecar for {filename}: segments.{name}.joints names joint {jn!r}, which is not in the "
                    f"{noun}; the {noun}'s joints are {joints}"
                )
            if not isinstance(jd, dict):
                raise DatasetError(f"sidecar segments.{name}.joints.{jn} must be an object of load fields")
            check_load_fields(jd, f"sidecar segments.{name}.joints.{jn}", warnings, LOAD_FIELDS)


def _check_lengths(segs: list[RawSegment], filename: str) -> None:
    """Every segment needs MIN_SAMPLES samples; the error names its rows and how to fix it."""
    for s in segs:
        if s.t.size < MIN_SAMPLES:
            why = " (segments are split at time gaps > 5 sample periods)" if s.split_by_gap else ""
            raise DatasetError(
                f"{where(filename, s.name)} ({cite(s.unit, s.place(s.rows[0]), s.place(s.rows[-1]))}): only "
                f"{s.t.size} samples{why}; a segment needs at least {MIN_SAMPLES} — drop these {s.unit}s or "
                "join them to a neighbouring segment"
            )


def _build_segment(
    s: RawSegment,
    J: int,
    timing: dict[str, dict],
    scale: np.ndarray | None,
    present: dict[str, list[bool]],
    side_meta: dict,
) -> Segment:
    """One canonical Segment: resampled when jittered (its timing facts recorded), angles in rad, a missing
    qd differentiated, the sidecar's segment metadata over the reader's."""
    med, std, dev = jitter(s.t)
    t, data, facts = resample(s)
    skipped = skipped_steps(s.t)
    timing[s.name] = {
        "source_samples": int(s.t.size),
        "source_rate_hz": 1.0 / med if med > 0 else 0.0,
        "jitter_ms": 1e3 * std,
        "max_step_deviation_ms": 1e3 * dev,
        "resampled": t is not s.t,
        "samples_dropped": int(s.dropped),
        "gap_before_s": float(s.gap_before),
        "skipped_samples": int(skipped.sum()),
        "repeated_stamps": int(s.repeated.size),
        "unit": s.unit,
        **facts,
    }
    if skipped.any():  # the first sample after a skip, as the file counts it
        timing[s.name]["first_skip"] = s.place(s.rows[int(np.flatnonzero(skipped)[0]) + 1])
    if s.repeated.size:
        timing[s.name]["first_repeat"] = s.place(s.repeated[0])
    if scale is not None:
        data = {ch: v * scale if ch in ANGLE_CHANNELS else v for ch, v in data.items()}
    missing_qd = [j for j in range(J) if not present["qd"][j]]
    qd = data.get("qd")
    if missing_qd:
        qd = np.zeros((t.size, J)) if qd is None else qd.copy()
        qd[:, missing_qd] = np.gradient(data["q"][:, missing_qd], t, axis=0, edge_order=2)
    tau = data["tau"] if all(present["tau"]) else None
    meta = {**copy.deepcopy(s.metadata), **copy.deepcopy(side_meta)}
    return Segment(
        name=s.name,
        t=np.ascontiguousarray(t, dtype=np.float64),
        q=np.ascontiguousarray(data["q"], dtype=np.float64),
        qd=np.ascontiguousarray(qd, dtype=np.float64),
        q_des=np.ascontiguousarray(data["q_des"], dtype=np.float64),
        qd_des=np.ascontiguousarray(data["qd_des"], dtype=np.float64)
        if "qd_des" in data
        else np.zeros((t.size, J)),
        tau_ff=np.ascontiguousarray(data["tau_ff"], dtype=np.float64)
        if "tau_ff" in data
        else np.zeros((t.size, J)),
        tau=None if tau is None else np.ascontiguousarray(tau, dtype=np.float64),
        metadata=meta,
        # a reader's per-sample torque enable (1 = driven); resampling interpolates it, so ≥ 0.5 is on
        enable=np.ascontiguousarray(data["enable"] >= 0.5) if "enable" in data else None,
    )


def _channel_warnings(
    joints: list[str], present: dict[str, list[bool]], side: dict, warnings: list[str], noun: str
) -> str:
    """The velocity provenance (measured, differentiated, or both by joint) and the warnings for a derived
    qd and for torque given for only some joints."""
    J = len(joints)
    measured = [joints[j] for j in range(J) if present["qd"][j]]
    derived = [joints[j] for j in range(J) if not present["qd"][j]]
    measured_src = side.get("velocity_source", "measured")
    if not derived:
        velocity_source = measured_src
    elif not measured:
        velocity_source = VELOCITY_METHOD
    else:
        velocity_source = f"{measured_src} for {measured}; {VELOCITY_METHOD} for {derived}"
    if derived:
        warnings.append(
            f"the {noun} has no qd for {derived}; velocities were computed from q by second-order central "
            "differences (numpy.gradient) on each segment's uniform time grid — noise in q is amplified in qd"
        )
    if any(present["tau"]) and not all(present["tau"]):
        have = [joints[j] for j in range(J) if present["tau"][j]]
        lack = [joints[j] for j in range(J) if not present["tau"][j]]
        warnings.append(
            f"tau is given for {have} but not for {lack}; measured effort was dropped for all joints — add "
            "<joint>/tau columns for every joint to use it"
        )
    return velocity_source


def _degree_warnings(infos: list[JointInfo], out: list[Segment], warnings: list[str]) -> None:
    """A revolute joint declared in rad whose positions span over DEGREES_RANGE is probably in degrees."""
    for j, info in enumerate(infos):
        if info.joint_type != "revolute":
            continue
        lo = min(float(s.q[:, j].min()) for s in out)
        hi = max(float(s.q[:, j].max()) for s in out)
        if hi - lo > DEGREES_RANGE:
            warnings.append(
                f"joint '{info.name}': positions span {hi - lo:.4g} rad "
                f"(over {DEGREES_RANGE / (2 * math.pi):.0f} turns); positions look like degrees; "
                'declare "angle_unit": "deg" in the sidecar'
            )
