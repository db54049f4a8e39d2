"""Service benchmark on loopback: status-route latency under load while a fit runs, and a large upload.

1. A real server (SQLite, local worker) is started on a free loopback port with a long fit running.
   N clients (asyncio, one keep-alive connection each) each loop for D seconds over the list and status routes
   (GET /api/v1/fits, /api/v1/fits/{id}, /api/v1/datasets, /api/v1/datasets/{id}), pausing `think`
   seconds between requests, as a dashboard that polls does. → p50/p95/p99 latency, requests, errors.
2. One upload of a valid canonical CSV of `upload_mb` MB: wall time → MB/s, and the server process's
   peak RSS growth over its idle RSS (sampled every 20 ms from /proc). The parser process's peak RSS is
   reported beside it (parsing happens there, by design).

Usage: python bench/service.py [--quick] [--runs 3] [--clients 50] [--seconds 30] [--think 0.1] [--upload-mb 200]
                              [--profile]
Prints one JSON line per run (p50/p95/p99/max, the load average before and after its load phase, the upload
on the last run; with --profile the server's py-spy breakdown), then one summary line. Each run starts its
own server. Loopback only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests

ROOT = Path(__file__).resolve().parents[1]
MAX_REQUESTS_PER_CLIENT = 100_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (/proc/PID/stat; 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, IndexError, ValueError):
        return 0.0


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def start_server(data: Path, max_upload: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ACTUATOR_SYSID_MAX_UPLOAD_BYTES": str(max_upload),
        "ACTUATOR_SYSID_LOG_FORMAT": "json",
    }
    log = open(data.parent / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actuator_sysid.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(data),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/healthz", timeout=1).ok:
                return proc, url
        except requests.ConnectionError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def small_log() -> tuple[bytes, dict]:
    """A 1-joint, 3-segment log and its sidecar (for the fit that runs during the load phase)."""
    t = np.arange(400) / 200.0
    rows = ["t,joint,q,qd,q_des,segment"]
    for k in range(3):
        q_des = 0.5 * np.sin(2 * np.pi * (0.5 + 0.3 * k) * t)
        q = 0.9 * np.sin(2 * np.pi * (0.5 + 0.3 * k) * t - 0.1)
        qd = np.gradient(q, t)
        rows += [
            f"{ti:.4f},j1,{a:.6f},{b:.6f},{c:.6f},s{k}" for ti, a, b, c in zip(t, q, qd, q_des, strict=True)
        ]
    side = {
        "joints": {"j1": {"mass": 0.5, "com_distance": 0.1}},
        "segments": {f"s{k}": {"kp": 5.0, "kd": 0.1} for k in range(3)},
    }
    return ("\n".join(rows) + "\n").encode(), side


def big_csv(path: Path, megabytes: float) -> int:
    """Write a valid canonical long CSV of about `megabytes` MB (one joint, 1 kHz, 10 s segments)."""
    target = int(megabytes * 1e6)
    n = 10_000
    t = np.arange(n) / 1000.0
    size, seg = 0, 0
    with open(path, "w") as f:
        f.write("t,joint,q,q_des,segment\n")
        while size < target:
            q_des = 0.5 * np.sin(2 * np.pi * (0.2 + 0.01 * (seg % 50)) * t)
            block = "".join(
                f"{ti:.3f},j1,{0.9 * a:.6f},{a:.6f},s{seg}\n" for ti, a in zip(t, q_des, strict=True)
            )
            f.write(block)
            size += len(block)
            seg += 1
    return path.stat().st_size


async def _client(
    host: str, port: int, paths: list[str], offset: int, stop_at: float, think: float, lat: list[float]
) -> int:
    """One keep-alive HTTP/1.1 connection looping over `paths`; returns its error count.

    Plain asyncio streams rather than a threaded HTTP library: 50 Python threads would measure their own
    GIL hand-offs as server latency.
    """
    import asyncio

    errors = 0
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for k in range(MAX_REQUESTS_PER_CLIENT):
            if time.monotonic() >= stop_at:
                break
            path = paths[(offset + k) % len(paths)]
            t0 = time.perf_counter()
            try:
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n".encode()
                )
                await writer.drain()
                status_line = await asyncio.wait_for(reader.readline(), 10)
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                ok = status_line.split()[1] == b"200"
            except (TimeoutError, OSError, asyncio.IncompleteReadError, IndexError, ValueError):
                ok = False
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
            lat.append(time.perf_counter() - t0)
            errors += not ok
            if think:
                await asyncio.sleep(think)
    finally:
        writer.close()
    return errors


def load_phase(url: str, clients: int, seconds: float, think: float, ids: dict) -> dict:
    import asyncio

    paths = [
        "/api/v1/fits",
        f"/api/v1/fits/{ids['fit']}",
        "/api/v1/datasets",
        f"/api/v1/datasets/{ids['dataset']}",
    ]
    host, port = url.removeprefix("http://").split(":")
    lat: list[float] = []

    async def run() -> list[int]:
        stop_at = time.monotonic() + seconds
        return await asyncio.gather(
            *(_client(host, int(port), paths, i, stop_at, think, lat) for i in range(clients))
        )

    t0 = time.monotonic()
    errors = asyncio.run(run())
    wall = time.monotonic() - t0
    all_lat = np.array(lat) * 1000
    return {
        "clients": clients,
        "seconds": round(wall, 1),
        "think_s": think,
        "requests": int(all_lat.size),
        "requests_per_s": round(all_lat.size / wall, 1),
        "errors": int(sum(errors)),
        "latency_ms": {
            "p50": round(float(np.percentile(all_lat, 50)), 2),
            "p95": round(float(np.percentile(all_lat, 95)), 2),
            "p99": round(float(np.percentile(all_lat, 99)), 2),
            "max": round(float(all_lat.max()), 2),
        },
    }


def upload_phase(url: str, pid: int, path: Path) -> dict:
    size = path.stat().st_size
    time.sleep(1.0)
    base = rss_kb(pid)
    peak, parser_peak = base, 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, parser_peak
        while not done.is_set():
            peak = max(peak, rss_kb(pid))
            for child in children(pid):
                parser_peak = max(parser_peak, rss_kb(child))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        r = requests.post(url + "/api/v1/datasets", files={"file": ("big.csv", f)}, timeout=600)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    return {
        "bytes": size,
        "status": r.status_code,
        "seconds": round(wall, 2),
        "mb_per_s": round(size / 1e6 / wall, 1),
        "server_rss_idle_mb": round(base / 1024, 1),
        "server_rss_growth_mb": round((peak - base) / 1024, 1),
        "parser_process_peak_rss_mb": round(parser_peak / 1024, 1),
        "samples": r.json().get("samples") if r.ok else r.text[:300],
    }


def upload_small_log(url: str) -> dict:
    """Upload small_log() with its sidecar; the created dataset."""
    log, side = small_log()
    resp = requests.post(
        url + "/api/v1/datasets",
        files={"file": ("small.csv", log)},
        data={"metadata": json.dumps(side)},
        timeout=60,
    )
    if resp.status_code != 201:
        raise RuntimeError(f"the small log's upload failed: {resp.status_code} {resp.text[:500]}")
    return resp.json()


def queue_fits(url: str) -> tuple[str, list[str]]:
    """Upload the small log and queue several all-family fits with a large budget; wait until one runs.

    Fits stop when they stall and the local executor runs them one after another; on a quiet machine one fit
    takes about 10 s, so with eight queued a fit computes for the whole load phase."""
    ds = upload_small_log(url)
    body = {
        "dataset_id": ds["id"],
        "models": ["implicit", "ideal_pd", "dcmotor", "delayed_pd", "dcmotor_delay", "remotized_pd", "pid"],
        "budget": {"generations": 10000, "population": 16},
    }
    fits = [requests.post(url + "/api/v1/fits", timeout=30, json=body).json()["id"] for _ in range(8)]
    deadline = time.monotonic() + 60
    while requests.get(f"{url}/api/v1/fits/{fits[0]}", timeout=10).json()["status"] != "running":
        if time.monotonic() > deadline:
            raise RuntimeError("the fit did not start")
        time.sleep(0.2)
    return ds["id"], fits


def start_profiler(pid: int, seconds: float, out: Path) -> subprocess.Popen | None:
    """py-spy (if installed beside this Python) sampling the server's threads for the load phase, as raw
    collapsed stacks with thread names; non-blocking, so the sampled process is never paused."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        return None
    return subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            "250",
            "--format",
            "raw",
            "--threads",
            "--nonblocking",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# what a sampled server stack is doing, first match from the innermost frame outwards
PROFILE_KINDS = (
    ("RequestResponseCycle.send", "socket writes (uvicorn)"),
    ("sqlalchemy", "database (SQLAlchemy + sqlite3)"),
    ("sqlite3", "database (SQLAlchemy + sqlite3)"),
    ("json/", "JSON encoding"),
    ("jsonable_encoder", "JSON encoding"),
    ("logging/", "logging"),
    ("logs.py", "logging"),
    ("pydantic", "validation (pydantic)"),
    ("prometheus_client", "metrics"),
    ("select (selectors.py", "idle (waiting for I/O)"),
    ("run_forever", "event loop"),
    ("wait (threading.py", "idle (waiting)"),
)


def profile_summary(raw: Path) -> dict:
    """Share of samples per thread and, for the event-loop thread, per kind of work (PROFILE_KINDS)."""
    threads: dict[str, int] = {}
    kinds: dict[str, int] = {}
    if not raw.is_file():
        return {}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or not stack.startswith("thread ("):
            continue
        n = int(count)
        frames = stack.split(";")
        thread = frames[0].split(": ", 1)[-1].strip() or "?"  # "thread (TID): NAME"
        threads[thread] = threads.get(thread, 0) + n
        if thread == "MainThread":  # the event loop: every request runs here
            kind = next((k for f in reversed(frames) for key, k in PROFILE_KINDS if key in f), "other Python")
            kinds[kind] = kinds.get(kind, 0) + n
    total = sum(threads.values()) or 1
    main = sum(kinds.values()) or 1
    return {
        "samples": total,
        "threads_pct": {
            k: round(100 * v / total, 1) for k, v in sorted(threads.items(), key=lambda kv: -kv[1])
        },
        "main_thread_pct": {
            k: round(100 * v / main, 1) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])
        },
    }


def one_run(args: argparse.Namespace, run: int, work: Path, last: bool) -> dict:
    """A fresh server with a fit computing, the load phase (and on the last run the upload): one JSON line."""
    proc = spy = None
    try:
        proc, url = start_server(work / "data", max(int(args.upload_mb * 1e6 * 1.1), 10_000_000))
        ds_id, fits = queue_fits(url)
        raw = args.profile / f"server-profile-{run}.txt" if args.profile else None
        spy = start_profiler(proc.pid, args.seconds, raw) if raw is not None else None
        before, cpu0 = os.getloadavg(), cpu_seconds(proc.pid)
        load = load_phase(url, args.clients, args.seconds, args.think, {"fit": fits[0], "dataset": ds_id})
        after_load = os.getloadavg()
        # the API process's own CPU per request (every thread of it): what the routes cost, whatever the load
        load["server_cpu_ms_per_request"] = round(
            1000 * (cpu_seconds(proc.pid) - cpu0) / max(load["requests"], 1), 3
        )
        statuses = [requests.get(f"{url}/api/v1/fits/{f}", timeout=10).json()["status"] for f in fits]
        load["fit_running_throughout"] = "running" in statuses
        load["fits_after"] = statuses
        for f in fits:
            requests.post(f"{url}/api/v1/fits/{f}/cancel", timeout=10)
        out = {
            "run": run,
            "of": args.runs,
            **{k: load["latency_ms"][k] for k in ("p50", "p95", "p99", "max")},
            "loadavg_before": [round(x, 2) for x in before],
            "loadavg_after": [round(x, 2) for x in after_load],
            "status_routes_during_fit": load,
        }
        if spy is not None and raw is not None:
            spy.wait(args.seconds + 30)
            out["server_profile"] = profile_summary(raw)
        if last and args.upload_mb > 0:
            big = work / "big.csv"
            big_csv(big, args.upload_mb)
            out["upload"] = upload_phase(url, proc.pid, big)
        return out
    finally:
        if spy is not None and spy.poll() is None:  # a profiler past its wait is stopped with the run
            spy.kill()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: 10 clients, 3 s, 5 MB upload")
    ap.add_argument(
        "--runs", type=int, default=1, help="load phases, each on a fresh server (one JSON line each)"
    )
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--think", type=float, default=0.1, help="pause between one client's requests [s]")
    ap.add_argument("--upload-mb", type=float, default=200.0, help="the upload after the last run; 0: none")
    ap.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="sample the server with py-spy during each load phase; raw stacks kept in DIR",
    )
    args = ap.parse_args()
    if args.quick:
        args.clients, args.seconds, args.upload_mb = 10, 3.0, 5.0
    args.runs = max(1, min(args.runs, 20))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    runs = []
    for k in range(1, args.runs + 1):
        work = Path(tempfile.mkdtemp(prefix="asid-bench-"))
        try:
            runs.append(one_run(args, k, work, last=k == args.runs))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps({"machine": machine, **runs[-1]}), flush=True)
    upload = runs[-1].get("upload")
    targets = {
        "p99_le_50ms_every_run": all(r["p99"] <= 50 for r in runs),
        "no_errors": all(r["status_routes_during_fit"]["errors"] == 0 for r in runs),
    }
    if upload is not None:
        targets["rss_growth_le_64mb"] = upload["server_rss_growth_mb"] <= 64 and upload["status"] == 201
    print(
        json.dumps(
            {"summary": True, "runs": len(runs), "p99_ms": [r["p99"] for r in runs], "targets_met": targets}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
