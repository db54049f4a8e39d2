"""Actuator networks fitted to a log: supervised on measured torque, or trained in the loop without it.

With torque in the log, the MLP learns torque from position-error and velocity histories at `input_idx`
(physics steps back, as Isaac Lab counts them) and the LSTM / GRU from the raw [q_des − q, qd] sequence. Without
torque, the net is first fitted to the inverse-dynamics torque of the known load (J·Δqd/dt + m·g·l·sin q,
the plant the kernel steps) and then trained in the loop: batched, differentiable rollouts of that plant
(semi-implicit Euler, consumer-semantics §F, no joint terms: the net holds the whole actuator) over windows
that restart from the log, loss on position and velocity as the parametric fits use. The DC-motor envelope
Isaac Lab clips the net with is the tightest one that contains the (velocity, torque) points, measured or
estimated. Segments split into train and validation as the parametric fits do; early stopping on the
validation loss; deterministic for a seed.

Gain normalisation: a log recorded at several controller gains (BAM's servo at firmware kp 100/200/800) is
a servo whose duty is clip(error_gain·kp·(q_des − q)): a net that sees only q_des − q cannot know kp. Each
segment's position error is therefore multiplied by kp_s / kp_ref before the net sees it, kp_ref the most
logged gain (by samples), so the fitted net, as exported, is the actuator at kp_ref; `at_gain` folds another
kp into the scales. A segment without a logged kp gets factor 1. Where a segment's per-sample torque-enable
flag is off (`Segment.enable`, or metadata free_swing for the whole segment) the actuator applies no torque.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, overload

import numpy as np
import torch

from ..datasets.recording import Recording
from ..models.families import get_family
from ..models.networks import (
    NET_FAMILIES,
    POS_ERROR,
    RECURRENT,
    NetSpec,
    NetStepper,
    as_recurrent,
    build_network,
    channels,
    check_inputs,
    count_parameters,
    mlp_input,
    recurrent_core,
)
from ..models.rollout import RolloutEngine, SegmentBatch, full_params
from ..numbers import is_real
from .net_inputs import INPUT_CHOICES, command_inputs, inputs_note, segment_commands
from .objective import VELOCITY_WEIGHT, pool_metrics
from .request import FitRequest, FitRequestError
from .result import Metrics, ModelFit, NetFit, SegmentMetrics, SplitMetrics

ProgressFn = Callable[[float, str], None]
ISAACLAB_CFG = {
    "mlp": "ActuatorNetMLPCfg",
    "lstm": "ActuatorNetLSTMCfg",
    "gru": "",
}  # "": Isaac Lab 3.0 has none
# bounds on every option that sizes work (issue 15): a request past one is refused, naming the limit
LIMITS = {
    "hidden_width": 1024,
    "hidden_layers": 8,
    "hidden_size": 1024,
    "num_layers": 4,
    "epochs": 100_000,
    "in_loop_epochs": 100_000,
    "patience": 100_000,
    "window": 10_000,
    "lstm_window": 10_000,
    "burn_in": 10_000,
    "batch_size": 65_536,
    "input_idx_length": 64,
    "input_idx_value": 1_000,
}


class NetFitError(FitRequestError):
    """A network fit that cannot run as asked (bad options, a log the mode cannot use)."""


@dataclass
class NetOptions:
    """Architecture and training budget of the actuator networks (small by default: CPU, seconds)."""

    input_idx: list[int] | None = None  # physics steps back (Isaac Lab's count); exclusive with history_ms
    history_ms: list[float] | None = None  # the MLP's history in time, at the log's rate (default HISTORY_MS)
    inner_fraction: float = 0.2  # watched by early stopping: whole segments (WHOLE_INNER+), else their ends
    input_order: str = "pos_vel"
    hidden: list[int] = field(default_factory=lambda: [32, 32])
    activation: str = "softsign"
    hidden_size: int = 16
    num_layers: int = 1
    epochs: int = 300
    patience: int = 60  # epochs without a better validation loss before stopping
    lr: float = 3e-3
    batch_size: int = 512  # supervised MLP
    window: int = 50  # samples per in-the-loop rollout window (truncated BPTT length)
    lstm_window: int = 100  # samples per supervised LSTM sequence
    burn_in: int = 20  # LSTM samples run on the log before the loss counts
    in_loop_epochs: int = 150
    in_loop_lr: float | None = None  # default: lr / 3 (MLP), lr / 30 (LSTM, whose state makes BPTT touchier)
    mode: str = "auto"  # "auto": torque when the log has it; "torque"; "in_the_loop"
    gain_normalise: bool = True  # position error × kp_s / kp_ref per segment when segments log their kp
    inputs: str | list[str] = "auto"  # "auto": the drive's commands too when the log has them; "error";
    # "commands"; or the channels themselves (models/networks.py INPUT_MEANING)

    @classmethod
    def from_dict(cls, d: dict | None) -> NetOptions:
        """Options from a request's `networks` object, every size bounded (LIMITS) and every type checked."""
        d = dict(d or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise NetFitError(f"unknown network option(s) {unknown}: choose from {sorted(known)}")
        for name in (
            "epochs",
            "patience",
            "batch_size",
            "window",
            "lstm_window",
            "burn_in",
            "in_loop_epochs",
            "hidden_size",
            "num_layers",
        ):
            if name in d:
                _bounded_int(
                    name, d[name], 0 if name == "burn_in" else 3 if name == "window" else 1, LIMITS[name]
                )
        if "hidden" in d:
            _bounded_list(
                "hidden",
                d["hidden"],
                LIMITS["hidden_layers"],
                "layer widths",
                "layers",
                "hidden width",
                1,
                LIMITS["hidden_width"],
            )
        if d.get("input_idx") is not None:
            _bounded_list(
                "input_idx",
                d["input_idx"],
                LIMITS["input_idx_length"],
                "physics-step lags",
                "entries",
                "input_idx entry",
                0,
                LIMITS["input_idx_value"],
            )
        if d.get("history_ms") is not None:
            if d.get("input_idx") is not None:
                raise NetFitError("give the network history as history_ms or input_idx, not both")
            v = d["history_ms"]
            if (
                not isinstance(v, list)
                or not 1 <= len(v) <= LIMITS["input_idx_length"]
                or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x <= 10_000 for x in v
                )
            ):
                raise NetFitError(
                    f"network history_ms must be a list of 1 to {LIMITS['input_idx_length']} times in ms "
                    f"between 0 and 10000, got {v!r}"
                )
        if "inner_fraction" in d:
            v = d["inner_fraction"]
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 0.5:
                raise NetFitError(f"network inner_fraction must be a number in [0, 0.5], got {v!r}")
        for name in ("lr", "in_loop_lr"):
            v = d.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1):
                raise NetFitError(f"network {name} must be a number in (0, 1], got {v!r}")
        for name in ("input_order", "activation", "mode"):
            if name in d and not isinstance(d[name], str):
                raise NetFitError(f"network {name} must be a string, got {d[name]!r}")
        if "gain_normalise" in d and not isinstance(d["gain_normalise"], bool):
            raise NetFitError(f"network gain_normalise must be true or false, got {d['gain_normalise']!r}")
        opts = cls(**d)
        if opts.mode not in ("auto", "torque", "in_the_loop"):
            raise NetFitError(f"network mode must be auto, torque or in_the_loop, got {opts.mode!r}")
        _check_inputs(opts.inputs)
        return opts


def _check_inputs(v: object) -> None:
    """Refuse a `networks.inputs` that is neither a layout choice nor a valid list of channels."""
    if isinstance(v, str) and v in INPUT_CHOICES:
        return
    try:
        if not isinstance(v, list) or not all(isinstance(c, str) for c in v):
            raise ValueError("not a list of channel names")
        check_inputs(v)
    except ValueError as e:
        raise NetFitError(
            f"network inputs must be one of {list(INPUT_CHOICES)} or a list of channels ({e}), got {v!r}"
        ) from None


def _bounded_int(name: str, v: object, lo: int, hi: int) -> None:
    """Refuse a network size that is not an integer in [lo, hi], naming the limit."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise NetFitError(f"network {name} must be an integer, got {v!r}")
    if not lo <= v <= hi:
        raise NetFitError(f"network {name} must be between {lo} and {hi} (limit {hi}), got {v}")


def _bounded_list(
    name: str, v: object, max_len: int, what: str, unit: str, item: str, lo: int, hi: int
) -> None:
    """Refuse a list option (layer widths, lags) that is empty, too long, or holds an integer outside [lo, hi]."""
    if not isinstance(v, list) or not 1 <= len(v) <= max_len:
        raise NetFitError(
            f"network {name} must be a list of 1 to {max_len} {what} (limit {max_len} {unit}), got {v!r}"
        )
    for x in v:
        _bounded_int(item, x, lo, hi)


# --- data of one joint ---


@dataclass
class JointData:
    """One joint's segments as float32 tensors, with the load the plant steps."""

    names: list[str]
    q: list[torch.Tensor]
    qd: list[torch.Tensor]
    q_des: list[torch.Tensor]
    tau: list[torch.Tensor] | None
    inertia: list[float]
    mgl: list[float]
    ext: list[float]
    free: list[bool]  # the actuator is off for the whole segment
    dt: list[float]  # physics dt
    on: list[torch.Tensor]  # (T,) float32, 1 where the actuator applies torque (torque enabled), else 0
    gain: list[float]  # factor on the position error the net sees: kp of the segment / kp_ref
    # samples at a segment's start that are history only (the end of the segment it continues in time):
    # the net sees them, nothing is scored on them, and a closed-loop rollout starts after them
    carried: list[int] = field(default_factory=list)
    cmd: list[torch.Tensor] = field(default_factory=list)  # (T, 4) COMMANDS: qd_des, tau_ff, kp, kd

    def __post_init__(self) -> None:
        self.carried = self.carried or [0] * len(self.names)
        self.cmd = self.cmd or [torch.zeros(q.shape[0], 4) for q in self.q]

    def torques(self) -> list[torch.Tensor]:
        """The torque of every segment, for training on it; NetFitError where the data was built without one."""
        if self.tau is None:
            raise NetFitError(
                "this joint's data carries no torque (tau 'none'): nothing to train the torque on"
            )
        return self.tau

    def subset(self, ids: list[int]) -> JointData:
        pick = lambda a: [a[i] for i in ids]  # noqa: E731
        return JointData(
            pick(self.names),
            pick(self.q),
            pick(self.qd),
            pick(self.q_des),
            None if self.tau is None else pick(self.tau),
            pick(self.inertia),
            pick(self.mgl),
            pick(self.ext),
            pick(self.free),
            pick(self.dt),
            pick(self.on),
            pick(self.gain),
            pick(self.carried),
            pick(self.cmd),
        )

    def cut(self, i: int, start: int, stop: int, carried: int = 0) -> JointData:
        """Samples start … stop − 1 of segment i as a one-segment JointData, the first `carried` history only."""
        sl = lambda a: [a[i][start:stop]]  # noqa: E731
        one = self.subset([i])
        return dataclasses.replace(
            one,
            q=sl(self.q),
            qd=sl(self.qd),
            q_des=sl(self.q_des),
            tau=None if self.tau is None else sl(self.tau),
            on=sl(self.on),
            carried=[carried],
            cmd=sl(self.cmd),
        )

    @staticmethod
    def joined(parts: list[JointData]) -> JointData:
        """The segments of several JointData, in order."""
        out = JointData(*([] for _ in range(12)))  # type: ignore[arg-type]
        out.tau = [] if parts and all(p.tau is not None for p in parts) else None
        for p in parts:
            for f in dataclasses.fields(JointData):
                v = getattr(p, f.name)
                if f.name == "tau":
                    if out.tau is not None and v is not None:
                        out.tau += v
                    continue
                getattr(out, f.name).extend(v)
        return out


def segment_kp(seg) -> float | None:
    """The controller gain a segment was logged at: metadata kp (BAM: also its file's bam.kp), None if unknown."""
    for v in (seg.metadata.get("kp"), (seg.metadata.get("bam") or {}).get("kp")):
        if is_real(v) and v > 0:
            return float(v)
    return None


def gain_reference(rec: Recording) -> tuple[float | None, str | None]:
    """(kp_ref, its units): the logged kp held by the most samples (ties: the lowest), None when fewer than two
    kps are logged."""
    counts: dict[float, int] = {}
    for seg in rec.segments:
        kp = segment_kp(seg)
        if kp is not None:
            counts[kp] = counts.get(kp, 0) + seg.n
    if len(counts) < 2:
        return None, None
    kp_ref = max(sorted(counts), key=lambda k: counts[k])
    units = {
        str(s.metadata.get("gain_units", "device" if "bam" in s.metadata else "SI"))
        for s in rec.segments
        if segment_kp(s) is not None
    }
    return kp_ref, units.pop() if len(units) == 1 else "mixed"


def segment_enable(seg, j: int) -> np.ndarray:
    """(T,) bool: where joint j's actuator was driven: `Segment.enable` ((T, J) or (T,); None: throughout),
    all off for a free-swing segment."""
    if seg.metadata.get("free_swing"):
        return np.zeros(seg.n, dtype=bool)
    enable = getattr(seg, "enable", None)
    if enable is None:
        return np.ones(seg.n, dtype=bool)
    enable = np.asarray(enable, dtype=bool)
    return enable[:, j] if enable.ndim == 2 else enable.reshape(seg.n)


def joint_data(
    rec: Recording,
    joint: str,
    substeps: int,
    tau: str = "measured",
    kp_ref: float | None = None,
    carry: int = 0,
) -> JointData:
    """Segments of one joint; tau "measured", "inverse_dynamics" or "none"; with kp_ref, each segment's position
    error gain kp / kp_ref (1 where the segment logs no kp). A segment that continues another in time (metadata
    `continues`, a time split) starts with up to `carry` samples of that one's end, as history (`carried`)."""
    data = _joint_data(rec, joint, substeps, tau, kp_ref)
    if not carry:
        return data
    names = [s.name for s in rec.segments]
    parts = []
    for i, seg in enumerate(rec.segments):
        before = seg.metadata.get("continues")
        if before not in names:
            parts.append(data.subset([i]))
            continue
        k = names.index(str(before))
        c = min(carry, data.q[k].shape[0])
        both = JointData.joined([data.subset([k]), data.subset([i])])
        n_prev = data.q[k].shape[0]
        glue = lambda a, s0=n_prev - c: [torch.cat([a[0][s0:], a[1]])]  # noqa: E731
        whole = dataclasses.replace(
            both.subset([1]),
            q=glue(both.q),
            qd=glue(both.qd),
            q_des=glue(both.q_des),
            on=glue(both.on),
            tau=None if both.tau is None else glue(both.tau),
            carried=[c],
            cmd=glue(both.cmd),
        )
        parts.append(whole)
    return JointData.joined(parts)


def _joint_data(rec: Recording, joint: str, substeps: int, tau: str, kp_ref: float | None) -> JointData:
    """joint_data without the carried history."""
    j = rec.joint_index(joint)
    f32 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float32))  # noqa: E731
    taus: list[torch.Tensor] = []
    out = JointData([], [], [], [], taus if tau != "none" else None, [], [], [], [], [], [], [])
    for seg in rec.segments:
        inertia, mgl = rec.load_for(seg, j)
        ext = float(
            seg.metadata.get("joints", {})
            .get(joint, {})
            .get("external_torque", seg.metadata.get("external_torque", 0.0))
        )
        out.names.append(seg.name)
        out.q.append(f32(seg.q[:, j]))
        out.qd.append(f32(seg.qd[:, j]))
        out.q_des.append(f32(seg.q_des[:, j]))
        out.inertia.append(inertia)
        out.mgl.append(mgl)
        out.ext.append(ext)
        enable = segment_enable(seg, j)
        out.free.append(not enable.any())
        out.on.append(f32(enable))
        kp = segment_kp(seg)
        out.gain.append(kp / kp_ref if kp_ref and kp is not None else 1.0)
        out.dt.append(seg.dt / substeps)
        out.cmd.append(torch.as_tensor(segment_commands(seg, j, joint)))
        if tau == "measured":
            if seg.tau is None:
                raise NetFitError(f"segment {seg.name!r} logs no torque (tau): fit the network in_the_loop")
            taus.append(f32(seg.tau[:, j]))
        elif tau == "inverse_dynamics":
            taus.append(f32(inverse_dynamics(seg.q[:, j], seg.qd[:, j], seg.dt, inertia, mgl, ext)))
    out.carried = [0] * len(out.names)
    return out


def inverse_dynamics(
    q: np.ndarray, qd: np.ndarray, dt: float, inertia: float, mgl: float, ext: float
) -> np.ndarray:
    """The torque the kernel's plant needs to go from sample k to k+1: J·(qd[k+1] − qd[k])/dt + m·g·l·sin q − ext."""
    acc = np.diff(qd, append=qd[-1:]) / dt
    return inertia * acc + mgl * np.sin(q) - ext


# --- envelope ---


def containing_envelope(qd: np.ndarray, tau: np.ndarray, margin: float = 0.02) -> dict[str, float]:
    """Tightest four-quadrant DC-motor envelope (§A.4) that contains every (velocity, torque) point.

    The effort limit is the largest |torque|; over a grid of stall efforts the smallest no-load speed that
    keeps every motoring point (torque and velocity of one sign) under the line is found, and the pair
    enclosing the least area over the observed speeds wins.
    """
    a = np.abs(tau)
    elim = float(max(a.max(), 1e-6) * (1 + margin))
    motoring = tau * qd > 0
    v, t = np.abs(qd[motoring]), a[motoring]
    vmax = float(max(np.abs(qd).max(), 1e-6))
    best: tuple[float, float, float] | None = None
    for sat in elim * np.geomspace(1.0 + 1e-3, 30.0, 60):
        vlim = float(np.max(sat * v / (sat - t))) * (1 + margin) if v.size else 0.0
        vlim = max(vlim, 1e-3)
        grid = np.linspace(0, vmax, 64)
        area = float(np.mean(np.minimum(sat * (1 - grid / vlim), elim)))
        if best is None or area < best[0] - 1e-12:
            best = (area, float(sat), vlim)
    assert best is not None  # the grid of stall efforts is never empty
    _, sat, vlim = best
    return {"saturation_effort": sat, "actuator_velocity_limit": vlim, "actuator_effort_limit": elim}


# --- plant and rollouts ---


def rollout(
    stepper: NetStepper,
    q0: torch.Tensor,
    qd0: torch.Tensor,
    q_des: torch.Tensor,
    inertia: torch.Tensor,
    mgl: torch.Tensor,
    ext: torch.Tensor,
    on: torch.Tensor,
    dt: torch.Tensor,
    substeps: int,
    measured: tuple[torch.Tensor, torch.Tensor] | None = None,
    forced: int | None = None,
    cmd: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Step B lanes through T samples: the net's effort, then the §F plant (no joint terms), `substeps`
    physics steps per sample with the command held. `on` (B, T) is 1 where the actuator's torque is enabled
    (0: it applies none, the net still runs). With `measured` (q, qd) the net sees the log (open loop): at
    every sample, or at the first `forced` ones (a carried history), closed loop after them. `cmd` (B, T, 4):
    the drive's COMMANDS per sample, for a net that reads them.

    Returns q, qd, applied of shape (B, T); q[:, 0] is the initial state.
    """
    q, qd = q0, qd0
    qs, qds, taus = [], [], []
    n = q_des.shape[1]
    for k in range(n):
        if measured is not None and (forced is None or k < forced):
            q, qd = measured[0][:, k], measured[1][:, k]
        qs.append(q)
        qds.append(qd)
        for r in range(substeps if k < n - 1 else 1):
            _, applied = stepper.step(q_des[:, k], q, qd, None if cmd is None else cmd[:, k])
            applied = applied * on[:, k]
            if r == 0:
                taus.append(applied)
            if k == n - 1:
                break
            qd = qd + dt * (applied - mgl * torch.sin(q) + ext) / inertia
            q = q + dt * qd
    return {"q": torch.stack(qs, 1), "qd": torch.stack(qds, 1), "applied": torch.stack(taus, 1)}


def _lanes(data: JointData, ids: list[int]) -> dict[str, torch.Tensor]:
    col = lambda name: torch.tensor([getattr(data, name)[i] for i in ids], dtype=torch.float32)  # noqa: E731
    return {
        "inertia": col("inertia"),
        "mgl": col("mgl"),
        "ext": col("ext"),
        "dt": col("dt"),
        "gain": col("gain"),
    }


def simulate_segments(
    spec: NetSpec, net: torch.nn.Module, data: JointData, substeps: int, open_loop: bool = False
) -> list[dict[str, np.ndarray]]:
    """Each segment rolled out from its first logged state with a freshly reset net (Isaac Lab reset); a segment
    with a carried history runs it on the log first and is returned from the sample after it (its own first).
    Segments of one length and one carried history step together as lanes of one rollout (the per-sample loop
    is the cost), each lane its own segment's."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i in range(len(data.names)):
        groups.setdefault((int(data.q[i].shape[0]), data.carried[i]), []).append(i)
    out: dict[int, dict[str, np.ndarray]] = {}
    with torch.no_grad():
        for (_n, carried), ids in groups.items():
            lanes = _lanes(data, ids)
            stepper = NetStepper(spec, net, len(ids), pos_gain=lanes["gain"])
            q = torch.stack([data.q[i] for i in ids])
            qd = torch.stack([data.qd[i] for i in ids])
            meas = (q, qd) if open_loop or carried else None
            tr = rollout(
                stepper,
                q[:, 0],
                qd[:, 0],
                torch.stack([data.q_des[i] for i in ids]),
                lanes["inertia"],
                lanes["mgl"],
                lanes["ext"],
                torch.stack([data.on[i] for i in ids]),
                lanes["dt"],
                substeps,
                meas,
                None if open_loop else carried + 1,
                torch.stack([data.cmd[i] for i in ids]),
            )
            for lane, i in enumerate(ids):
                out[i] = {k: v[lane, carried:].numpy().astype(np.float64) for k, v in tr.items()}
    return [out[i] for i in range(len(data.names))]


# --- training ---

RECURRENT_CARRY = 200  # samples of a time split's training part an LSTM / GRU runs before the validation part


def history_carry(spec: NetSpec, substeps: int) -> int:
    """Samples of history a net takes across a time split: its MLP history, or RECURRENT_CARRY to warm its
    state up."""
    return RECURRENT_CARRY if spec.kind in RECURRENT else max(spec.input_idx) // substeps


HISTORY_MS = [0.0, 20.0, 40.0]  # the MLP's default history: now, 20 ms and 40 ms back (BENCHMARKS.md)


def history_steps(opts: NetOptions, sample_dt: float, substeps: int) -> list[int]:
    """The MLP's input_idx in physics steps: given as such, else history_ms (default HISTORY_MS) at the log's
    sample interval, each lag the nearest whole sample (repeats dropped), times the decimation."""
    if opts.input_idx is not None:
        return list(opts.input_idx)
    ms = opts.history_ms if opts.history_ms is not None else HISTORY_MS
    samples = dict.fromkeys(int(round(t / 1000.0 / sample_dt)) for t in ms)
    if max(samples) > LIMITS["input_idx_value"] // substeps:
        raise NetFitError(
            f"network history_ms {ms} reaches {max(samples)} samples back at this log's "
            f"{1 / sample_dt:g} Hz; the limit is {LIMITS['input_idx_value']} physics steps"
        )
    return [k * substeps for k in samples]


def _lags(spec: NetSpec, substeps: int) -> list[int]:
    bad = [i for i in spec.input_idx if i % substeps]
    if bad:
        raise NetFitError(
            f"input_idx {spec.input_idx} counts physics steps; with decimation {substeps} the log "
            f"has a sample every {substeps} steps, so every index must be a multiple of {substeps}"
        )
    return [i // substeps for i in spec.input_idx]


def seg_channels(spec: NetSpec, data: JointData, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Segment i's unscaled input channels on the log: position error (times its gain), the velocity channel
    (T,) and the further channels (T, C − 2), as NetStepper computes them."""
    return channels(spec, data.q_des[i] - data.q[i], data.qd[i], data.cmd[i], data.gain[i])


def _mlp_table(spec: NetSpec, data: JointData, substeps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(features, torque) of every sample with a full history, scaled as the network sees them."""
    lags = _lags(spec, substeps)
    h = max(lags)
    xs, ys = [], []
    for i, (q, tau, free, on, carried) in enumerate(
        zip(data.q, data.torques(), data.free, data.on, data.carried, strict=True)
    ):
        if free or q.shape[0] <= h:
            continue
        err, vel, extra = seg_channels(spec, data, i)
        n = q.shape[0]
        # (B, H) histories whose columns are the lags themselves (commands: (B, C − 2, H))
        full_pos = torch.zeros(n - h, spec.history_length)
        full_vel = torch.zeros(n - h, spec.history_length)
        full_cmd = torch.zeros(n - h, extra.shape[1], spec.history_length)
        for lag, col in zip(lags, spec.input_idx, strict=True):
            full_pos[:, col] = err[h - lag : n - lag]
            full_vel[:, col] = vel[h - lag : n - lag]
            full_cmd[:, :, col] = extra[h - lag : n - lag]
        driven = on[h:] > 0  # where the torque was off the actuator applied none: nothing to learn there
        driven &= torch.arange(h, n) >= carried  # a carried history is input only
        xs.append(mlp_input(spec, full_pos, full_vel, full_cmd)[driven])
        ys.append(tau[h:][driven])
    if not xs:
        raise NetFitError("no segment is long enough for the network's input history (or all are free swing)")
    return torch.cat(xs), torch.cat(ys)


def _set_scales(spec: NetSpec, data: JointData) -> None:
    """Input scales 1 / std of each channel (a gain: 1 / its RMS, its spread across runs may be small), torque
    scale its std."""
    parts = [seg_channels(spec, data, i) for i in range(len(data.names))]
    err, vel = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    tau = torch.cat(data.tau) if data.tau else torch.ones(1)
    spec.pos_scale = float(1.0 / max(float(err.std()), 1e-4))
    spec.vel_scale = float(1.0 / max(float(vel.std()), 1e-4))
    spec.torque_scale = float(max(float(tau.std()), 1e-4))
    extra = torch.cat([p[2] for p in parts])
    for c, name in enumerate(spec.inputs[2:]):
        col = extra[:, c]
        spread = float(torch.sqrt(torch.mean(col**2))) if name in ("kp", "kd") else float(col.std())
        spec.command_scales[name] = float(1.0 / max(spread, 1e-4))


class _Stopper:
    """Keeps the best weights by validation loss; says when patience has run out."""

    def __init__(self, net: torch.nn.Module, patience: int) -> None:
        self.net, self.patience = net, patience
        self.best, self.best_epoch = math.inf, -1
        self.state: dict[str, torch.Tensor] | None = None

    def __call__(self, epoch: int, loss: float) -> bool:
        if loss < self.best * (1 - 1e-4):
            self.best, self.best_epoch = loss, epoch
            self.state = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
        return epoch - self.best_epoch >= self.patience

    def restore(self) -> None:
        if self.state is not None:
            self.net.load_state_dict(self.state)


def raw_inputs(spec: NetSpec, data: JointData, i: int) -> torch.Tensor:
    """(T, C) raw input channels of segment i, as an LSTM / GRU takes them (its scales are inside)."""
    err, vel, extra = seg_channels(spec, data, i)
    return torch.cat([err[:, None], vel[:, None], extra], 1)


def _rnn_sequences(
    spec: NetSpec, data: JointData, length: int, stride: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x (B, T, C) raw [gain·(q_des − q), qd, commands…], tau (B, T), torque-enabled mask (B, T)) windows over
    the segments."""
    xs, ts, ms = [], [], []
    for i, (q, tau, free, on, carried) in enumerate(
        zip(data.q, data.torques(), data.free, data.on, data.carried, strict=True)
    ):
        if free:
            continue
        on = on * (torch.arange(q.shape[0]) >= carried)  # a carried history is input only
        n = q.shape[0]
        starts = list(range(0, max(n - length, 0) + 1, stride)) if n >= length else []
        x = raw_inputs(spec, data, i)
        for s in starts:
            xs.append(x[s : s + length])
            ts.append(tau[s : s + length])
            ms.append(on[s : s + length])
    if not xs:
        raise NetFitError(f"no segment holds {length} samples for the recurrent net's training sequences")
    return torch.stack(xs), torch.stack(ts), torch.stack(ms)


def _rnn_forward(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Torque of every step of (B, T, C) sequences from a zero state: the same maths as stepping one at a time."""
    rnn = as_recurrent(net)
    y, _ = recurrent_core(rnn)(x * rnn.in_scale)
    return rnn.linear(y)[..., 0] * rnn.out_scale


def _masked_mse(err: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of err² where mask is 1 (the torque-enabled samples); 0 when none is."""
    return torch.sum(err**2 * mask) / torch.clamp(mask.sum(), min=1.0)


def _past(deadline: float | None) -> bool:
    """Whether the fit's wall-clock budget (a time.perf_counter() instant) has run out."""
    return deadline is not None and time.perf_counter() >= deadline


def _stopped_on(out_of_time: bool, patience_ran_out: bool) -> str:
    return "budget" if out_of_time else "early_stopping" if patience_ran_out else "epochs"


def train_supervised(
    spec: NetSpec,
    net: torch.nn.Module,
    train: JointData,
    val: JointData,
    opts: NetOptions,
    substeps: int,
    report: Callable[[int, float], None],
    deadline: float | None = None,
) -> dict:
    """Fit torque (measured or inverse-dynamics) by Adam with early stopping; returns the training record.

    Past `deadline` (perf_counter) the epoch ends after its current batch, is validated, and training stops
    with the best weights so far (stopped_on "budget")."""
    opt = torch.optim.Adam(net.parameters(), lr=opts.lr)
    stop = _Stopper(net, opts.patience)
    t0, seen, epoch = time.perf_counter(), 0, 0
    late = patient = False
    if spec.kind == "mlp":
        x, y = _mlp_table(spec, train, substeps)
        try:
            xv, yv = _mlp_table(spec, val, substeps)
        except NetFitError:  # no validation segment (or none long enough): watch the training loss
            xv, yv = x, y
        y_n, yv_n = y / spec.torque_scale, yv / spec.torque_scale
        gen = torch.Generator().manual_seed(0)
        for epoch in range(opts.epochs):
            perm = torch.randperm(x.shape[0], generator=gen)
            for b in range(0, x.shape[0], opts.batch_size):
                idx = perm[b : b + opts.batch_size]
                loss = torch.mean((net(x[idx])[:, 0] - y_n[idx]) ** 2)
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen += idx.numel()
                if late := _past(deadline):
                    break
            with torch.no_grad():
                vloss = float(torch.mean((net(xv)[:, 0] - yv_n) ** 2))
            report(epoch, vloss)
            if (patient := stop(epoch, vloss)) or late:
                break
    else:
        active = [q.shape[0] for q, f in zip(train.q, train.free, strict=True) if not f]
        length = min(opts.lstm_window, max(active, default=0))
        if length < 4:
            raise NetFitError(
                f"the {spec.kind.upper()} needs training segments (not free swing) of at least 4 samples"
            )
        x, y, m = _rnn_sequences(spec, train, length, max(length // 2, 1))
        b0 = min(opts.burn_in, length // 2)
        vlen = min([length] + [q.shape[0] for q, f in zip(val.q, val.free, strict=True) if not f])
        try:
            if vlen <= b0 + 1:
                raise NetFitError("inner split too short")
            xv, yv, mv = _rnn_sequences(spec, val, vlen, vlen)
            if not float(mv[:, b0:].sum()):
                raise NetFitError("no scored sample in the inner split's windows")
        except NetFitError:
            xv, yv, mv = x, y, m
        gen = torch.Generator().manual_seed(0)
        batch = max(8, opts.batch_size // 16)
        for epoch in range(opts.epochs):
            perm = torch.randperm(x.shape[0], generator=gen)
            for b in range(0, x.shape[0], batch):
                idx = perm[b : b + batch]
                pred = _rnn_forward(net, x[idx])
                loss = _masked_mse(((pred - y[idx]) / spec.torque_scale)[:, b0:], m[idx][:, b0:])
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen += idx.numel() * (x.shape[1] - b0)
                if late := _past(deadline):
                    break
            with torch.no_grad():
                vloss = float(
                    _masked_mse(((_rnn_forward(net, xv) - yv) / spec.torque_scale)[:, b0:], mv[:, b0:])
                )
            report(epoch, vloss)
            if (patient := stop(epoch, vloss)) or late:
                break
    stop.restore()
    secs = time.perf_counter() - t0
    return {
        "epochs": epoch + 1,
        "best_epoch": stop.best_epoch + 1,
        "validation_loss": stop.best,
        "samples_seen": seen,
        "seconds": round(secs, 3),
        "samples_per_s": round(seen / max(secs, 1e-9), 1),
        "stopped_on": _stopped_on(late, patient),
    }


def _windows(data: JointData, length: int, substeps: int, spec: NetSpec, ids: list[int] | None = None):
    """In-the-loop rollout windows of one length (the shorter of `length` and the shortest segment), sharing
    boundary samples and covering every segment to its end: start states, commands, targets and the MLP
    history before each start."""
    segs = [i for i in (ids if ids is not None else range(len(data.names))) if not data.free[i]]
    segs = segs or list(ids if ids is not None else range(len(data.names)))
    t = min([length] + [data.q[i].shape[0] for i in segs])
    if t < 3:
        raise NetFitError(f"in-the-loop training needs segments of at least 3 samples; the shortest has {t}")
    rows = []
    for i in segs:
        n = data.q[i].shape[0]
        starts = list(range(0, n - t + 1, t - 1))
        if starts[-1] + t < n:  # the tail: one more window that ends with the segment
            starts.append(n - t)
        rows += [(i, w0, w0 + t) for w0 in starts]
    h = spec.history_length
    pos_h, vel_h = torch.zeros(len(rows), h), torch.zeros(len(rows), h)
    cmd_h = torch.zeros(len(rows), spec.n_channels - 2, h)
    seg = {i: seg_channels(spec, data, i) for i in {i for i, _, _ in rows}}
    for r, (i, w0, _) in enumerate(rows):
        for c in range(h):  # column c: the step c+1 physics steps before the first one pushed
            k = w0 - math.ceil((c + 1) / substeps)
            if k >= 0:
                pos_h[r, c], vel_h[r, c], cmd_h[r, :, c] = seg[i][0][k], seg[i][1][k], seg[i][2][k]
    pick = lambda a: torch.stack([a[i][w0 : w0 + t] for i, w0, _ in rows])  # noqa: E731
    lanes = _lanes(data, [i for i, _, _ in rows])
    return {
        "q": pick(data.q),
        "qd": pick(data.qd),
        "q_des": pick(data.q_des),
        "on": pick(data.on),
        "pos_h": pos_h,
        "vel_h": vel_h,
        "cmd_h": cmd_h,
        "cmd": pick(data.cmd),
        "rows": rows,
        **lanes,
    }


def _window_loss(
    spec: NetSpec,
    net: torch.nn.Module,
    w: dict,
    substeps: int,
    sq: float,
    sqd: float,
    burn: int,
    data: JointData,
) -> torch.Tensor:
    stepper = NetStepper(spec, net, w["q"].shape[0], pos_gain=w["gain"])
    if spec.kind == "mlp":
        stepper.reset(w["pos_h"], w["vel_h"], w["cmd_h"])
    elif burn:
        with torch.no_grad():  # truncated BPTT: the LSTM / GRU state comes from the log before the window
            xs = []
            for i, w0, _ in w["rows"]:
                s = max(0, w0 - burn)
                seq = raw_inputs(spec, data, i)[s:w0]
                xs.append(torch.cat([torch.zeros(burn - (w0 - s), spec.n_channels), seq]))
            _, stepper.state = recurrent_core(net)(
                torch.stack(xs) * as_recurrent(net).in_scale, stepper.state
            )
    tr = rollout(
        stepper,
        w["q"][:, 0],
        w["qd"][:, 0],
        w["q_des"],
        w["inertia"],
        w["mgl"],
        w["ext"],
        w["on"],
        w["dt"],
        substeps,
        cmd=w["cmd"],
    )
    eq = (tr["q"][:, 1:] - w["q"][:, 1:]) / sq
    eqd = (tr["qd"][:, 1:] - w["qd"][:, 1:]) / sqd
    return torch.mean(eq**2) + VELOCITY_WEIGHT * torch.mean(eqd**2)


def _segment_loss(
    spec: NetSpec, net: torch.nn.Module, data: JointData, substeps: int, sq: float, sqd: float
) -> float:
    """The reported metric's loss: whole segments rolled out closed loop from their first state, freshly reset
    net, batched (shorter segments padded with their last command and masked)."""
    n = max(q.shape[0] for q in data.q)
    pad = lambda a: torch.stack([torch.cat([x, x[-1:].expand(n - x.shape[0])]) for x in a])  # noqa: E731
    mask = torch.stack(
        [
            (torch.arange(n) < q.shape[0]) & (torch.arange(n) >= c)
            for q, c in zip(data.q, data.carried, strict=True)
        ]
    )[:, 1:]
    lanes = _lanes(data, list(range(len(data.names))))
    q, qd = pad(data.q), pad(data.qd)
    carried = max(data.carried, default=0)  # lanes with less history run closed loop later than they could
    with torch.no_grad():
        tr = rollout(
            NetStepper(spec, net, q.shape[0], pos_gain=lanes["gain"]),
            q[:, 0],
            qd[:, 0],
            pad(data.q_des),
            lanes["inertia"],
            lanes["mgl"],
            lanes["ext"],
            pad(data.on),
            lanes["dt"],
            substeps,
            (q, qd) if carried else None,
            carried + 1,
            torch.stack([torch.cat([x, x[-1:].expand(n - x.shape[0], -1)]) for x in data.cmd]),
        )
    e = ((tr["q"][:, 1:] - q[:, 1:]) / sq) ** 2 + VELOCITY_WEIGHT * ((tr["qd"][:, 1:] - qd[:, 1:]) / sqd) ** 2
    loss = float(e[mask].mean())
    return loss if math.isfinite(loss) else math.inf


def train_in_loop(
    spec: NetSpec,
    net: torch.nn.Module,
    train: JointData,
    val: JointData,
    opts: NetOptions,
    substeps: int,
    report: Callable[[int, float], None],
    deadline: float | None = None,
) -> dict:
    """Truncated BPTT through batched differentiable plant rollouts over windows; early stopping on the
    validation segments rolled out whole (what the fit reports), checked every EVAL_EVERY epochs and once more
    when `deadline` (perf_counter) passes, which stops training with the best weights so far."""
    sq = max(float(torch.cat(train.q).std()), 1e-3)
    sqd = max(float(torch.cat(train.qd).std()), 1e-3)
    wt = _windows(train, opts.window, substeps, spec)
    burn = opts.burn_in if spec.kind == "lstm" else 0
    lr = opts.in_loop_lr or opts.lr / (3 if spec.kind == "mlp" else 30)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    stop = _Stopper(net, max(opts.patience // EVAL_EVERY, 2) * EVAL_EVERY)
    watched = val if val.names else train
    initial = _segment_loss(spec, net, watched, substeps, sq, sqd)
    stop(-1, initial)
    t0, seen, epoch = time.perf_counter(), 0, 0
    late, patient = _past(deadline), False  # no time left at all: the pretrained weights, unchanged
    for epoch in range(0 if late else opts.in_loop_epochs):
        loss = _window_loss(spec, net, wt, substeps, sq, sqd, burn, train)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        seen += wt["q"].numel() * substeps
        late = _past(deadline)
        if (epoch + 1) % EVAL_EVERY and epoch + 1 < opts.in_loop_epochs and not late:
            continue
        vloss = _segment_loss(spec, net, watched, substeps, sq, sqd)
        report(epoch, vloss)
        if (patient := stop(epoch, vloss)) or late:
            break
    stop.restore()
    secs = time.perf_counter() - t0
    return {
        "in_loop_initial_loss": initial,
        "in_loop_epochs": epoch + 1 if seen else 0,
        "in_loop_best_epoch": stop.best_epoch + 1,
        "in_loop_validation_loss": stop.best,
        "in_loop_steps_seen": seen,
        "in_loop_seconds": round(secs, 3),
        "in_loop_steps_per_s": round(seen / max(secs, 1e-9), 1),
        "window_samples": opts.window,
        "in_loop_stopped_on": _stopped_on(late, patient),
    }


EVAL_EVERY = 10  # in-the-loop epochs between validation rollouts of whole segments

# --- metrics ---


def trajectory_rows(data: JointData, sims: list[dict], val_names: set[str]) -> list[dict]:
    """Per-segment position/velocity errors of closed-loop rollouts, in objective.segment_metrics' shape."""
    rows = []
    for i, sim in enumerate(sims):
        c = data.carried[i]  # simulate_segments returns a segment from its own first sample
        eq = sim["q"][1:] - data.q[i][c + 1 :].numpy()
        eqd = sim["qd"][1:] - data.qd[i][c + 1 :].numpy()
        rows.append(
            {
                "segment": data.names[i],
                "samples": int(eq.size),
                "position_rmse": float(np.sqrt(np.mean(eq**2))),
                "position_mae": float(np.mean(np.abs(eq))),
                "velocity_rmse": float(np.sqrt(np.mean(eqd**2))),
                "split": "validation" if data.names[i] in val_names else "train",
            }
        )
    return rows


def _si_gain(seg: Any, key: str, joint: str) -> float | None:
    """A segment's logged gain for one joint in SI (a number, or a {joint: value} map), None where the log states
    none or states it in device units."""
    units = str(seg.metadata.get("gain_units", "device" if "bam" in seg.metadata else "SI"))
    v = seg.metadata.get(key)
    v = v.get(joint) if isinstance(v, Mapping) else v
    if units.lower() != "si" or not is_real(v):
        return None
    return float(v)


def _command(seg: Any, joint: str, j: int) -> np.ndarray | None:
    """What the drive was commanded, as torque on the log's samples: τ_ff plus, with SI gains in the log,
    kp·(q_des − q) + kd·(qd_des − qd); None where the log states neither (no gains in SI and no τ_ff)."""
    ff = np.asarray(seg.tau_ff[:, j], np.float64)
    kp, kd = _si_gain(seg, "kp", joint), _si_gain(seg, "kd", joint)
    if kp is None and not np.any(ff != 0):
        return None
    pd = (
        0.0
        if kp is None
        else kp * (seg.q_des[:, j] - seg.q[:, j]) + (kd or 0.0) * (seg.qd_des[:, j] - seg.qd[:, j])
    )
    return ff + pd


def recording_commands(rec: Recording, joint: str, names: list[str]) -> list[np.ndarray | None]:
    """The commanded torque (command_torque) of the named segments of one joint, for the torque baselines."""
    j = rec.joint_index(joint)
    by_name = {s.name: s for s in rec.segments}
    return [_command(by_name[n], joint, j) if n in by_name else None for n in names]


def torque_rows(
    names: list[str],
    applied: list[np.ndarray],
    tau: list[np.ndarray],
    val_names: set[str],
    commands: list[np.ndarray | None] | None = None,
) -> list[dict]:
    """Per-segment open-loop torque errors (the model fed the logged states) against the measured torque, and
    the trivial predictors' on the same samples: zero (the measured torque's RMS) and, where the log states
    it, the commanded torque (`commands`, aligned to the segment's end)."""
    rows = []
    for k, (name, a, t) in enumerate(zip(names, applied, tau, strict=True)):
        t = np.asarray(t, np.float64)
        e = np.asarray(a, np.float64) - t
        row = {
            "segment": name,
            "samples": int(e.size),
            "torque_rmse": float(np.sqrt(np.mean(e**2))),
            "torque_mae": float(np.mean(np.abs(e))),
            "torque_mean": float(np.mean(t)),  # of the measured torque: the pooled R² needs them
            "torque_std": float(np.std(t)),
            "zero_rmse": float(np.sqrt(np.mean(t**2))),
            "split": "validation" if name in val_names else "train",
        }
        c = None if commands is None else commands[k]
        if c is not None and len(c) >= t.size:
            row["command_rmse"] = float(
                np.sqrt(np.mean((np.asarray(c[len(c) - t.size :], np.float64) - t) ** 2))
            )
        rows.append(row)
    return rows


def pool_torque(rows: list[dict], torque_range: float) -> dict | None:
    """Sample-weighted torque RMSE of some segments, also as a fraction of the measured torque range."""
    if not rows:
        return None
    n = np.array([r["samples"] for r in rows], float)
    rmse = float(np.sqrt(np.sum(n * np.array([r["torque_rmse"] ** 2 for r in rows])) / n.sum()))
    out: dict[str, float | int | None] = {
        "torque_rmse": rmse,
        "torque_rmse_of_range": rmse / max(torque_range, 1e-12),
        "torque_mae": float(np.sum(n * np.array([r["torque_mae"] for r in rows])) / n.sum()),
        "segments": len(rows),
        "samples": int(n.sum()),
    }
    for base in ("zero_rmse", "command_rmse"):  # the trivial predictors, pooled as the model's error is
        if all(base in r for r in rows):
            out[base] = float(np.sqrt(np.sum(n * np.array([r[base] ** 2 for r in rows])) / n.sum()))
    if all("torque_std" in r for r in rows):  # R² = 1 − SSE / SST over the pooled measured torque
        mean = np.array([r["torque_mean"] for r in rows])
        grand = float(np.sum(n * mean) / n.sum())
        sst = float(np.sum(n * (np.array([r["torque_std"] for r in rows]) ** 2 + (mean - grand) ** 2)))
        out["torque_r2"] = 1.0 - rmse**2 * n.sum() / sst if sst > 0 else None
    return out


def split_metrics(rows: list[dict], pool) -> dict:
    """Pooled train and validation rows and the rows themselves (the torque metrics' JSON shape)."""
    return {
        "train": pool([r for r in rows if r["split"] == "train"]),
        "validation": pool([r for r in rows if r["split"] == "validation"]),
        "segments": rows,
    }


def trajectory_metrics(rows: list[dict]) -> Metrics:
    """A net's closed-loop errors (trajectory_rows) pooled per split, as the parametric fits report them."""

    def pooled(split: str) -> SplitMetrics | None:
        m = pool_metrics([r for r in rows if r["split"] == split])
        return None if m is None else SplitMetrics(**m)

    return Metrics(
        train=pooled("train"),
        validation=pooled("validation"),
        segments=tuple(SegmentMetrics(**r) for r in rows),
    )


# --- weights as JSON ---


def weights_to_json(net: torch.nn.Module) -> dict:
    """state_dict → {name: {"shape", "data"}}: float32 values written exactly (as float64 decimals)."""
    return {
        k: {"shape": list(v.shape), "data": v.detach().to(torch.float32).flatten().tolist()}
        for k, v in net.state_dict().items()
    }


NetEntry = NetFit | Mapping[str, Any]  # a fitted network: typed, or its JSON entry (what fit_network returns)


@overload
def at_gain(model: NetFit, kp: float) -> NetFit: ...
@overload
def at_gain(model: Mapping[str, Any], kp: float) -> dict: ...
def at_gain(model: NetEntry, kp: float) -> NetFit | dict:
    """A fitted, gain-normalised net entry refolded for controller gain `kp`: the factor kp / kp_ref goes into
    the MLP's pos_scale (Isaac Lab's cfg field) or the LSTM / GRU in_scale on q_des − q (the first layer's
    position input weights, equivalently), and kp_ref becomes kp. A typed entry gives a typed one, the JSON
    entry (what fit_network returns) its JSON."""
    net = model if isinstance(model, NetFit) else NetFit.from_json(model)
    spec = net.network
    if spec.get("kp_ref") is None:
        raise NetFitError(
            "this net was not gain-normalised (its log holds one kp or none): it has no kp to change"
        )
    if not (isinstance(kp, int | float) and math.isfinite(kp) and kp > 0):
        raise NetFitError(f"kp must be a positive number, got {kp!r}")
    f = float(kp) / float(spec["kp_ref"])
    network, params, weights = {**spec, "kp_ref": float(kp)}, dict(net.params), dict(net.weights)
    if spec["kind"] == "mlp":
        network["pos_scale"] = params["pos_scale"] = float(np.float32(spec["pos_scale"] * f))
    else:
        scale = list(weights["in_scale"]["data"])
        scale[0] = float(np.float32(scale[0] * f))
        weights["in_scale"] = {**weights["in_scale"], "data": scale}
    out = dataclasses.replace(net, network=network, params=params, weights=weights)
    return out if isinstance(model, NetFit) else copy.deepcopy(out.to_json())


def network_from_result(model: NetEntry) -> tuple[NetSpec, torch.nn.Module]:
    """The spec and the trained module of a fitted mlp/lstm/gru result entry."""
    network, weights = (
        (model.network, model.weights) if isinstance(model, NetFit) else (model["network"], model["weights"])
    )
    spec = NetSpec(**network)
    net = build_network(spec)
    state = {k: torch.tensor(v["data"], dtype=torch.float32).reshape(v["shape"]) for k, v in weights.items()}
    net.load_state_dict(state)
    return spec, net.eval()


# --- one joint, one kind ---


WHOLE_INNER = 6  # driven training segments from which early stopping watches whole ones (fewer: cut in time)


def inner_split(data: JointData, fraction: float, carry: int) -> tuple[JointData, JointData]:
    """The training data split for early stopping: with WHOLE_INNER or more driven training segments, `fraction` of
    them (rounded up; whole, evenly spaced) watch it, as the fit's own validation segments would; with fewer, each one is cut
    in time, its last `fraction` (starting with `carry` samples of history from before the cut) watching, the
    rest training. Segments too short to cut, and free-swing ones, train whole."""
    driven = [i for i in range(len(data.names)) if not data.free[i]]
    if fraction > 0 and len(driven) >= WHOLE_INNER:
        k = max(1, math.ceil(fraction * len(driven) - 1e-9))  # one of 7 watched alone proved too noisy
        held = {driven[j] for j in np.linspace(0, len(driven) - 1, k + 2)[1:-1].round().astype(int)}
        rest = [i for i in range(len(data.names)) if i not in held]
        return data.subset(rest), data.subset(sorted(held))
    fit, inner = [], []
    for i in range(len(data.names)):
        n = data.q[i].shape[0]
        cut = n - int(round(fraction * n))
        if data.free[i] or cut < 8 or n - cut < 8:
            fit.append(data.subset([i]))
            continue
        fit.append(data.cut(i, 0, cut, min(data.carried[i], cut)))
        c = min(carry, cut)
        inner.append(data.cut(i, cut - c, n, c))
        inner[-1].names[0] = f"{data.names[i]}@inner"
    return JointData.joined(fit), JointData.joined(inner)


def _train(
    spec: NetSpec,
    net: torch.nn.Module,
    train: JointData,
    opts: NetOptions,
    substeps: int,
    mode: str,
    label: str,
    progress: Callable[[float, str], None] | None,
    deadline: float | None,
) -> dict:
    """Torque pretraining, then (in the loop) closed-loop training; the training record of both phases. Early
    stopping watches an inner split of `train` (inner_split), never the fit's reported validation."""
    # the inner part's history: the MLP's, or an LSTM / GRU's burn-in (its windows warm up as in training)
    carry = history_carry(spec, substeps) if spec.kind == "mlp" else opts.burn_in
    train, val = inner_split(train, opts.inner_fraction, carry)

    def report(phase: str, span: tuple[float, float], total: int):
        def f(epoch: int, loss: float) -> None:
            if progress:
                progress(
                    span[0] + (span[1] - span[0]) * min((epoch + 1) / total, 1.0),
                    f"{label}: {phase} epoch {epoch + 1}, validation loss {loss:.4g}",
                )

        return f

    split = (0.0, 1.0) if mode == "torque" else (0.0, 0.3)
    pretrain = deadline
    if deadline is not None and mode == "in_the_loop":
        now = time.perf_counter()
        pretrain = now + 0.3 * max(deadline - now, 0.0)
    training = {
        "mode": mode,
        "torque_source": "measured" if mode == "torque" else "inverse dynamics of the load",
        "early_stopping": (
            "inner split: "
            + (
                f"the last {opts.inner_fraction:.0%} in time of {len(val.names)} training segment(s), history "
                "carried across the cut"
                if any(n.endswith("@inner") for n in val.names)
                else f"training segments {val.names}, held out of training"
            )
            + "; the reported validation is not used in training"
            if val.names
            else "the training loss (no training segment long enough for an inner split)"
        ),
        **train_supervised(
            spec, net, train, val, opts, substeps, report("torque", split, opts.epochs), pretrain
        ),
    }
    if mode == "in_the_loop":
        training |= train_in_loop(
            spec,
            net,
            train,
            val,
            opts,
            substeps,
            report("in the loop", (0.3, 1.0), opts.in_loop_epochs),
            deadline,
        )
        training["stopped_on"] = (
            "budget"
            if "budget" in (training["stopped_on"], training["in_loop_stopped_on"])
            else training["in_loop_stopped_on"]
        )
    return training


COARSE_HISTORY_SAMPLES = 4  # a default history reaching fewer log samples back than this is said to be coarse
STILL_FALLING = 0.9  # best epoch at or past this share of all epochs, run to their end: still improving


def history_text(input_idx: list[int], substeps: int, sample_dt: float) -> str:
    """The MLP's history as the user reads it: lags in log samples and in ms at the log's rate."""
    lags = [i // substeps for i in input_idx]
    ms = ", ".join(f"{k * sample_dt * 1000:.3g}" for k in lags)
    return f"lags {', '.join(map(str, lags))} samples ({ms} ms at {1 / sample_dt:.4g} Hz)"


def _history_warnings(opts: NetOptions, input_idx: list[int], substeps: int, sample_dt: float) -> list[str]:
    """The default history at a slow log: a few samples back only, said with how to ask for a longer span."""
    if opts.input_idx is not None or opts.history_ms is not None:
        return []
    reach = max(input_idx) // substeps
    if reach >= COARSE_HISTORY_SAMPLES:
        return []
    return [
        f"the MLP's default history ({', '.join(f'{t:g}' for t in HISTORY_MS)} ms) is "
        f"{history_text(input_idx, substeps, sample_dt)}: {reach} sample(s) back at this rate; a drive with "
        "slower dynamics may need a longer span (networks.history_ms, e.g. [0, 30, 60, 90]); compare them on the "
        "validation error"
    ]


def _state_history(
    rec: Recording, spec: NetSpec, opts: NetOptions, substeps: int, training: dict
) -> list[str]:
    """An MLP's history stated in its training record (lags in samples and ms) and, when short, a warning."""
    if spec.kind != "mlp":
        return []
    sample_dt = float(np.median([seg.dt for seg in rec.segments]))
    training["history"] = history_text(spec.input_idx, substeps, sample_dt)
    return _history_warnings(opts, spec.input_idx, substeps, sample_dt)


def _training_warnings(
    rec: Recording,
    training: dict,
    mode: str,
    has_validation: bool,
    kp_ref: float | None,
    gain_units: str | None,
) -> list[str]:
    """What the user should know about a net's training: budget stops, no validation, gain normalisation."""
    warnings: list[str] = []
    if training["stopped_on"] == "budget":
        warnings.append(
            f"training stopped on the fit's time budget after {training['epochs']} epochs"
            + (f" and {training['in_loop_epochs']} in the loop" if mode == "in_the_loop" else "")
            + ": the best weights so far; give budget.seconds more time or fewer epochs"
        )
    if training["stopped_on"] == "epochs" and training["best_epoch"] >= STILL_FALLING * training["epochs"]:
        warnings.append(
            f"training ran all {training['epochs']} epochs with its watched loss still falling (best at epoch "
            f"{training['best_epoch']}): early stopping never said stop; give more epochs (networks.epochs)"
        )
    if not has_validation:
        warnings.append(
            "no validation segment: every error is on training data (early stopping watched "
            + ("an inner split of it)" if training["early_stopping"].startswith("inner") else "its loss)")
        )
    if kp_ref is not None:
        kps = sorted({kp for seg in rec.segments if (kp := segment_kp(seg)) is not None})
        warnings.append(
            f"gain-normalised: the segments log kp {kps} ({gain_units} units); the net saw the "
            f"position error times kp / {kp_ref:g} and, as exported, is the actuator at kp = "
            f"{kp_ref:g} (the most logged); another kp folds into its position scale"
        )
    return warnings


def fit_network(
    rec: Recording,
    joint: str,
    kind: str,
    train_ids: list[int],
    val_ids: list[int],
    opts: NetOptions,
    substeps: int = 1,
    seed: int = 0,
    progress: Callable[[float, str], None] | None = None,
    deadline: float | None = None,
) -> dict:
    """Train one network for one joint; returns the result entry's JSON (params, network, weights, metrics, ...),
    as fit.json holds it (see net_fit)."""
    return net_fit(rec, joint, kind, train_ids, val_ids, opts, substeps, seed, progress, deadline).to_json()


def net_fit(
    rec: Recording,
    joint: str,
    kind: str,
    train_ids: list[int],
    val_ids: list[int],
    opts: NetOptions,
    substeps: int = 1,
    seed: int = 0,
    progress: Callable[[float, str], None] | None = None,
    deadline: float | None = None,
) -> NetFit:
    """Train one network for one joint; returns its typed result entry (params, network, weights, metrics, ...).

    `deadline` (a time.perf_counter() instant) bounds the training: past it, training stops with the best
    weights so far and the entry's training record says stopped_on "budget" (in the loop, the torque
    pretraining gets 30 % of the time left)."""
    has_tau = all(s.tau is not None for s in rec.segments)
    mode = opts.mode if opts.mode != "auto" else ("torque" if has_tau else "in_the_loop")
    if mode == "torque" and not has_tau:
        raise NetFitError(
            "network mode 'torque' needs a measured torque (tau) in every segment; "
            "use mode in_the_loop for logs without torque"
        )
    if kind in RECURRENT and substeps != 1:
        raise NetFitError(
            f"the {kind.upper()} steps once per physics step on the log's samples: fit it with decimation 1"
        )
    torch.manual_seed(seed)
    idx = history_steps(opts, float(np.median([seg.dt for seg in rec.segments])), substeps)
    inputs = command_inputs(rec, joint, opts.inputs, opts.gain_normalise)
    # a kp the net reads (itself or in the drive's law) is not folded into the position error as well
    normalise = opts.gain_normalise and not {"kp", "tau_cmd"} & set(inputs)
    kp_ref, gain_units = gain_reference(rec) if normalise else (None, None)
    spec = NetSpec(
        kind,
        input_idx=list(idx),
        input_order=opts.input_order,
        hidden=list(opts.hidden),
        activation=opts.activation,
        hidden_size=opts.hidden_size,
        num_layers=opts.num_layers,
        kp_ref=kp_ref,
        gain_units=gain_units,
        inputs=inputs,
    )
    if kind == "mlp":
        _lags(spec, substeps)
    tau = "measured" if mode == "torque" else "inverse_dynamics"
    data = joint_data(rec, joint, substeps, tau, kp_ref, carry=history_carry(spec, substeps))
    spec.sample_dt_s = float(np.median(data.dt))
    train = data.subset(train_ids)  # the validation segments are scored, never trained or stopped on
    _set_scales(spec, train)
    _set_envelope(spec, data, train_ids, mode)
    net = build_network(spec)
    training = _train(spec, net, train, opts, substeps, mode, f"{kind} {joint}", progress, deadline)
    warnings = _training_warnings(rec, training, mode, bool(val_ids), kp_ref, gain_units)
    warnings += _state_history(rec, spec, opts, substeps, training)
    if (note := inputs_note(inputs, opts.inputs)) is not None:
        training["inputs"] = list(inputs)
        warnings.append(note)
    net.eval()
    val_names = {data.names[i] for i in val_ids}
    sims = simulate_segments(spec, net, data, substeps)
    entry = NetFit(
        family=kind,
        isaaclab_cfg=ISAACLAB_CFG[kind],
        joint_terms=[],
        params={
            **spec.envelope(),
            **(
                {"pos_scale": spec.pos_scale, "vel_scale": spec.vel_scale, "torque_scale": spec.torque_scale}
                if kind == "mlp"
                else {}
            ),
        },
        network=spec.as_dict(),
        weights=weights_to_json(net),
        pos_error=POS_ERROR,
        training=training,
        metrics=trajectory_metrics(trajectory_rows(data, sims, val_names)),
        loss=float(training.get("in_loop_validation_loss", training["validation_loss"])),
        intervals={},
        correlation={},
        warnings=warnings,
        n_params=count_parameters(net),
        assumptions="closed loop: the load alone (no joint armature or friction; the net holds the actuator "
        "and whatever it learned of the joint's losses)",
    )
    if has_tau:
        torque_metrics, rng = _open_loop_torque(rec, joint, spec, net, substeps, val_names)
        entry = dataclasses.replace(entry, torque_metrics=torque_metrics, torque_range=rng)
    return entry


def _set_envelope(spec: NetSpec, data: JointData, train_ids: list[int], mode: str) -> None:
    """The DC-motor envelope the consumers clip the net with, just containing the training segments' driven
    samples (every segment's only where none trains driven)."""
    active = [i for i in train_ids if not data.free[i]] or [
        i for i in range(len(data.names)) if not data.free[i]
    ]
    driven = [data.on[i] > 0 for i in active]
    env = containing_envelope(
        torch.cat([data.qd[i][d] for i, d in zip(active, driven, strict=True)]).numpy(),
        torch.cat([data.torques()[i][d] for i, d in zip(active, driven, strict=True)]).numpy(),
        margin=0.02 if mode == "torque" else 0.05,
    )
    for k, v in env.items():
        setattr(spec, k, v)


def _open_loop_torque(
    rec: Recording, joint: str, spec: NetSpec, net: torch.nn.Module, substeps: int, val_names: set[str]
) -> tuple[dict, float]:
    """A net's open-loop torque errors (fed the logged states) against the measured torque, and its range."""
    meas = joint_data(rec, joint, substeps, "measured", spec.kp_ref, carry=history_carry(spec, substeps))
    open_loop = simulate_segments(spec, net, meas, substeps, open_loop=True)  # from each segment's own start
    taus = [t[c:].numpy() for t, c in zip(meas.torques(), meas.carried, strict=True)]
    rng = float(max(t.max() for t in taus) - min(t.min() for t in taus))
    commands = recording_commands(rec, joint, meas.names)
    rows = torque_rows(meas.names, [s["applied"] for s in open_loop], taus, val_names, commands)
    return split_metrics(rows, lambda r: pool_torque(r, rng)), rng


def simulate_net(rec: Recording, joint: str, model: NetEntry | ModelFit, decimation: int = 1) -> dict:
    """Closed-loop traces of a fitted network on every segment of one joint, like fit.simulate."""
    if isinstance(model, ModelFit) and not isinstance(model, NetFit):
        raise NetFitError(f"{model.family} is not a network")
    spec, net = network_from_result(model)
    data = joint_data(rec, joint, decimation, "none", spec.kp_ref, carry=history_carry(spec, decimation))
    sims = simulate_segments(spec, net, data, decimation)
    return {
        name: {"q": s["q"], "qd": s["qd"], "computed": s["applied"], "applied": s["applied"]}
        for name, s in zip(data.names, sims, strict=True)
    }


def fit_networks(
    rec: Recording,
    joints: list[str],
    kinds: list[str],
    train_ids: list[int],
    val_ids: list[int],
    options: dict | None,
    substeps: int,
    seed: int,
    progress: ProgressFn | None,
    span: tuple[float, float] = (0.0, 1.0),
    deadline: float | None = None,
) -> dict[str, dict[str, NetFit]]:
    """Every requested network kind for every joint: {joint: {kind: entry}}; progress within `span`; each net
    trains for 85 % of an equal share of the time left before `deadline` (perf_counter; the rest rolls it out
    for the metrics)."""
    opts = NetOptions.from_dict(options)
    for kind in kinds:
        assert kind in NET_FAMILIES, kind
    out: dict[str, dict[str, NetFit]] = {j: {} for j in joints}
    jobs = [(j, k) for j in joints for k in kinds]
    for n, (joint, kind) in enumerate(jobs):
        lo = span[0] + (span[1] - span[0]) * n / len(jobs)
        hi = span[0] + (span[1] - span[0]) * (n + 1) / len(jobs)

        def sub(frac: float, msg: str, lo=lo, hi=hi) -> None:
            if progress:
                progress(lo + (hi - lo) * frac, msg)

        share = None
        if deadline is not None:
            now = time.perf_counter()
            share = now + 0.85 * max(deadline - now, 0.0) / (len(jobs) - n)
        out[joint][kind] = net_fit(rec, joint, kind, train_ids, val_ids, opts, substeps, seed, sub, share)
    return out


# --- the fit API's hook ---


def check_request(rec: Recording, req: FitRequest) -> None:
    """Reject network options or logs the requested nets cannot use, before anything runs."""
    opts = NetOptions.from_dict(req.networks)  # every size bounded, even when no net is requested
    kinds = [m for m in req.families or [] if m in NET_FAMILIES]
    if not kinds:
        return
    if opts.mode == "torque" and not all(s.tau is not None for s in rec.segments):
        raise NetFitError(
            "network mode 'torque' needs a measured torque (tau) in every segment; "
            "use mode in_the_loop (or auto) for logs without torque"
        )
    for kind in [k for k in kinds if k in RECURRENT]:
        if req.decimation != 1:
            raise NetFitError(
                f"the {kind.upper()} steps once per physics step on the log's samples: fit it with "
                "decimation 1"
            )
    if "mlp" in kinds and rec.segments:
        idx = history_steps(opts, float(np.median([s.dt for s in rec.segments])), req.decimation)
        _lags(
            NetSpec("mlp", input_idx=list(idx), input_order=opts.input_order, activation=opts.activation),
            req.decimation,
        )


def _parametric_torque(
    rec: Recording, req: FitRequest, joint: str, fam_name: str, model: ModelFit, val_names: set[str]
) -> tuple[list[dict], dict]:
    """Open-loop torque rows of a parametric model: the family's effort on the logged states (F_OPEN_LOOP)."""
    family = get_family(fam_name)
    if model.joint_terms is not None:
        family = family.with_terms(tuple(model.joint_terms))
    knots = None if model.table_positions is None else np.asarray([model.table_positions])
    batch = SegmentBatch.from_recording(
        rec, [joint], substeps=req.decimation, knots=knots, logged_gains=req.use_logged_gains
    )
    cols = {n: np.array([[model.params[n]]]) for n in family.params}
    tr = RolloutEngine(batch, req.device, effort_mode=req.effort_mode).traces(
        family, full_params(family, cols, (1, 1)), open_loop=True
    )
    j = rec.joint_index(joint)
    names = [batch.seg_names[s] for s in range(batch.n_segments)]
    applied = [tr["applied"][0, batch.segment_slice(s)] for s in range(batch.n_segments)]
    taus = []
    for n in names:
        seg = rec.segments[[x.name for x in rec.segments].index(n)]
        if seg.tau is None:  # add_networks asks only when every segment logs torque
            raise NetFitError(f"segment {n!r} logs no torque (tau): no open-loop torque comparison")
        taus.append(seg.tau[:, j])
    rows = torque_rows(names, applied, taus, val_names, recording_commands(rec, joint, names))
    rng = float(max(t.max() for t in taus) - min(t.min() for t in taus))
    return rows, split_metrics(rows, lambda r: pool_torque(r, rng))


def _position_error(m: ModelFit, split: str, metric: str) -> float | None:
    """One pooled error of a fit on the train or validation segments, None where it has none."""
    pooled = m.metrics.validation if split == "validation" else m.metrics.train
    return None if pooled is None else getattr(pooled, metric)


def _position_rmse(models: Mapping[str, ModelFit], split: str, family: str) -> float:
    """A family's pooled position RMSE on the train or validation segments (inf where it has none), to rank by."""
    err = _position_error(models[family], split, "position_rmse")
    return math.inf if err is None else err


def _torque_error(m: ModelFit, split: str) -> float | None:
    """A fit's pooled open-loop torque RMSE on the train or validation segments, None where it has none."""
    return ((m.torque_metrics or {}).get(split) or {}).get("torque_rmse")


def _comparison(net: NetFit, parametric: ModelFit, split: str, has_tau: bool) -> dict:
    """A net against the best parametric model on the same segments: closed loop and, with torque, open loop."""
    return {
        "parametric_family": parametric.family,
        "split": split,
        **{
            metric: {
                "network": _position_error(net, split, metric),
                "parametric": _position_error(parametric, split, metric),
            }
            for metric in ("position_rmse", "velocity_rmse")
        },
        **(
            {
                "torque_rmse": {
                    "network": _torque_error(net, split),
                    "parametric": _torque_error(parametric, split),
                }
            }
            if has_tau
            else {}
        ),
    }


def add_networks(
    rec: Recording,
    req: FitRequest,
    joints: list[str],
    train_ids: list[int],
    val_ids: list[int],
    fits: dict[str, dict[str, ModelFit]],
    progress: ProgressFn | None,
    deadline: float | None = None,
) -> bool:
    """Fit the requested nets into fits[joint] (family → fit), each compared with the best parametric model on
    the same validation segments: closed loop (position) and, with measured torque, open loop (torque), which
    the parametric fits then carry too. Training ends by `deadline` (perf_counter; the fit's budget.seconds);
    returns whether that cut any net short."""
    kinds = [m for m in req.families or [] if m in NET_FAMILIES]
    start = 1 - len(kinds) / len(req.families or kinds)
    fitted = fit_networks(
        rec,
        joints,
        kinds,
        train_ids,
        val_ids,
        req.networks,
        req.decimation,
        req.seed,
        progress,
        (start, 0.99),
        deadline,
    )
    val_names = {rec.segments[i].name for i in val_ids}
    has_tau = all(s.tau is not None for s in rec.segments)
    split = "validation" if val_ids else "train"
    for joint in joints:
        models = fits[joint]
        parametric = [f for f in models if f not in NET_FAMILIES]
        if has_tau:
            for f in parametric:
                models[f] = dataclasses.replace(
                    models[f], torque_metrics=_parametric_torque(rec, req, joint, f, models[f], val_names)[1]
                )
        # the parametric model a net is set against: the best by the error the joint is ranked by
        by_torque = lambda f, m=models: _torque_error(m[f], split) or math.inf  # noqa: E731
        best = min(
            parametric, key=by_torque if has_tau else partial(_position_rmse, models, split), default=None
        )
        for kind, entry in fitted[joint].items():
            models[kind] = (
                entry
                if best is None
                else dataclasses.replace(entry, comparison=_comparison(entry, models[best], split, has_tau))
            )
    return any(e.training["stopped_on"] == "budget" for kinds_ in fitted.values() for e in kinds_.values())
