"""Input faults: values the API and the CLI once accepted and then crashed on, NUL in ids and filters on
PostgreSQL, a full disk during an upload and during a fit, temp files a killed upload left, and a revoked
token. One real server for the module: auth required, its database on PostgreSQL (SQLite beside the data
folder when PostgreSQL is not answering), its data folder on a 20 MB tmpfs that a test fills for real."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import requests
from conftest import ADMIN_URL, ROOT, Server, make_recording, pythonpath, run_cli, start_server
from test_service_flow import upload_log, wait_status

from actuator_sysid.datasets.canonical import write_table
from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.fitting.request import cuda_device_count
from actuator_sysid.service.db import Repository
from actuator_sysid.service.storage import Storage

DEEP = "[" * 1500 + "]" * 1500  # 3 KB that json.loads alone cannot parse (RecursionError)


@dataclass
class Rig:
    server: Server
    db_url: str
    on_postgres: bool
    disk: Path | None  # the tmpfs the data folder is on; None where mounting is not permitted
    headers: dict[str, str]
    victim: tuple[str, str]  # (token id, token) revoked by a test
    leftover: Path  # a temp file a killed upload left before the server started
    live: Path  # a temp file of a process still running (this one)
    spooled: Path  # a file a killed parser process spooled through `tempfile` into its own temp folder


def _postgres() -> tuple[psycopg.Connection | None, str]:
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5), ""
    except psycopg.OperationalError as e:
        if os.environ.get("CI"):
            raise
        return None, str(e)


def _mount_tmpfs(where: Path) -> bool:
    where.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(where)], capture_output=True
    )
    return done.returncode == 0


def _killed_upload(data_dir: Path) -> Path:
    """A real process receiving an upload into the store, killed mid-stream: the temp file it leaves."""
    code = (
        "import sys; from pathlib import Path; from actuator_sysid.service.storage import Storage; "
        "Storage(Path(sys.argv[1])).receive(sys.stdin.buffer, 10**9)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(data_dir)],
        stdin=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": pythonpath()},
        cwd=ROOT,
    )
    assert proc.stdin is not None
    proc.stdin.write(b"t,joint,q\n" * 150_000)  # 1.5 MB: one chunk written, the stream then hangs
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    part: list[Path] = []
    while time.monotonic() < deadline and not part:
        part = [p for p in (data_dir / "tmp").glob("*.upload") if p.stat().st_size >= 1 << 20]
        time.sleep(0.05)
    proc.kill()
    proc.wait(30)
    assert part, "the receiving process wrote no temp file"
    return part[0]


def _killed_spooler(data_dir: Path) -> Path:
    """A real process that makes its own temp folder Python's default (as the parser processes do),
    spools a file there and dies without cleaning up: the file it leaves."""
    code = (
        "import os, sys, tempfile; from pathlib import Path; from actuator_sysid.service.storage import "
        "process_tempdir; process_tempdir(Path(sys.argv[1]) / 'tmp'); "
        "f = tempfile.NamedTemporaryFile(delete=False); f.write(b'spooled'); f.close(); print(f.name); os._exit(0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(data_dir)],
        env={**os.environ, "PYTHONPATH": pythonpath()},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    spooled = Path(out.stdout.strip())
    assert spooled.exists() and spooled.parent.parent == data_dir / "tmp", spooled
    return spooled


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("faults")
    disk = root / "disk"
    mounted = _mount_tmpfs(disk)
    data = (disk if mounted else root) / "data"
    admin, _why = _postgres()
    name = f"asid_test_{uuid.uuid4().hex[:12]}"
    if admin is not None:
        admin.execute(f'CREATE DATABASE "{name}"')
        db_url = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1) + "/" + name
    else:  # beside the data folder, not on the disk a test fills
        db_url = f"sqlite:///{root / 'actuator_sysid.db'}"
    server = None
    try:
        repo = Repository(db_url)
        token, victim = repo.create_token("alpha"), repo.create_token("alpha", "to revoke")
        victim_id = next(t["id"] for t in repo.list_tokens() if t["name"] == "to revoke")
        repo.close()
        leftover = _killed_upload(data)
        live = Storage(data).temp_path(".upload")
        live.write_bytes(b"in flight")
        spooled = _killed_spooler(data)
        server = start_server(
            data, {"ACTUATOR_SYSID_AUTH": "required", "ACTUATOR_SYSID_DATABASE_URL": db_url}, timeout=60
        )
        yield Rig(
            server,
            db_url,
            admin is not None,
            disk if mounted else None,
            {"Authorization": f"Bearer {token}"},
            (victim_id, victim),
            leftover,
            live,
            spooled,
        )
    finally:
        if server is not None:
            server.stop()
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)
        if admin is not None:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.close()


# --- the API ---


def test_temp_files_a_killed_upload_left_are_swept_at_start_up(rig: Rig) -> None:
    """The killed receiver's 1 MB temp file is gone once the server started; a live process's is kept."""
    assert not rig.leftover.exists(), sorted(p.name for p in rig.leftover.parent.iterdir())
    assert rig.live.exists()
    assert not rig.spooled.parent.exists(), "a dead process's own temp folder outlived the start-up"


def test_api_refuses_values_that_would_crash_the_fit(rig: Rig, tmp_path: Path) -> None:
    """Budget, seed and device a fit would crash on, and a sidecar nested too deep: 422 naming the field."""
    url, h = rig.server.url, rig.headers
    ds = upload_log(rig.server, tmp_path, headers=h)
    cases: list[tuple[dict, str]] = [
        ({"budget": {"seconds": 0.001}}, "budget.seconds"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**70}, "seed"),
    ]
    if cuda_device_count() == 0:
        cases.append(({"device": "cuda"}, "no CUDA GPU"))
    for body, words in cases:
        r = requests.post(f"{url}/api/v1/fits", headers=h, json={"dataset_id": ds["id"], **body}, timeout=60)
        assert r.status_code == 422 and words in r.json()["detail"], (body, r.status_code, r.text)
    for meta, code in ((DEEP, 422), ("[" * 65 + "]" * 65, 422)):
        r = requests.post(
            f"{url}/api/v1/datasets",
            headers=h,
            files={"file": ("log.csv", (tmp_path / "log.csv").read_bytes())},
            data={"metadata": meta},
            timeout=60,
        )
        assert r.status_code == code and "nested" in r.json()["detail"], r.text


def test_nul_and_control_characters_in_ids_and_filters_are_not_found(rig: Rig) -> None:
    """Every GET route with an id, and the list filters, given a%00b (and other control characters): 404, or
    an empty answer for a filter, never the 500 PostgreSQL's DataError made."""
    url, h = rig.server.url, rig.headers
    spec = requests.get(f"{url}/openapi.json", headers=h, timeout=30).json()
    with_ids = [p for p, ops in spec["paths"].items() if "{" in p and "get" in ops]
    assert len(with_ids) >= 7, with_ids
    for bad in ("a%00b", "%00", "a%01%1fb"):
        for path in with_ids:
            filled = "/".join(bad if part.startswith("{") else part for part in path.split("/"))
            r = requests.get(url + filled, headers=h, timeout=30)
            # 200 where the segment is a filter, not an id (the fleet view of an actuator model: empty)
            assert r.status_code in (200, 404, 422), (filled, r.status_code, r.text[:300])
        for query in ("datasets?serial=", "datasets?actuator_model=", "fits?dataset_id="):
            r = requests.get(f"{url}/api/v1/{query}{bad}", headers=h, timeout=30)
            assert r.status_code == 200 and r.json() == [], (query, r.status_code, r.text[:300])
    r = requests.get(f"{url}/api/v1/datasets/a%00b", headers=h, timeout=30)
    assert r.status_code == 404 and "not found" in r.json()["detail"], (rig.on_postgres, r.text)


def test_a_revoked_token_is_refused_on_its_next_request(rig: Rig) -> None:
    url = rig.server.url
    token_id, token = rig.victim
    victim = {"Authorization": f"Bearer {token}"}
    assert requests.get(f"{url}/api/v1/datasets", headers=victim, timeout=30).status_code == 200
    done = run_cli("token", "revoke", token_id, "--database-url", rig.db_url)
    assert done.returncode == 0, done.stderr
    r = requests.get(f"{url}/api/v1/datasets", headers=victim, timeout=30)
    assert r.status_code == 401 and "revoked" in r.json()["detail"], r.text
    assert requests.get(f"{url}/api/v1/datasets", headers=rig.headers, timeout=30).status_code == 200


def _fill(disk: Path) -> Path:
    """Write one file until the disk refuses (ENOSPC): a real full disk, no mock."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (256 << 10))
        except OSError as e:
            assert e.errno == 28, e
    with open(filler, "ab", buffering=0) as f:  # the last partial page
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    return filler


def test_a_full_disk_fails_the_upload_and_the_fit_with_the_reason(rig: Rig, tmp_path: Path) -> None:
    """The data disk fills while a fit runs: an upload then is a 507 that says so, the fit fails saying so, and
    what was stored before is intact once space returns."""
    if rig.disk is None:
        pytest.skip("mounting a tmpfs is not permitted here: no small disk to fill")
    url, h = rig.server.url, rig.headers
    ds = upload_log(rig.server, tmp_path, serial="SN-full", headers=h)
    before = requests.get(f"{url}/api/v1/datasets", headers=h, timeout=30).json()
    body = {
        "dataset_id": ds["id"],
        "families": ["dcmotor"],
        "budget": {"generations": 10_000, "population": 8, "seconds": 3},  # runs until its clock ends
    }
    r = requests.post(f"{url}/api/v1/fits", headers=h, json=body, timeout=60)
    assert r.status_code == 202, r.text
    wait_status(rig.server, r.json()["id"], ("running",), timeout=60, headers=h)
    filler = _fill(rig.disk)
    try:
        rec = make_recording(n=20_000, segments=2, seed=3)  # 2 MB: more than any page left free
        write_table(rec, tmp_path / "big.csv")
        up = requests.post(
            f"{url}/api/v1/datasets",
            headers=h,
            files={"file": ("big.csv", (tmp_path / "big.csv").read_bytes())},
            timeout=60,
        )
        assert up.status_code == 507 and "full" in up.json()["detail"], (up.status_code, up.text)
        assert requests.get(f"{url}/api/v1/datasets", headers=h, timeout=30).json() == before
        fit = wait_status(rig.server, r.json()["id"], ("succeeded", "failed"), timeout=120, headers=h)
        assert fit["status"] == "failed" and "full" in fit["error"], fit
    finally:
        filler.unlink()
    original = requests.get(f"{url}/api/v1/datasets/{ds['id']}/original", headers=h, timeout=30)
    assert original.status_code == 200 and original.content == (tmp_path / "log.csv").read_bytes()
    assert not list((rig.server.data_dir / "tmp").glob("*.part")), "a failed write left its temp file"


# --- the fit and the CLI ---


def test_a_fit_whose_budget_runs_out_before_a_search_begins_finishes() -> None:
    """The smallest budget the request allows, three families: the later searches begin with no time left
    (once a ZeroDivisionError in the progress report); the fit still ends, stopped on the budget."""
    rec = make_recording(n=100, segments=3)
    req = FitRequest(families=["ideal_pd", "dcmotor", "delayed_pd"], generations=10_000, population=8)
    req.budget_s = 0.1
    seen: list[float] = []
    res = fit_recording(rec, req, lambda f, _m: seen.append(f))
    assert res["budget"] == {"seconds": 0.1, "stopped_on_budget": True} and seen and max(seen) <= 1.0


@pytest.fixture(scope="module")
def log_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    write_table(make_recording(n=100, segments=2), folder / "log.csv")
    (folder / "deep.json").write_text(DEEP)
    (folder / "damaged").mkdir()
    (folder / "damaged" / "fit.json").write_text('{"joints": {')
    return folder


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["fit", "log.csv", "--budget", "0.001"], "budget.seconds must be between 0.1"),
        (["fit", "log.csv", "--seed", "-1"], "seed must be an integer between 0 and 4294967295"),
        (["fit", "log.csv", "--seed", str(2**70)], "seed must be an integer"),
        (["demo", "--seed", "-1", "--out", "demo"], "seed must be an integer"),
        (["validate", "log.csv"], "log.csv: not a USD file"),
        (["token", "create", "--database-url", "bogus://x"], "--database-url 'bogus://x'"),
        (
            ["serve", "--port", "99999"],
            "--port (or ACTUATOR_SYSID_PORT): Input should be less than or equal to 65535",
        ),
        (["inspect", "log.csv", "--sidecar", "deep.json"], "deep.json: JSON nested 1500 levels deep"),
        (["export", "damaged", "--format", "mjcf.xml"], "damaged/fit.json: invalid JSON at line 1"),
        (
            ["fit", "log.csv", "--robot", "r.xml", "--kp", "-5"],
            "--kp: Input should be greater than or equal to 0",
        ),
        (["fit", "log.csv", "--robot", "r.xml", "--delay", "-1"], "--delay: Input should be greater than or"),
        (["fit", "log.csv", "--robot", "r.xml", "--delay", "x"], "--delay: Input should be a valid integer"),
        (
            ["fit", "log.csv", "--robot", "r.xml", "--validate-last", "0.8"],
            "--validate-last: Input should be less than or equal to 0.5",
        ),
    ],
)
def test_cli_mistakes_are_a_message_and_exit_2(log_files: Path, args: list[str], words: str) -> None:
    """Each once printed a traceback (or, for --kp/--delay, was accepted where the API refuses it)."""
    done = run_cli(*args, cwd=log_files)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and words in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith(f"actuator-sysid {args[0]}: error: "), done.stderr


def test_cli_exit_status_in_a_real_process(log_files: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "actuator_sysid.cli", "fit", "log.csv", "--seed", "-1"],
        capture_output=True,
        text=True,
        cwd=log_files,
        env={**os.environ, "PYTHONPATH": pythonpath()},
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr and "seed" in done.stderr, done.stderr


def test_schemathesis_with_nul_bytes_on_postgresql_finds_no_server_errors(rig: Rig, tmp_path: Path) -> None:
    """Every read route fuzzed (its examples and coverage cases, then 50 generated examples each) with NUL bytes
    allowed in strings, against the PostgreSQL-backed server (where a NUL in a bound parameter used to be a
    DataError): no 5xx. Writes are fuzzed in test_security."""
    if not rig.on_postgres:
        pytest.skip("PostgreSQL is not answering here")
    st = Path(sys.executable).with_name("schemathesis")
    args = [
        "run",
        rig.server.url + "/openapi.json",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        "50",
    ]
    args += ["--header", f"Authorization: {rig.headers['Authorization']}", "--include-method", "GET"]
    args += ["--generation-allow-x00", "true", "--workers", "1", "--seed", "2", "--no-shrink"]
    args += [
        "--phases",
        "examples,coverage,fuzzing",
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
    ]
    out = subprocess.run([str(st), *args], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    tail = (out.stdout + out.stderr)[-4000:]
    assert out.returncode == 0, tail
    counts = re.search(r"(\d+) generated, (\d+) passed", out.stdout)
    assert counts and counts.group(1) == counts.group(2) and int(counts.group(1)) > 100, tail
