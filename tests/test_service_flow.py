"""The service's fit suite, run against real components: here SQLite + local worker processes; the same
`run_fit_suite` runs on PostgreSQL (test_postgres.py) and on a Ray cluster (test_ray.py).

One pass covers the queue end to end: upload, two fits (one long, one small), delete refused while a fit
runs, cancel of a queued and of a running fit, retry, Server-Sent Events until the end, exports with
checksums, metrics, the fleet view, deletes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import requests
from conftest import Server, make_recording, start_server

from actuator_sysid.datasets.canonical import sidecar_for, write_table

SMALL_BUDGET = {"generations": 10, "population": 8}
LONG_BUDGET = {"generations": 10000, "population": 8}  # runs until cancelled


def wait_status(
    server: Server, fit_id: str, statuses: tuple[str, ...], timeout: float = 90.0, headers: dict | None = None
) -> dict:
    deadline = time.monotonic() + timeout
    fit: dict = {}
    while time.monotonic() < deadline:
        fit = requests.get(f"{server.url}/api/v1/fits/{fit_id}", headers=headers, timeout=10).json()
        if fit["status"] in statuses:
            return fit
        time.sleep(0.2)
    raise AssertionError(
        f"fit {fit_id} still {fit.get('status')} after {timeout} s, wanted {statuses}: {fit}"
    )


def read_events(
    server: Server, fit_id: str, headers: dict | None = None, timeout: float = 120.0
) -> list[tuple]:
    """Follow the SSE stream of a fit to its end; returns (event, data) pairs."""
    events: list[tuple[str, dict]] = []
    with requests.get(
        f"{server.url}/api/v1/fits/{fit_id}/events", headers=headers, stream=True, timeout=timeout
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        name, deadline = None, time.monotonic() + timeout
        for line in r.iter_lines(decode_unicode=True):
            assert time.monotonic() < deadline, "event stream did not end"
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and name:
                events.append((name, json.loads(line[6:])))
                if name == "end":
                    break
    return events


def upload_log(
    server: Server, tmp_path: Path, serial: str = "SN-1", headers: dict | None = None, seed: int = 0
) -> dict:
    rec = make_recording(joints=("hip", "knee"), seed=seed)
    write_table(rec, tmp_path / "log.csv")
    meta = {**sidecar_for(rec), "actuator_model": "test-motor", "serial": serial}
    with open(tmp_path / "log.csv", "rb") as f:
        r = requests.post(
            server.url + "/api/v1/datasets",
            files={"file": ("log.csv", f)},
            data={"metadata": json.dumps(meta)},
            headers=headers,
            timeout=60,
        )
    assert r.status_code == 201, r.text
    return r.json()


def run_fit_suite(server: Server, tmp_path: Path, headers: dict | None = None) -> None:
    """The whole fit flow over HTTP, as a client of any backend sees it."""
    url, h = server.url, headers
    ds = upload_log(server, tmp_path, headers=h)
    assert ds["actuator_model"] == "test-motor" and ds["serial"] == "SN-1" and len(ds["sha256"]) == 64

    def start(budget: dict, joints: list[str] | None = None) -> str:
        r = requests.post(
            url + "/api/v1/fits",
            headers=h,
            timeout=30,
            json={
                "dataset_id": ds["id"],
                "joints": joints or ["knee"],
                "models": ["dcmotor"],
                "budget": budget,
                "seed": 1,
            },
        )
        assert r.status_code == 202, r.text
        assert r.json()["status"] == "queued"
        return r.json()["id"]

    long_id = start(LONG_BUDGET)
    running = wait_status(server, long_id, ("running",), headers=h)
    if running["executor"] == "local":  # the local worker computes only on CPU time requests do not want
        # the dispatcher claims under its own name; the worker names itself once imported (an idle worker's
        # imports wait for spare CPU, long on a busy machine)
        deadline = time.monotonic() + 120
        pid = int(running["worker"].rsplit(":", 1)[1])
        while pid == server.proc.pid and time.monotonic() < deadline:
            time.sleep(0.1)
            running = requests.get(f"{url}/api/v1/fits/{long_id}", headers=h, timeout=10).json()
            pid = int(running["worker"].rsplit(":", 1)[1])
        assert pid != server.proc.pid, f"the worker did not name itself: {running['worker']}"
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE, running["worker"]
    small_id = start(SMALL_BUDGET)  # one worker: waits in the queue behind the long fit

    # the dataset is in use: deleting it is refused, naming the fits
    r = requests.delete(f"{url}/api/v1/datasets/{ds['id']}", headers=h, timeout=10)
    assert r.status_code == 409 and long_id in r.json()["detail"]

    # cancel the queued fit (at once), retry it (queued again), then cancel the running one
    r = requests.post(f"{url}/api/v1/fits/{small_id}/cancel", headers=h, timeout=10)
    assert r.status_code == 202 and r.json()["status"] == "cancelled", r.text
    assert requests.post(f"{url}/api/v1/fits/{small_id}/cancel", headers=h, timeout=10).status_code == 409
    r = requests.post(f"{url}/api/v1/fits/{small_id}/retry", headers=h, timeout=10)
    assert r.status_code == 202 and r.json()["status"] == "queued", r.text
    r = requests.post(f"{url}/api/v1/fits/{long_id}/cancel", headers=h, timeout=10)
    assert r.status_code == 202 and r.json()["status"] in ("running", "cancelled")
    cancelled = wait_status(server, long_id, ("cancelled", "failed", "succeeded"), timeout=30, headers=h)
    assert cancelled["status"] == "cancelled", cancelled
    assert (
        requests.get(f"{url}/api/v1/fits/{long_id}/export/isaaclab.py", headers=h, timeout=10).status_code
        == 409
    )

    # the retried fit runs; its event stream carries progress and log lines up to the end
    events = read_events(server, small_id, headers=h)
    kinds = [e for e, _ in events]
    assert kinds[-1] == "end" and events[-1][1]["status"] == "succeeded", events[-3:]
    progress = [d["progress"] for e, d in events if e == "progress"]
    assert len(progress) >= 2 and progress == sorted(progress) and progress[-1] == 1.0
    logs = [d["message"] for e, d in events if e == "log"]
    assert any("queued again" in m for m in logs) and any("started" in m for m in logs), logs

    fit = requests.get(f"{url}/api/v1/fits/{small_id}", headers=h, timeout=10).json()
    assert fit["status"] == "succeeded" and fit["progress"] == 1.0 and "error" not in fit
    assert list(fit["result"]["joints"]) == ["knee"]
    names = {a["name"]: a for a in fit["artifacts"]}
    assert {"fit.json", "isaaclab.py", "isaaclab.json", "report_data.json"} <= set(names)
    for name in ("isaaclab.py", "isaaclab.json", "fit.json"):
        r = requests.get(f"{url}/api/v1/fits/{small_id}/export/{name}", headers=h, timeout=10)
        assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
        assert hashlib.sha256(r.content).hexdigest() == names[name]["sha256"] == r.headers["x-content-sha256"]
    assert (
        json.loads(
            requests.get(f"{url}/api/v1/fits/{small_id}/export/fit.json", headers=h, timeout=10).content
        )
        == fit["result"]
    )
    compile(
        requests.get(f"{url}/api/v1/fits/{small_id}/export/isaaclab.py", headers=h, timeout=10).text,
        "isaaclab.py",
        "exec",
    )
    # the exports' validation: the same document as validation.json, shown on the report page
    v = requests.get(f"{url}/api/v1/fits/{small_id}/validation", headers=h, timeout=10)
    assert v.status_code == 200 and v.json()["rule"] == "NEWTON.DJ.001", v.text[:300]
    assert v.json() == json.loads(
        requests.get(f"{url}/api/v1/fits/{small_id}/export/validation.json", headers=h, timeout=10).content
    )
    replayed = {f for f, r in v.json()["replay"].items() if r["status"] == "ok"}
    assert {"isaaclab.json", "newton.usda", "mjcf.xml"} <= replayed, v.json()["replay"]
    page_html = requests.get(f"{url}/fits/{small_id}", headers=h, timeout=20).text
    assert "Export validation" in page_html and "replay RMSE" in page_html
    assert all(f"{fmt} (" in page_html for fmt in replayed)
    assert requests.get(f"{url}/api/v1/fits/{long_id}/validation", headers=h, timeout=10).status_code == 409
    retry = requests.post(f"{url}/api/v1/fits/{small_id}/retry", headers=h, timeout=10)
    assert retry.status_code == 409 and "succeeded" in retry.json()["detail"]

    # pages: the report, the dataset page, compare and fleet
    for page in (
        f"/fits/{small_id}",
        f"/datasets/{ds['id']}",
        f"/compare?a={small_id}&b={long_id}",
        "/fleet?actuator_model=test-motor",
        "/",
    ):
        r = requests.get(url + page, headers=h, timeout=20)
        assert r.status_code == 200 and "text/html" in r.headers["content-type"], (page, r.text[:300])
    fleet = requests.get(f"{url}/api/v1/fleet/test-motor", headers=h, timeout=10).json()
    assert fleet["fits"] == 1 and fleet["serials"] == ["SN-1"] and fleet["series"]

    # metrics: requests by route and status, fits by status, queue depth, durations
    m = requests.get(url + "/metrics", headers=h, timeout=10).text
    assert 'actuator_sysid_fits{status="succeeded"} 1.0' in m
    assert 'actuator_sysid_fits{status="cancelled"} 1.0' in m
    assert "actuator_sysid_queue_depth 0.0" in m
    assert "actuator_sysid_fit_duration_seconds_count 1.0" in m
    assert 'route="/api/v1/fits/{fit_id}",status="200"' in m

    # deletes: the finished fit, then the dataset (its cancelled fit goes with it), files included
    r = requests.delete(f"{url}/api/v1/fits/{small_id}", headers=h, timeout=10)
    assert r.status_code == 200 and r.json()["files_removed"] >= 3
    assert requests.get(f"{url}/api/v1/fits/{small_id}", headers=h, timeout=10).status_code == 404
    r = requests.delete(f"{url}/api/v1/datasets/{ds['id']}", headers=h, timeout=10)
    assert r.status_code == 200 and r.json()["fits_deleted"] == [long_id], r.text
    assert requests.get(f"{url}/api/v1/datasets/{ds['id']}", headers=h, timeout=10).status_code == 404
    assert not (server.data_dir / "blobs" / ds["sha256"][:2] / ds["sha256"]).exists()


# the fit suite checks the production policy (a local worker runs SCHED_IDLE), not the test servers' default
IDLE_WORKERS = {"ACTUATOR_SYSID_WORKER_PRIORITY": "idle"}


def test_fit_suite_sqlite_local(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", IDLE_WORKERS)
    try:
        run_fit_suite(server, tmp_path)
        db = (server.data_dir / "actuator_sysid.db").read_bytes()[:16]
        assert db.startswith(b"SQLite format 3")
        assert (server.data_dir / "actuator_sysid.db-wal").exists()  # WAL mode
    finally:
        server.stop()
