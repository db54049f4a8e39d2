"""Block-streamed canonical CSV / Parquet (datasets/tablestream.py): the same Recording as the whole-file
parser, in many small blocks, with memory held about once; unclean files still get the row-naming errors."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from conftest import raises_dataset_error as _raises

from actuator_sysid.datasets import canonical, read_table, tablestream

JOINTS = ("hip", "knee", "ankle")


def _wide(n: int, segments: str = "none", joints: tuple[str, ...] = JOINTS, qd: bool = True) -> pa.Table:
    """A wide table; segments 'none', 'runs' (contiguous) or 'interleaved'."""
    rng = np.random.default_rng(0)
    t = np.arange(n) / 200.0
    cols: dict[str, np.ndarray] = {"t": t}
    for j, name in enumerate(joints):
        q = np.sin(t * (1 + j)) + 1e-3 * rng.standard_normal(n)
        cols[f"{name}/q"] = q
        if qd:
            cols[f"{name}/qd"] = np.cos(t * (1 + j)) * (1 + j)
        cols[f"{name}/q_des"] = 1.1 * q
        cols[f"{name}/tau"] = rng.standard_normal(n)
    if segments == "runs":
        cols["segment"] = np.where(np.arange(n) < n // 2, "up", "down")
        cols["t"] = np.where(np.arange(n) < n // 2, t, t - t[n // 2])
    elif segments == "interleaved":
        cols["segment"] = np.where(np.arange(n) % 2 == 0, "even", "odd")
    return pa.table(cols)


def _long(n: int) -> pa.Table:
    t = np.repeat(np.arange(n) / 100.0, len(JOINTS))
    joint = np.tile(np.array(JOINTS, dtype=object), n)
    q = np.sin(t) + np.tile(np.arange(len(JOINTS)), n)
    return pa.table(
        {
            "t": t,
            "joint": joint,
            "q": q,
            "q_des": q + 0.1,
            "tau": 0.5 * q,
            "segment": np.where(t < n / 200.0, "a", "b"),
        }
    )


def _write(table: pa.Table, path: Path) -> Path:
    if path.suffix == ".csv":
        pcsv.write_csv(table, path)
    else:
        pq.write_table(table, path, row_group_size=700)
    return path


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch, **kw):
    """The same file through the whole-file parser (the streamed decoder refuses everything)."""

    def refuse(*a, **k):
        raise tablestream.Unclean("forced")

    with monkeypatch.context() as m:
        m.setattr(tablestream, "decode", refuse)
        return read_table(path, path.name, **kw)


def _same(a, b) -> None:
    assert a.joint_names == b.joint_names and a.source_format == b.source_format
    assert [s.name for s in a.segments] == [s.name for s in b.segments]
    assert a.warnings == b.warnings and a.velocity_source == b.velocity_source
    for sa, sb in zip(a.segments, b.segments, strict=True):
        for ch in ("t", "q", "qd", "q_des", "qd_des", "tau_ff", "tau"):
            np.testing.assert_array_equal(getattr(sa, ch), getattr(sb, ch), err_msg=f"{sa.name} {ch}")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("shape", ["wide", "wide-runs", "wide-interleaved", "wide-noqd", "long"])
def test_streamed_equals_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, shape: str
) -> None:
    monkeypatch.setattr(tablestream, "CSV_BLOCK_BYTES", 16 << 10)  # many blocks, and buffer growth
    monkeypatch.setattr(tablestream, "PARQUET_BATCH_ROWS", 300)
    table = (
        _long(900)
        if shape == "long"
        else _wide(
            3000,
            segments=shape.split("-")[1] if shape.count("-") and shape != "wide-noqd" else "none",
            qd=shape != "wide-noqd",
        )
    )
    path = _write(table, tmp_path / f"log{suffix}")
    side = {"angle_unit": "deg", "joints": {"knee": {"mass": 1.0, "com_distance": 0.2}}}

    def parsed_whole(*a, **k):
        raise AssertionError("a clean table must not reach the whole-file parser")

    with monkeypatch.context() as m:
        m.setattr(canonical, "_read_frame", parsed_whole)
        streamed = read_table(path, path.name, metadata=side)
    _same(streamed, _whole(path, monkeypatch, metadata=side))
    assert streamed.joints[1].mass == 1.0
    # bytes (an upload in memory) stream too
    _same(read_table(path.read_bytes(), path.name, metadata=side), streamed)


def test_unclean_tables_still_name_the_row(tmp_path: Path) -> None:
    table = _wide(400)
    path = _write(table, tmp_path / "log.csv")
    lines = path.read_text().splitlines()
    cells = lines[120].split(",")
    cells[2] = "oops"
    lines[120] = ",".join(cells)
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    _raises(
        "bad.csv, line 121, column 'hip/qd'|'oops' is not a number",
        read_table,
        tmp_path / "bad.csv",
        "bad.csv",
    )
    col = table.column("knee/q").to_numpy().copy()
    col[77] = np.nan
    _write(
        table.set_column(table.schema.get_field_index("knee/q"), "knee/q", pa.array(col)),
        tmp_path / "nan.parquet",
    )
    _raises(
        "nan.parquet, data row 78 (0-based 77), column 'knee/q'|NaN",
        read_table,
        tmp_path / "nan.parquet",
        "nan.parquet",
    )
    _raises(
        "no joint columns",
        read_table,
        _write(pa.table({"t": [0.0, 1.0], "x": [1.0, 2.0]}), tmp_path / "odd.csv"),
        "odd.csv",
    )


def test_streaming_holds_the_table_about_once(tmp_path: Path) -> None:
    """numpy allocations while reading a 60 000-sample, 3-joint table stay under 1.5× the decoded segment
    (the whole-file parser holds the frame, its column copies and the segment: over 2×)."""
    path = _write(_wide(60_000), tmp_path / "big.csv")
    read_table(path, path.name)  # warm: imports, caches
    tracemalloc.start()
    rec = read_table(path, path.name)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    s = rec.segments[0]
    seg = sum(a.nbytes for a in (s.t, s.q, s.qd, s.q_des, s.qd_des, s.tau_ff, s.tau))
    assert peak < 1.5 * seg, peak / seg
