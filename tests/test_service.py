"""The HTTP service end to end: a real uvicorn server in a subprocess, real SQLite, real files, real fits."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
import requests
from conftest import Server, good_rows, long_csv, make_recording, start_server

from actuator_sysid.datasets.canonical import sidecar_for, write_table
from actuator_sysid.service.db import RESTARTED, Repository
from actuator_sysid.service.storage import Storage, new_id

SMALL_BUDGET = {"generations": 10, "population": 8}


def upload(
    server: Server,
    data: bytes,
    filename: str = "log.csv",
    metadata: str | dict | None = None,
    fmt: str | None = None,
) -> requests.Response:
    form = {}
    if metadata is not None:
        form["metadata"] = metadata if isinstance(metadata, str) else json.dumps(metadata)
    if fmt is not None:
        form["format"] = fmt
    return requests.post(
        server.url + "/api/v1/datasets", files={"file": (filename, data)}, data=form, timeout=30
    )


def stored(server: Server) -> tuple[list[str], list[str], list[str], list[str]]:
    """Everything that could have been stored: dataset ids, stored blobs, fit ids, files left in tmp."""
    ds = [d["id"] for d in requests.get(server.url + "/api/v1/datasets", timeout=10).json()]
    fits = [f["id"] for f in requests.get(server.url + "/api/v1/fits", timeout=10).json()]
    blobs = sorted(p.name for p in (server.data_dir / "blobs").glob("*/*"))
    tmp = sorted(p.name for p in (server.data_dir / "tmp").iterdir())
    return ds, blobs, fits, tmp


def artifacts(server: Server, kind: str, owner: str) -> dict[str, dict]:
    """name → {sha256, size} of a dataset's or fit's stored files, read from the server's database."""
    repo = Repository(f"sqlite:///{server.data_dir / 'actuator_sysid.db'}", run_migrations=False)
    try:
        return repo.artifacts(kind, owner)
    finally:
        repo.close()


def blob(server: Server, art: dict) -> Path:
    return server.data_dir / "blobs" / art["sha256"][:2] / art["sha256"]


def good_upload(server: Server, tmp_path: Path) -> dict:
    """Upload a 2-joint, 3-segment recording written by the canonical writer, with its sidecar."""
    rec = make_recording(joints=("hip", "knee"))
    write_table(rec, tmp_path / "log.csv")
    r = upload(server, (tmp_path / "log.csv").read_bytes(), metadata=sidecar_for(rec))
    assert r.status_code == 201, r.text
    return r.json()


def wait_for_fit(server: Server, fit_id: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fit = requests.get(f"{server.url}/api/v1/fits/{fit_id}", timeout=10).json()
        assert 0.0 <= fit["progress"] <= 1.0
        if fit["status"] in ("succeeded", "failed"):
            return fit
        time.sleep(0.2)
    raise AssertionError(f"fit {fit_id} still {fit['status']} after {timeout} s")


# --- basics ---


def test_health_index_and_static_plotly(server: Server) -> None:
    assert requests.get(server.url + "/healthz", timeout=10).json() == {"status": "ok"}
    page = requests.get(server.url + "/", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'type="file"' in page.text and 'name="metadata"' in page.text
    assert '<script src="http' not in page.text  # no external assets
    js = requests.get(server.url + "/static/plotly.min.js", timeout=10)
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert len(js.content) > 1_000_000 and b"plotly" in js.content[:2000].lower()


def test_upload_list_get(server: Server, tmp_path: Path) -> None:
    body = good_upload(server, tmp_path)
    assert body["joints"] == ["hip", "knee"]
    assert body["segments"] == 3 and body["rate_hz"] == pytest.approx(100.0)
    assert body["duration_s"] == pytest.approx(3 * 1.99)
    # the upload's warnings are the dataset page's: no reader warning, the quality report's only
    assert body["warnings"] == body["quality"]["warnings"] and body["name"] == "log.csv"
    listed = requests.get(server.url + "/api/v1/datasets", timeout=10).json()
    assert body["id"] in [d["id"] for d in listed]
    got = requests.get(f"{server.url}/api/v1/datasets/{body['id']}", timeout=10)
    assert got.status_code == 200 and got.json() == body
    raw = (tmp_path / "log.csv").read_bytes()
    assert body["sha256"] == hashlib.sha256(raw).hexdigest() and body["size"] == len(raw)
    arts = artifacts(server, "dataset", body["id"])
    assert blob(server, arts["original"]).read_bytes() == raw  # stored by content, under its checksum
    assert {"recording.json", "arrays.npz"} <= set(arts)
    for a in arts.values():
        assert hashlib.sha256(blob(server, a).read_bytes()).hexdigest() == a["sha256"]
    assert "log.csv" in requests.get(server.url + "/", timeout=10).text


def test_unknown_ids_are_404_with_message(server: Server) -> None:
    for path in (
        "/api/v1/datasets/nope",
        "/api/v1/fits/nope",
        "/api/v1/fits/nope/export/isaaclab.py",
        "/fits/nope",
    ):
        r = requests.get(server.url + path, timeout=10)
        assert r.status_code == 404, path
        assert "'nope'" in r.json()["detail"]


# --- bad uploads: 4xx naming the problem, nothing stored ---

_ROWS = good_rows(30)
BAD_UPLOADS = {
    "empty file": (b"", {}, 422, ["empty"]),
    "unknown format": (long_csv(_ROWS), {"fmt": "xlsx"}, 422, ["format", "xlsx"]),
    "not a canonical table": (b"foo,bar\n1,2\n", {}, 422, ["unknown format"]),
    "t not increasing": (
        long_csv(_ROWS[:12] + [[0.05, "j1", 0, 1, 0, "a"]] + _ROWS[13:]),
        {},
        422,
        ["not increasing", "line 14 "],
    ),
    "duplicate t": (
        long_csv(_ROWS[:12] + [[_ROWS[11][0], "j1", 0, 1, 0, "a"]] + _ROWS[13:]),
        {},
        422,
        ["duplicate t"],
    ),
    "NaN": (
        long_csv(_ROWS[:5] + [[0.05, "j1", "nan", 1, 0, "a"]] + _ROWS[6:]),
        {},
        422,
        ["line 7 (", "'q'", "NaN"],
    ),
    "inf": (
        long_csv(_ROWS[:5] + [[0.05, "j1", 0, "inf", 0, "a"]] + _ROWS[6:]),
        {},
        422,
        ["line 7 (", "'qd'", "inf"],
    ),
    "missing q": (
        long_csv([[r[0], r[1], r[3], r[4], r[5]] for r in _ROWS], "t,joint,qd,q_des,segment"),
        {},
        422,
        ["'q'"],
    ),
    "missing q_des": (
        long_csv([r[:4] + [r[5]] for r in _ROWS], "t,joint,q,qd,segment"),
        {},
        422,
        ["'q_des'"],
    ),
    "sidecar names an unknown joint": (
        long_csv(_ROWS),
        {"metadata": {"joints": {"elbow": {"mass": 1.0}}}},
        422,
        ["'elbow'"],
    ),
    "segment under 10 samples": (
        long_csv(_ROWS + good_rows(5, segment="b", t0=1.0)),
        {},
        422,
        ["segment b", "only 5 samples", "at least 10"],
    ),
    "metadata not JSON": (long_csv(_ROWS), {"metadata": "{joints: 1"}, 422, ["metadata", "invalid JSON"]),
    "metadata not an object": (long_csv(_ROWS), {"metadata": "[1, 2]"}, 422, ["metadata", "object"]),
}


@pytest.mark.parametrize("case", list(BAD_UPLOADS))
def test_bad_upload_is_rejected_and_nothing_stored(server: Server, case: str) -> None:
    data, kwargs, status, needles = BAD_UPLOADS[case]
    before = stored(server)
    r = upload(server, data, **kwargs)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "Traceback" not in detail
    for needle in needles:
        assert needle.lower() in detail.lower(), (needle, detail)
    assert stored(server) == before


def test_oversize_upload_is_413_and_nothing_stored(server: Server) -> None:
    before = stored(server)
    r = upload(server, b"t,joint,q,q_des\n" + b"0.0,j1,0.0,0.0\n" * 80_000)  # ~1.2 MB > 1 MB limit
    assert r.status_code == 413
    assert "limit" in r.json()["detail"]
    assert stored(server) == before


def test_good_upload_still_accepted_after_bad_ones(server: Server) -> None:
    r = upload(
        server,
        long_csv(_ROWS + good_rows(20, segment="b", t0=1.0)),
        metadata={"joints": {"j1": {"mass": 0.3, "com_distance": 0.2}}, "segments": {"a": {"kp": 5}}},
    )
    assert r.status_code == 201, r.text
    assert r.json()["segments"] == 2


# --- fit requests: checked before anything is queued ---


def test_fit_request_errors_store_nothing(server: Server, tmp_path: Path) -> None:
    ds = good_upload(server, tmp_path)["id"]
    cases = [
        ({"dataset_id": "0" * 32}, 404, ["0" * 32]),
        ({"dataset_id": ds, "joints": ["elbow"]}, 422, ["'elbow'"]),
        ({"dataset_id": ds, "models": ["neural_net"]}, 422, ["'neural_net'"]),
        ({"dataset_id": ds, "budget": {"generations": 0, "population": 8}}, 422, ["generations"]),
        ({"dataset_id": ds, "budget": {"generations": "many"}}, 422, ["generations"]),
        ({"dataset_id": ds, "budget": {"population": 1}}, 422, ["population"]),
        ({"dataset_id": ds, "colour": "red"}, 422, ["colour"]),
        ({"dataset_id": ds, "holdout": "rig=b"}, 422, ["holdout", "'rig'"]),
        ({"dataset_id": ds, "folds": 1}, 422, ["folds must be between 2"]),
        ({"dataset_id": ds, "budget": {"seconds": -1}}, 422, ["budget.seconds"]),
        ({"dataset_id": ds, "add_terms": ["gearbox"]}, 422, ["'gearbox'", "add_terms"]),
        ({}, 422, ["dataset_id"]),
    ]
    before = stored(server)
    for body, status, needles in cases:
        r = requests.post(server.url + "/api/v1/fits", json=body, timeout=30)
        assert r.status_code == status, (body, r.text)
        for needle in needles:
            assert needle in r.json()["detail"], (body, r.json())
    assert stored(server) == before


# --- restart policy, worker errors, exports of unfinished fits ---


def test_restart_policy_and_failed_fits(tmp_path: Path) -> None:
    """A fit left running is failed on startup; a queued one is run again; worker errors are messages."""
    data = tmp_path / "data"
    repo, storage = Repository(f"sqlite:///{data / 'actuator_sysid.db'}"), Storage(data)
    ds = new_id()
    path = storage.save_dataset(ds, make_recording(), b"original")
    repo.create_dataset(ds, "bench.csv", make_recording().summary(), path)
    running, queued = new_id(), new_id()
    repo.create_fit(running, ds, {"models": ["dcmotor"], "generations": 10, "population": 8})
    repo.start_fit(running)
    repo.create_fit(
        queued, ds, {"joints": ["ghost"], "models": ["dcmotor"], "generations": 10, "population": 8}
    )
    repo.close()

    # spawned fit workers: the one fit it runs is rejected before any search, so a forkserver importing the
    # fitting stack for it would be seconds of CPU spent on nothing
    server = start_server(data, {"ACTUATOR_SYSID_WORKER_START": "spawn"})
    try:
        fit = requests.get(f"{server.url}/api/v1/fits/{running}", timeout=10).json()
        assert fit["status"] == "failed" and fit["error"] == RESTARTED
        again = wait_for_fit(server, queued)  # re-queued, then rejected by the worker with a message
        assert again["status"] == "failed"
        assert "'ghost'" in again["error"] and "Traceback" not in again["error"]
        r = requests.get(f"{server.url}/api/v1/fits/{running}/export/isaaclab.py", timeout=10)
        assert r.status_code == 409 and "failed" in r.json()["detail"]
        page = requests.get(f"{server.url}/fits/{running}", timeout=10)
        assert page.status_code == 200 and RESTARTED in page.text and "bench.csv" in page.text
    finally:
        server.stop()


# --- the whole flow (needs the lead's fitting and exporter) ---


def test_full_fit_flow(server: Server, tmp_path: Path) -> None:
    ds = good_upload(server, tmp_path)["id"]
    r = requests.post(
        server.url + "/api/v1/fits",
        timeout=30,
        json={
            "dataset_id": ds,
            "joints": ["knee"],
            "models": ["dcmotor", "ideal_pd"],
            "budget": SMALL_BUDGET,
            "seed": 3,
        },
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued"
    fit_id = r.json()["id"]
    assert fit_id in [f["id"] for f in requests.get(server.url + "/api/v1/fits", timeout=10).json()]

    fit = wait_for_fit(server, fit_id)
    assert fit["status"] == "succeeded", fit.get("error")
    assert fit["progress"] == 1.0 and "error" not in fit
    result = fit["result"]
    assert list(result["joints"]) == ["knee"]
    assert set(result["joints"]["knee"]["models"]) == {"dcmotor", "ideal_pd"}
    arts = artifacts(server, "fit", fit_id)
    assert json.loads(blob(server, arts["fit.json"]).read_text()) == result
    assert {"fit.json", "report_data.json", "isaaclab.py", "isaaclab.json"} <= set(arts)
    assert {a["name"] for a in fit["artifacts"]} == set(arts)

    py = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/isaaclab.py", timeout=10)
    assert py.status_code == 200 and py.headers["content-type"].startswith("text/x-python")
    assert "attachment" in py.headers["content-disposition"]
    compile(py.text, "isaaclab.py", "exec")
    js = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/isaaclab.json", timeout=10)
    assert js.status_code == 200 and js.headers["content-type"].startswith("application/json")
    assert "actuators" in js.json()
    bad = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/mujoco.xml", timeout=10)
    assert bad.status_code == 404 and "mujoco.xml" in bad.json()["detail"]

    page = requests.get(f"{server.url}/fits/{fit_id}", timeout=10)
    assert page.status_code == 200
    assert 'PLOTLY_URL = "/static/plotly.min.js"' in page.text  # loaded after the page, figures from the API
    assert 'id="plot-0-seg-0"' in page.text and 'id="plot-0-envelope"' in page.text
    best = result["joints"]["knee"]["best_model"]
    for name in result["joints"]["knee"]["models"][best]["params"]:
        assert f"<code>{name}</code>" in page.text
    assert "ideal_pd" in page.text and "dcmotor" in page.text and "validation" in page.text
    assert requests.get(server.url + "/static/plotly.min.js", timeout=10).status_code == 200
