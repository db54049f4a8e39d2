"""Data-quality report of a Recording: is this log good enough to identify an actuator, and if not, why.

Plain numbers (rate, jitter, gaps, dropped samples, time at the effort / velocity limits, velocity and
frequency coverage of the excitation, free-swing segments) and plain-language warnings that say what a
weakness costs and how to fix it. Timing facts come from the readers (``Recording.metadata["timing"]``);
limits from the sidecar's optional ``"limits": {"<joint>": {"effort": N·m, "velocity": rad/s}}`` or, when
the data shows a plateau, estimated from it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .errors import cite

if TYPE_CHECKING:  # annotations only: Recording.quality() imports this module, so no runtime edge back
    from .recording import Recording, Segment

DEGREES_RANGE = 2 * math.pi * 4
"""A revolute position range wider than this in "rad" almost certainly means the log is in degrees."""

LIMIT_BAND = 0.98
"""A sample is "at the limit" when |value| ≥ this fraction of the limit."""
PLATEAU_FRACTION = 0.02
"""Without a stated limit, a plateau (this fraction of samples within LIMIT_BAND of the maximum) is one."""
BAND_DB = 20.0
"""The excited band: frequencies where the command's power is within this many dB of its peak."""
MIN_RATE_HZ = 100.0
MIN_DURATION_S = 5.0
STILL_FRACTION = 0.5


PLAN = (
    "this looks like a plan, not a recording"  # the commands-only warning's start (the dataset page's flag)
)


def torque_driven(s: Segment) -> bool:
    """Whether a segment is driven by effort, not by its position command: a feed-forward effort (tau_ff) or
    zero stiffness (kp 0, one value or every joint's). Such a log often writes q_des = q."""
    if s.tau_ff is not None and np.any(s.tau_ff):
        return True
    kp = s.metadata.get("kp")
    values = list(kp.values()) if isinstance(kp, dict) else [kp]
    return kp is not None and all(isinstance(v, int | float) and v == 0 for v in values)


def commands_only(rec: Recording) -> bool:
    """True when every logged position equals its command (q ≡ q_des): a trajectory plan, not a recording. A
    torque-driven log (torque_driven) is never called a plan: its q_des is no command."""
    segs = [s for s in rec.segments if s.q_des is not None]
    if not segs or any(torque_driven(s) for s in segs):
        return False
    span = max(float(np.ptp(s.q_des)) for s in segs) or 1.0
    return all(np.allclose(s.q, s.q_des, rtol=0.0, atol=1e-9 * span) for s in segs)


FRAME = "rests away from hanging with its torque off"  # the wrong-frame warning's key phrase
REST_RAD = 0.35  # a torque-off rest this far from q = 0 (about 20°) points at another zero than hanging down
REST_QD = 0.05  # rad/s: slower than this with the torque off counts as at rest


def frame_warnings(rec: Recording) -> list[str]:
    """Per pendulum joint whose torque-off stretches swing and then rest far from q = 0: the bench plant hangs
    at q = 0, so the log's zero is likely elsewhere (a fit then bends its gains to make up the gravity)."""
    out = []
    for j, info in enumerate(rec.joints):
        if info.joint_type != "revolute" or info.gravity_coeff <= 0:
            continue
        rest, swung = [], False
        for s in rec.segments:
            free = ~s.driven(j)
            if free.sum() < 20:
                continue
            q, qd = s.q[free, j], s.qd[free, j]
            swung = swung or float(np.ptp(q)) > 0.2
            rest += list(q[np.abs(qd) < REST_QD])
        if not swung or len(rest) < 20:
            continue
        at = float(np.median(rest))
        wrapped = math.remainder(at, 2 * math.pi)
        if abs(wrapped) > REST_RAD:
            out.append(
                f"joint '{info.name}' {FRAME} (median rest q = {wrapped:.3g} rad), while the bench plant hangs "
                f'at q = 0: if the log\'s q = 0 is not hanging down, give the sidecar "zero_angle": '
                f'{{"{info.name}": {-wrapped:.3g}}} (a fit in the wrong frame bends its gains to make up gravity)'
            )
    return out


def _free_swing(s: Segment) -> bool:
    """Whether the segment swings freely anywhere: marked free_swing, or a torque-off stretch (BAM) inside it."""
    return bool(s.metadata.get("free_swing")) or (s.enable is not None and not bool(s.enable.all()))


def _driven_fraction(s: Segment) -> float:
    """Fraction of samples with the actuator on (every joint's enable)."""
    if s.metadata.get("free_swing"):
        return 0.0
    return 1.0 if s.enable is None else float(np.mean(s.enable.all(axis=1)))


def _band(x: np.ndarray, fs: float) -> tuple[float, float] | None:
    """(lowest, highest) frequency where the detrended command's power is within BAND_DB of its peak."""
    from scipy.signal import welch

    n = x.size
    if n < 16 or fs <= 0 or float(np.ptp(x)) < 1e-9:
        return None
    f, p = welch(x - x.mean(), fs=fs, nperseg=min(n, int(8 * fs)), detrend="linear")
    f, p = f[1:], p[1:]
    if p.size == 0 or p.max() <= 0:
        return None
    on = np.flatnonzero(p >= p.max() * 10 ** (-BAND_DB / 10))
    return float(f[on[0]]), float(f[on[-1]])


def _limit(values: list[np.ndarray], stated: float | None) -> dict | None:
    """Fraction of time at a stated limit, or at an estimated one when the data plateaus."""
    if not values:
        return None
    a = np.abs(np.concatenate(values))
    peak = float(a.max()) if a.size else 0.0
    if peak <= 0:
        return {
            "max_abs": 0.0,
            "limit": stated,
            "limit_source": "sidecar" if stated else None,
            "fraction_at_limit": 0.0,
        }
    if stated:
        frac = float(np.mean(a >= LIMIT_BAND * stated))
        return {"max_abs": peak, "limit": stated, "limit_source": "sidecar", "fraction_at_limit": frac}
    frac = float(np.mean(a >= LIMIT_BAND * peak))
    if frac >= PLATEAU_FRACTION:
        return {
            "max_abs": peak,
            "limit": peak,
            "limit_source": "estimated (plateau at the largest value)",
            "fraction_at_limit": frac,
        }
    return {"max_abs": peak, "limit": None, "limit_source": None, "fraction_at_limit": 0.0}


def _segment_rows(rec: Recording) -> list[dict]:
    """One row per segment: length, rate and the readers' timing facts (jitter, resampling, drops, gap before)."""
    timing = rec.metadata.get("timing", {})
    segs = []
    for s in rec.segments:
        tm = timing.get(s.name, {})
        segs.append(
            {
                "name": s.name,
                "samples": s.n,
                "duration_s": s.duration,
                "rate_hz": 1.0 / s.dt if s.dt > 0 else 0.0,
                "source_rate_hz": tm.get("source_rate_hz"),
                "jitter_ms": tm.get("jitter_ms"),
                "resampled": tm.get("resampled", False),
                "samples_dropped": tm.get("samples_dropped", 0),
                "gap_before_s": tm.get("gap_before_s", 0.0),
                "free_swing": _free_swing(s),
                "driven_fraction": _driven_fraction(s),
            }
        )
    return segs


def _joint_coverage(rec: Recording, j: int, lim: dict, driven: list[Segment]) -> dict:
    """One joint's numbers: position range, velocity coverage, excited band, time at the effort / velocity limits."""
    q = [s.q[:, j] for s in rec.segments]
    qd = [s.qd[:, j] for s in rec.segments]
    lo, hi = min(float(x.min()) for x in q), max(float(x.max()) for x in q)
    aqd = np.abs(np.concatenate(qd))
    qd_max = float(aqd.max()) if aqd.size else 0.0
    still = float(np.mean(aqd < 0.05 * qd_max)) if qd_max > 0 else 1.0
    bands = [b for s in driven if (b := _band(s.q_des[:, j], 1.0 / s.dt if s.dt > 0 else 0.0))]
    band = [min(b[0] for b in bands), max(b[1] for b in bands)] if bands else None
    taus = [s.tau[:, j] for s in rec.segments if s.tau is not None]
    return {
        "q_range": [lo, hi],
        "velocity": {
            "max_abs": qd_max,
            "p95_abs": float(np.percentile(aqd, 95)) if aqd.size else 0.0,
            "fraction_near_zero": still,
        },
        "excitation_band_hz": band,
        "effort": _limit(taus, lim.get("effort")),
        "velocity_limit": _limit(qd, lim.get("velocity")),
    }


def _joint_warnings(name: str, revolute_rad: bool, rep: dict, driven: bool) -> list[str]:
    """What a joint's coverage costs the fit: degrees logged as rad, no or narrow excitation, stillness, saturation."""
    out = []
    lo, hi = rep["q_range"]
    band, still = rep["excitation_band_hz"], rep["velocity"]["fraction_near_zero"]
    if revolute_rad and hi - lo > DEGREES_RANGE:
        out.append(
            f"{name}: positions look like degrees (they span {hi - lo:.4g} rad); declare "
            '"angle_unit": "deg" in the sidecar'
        )
    if band is None and driven:
        out.append(
            f"{name}: the command never moves in the driven segments; nothing excites the "
            "actuator — record a chirp or multisine (actuator-sysid excite)"
        )
    elif band is not None and band[1] < 4 * band[0]:
        out.append(
            f"{name}: the excitation covers only {band[0]:.3g}–{band[1]:.3g} Hz; inertia, damping "
            "and stiffness are hard to separate in a narrow band — use a chirp or multisine "
            "spanning a decade"
        )
    if still > STILL_FRACTION:
        out.append(
            f"{name}: the joint is nearly still {100 * still:.0f} % of the time; velocity-dependent "
            "friction is identified from motion only"
        )
    for label, lim, unit_s in (
        ("effort", rep["effort"], "N·m"),
        ("velocity", rep["velocity_limit"], "rad/s"),
    ):
        if lim and lim["limit"] and lim["fraction_at_limit"] > 0.2:
            out.append(
                f"{name}: {label} is at its limit ({lim['limit']:.4g} {unit_s}, "
                f"{lim['limit_source']}) {100 * lim['fraction_at_limit']:.0f} % of the time; the "
                "actuator is saturated there, which hides the gains — lower the amplitude"
            )
    return out


def _recording_warnings(rec: Recording, free: list[str], gaps: list[float], dropped: int) -> list[str]:
    """Whole-log weaknesses: a plan, the wrong frame, no free swing, low rate, short, gaps, dropped samples."""
    out = []
    if commands_only(rec):
        out.append(
            f"{PLAN}: every logged position q equals its command q_des, so nothing here shows how the "
            "actuator moved and a fit of it identifies nothing; upload the measured positions (and "
            "velocities, efforts) instead"
        )
    out += frame_warnings(rec)
    if not free:
        out.append(
            "no free-swing segment: friction and armature will be poorly separated (record one with "
            'the torque off, e.g. BAM lift_and_drop, and mark it "free_swing": true)'
        )
    rate = rec.rate_hz
    if 0 < rate < MIN_RATE_HZ:
        out.append(
            f"the sample rate is {rate:.4g} Hz; below {MIN_RATE_HZ:.0f} Hz, armature and fast friction "
            "effects are poorly observed"
        )
    if rec.duration_s < MIN_DURATION_S:
        out.append(
            f"only {rec.duration_s:.3g} s of data; record at least {MIN_DURATION_S:.0f} s of excitation"
        )
    if gaps:
        out.append(
            f"{len(gaps)} time gap(s) split the log into separate segments (longest {max(gaps):.3g} s)"
        )
    if dropped:
        out.append(
            f"{dropped} sample(s) were dropped while reading (missing values, empty arrays or times "
            "without a command)"
        )
    return out  # uneven stamps and resampling: stamp_warnings, once for every segment


FROZEN_S = 0.5
"""A channel exactly constant for this long (or FROZEN_FRACTION of its segment, whichever is shorter) ..."""
FROZEN_FRACTION = 0.1
FROZEN_MIN_SAMPLES = 10
"""... and at least this many samples, while a channel that tracks it moves, is frozen."""
WITNESS_MOVE = 0.2
"""A witness moves in a stretch when its range there is at least this fraction of its segment's range."""
WITNESSES = {
    "q": ("qd", "q_des"),
    "qd": ("q",),
    "tau": ("q", "qd"),
    "q_des": ("qd_des",),
    "qd_des": ("q_des",),
}
"""Per channel, the channels of the same joint whose motion shows it should have moved too. Commands are
judged only by each other: a held setpoint while the joint settles (a step test) is normal."""


def _runs(x: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """[start, stop) of the stretches of at least `min_len` samples where x stays exactly constant."""
    bounds = np.concatenate([[0], np.flatnonzero(x[1:] != x[:-1]) + 1, [x.size]])
    long = np.flatnonzero(np.diff(bounds) >= min_len)
    return [(int(bounds[k]), int(bounds[k + 1])) for k in long]


def _effort_held(s: Segment, j: int, a: int, b: int) -> bool:
    """Whether measured effort may stay still over [a, b): at its extreme (saturation, the limit check's), with
    the torque off, or following a feed-forward step that holds still too (a torque-driven log)."""
    tau, ff = s.tau[:, j] if s.tau is not None else None, s.tau_ff[:, j]
    if tau is None or not s.driven(j)[a:b].all():
        return True
    saturated = abs(float(tau[a])) >= LIMIT_BAND * float(np.abs(tau).max())
    return saturated or (float(np.ptp(ff)) > 0 and float(np.ptp(ff[a:b])) == 0)


def _frozen(s: Segment, j: int, ch: str, min_len: int) -> list[tuple[int, int, str]]:
    """(start, stop, witness) of the stretches where channel `ch` of joint j sits still while a witness moves;
    a channel that never moves in the segment, or effort that may hold (`_effort_held`), is not frozen."""
    x = getattr(s, ch)
    if x is None:
        return []
    x = x[:, j]
    runs = _runs(x, min_len)
    if not runs or len(runs) == 1 and runs[0] == (0, x.size):  # never moves in the segment: not frozen
        return []
    driven = s.driven(j)
    out: list[tuple[int, int, str]] = []
    for a, b in runs:
        if ch == "tau" and _effort_held(s, j, a, b):
            continue
        for w in WITNESSES[ch]:
            if w in ("q_des", "qd_des") and not driven[a:b].all():  # a command moves nothing with torque off
                continue
            y = getattr(s, w)[:, j]
            span = float(np.ptp(y))
            if span > 0 and float(np.ptp(y[a:b])) >= WITNESS_MOVE * span:
                out.append((a, b, w))
                break
    return out


def frozen_warnings(rec: Recording) -> list[str]:
    """One warning per joint and channel that sits exactly still for a stretch while a channel that tracks it
    moves (a stream that starts late or stalls): a fit would learn that the actuator ignored its input there."""
    found: dict[tuple[int, str], list[str]] = {}
    for s in rec.segments:
        dt = s.dt
        if s.n < 2 or dt <= 0:
            continue
        min_len = max(FROZEN_MIN_SAMPLES, min(round(FROZEN_S / dt), math.ceil(FROZEN_FRACTION * s.n)))
        t0 = float(s.t[0])
        for j in range(len(rec.joints)):
            for ch in WITNESSES:
                for a, b, w in _frozen(s, j, ch, min_len):
                    start, length = float(s.t[a]) - t0, (b - a) * dt
                    found.setdefault((j, ch), []).append(
                        f"segment {s.name} {start:.3g}–{start + length:.3g} s ({length:.3g} s, while {w} moves)"
                    )
    out = []
    for j, info in enumerate(rec.joints):
        for ch in WITNESSES:
            where = found.get((j, ch), [])
            if where:
                more = f"; and {len(where) - 3} more" if len(where) > 3 else ""
                out.append(
                    f"joint '{info.name}': {ch} is frozen (exactly constant) in {'; '.join(where[:3])}{more}; "
                    "a stalled or late stream — trim those samples or fix the logger"
                )
    return out


def _rate_text(rates: list[float]) -> str:
    """One rate for several segments: that of their median period (as `Recording.rate_hz` takes it, so it is
    the dataset's rate when every segment is concerned), with the range when the segments' rates differ."""
    med, lo, hi = median_rate(rates), min(rates), max(rates)
    if f"{lo:.4g}" == f"{hi:.4g}":
        return f"{med:.6g} Hz"
    return f"{med:.6g} Hz (median; {lo:.4g}–{hi:.4g} Hz across the segments)"


def median_rate(rates: list[float]) -> float:
    """The rate of the median sample period of several segments' rates [Hz] (0 for none)."""
    periods = [1.0 / r for r in rates if r > 0]
    return float(1.0 / np.median(periods)) if periods else 0.0


def _rate(s: Segment, tm: dict) -> float:
    """A segment's rate as logged (its timing record), else as it is now."""
    return float(tm.get("source_rate_hz") or (1.0 / s.dt if s.dt > 0 else 0.0))


def _some(items: list[str], shown: int = 3) -> str:
    """The first few of a list, and how many more."""
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def stamp_warnings(rec: Recording) -> list[str]:
    """One warning per kind of time-stamp trouble over all segments (and files): uneven stamps (resampled),
    gaps bridged inside a declared segment, skipped samples, repeated stamps. The readers found them in the
    stamps as logged (before resampling hides them); each warning gives its count, the segments it concerns
    (a few named) and one rate, so a log of many files reads as one dataset, not a screen of near-copies."""
    timing = rec.metadata.get("timing", {})
    segs = [(s, timing.get(s.name, {})) for s in rec.segments]
    out = []
    uneven = [
        (s, tm) for s, tm in segs if tm.get("uneven", tm.get("resampled") and not tm.get("skipped_samples"))
    ]
    if uneven:
        worst = max(
            tm.get("max_step_deviation_ms", 0.0) * tm.get("source_rate_hz", 0.0) / 10 for _, tm in uneven
        )
        before = sum(int(tm.get("source_samples", s.n)) for s, tm in uneven)
        out.append(
            f"time stamps are not uniform in {len(uneven)} of {len(segs)} segment(s) "
            f"({_some([s.name for s, _ in uneven])}): steps stray up to {worst:.0f} % from their segment's "
            "median step; resampled by linear interpolation onto a uniform grid at each segment's median rate: "
            f"{_rate_text([_rate(s, tm) for s, tm in uneven])} "
            f"({before} -> {sum(s.n for s, _ in uneven)} samples)"
        )
    bridged = [(s, tm) for s, tm in segs if tm.get("bridged_gap_s")]
    if bridged:
        places = [
            f"segment {s.name} ({tm['bridged_gap_s']:.4g} s at {cite(tm.get('unit', 'row'), tm['bridged_at'])})"
            for s, tm in bridged
        ]
        out.append(
            f"time stamps: resampling bridged a gap in {len(bridged)} declared segment(s) ({_some(places)}); "
            "give the rows after a gap another segment id if the data is not continuous there"
        )
    for key, first, text in (
        (
            "skipped_samples",
            "first_skip",
            "skipped sample(s) (steps of 2 or more periods at {rate}) in {where}; the missing samples "
            "were filled by linear interpolation",
        ),
        (
            "repeated_stamps",
            "first_repeat",
            "repeated time stamp(s) (a sample logged twice, at {rate}) in {where}; the copies were dropped",
        ),
    ):
        hit = [(s, tm) for s, tm in segs if tm.get(key)]
        if not hit:
            continue
        count = sum(int(tm[key]) for _, tm in hit)
        where = _some(
            [
                f"segment {s.name} ({tm[key]}, first at {cite(tm.get('unit', 'row'), tm[first])})"
                for s, tm in hit
            ]
        )
        rate = _rate_text([_rate(s, tm) for s, tm in hit])
        out.append(f"time stamps: {count} " + text.format(rate=rate, where=where))
    return out


LAG_MAX = 3
"""The largest lag of the effort label looked for, in samples."""
LAG_FIT = 0.2
"""The shifted inputs must explain at least this fraction of the effort's sample-to-sample changes (sensor
noise dominates the changes of a real log, so this is low) ..."""
LAG_GAIN = 0.5
"""... and the shift must halve what is left unexplained (a clean log) or double what is explained (a noisy
one); a real actuator's sub-sample lag does neither."""
LAG_MIN_SAMPLES = 100
LAG_MAX_SAMPLES = 200_000
"""The regression reads at most this many samples per joint (the first ones): a lag shows long before."""


def _lag_fits(rec: Recording, j: int) -> np.ndarray | None:
    """R² of joint j's effort changes Δtau[k] regressed on the changes of its inputs (position error, velocity,
    velocity command, feed-forward) at k − L, for L = 0..LAG_MAX; driven segments with effort only. Changes,
    not levels: a one-sample shift of a smooth signal barely moves its level, but it moves its changes."""
    gram = np.zeros((LAG_MAX + 1, 4, 4))
    cross = np.zeros((LAG_MAX + 1, 4))
    sst, rows, room = 0.0, 0, LAG_MAX_SAMPLES
    for s in rec.segments:
        if s.tau is None or s.n < 4 * LAG_MAX or room < 4 * LAG_MAX or not s.driven(j).all():
            continue
        n = min(s.n, room)
        room -= n
        x = np.diff(
            np.stack([s.q_des[:n, j] - s.q[:n, j], s.qd[:n, j], s.qd_des[:n, j], s.tau_ff[:n, j]], 1), axis=0
        )
        y = np.diff(s.tau[:n, j])[LAG_MAX:]
        sst += float(y @ y)
        rows += y.size
        for lag in range(LAG_MAX + 1):
            xl = x[LAG_MAX - lag : x.shape[0] - lag]
            gram[lag] += xl.T @ xl
            cross[lag] += xl.T @ y
    if rows < LAG_MIN_SAMPLES or sst <= 0:
        return None
    r2 = np.zeros(LAG_MAX + 1)
    for lag in range(LAG_MAX + 1):  # least squares from the normal equations: explained = cross · coef
        coef = np.linalg.lstsq(gram[lag], cross[lag], rcond=1e-12)[0]
        r2[lag] = float(cross[lag] @ coef) / sst
    return r2


def lag_warnings(rec: Recording) -> list[str]:
    """Per joint whose measured effort is explained much better by its inputs some samples earlier than by
    those of its own sample: the label lags (logged late, or a real actuator delay the fit will have to take)."""
    out = []
    period_ms = 1e3 / rec.rate_hz if rec.rate_hz > 0 else 0.0
    for j, info in enumerate(rec.joints):
        r2 = _lag_fits(rec, j)
        if r2 is None:
            continue
        lag = int(np.argmax(r2))
        clear = 1.0 - r2[lag] <= LAG_GAIN * (1.0 - r2[0]) or r2[0] <= LAG_GAIN * r2[lag]
        if lag == 0 or r2[lag] < LAG_FIT or not clear:
            continue
        out.append(
            f"joint '{info.name}': tau lags its inputs by {lag} sample{'s' if lag > 1 else ''} "
            f"({lag * period_ms:.3g} ms): the commands and state {lag} sample(s) earlier explain its changes "
            f"(R² {r2[lag]:.2f} against {r2[0]:.2f} unshifted); if the logger writes tau late, shift it back "
            "— otherwise a fit takes the lag for actuator delay"
        )
    return out


def quality_report(rec: Recording) -> dict:
    """The report as a plain dict (JSON-ready); see the module docstring."""
    limits = rec.metadata.get("limits", {}) if isinstance(rec.metadata.get("limits"), dict) else {}
    segs = _segment_rows(rec)
    gaps = [x["gap_before_s"] for x in segs if x["gap_before_s"] > 0]
    dropped = int(sum(x["samples_dropped"] for x in segs))
    free = [s.name for s in rec.segments if _free_swing(s)]
    driven = [s for s in rec.segments if _driven_fraction(s) > 0]
    unit = rec.metadata.get("angle_unit", "rad")
    declared = bool(rec.metadata.get("angle_unit_declared", False))
    warnings: list[str] = []
    joints: dict[str, dict] = {}
    for j, info in enumerate(rec.joints):
        lim = limits.get(info.name, {}) if isinstance(limits.get(info.name), dict) else {}
        joints[info.name] = _joint_coverage(rec, j, lim, driven)
        # a declared rad is taken at its word: a joint may turn many times
        revolute_rad = info.joint_type == "revolute" and unit == "rad" and not declared
        warnings += _joint_warnings(f"joint '{info.name}'", revolute_rad, joints[info.name], bool(driven))
    warnings += _recording_warnings(rec, free, gaps, dropped)
    warnings += stamp_warnings(rec) + frozen_warnings(rec) + lag_warnings(rec)
    return {
        "rate_hz": rec.rate_hz,
        "duration_s": rec.duration_s,
        "segments": segs,
        "gaps": {"count": len(gaps), "longest_s": max(gaps) if gaps else 0.0},
        "samples_dropped": dropped,
        "resampling": rec.metadata.get("resampling"),
        "free_swing_segments": free,
        "has_effort": all(s.tau is not None for s in rec.segments),
        "joints": joints,
        "warnings": warnings,
    }
