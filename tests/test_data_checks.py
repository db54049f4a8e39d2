"""Data checks of bench logs: frozen channels, repeated and skipped stamps, a lagging effort label, and the
degrees check under a declared unit. Tiny CSVs written to tmp_path and read by the real readers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import good_rows, long_csv, raises_dataset_error, run_cli

from actuator_sysid.cli import make_demo_recording
from actuator_sysid.datasets import read_log
from actuator_sysid.datasets.quality import quality_report

RATE = 100.0


def _csv(path: Path, t: np.ndarray, cols: dict[str, np.ndarray], side: dict | None = None) -> Path:
    """Write a wide CSV (columns `t` then `cols`) and, when given, its JSON sidecar."""
    names = list(cols)
    lines = [",".join(["t", *names])]
    lines += [",".join(repr(float(v)) for v in (t[k], *(cols[c][k] for c in names))) for k in range(t.size)]
    path.write_text("\n".join(lines) + "\n")
    if side is not None:
        path.with_suffix(".json").write_text(json.dumps(side))
    return path


def _bench(n: int = 600, seed: int = 0, lag: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One PD-driven joint: a two-tone command, a noisy measured response and tau = 5·(q_des − q) − 0.1·qd,
    written `lag` samples late (the label of sample k is the effort of sample k − lag)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / RATE
    q_des = 0.5 * np.sin(2 * np.pi * 0.7 * t) + 0.2 * np.sin(2 * np.pi * 3.1 * t)
    q = 0.8 * np.sin(2 * np.pi * 0.7 * t - 0.2) + 0.1 * np.sin(2 * np.pi * 3.1 * t - 0.6)
    q = q + rng.normal(0.0, 1e-3, n)
    qd = np.gradient(q, t) + rng.normal(0.0, 0.02, n)
    tau = 5.0 * (q_des - q) - 0.1 * qd
    if lag:
        tau = np.concatenate([np.full(lag, tau[0]), tau[:-lag]])
    return t, {"j1/q": q, "j1/qd": qd, "j1/q_des": q_des, "j1/tau": tau}


def _quality(rec) -> str:  # type: ignore[no-untyped-def]
    return " | ".join(rec.summary()["quality"]["warnings"])


# ----------------------------------------------------------------------------------------- frozen channels


def test_a_channel_frozen_for_the_first_second_is_named_with_its_stretch(tmp_path: Path) -> None:
    t, cols = _bench()
    cols["j1/tau"][:100] = cols["j1/tau"][0]  # the torque stream starts a second late
    out = run_cli("inspect", str(_csv(tmp_path / "log.csv", t, cols)))
    assert out.returncode == 0, out.stderr
    frozen = [w for w in json.loads(out.stdout)["quality"]["warnings"] if "frozen" in w]
    assert frozen == [
        "joint 'j1': tau is frozen (exactly constant) in segment 0 0–1 s (1 s, while q moves); a stalled or "
        "late stream — trim those samples or fix the logger"
    ]


def test_a_position_frozen_inside_a_segment_while_its_velocity_moves_warns(tmp_path: Path) -> None:
    t, cols = _bench()
    cols["j1/q"][300:360] = cols["j1/q"][300]  # 0.6 s stuck at the encoder while qd still reads motion
    text = _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    assert "joint 'j1': q is frozen" in text and "segment 0 3–3.6 s (0.6 s, while qd moves)" in text


def test_channels_constant_for_the_whole_log_or_saturated_do_not_warn(tmp_path: Path) -> None:
    t, cols = _bench()
    n = t.size
    cols["j1/q_des"] = np.zeros(n)  # a torque-driven log: q_des never moves
    cols["j1/tau_ff"] = np.zeros(n)
    cols["j1/tau"] = np.clip(cols["j1/tau"], -0.5, 0.5)  # saturated effort sits exactly at its limit
    assert "frozen" not in _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    cols["j1/tau_ff"] = np.select([t < 2.0, t < 4.0], [0.8, -0.4], 0.3)  # torque steps; effort = the step
    cols["j1/tau"] = cols["j1/tau_ff"].copy()
    assert "frozen" not in _quality(read_log(_csv(tmp_path / "steps.csv", t, cols)))
    t, cols = _bench()
    assert "frozen" not in _quality(read_log(_csv(tmp_path / "clean.csv", t, cols)))


# ---------------------------------------------------------------------------------- repeated and skipped stamps


def test_skipped_stamps_give_one_warning_with_count_rate_and_where(tmp_path: Path) -> None:
    t, cols = _bench()
    keep = np.ones(t.size, bool)
    keep[[120, 250, 251, 400]] = False  # four samples never logged (one of them a double skip)
    path = _csv(tmp_path / "log.csv", t[keep], {c: v[keep] for c, v in cols.items()})
    rec = read_log(path)
    every = rec.warnings + rec.summary()["quality"]["warnings"]
    timing = [w for w in every if "time stamp" in w]
    assert len(timing) == 1, every  # not the resampling note as well
    # the first sample after a skip is data row 121, the file's line 122 (below the header)
    assert "4 skipped sample(s)" in timing[0] and "100 Hz" in timing[0] and "first at line 122)" in timing[0]
    assert "segment 0" in timing[0]
    assert rec.metadata["timing"]["0"]["skipped_samples"] == 4


def test_repeated_records_are_dropped_and_counted(tmp_path: Path) -> None:
    t, cols = _bench(n=300)
    idx = np.insert(np.arange(t.size), [50, 200], [49, 199])  # samples 49 and 199 logged twice
    rec = read_log(_csv(tmp_path / "log.csv", t[idx], {c: v[idx] for c, v in cols.items()}))
    assert rec.segments[0].n == 300
    text = _quality(rec)
    assert "2 repeated time stamp(s)" in text and "first at line 52)" in text and "segment 0" in text
    assert "time stamps are not uniform" not in " ".join(rec.warnings)


def test_a_repeated_long_form_sample_is_dropped_for_every_joint(tmp_path: Path) -> None:
    rows = good_rows(40) + good_rows(40, joint="j2")
    rows = sorted(rows, key=lambda r: (r[0], r[1]))  # one row per joint per sample, in time order
    rows = rows[:21] + rows[20:22] + rows[21:]  # sample 10 (rows 21 and 22, both joints) logged twice
    path = tmp_path / "long.csv"
    path.write_bytes(long_csv(rows))
    rec = read_log(path)
    assert [s.n for s in rec.segments] == [40]
    assert "2 repeated time stamp(s)" not in _quality(rec) and "1 repeated time stamp(s)" in _quality(rec)


def test_a_repeated_stamp_with_other_values_is_still_an_error(tmp_path: Path) -> None:
    t, cols = _bench(n=300)
    t = t.copy()
    t[51] = t[50]  # the stamp repeats but the sample differs: which time is right is unknown
    raises_dataset_error("duplicate t|at line 52 and line 53;", read_log, _csv(tmp_path / "log.csv", t, cols))


def test_clean_stamps_say_nothing_about_time(tmp_path: Path) -> None:
    t, cols = _bench()
    rec = read_log(_csv(tmp_path / "log.csv", t, cols))
    every = rec.warnings + rec.summary()["quality"]["warnings"]
    assert not [w for w in every if "time stamp" in w], every
    assert rec.metadata["timing"]["0"]["skipped_samples"] == 0


# -------------------------------------------------------------------------------------------- a lagging label


def test_an_effort_label_one_sample_late_is_named_with_its_lag(tmp_path: Path) -> None:
    t, cols = _bench(lag=1)
    text = _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    assert "joint 'j1': tau lags its inputs by 1 sample (10 ms)" in text


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_simulated_log_without_lag_does_not_warn(tmp_path: Path, seed: int) -> None:
    t, cols = _bench(seed=seed)
    assert "lags its inputs" not in _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    t, cols = _bench(seed=seed, lag=2)
    assert "by 2 samples (20 ms)" in _quality(read_log(_csv(tmp_path / "lag.csv", t, cols)))


def test_the_demo_simulator_log_does_not_warn_and_its_late_label_does() -> None:
    rec = make_demo_recording(0)  # the project's rollout, with sensor noise on q, qd and tau
    assert not [w for w in quality_report(rec)["warnings"] if "lags its inputs" in w or "frozen" in w]
    for s in rec.segments:
        assert s.tau is not None
        s.tau = np.concatenate([s.tau[:1], s.tau[:-1]])
    assert "joint 'pendulum': tau lags its inputs by 1 sample (5 ms)" in " | ".join(
        quality_report(rec)["warnings"]
    )


# ------------------------------------------------------------------------------------- degrees vs a declared unit


def _many_turns(tmp_path: Path, side: dict | None) -> tuple[str, str]:
    t = np.arange(600) / RATE
    q = 5.0 * t  # 30 rad: about 4.8 turns of a continuous joint
    path = _csv(tmp_path / "turns.csv", t, {"j1/q": q, "j1/q_des": q + 0.01}, side)
    out = run_cli("inspect", str(path))
    assert out.returncode == 0, out.stderr
    return out.stdout, _quality(read_log(path))


def test_a_declared_rad_is_not_called_degrees(tmp_path: Path) -> None:
    stdout, text = _many_turns(tmp_path, {"angle_unit": "rad"})
    assert "look like degrees" not in stdout and "look like degrees" not in text


def test_an_undeclared_unit_still_gets_the_degrees_warning(tmp_path: Path) -> None:
    stdout, text = _many_turns(tmp_path, None)
    assert "look like degrees" in stdout and "look like degrees" in text


def test_a_torque_driven_log_writing_q_des_as_q_is_not_called_a_plan() -> None:
    """q_des = q in a log driven by its feed-forward effort (or at kp 0) is no command: not a plan; the same
    positions with a position command and no effort still are."""
    from conftest import make_recording

    from actuator_sysid.datasets.quality import PLAN, commands_only

    plan = make_recording(segments=2)
    for s in plan.segments:
        s.q_des = s.q.copy()
    assert commands_only(plan) and any(w.startswith(PLAN) for w in quality_report(plan)["warnings"])
    torque = make_recording(segments=2)
    for s in torque.segments:
        s.q_des, s.tau_ff = s.q.copy(), 0.3 * np.sin(s.t)[:, None]
    assert not commands_only(torque)
    assert not any(w.startswith(PLAN) for w in quality_report(torque)["warnings"])
    zero_gain = make_recording(segments=2)
    for s in zero_gain.segments:
        s.q_des, s.metadata = s.q.copy(), {"kp": 0.0, "kd": 0.0}
    assert not commands_only(zero_gain)


# ---------------------------------------------------------------------------------- where a message points


def _wide_lines(n: int, rate: float = RATE) -> list[str]:
    """A clean wide one-joint CSV as lines: the header, then one line per sample."""
    t = np.arange(n) / rate
    return ["t,a/q,a/q_des"] + [f"{float(t[k])!r},{0.01 * k!r},0.0" for k in range(n)]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_bad_cell_names_the_files_own_line(tmp_path: Path, newline: str) -> None:
    """The whole-file parser: the header, a blank line and a line of spaces are counted as an editor counts
    them, so the message's line is the one to open."""
    lines = _wide_lines(200)
    lines.insert(1, "")  # line 2: blank
    lines.insert(40, "   ")  # line 41: white space only (the parser skips it too)
    cells = lines[138].split(",")  # the file's line 139: data row 136
    cells[1] = "oops"
    lines[138] = ",".join(cells)
    (tmp_path / "log.csv").write_bytes(newline.join(lines).encode() + newline.encode())
    msg = raises_dataset_error(
        "log.csv, line 139, column 'a/q'|'oops' is not a number", read_log, tmp_path / "log.csv"
    )
    assert "row" not in msg.split(":")[0]


def test_a_clean_streamed_table_names_the_files_own_line(tmp_path: Path) -> None:
    """The block-streamed reader (every cell a number) counts the header and skipped blank lines too."""
    lines = _wide_lines(300)
    lines[1:1] = ["", ""]  # lines 2 and 3 blank
    cells = lines[138].split(",")  # the file's line 139: t goes back there
    cells[0] = "0.0"
    lines[138] = ",".join(cells)
    (tmp_path / "log.csv").write_text("\n".join(lines) + "\n")
    raises_dataset_error(
        "log.csv: t is not increasing at line 139 (t = 0.0 after", read_log, tmp_path / "log.csv"
    )


def test_a_skipped_sample_after_blank_lines_points_at_its_line(tmp_path: Path) -> None:
    lines = _wide_lines(300)
    lines.insert(1, "")
    del lines[201]  # the sample on line 202 is missing: the next one, now on line 202, follows the skip
    (tmp_path / "log.csv").write_text("\n".join(lines) + "\n")
    text = _quality(read_log(tmp_path / "log.csv"))
    assert "1 skipped sample(s)" in text and "first at line 202)" in text, text


def test_a_parquet_table_names_its_data_row_and_the_index(tmp_path: Path) -> None:
    """No lines in Parquet: the data row counted from 1, with the 0-based index beside it."""
    import pandas as pd

    t = np.arange(50) / RATE
    t[30] = 0.0
    pd.DataFrame({"t": t, "a/q": np.zeros(50), "a/q_des": np.zeros(50)}).to_parquet(tmp_path / "log.parquet")
    raises_dataset_error(
        "log.parquet: t is not increasing at data row 31 (0-based 30) (t = 0.0",
        read_log,
        tmp_path / "log.parquet",
    )


def test_a_clean_table_is_never_scanned_for_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines are counted only for a message: reading a clean table costs no second pass over the file."""
    from actuator_sysid.datasets import tablestream

    scans = []
    real = tablestream._scan_lines
    monkeypatch.setattr(tablestream, "_scan_lines", lambda source: scans.append(1) or real(source))
    (tmp_path / "log.csv").write_text("\n".join(_wide_lines(300)) + "\n")
    read_log(tmp_path / "log.csv")
    assert scans == []
    lines = _wide_lines(300)
    del lines[100]  # the sample of line 101 never logged: its warning names the line after the skip
    (tmp_path / "skip.csv").write_text("\n".join(lines) + "\n")
    assert "first at line 101)" in _quality(read_log(tmp_path / "skip.csv")) and scans == [1]


def _editor_lines(text: str) -> list[int]:
    """Reference: the 1-based line where each record after the header starts (blank lines skipped, a quoted
    field may span lines), by walking the text line by line."""
    starts, inside, line = [], False, 0
    for raw in text.replace("\ufeff", "").split("\n"):
        line += 1
        if not inside and raw.strip(" \t\r"):
            starts.append(line)
        inside ^= raw.count('"') % 2 == 1
    return starts[1:]


def test_the_line_map_counts_lines_as_an_editor_does() -> None:
    """Blank lines, white-space lines, CR LF, a byte order mark and quoted fields spanning lines, across the
    1 MiB blocks the file is scanned in; checked against a line-by-line walk and the parser's own row count."""
    import io

    import pandas as pd

    from actuator_sysid.datasets.tablestream import CSV_BLOCK_BYTES, LineMap

    rng = np.random.default_rng(3)
    out = ["\ufefft,joint,q,qd,q_des"]
    for k in range(60_000):
        roll = rng.random()
        if roll < 0.01:
            out.append("")
        elif roll < 0.015:
            out.append("  \t\r")
        label = f'"j\n{k}"' if rng.random() < 0.01 else "j"
        row = f"{k},{label},{k},0.123456789,0.987654321"
        out.append(row + "\r" if rng.random() < 0.5 else row)
    text = "\n".join(out) + "\n"
    data = text.encode()
    assert len(data) > 1.5 * CSV_BLOCK_BYTES
    want = _editor_lines(text)
    frame = pd.read_csv(
        io.StringIO(text.lstrip("\ufeff")), dtype=str, keep_default_na=False, skipinitialspace=True
    )
    assert len(frame) == len(want) == 60_000
    got = LineMap(data)(np.arange(1, len(want) + 1))
    np.testing.assert_array_equal(got, want)
    assert LineMap(data)(1) == want[0] == 2


# ---------------------------------------------------------------------------------- one warning per kind


def _stamp_warnings(rec) -> list[str]:  # type: ignore[no-untyped-def]
    """Every warning (the reader's and the quality report's) about time stamps."""
    every = rec.warnings + rec.summary()["quality"]["warnings"]
    return [w for w in every if "time stamp" in w]


def _segmented_csv(path: Path, rates: list[float], seed: int = 0) -> tuple[Path, list[list[int]]]:
    """One wide CSV of several segments (a segment column), each at its own rate with ±3 % jitter; segments 0, 2
    and 4 skip a sample, 1 and 3 log one twice. Returns the path and each segment's skipped file lines."""
    rng = np.random.default_rng(seed)
    lines, skipped = ["t,a/q,a/q_des,segment"], []
    for i, rate in enumerate(rates):
        k = np.arange(120, dtype=float)
        t = (k + rng.uniform(-0.03, 0.03, k.size)) / rate
        keep = np.ones(k.size, bool)
        if i % 2 == 0:
            keep[50 + i] = False
        idx = np.flatnonzero(keep)
        if i % 2 == 1:
            idx = np.insert(idx, 70, idx[69])
        first = len(lines) + 1
        lines += [f"{float(t[j])!r},{float(np.sin(t[j]))!r},{float(np.sin(t[j]))!r},s{i}" for j in idx]
        skipped.append([first + 50 + i] if i % 2 == 0 else [])
    path.write_text("\n".join(lines) + "\n")
    return path, skipped


def test_a_multi_segment_log_gets_one_warning_per_kind_and_one_rate(tmp_path: Path) -> None:
    rates = [100.0, 100.0, 100.0, 200.0, 200.0, 100.0]
    path, skipped = _segmented_csv(tmp_path / "log.csv", rates)
    rec = read_log(path)
    warns = _stamp_warnings(rec)
    assert len(warns) == 3, warns  # uneven (resampled), skipped, repeated: one each, not one per segment
    uneven, skip, rep = warns
    assert "not uniform in 6 of 6 segment(s) (s0, s1, s2 and 3 more)" in uneven
    rate = f"{rec.rate_hz:.6g} Hz"  # the dataset's rate, the one its page shows
    assert uneven.count(" Hz") == 2 and f"median rate: {rate} (median; " in uneven, uneven
    span = re.search(r"; ([\d.]+)–([\d.]+) Hz across the segments\)", uneven)
    assert span is not None, uneven
    lo, hi = (float(x) for x in span.groups())
    assert lo == pytest.approx(100, rel=0.01) and hi == pytest.approx(200, rel=0.01), uneven
    assert rec.metadata["resampling"]["rate_hz"] == pytest.approx(rec.rate_hz)
    assert skip.startswith("time stamps: 3 skipped sample(s)") and "segment s0 (1, first at line " in skip
    assert f"first at line {skipped[0][0]})" in skip and f"first at line {skipped[2][0]})" in skip
    assert (
        rep.startswith("time stamps: 3 repeated time stamp(s)")
        and "segment s1" in rep
        and "segment s5" in rep
    )
    assert not [w for w in rec.warnings if "time stamp" in w]  # stated once, by the quality report


def test_several_files_read_as_one_dataset_get_one_warning_and_one_rate(tmp_path: Path) -> None:
    """Files merged into one recording: still one warning for their uneven stamps, and one rate (the first
    file's no longer stands for all)."""
    from actuator_sysid.datasets.readers import read_paths

    paths = []
    for i, rate in enumerate([300.0, 100.0, 100.0, 100.0, 100.0]):
        path, _ = _segmented_csv(tmp_path / f"run{i}.csv", [rate], seed=i)
        paths.append(path)
    rec = read_paths(paths)
    assert len(rec.segments) == 5
    uneven = [w for w in _stamp_warnings(rec) if "not uniform" in w]
    assert len(uneven) == 1 and "in 5 of 5 segment(s)" in uneven[0] and "and 2 more" in uneven[0], uneven
    assert rec.metadata["resampling"]["rate_hz"] == pytest.approx(rec.rate_hz, rel=1e-9)
    assert rec.rate_hz == pytest.approx(100.0, rel=0.01)  # not the first file's 300 Hz
    assert f"median rate: {rec.rate_hz:.6g} Hz (median; " in uneven[0]


XL330_RAW = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "bam-xl330" / "raw"


def test_the_xl330_zip_gets_one_timestamp_warning_with_the_datasets_rate() -> None:
    """The real bench upload: 12 BAM files with uneven stamps, as the dataset page shows them."""
    import io
    import zipfile

    from actuator_sysid.datasets.readers import read_upload

    files = sorted(XL330_RAW.glob("*.json"))
    if not files:
        pytest.skip(f"the raw BAM XL330 logs are not here ({XL330_RAW})")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in files:
            z.write(p, f"bam-xl330/{p.name}")
    rec = read_upload(buf.getvalue(), "bam-xl330.zip")
    summary = rec.summary()
    warns = _stamp_warnings(rec)
    assert len(warns) == 1, warns
    (w,) = warns
    n = len(files)
    assert f"not uniform in {n} of {n} segment(s)" in w and f"and {n - 3} more" in w, w
    assert f"median rate: {summary['rate_hz']:.6g} Hz" in w and w.count(" Hz (median; ") == 1, w
    assert summary["resampling"]["rate_hz"] == pytest.approx(summary["rate_hz"], rel=1e-6)
