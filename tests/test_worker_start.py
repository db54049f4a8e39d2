"""How local fit workers start (service/jobs.py worker_context) and how they see their server end."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from actuator_sysid.service.jobs import _threads, has_nvidia_gpu, process_alive, worker_context


def _report(conn) -> None:
    """In the worker: which of the fitting stack's modules were there before it imported anything."""
    conn.send({m: m in sys.modules for m in ("torch", "newton", "mujoco", "actuator_sysid.service.jobs")})
    conn.close()


def _started_with(ctx) -> dict[str, bool]:
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_report, args=(child,))
    proc.start()
    assert parent.poll(120), "the worker did not report"
    out = parent.recv()
    proc.join(30)
    assert proc.exitcode == 0
    return out


def test_a_warm_worker_starts_with_the_fitting_stack_imported_and_a_spawned_one_without() -> None:
    warm = worker_context("warm")
    assert warm.get_start_method() == "forkserver"
    assert all(_started_with(warm).values())
    spawned = worker_context("spawn")
    assert spawned.get_start_method() == "spawn"
    assert not any(v for k, v in _started_with(spawned).items() if k != "actuator_sysid.service.jobs")
    # auto: warm unless a GPU's driver is there (a fork of a process that touched CUDA cannot use it)
    assert worker_context("auto").get_start_method() == ("spawn" if has_nvidia_gpu() else "forkserver")


def _policy(conn) -> None:
    conn.send(os.sched_getscheduler(0))
    conn.close()


def test_where_workers_run_idle_the_forkserver_preloads_idle_and_its_workers_start_idle() -> None:
    from multiprocessing import forkserver

    ctx = worker_context("warm", idle=True)
    deadline = time.monotonic() + 60
    while True:  # the forkserver starts in the background; its priority is set once it runs
        pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
        if pid and os.sched_getscheduler(pid) == os.SCHED_IDLE:
            break
        assert time.monotonic() < deadline, "the forkserver never ran idle"
        time.sleep(0.05)
    threads = _threads(pid)
    assert all(os.sched_getscheduler(t) == os.SCHED_IDLE for t in threads), threads
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_policy, args=(child,))
    proc.start()
    assert parent.poll(120), "the worker did not report"
    assert parent.recv() == os.SCHED_IDLE
    proc.join(30)


def test_a_worker_sees_its_server_gone_or_a_zombie() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while process_alive(child.pid):  # ended but not reaped: a zombie counts as gone
        assert time.monotonic() < deadline, "the child never ended"
        time.sleep(0.05)
    assert child.poll() == 0
    assert not process_alive(child.pid)  # reaped: no such process
