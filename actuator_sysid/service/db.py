"""The one repository module: every database read and write of the service goes through `Repository`.

Rows leave this module as plain dicts, so routes and workers never hold SQLAlchemy objects or sessions.
The schema is created and upgraded by the Alembic migrations shipped in `service/migrations` (`migrate`).

The fits table is also the job queue: a dispatcher claims a `queued` row (an optimistic conditional
update, safe with several dispatchers on one database), the worker reports progress and heartbeats under
that claim, and a row whose worker went silent is re-queued or failed by whoever sweeps next.
"""

from __future__ import annotations

import hashlib
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import Connection, CursorResult, Engine, Row
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.sql.dml import UpdateBase

from .errors import NotFoundError

FIT_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
ACTIVE = ("queued", "running")
TERMINAL = ("succeeded", "failed", "cancelled")
RETRY_HINT = "a retry runs it again (POST /api/v1/fits/{id}/retry)"
RESTARTED = f"server restarted during the fit; {RETRY_HINT}"
STOPPED = "server stopped during the fit"
DEFAULT_PROJECT = "default"


class ConflictError(RuntimeError):
    """The resource exists but is not in a state that allows the request (e.g. export of an unfinished fit)."""


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(ts: datetime | None) -> datetime | None:
    """SQLite hands timestamps back naive (they are UTC); make them comparable with aware ones."""
    return None if ts is None else (ts if ts.tzinfo else ts.replace(tzinfo=UTC))


def _iso(ts: datetime | None) -> str | None:
    """Timestamps as ISO 8601 with the zone."""
    a = _aware(ts)
    return a.isoformat() if a else None


def token_hash(token: str) -> str:
    """What the database keeps of an API token: its sha256 (tokens are long random strings, so no salt)."""
    return hashlib.sha256(token.encode()).hexdigest()


def _owned_row(s: Any, cls: type, row_id: str, project: str | None, kind: str) -> Any:
    """The row `row_id` of `cls` (a dataset or fit) if it exists and belongs to `project` (None: any), else
    NotFoundError: another project's row reads as missing, not forbidden."""
    row = s.get(cls, row_id)
    if row is None or (project is not None and row.project != project):
        raise _missing(kind, row_id)
    return row


def _missing(kind: str, row_id: str) -> NotFoundError:
    return NotFoundError(f"{kind} {row_id!r} not found; GET /api/v1/{kind}s lists the ids")


def worker_name() -> str:
    """Who holds a claim: host and process id, shown to users and used to spot dead local workers."""
    import os

    return f"{socket.gethostname()}:{os.getpid()}"


class Base(DeclarativeBase):
    pass


class DatasetRow(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(String(64), index=True, default=DEFAULT_PROJECT)
    name: Mapped[str] = mapped_column(String(255))  # the uploaded file name, for display only
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    summary: Mapped[dict] = mapped_column(JSON)
    meta: Mapped[dict] = mapped_column(JSON, default=dict)  # the sidecar's free keys (Recording.metadata)
    sha256: Mapped[str] = mapped_column(String(64), index=True)  # of the uploaded bytes
    size: Mapped[int] = mapped_column(BigInteger)
    actuator_model: Mapped[str | None] = mapped_column(String(255), index=True, nullable=True)
    serial: Mapped[str | None] = mapped_column(String(255), index=True, nullable=True)
    robot_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True)  # uploaded for it


class RobotRow(Base):
    """An uploaded robot model (issue 16): its summary (joint tree, limits, the model's joint terms) and how it
    loads (`options`: model file inside a zip, fixed_base); its upload is the artifact "original"."""

    __tablename__ = "robots"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(String(64), index=True, default=DEFAULT_PROJECT)
    name: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now, index=True)
    summary: Mapped[dict] = mapped_column(JSON)
    options: Mapped[dict] = mapped_column(JSON, default=dict)
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)


class FitRow(Base):
    __tablename__ = "fits"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(String(64), index=True, default=DEFAULT_PROJECT)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    request: Mapped[dict] = mapped_column(JSON)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now, index=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    executor: Mapped[str | None] = mapped_column(String(16), nullable=True)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)
    claim: Mapped[str | None] = mapped_column(String(32), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    name: Mapped[str | None] = mapped_column(String(255), nullable=True)  # the user's name for the run
    tags: Mapped[list | None] = mapped_column(JSON, nullable=True)
    summary: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # the runs table's figures (runs.py)


class ArtifactRow(Base):
    """A named file of a dataset or fit, stored by content (sha256) in the artifact store."""

    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("owner_kind", "owner_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner_kind: Mapped[str] = mapped_column(String(16))
    owner_id: Mapped[str] = mapped_column(String(32), index=True)
    name: Mapped[str] = mapped_column(String(128))
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(BigInteger)


class FitEventRow(Base):
    """A log line of a fit (worker logs and lifecycle), streamed to clients by the SSE route."""

    __tablename__ = "fit_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    fit_id: Mapped[str] = mapped_column(String(32), index=True)
    ts: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    level: Mapped[str] = mapped_column(String(16), default="info")
    message: Mapped[str] = mapped_column(Text)


class TokenRow(Base):
    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


def _dataset_dict(row: DatasetRow | Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "project": row.project,
        "name": row.name,
        "created_at": _iso(row.created_at),
        "summary": row.summary,
        "metadata": row.meta or {},
        "sha256": row.sha256,
        "size": row.size,
        "actuator_model": row.actuator_model,
        "serial": row.serial,
        "robot_id": row.robot_id,
    }


def _robot_dict(row: RobotRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "project": row.project,
        "name": row.name,
        "created_at": _iso(row.created_at),
        "summary": row.summary,
        "options": row.options or {},
        "sha256": row.sha256,
        "size": row.size,
    }


def _fit_dict(row: FitRow | Row[Any], with_result: bool = True) -> dict[str, Any]:
    d = {
        "id": row.id,
        "project": row.project,
        "dataset_id": row.dataset_id,
        "status": row.status,
        "progress": row.progress,
        "message": row.message,
        "request": row.request,
        "error": row.error,
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
        "started_at": _iso(row.started_at),
        "finished_at": _iso(row.finished_at),
        "attempts": row.attempts,
        "executor": row.executor,
        "worker": row.worker,
        "cancel_requested": bool(row.cancel_requested),
        "name": row.name,
        "tags": list(row.tags or []),
        "summary": row.summary,
    }
    if with_result:
        d["result"] = row.result
    return d


NUL_STAND_IN = "\ufffd"  # what a NUL in a bound string becomes: PostgreSQL text cannot hold U+0000


def _no_nul(value: Any) -> Any:
    """A bound parameter (or a row, or a batch of rows) with NUL in its strings replaced by NUL_STAND_IN."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_STAND_IN) if "\x00" in value else value
    if isinstance(value, dict):
        return {k: _no_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_no_nul(v) for v in value)
    return value


def _guard_nul(engine: Engine) -> None:
    """Every statement's string parameters without NUL: an id or filter a user sent with one (a%00b) matches
    nothing (404, an empty list) instead of PostgreSQL's DataError, and no text written can fail on it. No
    stored id, name or filter value holds a NUL (names.py refuses control characters), so nothing is lost."""

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _clean(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> Any:
        return statement, _no_nul(parameters)


def _engine(url: str) -> Engine:
    """An engine; for SQLite, WAL mode so the API reads while worker processes write progress."""
    if not url.startswith("sqlite"):
        engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
        _guard_nul(engine)
        return engine
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=20, max_overflow=40
    )
    _guard_nul(engine)
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


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision shipped in the package (run at every start)."""
    from alembic import command
    from alembic.config import Config

    with engine.begin() as conn:
        tables = set(inspect(conn).get_table_names())
        if "datasets" in tables and "alembic_version" not in tables:
            raise RuntimeError(
                f"the database {engine.url.render_as_string(hide_password=True)} was made by a version "
                "before migrations; move it (and the data folder) aside and start again"
            )
        cfg = Config()
        cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def _dml(s: Session, stmt: UpdateBase) -> CursorResult[Any]:
    """Run an UPDATE/DELETE and return its cursor result, whose rowcount says how many rows it changed."""
    res = s.execute(stmt)
    assert isinstance(res, CursorResult)  # what a Session returns for DML
    return res


def _newest_where(
    row: type[DatasetRow] | type[FitRow] | type[RobotRow], limit: int | None, **equal: Any
) -> Any:
    """SELECT rows newest first where each given column equals its value (None: no condition)."""
    q = select(row).order_by(row.created_at.desc())
    for column, value in equal.items():
        if value is not None:
            q = q.where(getattr(row, column) == value)
    return q if limit is None else q.limit(limit)


# The reads that dashboards poll (get/list of fits and datasets, artifacts) run as Core statements on a pooled
# connection, without an ORM session: a session, its identity map and the instances cost 4-5x the query
# (~200 µs against ~50 µs CPU per read, measured on SQLite), and these run on the API's event loop.


# Each statement is built once, with bound parameters, so a read neither rebuilds it nor its cache key.
_READS: dict[tuple, Any] = {}


def _read(key: tuple, build: Callable[[], Any]) -> Any:
    if key not in _READS:
        _READS[key] = build()
    return _READS[key]


def _core_owned(
    c: Connection, cls: type[DatasetRow] | type[FitRow], row_id: str, project: str | None, kind: str
) -> Row[Any]:
    """Like _owned_row, as a plain row (columns by attribute) read without a session."""
    table = cls.__table__
    q = _read(("id", cls), lambda: select(table).where(table.c.id == bindparam("row_id")))
    row = c.execute(q, {"row_id": row_id}).first()
    if row is None or (project is not None and row.project != project):
        raise _missing(kind, row_id)
    return row


def _core_newest(
    c: Connection,
    cls: type[DatasetRow] | type[FitRow],
    limit: int | None,
    skip: tuple[str, ...] = (),
    **equal: Any,
) -> list[Row[Any]]:
    """Like _newest_where, as plain rows without the columns named in `skip`."""
    table = cls.__table__
    given = {k: v for k, v in equal.items() if v is not None}

    def build() -> Any:
        q = select(*(col for col in table.c if col.name not in skip)).order_by(table.c.created_at.desc())
        for column in given:
            q = q.where(table.c[column] == bindparam(column))
        return q if limit is None else q.limit(bindparam("row_limit"))

    q = _read(("newest", cls, skip, tuple(given), limit is None), build)
    return list(c.execute(q, {**given, "row_limit": limit}))


class Repository:
    """Datasets, fits, artifacts, fit events and tokens in one database; open once per process.

    `project=None` in a read means "every project" (auth off); otherwise rows of other projects are
    reported as not found, so a token never learns another project's ids.
    """

    def __init__(self, url: str, *, run_migrations: bool = True) -> None:
        self.engine = _engine(url)
        if run_migrations:
            migrate(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    def ping(self) -> None:
        with self.engine.connect() as c:
            c.execute(select(1))

    # --- datasets ---

    def create_dataset(
        self,
        dataset_id: str,
        name: str,
        summary: dict,
        artifacts: dict[str, tuple[str, int]],
        *,
        project: str = DEFAULT_PROJECT,
        metadata: dict | None = None,
        original: str = "original",
        robot_id: str | None = None,
    ) -> dict[str, Any]:
        """One dataset row and its artifacts (name → (sha256, size)) in one transaction; `robot_id`: the robot
        it was uploaded for."""
        meta = metadata or {}
        sha, size = artifacts[original]

        def label(key: str) -> str | None:
            v = meta.get(key)
            return str(v)[:255] if v not in (None, "") else None

        with self._session.begin() as s:
            row = DatasetRow(
                id=dataset_id,
                project=project,
                name=name,
                summary=summary,
                meta=meta,
                sha256=sha,
                size=size,
                created_at=_now(),
                actuator_model=label("actuator_model"),
                serial=label("serial"),
                robot_id=robot_id,
            )
            s.add(row)
            s.flush()
            for art_name, (a_sha, a_size) in artifacts.items():
                s.add(
                    ArtifactRow(
                        owner_kind="dataset", owner_id=dataset_id, name=art_name, sha256=a_sha, size=a_size
                    )
                )
        return _dataset_dict(row)

    def _dataset_row(self, s: Any, dataset_id: str, project: str | None) -> DatasetRow:
        return _owned_row(s, DatasetRow, dataset_id, project, "dataset")

    def get_dataset(self, dataset_id: str, project: str | None = None) -> dict[str, Any]:
        with self.engine.connect() as c:
            return _dataset_dict(_core_owned(c, DatasetRow, dataset_id, project, "dataset"))

    def list_datasets(
        self,
        project: str | None = None,
        actuator_model: str | None = None,
        serial: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            rows = _core_newest(
                c, DatasetRow, limit, project=project, actuator_model=actuator_model, serial=serial
            )
        return [_dataset_dict(r) for r in rows]

    def delete_dataset(self, dataset_id: str, project: str | None = None, force: bool = False) -> list[str]:
        """Delete a dataset with its fits, events and artifact rows; returns the deleted fit ids.

        Refuses (ConflictError naming them) while fits of the dataset are queued or running, unless `force`,
        which cancels them first (their workers stop at their next progress report).
        """
        with self._session.begin() as s:
            self._dataset_row(s, dataset_id, project)
            fits = list(s.scalars(select(FitRow).where(FitRow.dataset_id == dataset_id)))
            active = [f.id for f in fits if f.status in ACTIVE]
            if active and not force:
                raise ConflictError(
                    f"dataset {dataset_id} is used by {len(active)} queued or running fit(s) "
                    f"{active}; cancel them first, or DELETE with ?force=true to cancel and "
                    "delete them with the dataset"
                )
            ids = [f.id for f in fits]
            if ids:
                s.execute(delete(FitEventRow).where(FitEventRow.fit_id.in_(ids)))
                s.execute(
                    delete(ArtifactRow).where(ArtifactRow.owner_kind == "fit", ArtifactRow.owner_id.in_(ids))
                )
                s.execute(delete(FitRow).where(FitRow.id.in_(ids)))
            s.execute(
                delete(ArtifactRow).where(
                    ArtifactRow.owner_kind == "dataset", ArtifactRow.owner_id == dataset_id
                )
            )
            s.execute(delete(DatasetRow).where(DatasetRow.id == dataset_id))
            return ids

    # --- robots ---

    def create_robot(
        self,
        robot_id: str,
        name: str,
        summary: dict,
        options: dict,
        original: tuple[str, int],
        *,
        project: str = DEFAULT_PROJECT,
    ) -> dict[str, Any]:
        """One robot row and its upload's artifact row in one transaction."""
        with self._session.begin() as s:
            row = RobotRow(
                id=robot_id,
                project=project,
                name=name,
                summary=summary,
                options=options,
                sha256=original[0],
                size=original[1],
                created_at=_now(),
            )
            s.add(row)
            s.add(
                ArtifactRow(
                    owner_kind="robot",
                    owner_id=robot_id,
                    name="original",
                    sha256=original[0],
                    size=original[1],
                )
            )
        return _robot_dict(row)

    def get_robot(self, robot_id: str, project: str | None = None) -> dict[str, Any]:
        with self._session() as s:
            return _robot_dict(_owned_row(s, RobotRow, robot_id, project, "robot"))

    def list_robots(self, project: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        with self._session() as s:
            return [_robot_dict(r) for r in s.scalars(_newest_where(RobotRow, limit, project=project))]

    def delete_robot(self, robot_id: str, project: str | None = None) -> None:
        """Delete a robot and its artifact rows; refused (ConflictError naming them) while fits use it."""
        with self._session.begin() as s:
            _owned_row(s, RobotRow, robot_id, project, "robot")
            users = [
                fid
                for fid, req in s.execute(select(FitRow.id, FitRow.request))
                if isinstance(req, dict) and req.get("robot_id") == robot_id
            ]
            if users:
                raise ConflictError(
                    f"robot {robot_id} is used by {len(users)} fit(s) {users[:20]}; delete them "
                    "first (DELETE /api/v1/fits/{id})"
                )
            s.execute(
                delete(ArtifactRow).where(ArtifactRow.owner_kind == "robot", ArtifactRow.owner_id == robot_id)
            )
            s.execute(delete(RobotRow).where(RobotRow.id == robot_id))

    # --- artifacts ---

    def artifacts(self, owner_kind: str, owner_id: str) -> dict[str, dict[str, Any]]:
        """name → {sha256, size} of one dataset's or fit's stored files."""
        with self.engine.connect() as c:
            q = _read(
                ("artifacts",),
                lambda: (
                    select(ArtifactRow.name, ArtifactRow.sha256, ArtifactRow.size)
                    .where(
                        ArtifactRow.owner_kind == bindparam("kind"),
                        ArtifactRow.owner_id == bindparam("owner"),
                    )
                    .order_by(ArtifactRow.name)
                ),
            )
            rows = c.execute(q, {"kind": owner_kind, "owner": owner_id})
            return {r.name: {"sha256": r.sha256, "size": r.size} for r in rows}

    def all_artifacts(self) -> list[dict[str, Any]]:
        """Every artifact row (for checksum verification and garbage collection of the store)."""
        with self._session() as s:
            return [
                {
                    "owner_kind": r.owner_kind,
                    "owner_id": r.owner_id,
                    "name": r.name,
                    "sha256": r.sha256,
                    "size": r.size,
                }
                for r in s.scalars(select(ArtifactRow))
            ]

    def referenced_blobs(self) -> set[str]:
        with self._session() as s:
            return set(s.scalars(select(ArtifactRow.sha256).distinct()))

    # --- fits ---

    def create_fit(
        self,
        fit_id: str,
        dataset_id: str,
        request: dict,
        *,
        project: str = DEFAULT_PROJECT,
        name: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        with self._session.begin() as s:
            now = _now()
            row = FitRow(
                id=fit_id,
                project=project,
                dataset_id=dataset_id,
                status="queued",
                progress=0.0,
                message="queued",
                request=request,
                created_at=now,
                updated_at=now,
                attempts=0,
                cancel_requested=False,
                name=name,
                tags=list(tags or []),
            )
            s.add(row)
            s.add(FitEventRow(fit_id=fit_id, ts=now, message="queued"))
        return _fit_dict(row)

    def _fit_row(self, s: Any, fit_id: str, project: str | None) -> FitRow:
        return _owned_row(s, FitRow, fit_id, project, "fit")

    def get_fit(self, fit_id: str, project: str | None = None) -> dict[str, Any]:
        with self.engine.connect() as c:
            return _fit_dict(_core_owned(c, FitRow, fit_id, project, "fit"))

    def list_fits(
        self,
        dataset_id: str | None = None,
        project: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Fits newest first, without their (large) results."""
        with self.engine.connect() as c:
            rows = _core_newest(
                c, FitRow, limit, ("result",), dataset_id=dataset_id, project=project, status=status
            )
        return [_fit_dict(r, with_result=False) for r in rows]

    def label_fit(
        self, fit_id: str, project: str | None, name: str | None = None, tags: list[str] | None = None
    ) -> dict[str, Any]:
        """Rename or retag a fit (None leaves a field as it is; "" clears the name)."""
        with self._session.begin() as s:
            row = self._fit_row(s, fit_id, project)
            if name is not None:
                row.name = name or None
            if tags is not None:
                row.tags = list(tags)
            return _fit_dict(row, with_result=False)

    def set_fit_summary(self, fit_id: str, summary: dict) -> None:
        """Store a finished fit's runs-table figures (computed once from its result)."""
        with self._session.begin() as s:
            s.execute(update(FitRow).where(FitRow.id == fit_id).values(summary=summary))

    def fleet_fits(self, actuator_model: str, project: str | None = None) -> list[dict[str, Any]]:
        """Succeeded fits of datasets of one actuator model, oldest first, each with its dataset's serial."""
        with self._session() as s:
            q = (
                select(FitRow, DatasetRow.serial, DatasetRow.name, DatasetRow.meta, DatasetRow.created_at)
                .join(DatasetRow, FitRow.dataset_id == DatasetRow.id)
                .where(DatasetRow.actuator_model == actuator_model, FitRow.status == "succeeded")
                .order_by(FitRow.finished_at, FitRow.created_at)
            )
            if project is not None:
                q = q.where(FitRow.project == project)
            return [
                {
                    **_fit_dict(f),
                    "serial": serial,
                    "dataset_name": name,
                    "dataset_metadata": meta or {},
                    "dataset_created_at": _iso(created),
                }
                for f, serial, name, meta, created in s.execute(q)
            ]

    def actuator_models(self, project: str | None = None) -> list[tuple[str, int]]:
        """(actuator model, number of datasets) for the fleet view."""
        with self._session() as s:
            q = (
                select(DatasetRow.actuator_model, func.count())
                .where(DatasetRow.actuator_model.is_not(None))
                .group_by(DatasetRow.actuator_model)
                .order_by(DatasetRow.actuator_model)
            )
            if project is not None:
                q = q.where(DatasetRow.project == project)
            return [(str(m), int(n)) for m, n in s.execute(q)]  # NULL models are filtered out

    def delete_fit(self, fit_id: str, project: str | None = None) -> None:
        """Delete a finished fit (its events and artifact rows too); a queued/running one must be cancelled first."""
        with self._session.begin() as s:
            row = self._fit_row(s, fit_id, project)
            if row.status in ACTIVE:
                raise ConflictError(
                    f"fit {fit_id} is {row.status}; cancel it first "
                    f"(POST /api/v1/fits/{fit_id}/cancel), then delete it"
                )
            s.execute(delete(FitEventRow).where(FitEventRow.fit_id == fit_id))
            s.execute(
                delete(ArtifactRow).where(ArtifactRow.owner_kind == "fit", ArtifactRow.owner_id == fit_id)
            )
            s.execute(delete(FitRow).where(FitRow.id == fit_id))

    def add_event(self, fit_id: str, message: str, level: str = "info") -> None:
        with self._session.begin() as s:
            s.add(FitEventRow(fit_id=fit_id, ts=_now(), level=level, message=message[:4000]))

    def events_since(self, fit_id: str, after: int, limit: int = 500) -> list[dict[str, Any]]:
        with self._session() as s:
            q = (
                select(FitEventRow)
                .where(FitEventRow.fit_id == fit_id, FitEventRow.id > after)
                .order_by(FitEventRow.id)
                .limit(limit)
            )
            return [
                {"id": e.id, "ts": _iso(e.ts), "level": e.level, "message": e.message} for e in s.scalars(q)
            ]

    # --- the queue: claim, report, finish ---

    def claim_next(self, executor: str, worker: str) -> dict[str, Any] | None:
        """queued → running for the oldest queued fit; the returned dict carries the claim token."""
        for _ in range(10):
            with self._session() as s:
                fit_id = s.scalar(
                    select(FitRow.id).where(FitRow.status == "queued").order_by(FitRow.created_at).limit(1)
                )
            if fit_id is None:
                return None
            claim = self.start_fit(fit_id, executor, worker)
            if claim is not None:
                return {**self.get_fit(fit_id), "claim": claim}
        return None

    def start_fit(self, fit_id: str, executor: str = "local", worker: str = "") -> str | None:
        """queued → running for one fit; returns the new claim, or None if it was not queued (taken, finished)."""
        claim, now = uuid.uuid4().hex, _now()
        with self._session.begin() as s:
            res = _dml(
                s,
                update(FitRow)
                .where(FitRow.id == fit_id, FitRow.status == "queued")
                .values(
                    status="running",
                    claim=claim,
                    attempts=FitRow.attempts + 1,
                    executor=executor,
                    worker=worker,
                    started_at=now,
                    heartbeat_at=now,
                    updated_at=now,
                    progress=0.0,
                    message="starting",
                ),
            )
            if res.rowcount == 0:
                return None
            s.add(
                FitEventRow(fit_id=fit_id, ts=now, message=f"started on {executor} worker {worker}".strip())
            )
        return claim

    def _owned(self, fit_id: str, claim: str | None) -> Any:
        cond = [FitRow.id == fit_id, FitRow.status == "running"]
        if claim is not None:
            cond.append(FitRow.claim == claim)
        return cond

    def set_progress(self, fit_id: str, progress: float, message: str, claim: str | None = None) -> str:
        """Record progress (and a heartbeat); returns "ok", "cancel" (stop: cancel asked) or "lost" (not ours)."""
        now = _now()
        with self._session.begin() as s:
            res = _dml(
                s,
                update(FitRow)
                .where(*self._owned(fit_id, claim))
                .values(
                    progress=min(max(float(progress), 0.0), 1.0),
                    message=message[:1000],
                    updated_at=now,
                    heartbeat_at=now,
                ),
            )
            if res.rowcount == 0:
                return "lost"
            return "cancel" if s.scalar(select(FitRow.cancel_requested).where(FitRow.id == fit_id)) else "ok"

    def set_worker(self, fit_id: str, claim: str, worker: str) -> None:
        """Record which process runs a claim (a Ray task's worker, not the dispatcher that claimed it)."""
        with self._session.begin() as s:
            s.execute(
                update(FitRow).where(*self._owned(fit_id, claim)).values(worker=worker, heartbeat_at=_now())
            )

    def heartbeat(self, fit_id: str, claim: str) -> str:
        """Keep a claim alive without progress; same answers as set_progress."""
        with self._session.begin() as s:
            res = _dml(s, update(FitRow).where(*self._owned(fit_id, claim)).values(heartbeat_at=_now()))
            if res.rowcount == 0:
                return "lost"
            return "cancel" if s.scalar(select(FitRow.cancel_requested).where(FitRow.id == fit_id)) else "ok"

    def finish_fit(
        self,
        fit_id: str,
        result: dict,
        artifacts: dict[str, tuple[str, int]] | None = None,
        claim: str | None = None,
        summary: dict | None = None,
    ) -> bool:
        """running → succeeded with the result, its runs-table summary and its artifact rows, in one
        transaction; not once a cancel was asked (False: the caller records the cancel)."""
        now = _now()
        with self._session.begin() as s:
            owned = [*self._owned(fit_id, claim), FitRow.cancel_requested.is_not(True)]
            res = _dml(
                s,
                update(FitRow)
                .where(*owned)
                .values(
                    status="succeeded",
                    progress=1.0,
                    message="done",
                    result=result,
                    summary=summary,
                    error=None,
                    updated_at=now,
                    finished_at=now,
                    claim=None,
                ),
            )
            if res.rowcount == 0:
                return False
            s.execute(
                delete(ArtifactRow).where(ArtifactRow.owner_kind == "fit", ArtifactRow.owner_id == fit_id)
            )
            for name, (sha, size) in (artifacts or {}).items():
                s.add(ArtifactRow(owner_kind="fit", owner_id=fit_id, name=name, sha256=sha, size=size))
            s.add(FitEventRow(fit_id=fit_id, ts=now, message="succeeded"))
            return True

    def fail_fit(self, fit_id: str, error: str, claim: str | None = None) -> bool:
        """queued/running → failed with a message for the user; finished fits are left alone."""
        now = _now()
        cond = [FitRow.id == fit_id, FitRow.status.in_(ACTIVE)]
        if claim is not None:
            cond.append(FitRow.claim == claim)
        with self._session.begin() as s:
            res = _dml(
                s,
                update(FitRow)
                .where(*cond)
                .values(
                    status="failed",
                    message="failed",
                    error=error,
                    updated_at=now,
                    finished_at=now,
                    claim=None,
                ),
            )
            if res.rowcount:
                s.add(FitEventRow(fit_id=fit_id, ts=now, level="error", message=f"failed: {error}"))
            return res.rowcount > 0

    def mark_cancelled(
        self, fit_id: str, claim: str | None = None, reason: str = "cancelled on request"
    ) -> bool:
        """running (with cancel asked) or queued → cancelled."""
        now = _now()
        cond = [FitRow.id == fit_id, FitRow.status.in_(ACTIVE)]
        if claim is not None:
            cond.append(FitRow.claim == claim)
        with self._session.begin() as s:
            res = _dml(
                s,
                update(FitRow)
                .where(*cond)
                .values(status="cancelled", message=reason, updated_at=now, finished_at=now, claim=None),
            )
            if res.rowcount:
                s.add(FitEventRow(fit_id=fit_id, ts=now, level="warning", message=reason))
            return res.rowcount > 0

    def request_cancel(self, fit_id: str, project: str | None = None) -> dict[str, Any]:
        """Cancel a fit: a queued one at once, a running one at its worker's next report. 409 when finished."""
        with self._session() as s:
            row = self._fit_row(s, fit_id, project)
            status = row.status
        if status in TERMINAL:
            raise ConflictError(f"fit {fit_id} already {status}; nothing to cancel")
        if status == "queued" and self.mark_cancelled(fit_id):
            return self.get_fit(fit_id)
        with self._session.begin() as s:
            s.execute(
                update(FitRow)
                .where(FitRow.id == fit_id, FitRow.status == "running")
                .values(cancel_requested=True, message="cancelling", updated_at=_now())
            )
            s.add(FitEventRow(fit_id=fit_id, ts=_now(), level="warning", message="cancel requested"))
        return self.get_fit(fit_id)

    def retry_fit(self, fit_id: str, project: str | None = None) -> dict[str, Any]:
        """failed/cancelled → queued again (same id, attempts reset); 409 for queued, running or succeeded."""
        now = _now()
        with self._session.begin() as s:
            row = self._fit_row(s, fit_id, project)
            if row.status not in ("failed", "cancelled"):
                raise ConflictError(
                    f"fit {fit_id} is {row.status}; only failed or cancelled fits can be retried"
                )
            s.execute(
                update(FitRow)
                .where(FitRow.id == fit_id)
                .values(
                    status="queued",
                    progress=0.0,
                    message="queued (retry)",
                    error=None,
                    result=None,
                    claim=None,
                    attempts=0,
                    cancel_requested=False,
                    started_at=None,
                    finished_at=None,
                    heartbeat_at=None,
                    worker=None,
                    updated_at=now,
                )
            )
            s.add(FitEventRow(fit_id=fit_id, ts=now, message="queued again (retry)"))
        return self.get_fit(fit_id)

    def worker_lost(
        self, fit_id: str, claim: str | None, reason: str, max_attempts: int, count_attempt: bool = True
    ) -> str | None:
        """A claim's worker is gone: cancelled if asked, re-queued while attempts remain, else failed.

        Returns the new status, or None when the claim was no longer running (nothing to do).
        """
        now = _now()
        with self._session.begin() as s:
            row = s.get(FitRow, fit_id)
            if row is None or row.status != "running" or (claim is not None and row.claim != claim):
                return None
            attempts = row.attempts if count_attempt else max(row.attempts - 1, 0)
            values: dict[str, Any]
            if row.cancel_requested:
                values = {"status": "cancelled", "message": "cancelled on request", "finished_at": now}
                note = "cancelled on request"
            elif attempts < max_attempts:
                values = {"status": "queued", "message": f"queued again: {reason}", "progress": 0.0}
                note = f"{reason}; queued again (attempt {attempts + 1} of {max_attempts})"
            else:
                runs = f" (ran {attempts} times)" if attempts > 1 else ""
                values = {
                    "status": "failed",
                    "message": "failed",
                    "error": f"{reason}{runs}; {RETRY_HINT}",
                    "finished_at": now,
                }
                note = f"failed: {reason}{runs}"
            s.execute(
                update(FitRow)
                .where(FitRow.id == fit_id, FitRow.claim == row.claim)
                .values(claim=None, attempts=attempts, updated_at=now, **values)
            )
            s.add(FitEventRow(fit_id=fit_id, ts=now, level="warning", message=note))
            return values["status"]

    def running_fits(self, executor: str | None = None) -> list[dict[str, Any]]:
        with self._session() as s:
            q = select(FitRow).where(FitRow.status == "running")
            if executor is not None:
                q = q.where(FitRow.executor == executor)
            return [
                {
                    **_fit_dict(r, with_result=False),
                    "claim": r.claim,
                    "heartbeat_at_dt": _aware(r.heartbeat_at),
                    "started_at_dt": _aware(r.started_at),
                }
                for r in s.scalars(q)
            ]

    def recover_after_restart(self, executor: str = "local", max_attempts: int = 1) -> list[str]:
        """Fits a previous process of this executor left running: re-queued while attempts remain, else failed.

        Returns the ids that are queued now (to wake the dispatcher)."""
        for f in self.running_fits(executor):
            self.worker_lost(f["id"], f["claim"], "server restarted during the fit", max_attempts)
        return [f["id"] for f in self.list_fits(status="queued")]

    def stale_fits(self, lease_s: float, time_limit_s: float) -> list[tuple[dict[str, Any], str]]:
        """Running fits whose worker stopped reporting, or which overran the time limit, with the reason."""
        now = _now()
        out = []
        for f in self.running_fits():
            hb, started = f["heartbeat_at_dt"], f["started_at_dt"]
            if started is not None and now - started > timedelta(seconds=time_limit_s + lease_s):
                out.append(
                    (
                        f,
                        f"the fit exceeded the time limit of {time_limit_s:g} s "
                        "(ACTUATOR_SYSID_JOB_TIME_LIMIT_S)",
                    )
                )
            elif hb is None or now - hb > timedelta(seconds=lease_s):
                out.append(
                    (
                        f,
                        f"the fit's worker {f['worker'] or ''} stopped reporting for more than "
                        f"{lease_s:g} s (it died or lost the database)".replace("  ", " "),
                    )
                )
        return out

    # --- operations ---

    def fit_counts(self, project: str | None = None) -> dict[str, int]:
        """Fits by status (of one project, or of all)."""
        with self._session() as s:
            q = select(FitRow.status, func.count()).group_by(FitRow.status)
            if project is not None:
                q = q.where(FitRow.project == project)
            counts = dict(s.execute(q).all())
        return {st: int(counts.get(st, 0)) for st in FIT_STATUSES}

    def fit_durations(self) -> list[float]:
        """Seconds from start to finish of every finished fit (for the duration histogram)."""
        with self._session() as s:
            rows = s.execute(
                select(FitRow.started_at, FitRow.finished_at).where(
                    FitRow.started_at.is_not(None),
                    FitRow.finished_at.is_not(None),
                    FitRow.status.in_(("succeeded", "failed")),
                )
            )
            return [(_aware(b) - _aware(a)).total_seconds() for a, b in rows]  # type: ignore[operator]

    # --- tokens ---

    def create_token(self, project: str, name: str = "") -> str:
        """A new API token for `project`; only its hash is stored, so the caller must show it now."""
        import secrets

        token = "asid_" + secrets.token_urlsafe(32)
        with self._session.begin() as s:
            s.add(
                TokenRow(
                    id=uuid.uuid4().hex,
                    project=project,
                    name=name,
                    token_hash=token_hash(token),
                    created_at=_now(),
                )
            )
        return token

    def token_project(self, token: str) -> str | None:
        """The project of a valid token, else None."""
        with self._session() as s:
            return s.scalar(select(TokenRow.project).where(TokenRow.token_hash == token_hash(token)))

    def list_tokens(self) -> list[dict[str, Any]]:
        with self._session() as s:
            return [
                {"id": t.id, "project": t.project, "name": t.name, "created_at": _iso(t.created_at)}
                for t in s.scalars(select(TokenRow).order_by(TokenRow.created_at))
            ]

    def revoke_token(self, token_id: str) -> bool:
        with self._session.begin() as s:
            return _dml(s, delete(TokenRow).where(TokenRow.id == token_id)).rowcount > 0
