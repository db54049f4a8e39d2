"""bench/service.py keeps running and prints the figures BENCHMARKS.md quotes (a smoke run, not a timing)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, pythonpath


def test_service_bench_quick_prints_json_figures() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "service.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=True,
        env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"},
    )
    run, summary = (
        json.loads(line) for line in out.stdout.splitlines()
    )  # one line per run, then the summary
    load, upload = run["status_routes_during_fit"], run["upload"]
    assert run["run"] == 1 and run["of"] == 1 and len(run["loadavg_before"]) == 3
    assert load["requests"] > 0 and load["errors"] == 0 and load["fit_running_throughout"]
    assert 0 < run["p50"] <= run["p95"] <= run["p99"] <= run["max"]
    assert load["server_cpu_ms_per_request"] > 0
    assert upload["status"] == 201 and upload["bytes"] > 4_000_000 and upload["mb_per_s"] > 0
    assert upload["server_rss_growth_mb"] < 64
    assert summary["p99_ms"] == [run["p99"]]
    assert set(summary["targets_met"]) == {"p99_le_50ms_every_run", "no_errors", "rss_growth_le_64mb"}


WORKER_PRIORITY = """
import os, subprocess, sys, threading
from actuator_sysid.service.jobs import yield_cpu_to_requests
started = threading.Event()
stop = threading.Event()
threading.Thread(target=lambda: (started.set(), stop.wait())).start()  # a thread from before, as OpenBLAS's
started.wait()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print(yield_cpu_to_requests(), yield_cpu_to_requests(child.pid))
print(sorted({os.sched_getscheduler(int(t)) for t in os.listdir("/proc/self/task")}), os.sched_getscheduler(child.pid))
child.kill()
stop.set()
"""


def test_fit_worker_priority_covers_every_thread_and_a_spawned_worker() -> None:
    """The latency figures rest on this: every thread of a local fit worker runs SCHED_IDLE, also the threads
    its imports started before the fit did, and the API sets a spawned worker idle before it imports."""
    import os

    import pytest

    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("SCHED_IDLE is Linux only")
    out = subprocess.run(
        [sys.executable, "-c", WORKER_PRIORITY],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=True,
        env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"},
    )
    lines = out.stdout.split("\n")
    assert lines[0] == "idle idle", out.stdout
    assert lines[1] == f"[{os.SCHED_IDLE}] {os.SCHED_IDLE}", out.stdout


@pytest.mark.parametrize("priority", ["idle", "normal"])
def test_the_worker_priority_setting_picks_a_spawned_workers_policy(priority: str, tmp_path: Path) -> None:
    """worker_priority (ACTUATOR_SYSID_WORKER_PRIORITY): idle, the default, spawns a local fit worker SCHED_IDLE;
    normal leaves it SCHED_OTHER, so the test servers' workers are not starved past their lease on a busy machine."""
    import multiprocessing as mp
    import os

    from actuator_sysid.service.jobs import LocalExecutor
    from actuator_sysid.service.settings import Settings

    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("SCHED_IDLE is Linux only")
    assert Settings(data_dir=tmp_path).worker_priority == "idle"
    # spawned, not forked from a warm forkserver: the policy is set by launch() either way, and a forkserver
    # would import the whole fitting stack only to have one worker's policy read
    executor = LocalExecutor(Settings(data_dir=tmp_path, worker_priority=priority, worker_start="spawn"))
    executor.launch({"id": "no-such-fit", "claim": "c"})
    try:
        (worker,) = [p for p in mp.active_children() if p.name == "fit-no-such-"]
        assert worker.pid is not None
        policy = os.sched_getscheduler(worker.pid)
        with contextlib.suppress(
            OSError
        ):  # an idle worker stops slowly on a busy machine: not the point here
            os.sched_setscheduler(worker.pid, os.SCHED_OTHER, os.sched_param(0))
    finally:
        executor.shutdown()
    assert policy == (os.SCHED_IDLE if priority == "idle" else os.SCHED_OTHER), policy
