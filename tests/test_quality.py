"""The data-quality report: numbers and plain-language warnings on recordings with known flaws."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from actuator_sysid.datasets import JointInfo, Recording, Segment, read_log, write_table
from actuator_sysid.datasets.quality import quality_report


def _seg(name: str, q_des: np.ndarray, rate: float, tau: np.ndarray | None = None, **meta) -> Segment:
    n = q_des.size
    t = np.arange(n) / rate
    q = q_des[:, None].copy()
    qd = np.gradient(q, t, axis=0)
    z = np.zeros_like(q)
    return Segment(
        name, t, q, qd, q_des[:, None].copy(), z, z.copy(), None if tau is None else tau[:, None], dict(meta)
    )


def _chirp(n: int, rate: float, f0: float = 0.2, f1: float = 5.0) -> np.ndarray:
    t = np.arange(n) / rate
    T = t[-1]
    return 0.5 * np.sin(2 * math.pi * (f0 + (f1 - f0) * t / (2 * T)) * t)


def test_chirp_band_free_swing_and_clean_log() -> None:
    rate = 200.0
    segs = [_seg("chirp", _chirp(4000, rate), rate), _seg("drop", np.zeros(400), rate, free_swing=True)]
    segs[1].q[:, 0] = 0.3 * np.exp(-np.arange(400) / 100) * np.cos(np.arange(400) / 10)
    segs[1].qd[:] = np.gradient(segs[1].q, segs[1].t, axis=0)
    rec = Recording([JointInfo("j")], segs)
    rep = quality_report(rec)
    lo, hi = rep["joints"]["j"]["excitation_band_hz"]
    assert lo < 0.5 and 4.0 < hi < 6.0
    assert rep["free_swing_segments"] == ["drop"] and rep["rate_hz"] == pytest.approx(200)
    assert rep["warnings"] == []
    assert rec.summary()["quality"]["joints"]["j"]["excitation_band_hz"] == [lo, hi]


def test_warnings_for_a_poor_log(tmp_path: Path) -> None:
    rate = 40.0
    q_des = 57.3 * 0.8 * np.sin(2 * math.pi * 0.5 * np.arange(160) / rate)  # degrees, one sine, slow rate
    rec = Recording([JointInfo("hip")], [_seg("a", q_des, rate)])
    write_table(rec, tmp_path / "log.csv", sidecar=False)
    back = read_log(tmp_path / "log.csv")
    text = " | ".join(back.summary()["quality"]["warnings"])
    assert "no free-swing segment: friction and armature will be poorly separated" in text
    assert "positions look like degrees" in text
    assert "excitation covers only" in text and "sample rate is 40 Hz" in text and "only 3.98 s" in text


def test_effort_and_velocity_limits_stated_and_estimated(tmp_path: Path) -> None:
    rate = 200.0
    q_des = _chirp(2000, rate)
    tau = np.clip(3 * np.sin(np.arange(2000) / 20), -2.0, 2.0)  # saturates at 2 N·m
    rec = Recording([JointInfo("j")], [_seg("a", q_des, rate, tau=tau)])
    est = quality_report(rec)["joints"]["j"]["effort"]
    assert est["limit"] == pytest.approx(2.0) and "estimated" in est["limit_source"]
    assert est["fraction_at_limit"] == pytest.approx(np.mean(np.abs(tau) >= 0.98 * 2.0))
    assert any("effort is at its limit" in w for w in quality_report(rec)["warnings"])
    write_table(rec, tmp_path / "log.csv", sidecar=False)
    (tmp_path / "log.json").write_text(json.dumps({"limits": {"j": {"effort": 2.5, "velocity": 100.0}}}))
    rep = read_log(tmp_path / "log.csv").summary()["quality"]["joints"]["j"]
    assert rep["effort"]["limit"] == 2.5 and rep["effort"]["limit_source"] == "sidecar"
    assert rep["effort"]["fraction_at_limit"] == 0.0 and rep["velocity_limit"]["fraction_at_limit"] == 0.0


def test_jitter_gaps_and_resampling_are_reported(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.004, 0.006, 600))
    t[300:] += 1.0  # a gap
    q = np.sin(t)
    lines = ["t,a/q,a/q_des"] + [f"{float(a)!r},{float(b)!r},{float(b)!r}" for a, b in zip(t, q, strict=True)]
    (tmp_path / "j.csv").write_text("\n".join(lines) + "\n")
    summary = read_log(tmp_path / "j.csv").summary()
    q = summary["quality"]
    assert q["gaps"] == {"count": 1, "longest_s": pytest.approx(1.0, abs=0.01)}
    assert (
        summary["resampling"]["segments"] == ["0", "1"]
        and "linear interpolation" in summary["resampling"]["method"]
    )
    assert all(s["resampled"] and s["jitter_ms"] > 0.3 for s in q["segments"])
    text = " | ".join(q["warnings"])
    assert "1 time gap(s)" in text and "2 of 2 segment(s) (0, 1)" in text and "were resampled" not in text
    assert sum("resampled by linear interpolation" in w for w in q["warnings"]) == 1
