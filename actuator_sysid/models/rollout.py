"""Packing segments for the rollout kernel and launching it: losses for search, traces for reports."""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from ..datasets.recording import DatasetError, Recording, Segment
from . import parameters
from .components.servo_goal import goal_rate
from .families import EFFORT_MODES, F_IMPLICIT_EFFORT, F_OPEN_LOOP, Family
from .kernels import rollout_kernel


def filled(a: np.ndarray | None) -> np.ndarray:
    """A SegmentBatch array that may be left out at construction: `__post_init__` fills it, so never None."""
    assert a is not None
    return a


@dataclass
class SegmentBatch:
    """Segments of one or more joints packed end to end, as float32 arrays the kernel reads."""

    joints: list[str]  # joint order of the params array's second axis
    seg_joint: np.ndarray  # (S,) int32
    seg_start: np.ndarray  # (S,) int32
    seg_len: np.ndarray  # (S,) int32
    seg_substeps: np.ndarray  # (S,) int32
    seg_dt: np.ndarray  # (S,) float32 physics dt
    seg_inertia: np.ndarray  # (S,) float32
    seg_gravity: np.ndarray  # (S,) float32
    seg_ext: np.ndarray  # (S,) float32
    seg_cmd0: np.ndarray  # (S,) int32 first sample whose command exists (a window sees earlier commands)
    seg_free: np.ndarray  # (S,) int32 1 where the actuator was off (segment metadata free_swing)
    seg_kp: np.ndarray  # (S,) float32 recorded Kp [N·m/rad] where known and asked for, else −1 (fitted)
    seg_kd: np.ndarray  # (S,) float32 recorded Kd [N·m·s/rad], else −1
    seg_q0: np.ndarray  # (S,) float32 initial position (measured frame) every rollout starts from
    seg_qd0: np.ndarray  # (S,) float32 initial velocity
    q: np.ndarray  # (N,) float32
    qd: np.ndarray
    q_des: np.ndarray
    qd_des: np.ndarray
    tau_ff: np.ndarray
    seg_names: list[str]  # (S,) recording segment names
    knots: np.ndarray  # (J, K) float32 table positions per joint (position-dependent torque limit)
    tau: np.ndarray | None = None  # (N,) measured effort when every packed segment has it
    # (N,) int32 1 where the actuator was driven at that sample (Segment.enable), 0 where it swung freely
    enable: np.ndarray | None = None
    # (S,) float32 per-segment multipliers of the fitted stiffness, damping, saturation effort and velocity
    # limit: device-unit gains (kp_s / kp_ref) and supply voltage (vin_s / vin_ref); 1 for SI logs
    seg_kp_mult: np.ndarray | None = None
    seg_kd_mult: np.ndarray | None = None
    seg_sat_mult: np.ndarray | None = None
    seg_vlim_mult: np.ndarray | None = None
    # (S,) float32 voltage servo (VoltageServo): duty per rad of error at this segment's kp, 0 = no tie; the
    # largest duty, the supply [V] and the current limit [A] (0: none). They tie a DC motor's envelope to its gains
    seg_duty: np.ndarray | None = None
    seg_max_duty: np.ndarray | None = None
    seg_vin: np.ndarray | None = None
    seg_imax: np.ndarray | None = None
    # (S,) float32 the voltage servo's winding resistance range [Ω] (0: none): the back-EMF damping kt²/R stays
    # within [R_min, R_max]·(kt/R)², so a log that cannot tell it from viscous friction keeps a plausible motor
    seg_rmin: np.ndarray | None = None
    seg_rmax: np.ndarray | None = None
    # (S,) float32 the servo firmware's setpoint slew-rate limit [rad/s] (goal_rate): 0 = the goal is the command
    seg_goal_rate: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.enable is None:
            self.enable = np.ones(self.q.shape[0], np.int32)
        for name in ("seg_kp_mult", "seg_kd_mult", "seg_sat_mult", "seg_vlim_mult", "seg_max_duty"):
            if getattr(self, name) is None:
                setattr(self, name, np.ones(self.seg_start.shape[0], np.float32))
        for name in ("seg_duty", "seg_vin", "seg_imax", "seg_rmin", "seg_rmax", "seg_goal_rate"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(self.seg_start.shape[0], np.float32))

    @property
    def n_segments(self) -> int:
        return int(self.seg_start.shape[0])

    @property
    def n_samples(self) -> int:
        return int(self.q.shape[0])

    def select_joint(self, j: int) -> SegmentBatch:
        """The segments of one joint as a batch of their own (for per-joint refinement).

        Batches are joint-major, so one joint's samples are one contiguous range: slice it and rebase.
        """
        segs = [s for s in range(self.n_segments) if self.seg_joint[s] == j]
        lo = int(min(self.seg_cmd0[segs]))
        hi = int(max(self.seg_start[s] + self.seg_len[s] for s in segs))
        cut = lambda a: a[lo:hi].copy()  # noqa: E731
        return SegmentBatch(
            joints=[self.joints[j]],
            seg_joint=np.zeros(len(segs), np.int32),
            seg_start=(self.seg_start[segs] - lo).astype(np.int32),
            seg_len=self.seg_len[segs].copy(),
            seg_substeps=self.seg_substeps[segs],
            seg_dt=self.seg_dt[segs],
            seg_inertia=self.seg_inertia[segs],
            seg_gravity=self.seg_gravity[segs],
            seg_ext=self.seg_ext[segs],
            seg_cmd0=(self.seg_cmd0[segs] - lo).astype(np.int32),
            seg_free=self.seg_free[segs],
            seg_kp=self.seg_kp[segs],
            seg_kd=self.seg_kd[segs],
            seg_q0=self.seg_q0[segs],
            seg_qd0=self.seg_qd0[segs],
            q=cut(self.q),
            qd=cut(self.qd),
            q_des=cut(self.q_des),
            qd_des=cut(self.qd_des),
            tau_ff=cut(self.tau_ff),
            seg_names=[self.seg_names[s] for s in segs],
            knots=self.knots[j : j + 1].copy(),
            tau=None if self.tau is None else cut(self.tau),
            enable=cut(self.enable),
            seg_kp_mult=filled(self.seg_kp_mult)[segs],
            seg_kd_mult=filled(self.seg_kd_mult)[segs],
            seg_sat_mult=filled(self.seg_sat_mult)[segs],
            seg_vlim_mult=filled(self.seg_vlim_mult)[segs],
            seg_duty=filled(self.seg_duty)[segs],
            seg_max_duty=filled(self.seg_max_duty)[segs],
            seg_vin=filled(self.seg_vin)[segs],
            seg_imax=filled(self.seg_imax)[segs],
            seg_rmin=filled(self.seg_rmin)[segs],
            seg_rmax=filled(self.seg_rmax)[segs],
            seg_goal_rate=filled(self.seg_goal_rate)[segs],
        )

    def segment_slice(self, s: int) -> slice:
        return slice(int(self.seg_start[s]), int(self.seg_start[s] + self.seg_len[s]))

    @classmethod
    def from_recording(
        cls,
        rec: Recording,
        joints: list[str],
        segments: list[int] | None = None,
        substeps: int = 1,
        knots: np.ndarray | None = None,
        window: int | None = None,
        logged_gains: bool = False,
    ) -> SegmentBatch:
        """Pack the chosen segments (all by default) of the chosen joints; joint-major order.

        Table knots default to evenly spaced positions over each joint's measured range in the whole
        recording, so train and validation batches share them. A segment's metadata may carry a constant
        `external_torque` [N·m] (per joint under metadata["joints"][name]).

        `window` (samples) cuts every segment into rollouts of that length, each starting from the
        measured state at its first sample (sharing boundary samples, so every sample is predicted
        once). Long simulations of a delayed or lightly damped system drift apart from the log for small
        parameter errors, which makes the loss surface needle-like; windows keep it smooth. A window
        still sees the commands before it, so delays act across window boundaries.

        `logged_gains` uses the gains a segment was recorded with (metadata `kp`, `kd` in SI, per joint
        under metadata["joints"][name]) in place of the fitted stiffness and damping for that segment.

        Segments with `gain_units = "device"` log `kp` (and `kd`) in the device's own units: the fitted
        stiffness is the SI value at the reference kp (`operating_points`), and segment s runs with
        stiffness · kp_s / kp_ref (damping likewise when kd is logged). A logged supply voltage `vin` scales
        the saturation effort and velocity limit by vin_s / vin_ref (and, for device gains, the stiffness).
        """
        seg_ids = list(range(len(rec.segments))) if segments is None else list(segments)
        if knots is None:
            knots = np.stack([default_knots(rec, name) for name in joints])
        cols, rows = _pack(rec, joints, seg_ids, substeps, window, logged_gains)
        f32 = np.float32
        mults, servos, rates = rows.pop("mults"), rows.pop("servos"), rows.pop("goal_rates")
        return cls(
            joints=list(joints),
            seg_substeps=np.full(len(rows["seg_start"]), substeps, np.int32),
            **{
                k: np.asarray(v, np.int32 if k in _INT_ROWS else f32)
                for k, v in rows.items()
                if k != "seg_names"
            },
            **{k: np.concatenate(cols[k]).astype(f32) for k in ("q", "qd", "q_des", "qd_des", "tau_ff")},
            seg_names=rows["seg_names"],
            knots=np.asarray(knots, f32).reshape(len(joints), parameters.TABLE_KNOTS),
            tau=np.concatenate(cols["tau"]).astype(f32) if "tau" in cols else None,
            enable=np.concatenate(cols["enable"]).astype(np.int32),
            **{
                f"seg_{k}_mult": np.asarray([m[i] for m in mults], f32).reshape(-1)
                for i, k in enumerate(("kp", "kd", "sat", "vlim"))
            },
            **{
                f"seg_{k}": np.asarray([v[i] for v in servos], f32).reshape(-1)
                for i, k in enumerate(("duty", "max_duty", "vin", "imax", "rmin", "rmax"))
            },
            seg_goal_rate=np.asarray(rates, f32).reshape(-1),
        )


def window_spans(n_samples: int, window: int | None) -> list[tuple[int, int]]:
    """(first sample, length) of each rollout window of a segment; consecutive windows share a boundary sample,
    and a stub of under 3 samples at the end joins the window before it."""
    step = max(n_samples - 1, 1) if not window or window >= n_samples - 1 else max(int(window), 9)
    spans: list[tuple[int, int]] = []
    for w0 in range(0, max(n_samples - 1, 1), step):
        n = min(step, n_samples - 1 - w0) + 1 if n_samples > 1 else n_samples
        if n < 3 and w0 > 0:
            spans[-1] = (spans[-1][0], spans[-1][1] + n - 1)
            continue
        spans.append((w0, n))
    return spans


_INT_ROWS = ("seg_joint", "seg_start", "seg_len", "seg_cmd0", "seg_free")
"""Per-window rows of a SegmentBatch held as int32 (the others are float32)."""


def _pack(
    rec: Recording,
    joints: list[str],
    seg_ids: list[int],
    substeps: int,
    window: int | None,
    logged_gains: bool,
) -> tuple[dict[str, list[np.ndarray]], dict[str, list]]:
    """SegmentBatch.from_recording's packing, joint-major: per-sample columns (q, qd, q_des, qd_des, tau_ff,
    enable, and tau when every chosen segment has it) and per-window rows (keyed by SegmentBatch field)."""
    has_tau = all(rec.segments[si].tau is not None for si in seg_ids)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("q", "qd", "q_des", "qd_des", "tau_ff", "enable")}
    if has_tau:
        cols["tau"] = []
    rows: dict[str, list] = {
        k: []
        for k in (
            *_INT_ROWS,
            "seg_ext",
            "seg_kp",
            "seg_kd",
            "seg_q0",
            "seg_qd0",
            "seg_dt",
            "seg_inertia",
            "seg_gravity",
            "seg_names",
            "mults",
            "servos",
            "goal_rates",
        )
    }
    offset = 0
    for ji, name in enumerate(joints):
        j = rec.joint_index(name)
        op = operating_points(rec, name)
        for si in seg_ids:
            seg = rec.segments[si]
            for k in cols:
                cols[k].append(seg.driven(j).astype(np.int32) if k == "enable" else getattr(seg, k)[:, j])
            _append_windows(rows, rec, seg, ji, name, op, offset, substeps, window, logged_gains)
            offset += seg.n
    return cols, rows


def _append_windows(
    rows: dict[str, list],
    rec: Recording,
    seg: Segment,
    ji: int,
    name: str,
    op: OperatingPoints,
    offset: int,
    substeps: int,
    window: int | None,
    logged_gains: bool,
) -> None:
    """One segment's rollout windows (window_spans) as rows: start, length, initial state, load, external
    torque, logged gains (-1: fitted), gain and supply multipliers, servo constants."""
    j = rec.joint_index(name)
    seg_mult = op.multipliers(seg)
    rate = goal_rate(seg, name)
    inertia, grav = rec.load_for(seg, j)
    torque = float(
        seg.metadata.get("joints", {})
        .get(name, {})
        .get("external_torque", seg.metadata.get("external_torque", 0.0))
    )
    for w0, n in window_spans(seg.n, window):
        rows["seg_ext"].append(torque)
        rows["seg_joint"].append(ji)
        rows["seg_start"].append(offset + w0)
        rows["seg_len"].append(n)
        rows["seg_cmd0"].append(offset)
        rows["seg_free"].append(1 if seg.metadata.get("free_swing") else 0)
        for key in ("kp", "kd"):
            v = seg.metadata.get("joints", {}).get(name, {}).get(key, seg.metadata.get(key))
            rows[f"seg_{key}"].append(
                float(v) if logged_gains and v is not None and op.units == "si" else -1.0
            )
        rows["mults"].append(seg_mult)
        rows["servos"].append(op.servo_values(seg))
        rows["goal_rates"].append(rate)
        rows["seg_q0"].append(seg.q[w0, j])
        rows["seg_qd0"].append(seg.qd[w0, j])
        rows["seg_dt"].append(seg.dt / substeps)
        rows["seg_inertia"].append(inertia)
        rows["seg_gravity"].append(grav)
        rows["seg_names"].append(seg.name)


GAIN_UNITS = ("si", "device")
"""Segment metadata `gain_units`: "si" (kp in N·m/rad, kd in N·m·s/rad) or "device" (the servo's own units)."""


def _logged(seg: Segment, joint: str, key: str) -> float | None:
    """A segment's logged quantity for one joint: metadata["joints"][joint][key], else metadata[key]."""
    v = seg.metadata.get("joints", {}).get(joint, {}).get(key, seg.metadata.get(key))
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise DatasetError(f"segment {seg.name!r}: {key} must be a number, got {v!r}") from None


def _reference(values: list[float]) -> float | None:
    """The most common value (ties: the lowest), the operating point a device-unit fit is stated at."""
    if not values:
        return None
    counts = Counter(values)
    return min(counts, key=lambda v: (-counts[v], v))


@dataclass(frozen=True)
class OperatingPoints:
    """How one joint's segments were run: gain units, the logged kp / kd / vin values and their references."""

    units: str = "si"
    kp_reference: float | None = None  # device units: the kp the fitted stiffness is stated at
    kd_reference: float | None = None
    vin_reference: float | None = (
        None  # V: the supply the fitted envelope (and device stiffness) is stated at
    )
    kp: dict[str, float | None] = field(default_factory=dict)  # segment name → logged value
    kd: dict[str, float | None] = field(default_factory=dict)
    vin: dict[str, float | None] = field(default_factory=dict)
    servo: dict | None = None  # VoltageServo constants every segment shares: the DC-motor envelope is tied

    def servo_values(self, seg: Segment) -> tuple[float, float, float, float, float, float]:
        """(duty per rad of error, largest duty, supply V, current limit A, R_min Ω, R_max Ω) of a voltage
        servo; zeros: untied (no limit, no resistance range)."""
        if self.servo is None:
            return 0.0, 1.0, 0.0, 0.0, 0.0, 0.0
        kp, vin = self.kp[seg.name], self.vin[seg.name]
        assert kp is not None and vin is not None
        r_min, r_max = self.resistance_range
        return (
            self.servo["duty_per_kp_rad"] * kp,
            self.servo.get("max_duty", 1.0),
            vin,
            self.servo.get("current_limit") or 0.0,
            r_min,
            r_max,
        )

    @property
    def resistance_range(self) -> tuple[float, float]:
        """The servo's winding resistance range [Ω] (voltage_servo `resistance`: [R_min, R_max]); (0, 0): none."""
        r = (self.servo or {}).get("resistance")
        return (float(r[0]), float(r[1])) if r else (0.0, 0.0)

    @property
    def ktr_per_stiffness(self) -> float | None:
        """A voltage servo's kt/R per unit of fitted stiffness, 1/(vin·duty) at the reference kp and supply (kt/R
        = K/(vin·duty)); None: not a tied voltage servo."""
        if self.servo is None or not self.kp_reference or not self.vin_reference:
            return None
        return 1.0 / (self.vin_reference * self.servo["duty_per_kp_rad"] * self.kp_reference)

    def tied_damping(self, stiffness: float, damping: float) -> float:
        """The back-EMF damping kt²/R the kernel runs: within R_min·(kt/R)² … R_max·(kt/R)², kt/R = K/(vin·duty)."""
        r_min, r_max = self.resistance_range
        per_k = self.ktr_per_stiffness
        if per_k is None or not r_max:
            return damping
        ktr = stiffness * per_k
        return min(max(damping, r_min * ktr * ktr), r_max * ktr * ktr)

    def tied_envelope(self, stiffness: float, damping: float) -> dict[str, float]:
        """The voltage servo's DC-motor envelope at the reference kp and vin from the fitted gains:
        kt/R = K / (vin·duty), saturation effort = max_duty·K/duty, velocity limit = saturation / D (D = kt²/R,
        the back-EMF damping), effort limit = current_limit·kt with kt = D·vin·duty / K."""
        assert self.servo is not None and self.kp_reference and self.vin_reference
        duty = self.servo["duty_per_kp_rad"] * self.kp_reference
        sat = self.servo.get("max_duty", 1.0) * stiffness / duty
        imax = self.servo.get("current_limit")
        out = {"saturation_effort": sat, "actuator_velocity_limit": sat / damping}
        if imax:
            out["actuator_effort_limit"] = imax * damping * self.vin_reference * duty / stiffness
        return out

    def vin_ratio(self, vin: float | None) -> float:
        return 1.0 if vin is None or not self.vin_reference else vin / self.vin_reference

    def scale(
        self, kp: float | None = None, kd: float | None = None, vin: float | None = None
    ) -> tuple[float, float, float, float]:
        """(stiffness, damping, saturation effort, velocity limit) multipliers at an operating point."""
        v = self.vin_ratio(vin)
        if self.units != "device":
            return 1.0, 1.0, v, v
        kp_ref, kd_ref = self.kp_reference, self.kd_reference
        assert kp_ref is not None  # device units always state the kp the stiffness was fitted at
        kp_m = (kp if kp is not None else kp_ref) / kp_ref * v
        kd_m = (kd if kd is not None else kd_ref) / kd_ref * v if kd_ref else 1.0
        return kp_m, kd_m, v, v

    def multipliers(self, seg: Segment) -> tuple[float, float, float, float]:
        """The segment's multipliers (see SegmentBatch.from_recording)."""
        return self.scale(self.kp.get(seg.name), self.kd.get(seg.name), self.vin.get(seg.name))

    @property
    def varies(self) -> bool:
        """Whether segments differ in device gains or supply voltage (the multipliers are not all 1)."""
        return self.units == "device" or len({v for v in self.vin.values() if v is not None}) > 1


def operating_points(rec: Recording, joint: str) -> OperatingPoints:
    """One joint's gain units and logged kp / kd / vin over every segment of the recording (so train and
    validation batches share one reference). Raises DatasetError for unknown or mixed units, or device units
    without a logged kp."""
    units = set()
    for seg in rec.segments:
        u = seg.metadata.get("gain_units", rec.metadata.get("gain_units", "si"))
        if u not in GAIN_UNITS:
            raise DatasetError(
                f"segment {seg.name!r}: gain_units must be one of {list(GAIN_UNITS)}, got {u!r}"
            )
        units.add(u)
    if len(units) > 1:
        raise DatasetError(
            f"joint {joint!r}: segments mix gain_units {sorted(units)}; one recording states its "
            "gains in one unit system"
        )
    unit = units.pop() if units else "si"
    logged = {key: {s.name: _logged(s, joint, key) for s in rec.segments} for key in ("kp", "kd", "vin")}
    if unit == "device":
        lacking = [n for n, v in logged["kp"].items() if v is None]
        if lacking:
            raise DatasetError(
                f'joint {joint!r}: gain_units is "device" but segments {lacking} log no kp; '
                "a device-unit fit scales the stiffness by each segment's kp"
            )
    vins = [v for v in logged["vin"].values() if v is not None]
    if any(v <= 0 for v in vins):
        raise DatasetError(
            f"joint {joint!r}: a logged vin must be a positive voltage, got {sorted(set(vins))}"
        )
    kds = [v for v in logged["kd"].values() if v is not None]
    kd_ref = _reference(kds) if unit == "device" and len(kds) == len(rec.segments) else None
    kp_ref = _reference([v for v in logged["kp"].values() if v is not None]) if unit == "device" else None
    if unit == "device" and not kp_ref:
        raise DatasetError(
            f"joint {joint!r}: the most common logged kp is 0; a device-unit fit needs a "
            "non-zero reference gain"
        )
    servos = [s.metadata.get("voltage_servo", rec.metadata.get("voltage_servo")) for s in rec.segments]
    servo = servos[0] if servos and all(v == servos[0] for v in servos) else None
    if servo is not None:
        if (
            not isinstance(servo, dict)
            or not isinstance(servo.get("duty_per_kp_rad"), int | float)
            or not servo["duty_per_kp_rad"] > 0
        ):
            raise DatasetError(
                f"joint {joint!r}: voltage_servo must be an object with a positive duty_per_kp_rad "
                f"(and optional max_duty, current_limit), got {servo!r}"
            )
        if unit != "device" or len(vins) != len(rec.segments):
            servo = None  # the tie needs the device kp and the supply of every segment
    return OperatingPoints(
        unit, kp_ref, kd_ref or None, _reference(vins), logged["kp"], logged["kd"], logged["vin"], servo
    )


def default_knots(rec: Recording, joint: str) -> np.ndarray:
    """TABLE_KNOTS positions evenly spaced over a joint's measured range (a small span if it barely moved)."""
    j = rec.joint_index(joint)
    q = np.concatenate([s.q[:, j] for s in rec.segments])
    lo, hi = float(np.min(q)), float(np.max(q))
    if hi - lo < 1e-3:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, parameters.TABLE_KNOTS)


def full_params(family: Family, free: dict[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Kernel parameter array of `shape + (P,)`: the family's values where given, neutral elsewhere.

    Values broadcast from the left: a (C,) array fills (C, J) with one value per candidate.
    """
    out = np.empty(shape + (parameters.N_PARAMS,), np.float32)
    out[...] = np.asarray(parameters.neutral_vector(), np.float32)
    for name, value in free.items():
        assert name in family.params, f"{name} is not a parameter of {family.name}"
        v = np.asarray(value, np.float32)
        out[..., parameters.INDEX[name]] = v.reshape(v.shape + (1,) * (len(shape) - v.ndim))
    return out


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    """One process-wide pool per thread count, shared by every engine."""
    return ThreadPoolExecutor(threads, thread_name_prefix="rollout")


class RolloutEngine:
    """Holds one SegmentBatch on a Warp device and evaluates parameter candidates against it.

    Warp runs a CPU launch on one core; on the CPU the engine splits the candidates across `threads`
    launches in parallel threads (ctypes releases the GIL), so every core simulates.
    """

    def __init__(
        self,
        batch: SegmentBatch,
        device: str = "cpu",
        threads: int | None = None,
        effort_mode: str = "explicit",
    ):
        assert effort_mode in EFFORT_MODES, effort_mode
        self.batch = batch
        self.device = device
        self.mode_flags = F_IMPLICIT_EFFORT if effort_mode == "implicit" else 0
        self.threads = 1 if not str(device).startswith("cpu") else max(1, threads or os.cpu_count() or 1)
        self._pool = _pool(self.threads) if self.threads > 1 else None
        to: Callable[..., wp.array] = lambda a, dt=wp.float32: wp.array(a, dtype=dt, device=device)  # noqa: E731
        self._seg = (
            to(batch.knots.reshape(len(batch.joints), -1), wp.float32),
            to(batch.seg_joint, wp.int32),
            to(batch.seg_start, wp.int32),
            to(batch.seg_len, wp.int32),
            to(batch.seg_substeps, wp.int32),
            to(batch.seg_dt),
            to(batch.seg_inertia),
            to(batch.seg_gravity),
            to(batch.seg_ext),
            to(batch.seg_cmd0, wp.int32),
            to(batch.seg_free, wp.int32),
            to(batch.seg_kp),
            to(batch.seg_kd),
            to(batch.seg_q0),
            to(batch.seg_qd0),
            to(batch.q),
            to(batch.qd),
            to(batch.q_des),
            to(batch.qd_des),
            to(batch.tau_ff),
            to(batch.enable, wp.int32),
            to(batch.seg_kp_mult),
            to(batch.seg_kd_mult),
            to(batch.seg_sat_mult),
            to(batch.seg_vlim_mult),
            to(batch.seg_duty),
            to(batch.seg_max_duty),
            to(batch.seg_vin),
            to(batch.seg_imax),
            to(batch.seg_rmin),
            to(batch.seg_rmax),
            to(batch.seg_goal_rate),
        )
        self._dummy = wp.zeros((1, 1), dtype=wp.float32, device=device)

    def for_joint(self, j: int) -> RolloutEngine:
        """An engine over one joint's segments only, on the same device and in the same effort mode."""
        cache = self.__dict__.setdefault("_per_joint", {})
        if j not in cache:
            cache[j] = RolloutEngine(
                self.batch.select_joint(j),
                self.device,
                self.threads,
                "implicit" if self.mode_flags else "explicit",
            )
        return cache[j]

    def _launch(self, family: Family, params: np.ndarray, store: bool, open_loop: bool = False):
        assert params.ndim == 3 and params.shape[1:] == (len(self.batch.joints), parameters.N_PARAMS)
        n_c, n_s = params.shape[0], self.batch.n_segments
        p: wp.array = wp.array(np.ascontiguousarray(params, np.float32), dtype=wp.float32, device=self.device)
        sums = wp.zeros((n_c, n_s, 3), dtype=wp.float32, device=self.device)
        if store:
            traces = [
                wp.zeros((n_c, self.batch.n_samples), dtype=wp.float32, device=self.device) for _ in range(4)
            ]
        else:
            traces = [self._dummy] * 4
        wp.launch(
            rollout_kernel,
            dim=n_c * n_s,
            device=self.device,
            inputs=[
                p,
                *self._seg,
                family.flags | self.mode_flags | (F_OPEN_LOOP if open_loop else 0),
                int(store),
            ],
            outputs=[sums, *traces],
        )
        return sums, traces

    def _split(self, run, params: np.ndarray) -> list:
        """`run` on the candidates split across the engine's threads, one launch each (one when too few)."""
        n_c = params.shape[0]
        if self._pool is None or n_c < 2 * self.threads:
            return [run(params)]
        return list(
            self._pool.map(lambda idx: run(params[idx]), np.array_split(np.arange(n_c), self.threads))
        )

    def sums(self, family: Family, params: np.ndarray) -> np.ndarray:
        """Loss-only launch: (C, S, 3) sums of squared position error, squared velocity error, |position error|."""
        parts = self._split(lambda p: self._launch(family, p, store=False)[0].numpy(), params)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def traces(self, family: Family, params: np.ndarray, open_loop: bool = False) -> dict[str, np.ndarray]:
        """Launch storing traces: q, qd, computed and applied effort, each (C, N), plus the sums.

        open_loop=True feeds the actuator the measured state at every sample (efforts on the log's states).
        """
        parts = self._split(lambda p: self._traces(family, p, open_loop), params)  # a Jacobian on every core
        return (
            parts[0]
            if len(parts) == 1
            else {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}
        )

    def _traces(self, family: Family, params: np.ndarray, open_loop: bool) -> dict[str, np.ndarray]:
        sums, (q, qd, comp, app) = self._launch(family, params, store=True, open_loop=open_loop)
        return {
            "sums": sums.numpy(),
            "q": q.numpy(),
            "qd": qd.numpy(),
            "computed": comp.numpy(),
            "applied": app.numpy(),
        }
