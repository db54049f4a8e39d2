"""Service settings: one pydantic-settings object, read from `ACTUATOR_SYSID_*` environment variables."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def is_loopback(host: str) -> bool:
    """True when `host` only accepts connections from this machine (127.0.0.0/8, ::1, localhost)."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    """Where the service keeps its files and database, where it listens, and how much work it accepts."""

    model_config = SettingsConfigDict(env_prefix="ACTUATOR_SYSID_")

    data_dir: Path = Path("./data")
    database_url: str = (
        ""  # empty: sqlite:///<data_dir>/actuator_sysid.db; postgresql+psycopg://... for PostgreSQL
    )
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_upload_bytes: int = Field(200 * 1024 * 1024, ge=1)
    workers: int = Field(1, ge=1)  # fits running at once: local worker processes, or Ray tasks in flight
    executor: Literal["local", "ray"] = "local"
    ray_address: str = ""  # the Ray cluster for executor=ray ("host:port" of the head); empty: "auto"
    job_time_limit_s: float = Field(3600.0, gt=0)  # a fit running longer than this fails, with that reason
    fit_attempts: int = Field(1, ge=1)  # runs per fit: >1 re-queues a fit whose worker died
    lease_s: float = Field(
        60.0, ge=1
    )  # a running fit whose worker stayed silent this long is re-queued/failed
    # local fit workers: idle (SCHED_IDLE, never delays a request) or normal, where other load would starve them
    worker_priority: Literal["idle", "normal"] = "idle"
    # local fit workers start warm (forked from a process that already imported the fitting stack) or spawned
    # cold; auto: warm unless an NVIDIA GPU is present (a fork of a process that touched CUDA cannot use it)
    worker_start: Literal["auto", "warm", "spawn"] = "auto"
    auth: Literal["auto", "required", "off"] = "auto"  # auto: tokens required when bound beyond loopback
    log_format: Literal["json", "text"] = "json"
    parse_workers: int = Field(1, ge=1)  # processes that parse uploads (large files never load in the API)
    # an upload's parse (or an excitation's design) not done this long after it was sent: the parser pool is
    # rebuilt and the request answered 503
    parse_timeout_s: float = Field(600.0, gt=0)

    @model_validator(mode="after")
    def _derive_paths(self) -> Settings:
        """Make data_dir absolute (worker processes may start elsewhere) and default the database inside it."""
        self.data_dir = self.data_dir.expanduser().resolve()
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir / 'actuator_sysid.db'}"
        elif self.database_url.startswith(
            ("postgresql://", "postgres://")
        ):  # psycopg 3 is the driver we ship
            self.database_url = "postgresql+psycopg://" + self.database_url.split("://", 1)[1]
        return self

    @property
    def auth_required(self) -> bool:
        """Tokens are required when asked for, or (auto) when the server listens beyond loopback."""
        return self.auth == "required" or (self.auth == "auto" and not is_loopback(self.host))
