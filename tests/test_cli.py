"""The `actuator-sysid` command: output, exit codes and files. `cli` runs `cli.main` in this process (the worker
has the stack imported); `entry_point` runs the installed module as a real subprocess, for what only a fresh
interpreter shows (the exit status `python -m actuator_sysid.cli` returns)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, good_rows, long_csv, make_recording, pythonpath, run_cli

from actuator_sysid.datasets.canonical import write_table


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd)


def entry_point(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    return subprocess.run(
        [sys.executable, "-m", "actuator_sysid.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_inspect_good_log(tmp_path: Path) -> None:
    write_table(make_recording(joints=("hip", "knee")), tmp_path / "log.csv")  # sidecar log.json beside it
    r = cli("inspect", str(tmp_path / "log.csv"))
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["joints"] == ["hip", "knee"] and summary["segments"] == 3
    assert summary["warnings"] == [] and summary["rate_hz"] == 100.0


def test_inspect_reports_warnings(tmp_path: Path) -> None:
    rows = [[r[0], r[1], r[2], r[4], r[5]] for r in good_rows(30)]  # no qd: differentiated, with a warning
    (tmp_path / "noqd.csv").write_bytes(long_csv(rows, "t,joint,q,q_des,segment"))
    r = cli("inspect", str(tmp_path / "noqd.csv"))
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert any("no qd" in w for w in summary["warnings"])


def test_inspect_bad_log_exits_2_with_message(tmp_path: Path) -> None:
    rows = good_rows(30)
    rows[12][0] = 0.05  # t goes backwards at data row 13, the file's line 14
    (tmp_path / "bad.csv").write_bytes(long_csv(rows))
    r = entry_point("inspect", str(tmp_path / "bad.csv"))  # the real process: its exit status and stderr
    assert r.returncode == 2
    assert "bad.csv" in r.stderr and "not increasing at line 14 " in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_inspect_missing_file_and_bad_sidecar(tmp_path: Path) -> None:
    r = cli("inspect", str(tmp_path / "nope.csv"))
    assert r.returncode == 2 and "nope.csv" in r.stderr and "not found" in r.stderr
    (tmp_path / "log.csv").write_bytes(long_csv(good_rows(30)))
    (tmp_path / "side.json").write_text('{"joints": {"elbow": {}}}')
    r = cli("inspect", str(tmp_path / "log.csv"), "--sidecar", str(tmp_path / "side.json"))
    assert r.returncode == 2 and "'elbow'" in r.stderr and "Traceback" not in r.stderr


def test_fit_bad_request_exits_2(tmp_path: Path) -> None:
    write_table(make_recording(), tmp_path / "log.csv")
    r = cli("fit", str(tmp_path / "log.csv"), "--models", "dcmotor,neural", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "'neural'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_fit_writes_results_report_and_exports(tmp_path: Path) -> None:
    """Needs the lead's exporter (actuator_sysid.export.isaaclab)."""
    write_table(make_recording(), tmp_path / "log.csv")
    out = tmp_path / "out"
    r = cli(
        "fit",
        str(tmp_path / "log.csv"),
        "--models",
        "dcmotor,ideal_pd",
        "--generations",
        "10",
        "--population",
        "8",
        "--seed",
        "1",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert {"fit.json", "report.html", "isaaclab.py", "isaaclab.json"} <= {p.name for p in out.iterdir()}
    result = json.loads((out / "fit.json").read_text())
    assert set(result["joints"]["j1"]["models"]) == {"dcmotor", "ideal_pd"}
    html = (out / "report.html").read_text()
    assert "/static/plotly.min.js" not in html and "Plotly.newPlot" in html and 'id="plot-0-envelope"' in html
    assert "Export validation" in html and "mjcf.xml (mujoco)" in html  # the replays next to our rollout
    assert "%|" in r.stderr  # the tqdm bar


def test_demo_recovers_stated_parameters(tmp_path: Path) -> None:
    """Needs the lead's exporter; the demo's log comes from the project's own rollout."""
    r = cli("demo", "--out", str(tmp_path / "demo"), "--seed", "0")
    assert r.returncode == 0, r.stderr
    assert "best model: dcmotor" in r.stdout
    row = next(line.split() for line in r.stdout.splitlines() if line.startswith("stiffness "))
    truth, fitted = float(row[2]), float(row[3])
    assert abs(fitted - truth) < 0.05 * truth
    assert (tmp_path / "demo" / "demo_log.csv").is_file() and (tmp_path / "demo" / "report.html").is_file()
