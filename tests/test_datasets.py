"""Canonical table reader/writer (docs/log-formats.md §1): real files in tmp_path, no mocks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import raises_dataset_error as _raises

from actuator_sysid.datasets import (
    JointInfo,
    Recording,
    Segment,
    read_log,
    read_table,
    sidecar_for,
    write_table,
)
from actuator_sysid.datasets.canonical import VELOCITY_METHOD

RATE = 200.0


def _long_frame(n: int = 50, joints: tuple[str, ...] = ("hip", "knee"), qd: bool = True, tau: bool = True):
    """A long-form table: sine positions, one row per joint per sample."""
    t = np.arange(n) / RATE
    rows = []
    for k, tk in enumerate(t):
        for j, name in enumerate(joints):
            row = {"t": tk, "joint": name, "q": math.sin(tk + j), "q_des": 0.1 * k}
            if qd:
                row["qd"] = math.cos(tk + j)
            if tau:
                row["tau"] = 2.0 * j + k
            rows.append(row)
    return pd.DataFrame(rows)


def _wide_frame(n: int = 50) -> pd.DataFrame:
    """A wide-form table: hip has qd and tau_ff, knee only q and q_des."""
    t = np.arange(n) / RATE
    return pd.DataFrame(
        {
            "t": t,
            "hip/q": np.sin(t),
            "hip/qd": np.cos(t),
            "hip/q_des": np.zeros(n),
            "hip/tau_ff": np.full(n, 0.5),
            "knee/q": 2 * np.sin(t),
            "knee/q_des": np.ones(n),
        }
    )


def _write_csv(tmp_path: Path, frame: pd.DataFrame, name: str = "log.csv") -> Path:
    """Write a frame as CSV and return its path."""
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def _csv_text(tmp_path: Path, text: str, name: str = "log.csv") -> Path:
    """Write raw CSV text and return its path."""
    path = tmp_path / name
    path.write_text(text)
    return path


def _simple_csv(n: int = 20, t: np.ndarray | None = None) -> str:
    """Wide one-joint CSV text, so a test can edit single cells."""
    t = np.arange(n) / RATE if t is None else t
    return "t,a/q,a/q_des\n" + "".join(f"{float(tk)!r},{0.01 * k!r},0.0\n" for k, tk in enumerate(t))


# ------------------------------------------------------------------------------------------- reading


def test_long_csv(tmp_path: Path) -> None:
    rec = read_log(_write_csv(tmp_path, _long_frame()))
    assert rec.source_format == "canonical-csv-long"
    assert rec.joint_names == ["hip", "knee"]
    assert rec.velocity_source == "measured"
    assert len(rec.segments) == 1 and rec.segments[0].name == "0"
    s = rec.segments[0]
    assert s.q.shape == (50, 2) and s.q.dtype == np.float64
    np.testing.assert_allclose(s.q[:, 1], np.sin(s.t + 1))
    np.testing.assert_allclose(s.qd[:, 0], np.cos(s.t))
    np.testing.assert_allclose(s.tau[3], [3.0, 5.0])
    np.testing.assert_array_equal(s.qd_des, 0.0)
    np.testing.assert_array_equal(s.tau_ff, 0.0)
    assert rec.rate_hz == pytest.approx(RATE)
    assert rec.warnings == []


def test_long_csv_rows_grouped_by_joint(tmp_path: Path) -> None:
    frame = _long_frame().sort_values(["joint", "t"], kind="stable")
    rec = read_log(_write_csv(tmp_path, frame))
    np.testing.assert_allclose(rec.segments[0].q[:, 0], np.sin(rec.segments[0].t))


def test_wide_csv(tmp_path: Path) -> None:
    rec = read_log(_write_csv(tmp_path, _wide_frame()))
    assert rec.source_format == "canonical-csv-wide"
    assert rec.joint_names == ["hip", "knee"]
    s = rec.segments[0]
    assert s.tau is None
    np.testing.assert_allclose(s.tau_ff[:, 0], 0.5)
    np.testing.assert_allclose(s.tau_ff[:, 1], 0.0)
    np.testing.assert_allclose(s.q_des[:, 1], 1.0)
    np.testing.assert_allclose(s.qd[:, 0], np.cos(s.t))  # measured
    np.testing.assert_allclose(s.qd[:, 1], 2 * np.cos(s.t), atol=1e-4)  # differentiated
    assert "measured for ['hip']" in rec.velocity_source and "['knee']" in rec.velocity_source


@pytest.mark.parametrize("form", ["long", "wide"])
def test_parquet(tmp_path: Path, form: str) -> None:
    frame = _long_frame() if form == "long" else _wide_frame()
    path = tmp_path / "log.parquet"
    frame.to_parquet(path, index=False)
    rec = read_log(path)
    assert rec.source_format == f"canonical-parquet-{form}"
    assert rec.joint_names == ["hip", "knee"]
    assert rec.segments[0].n == 50
    # detection is by content, not by name
    assert read_table(path.read_bytes(), "upload.bin").source_format == f"canonical-parquet-{form}"


def test_sidecar_degrees_and_loads(tmp_path: Path) -> None:
    n = 40
    t = np.arange(n) / RATE
    frame = pd.DataFrame(
        {"t": t, "arm/q": np.full(n, 90.0), "arm/qd": np.full(n, 180.0), "arm/q_des": np.full(n, 45.0)}
    )
    frame["slide/q"] = 0.25
    frame["slide/q_des"] = 0.5
    path = _write_csv(tmp_path, frame)
    side = {
        "angle_unit": "deg",
        "robot": "bench-1",
        "joints": {
            "arm": {"inertia": 0.01, "mass": 0.5, "com_distance": 0.1},
            "slide": {"type": "prismatic", "gravity": 0.0},
        },
        "segments": {"0": {"kp": 20.0, "kd": 0.5, "joints": {"arm": {"mass": 1.0}}}},
    }
    (tmp_path / "log.json").write_text(json.dumps(side))
    rec = read_log(path)
    s = rec.segments[0]
    np.testing.assert_allclose(s.q[:, 0], math.pi / 2)
    np.testing.assert_allclose(s.qd[:, 0], math.pi)
    np.testing.assert_allclose(s.q_des[:, 0], math.pi / 4)
    np.testing.assert_allclose(s.q[:, 1], 0.25)  # prismatic: metres, untouched
    arm, slide = rec.joints
    assert arm == JointInfo("arm", "revolute", 0.01, 0.5, 0.1, 9.81)
    assert slide.joint_type == "prismatic" and slide.gravity == 0.0
    assert s.metadata["kp"] == 20.0
    assert rec.load_for(s, 0) == pytest.approx((0.01 + 1.0 * 0.01, 1.0 * 9.81 * 0.1))
    assert rec.metadata["robot"] == "bench-1"


def test_sidecar_beside_with_full_name_and_explicit(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    (tmp_path / "log.csv.json").write_text(json.dumps({"segments": {"0": {"kp": 3.0}}}))
    assert read_log(path).segments[0].metadata == {"kp": 3.0}
    other = tmp_path / "meta.json"
    other.write_text(json.dumps({"segments": {"0": {"kp": 7.0}}}))
    assert read_log(path, sidecar=other).segments[0].metadata == {"kp": 7.0}
    rec = read_table(path.read_bytes(), "log.csv", metadata={"segments": {"0": {"kd": 1.0}}})
    assert rec.segments[0].metadata == {"kd": 1.0}


def test_degrees_warning(tmp_path: Path) -> None:
    n = 40
    t = np.arange(n) / RATE
    frame = pd.DataFrame({"t": t, "a/q": np.linspace(-90, 90, n), "a/q_des": np.zeros(n)})
    rec = read_log(_write_csv(tmp_path, frame))
    assert any('declare "angle_unit": "deg"' in w and "'a'" in w for w in rec.warnings)


def test_segment_column(tmp_path: Path) -> None:
    parts = []
    for name, n in (("warmup", 20), ("7", 30), ("chirp", 15)):
        f = _long_frame(n)
        f["segment"] = name
        parts.append(f)
    rec = read_log(_write_csv(tmp_path, pd.concat(parts)))  # t restarts at 0 in every segment
    assert [s.name for s in rec.segments] == ["warmup", "7", "chirp"]
    assert [s.n for s in rec.segments] == [20, 30, 15]


def test_time_gap_segmentation(tmp_path: Path) -> None:
    t = np.concatenate([np.arange(30), 40 + np.arange(25), 100 + np.arange(12)]) / RATE
    rec = read_log(_csv_text(tmp_path, _simple_csv(t=t)))
    assert [s.name for s in rec.segments] == ["0", "1", "2"]
    assert [s.n for s in rec.segments] == [30, 25, 12]
    assert rec.segments[1].t[0] == pytest.approx(40 / RATE)


def test_qd_differentiated_from_sine(tmp_path: Path) -> None:
    n, w = 400, 2 * math.pi * 1.5
    t = np.arange(n) / RATE
    frame = pd.DataFrame({"t": t, "j/q": np.sin(w * t), "j/q_des": np.zeros(n)})
    rec = read_log(_write_csv(tmp_path, frame))
    assert rec.velocity_source == VELOCITY_METHOD
    assert (
        "second-order central differences" in rec.velocity_source and "numpy.gradient" in rec.velocity_source
    )
    assert any("no qd" in w for w in rec.warnings)
    err = np.abs(rec.segments[0].qd[:, 0] - w * np.cos(w * t))
    assert err.max() < 2e-3 * w  # O(h²): (w h)² / 6 ≈ 3.7e-4 relative in the interior, ends second-order too


def test_resamples_jittered_timestamps(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 300
    t = (np.arange(n) + rng.uniform(-0.2, 0.2, n)) / RATE
    frame = pd.DataFrame({"t": t, "j/q": np.sin(3 * t), "j/qd": 3 * np.cos(3 * t), "j/q_des": t})
    rec = read_log(_write_csv(tmp_path, frame))
    s = rec.segments[0]
    dt = np.diff(s.t)
    assert np.ptp(dt) < 1e-9 and dt[0] == pytest.approx(1 / RATE, rel=0.02)
    assert s.t[0] == t[0] and s.t[-1] <= t[-1]
    np.testing.assert_allclose(s.q[:, 0], np.sin(3 * s.t), atol=1e-4)
    np.testing.assert_allclose(s.q_des[:, 0], s.t, atol=1e-12)
    msg = next(w for w in rec.quality()["warnings"] if "resampled" in w)
    assert "linear interpolation" in msg and "median rate: 200.4" in msg and "1 of 1 segment(s) (0)" in msg
    assert not any("resampled" in w for w in rec.warnings)  # stated once, by the quality report


def test_gap_inside_declared_segment_is_bridged_with_warning(tmp_path: Path) -> None:
    t = np.concatenate([np.arange(15), np.arange(40, 55)]) / RATE
    frame = pd.DataFrame({"t": t, "j/q": t, "j/q_des": t, "segment": "run"})
    rec = read_log(_write_csv(tmp_path, frame))
    assert [s.n for s in rec.segments] == [55]
    # the first sample after the gap is data row 16, on line 17 below the header
    assert any(
        "bridged a gap" in w and "segment run" in w and "at line 17)" in w for w in rec.quality()["warnings"]
    )


def test_unknown_sidecar_key_warns(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    rec = read_table(path, "log.csv", metadata={"joints": {"hip": {"inertai": 0.1}}})
    assert any("'inertai'" in w and "joints.hip" in w for w in rec.warnings)


def test_uniform_timestamps_not_resampled(tmp_path: Path) -> None:
    rec = read_log(_write_csv(tmp_path, _wide_frame()))
    assert not any("resampled" in w for w in rec.warnings)


# ------------------------------------------------------------------------------------------- writing


def _recording() -> Recording:
    """Two joints (one prismatic), two segments with metadata, every channel random."""
    rng = np.random.default_rng(1)
    segs = []
    for name, n in (("step", 30), ("chirp 2", 25)):
        t = 1.0 + np.arange(n) / RATE
        q, qd, q_des, qd_des, tau_ff, tau = (rng.normal(size=(n, 2)) for _ in range(6))
        segs.append(Segment(name, t, q, qd, q_des, qd_des, tau_ff, tau, {"kp": 12.0, "kd": 0.3}))
    joints = [JointInfo("a", inertia=0.02, mass=0.4, com_distance=0.15), JointInfo("b", "prismatic")]
    return Recording(joints, segs, velocity_source="measured by encoder", metadata={"robot": "x1"})


@pytest.mark.parametrize("form", ["long", "wide"])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_round_trip(tmp_path: Path, form: str, suffix: str) -> None:
    rec = _recording()
    path = tmp_path / f"out{suffix}"
    write_table(rec, path, form=form)
    back = read_log(path)
    assert back.source_format == f"canonical-{suffix[1:]}-{form}"
    assert back.joints == rec.joints
    assert back.velocity_source == "measured by encoder"
    assert back.metadata["robot"] == "x1"
    assert [s.name for s in back.segments] == ["step", "chirp 2"]
    for a, b in zip(rec.segments, back.segments, strict=True):
        assert b.metadata == a.metadata
        for ch in ("t", "q", "qd", "q_des", "qd_des", "tau_ff", "tau"):
            np.testing.assert_array_equal(getattr(b, ch), getattr(a, ch))
    assert back.warnings == []


def test_sidecar_for_is_json() -> None:
    side = sidecar_for(_recording())
    assert json.loads(json.dumps(side)) == side
    assert side["angle_unit"] == "rad" and side["joints"]["b"]["type"] == "prismatic"
    assert side["segments"]["step"] == {"kp": 12.0, "kd": 0.3}


# ---------------------------------------------------------------------------------------- validation


def test_error_empty_file(tmp_path: Path) -> None:
    _raises("log.csv|empty", read_log, _csv_text(tmp_path, ""))
    _raises("log.csv|empty", read_log, _csv_text(tmp_path, "  \n\n"))


def test_error_no_rows(tmp_path: Path) -> None:
    _raises("log.csv|no data rows", read_log, _csv_text(tmp_path, "t,joint,q,q_des\n"))


def test_error_unknown_format(tmp_path: Path) -> None:
    _raises("unknown format|canonical CSV or Parquet", read_table, b"\x89PNG\r\n\x1a\n\x00\x00\x00", "x.png")
    _raises("unknown format|columns t, q, q_des", read_table, b'{"entries": [1, 2]}', "bam.json")
    _raises("x.csv|not a Parquet file", read_table, _simple_csv().encode(), "x.csv", fmt="parquet")
    _raises("unknown format 'hdf5'", read_table, _simple_csv().encode(), "x.csv", fmt="hdf5")


def test_error_missing_t(tmp_path: Path) -> None:
    _raises("missing required column 't'", read_log, _csv_text(tmp_path, "time,a/q,a/q_des\n0,0,0\n"))
    _raises("missing required column 't'", read_log, _csv_text(tmp_path, "time,joint,q,q_des\n0,a,0,0\n"))


def test_error_missing_q_long(tmp_path: Path) -> None:
    frame = _long_frame().drop(columns=["q"])
    _raises("missing required column 'q'|long-form", read_log, _write_csv(tmp_path, frame))


def test_error_missing_q_des_long(tmp_path: Path) -> None:
    frame = _long_frame().drop(columns=["q_des"])
    _raises("missing required column 'q_des'", read_log, _write_csv(tmp_path, frame))


def test_error_missing_q_des_wide_names_joint(tmp_path: Path) -> None:
    frame = _wide_frame().drop(columns=["knee/q_des"])
    _raises("joint 'knee'|'knee/q_des'", read_log, _write_csv(tmp_path, frame))
    frame = _wide_frame().drop(columns=["hip/q"])
    _raises("joint 'hip'|'hip/q'", read_log, _write_csv(tmp_path, frame))


def test_error_t_not_increasing(tmp_path: Path) -> None:
    t = np.arange(20) / RATE
    t[12] = t[10] - 0.001
    msg = _raises("log.csv|t is not increasing at line 14 ", read_log, _csv_text(tmp_path, _simple_csv(t=t)))
    assert "(t = 0.049 after 0.055)" in msg


def test_error_t_not_increasing_in_segment_and_joint(tmp_path: Path) -> None:
    frame = _long_frame(20)
    frame["segment"] = 3
    frame.loc[31, "t"] = 0.0  # data row 32 (line 33): knee at sample 15
    msg = _raises("segment 3|joint 'knee'|not increasing at line 33 ", read_log, _write_csv(tmp_path, frame))
    assert "t = 0.0 after" in msg


def test_error_duplicate_t(tmp_path: Path) -> None:
    t = np.arange(20) / RATE
    t[6] = t[5]
    _raises("duplicate t = 0.025|at line 7 and line 8;", read_log, _csv_text(tmp_path, _simple_csv(t=t)))


def test_error_long_form_timestamps_differ(tmp_path: Path) -> None:
    frame = _long_frame(20)
    frame.loc[frame.joint == "knee", "t"] += 0.001
    _raises(
        "joint 'knee'|same time stamps|at line 3 where joint 'hip'|(line 2)",
        read_log,
        _write_csv(tmp_path, frame),
    )
    frame = _long_frame(20)
    frame["segment"] = "s1"
    frame = frame.drop(index=5)
    _raises("segment s1|joint 'knee'|19 samples", read_log, _write_csv(tmp_path, frame))


@pytest.mark.parametrize("bad", ["nan", "NaN", "inf", "-inf", ""])
def test_error_nan_or_inf(tmp_path: Path, bad: str) -> None:
    lines = _simple_csv().splitlines()
    cells = lines[8].split(",")
    cells[1] = bad
    lines[8] = ",".join(cells)
    msg = _raises("log.csv, line 9, column 'a/q'", read_log, _csv_text(tmp_path, "\n".join(lines)))
    assert ("empty" if bad == "" else bad.lstrip("-").lower()) in msg.lower()


def test_error_nan_in_parquet(tmp_path: Path) -> None:
    frame = _long_frame()
    frame.loc[17, "tau"] = np.nan
    frame.to_parquet(tmp_path / "log.parquet", index=False)
    _raises("data row 18 (0-based 17) (joint 'knee')|column 'tau'|NaN", read_log, tmp_path / "log.parquet")


def test_error_non_numeric(tmp_path: Path) -> None:
    text = _simple_csv().replace("\n0.025,", "\n0.025s,", 1)
    _raises("line 7, column 't'|'0.025s' is not a number", read_log, _csv_text(tmp_path, text))


def test_error_ragged_csv(tmp_path: Path) -> None:
    text = _simple_csv() + "1,2,3,4,5\n"
    _raises("log.csv|cannot parse the CSV", read_log, _csv_text(tmp_path, text))


def test_error_sidecar_unknown_joint(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    side = {"joints": {"elbow": {"mass": 1.0}}}
    _raises("'elbow'|not in the table|['hip', 'knee']", read_log, path, sidecar=_json(tmp_path, side))
    side = {"segments": {"0": {"joints": {"ankle": {"mass": 1.0}}}}}
    _raises("'ankle'|['hip', 'knee']", read_table, path.read_bytes(), "log.csv", metadata=side)


def test_error_sidecar_unknown_segment(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    _raises(
        "segment '4' does not exist|['0']", read_table, path.read_bytes(), "log.csv", {"segments": {"4": {}}}
    )


def test_error_short_segment(tmp_path: Path) -> None:
    t = np.concatenate([np.arange(30), 60 + np.arange(4)]) / RATE
    _raises(
        "segment 1|lines 32–35)|only 4 samples|at least 10", read_log, _csv_text(tmp_path, _simple_csv(t=t))
    )
    frame = _long_frame(30)
    frame["segment"] = ["a"] * 42 + ["b"] * 18
    _raises("segment b|only 9 samples", read_log, _write_csv(tmp_path, frame))


def test_error_invalid_angle_unit(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    _raises("invalid angle_unit 'degrees'|\"deg\"", read_table, path, "log.csv", {"angle_unit": "degrees"})


def test_error_sidecar_invalid_json(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    bad = tmp_path / "log.json"
    bad.write_text('{"angle_unit": "deg",\n "joints": }')
    _raises("log.json|invalid JSON at line 2", read_log, path)
    _raises("invalid JSON", read_table, path, "log.csv", metadata=b"{nope")


def test_error_sidecar_not_object(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    _raises("must be a JSON object|list", read_log, path, sidecar=_json(tmp_path, [1, 2]))
    _raises("must be a JSON object", read_table, path, "log.csv", metadata=b'"deg"')
    _raises('"joints"|must be an object', read_table, path, "log.csv", metadata={"joints": ["hip"]})


def test_error_sidecar_bad_load_value(tmp_path: Path) -> None:
    path = _write_csv(tmp_path, _wide_frame())
    side = {"joints": {"hip": {"mass": "1kg"}}}
    _raises("joints.hip|mass|'1kg'", read_table, path, "log.csv", metadata=side)
    _raises(
        "invalid type 'ball'", read_table, path, "log.csv", metadata={"joints": {"hip": {"type": "ball"}}}
    )


def _json(tmp_path: Path, obj) -> Path:
    """Write obj as a JSON sidecar file and return its path."""
    path = tmp_path / "side.json"
    path.write_text(json.dumps(obj))
    return path
