"""The fit suite on the real PostgreSQL server (psycopg 3): a fresh database per run, dropped afterwards.

The server is the machine's PostgreSQL (.ci/run starts it when it is not answering); the URL of its
maintenance database comes from ACTUATOR_SYSID_TEST_PG (default: postgres@127.0.0.1:5432, trust auth).
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import requests
from conftest import start_server
from test_service_flow import IDLE_WORKERS, run_fit_suite

from actuator_sysid.service.db import Repository


def test_migrations_run_and_are_idempotent(pg_url: str) -> None:
    for _ in range(2):  # the second start finds the schema at head and changes nothing
        repo = Repository(pg_url)
        try:
            repo.ping()
            assert repo.fit_counts() == {
                "queued": 0,
                "running": 0,
                "succeeded": 0,
                "failed": 0,
                "cancelled": 0,
            }
        finally:
            repo.close()
    with psycopg.connect(pg_url.replace("+psycopg", "")) as conn:
        tables = {r[0] for r in conn.execute("select tablename from pg_tables where schemaname = 'public'")}
        version = conn.execute("select version_num from alembic_version").fetchone()
    assert {"datasets", "fits", "artifacts", "fit_events", "tokens", "robots", "alembic_version"} <= tables
    assert version is not None and version[0] == "0003"


def test_fit_suite_postgres_local(pg_url: str, tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", {"ACTUATOR_SYSID_DATABASE_URL": pg_url, **IDLE_WORKERS})
    try:
        assert requests.get(server.url + "/healthz", timeout=10).json() == {"status": "ok"}
        run_fit_suite(server, tmp_path)
        assert not (server.data_dir / "actuator_sysid.db").exists()  # nothing went to SQLite
    finally:
        server.stop()
