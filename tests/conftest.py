"""Shared test helpers: small real recordings and a real uvicorn server in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# OpenBLAS picks its kernels by CPU and their rounding differs, so a seeded fit (tests/test_golden.py) takes
# another path on another machine: one x86-64 set everywhere (the Makefile sets it too), read when numpy
# first loads OpenBLAS, so before the imports below; the servers the tests start inherit it.
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import numpy as np  # noqa: E402
import psycopg
import pytest
import requests

from actuator_sysid.datasets.recording import DatasetError, JointInfo, Recording, Segment

ROOT = Path(__file__).resolve().parents[1]

# Markers by test file (registered in pyproject.toml): conformance runs the real Isaac Lab / Newton / MuJoCo
# consumers; service needs the HTTP server, PostgreSQL, Chromium or Ray; slow is a long fit, a real-data fit
# or a benchmark smoke run. A "file::test" key overrides its file's entry for that test. A file not named here
# is `unit`, so a new test file gets a marker without editing this table. `make test-fast` deselects slow
# and service.
MARKERS: dict[str, tuple[str, ...]] = {
    "test_browser.py": ("service", "slow"),
    "test_servo_mjcf.py": ("conformance",),
    "test_browser_pages.py": ("service", "slow"),
    "test_browser_layout.py": ("service", "slow"),
    "test_e2e_isaaclab.py": ("service", "conformance"),
    "test_faults.py": ("service",),
    "test_postgres.py": ("service",),
    "test_ray.py": ("service", "slow"),
    "test_security.py": ("service",),
    "test_service.py": ("service",),
    "test_service_flow.py": ("service",),
    "test_service_bench.py": ("service", "slow"),
    "test_splits_real.py": ("service", "slow"),
    "test_pages.py": ("service",),
    "test_conformance_isaaclab.py": ("conformance",),
    "test_components.py": ("conformance",),
    "test_conformance_nets.py": ("conformance",),
    "test_conformance_newton.py": ("conformance",),
    "test_consumers.py": ("conformance",),
    "test_export_consumers.py": ("conformance",),
    "test_export_safety.py": ("conformance",),
    "test_export_isaaclab.py": ("conformance",),
    "test_friction_families.py": ("conformance",),
    "test_nets_gru.py": ("conformance",),
    "test_nets_torque.py": ("conformance",),
    "test_nets_torque.py::test_cli_time_split_says_early_stopping_used_an_inner_split": ("slow",),
    "test_robot.py": ("conformance",),
    "test_robot_exports.py": ("conformance",),
    "test_robot_import.py": ("conformance",),
    "test_robot_service.py": ("service",),
    "test_robot_pages.py": ("service", "slow"),
    "test_robot_meshes.py": ("conformance",),
    "test_robot_payload.py": ("conformance",),
    "test_robot_payload.py::test_a_payload_20_percent_off_comes_back_within_5_percent": (
        "conformance",
        "slow",
    ),
    "test_robot_recordings.py": ("conformance",),
    "test_robot_judge.py": ("conformance",),
    "test_robot_judge.py::test_interval_coverage_over_seeds": ("conformance", "slow"),
    "test_robot_torque.py": ("conformance",),
    "test_robot_result.py": ("conformance",),
    "test_robot_select.py": ("conformance",),
    "test_robot_select.py::test_selection_prefers_the_bias_the_log_has_and_never_reads_the_validation_part": (
        "conformance",
        "slow",
    ),
    "test_robot_selection_protocol.py": ("conformance",),
    "test_robot_selection_protocol.py::test_the_chosen_configuration_is_within_5_percent_of_the_best_at_the_far_end": (
        "conformance",
        "slow",
    ),
    "test_arm6_recovery.py": ("conformance",),
    "test_arm6_verdict.py": ("conformance",),
    "test_robot.py::test_recovers_group_terms_from_a_newton_log": ("conformance", "slow"),
    "test_robot.py::test_cli_fits_the_real_go2_chirp": ("slow",),
    "test_robot_recovery.py": ("conformance", "slow"),
    "test_rollout.py": ("conformance",),
    "test_the_rest.py::test_the_mjcf_states_how_to_fill_its_delay_history": ("conformance",),
    "test_fit_splits.py::test_enable_is_a_canonical_column_and_folds_by_replays_drops_torque_off": (
        "conformance",
    ),
    "test_the_rest.py::test_the_upload_warnings_are_the_dataset_pages": ("service",),
    "test_validate_newton.py": ("conformance",),
    "test_bench.py": ("slow",),
    "test_bench_robot.py": ("slow",),
    "test_device_gains.py": ("slow",),
    "test_identifiability.py": ("slow",),
    "test_interval_coverage.py": ("slow",),
    "test_nets.py": ("slow",),
    "test_readers_bench.py": ("slow",),
    "test_real_bam.py": ("slow",),
    "test_bam_sim_recovery.py": ("slow",),
    "test_recovery.py": ("slow",),
    "test_repeatability.py": ("slow",),
    "test_diagnostics.py::test_a_command_delay_is_named_with_its_shift": ("slow",),
    "test_diagnostics.py::test_report_shows_what_the_residual_shows": ("slow",),
    "test_diagnostics.py::test_real_go2_knee_shows_its_stiction_band": ("slow",),
    "test_cli.py::test_demo_recovers_stated_parameters": ("slow",),
    "test_cli.py::test_inspect_missing_file_and_bad_sidecar": ("slow",),
    "test_export_consumers.py::test_replays_of_every_family_within_10_percent": ("conformance", "slow"),
    "test_fit_splits.py::test_folds_by_fit_names_each_fold_by_its_value": ("slow",),
    "test_validate_newton.py::test_cli_validate_prints_code_and_prim_and_exits_nonzero_on_error": (
        "conformance",
        "slow",
    ),
    "test_cli.py::test_fit_writes_results_report_and_exports": ("slow",),
    "test_fit_splits.py::test_cli_split_and_budget_flags": ("slow",),
    "test_nets_gru.py::test_gain_normalised_input_lets_a_net_generalise_to_a_held_out_gain": ("slow",),
    "test_nets_gru.py::test_gru_learns_the_nonlinear_actuator_from_torque": ("slow",),
    "test_nets_gru.py::test_the_api_refuses_oversized_networks_with_a_4xx_naming_the_limit": ("service",),
    "test_golden.py::test_http_shapes_are_golden": ("service",),
}


def markers_for(item: pytest.Item) -> tuple[str, ...]:
    """The markers of one test: its own MARKERS entry, else its file's, else `service` when it uses the
    `server` or `browser` fixture, else `unit`."""
    name = getattr(item, "originalname", item.name)
    default = ("service",) if {"server", "browser"} & set(getattr(item, "fixturenames", ())) else ("unit",)
    return MARKERS.get(f"{item.path.name}::{name}", MARKERS.get(item.path.name, default))


# The files that take longest, longest first (one worker's seconds in a warm `make test`, BENCHMARKS.md):
# `--dist loadfile` hands whole files to the workers in collection order (pytest_configure turns off xdist's
# reorder, which puts the files with most tests first and so the long one-test service files last), so these
# start first and the run does not end on one long file while the other worker idles. Every other file follows
# in its usual order.
LONG_FIRST = (
    "test_family_ladder.py",
    "test_browser_layout.py",
    "test_nets.py",
    "test_bam_sim_recovery.py",
    "test_nets_torque.py",
    "test_faults.py",
    "test_robot_implicit.py",
    "test_ray.py",
    "test_security.py",
    "test_input_faults.py",
    "test_browser_pages.py",
    "test_robot_selection_protocol.py",
    "test_bench_robot.py",
    "test_ladder_protocol.py",
    "test_rollout.py",
    "test_bench.py",
    "test_robot_torque.py",
    "test_conformance_nets.py",
    "test_structure.py",
    "test_browser.py",
    "test_service_flow.py",
    "test_bounded_work.py",
    "test_starts.py",
    "test_robot_exports.py",
    "test_worker_start.py",
    "test_splits_real.py",
    "test_postgres.py",
    "test_robot_pages.py",
    "test_service_bench.py",
    "test_robot_judge.py",
    "test_servo_mjcf.py",
    "test_robot_recovery.py",
    "test_friction_families.py",
    "test_urdf_as_shipped.py",
    "test_nets_gru.py",
    "test_robot.py",
    "test_consumers.py",
    "test_interval_coverage.py",
    "test_service.py",
    "test_robot_service.py",
    "test_cli.py",
    "test_pages.py",
    "test_e2e_isaaclab.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the collection order (LONG_FIRST) as the order xdist hands out files (its --no-loadscope-reorder)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test from MARKERS so `-m` selects without per-test decorators, and put the LONG_FIRST files
    first (a stable sort: each file's tests stay together and in their order)."""
    for item in items:
        for marker in markers_for(item):
            item.add_marker(getattr(pytest.mark, marker))
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))


def make_recording(
    joints: tuple[str, ...] = ("j1",), segments: int = 3, n: int = 200, rate_hz: float = 100.0, seed: int = 0
) -> Recording:
    """A small pendulum-like recording: sinusoidal commands, position lagging them, per-segment gains."""
    rng = np.random.default_rng(seed)
    segs = []
    for k in range(segments):
        t = np.arange(n) / rate_hz
        phase = rng.uniform(0, np.pi, len(joints))
        q_des = 0.4 * np.sin(2 * np.pi * 0.5 * t[:, None] + phase)
        q = 0.9 * np.sin(2 * np.pi * 0.5 * t[:, None] + phase - 0.1)
        qd = np.gradient(q, t, axis=0)
        z = np.zeros_like(q)
        segs.append(
            Segment(
                name=f"s{k}",
                t=t,
                q=q,
                qd=qd,
                q_des=q_des,
                qd_des=z,
                tau_ff=z.copy(),
                metadata={"kp": 5.0, "kd": 0.1},
            )
        )
    return Recording(joints=[JointInfo(j, mass=0.5, com_distance=0.1) for j in joints], segments=segs)


def long_csv(rows: list[list[object]], header: str = "t,joint,q,qd,q_des,segment") -> bytes:
    """A canonical long-form CSV written by hand, so each bad-input case can break one cell."""
    return (header + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n").encode()


def good_rows(n: int = 30, joint: str = "j1", segment: str = "a", t0: float = 0.0) -> list[list[object]]:
    """n valid long-form rows of one joint at 100 Hz."""
    return [[round(t0 + i * 0.01, 6), joint, 0.01 * i, 1.0, 0.012 * i, segment] for i in range(n)]


def raises_dataset_error(match: str, fn, *args, **kw) -> str:
    """Call fn expecting DatasetError whose message holds every '|'-separated part; return the message."""
    with pytest.raises(DatasetError) as info:
        fn(*args, **kw)
    msg = str(info.value)
    for part in match.split("|"):
        assert part in msg, f"{part!r} not in {msg!r}"
    return msg


def pythonpath() -> str:
    """PYTHONPATH for subprocesses: this checkout first, then whatever the caller had."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`actuator-sysid ARGS` through `cli.main` in this process, stdout and stderr captured, as a subprocess
    would report it; the xdist worker has the stack imported already. tests/test_cli.py runs the real entry
    point (`python -m actuator_sysid.cli`) in a fresh interpreter too."""
    import contextlib
    import io

    from actuator_sysid.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as e:  # argparse's usage errors
                rc = e.code if isinstance(e.code, int) else 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["actuator-sysid", *args], rc, out.getvalue(), err.getvalue())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A running `actuator-sysid serve` subprocess and where it keeps its data."""

    url: str
    data_dir: Path
    proc: subprocess.Popen
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_server(data_dir: Path, env: dict[str, str] | None = None, timeout: float = 40.0) -> Server:
    """Start the real CLI server on a free port and wait until /healthz answers."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"server-{port}.log"
    # fit workers at normal priority: SCHED_IDLE ones starve behind other load (tests share a busy machine) and
    # miss their lease; tests/test_service_bench.py checks the idle policy in a server of its own
    full_env = {
        **os.environ,
        "PYTHONPATH": pythonpath(),
        "ACTUATOR_SYSID_WORKER_PRIORITY": "normal",
        **(env or {}),
    }
    with open(log, "wb") as out:
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
                str(data_dir),
            ],
            cwd=ROOT,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(f"http://127.0.0.1:{port}", data_dir, proc, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if requests.get(server.url + "/healthz", timeout=1).ok:
                return server
        except (requests.ConnectionError, requests.Timeout):  # not listening yet, or still starting up
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server did not answer within {timeout} s:\n{log.read_text()}")


def upload_recording(server: Server, rec: Recording, path: Path) -> dict:
    """Write `rec` as a canonical CSV at `path`, upload it with its sidecar, and return the created dataset."""
    from actuator_sysid.datasets.canonical import sidecar_for, write_table

    write_table(rec, path)
    with open(path, "rb") as f:
        r = requests.post(
            server.url + "/api/v1/datasets",
            files={"file": (path.name, f)},
            data={"metadata": json.dumps(sidecar_for(rec))},
            timeout=60,
        )
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
def recording_factory() -> Callable[..., Recording]:
    return make_recording


def settle(server: Server, timeout: float = 120.0) -> None:
    """Cancel every queued or running fit and wait until none is left in flight: the next module starts on a
    quiet server, as it would on a fresh one."""
    fits = requests.get(server.url + "/api/v1/fits", timeout=30).json()
    live = [f["id"] for f in fits if f["status"] in ("queued", "running")]
    for fid in live:
        requests.post(f"{server.url}/api/v1/fits/{fid}/cancel", timeout=30)
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        time.sleep(0.2)
        live = [
            fid
            for fid in live
            if requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=30).json()["status"]
            in ("queued", "running")
        ]
    assert not live, f"fits {live} still in flight {timeout} s after their cancel"


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server per test worker, with a small upload limit so the 413 case is cheap to test. A server's
    start-up (its app, its fit workers' preloaded stack) is CPU the modules share instead of paying each."""
    s = start_server(tmp_path_factory.mktemp("svc") / "data", {"ACTUATOR_SYSID_MAX_UPLOAD_BYTES": "1000000"})
    yield s
    s.stop()


@pytest.fixture(scope="module")
def server(shared_server: Server) -> Iterator[Server]:
    """The worker's shared server, left with no fit in flight when the module ends. Its tests compare what is
    stored before and after, never against an empty server."""
    assert shared_server.proc.poll() is None, f"the shared server died:\n{shared_server.log.read_text()}"
    yield shared_server
    settle(shared_server)


ADMIN_URL = os.environ.get("ACTUATOR_SYSID_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
"""The PostgreSQL server's maintenance database the tests make their own databases from."""


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A new, empty database on the PostgreSQL server; dropped (connections forced out) at the end."""
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL not answering at {ADMIN_URL}: {e}")
    name = f"asid_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield (
                ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1) + "/" + name
            )
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
