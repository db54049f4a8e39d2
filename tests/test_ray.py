"""The fit suite on a real local Ray cluster: a head started by the test (its own ports, never 6379, which
is Redis here), the API submitting each fit as a Ray task, and a Ray worker killed mid-fit.

The head runs `ray start --head --block` in its own process group, so the test stops exactly the
processes it started (the group) and nothing else on the machine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from conftest import ROOT, Server, free_port, pythonpath, start_server
from test_service_flow import run_fit_suite, upload_log, wait_status

RAY = Path(sys.executable).with_name("ray")
# Ray swaps 127.0.0.1 for the machine's interface address unless told it is a one-machine cluster:
# keep every connection of the test cluster (head, workers, the API as driver) on loopback.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Ray cluster on loopback; yields its GCS address host:port."""
    pytest.importorskip("ray")
    port = free_port()
    ports = {
        f"--{k}": str(free_port())
        for k in (
            "ray-client-server-port",
            "node-manager-port",
            "object-manager-port",
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "metrics-export-port",
            "runtime-env-agent-port",
        )
    }
    # short temp root: Ray's socket paths must stay under the 107-character Unix limit
    temp = Path(f"/tmp/asid-ray-{port}")
    log = tmp_path_factory.mktemp("ray") / "head.log"
    env = {**os.environ, "PYTHONPATH": pythonpath(), **LOOPBACK_ONLY}
    args = [
        str(RAY),
        "start",
        "--head",
        "--block",
        "--node-ip-address",
        "127.0.0.1",
        "--port",
        str(port),
        "--num-cpus",
        "2",
        "--num-gpus",
        "0",
        "--include-dashboard",
        "false",
        "--object-store-memory",
        str(100 * 1024 * 1024),
        "--temp-dir",
        str(temp),
        "--min-worker-port",
        "0",
        "--max-worker-port",
        "0",
        "--disable-usage-stats",
    ]
    for k, v in ports.items():
        args += [k, v]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args + [], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray head did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))
        assert "Local node IP: 127.0.0.1" in plain, "the Ray head left loopback"
        yield address
    finally:
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with_group_gone(proc.pid)
        subprocess.run(["rm", "-rf", str(temp)], check=False)


def with_group_gone(pgid: int, timeout: float = 10) -> None:
    """Wait until no process of the head's group is left (SIGKILL stragglers of that group only)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def ray_server(data_dir: Path, address: str, **extra: str) -> Server:
    env = {"ACTUATOR_SYSID_EXECUTOR": "ray", "ACTUATOR_SYSID_RAY_ADDRESS": address, **LOOPBACK_ONLY, **extra}
    return start_server(data_dir, env, timeout=90)


@pytest.fixture(scope="module")
def ray_api(ray_head: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One API server on the head for the file, two attempts a fit (the killed worker's fit runs again): the
    fit suite runs first, so its counts (one succeeded, one cancelled fit) are the server's own, and the
    kill test's fit finds the Ray worker the suite's fits warmed."""
    server = ray_server(
        tmp_path_factory.mktemp("ray-api") / "data", ray_head, ACTUATOR_SYSID_FIT_ATTEMPTS="2"
    )
    try:
        yield server
    finally:
        server.stop()


def test_fit_suite_sqlite_ray(ray_api: Server, tmp_path: Path) -> None:
    server = ray_api
    run_fit_suite(server, tmp_path)
    fits = requests.get(server.url + "/api/v1/fits", timeout=10).json()
    assert fits == [] or all(f["executor"] == "ray" for f in fits)


def test_ray_worker_killed_mid_fit_is_retried(ray_api: Server, tmp_path: Path) -> None:
    """SIGKILL the Ray worker process running a fit: the queue re-runs it (2 attempts allowed) to success."""
    server = ray_api
    ds = upload_log(server, tmp_path)
    r = requests.post(
        server.url + "/api/v1/fits",
        timeout=30,
        json={
            "dataset_id": ds["id"],
            "joints": ["knee"],
            "models": ["dcmotor"],
            "budget": {"generations": 60, "population": 8},
            "seed": 2,
        },
    )
    fit_id = r.json()["id"]
    deadline = time.monotonic() + 90
    while True:  # wait until the Ray worker has reported progress under its own pid
        fit = requests.get(f"{server.url}/api/v1/fits/{fit_id}", timeout=10).json()
        if fit["status"] == "running" and fit["progress"] > 0 and fit["worker"]:
            break
        assert fit["status"] in ("queued", "running") and time.monotonic() < deadline, fit
        time.sleep(0.1)
    host, pid = fit["worker"].rsplit(":", 1)
    assert int(pid) != server.proc.pid
    os.kill(int(pid), signal.SIGKILL)
    done = wait_status(server, fit_id, ("succeeded", "failed"), timeout=180)
    assert done["status"] == "succeeded", done
    assert done["attempts"] == 2
    events = requests.get(f"{server.url}/api/v1/fits/{fit_id}/events", timeout=60).text
    assert "Ray worker running the fit died" in events and "queued again (attempt 2 of 2)" in events
