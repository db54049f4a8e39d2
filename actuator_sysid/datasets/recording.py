"""Canonical recording: the one in-memory shape every reader produces and every fit consumes.

All arrays are SI (rad, rad/s, N·m or m, m/s, N) on a uniform time grid per segment.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .errors import DatasetError
from .names import check_name

CHANNELS = ("q", "qd", "q_des", "qd_des", "tau_ff", "tau")
"""Per-sample channels, each an array of shape (T, J) in joint order."""


@dataclass
class JointInfo:
    """A joint and the load its actuator drives on the test bench (pendulum about q = 0 hanging down)."""

    name: str
    joint_type: str = "revolute"
    inertia: float = 0.0  # kg·m², load inertia about the joint excluding the point mass below
    mass: float = 0.0  # kg, point mass at com_distance
    com_distance: float = 0.0  # m
    gravity: float = 9.81  # m/s²

    @property
    def load_inertia(self) -> float:
        """Total load inertia seen by the actuator, without armature [kg·m²]."""
        return self.inertia + self.mass * self.com_distance**2

    @property
    def gravity_coeff(self) -> float:
        """m·g·l: the gravity torque is −gravity_coeff·sin(q) [N·m]."""
        return self.mass * self.gravity * self.com_distance


@dataclass
class Segment:
    """One contiguous stretch of samples on a uniform grid; arrays are (T, J) in recording joint order."""

    name: str
    t: np.ndarray  # (T,) seconds, strictly increasing
    q: np.ndarray
    qd: np.ndarray
    q_des: np.ndarray
    qd_des: np.ndarray
    tau_ff: np.ndarray
    tau: np.ndarray | None = None  # measured effort, when the log has it
    metadata: dict = field(default_factory=dict)  # e.g. {"kp": 20.0, "kd": 0.5}; per-joint load overrides
    # (T, J) bool: True where the actuator was driven (torque enabled), False where it swung freely; None: driven
    # throughout (or off throughout with metadata free_swing). BAM's per-entry torque_enable lands here.
    enable: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.t.shape[0])

    def driven(self, joint: int) -> np.ndarray:
        """(T,) bool: where the joint's actuator acted (False throughout a free_swing segment)."""
        if self.metadata.get("free_swing"):
            return np.zeros(self.n, bool)
        return np.ones(self.n, bool) if self.enable is None else np.asarray(self.enable[:, joint], bool)

    @property
    def dt(self) -> float:
        return float(np.median(np.diff(self.t))) if self.n > 1 else 0.0

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0]) if self.n > 1 else 0.0


@dataclass
class Recording:
    """Joints, segments and what we know about how the data was made."""

    joints: list[JointInfo]
    segments: list[Segment]
    source_format: str = "canonical"
    velocity_source: str = "measured"  # or the differentiation method, stated to the user
    warnings: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    def check_names(self, where: str = "") -> Recording:
        """The recording itself when every joint and segment name follows the name rule (datasets/names.py),
        else DatasetError naming the first that does not: names reach generated files."""
        check_names([j.name for j in self.joints], [s.name for s in self.segments], where)
        return self

    def joint_index(self, name: str) -> int:
        """Index of a joint by name, with a helpful error for an unknown one."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise DatasetError(f"unknown joint {name!r}; the recording has {self.joint_names}") from None

    @property
    def duration_s(self) -> float:
        return float(sum(s.duration for s in self.segments))

    @property
    def rate_hz(self) -> float:
        dts = [s.dt for s in self.segments if s.n > 1]
        return float(1.0 / np.median(dts)) if dts else 0.0

    def summary(self) -> dict:
        """The upload response body: what was read, in plain numbers, with the data-quality report."""
        return {
            "joints": self.joint_names,
            "segments": len(self.segments),
            "samples": int(sum(s.n for s in self.segments)),
            "duration_s": round(self.duration_s, 6),
            "rate_hz": round(self.rate_hz, 6),
            "source_format": self.source_format,
            "velocity_source": self.velocity_source,
            "has_effort": all(s.tau is not None for s in self.segments),
            "resampling": self.metadata.get("resampling"),
            "warnings": list(self.warnings),
            "quality": self.quality(),
        }

    def quality(self) -> dict:
        """The data-quality report (rate, gaps, coverage, limits, free swing, warnings); see quality.py."""
        from .quality import quality_report

        return quality_report(self)

    # --- persistence: one npz for arrays, one json for everything else ---

    def save(self, folder: Path) -> None:
        """Write the recording to `folder` (recording.json + arrays.npz)."""
        folder.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        segs = []
        for i, s in enumerate(self.segments):
            arrays[f"{i}/t"] = s.t
            for ch in CHANNELS:
                a = getattr(s, ch)
                if a is not None:
                    arrays[f"{i}/{ch}"] = a
            if s.enable is not None:
                arrays[f"{i}/enable"] = s.enable
            segs.append({"name": s.name, "metadata": s.metadata})
        np.savez_compressed(
            folder / "arrays.npz", allow_pickle=False, **arrays
        )  # numbers only, as `load` reads them
        meta = {
            "joints": [asdict(j) for j in self.joints],
            "segments": segs,
            "source_format": self.source_format,
            "velocity_source": self.velocity_source,
            "warnings": self.warnings,
            "metadata": self.metadata,
        }
        (folder / "recording.json").write_text(json.dumps(meta, indent=1))

    @classmethod
    def load(cls, folder: Path) -> Recording:
        """Read a recording written by `save`."""
        meta = json.loads((folder / "recording.json").read_text())
        with np.load(folder / "arrays.npz") as z:
            segments = []
            for i, sm in enumerate(meta["segments"]):
                a = {ch: z[f"{i}/{ch}"] for ch in CHANNELS if ch != "tau"}  # `save` writes every one of these
                tau = z[f"{i}/tau"] if f"{i}/tau" in z else None
                enable = z[f"{i}/enable"].astype(bool) if f"{i}/enable" in z else None
                segments.append(
                    Segment(
                        name=sm["name"],
                        t=z[f"{i}/t"],
                        q=a["q"],
                        qd=a["qd"],
                        q_des=a["q_des"],
                        qd_des=a["qd_des"],
                        tau_ff=a["tau_ff"],
                        tau=tau,
                        metadata=sm["metadata"],
                        enable=enable,
                    )
                )
        return cls(
            joints=[JointInfo(**j) for j in meta["joints"]],
            segments=segments,
            source_format=meta["source_format"],
            velocity_source=meta["velocity_source"],
            warnings=meta["warnings"],
            metadata=meta["metadata"],
        )

    def load_for(self, segment: Segment, joint: int) -> tuple[float, float]:
        """(load inertia, gravity coefficient m·g·l) for one joint in one segment; segment metadata may override."""
        info = self.joints[joint]
        over = segment.metadata.get("joints", {}).get(info.name, {})
        merged = JointInfo(**{**asdict(info), **{k: v for k, v in over.items() if k in asdict(info)}})
        return merged.load_inertia, merged.gravity_coeff


def check_names(joints: list[str], segments: list[str], where: str = "") -> None:
    """Every joint and segment name follows the name rule (datasets/names.py): the check every reader's
    recording passes (datasets/assemble.py) before any name can reach an export."""
    for name in joints:
        check_name(name, "joint name", where)
    for name in segments:
        check_name(name, "segment name", where)
