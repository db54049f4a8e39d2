"""`inspect` on every format (joints, segments, rate, duration, quality warnings), and uploads over HTTP."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, make_recording, run_cli
from test_readers import _bam, _hdf5, _lerobot_table, _pace, _rl_sar, _state_and_command, _write_mcap

from actuator_sysid.cli import main
from actuator_sysid.datasets import write_table


def _inspect(capsys: pytest.CaptureFixture, *args: str) -> tuple[dict, str]:
    assert main(["inspect", *args]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def _files(tmp_path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """One producer-written file per format: name -> (paths and flags, joints expected)."""
    import pyarrow.parquet as pq

    write_table(make_recording(joints=("a",)), tmp_path / "canon.csv")
    (tmp_path / "bam.json").write_text(json.dumps(_bam(n=300, off=(200, 300))))
    _pace(tmp_path, J=2)
    _write_mcap(tmp_path / "run.mcap", _state_and_command(n=200))
    (tmp_path / "motor.csv").write_text(_rl_sar())
    pq.write_table(_lerobot_table(dims=2), tmp_path / "lerobot.parquet")
    _hdf5(tmp_path / "demos.hdf5", J=2)
    return {
        "canonical-csv-long": ([str(tmp_path / "canon.csv")], ["a"]),
        "bam": ([str(tmp_path / "bam.json")], ["xl330"]),
        "pace": ([str(tmp_path / "chirp.pt"), "--joint-names", "l,r"], ["l", "r"]),
        "mcap": ([str(tmp_path / "run.mcap")], ["hip", "knee"]),
        "actuator-net": ([str(tmp_path / "motor.csv")], ["joint_0", "joint_1"]),
        "lerobot": ([str(tmp_path / "lerobot.parquet"), "--joint-names", "x,y"], ["x", "y"]),
        "isaaclab-hdf5": ([str(tmp_path / "demos.hdf5"), "--joint-names", "p,q", "--rate", "50"], ["p", "q"]),
    }


def test_inspect_every_format(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for fmt, (args, joints) in _files(tmp_path).items():
        summary, err = _inspect(capsys, *args)
        assert summary["source_format"] == fmt and summary["joints"] == joints, fmt
        assert summary["segments"] >= 1 and summary["rate_hz"] > 0 and summary["duration_s"] > 0
        q = summary["quality"]
        assert [s["name"] for s in q["segments"]] and isinstance(q["warnings"], list)
        assert err.startswith(f"joints: {', '.join(joints)}") and "rate:" in err and "duration:" in err
        free = fmt == "bam"
        assert ("no free-swing segment" in err) is not free, fmt
        assert all(f"quality: {w}" in err for w in q["warnings"])


def test_inspect_bad_inputs_exit_2_naming_the_problem(tmp_path: Path) -> None:
    _pace(tmp_path, J=2)
    r = run_cli("inspect", str(tmp_path / "chirp.pt"), cwd=ROOT)
    assert r.returncode == 2 and "chirp.pt" in r.stderr and "--joint-names" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    d = _bam(n=40)
    d["entries"][3]["position"] = None
    (tmp_path / "b.json").write_text(json.dumps(d))
    assert main(["inspect", str(tmp_path / "b.json")]) == 2


def test_inspect_several_bam_files_and_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "runs").mkdir()
    for k in range(2):
        (tmp_path / "runs" / f"r{k}.json").write_text(json.dumps(_bam(n=200, seed=k)))
    summary, _ = _inspect(capsys, str(tmp_path / "runs" / "r0.json"), str(tmp_path / "runs" / "r1.json"))
    assert summary["segments"] == 2
    summary, _ = _inspect(capsys, str(tmp_path / "runs"))
    assert [s["name"] for s in summary["quality"]["segments"]] == ["r0", "r1"]


def test_upload_any_format_over_http(tmp_path: Path) -> None:
    """The upload route's format and joint_names fields; DatasetError -> 422 naming file and index."""
    import torch
    from fastapi.testclient import TestClient

    from actuator_sysid.service.app import create_app
    from actuator_sysid.service.settings import Settings

    t = torch.arange(300, dtype=torch.float64) / 200
    pos = torch.stack([torch.sin(t), torch.cos(t)], dim=1)
    buf = io.BytesIO()
    torch.save({"time": t, "dof_pos": pos, "des_dof_pos": pos}, buf)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        for k in range(2):
            z.writestr(f"r{k}.json", json.dumps(_bam(n=200, seed=k)))
    # no fit runs here: spawned fit workers, so the app starts no forkserver importing the fitting stack in
    # this test process (seconds of CPU)
    settings = Settings(data_dir=tmp_path / "data", worker_start="spawn")
    with TestClient(create_app(settings)) as client:
        r = client.post(
            "/api/v1/datasets",
            files={"file": ("pace.pt", buf.getvalue())},
            data={"joint_names": "left,right"},
        )
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["joints"] == ["left", "right"] and body["quality"]["rate_hz"] == pytest.approx(200)
        got = client.get(f"/api/v1/datasets/{body['id']}").json()
        assert got["quality"]["warnings"] == body["quality"]["warnings"]
        r = client.post("/api/v1/datasets", files={"file": ("pace.pt", buf.getvalue())})
        assert (
            r.status_code == 422 and "pace.pt" in r.json()["detail"] and "joint names" in r.json()["detail"]
        )
        r = client.post(
            "/api/v1/datasets", files={"file": ("bench.zip", zbuf.getvalue())}, data={"format": ""}
        )
        assert r.status_code == 201 and r.json()["segments"] == 2 and r.json()["source_format"] == "bam"
        d = _bam(n=40)
        d["entries"][5]["speed"] = "fast"
        r = client.post("/api/v1/datasets", files={"file": ("bad.json", json.dumps(d).encode())})
        assert r.status_code == 422 and "entries[5].speed" in r.json()["detail"]
        r = client.post(
            "/api/v1/datasets", files={"file": ("x.csv", b"t,a/q,a/q_des\n0,0,0\n")}, data={"format": "hdf5x"}
        )
        assert r.status_code == 422 and "unknown format 'hdf5x'" in r.json()["detail"]
    assert np.isfinite(body["duration_s"])
