"""Service settings: one pydantic-settings object, read from `ACTUATOR_SYSID_*` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where the service keeps its files and database, where it listens, and how much work it accepts."""

    model_config = SettingsConfigDict(env_prefix="ACTUATOR_SYSID_")

    data_dir: Path = Path("./data")
    database_url: str = ""  # empty: sqlite:///<data_dir>/actuator_sysid.db
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_upload_bytes: int = Field(200 * 1024 * 1024, ge=1)
    workers: int = Field(1, ge=1)  # fit worker processes running at once

    @model_validator(mode="after")
    def _derive_paths(self) -> Settings:
        """Make data_dir absolute (worker processes may start elsewhere) and default the database inside it."""
        self.data_dir = self.data_dir.expanduser().resolve()
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir / 'actuator_sysid.db'}"
        return self
