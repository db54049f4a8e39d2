"""Excitation design: command trajectories that make a test-bench log identifiable, within the user's bounds.

Kinds: ``chirp`` (logarithmic sweep, amplitude shaped so velocity and torque stay bounded at every
frequency), ``multisine`` (harmonics over a band with Schroeder phases for a low crest factor), ``steps``
and ``prbs`` (random levels / a maximum-length binary sequence, with cosine transitions no faster than the
bounds allow), and BAM's test-bench set: ``sin_time_square`` (sin t²), ``lift_and_drop`` (raise, then
torque off: a free-swing segment), ``up_and_down``, or ``bam`` for all three.

Bounds: every command stays within [q_min, q_max], |qd| ≤ qd_max and, when ``tau_max`` and the load are
given, the rigid-body torque the load needs to follow it, J·q̈ + m·g·l·sin q (pendulum hanging at q = 0,
J = inertia + m·l²), stays within tau_max. The result is a canonical Recording (and its CSV + sidecar),
with q equal to the planned command: a plan to run on the bench, whose measured q replaces it.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import InitVar, asdict, dataclass, field
from pathlib import Path

import numpy as np

from .names import check_name, quote_name
from .recording import DatasetError, JointInfo, Recording, Segment

KINDS = ("chirp", "multisine", "steps", "prbs", "sin_time_square", "lift_and_drop", "up_and_down", "bam")
FADE_S = 0.5
"""Chirps and multisines fade in and out over this long, so they start and end at rest at the centre."""
MARGIN = 0.98
"""Designs aim at this fraction of each bound, so rounding never crosses it."""
MAX_DURATION_S, MAX_RATE_HZ, MAX_SAMPLES, MAX_RANGE = 3600.0, 10_000.0, 500_000, 100.0
"""Limits on a request, so that any request is answered in seconds."""
MAX_PREDICT_SAMPLES, MAX_PREDICT_WORK, MAX_FAMILIES = 50_000, 200_000, 16
"""Predicted identifiability simulates every family on the whole plan and holds its finite-difference Jacobian
(about 16 KB per sample, a second per 20 000 samples, per family): a prediction covers at most
MAX_PREDICT_SAMPLES samples, and samples × families is at most MAX_PREDICT_WORK."""
LIMITS: dict[str, tuple[float, float, str]] = {
    "qd_max": (0.0, 1e4, "rad/s"),
    "tau_max": (0.0, 1e6, "N·m"),
    "f_min": (0.0, 1e4, "Hz"),
    "f_max": (0.0, 1e4, "Hz"),
    "inertia": (0.0, 1e3, "kg·m²"),
    "mass": (0.0, 1e4, "kg"),
    "com_distance": (0.0, 10.0, "m"),
    "gravity": (-100.0, 100.0, "m/s²"),
    "kp": (0.0, 1e5, "N·m/rad"),
    "kd": (0.0, 1e4, "N·m·s/rad"),
    "noise_q": (0.0, 10.0, "rad"),
    "noise_qd": (0.0, 1e4, "rad/s"),
    "seed": (0, 2**32 - 1, ""),
}
"""(lowest, highest, unit) of each number a request may give besides duration, rate and the position range."""


class ExcitationError(DatasetError):
    """An excitation request that cannot be met; the message says which bound and how to relax it."""


@dataclass
class ExcitationSpec:
    """What to design: the kind, its length and rate, the bounds, and the load it will drive."""

    kind: str = "chirp"
    duration: float = 20.0  # s (per trajectory for the BAM set)
    rate: float = 200.0  # Hz
    q_min: float = -1.0  # rad
    q_max: float = 1.0  # rad
    qd_max: float = 5.0  # rad/s
    tau_max: float | None = None  # N·m; needs the load to mean anything
    f_min: float = 0.1  # Hz, chirp / multisine / prbs band
    f_max: float = 5.0  # Hz
    inertia: float = 0.0  # kg·m², load inertia without the point mass
    mass: float = 0.0  # kg at com_distance
    com_distance: float = 0.0  # m
    gravity: float = 9.81
    joint: str = "joint"
    seed: int = 0
    kp: float | None = None  # gains to record in the sidecar, SI
    kd: float | None = None
    # predicted identifiability (fitting/design.py): families to predict for ([] = none), nominal actuator
    # parameters (registry names, SI; the rest default), and the sensor noise the fit will see
    families: list[str] = field(default_factory=lambda: ["dcmotor", "delayed_pd"])
    nominal: dict[str, float] | None = None
    noise_q: float = 1e-3  # rad
    noise_qd: float | None = None  # rad/s; default σ_q·rate/√2 (central differences of q)
    models: InitVar[list[str] | None] = None  # deprecated alias of `families` (the field's name before 0.3)

    def __post_init__(self, models: list[str] | None) -> None:
        if models is not None:
            warnings.warn(
                "ExcitationSpec(models=...) is deprecated: use families=", DeprecationWarning, stacklevel=3
            )
            self.families = models

    def check(self) -> None:
        if self.kind not in KINDS:
            raise ExcitationError(f"unknown excitation kind {self.kind!r}; use one of {', '.join(KINDS)}")
        for k in ("duration", "rate", "qd_max", "f_min", "f_max"):
            v = getattr(self, k)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ExcitationError(f"{k} must be a positive number, got {v!r}")
        for k in ("q_min", "q_max", "inertia", "mass", "com_distance", "gravity"):
            v = getattr(self, k)
            if not (isinstance(v, int | float) and math.isfinite(v)):
                raise ExcitationError(f"{k} must be a finite number, got {v!r}")
        if min(self.inertia, self.mass, self.com_distance) < 0:
            raise ExcitationError("inertia, mass and com_distance must be ≥ 0")
        if self.q_max <= self.q_min:
            raise ExcitationError(f"q_max ({self.q_max}) must be above q_min ({self.q_min})")
        if self.tau_max is not None and not (math.isfinite(self.tau_max) and self.tau_max > 0):
            raise ExcitationError(f"tau_max must be a positive number of N·m, got {self.tau_max!r}")
        if self.f_max <= self.f_min:
            raise ExcitationError(f"f_max ({self.f_max} Hz) must be above f_min ({self.f_min} Hz)")
        if self.f_max >= self.rate / 4:
            raise ExcitationError(
                f"f_max {self.f_max} Hz is too close to the sample rate {self.rate} Hz; keep it "
                "below a quarter of the rate"
            )
        if self.duration * self.rate < 20:
            raise ExcitationError(f"{self.duration} s at {self.rate} Hz is under 20 samples; make it longer")
        if (
            self.duration > MAX_DURATION_S
            or self.rate > MAX_RATE_HZ
            or self.duration * self.rate > MAX_SAMPLES
        ):
            raise ExcitationError(
                f"at most {MAX_DURATION_S:g} s, {MAX_RATE_HZ:g} Hz and {MAX_SAMPLES:g} samples per "
                "trajectory; shorten the duration or lower the rate"
            )
        if self.q_max - self.q_min > MAX_RANGE or abs(self.center) > MAX_RANGE:
            raise ExcitationError(f"the position range must lie within ±{MAX_RANGE:g} rad")
        if self.f_max / self.f_min > 1e4:
            raise ExcitationError("f_max / f_min must be at most 10 000 (four decades)")
        check_name(self.joint, "joint", "excitation")
        self._check_limits()
        for k in ("noise_q", "noise_qd"):
            v = getattr(self, k)
            if not (v is None and k == "noise_qd") and not (
                isinstance(v, int | float) and math.isfinite(v) and v > 0
            ):
                raise ExcitationError(f"{k} must be a positive number (sensor noise σ, SI), got {v!r}")
        if not isinstance(self.families, list | tuple) or not all(isinstance(m, str) for m in self.families):
            raise ExcitationError(f"families must be a list of model family names, got {self.families!r}")
        if len(set(self.families)) != len(self.families):  # each is predicted once: a repeat only costs work
            raise ExcitationError("families lists a family more than once; name each once")
        self._check_work()

    def _check_limits(self) -> None:
        """Every number within LIMITS (so no arithmetic on it overflows), each message naming field and limit."""
        for k, (lo, hi, unit) in LIMITS.items():
            v = getattr(self, k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ExcitationError(f"{k} must be a finite number, got {quote_name(v)}")
            if k == "seed" and v != int(v):
                raise ExcitationError(f"seed must be a whole number, got {v!r}")
            if v < lo or v > hi:
                raise ExcitationError(f"{k} must be between {lo:g} and {hi:g} {unit}, got {v:g}".rstrip())
        if self.nominal is not None and (not isinstance(self.nominal, dict) or len(self.nominal) > 64):
            raise ExcitationError("nominal must be an object of at most 64 parameter values")

    @property
    def samples(self) -> int:
        """Samples of the whole plan (each of the BAM set's three trajectories has `duration`)."""
        return (int(round(self.duration * self.rate)) + 1) * (3 if self.kind == "bam" else 1)

    def _check_work(self) -> None:
        """The plan's samples within MAX_SAMPLES in all; the predicted identifiability's work within
        MAX_PREDICT_SAMPLES and MAX_PREDICT_WORK."""
        n, fams = self.samples, len(self.families)
        if n > MAX_SAMPLES:  # the BAM set: three trajectories
            raise ExcitationError(
                f"duration × rate: the plan has {n} samples in all; the limit is {MAX_SAMPLES}; shorten the "
                "duration or lower the rate"
            )
        if fams > MAX_FAMILIES:
            raise ExcitationError(f"families names {fams} families; the limit is {MAX_FAMILIES}")
        if not fams:
            return
        if n > MAX_PREDICT_SAMPLES:
            raise ExcitationError(
                f"duration × rate: the plan has {n} samples; a prediction of identifiability covers at most "
                f"{MAX_PREDICT_SAMPLES}; shorten the duration, lower the rate, or ask for no prediction "
                "(families: [])"
            )
        if n * fams > MAX_PREDICT_WORK:
            raise ExcitationError(
                f"families: {fams} families × {n} samples is {n * fams} sample-predictions; the limit is "
                f"{MAX_PREDICT_WORK}; name fewer families, or shorten the duration or lower the rate"
            )

    @property
    def J(self) -> float:
        return self.inertia + self.mass * self.com_distance**2

    @property
    def mgl(self) -> float:
        return self.mass * self.gravity * self.com_distance

    @property
    def center(self) -> float:
        return 0.5 * (self.q_min + self.q_max)

    @property
    def half(self) -> float:
        return 0.5 * (self.q_max - self.q_min)


# --------------------------------------------------------------------------------------------- bounds


def torque(spec: ExcitationSpec, q: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Rigid-body torque the load needs to follow q(t): J·q̈ + m·g·l·sin q."""
    qdd = np.gradient(np.gradient(q, t), t)
    return spec.J * qdd + spec.mgl * np.sin(q)


def _within(spec: ExcitationSpec, q: np.ndarray, t: np.ndarray) -> bool:
    qd = np.gradient(q, t)
    ok = q.min() >= spec.q_min - 1e-12 and q.max() <= spec.q_max + 1e-12
    ok = ok and float(np.abs(qd).max()) <= spec.qd_max
    if spec.tau_max is not None:
        ok = ok and float(np.abs(torque(spec, q, t)).max()) <= spec.tau_max
    return bool(ok)


def _scale_to_bounds(
    spec: ExcitationSpec, shape: np.ndarray, t: np.ndarray, center: float, top: float | None = None
) -> np.ndarray:
    """center + a·shape with the largest a ≤ top (bisection) that keeps every bound; max |shape| = 1.

    `top` defaults to the room on both sides of the centre (shapes that swing both ways).
    """
    if top is None:
        top = MARGIN * min(spec.q_max - center, center - spec.q_min)
    if spec.tau_max is not None and spec.mgl * abs(math.sin(center)) > spec.tau_max:
        raise ExcitationError(
            f"holding the centre {center:.4g} rad already needs {spec.mgl * abs(math.sin(center)):.4g} "
            f"N·m of gravity torque, over tau_max {spec.tau_max}; centre the range nearer to 0 "
            "(hanging) or raise tau_max"
        )
    d1 = np.gradient(shape, t)  # q = center + a·shape: qd = a·d1, q̈ = a·d2 (computed once)
    d2 = np.gradient(d1, t)
    v1 = float(np.abs(d1).max())

    def ok(amp: float) -> bool:
        if amp * v1 > spec.qd_max:
            return False
        if spec.tau_max is None:
            return True
        tau = spec.J * amp * d2 + spec.mgl * np.sin(center + amp * shape)
        return float(np.abs(tau).max()) <= spec.tau_max

    if ok(top):
        return center + top * shape
    lo, hi = 0.0, min(top, spec.qd_max / v1 if v1 > 0 else top)
    if ok(hi):
        return center + hi * shape
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    if lo <= 1e-6 * max(top, 1e-9):
        raise ExcitationError(
            "no amplitude keeps the velocity and torque bounds; raise qd_max or tau_max, or lower f_max"
        )
    return center + MARGIN * lo * shape


def _fade(t: np.ndarray) -> np.ndarray:
    """1 in the middle, raised-cosine ramps of FADE_S at both ends."""
    d = t[-1] - t[0]
    w = min(FADE_S, d / 4)
    x = np.clip(np.minimum(t - t[0], t[-1] - t) / w, 0.0, 1.0)
    return 0.5 - 0.5 * np.cos(math.pi * x)


def _transition_time(spec: ExcitationSpec, delta: float) -> float:
    """Duration of a cosine move of `delta` rad within qd_max and (with the load) tau_max."""
    d = abs(delta)
    tv = math.pi * d / (2 * MARGIN * spec.qd_max)
    ta = 0.0
    if spec.tau_max is not None and spec.J > 0:
        avail = spec.tau_max - spec.mgl
        if avail <= 0:
            raise ExcitationError(
                f"the load's gravity torque (up to {spec.mgl:.4g} N·m) uses all of tau_max "
                f"{spec.tau_max}; raise tau_max or lighten the load"
            )
        ta = math.pi * math.sqrt(d * spec.J / (2 * MARGIN * avail))
    return max(tv, ta, 1e-3)


def _levels_to_path(
    spec: ExcitationSpec, t: np.ndarray, times: list[float], levels: list[float]
) -> np.ndarray:
    """Hold each level from its time, moving to it along a cosine ramp as fast as the bounds allow."""
    q = np.full_like(t, levels[0])
    for k in range(1, len(levels)):
        t0, a, b = times[k], levels[k - 1], levels[k]
        T = _transition_time(spec, b - a)
        i0, i1 = np.searchsorted(t, [t0, t0 + T])
        s = (t[i0:i1] - t0) / T
        q[i0:i1] = a + (b - a) * 0.5 * (1 - np.cos(math.pi * s))
        q[i1:] = b
    return q


# --------------------------------------------------------------------------------------------- kinds


def chirp(spec: ExcitationSpec, t: np.ndarray) -> np.ndarray:
    """Logarithmic sweep f_min → f_max with an amplitude envelope that respects velocity and torque."""
    T = t[-1] - t[0]
    k = spec.f_max / spec.f_min
    tau = (t - t[0]) / T
    f = spec.f_min * k**tau
    phase = 2 * math.pi * spec.f_min * T / math.log(k) * (k**tau - 1)
    w = 2 * math.pi * f
    env = np.full_like(t, spec.half)
    env = np.minimum(env, spec.qd_max / w)
    if spec.tau_max is not None and spec.J > 0:
        env = np.minimum(env, max(spec.tau_max - spec.mgl, 1e-9) / (spec.J * w**2))
    shape = env / env.max() * np.sin(phase) * _fade(t)
    return _scale_to_bounds(spec, shape / max(np.abs(shape).max(), 1e-12), t, spec.center)


def schroeder_phases(n: int) -> np.ndarray:
    """Schroeder's phases φ_k = −π·k(k−1)/n (k = 1..n), which keep a flat multisine's crest factor low."""
    k = np.arange(1, n + 1)
    return -math.pi * k * (k - 1) / n


def multisine(spec: ExcitationSpec, t: np.ndarray, max_lines: int = 60) -> np.ndarray:
    """Flat-spectrum harmonics of f_min up to f_max (at most `max_lines`) with Schroeder phases."""
    top = max(1, int(spec.f_max // spec.f_min))
    step = max(1, math.ceil(top / max_lines))
    ks = np.arange(step, top + 1, step)
    phases = schroeder_phases(ks.size)
    x = np.zeros_like(t)
    for k, ph in zip(ks, phases, strict=True):
        x += np.cos(2 * math.pi * k * spec.f_min * (t - t[0]) + ph)
    x *= _fade(t)
    return _scale_to_bounds(spec, x / np.abs(x).max(), t, spec.center)


def crest_factor(x: np.ndarray) -> float:
    """Peak over RMS of the signal about its mean."""
    y = x - x.mean()
    return float(np.abs(y).max() / np.sqrt(np.mean(y**2)))


def steps(spec: ExcitationSpec, t: np.ndarray, hold: tuple[float, float] = (0.5, 2.0)) -> np.ndarray:
    """Random levels in the range, each held 0.5–2 s after a bounded cosine move to it."""
    rng = np.random.default_rng(spec.seed)
    lo, hi = spec.center - MARGIN * spec.half, spec.center + MARGIN * spec.half
    levels = [spec.center]
    holds = [0.5]
    while sum(holds) < t[-1] - t[0]:
        levels.append(float(rng.uniform(lo, hi)))
        holds.append(_transition_time(spec, levels[-1] - levels[-2]) + rng.uniform(*hold))
    return _settle(spec, t, holds, levels)


def prbs_bits(order: int = 7, seed: int = 1) -> np.ndarray:
    """One period (2^order − 1 bits) of a maximum-length sequence from a Fibonacci LFSR."""
    taps = {5: (5, 3), 6: (6, 5), 7: (7, 6), 8: (8, 6, 5, 4), 9: (9, 5), 10: (10, 7)}[order]
    state = (seed % (2**order - 1)) + 1
    out = np.empty(2**order - 1, dtype=np.int8)
    for i in range(out.size):
        bit = 0
        for tp in taps:
            bit ^= (state >> (tp - 1)) & 1
        out[i] = state & 1
        state = (state >> 1) | (bit << (order - 1))
    return out


def prbs(spec: ExcitationSpec, t: np.ndarray) -> np.ndarray:
    """Two levels switched by a maximum-length sequence, clocked for the band up to f_max (or slower, when
    a move between the levels takes longer within the bounds)."""
    a = 0.8 * MARGIN * spec.half
    clock = max(0.44 / spec.f_max, _transition_time(spec, 2 * a) * 1.2)
    bits = prbs_bits(7, spec.seed + 1)
    levels, holds = [spec.center], [0.5]
    k = 0
    while sum(holds) < t[-1] - t[0]:
        level = spec.center + (a if bits[k % bits.size] else -a)
        if level != levels[-1]:
            levels.append(level)
            holds.append(clock)
        else:
            holds[-1] += clock
        k += 1
    return _settle(spec, t, holds, levels)


def _settle(spec: ExcitationSpec, t: np.ndarray, holds: list[float], levels: list[float]) -> np.ndarray:
    """Levels[k] is reached from levels[k-1] by a cosine move starting after holds[k-1]; checked for torque."""
    times = list(t[0] + np.cumsum([0.0, *holds[:-1]]))
    q = _levels_to_path(spec, t, times, levels)
    if spec.tau_max is not None and float(np.abs(torque(spec, q, t)).max()) > spec.tau_max * 1.01:
        raise ExcitationError(
            f"the load's gravity torque at the step levels exceeds tau_max {spec.tau_max}; "
            "narrow the position range or raise tau_max"
        )
    return q


def _cubic(keys: list[tuple[float, float]], t: np.ndarray) -> np.ndarray:
    """Piecewise cubic through (time, value) keys with zero velocity at each key (BAM's keyframes)."""
    q = np.full_like(t, keys[0][1])
    for (t0, a), (t1, b) in zip(keys[:-1], keys[1:], strict=True):
        s = np.clip((t - t0) / (t1 - t0), 0, 1)
        q = np.where(t >= t0, a + (b - a) * (3 * s**2 - 2 * s**3), q)
    return q


def sin_time_square(spec: ExcitationSpec, t: np.ndarray) -> np.ndarray:
    """BAM's sin(t²): ever faster oscillation about the centre, amplitude cut to the bounds."""
    x = np.sin((t - t[0]) ** 2)
    return _scale_to_bounds(spec, x, t, spec.center)


def lift_and_drop(spec: ExcitationSpec, t: np.ndarray) -> tuple[np.ndarray, int]:
    """BAM's lift and drop: a cubic move towards the top of the range over a third of the run (at most
    2 s), then torque off. Returns the command and the index where the free-swing segment starts."""
    up = min(2.0, spec.duration / 3)
    shape = _cubic([(t[0], 0.0), (t[0] + up, 1.0)], t)
    q = _scale_to_bounds(spec, shape, t, spec.center, top=MARGIN * spec.half)
    return q, int(np.searchsorted(t, t[0] + up))


def up_and_down(spec: ExcitationSpec, t: np.ndarray) -> np.ndarray:
    """BAM's up and down: slow cubic towards the top of the range at half time, back to 80 % of it."""
    half = (t[-1] - t[0]) / 2
    shape = _cubic([(t[0], 0.0), (t[0] + half, 1.0), (t[-1], 0.8)], t)
    return _scale_to_bounds(spec, shape, t, spec.center, top=MARGIN * spec.half)


# --------------------------------------------------------------------------------------------- design


def design(spec: ExcitationSpec) -> Recording:
    """The excitation as a canonical Recording: one joint, q = q_des = the plan, segments per trajectory."""
    spec.check()
    n = int(round(spec.duration * spec.rate)) + 1
    t = np.arange(n) / spec.rate
    plans: list[tuple[str, np.ndarray, np.ndarray, dict]] = []
    kinds = ("sin_time_square", "lift_and_drop", "up_and_down") if spec.kind == "bam" else (spec.kind,)
    for kind in kinds:
        if kind == "lift_and_drop":
            q, cut = lift_and_drop(spec, t)
            one = {
                "recording": "lift_and_drop"
            }  # one run on the bench: a fit's split keeps lift and drop together
            plans.append(("lift", t[:cut], q[:cut], one))
            plans.append(("drop", t[cut:], np.full(n - cut, q[cut - 1]), {"free_swing": True, **one}))
            continue
        fn = {
            "chirp": chirp,
            "multisine": multisine,
            "steps": steps,
            "prbs": prbs,
            "sin_time_square": sin_time_square,
            "up_and_down": up_and_down,
        }[kind]
        plans.append((kind, t, fn(spec, t), {}))
    gains = {k: v for k, v in (("kp", spec.kp), ("kd", spec.kd)) if v is not None}
    segments = []
    for name, tt, q, meta in plans:
        qd = np.zeros_like(q) if meta.get("free_swing") else np.gradient(q, tt)
        col = q[:, None]
        segments.append(
            Segment(
                name=name,
                t=tt.copy(),
                q=col.copy(),
                qd=qd[:, None],
                q_des=col.copy(),
                qd_des=qd[:, None].copy(),
                tau_ff=np.zeros_like(col),
                metadata={**gains, **meta},
            )
        )
    info = JointInfo(
        spec.joint, inertia=spec.inertia, mass=spec.mass, com_distance=spec.com_distance, gravity=spec.gravity
    )
    driven = [s for s in segments if not s.metadata.get("free_swing")]
    peak_tau = max(float(np.abs(torque(spec, s.q_des[:, 0], s.t)).max()) for s in driven)
    summary: dict[str, object] = {
        "kind": spec.kind,
        "spec": asdict(spec),
        "peak": {
            "q_min": min(float(s.q_des.min()) for s in driven),
            "q_max": max(float(s.q_des.max()) for s in driven),
            "qd_abs": max(float(np.abs(s.qd_des).max()) for s in driven),
            "tau_rigid_body_abs": peak_tau,
        },
        "note": "q equals the planned command: run q_des on the bench and log the measured q (and tau)",
    }
    if spec.kind in ("chirp", "multisine"):
        summary["band_hz"] = [spec.f_min, spec.f_max]
    if spec.kind == "multisine":
        inner = (t >= FADE_S) & (t <= t[-1] - FADE_S)
        summary["crest_factor"] = crest_factor(segments[0].q_des[inner, 0])
    return Recording(
        joints=[info],
        segments=segments,
        source_format=f"excitation-{spec.kind}",
        velocity_source="planned (analytic derivative of the command)",
        metadata={"excitation": summary},
    )


def excitation_files(spec: ExcitationSpec, rec: Recording | None = None) -> tuple[str, dict]:
    """The designed excitation (or `rec`, already designed from spec) as canonical long-form CSV text and its
    JSON sidecar (a dict)."""
    from .canonical import sidecar_for, write_table

    rec = design(spec) if rec is None else rec
    with tempfile.TemporaryDirectory(prefix="actuator-sysid-excite-") as tmp:
        path = Path(tmp) / "excitation.csv"
        write_table(rec, path, form="long", sidecar=False)
        return path.read_text(), sidecar_for(rec)
