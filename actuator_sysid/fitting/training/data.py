"""One joint's log as tensors (JointData), its gains and enable flags, and the envelope that contains it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from ...datasets.recording import Recording
from ...numbers import is_real
from ..net_inputs import segment_commands
from .options import NetFitError

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
