"""Crash faults: the API process is SIGKILLed mid-upload, mid-parse and mid-fit, then restarted on the same
data. Nothing partial may be listed, every stored file must still match its recorded sha256, orphaned
worker processes must end, and the interrupted fit must be failed with a reason (never left running).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path

import requests
from conftest import Server, good_rows, long_csv, start_server
from test_service_flow import LONG_BUDGET, upload_log, wait_status

from actuator_sysid.service.db import RESTARTED, Repository
from actuator_sysid.service.storage import Storage


def big_csv(rows: int) -> bytes:
    """A valid canonical log of `rows` rows of one joint at 100 Hz."""
    return long_csv(good_rows(rows))


def multipart(data: bytes, filename: str = "big.csv") -> tuple[bytes, bytes]:
    """(content type, body) of a one-file multipart form, made by hand so it can be sent in pieces."""
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: text/csv\r\n\r\n"
    ).encode()
    return (
        f"multipart/form-data; boundary={boundary}".encode(),
        head + data + f"\r\n--{boundary}--\r\n".encode(),
    )


def send_partial(server: Server, body: bytes, ctype: bytes, fraction: float) -> socket.socket:
    """Open a POST of `body` and send only `fraction` of it; returns the open socket."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(
        b"POST /api/v1/datasets HTTP/1.1\r\nHost: x\r\nContent-Type: "
        + ctype
        + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    )
    sock.sendall(body[: int(len(body) * fraction)])
    return sock


def sigkill(server: Server) -> None:
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)


def assert_store_consistent(data_dir: Path) -> list[dict]:
    """Every dataset row has its files, and every recorded artifact still hashes to its sha256."""
    repo = Repository(f"sqlite:///{data_dir / 'actuator_sysid.db'}", run_migrations=False)
    try:
        storage = Storage(data_dir)
        datasets = repo.list_datasets()
        for d in datasets:
            arts = repo.artifacts("dataset", d["id"])
            assert {"original", "recording.json", "arrays.npz"} <= set(arts), (d["id"], arts)
            assert arts["original"]["sha256"] == d["sha256"]
        for a in repo.all_artifacts():
            assert storage.verify(a["sha256"]), a
        return datasets
    finally:
        repo.close()


def pid_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie of ours does not count as alive
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.2)
    return False


# the upload test's servers run no fit: spawned workers, so none imports the fitting stack in the background
NO_FITS = {"ACTUATOR_SYSID_WORKER_START": "spawn"}
# the restarted server runs the retried fit only until its cancel: a spawned worker imports what the fit needs
# up to its first progress report, where a forkserver would first import the whole stack (exports, torch)
SPAWNED = {"ACTUATOR_SYSID_WORKER_START": "spawn"}


def test_sigkill_during_upload_and_parse_lists_nothing_partial(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data, NO_FITS)
    try:
        kept = upload_log(server, tmp_path)  # one good dataset that must survive everything
        ctype, body = multipart(big_csv(120_000))  # ~4 MB

        # 1) killed while the body is still arriving
        sock = send_partial(server, body, ctype, 0.5)
        time.sleep(0.5)
        sigkill(server)
        sock.close()
        server = start_server(data, NO_FITS)
        assert [d["id"] for d in requests.get(server.url + "/api/v1/datasets", timeout=10).json()] == [
            kept["id"]
        ]
        assert_store_consistent(data)

        # 2) killed after the whole body arrived, while it is being parsed and stored
        result: dict = {}

        def post() -> None:
            try:
                result["r"] = requests.post(
                    server.url + "/api/v1/datasets",
                    data=body,
                    headers={"Content-Type": ctype.decode()},
                    timeout=60,
                )
            except requests.RequestException as e:
                result["e"] = e

        t = threading.Thread(target=post)
        t.start()
        deadline = time.monotonic() + 30
        while not any(
            p.suffix == ".upload" and p.stat().st_size >= len(body) - 1000
            for p in (data / "tmp").iterdir()
            if p.is_file()
        ):
            assert time.monotonic() < deadline and t.is_alive(), result
            time.sleep(0.02)
        sigkill(server)
        t.join(30)
        server = start_server(data, NO_FITS)
        listed = requests.get(server.url + "/api/v1/datasets", timeout=10).json()
        assert kept["id"] in [d["id"] for d in listed]
        if "r" in result:  # the upload beat the kill: then it is complete
            assert result["r"].status_code == 201 and len(listed) == 2
        else:
            assert len(listed) == 1
        datasets = assert_store_consistent(data)
        assert {d["id"] for d in datasets} == {d["id"] for d in listed}
        # the service still takes uploads
        assert upload_log(server, tmp_path, seed=3)["id"]
    finally:
        server.stop()


def test_sigkill_during_fit_fails_it_with_reason_and_ends_worker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    try:
        ds = upload_log(server, tmp_path)
        r = requests.post(
            server.url + "/api/v1/fits",
            timeout=30,
            json={"dataset_id": ds["id"], "joints": ["knee"], "models": ["dcmotor"], "budget": LONG_BUDGET},
        )
        fit_id = r.json()["id"]
        deadline = time.monotonic() + 60
        while True:
            fit = requests.get(f"{server.url}/api/v1/fits/{fit_id}", timeout=10).json()
            if fit["status"] == "running" and fit["progress"] > 0:
                break
            assert time.monotonic() < deadline, fit
            time.sleep(0.25)  # each poll is a request the server answers; the fit runs until killed
        worker_pid = int(fit["worker"].rsplit(":", 1)[1])
        assert worker_pid != server.proc.pid
        sigkill(server)
        assert pid_gone(worker_pid, 15), "the orphaned fit worker kept running after its server died"

        server = start_server(data, SPAWNED)
        fit = requests.get(f"{server.url}/api/v1/fits/{fit_id}", timeout=10).json()
        assert fit["status"] == "failed" and fit["error"] == RESTARTED
        assert "retry" in fit["error"]
        # the retry route runs it again; cancel it to finish quickly
        assert requests.post(f"{server.url}/api/v1/fits/{fit_id}/retry", timeout=10).status_code == 202
        wait_status(server, fit_id, ("running",))
        requests.post(f"{server.url}/api/v1/fits/{fit_id}/cancel", timeout=10)
        assert (
            wait_status(server, fit_id, ("cancelled", "failed", "succeeded"), timeout=30)["status"]
            == "cancelled"
        )
        assert_store_consistent(data)
    finally:
        server.stop()
