"""Bounded work: no upload or request makes the server hold unbounded input, answer with an unbounded body,
or hang.

A zip bomb and a 20 MB header line get a short 4xx while the server's memory (its process and its parser
processes) stays near its resting size; hundreds of uploads in a row, then dozens at once, are all answered on
SQLite and on PostgreSQL (the parser pool never uses max_tasks_per_child, which can deadlock on Python 3.11);
a stuck parser pool is rebuilt and its request answered 503; excitation requests are bounded by the samples and
work they ask for, with every number bounded.
"""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
from conftest import Server, good_rows, long_csv, start_server

MAX_BODY = 10_000  # bytes an error answer may take
MAX_GROWTH = 200 * 2**20  # bytes the server (with its parser processes) may grow by while refusing a bomb
# these servers run no fit: spawned fit workers, so none starts a forkserver importing the fitting stack in the
# background (seconds of CPU a server, and memory that is no upload's)
NO_FITS = {"ACTUATOR_SYSID_WORKER_START": "spawn"}


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of this module's own (the default 200 MB upload limit), so its memory is this module's."""
    s = start_server(tmp_path_factory.mktemp("bounded") / "data", NO_FITS)
    yield s
    s.stop()


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its children (the parser and fit worker processes)."""
    proc = psutil.Process(pid)
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:  # a worker that ended between listing and reading
            pass
    return total


def resting_rss(pid: int, timeout: float = 60.0) -> int:
    """The process tree's RSS once it stops moving (two readings 0.5 s apart within 4 MB): a fit worker still
    importing its stack at start-up is not the request's growth."""
    last, deadline = tree_rss(pid), time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tree_rss(pid)
        if abs(now - last) <= 4 * 2**20:
            return now
        last = now
    return last


def peak_growth(server: Server, request: Callable[[], requests.Response]) -> tuple[requests.Response, int]:
    """The response of `request` and how far the server's RSS rose above its resting size meanwhile (sampled
    every 20 ms in a thread)."""
    rest = resting_rss(server.proc.pid)
    peak, done = rest, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(server.proc.pid))
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        r = request()
    finally:
        done.set()
        t.join()
    return r, peak - rest


def upload(server: Server, name: str, data: bytes, timeout: float = 60) -> requests.Response:
    return requests.post(server.url + "/api/v1/datasets", files={"file": (name, data)}, timeout=timeout)


def zip_bomb() -> bytes:
    """A ~300 KB zip holding one CSV that unpacks to 300 MB: a header line of zeros."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z, z.open("log.csv", "w") as w:
        block = b"0" * 2**20
        for _ in range(300):
            w.write(block)
        w.write(b"\n0\n")
    return buf.getvalue()


def test_bombs_get_a_short_4xx_within_bounded_memory(sqlite_server: Server) -> None:
    s = sqlite_server
    warm = upload(s, "warm.csv", long_csv(good_rows()))  # starts the parser process: part of the resting size
    assert warm.status_code == 201, warm.text
    bomb = zip_bomb()
    assert len(bomb) < 1_000_000
    header = b"t,joint,q,q_des," + b"x" * (20 * 2**20) + b"\n0,j1,0,0,0\n"
    for name, data in (("bomb.zip", bomb), ("wide.csv", header)):

        def send(name: str = name, data: bytes = data) -> requests.Response:
            return upload(s, name, data)

        r, grew = peak_growth(s, send)
        print(
            f"{name}: {r.status_code}, body {len(r.content)} B, server and parser grew {grew / 2**20:.0f} MB"
        )
        assert 400 <= r.status_code < 500, (name, r.status_code, r.text[:300])
        assert len(r.content) <= MAX_BODY, (name, len(r.content))
        assert "longer than" in r.json()["detail"], r.text[:300]
        assert grew <= MAX_GROWTH, f"{name}: the server grew by {grew / 2**20:.0f} MB"
    # a zip that lists more files than allowed is refused from its table of contents
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for i in range(5000):
            z.writestr(f"f{i}.csv", b"")
    r = upload(s, "many.zip", buf.getvalue())
    assert r.status_code == 422 and "5000 files; the limit is 4096" in r.json()["detail"], r.text[:300]
    # nothing was stored by the refusals
    names = {d["name"] for d in requests.get(s.url + "/api/v1/datasets", timeout=30).json()}
    assert not names & {"bomb.zip", "wide.csv", "many.zip"}


def test_long_cell_and_name_are_cut_in_messages(sqlite_server: Server) -> None:
    """A bad cell of 500 KB (under the line limit, so the whole-file parser reads it) is quoted in short."""
    rows = good_rows()
    rows[3][2] = "y" * 500_000
    r = upload(sqlite_server, "cell.csv", long_csv(rows))
    assert r.status_code == 422, r.text[:300]
    assert "line 5 (" in r.json()["detail"] and len(r.content) <= MAX_BODY, len(r.content)


def burst(server: Server, tag: str, at_once: int = 40) -> tuple[int, float]:
    """Uploads one after the other, past the parser pool's first recycling (a fresh pool after
    `tasks_per_pool` parses), then `at_once` at the same time: every one answered 201 within 60 s. Returns how
    many uploads and the seconds they took."""
    from actuator_sysid.service.parsing import ParserPool

    in_a_row = ParserPool().tasks_per_pool + 20  # ParserPool starts no process until its first task
    t0 = time.monotonic()
    data = long_csv(good_rows(20))
    with requests.Session() as session:
        for i in range(in_a_row):
            r = session.post(
                server.url + "/api/v1/datasets", files={"file": (f"{tag}-{i}.csv", data)}, timeout=60
            )
            assert r.status_code == 201, (i, r.status_code, r.text[:300])
    with ThreadPoolExecutor(at_once) as pool:
        codes = list(pool.map(lambda i: upload(server, f"{tag}-c{i}.csv", data).status_code, range(at_once)))
    assert codes == [201] * at_once, codes
    return in_a_row + at_once, time.monotonic() - t0


def test_uploads_never_hang_sqlite(sqlite_server: Server) -> None:
    n, took = burst(sqlite_server, "sqlite")
    print(f"{n} uploads on SQLite: {took:.1f} s")


def test_uploads_never_hang_postgres(pg_url: str, tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", {"ACTUATOR_SYSID_DATABASE_URL": pg_url, **NO_FITS})
    try:
        n, took = burst(server, "pg")
        print(f"{n} uploads on PostgreSQL: {took:.1f} s")
    finally:
        server.stop()


def _ends_within(pid: int, seconds: float) -> bool:
    """Whether process `pid` is gone or a zombie within `seconds`.

    Read from /proc, not Process.is_alive: the executor's own thread reaps the killed worker concurrently, and
    is_alive can then answer from a lost waitpid race.
    """
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_stuck_pool_answers_busy_and_is_rebuilt() -> None:
    """A task past its deadline: ParserBusyError (the service's 503), the pool's processes killed, and the next
    task runs in a fresh pool."""
    import asyncio
    import operator

    from actuator_sysid.service.parsing import ParserBusyError, ParserPool

    pool = ParserPool(1, timeout_s=120.0)  # a loaded machine may take seconds to spawn the first worker

    async def scenario() -> None:
        died = RuntimeError("died")
        assert await pool.call(operator.add, 2, 3, name="warm", died=died) == 5
        pool.timeout_s = 1.5  # a warm pool: the deadline times the task, not the spawn
        first = pool._pool
        assert first is not None
        workers = list(first._processes.values())  # type: ignore[attr-defined]
        with pytest.raises(ParserBusyError, match="did not finish within 1.5 s"):
            await pool.call(time.sleep, 60, name="stuck", died=died)
        for p in workers:
            assert _ends_within(p.pid, 10.0), f"worker {p.pid} still runs after the pool was killed"
        pool.timeout_s = 120.0  # the next task spawns the fresh pool: a deadline that allows a spawn again
        assert await pool.call(operator.add, 1, 1, name="after", died=died) == 2
        assert pool._pool is not first

    try:
        asyncio.run(scenario())
    finally:
        pool.shutdown()


def test_pool_is_recycled_whole() -> None:
    """After tasks_per_pool tasks the next goes to a fresh pool (no max_tasks_per_child)."""
    import asyncio
    import operator

    from actuator_sysid.service.parsing import ParserPool

    pool = ParserPool(1, tasks_per_pool=3)

    async def scenario() -> None:
        seen = []
        for i in range(4):
            assert await pool.call(operator.add, i, 1, name="t", died=RuntimeError("died")) == i + 1
            seen.append(pool._pool)
        assert seen[0] is seen[1] is seen[2] and seen[3] is not seen[0]
        assert seen[0]._max_tasks_per_child is None  # type: ignore[union-attr]

    try:
        asyncio.run(scenario())
    finally:
        pool.shutdown()


def test_excitation_requests_are_bounded(sqlite_server: Server) -> None:
    url = sqlite_server.url + "/api/v1/excitations"
    base: dict[str, Any] = {
        "kind": "chirp",
        "duration": 10,
        "rate": 200,
        "q_min": -1,
        "q_max": 1,
        "qd_max": 5,
    }
    from actuator_sysid.datasets.excitation import MAX_FAMILIES
    from actuator_sysid.models.families import FAMILIES

    for extra, needle in (
        ({"duration": 3600, "rate": 138, "families": sorted(FAMILIES)[:MAX_FAMILIES]}, "at most 50000"),
        (
            {
                "duration": 200,
                "rate": 200,
                "families": ["dcmotor", "delayed_pd", "pid", "ideal_pd", "implicit"],
            },
            "200000",
        ),
        ({"kind": "bam", "duration": 3600, "rate": 100, "families": []}, "1080003 samples in all"),
        ({"mass": 1e300, "com_distance": 1e300}, "mass must be between 0 and 10000 kg"),
        ({"gravity": -1e308}, "gravity must be between"),
        ({"kp": float("nan")}, "kp must be a finite number"),
        ({"seed": -1}, "seed must be between 0"),
        ({"joint": "j" * 100_000}, "the name has 100000 characters"),
    ):
        body = json.dumps({**base, **extra})  # NaN as JSON's common extension, as a client may send it
        r = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=30)
        assert r.status_code == 422, (extra, r.status_code, r.text[:300])
        assert needle in r.json()["detail"] and len(r.content) <= MAX_BODY, (extra, r.text[:300])
    r = requests.post(url, json=base, timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["csv"].startswith("t,joint,q")


def test_parse_past_its_deadline_is_answered_503(tmp_path: Path) -> None:
    """The service's side of a stuck pool: 503 that says so (with Retry-After), and nothing stored."""
    from fastapi.testclient import TestClient

    from actuator_sysid.service.app import create_app
    from actuator_sysid.service.settings import Settings

    # not even a spawn fits the deadline; spawned fit workers: no forkserver importing the fitting stack here
    app = create_app(Settings(data_dir=tmp_path / "data", parse_timeout_s=0.05, worker_start="spawn"))
    with TestClient(app) as client:
        r = client.post("/api/v1/datasets", files={"file": ("x.csv", long_csv(good_rows()))})
        assert r.status_code == 503, r.text[:300]
        assert "did not finish within 0.05 s" in r.json()["detail"] and r.headers["retry-after"] == "30"
        assert client.get("/api/v1/datasets").json() == []
