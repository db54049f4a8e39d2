"""The one repository module: every database read and write of the service goes through `Repository`.

Rows leave this module as plain dicts, so routes and workers never hold SQLAlchemy objects or sessions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, String, Text, create_engine, event, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

FIT_STATUSES = ("queued", "running", "succeeded", "failed")
RESTARTED = "server restarted during the fit"
STOPPED = "server stopped during the fit"


class NotFoundError(LookupError):
    """A dataset or fit id that does not exist; the message names it."""


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(ts: datetime) -> str:
    """Timestamps are stored as naive UTC by SQLite; hand them out as ISO 8601 with the zone."""
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).isoformat()


class Base(DeclarativeBase):
    pass


class DatasetRow(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))  # the uploaded file name, for display only
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    summary: Mapped[dict] = mapped_column(JSON)
    path: Mapped[str] = mapped_column(String(512))  # folder relative to the data dir


class FitRow(Base):
    __tablename__ = "fits"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    request: Mapped[dict] = mapped_column(JSON)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


def _dataset_dict(row: DatasetRow) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "created_at": _iso(row.created_at), "path": row.path,
            "summary": row.summary}


def _fit_dict(row: FitRow, with_result: bool = True) -> dict[str, Any]:
    d = {"id": row.id, "dataset_id": row.dataset_id, "status": row.status, "progress": row.progress,
         "message": row.message, "request": row.request, "error": row.error,
         "created_at": _iso(row.created_at), "updated_at": _iso(row.updated_at)}
    if with_result:
        d["result"] = row.result
    return d


def _engine(url: str) -> Engine:
    """An engine; for SQLite, WAL mode so the API reads while a worker process writes progress."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    if engine.url.database and engine.url.database != ":memory:":
        Path(engine.url.database).parent.mkdir(parents=True, exist_ok=True)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    return engine


class Repository:
    """Datasets and fits in one database; safe to open once per process (API and each fit worker)."""

    def __init__(self, url: str) -> None:
        self.engine = _engine(url)
        Base.metadata.create_all(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    # --- datasets ---

    def create_dataset(self, dataset_id: str, name: str, summary: dict, path: str) -> dict[str, Any]:
        with self._session.begin() as s:
            row = DatasetRow(id=dataset_id, name=name, summary=summary, path=path, created_at=_now())
            s.add(row)
        return _dataset_dict(row)

    def get_dataset(self, dataset_id: str) -> dict[str, Any]:
        with self._session() as s:
            row = s.get(DatasetRow, dataset_id)
            if row is None:
                raise NotFoundError(f"dataset {dataset_id!r} not found; GET /api/v1/datasets lists the ids")
            return _dataset_dict(row)

    def list_datasets(self) -> list[dict[str, Any]]:
        with self._session() as s:
            rows = s.scalars(select(DatasetRow).order_by(DatasetRow.created_at.desc()))
            return [_dataset_dict(r) for r in rows]

    # --- fits ---

    def create_fit(self, fit_id: str, dataset_id: str, request: dict) -> dict[str, Any]:
        with self._session.begin() as s:
            now = _now()
            row = FitRow(id=fit_id, dataset_id=dataset_id, status="queued", progress=0.0, message="queued",
                         request=request, created_at=now, updated_at=now)
            s.add(row)
        return _fit_dict(row)

    def get_fit(self, fit_id: str) -> dict[str, Any]:
        with self._session() as s:
            row = s.get(FitRow, fit_id)
            if row is None:
                raise NotFoundError(f"fit {fit_id!r} not found; GET /api/v1/fits lists the ids")
            return _fit_dict(row)

    def list_fits(self, dataset_id: str | None = None) -> list[dict[str, Any]]:
        """Fits newest first, without their (large) results."""
        with self._session() as s:
            q = select(FitRow).order_by(FitRow.created_at.desc())
            if dataset_id is not None:
                q = q.where(FitRow.dataset_id == dataset_id)
            return [_fit_dict(r, with_result=False) for r in s.scalars(q)]

    def _update_fit(self, fit_id: str, only_if: tuple[str, ...], **values: Any) -> bool:
        """Set columns of one fit if its status is one of `only_if`; True when a row changed."""
        with self._session.begin() as s:
            res = s.execute(update(FitRow).where(FitRow.id == fit_id, FitRow.status.in_(only_if))
                            .values(updated_at=_now(), **values))
            return res.rowcount > 0

    def start_fit(self, fit_id: str) -> bool:
        """queued → running; False if the fit was not queued (already taken or finished)."""
        return self._update_fit(fit_id, ("queued",), status="running", progress=0.0, message="starting")

    def set_progress(self, fit_id: str, progress: float, message: str) -> bool:
        return self._update_fit(fit_id, ("running",), progress=min(max(float(progress), 0.0), 1.0),
                                message=message[:1000])

    def finish_fit(self, fit_id: str, result: dict) -> bool:
        return self._update_fit(fit_id, ("running",), status="succeeded", progress=1.0, message="done",
                                result=result, error=None)

    def fail_fit(self, fit_id: str, error: str) -> bool:
        """queued/running → failed with a message for the user; finished fits are left alone."""
        return self._update_fit(fit_id, ("queued", "running"), status="failed", message="failed", error=error)

    def recover_after_restart(self) -> list[str]:
        """Fail fits a previous process left running; return the queued ones, which never began, to re-queue."""
        with self._session.begin() as s:
            s.execute(update(FitRow).where(FitRow.status == "running")
                      .values(status="failed", message="failed", error=RESTARTED, updated_at=_now()))
            q = select(FitRow.id).where(FitRow.status == "queued").order_by(FitRow.created_at)
            return list(s.scalars(q))
