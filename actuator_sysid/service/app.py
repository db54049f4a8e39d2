"""The HTTP edge: `create_app(settings)` builds the FastAPI app. Routes validate, call the core, map errors.

Uploads are streamed to a temp file (size limit enforced while streaming), parsed in a parser process and
stored whole or not at all; fits go to the durable queue (jobs.py); every route but /healthz, /static and
the login form needs a token when auth is on (auth.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import FastAPI, File, Form, Query, Request, UploadFile
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..datasets.excitation import ExcitationSpec
from ..datasets.recording import DatasetError
from ..datasets.sources import parse_names
from ..export.formats import REGISTRY as EXPORT_REGISTRY
from ..fitting.api import FitRequest, FitRequestError, validate_request
from ..fitting.design import excitation_with_identifiability
from ..models.families import FAMILIES, NET_FAMILIES
from . import fleet, pages, robots
from .auth import COOKIE, AuthMiddleware, safe_next
from .db import DEFAULT_PROJECT, TERMINAL, ConflictError, NotFoundError, Repository
from .jobs import JobRunner
from .metrics import Metrics
from .parsing import ParserPool
from .report import render_report
from .settings import Settings
from .storage import Storage, UploadTooLargeError, new_id

log = logging.getLogger("actuator_sysid.service")

# by file extension, from each export's registration (export/formats.py)
MEDIA_TYPES = {"." + name.rsplit(".", 1)[-1]: f.media_type for name, f in EXPORT_REGISTRY.items()}
INTERNAL_ARTIFACTS = ("report_data.json",)  # stored for the report page, not offered as a download
_DEFAULT = FitRequest()
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'")
MAX_FIT_JOINTS = 64  # joints one fit request may name (fitting/api.py validate_request says the same)
MAX_UPLOAD_JOINT_NAMES = 256  # names an upload's joint_names field may give
__all__ = ["ConflictError", "PayloadTooLargeError", "create_app"]


_TEXT_EXPORTS = ("isaaclab.py", "isaaclab.json", "isaaclab.yaml", "newton.usda", "mjcf.xml", "randomization.json")


class PayloadTooLargeError(ValueError):
    """The request body is larger than max_upload_bytes."""


# --- request and response bodies (their examples feed /openapi.json) ---


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generations: int = Field(_DEFAULT.generations, description="CMA-ES generations per model family",
                             examples=[200])
    population: int = Field(_DEFAULT.population, description="CMA-ES population size", examples=[16])
    seconds: float | None = Field(None, description="wall-clock budget for the whole fit: the search stops with "
                                                    "its best so far and refines it briefly", examples=[60])


class FitCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"dataset_id": "3f2b9c0e5d6a4b1c8e7f6a5b4c3d2e1f", "joints": ["knee"], "models": ["dcmotor", "ideal_pd"],
         "budget": {"generations": 200, "population": 16}, "seed": 0, "device": "cpu"}]})
    dataset_id: str = Field(description="id from POST /api/v1/datasets")
    joints: list[str] | None = Field(None, max_length=MAX_FIT_JOINTS,
                                     description=f"joints to fit, each once (at most {MAX_FIT_JOINTS}); omit for "
                                                 "every joint")
    robot_id: str | None = Field(None, max_length=64, description="id from POST /api/v1/robots: fit every actuator "
                                 "through the robot's coupled dynamics; `robot` holds that fit's options and "
                                 "joints / models / budget are not used")
    robot: robots.RobotFitIn | None = Field(None, description="options of a robot fit (with robot_id)")
    models: list[str] = Field(default_factory=lambda: list(_DEFAULT.models), max_length=32,
                              description=f"model families, from {sorted(FAMILIES)}, or the actuator networks "
                                          "mlp and lstm")
    budget: Budget = Field(default_factory=Budget)
    seed: int = _DEFAULT.seed
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?)$",
                        description="where the fit computes; cuda needs a GPU worker (the Ray executor gives "
                                    "such a fit one GPU)")

    decimation: int = Field(_DEFAULT.decimation, description="physics steps per log sample (commands held)")
    effort_mode: str = Field(_DEFAULT.effort_mode, description="explicit, or implicit (Newton's implicit effort mode)")
    joint_terms: list[str] | None = Field(None, max_length=16, description="joint terms instead of each family's default, e.g. "
                                                            "armature, friction, dynamic_friction, viscous_friction, "
                                                            "encoder_offset")
    holdout: str | None = Field(None, max_length=200, description="KEY=VALUE: the recordings of segments whose metadata KEY "
                                                  "equals VALUE are the validation set, e.g. kp=20 (a nested key "
                                                  "as bam.kp, or by its unique name)", examples=["kp=20"])
    folds: int | None = Field(None, description="k-fold cross-validation over whole recordings (2 ≤ k ≤ 100); the final "
                                                "parameters come from a fit on every segment", examples=[5])
    folds_by: str | None = Field(None, max_length=200, description="leave-one-value-out cross-validation: one fold per value of "
                                                   "this metadata key (its recordings validate); the final "
                                                   "parameters come from a fit on every segment", examples=["kp"])
    networks: dict[str, Any] | None = Field(
        None, description="options of the mlp/lstm families: input_idx (physics steps back), hidden, activation, "
                          "hidden_size, num_layers, epochs, patience, lr, window, in_loop_epochs, mode "
                          "(auto | torque | in_the_loop)", examples=[{"input_idx": [0, 2, 4], "hidden": [32, 32]}])

    def to_request(self) -> FitRequest:
        return FitRequest(joints=self.joints, models=self.models, generations=self.budget.generations,
                          population=self.budget.population, seed=self.seed, device=self.device,
                          decimation=self.decimation, effort_mode=self.effort_mode, joint_terms=self.joint_terms,
                          holdout=self.holdout, folds=self.folds, folds_by=self.folds_by,
                          budget_s=self.budget.seconds,
                          networks=self.networks)


_DATASET_EXAMPLE: JsonDict = {
    "id": "3f2b9c0e5d6a4b1c8e7f6a5b4c3d2e1f", "project": "default", "name": "knee_bench.csv",
    "created_at": "2026-03-01T09:30:00+00:00", "joints": ["knee"], "segments": 6, "samples": 7200,
    "duration_s": 35.97, "rate_hz": 200.0, "source_format": "canonical-csv-long", "velocity_source": "measured",
    "has_effort": True, "warnings": [], "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "size": 412345, "actuator_model": "AK80-9", "serial": "SN-0042"}
_FIT_EXAMPLE: JsonDict = {
    "id": "a1b2c3d4e5f60718293a4b5c6d7e8f90", "project": "default", "dataset_id": _DATASET_EXAMPLE["id"],
    "status": "running", "progress": 0.42, "message": "dcmotor: generation 84/200", "attempts": 1,
    "request": {"joints": ["knee"], "models": ["dcmotor"], "generations": 200, "population": 16, "seed": 0},
    "created_at": "2026-03-01T09:31:00+00:00", "updated_at": "2026-03-01T09:31:20+00:00",
    "started_at": "2026-03-01T09:31:01+00:00", "finished_at": None, "artifacts": []}


class DatasetOut(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_DATASET_EXAMPLE]})
    id: str
    name: str
    created_at: str
    joints: list[str]
    segments: int
    warnings: list[str]


class FitOut(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_FIT_EXAMPLE]})
    id: str
    dataset_id: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    progress: float
    message: str


class FitAccepted(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"id": _FIT_EXAMPLE["id"], "status": "queued"}]})
    id: str
    status: str


class Problem(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"detail": "fit 'x' not found; GET /api/v1/fits "
                                                                         "lists the ids"}]})
    detail: str


_ERRORS: dict[int | str, dict[str, Any]] = {c: {"model": Problem} for c in (401, 404)}


# --- body size limit, counted while streaming ---


class BodyLimitMiddleware:
    """Answer 413 to a request body over `limit` bytes: at once for a declared Content-Length, else as soon
    as the streamed (chunked) body passes the limit; the body is never buffered here."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    def _too_large(self, size: int | None) -> JSONResponse:
        got = f"{size} bytes" if size is not None else "more than that"
        return JSONResponse({"detail": f"upload too large: {got}; the limit is {self.limit} bytes "
                                       "(ACTUATOR_SYSID_MAX_UPLOAD_BYTES)"}, status_code=413)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._too_large(int(length))(scope, receive, send)
            return
        total, over, started = 0, False, False

        async def counted() -> Message:
            nonlocal total, over
            if over:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                total += len(msg.get("body", b""))
                if total > self.limit:
                    over = True
                    return {"type": "http.disconnect"}  # the app stops reading; we answer 413 below
            return msg

        async def guarded(msg: Message) -> None:
            nonlocal started
            if over:
                return  # whatever the app says after a cut-off body is replaced by the 413
            started = started or msg["type"] == "http.response.start"
            await send(msg)

        await self.app(scope, counted, guarded)
        if over and not started:
            await self._too_large(None)(scope, receive, send)


# --- helpers ---


def _parse_metadata(text: str | None) -> dict | None:
    """The `metadata` form field: empty → None; otherwise it must be one JSON object."""
    if text is None or not text.strip():
        return None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"metadata: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}; "
                           "send one JSON object (the sidecar), or leave the field out") from None
    if not isinstance(meta, dict):
        raise DatasetError(f"metadata: must be a JSON object (the sidecar), got {type(meta).__name__}")
    return meta


def _joint_names(text: str | None) -> list[str] | None:
    """The upload's `joint_names` field: at most MAX_UPLOAD_JOINT_NAMES distinct names."""
    names = parse_names(text)
    if names is None:
        return None
    if len(names) > MAX_UPLOAD_JOINT_NAMES:
        raise DatasetError(f"joint_names gives {len(names)} names; the limit is {MAX_UPLOAD_JOINT_NAMES}")
    twice = sorted({n for i, n in enumerate(names) if n in names[:i]})
    if twice:
        raise DatasetError(f"joint_names lists {', '.join(map(repr, twice))} more than once; name each joint once")
    return names


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def display_name(filename: str | None) -> str:
    """The upload's name for display only: its last path component, without control characters."""
    name = _CONTROL.sub("", re.split(r"[/\\]", filename or "")[-1]).strip()
    return (name or "upload")[-255:]


def _dataset_out(d: dict) -> dict[str, Any]:
    return {"id": d["id"], "project": d["project"], "name": d["name"], "created_at": d["created_at"],
            **d["summary"], "sha256": d["sha256"], "size": d["size"], "actuator_model": d["actuator_model"],
            "serial": d["serial"]}


def _fit_out(f: dict, artifacts: dict[str, dict] | None = None) -> dict[str, Any]:
    """The public shape of a fit; result/error only when present."""
    out = {k: f[k] for k in ("id", "project", "dataset_id", "status", "progress", "message", "request",
                             "created_at", "updated_at", "started_at", "finished_at", "attempts", "executor", "worker")}
    for k in ("result", "error"):
        if f.get(k) is not None:
            out[k] = f[k]
    if artifacts is not None:
        out["artifacts"] = [{"name": n, **a} for n, a in artifacts.items()]
    return out


def _project(request: Request) -> str | None:
    """The caller's project for reads: None (every project) when auth is off and no token was sent."""
    return request.state.project


def _owner(request: Request) -> str:
    """The project new datasets and fits belong to."""
    return request.state.project or DEFAULT_PROJECT


def _sse(event: str, data: dict, event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, allow_nan=False)}\n\n"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service app: JSON API under /api/v1, HTML pages, Plotly from /static, health and metrics."""
    settings = settings or Settings()
    storage = Storage(settings.data_dir)
    repo = Repository(settings.database_url)
    runner = JobRunner(settings, repo)
    parser = ParserPool(settings.parse_workers)
    robot_loader = robots.RobotLoader(1)
    metrics = Metrics(repo)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(storage.collect_garbage, repo.referenced_blobs())
        await run_in_threadpool(runner.start)
        log.info("serving", extra={"executor": settings.executor, "auth_required": settings.auth_required,
                                   "database": repo.engine.url.render_as_string(hide_password=True),
                                   "data_dir": str(settings.data_dir)})
        try:
            yield
        finally:
            runner.stop()
            parser.shutdown()
            robot_loader.shutdown()
            repo.close()

    app = FastAPI(
        title="actuator-sysid", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
        description="Fit actuator models from joint logs and export them to Isaac Lab. Every route except "
                    "/healthz and /static needs `Authorization: Bearer <token>` when the server listens beyond "
                    "loopback (tokens: `actuator-sysid token create --project NAME`).")
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_upload_bytes)
    app.add_middleware(AuthMiddleware, repo=repo, required=settings.auth_required)
    app.add_middleware(metrics.middleware)  # type: ignore[arg-type]
    app.state.settings, app.state.repo, app.state.storage, app.state.runner = settings, repo, storage, runner
    app.state.robot_loader = robot_loader
    app.include_router(robots.router)  # POST/GET /api/v1/robots, the robot page (service/robots.py)

    # --- errors, mapped once ---

    def _handler(code: int) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
        async def handle(_request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=code)
        return handle

    for exc_type, code in ((DatasetError, 422), (FitRequestError, 422),
                           (ConflictError, 409), (PayloadTooLargeError, 413), (UploadTooLargeError, 413)):
        app.add_exception_handler(exc_type, _handler(code))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
                         for e in errors)
        if pages.wants_html(request.url.path, request.headers.get("accept", "")):  # e.g. /compare without b
            return HTMLResponse(pages.render_error(422, text), status_code=422)
        return JSONResponse({"detail": text, "errors": jsonable_encoder(errors)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if exc.status_code != 404 or exc.detail != "Not Found" else "no such page or route"
        if pages.wants_html(request.url.path, request.headers.get("accept", "")):
            return HTMLResponse(pages.render_error(exc.status_code, str(detail)), status_code=exc.status_code,
                                headers=exc.headers)
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(NotFoundError)
    async def _not_found(request: Request, exc: Exception) -> Response:
        """A missing id: a page for a browser on a page route, a JSON problem for everything else."""
        if pages.wants_html(request.url.path, request.headers.get("accept", "")):
            return HTMLResponse(pages.render_error(404, str(exc)), status_code=404)
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse({"detail": f"internal server error ({type(exc).__name__}); the server log has "
                                       "details"}, status_code=500)

    # --- datasets ---
    # The list and status routes that dashboards poll are `async`: each is one or two indexed reads, cheaper
    # on the event loop than the two thread hand-offs (handler, response check) a sync route costs.

    @app.post("/api/v1/datasets", status_code=201, tags=["datasets"],
              responses={201: {"model": DatasetOut}, 413: {"model": Problem}, 422: {"model": Problem}, **_ERRORS})
    async def upload_dataset(
        request: Request,
        file: Annotated[UploadFile, File(description="joint log in any supported format (or a zip of several)")],
        metadata: Annotated[str | None, Form(description="sidecar JSON object (loads, gains, units; "
                                                         "actuator_model and serial for the fleet view)")] = None,
        fmt: Annotated[str | None, Form(alias="format", description="csv | parquet | bam | pace | mcap | rosbag | "
                                        "actuator-net | actuator-net-pickle | lerobot | isaaclab-hdf5; empty to "
                                        "detect")] = None,
        joint_names: Annotated[str | None, Form(description="comma-separated joint names, for logs without "
                                                            "them (PACE, Float64MultiArray, LeRobot, HDF5)")] = None,
        robot_id: Annotated[str | None, Form(max_length=64, description="id from POST /api/v1/robots: a log "
                                             "without joint names is read in that model's actuated-joint order")] = None,
    ) -> dict[str, Any]:
        """Parse and store a joint log; nothing is stored unless the whole file parses."""
        name = display_name(file.filename)
        sidecar = _parse_metadata(metadata)
        names = _joint_names(joint_names)
        robot = await run_in_threadpool(repo.get_robot, robot_id, _project(request)) if robot_id else None
        tmp, (sha, size) = await run_in_threadpool(storage.receive, file.file, settings.max_upload_bytes)
        out_dir = storage.temp_path(".rec")
        try:
            if size == 0:
                raise DatasetError(f"{name}: the uploaded file is empty; choose a file with a header and rows")
            parse = partial(parser.parse, tmp, name, sidecar, fmt or None, out_dir, any_format=True)
            parsed = await (robots.parse_for_robot(parse, robot) if robot and names is None
                            else parse(joint_names=names))
            arts = await run_in_threadpool(storage.put_folder, out_dir)
            arts["original"] = await run_in_threadpool(storage.put_file, tmp, sha)
            row = await run_in_threadpool(lambda: repo.create_dataset(
                new_id(), name, parsed["summary"], arts, project=_owner(request), metadata=parsed["metadata"]))
        finally:
            tmp.unlink(missing_ok=True)
            shutil.rmtree(out_dir, ignore_errors=True)
        return _dataset_out(row)

    @app.get("/api/v1/datasets", tags=["datasets"], responses={200: {"model": list[DatasetOut]}, **_ERRORS})
    async def list_datasets(request: Request, actuator_model: str | None = None, serial: str | None = None,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> list[dict[str, Any]]:
        """Datasets newest first; filter by the sidecar's actuator_model / serial."""
        return [_dataset_out(d) for d in repo.list_datasets(_project(request), actuator_model, serial, limit)]

    @app.get("/api/v1/datasets/{dataset_id}", tags=["datasets"], responses={200: {"model": DatasetOut}, **_ERRORS})
    async def get_dataset(request: Request, dataset_id: str) -> dict[str, Any]:
        return _dataset_out(repo.get_dataset(dataset_id, _project(request)))

    @app.get("/api/v1/datasets/{dataset_id}/original", tags=["datasets"], response_class=FileResponse,
             responses=_ERRORS)
    def download_original(request: Request, dataset_id: str) -> FileResponse:
        """The uploaded file as it was received (its sha256 is the dataset's `sha256`)."""
        d = repo.get_dataset(dataset_id, _project(request))
        path = storage.blob_path(d["sha256"])
        if not path.is_file():
            raise NotFoundError(f"the uploaded file of dataset {dataset_id} is missing from the store")
        return FileResponse(path, media_type="application/octet-stream",
                            filename=f"dataset-{dataset_id[:8]}-{d['name']}")

    @app.post("/api/v1/excitations", tags=["datasets"], responses={422: {"model": Problem}, **_ERRORS})
    def create_excitation(body: ExcitationSpec) -> dict[str, Any]:
        """Design an excitation within the bounds: canonical CSV text, its JSON sidecar, and the predicted
        identifiability of each requested family's parameters for the stated load, nominal values and noise."""
        text, side, pred = excitation_with_identifiability(body)
        return {"csv": text, "sidecar": side, "identifiability": pred}

    @app.delete("/api/v1/datasets/{dataset_id}", tags=["datasets"], responses={409: {"model": Problem}, **_ERRORS})
    def delete_dataset(request: Request, dataset_id: str, force: bool = False) -> dict[str, Any]:
        """Delete a dataset and its fits. Refused (409, naming them) while fits of it are queued or running,
        unless force=true, which cancels them."""
        shas = {a["sha256"] for a in repo.artifacts("dataset", dataset_id).values()}
        fit_ids = [f["id"] for f in repo.list_fits(dataset_id, _project(request))]
        for fid in fit_ids:
            shas |= {a["sha256"] for a in repo.artifacts("fit", fid).values()}
        deleted = repo.delete_dataset(dataset_id, _project(request), force=force)
        storage_removed = _discard(shas)
        return {"deleted": dataset_id, "fits_deleted": deleted, "files_removed": storage_removed}

    def _discard(shas: set[str]) -> int:
        """Remove blobs no artifact refers to any more."""
        gone = shas - repo.referenced_blobs()
        for sha in gone:
            storage.blob_path(sha).unlink(missing_ok=True)
        return len(gone)

    # --- fits ---

    @app.post("/api/v1/fits", status_code=202, tags=["fits"],
              responses={202: {"model": FitAccepted}, 409: {"model": Problem}, 422: {"model": Problem}, **_ERRORS})
    def create_fit(request: Request, body: FitCreate) -> dict[str, Any]:
        """Check the request against the dataset, then queue it (the durable queue in the database)."""
        if body.robot_id is not None or body.robot is not None:  # a whole-robot fit (issue 16)
            return robots.queue_robot_fit(repo, storage, runner, settings, body.dataset_id, body.robot_id,
                                          body.robot, _owner(request), _project(request))
        repo.get_dataset(body.dataset_id, _project(request))
        req = body.to_request()
        validate_request(storage.load_recording(repo.artifacts("dataset", body.dataset_id)), req)
        fit = repo.create_fit(new_id(), body.dataset_id, asdict(req), project=_owner(request))
        runner.submit(fit["id"])
        return {"id": fit["id"], "status": fit["status"]}

    @app.get("/api/v1/fits", tags=["fits"], responses={200: {"model": list[FitOut]}, **_ERRORS})
    async def list_fits(request: Request, dataset_id: str | None = None,
                  status: Literal["queued", "running", "succeeded", "failed", "cancelled"] | None = None,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> list[dict[str, Any]]:
        """Fits newest first, without results."""
        return [_fit_out(f) for f in repo.list_fits(dataset_id, _project(request), status, limit)]

    @app.get("/api/v1/fits/{fit_id}", tags=["fits"], responses={200: {"model": FitOut}, **_ERRORS})
    async def get_fit(request: Request, fit_id: str) -> dict[str, Any]:
        """One fit with its result (when succeeded), error (when failed) and stored artifacts."""
        return _fit_out(repo.get_fit(fit_id, _project(request)), repo.artifacts("fit", fit_id))

    @app.post("/api/v1/fits/{fit_id}/cancel", status_code=202, tags=["fits"],
              responses={202: {"model": FitOut}, 409: {"model": Problem}, **_ERRORS})
    def cancel_fit(request: Request, fit_id: str) -> dict[str, Any]:
        """Cancel a queued fit at once, a running one at its worker's next progress report (killed after 10 s)."""
        out = _fit_out(repo.request_cancel(fit_id, _project(request)))
        runner.submit()
        return out

    @app.post("/api/v1/fits/{fit_id}/retry", status_code=202, tags=["fits"],
              responses={202: {"model": FitOut}, 409: {"model": Problem}, **_ERRORS})
    def retry_fit(request: Request, fit_id: str) -> dict[str, Any]:
        """Queue a failed or cancelled fit again, with the same request."""
        out = _fit_out(repo.retry_fit(fit_id, _project(request)))
        runner.submit(fit_id)
        return out

    @app.delete("/api/v1/fits/{fit_id}", tags=["fits"], responses={409: {"model": Problem}, **_ERRORS})
    def delete_fit(request: Request, fit_id: str) -> dict[str, Any]:
        """Delete a finished fit and its files (cancel a queued or running one first)."""
        shas = {a["sha256"] for a in repo.artifacts("fit", fit_id).values()}
        repo.delete_fit(fit_id, _project(request))
        return {"deleted": fit_id, "files_removed": _discard(shas)}

    @app.get("/api/v1/fits/{fit_id}/events", tags=["fits"], response_class=StreamingResponse, responses={
        200: {"content": {"text/event-stream": {"example": 'event: progress\ndata: {"status": "running", '
                                                           '"progress": 0.42, "message": "dcmotor: generation 84/200"}\n\n'}},
              "description": "Server-Sent Events: `progress` (status, progress, message) on every change, "
                             "`log` (id, ts, level, message) per log line, then one `end` (status, error) "
                             "when the fit is succeeded, failed or cancelled."}, **_ERRORS})
    async def fit_events(request: Request, fit_id: str) -> StreamingResponse:
        """Stream a fit's progress and log lines until it reaches a terminal state (reconnect with Last-Event-ID)."""
        project = _project(request)
        await run_in_threadpool(repo.get_fit, fit_id, project)  # 404 before the stream starts
        last_id = request.headers.get("last-event-id", "0")
        after = int(last_id) if last_id.isdigit() else 0

        async def stream() -> AsyncIterator[str]:
            nonlocal after
            last_state: tuple | None = None
            idle = 0.0
            yield "retry: 2000\n\n"
            while True:
                fit = await run_in_threadpool(repo.get_fit, fit_id, project)
                for ev in await run_in_threadpool(repo.events_since, fit_id, after):
                    after = ev["id"]
                    yield _sse("log", ev, ev["id"])
                state = (fit["status"], round(fit["progress"], 4), fit["message"])
                if state != last_state:
                    last_state, idle = state, 0.0
                    yield _sse("progress", {"status": fit["status"], "progress": fit["progress"],
                                            "message": fit["message"], "attempts": fit["attempts"]})
                if fit["status"] in TERMINAL:
                    yield _sse("end", {"status": fit["status"], "error": fit["error"]})
                    return
                if await request.is_disconnected():
                    return
                await asyncio.sleep(0.25)
                idle += 0.25
                if idle >= 15:
                    idle = 0.0
                    yield ": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def _exports(fit_id: str) -> dict[str, dict]:
        return {n: a for n, a in repo.artifacts("fit", fit_id).items() if n not in INTERNAL_ARTIFACTS}

    @app.get("/api/v1/fits/{fit_id}/validation", tags=["fits"], responses={409: {"model": Problem}, **_ERRORS})
    def fit_validation(request: Request, fit_id: str) -> dict[str, Any]:
        """The exports' validation, run before they were offered: NEWTON.DJ.001 and export findings (code,
        severity, where, message) and each export replayed through its consumer next to our own rollout."""
        fit = repo.get_fit(fit_id, _project(request))
        if fit["status"] != "succeeded":
            raise ConflictError(f"fit {fit_id} is {fit['status']}; exports are validated once it has succeeded")
        if fit["request"].get("kind") == robots.ROBOT_FIT:  # its exports' notes and replays are in its result
            return robots.export_validation(fit)
        validation = _stored_json(fit, "validation.json")
        if validation is None:
            raise NotFoundError(f"fit {fit_id} has no stored export validation")
        return validation

    def _rendered(fit: dict, name: str, given: list[str], rename: list[str], mode: str) -> bytes:
        """A text export rendered again with the user's values (`set`), joint names (`rename`) and handling of
        unidentified parameters (`unidentified`: omit | comment), from the stored result and bench loads."""
        from ..export import ExportError, render_format
        from ..export.common import parse_assignments, parse_rename

        loads = (_stored_json(fit, "validation.json") or {}).get("bench") or None
        try:
            text = render_format(fit["result"], None, name, loads=loads, unidentified=mode,
                                 given=parse_assignments(given), rename=parse_rename(rename))
        except ExportError as e:
            raise FitRequestError(str(e)) from None
        return text.encode()

    def _all_zip(request: Request, fit: dict, exports: dict[str, dict]) -> bytes:
        """A zip of every stored export of a fit and its report as one standalone report.html."""
        import io
        import zipfile

        ctx, plots = _fit_context(fit["id"], _project(request))
        if ctx["request"].get("kind") == robots.ROBOT_FIT:
            html = robots.render_robot_fit(ctx, plots, sorted(exports), repo, _project(request), standalone=True)
        else:
            html = render_report(ctx, ctx.get("result"), plots, standalone=True,
                                 validation=_stored_json(fit, "validation.json"))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for n, a in sorted(exports.items()):
                z.writestr(n, storage.read_bytes(a["sha256"]))
            z.writestr("report.html", html)
        return buf.getvalue()

    @app.get("/api/v1/fits/{fit_id}/export/{name}", tags=["fits"], response_class=Response,
             responses={409: {"model": Problem}, **_ERRORS})
    def export_fit(request: Request, fit_id: str, name: str) -> Response:
        """A stored export of a succeeded fit (isaaclab.py, isaaclab.json, fit.json), as a download; all.zip
        holds every export and a standalone report.html. Query `set=PARAM=VALUE` (repeatable), `rename=A=B` or
        `unidentified=comment` render a text export again with given values, joint names or flagged estimates."""
        fit = repo.get_fit(fit_id, _project(request))
        if fit["status"] != "succeeded":
            raise ConflictError(f"fit {fit_id} is {fit['status']}; exports exist once it has succeeded")
        exports = _exports(fit_id)
        if name == "all.zip":  # every export plus the standalone report (issue 15)
            return Response(_all_zip(request, fit, exports), media_type="application/zip", headers={
                "Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}.zip"'})
        if name not in exports:
            raise NotFoundError(f"unknown export format {name!r}; available: {sorted(exports)} or all.zip")
        q = request.query_params
        if (q.getlist("set") or q.getlist("rename") or q.get("unidentified")) and name in _TEXT_EXPORTS:
            robots.refuse_rerender(fit)
            data = _rendered(fit, name, q.getlist("set"), q.getlist("rename"), q.get("unidentified") or "omit")
            return Response(data, media_type=MEDIA_TYPES.get("." + name.rsplit(".", 1)[-1], "text/plain"),
                            headers={"Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}-{name}"'})
        data = storage.read_bytes(exports[name]["sha256"])
        media = MEDIA_TYPES.get("." + name.rsplit(".", 1)[-1], "application/octet-stream")
        return Response(data, media_type=media, headers={
            "Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}-{name}"',
            "X-Content-SHA256": exports[name]["sha256"]})

    @app.get("/api/v1/fleet/{actuator_model}", tags=["fleet"], responses=_ERRORS)
    def fleet_api(request: Request, actuator_model: str) -> dict[str, Any]:
        """Fitted parameters of every succeeded fit of one actuator model over time, with drift warnings."""
        return fleet.fleet_summary(actuator_model, repo.fleet_fits(actuator_model, _project(request)))

    # --- operations ---

    @app.get("/healthz", tags=["operations"], responses={503: {"model": Problem}})
    async def healthz() -> Response:
        """Liveness and database reachability; no token needed."""
        try:
            repo.ping()
        except Exception as e:
            return JSONResponse({"status": "error", "detail": f"database unreachable: {type(e).__name__}"},
                                status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics", tags=["operations"], response_class=Response, responses={200: {"content": {
        "text/plain": {"example": 'actuator_sysid_fits{status="running"} 1.0\nactuator_sysid_queue_depth 0.0\n'}}},
        **_ERRORS})
    def metrics_route() -> Response:
        """Prometheus text: requests by route/status, fits by status, queue depth, fit duration histogram."""
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    # --- pages ---

    def _families() -> list[str]:
        """What the fit form offers: every parametric family, then the actuator networks."""
        return [*sorted(FAMILIES), *NET_FAMILIES]

    def _defaults() -> dict[str, Any]:
        return {"generations": _DEFAULT.generations, "population": _DEFAULT.population, "seed": _DEFAULT.seed}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request) -> str:
        p = _project(request)
        return pages.render_index(repo.list_datasets(p, limit=200), repo.list_fits(project=p, limit=200),
                                  _families(), _defaults(), repo.fit_counts(p), repo.actuator_models(p))

    @app.get("/datasets/{dataset_id}", response_class=HTMLResponse, include_in_schema=False)
    def dataset_page(request: Request, dataset_id: str) -> str:
        p = _project(request)
        d = repo.get_dataset(dataset_id, p)
        rec = storage.load_recording(repo.artifacts("dataset", dataset_id))
        return pages.render_dataset(d, rec, repo.list_fits(dataset_id, p), _families(), _defaults())

    def _fit_context(fit_id: str, project: str | None) -> tuple[dict, dict | None]:
        fit = repo.get_fit(fit_id, project)
        try:
            ds = repo.get_dataset(fit["dataset_id"])
            fit["dataset_name"], fit["actuator_model"], fit["serial"] = ds["name"], ds["actuator_model"], ds["serial"]
        except NotFoundError:
            pass
        plots = _stored_json(fit, "report_data.json")  # None: the tables still render, the page says so
        return fit, plots

    def _stored_json(fit: dict, name: str) -> dict | None:
        """A JSON artifact of a succeeded fit, parsed; None when the fit has none (older fits, other status)."""
        if fit["status"] != "succeeded":
            return None
        arts = repo.artifacts("fit", fit["id"])
        if name not in arts:
            return None
        try:
            return json.loads(storage.read_bytes(arts[name]["sha256"]))
        except NotFoundError:
            return None

    @app.get("/fits/{fit_id}", response_class=HTMLResponse, include_in_schema=False)
    def report_page(request: Request, fit_id: str) -> str:
        p = _project(request)
        fit, plots = _fit_context(fit_id, p)
        if fit["request"].get("kind") == robots.ROBOT_FIT:
            return robots.render_robot_fit(fit, plots, sorted(_exports(fit_id)), repo, p)
        warnings: list[str] = []
        if fit["status"] == "succeeded" and fit.get("actuator_model"):
            warnings = fleet.warnings_for(fit_id, repo.fleet_fits(fit["actuator_model"], p))
        return render_report(fit, fit.get("result"), plots, exports=sorted(_exports(fit_id)),
                             fleet_warnings=warnings, validation=_stored_json(fit, "validation.json"))

    @app.get("/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(request: Request, a: str, b: str) -> str:
        p = _project(request)
        return pages.render_compare(_fit_context(a, p), _fit_context(b, p))

    @app.get("/fleet", response_class=HTMLResponse, include_in_schema=False)
    def fleet_page(request: Request, actuator_model: str | None = None) -> str:
        p = _project(request)
        summary = fleet.fleet_summary(actuator_model, repo.fleet_fits(actuator_model, p)) if actuator_model else None
        return pages.render_fleet(repo.actuator_models(p), summary)

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form(next: str | None = None) -> str:
        return pages.render_login(safe_next(next))

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = await request.form()
        token, target = str(form.get("token") or "").strip(), safe_next(str(form.get("next") or "/"))
        if not token or await run_in_threadpool(repo.token_project, token) is None:
            return HTMLResponse(pages.render_login(target, "That token is not valid (or was revoked)."),
                                status_code=401)
        resp = RedirectResponse(target, status_code=303)
        resp.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https",
                        max_age=30 * 24 * 3600)
        return resp

    @app.post("/logout", include_in_schema=False)
    def logout() -> Response:
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(COOKIE)
        return resp

    # --- API docs from the installed fastapi-offline package's Swagger UI and ReDoc files (no CDN) ---

    def _local_only(page: HTMLResponse) -> HTMLResponse:
        """The docs pages may load nothing from elsewhere: ReDoc's footer links a logo from its CDN."""
        page.headers["Content-Security-Policy"] = DOCS_CSP
        return page

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return _local_only(get_swagger_ui_html(openapi_url="/openapi.json", title="actuator-sysid · API docs",
                                   swagger_js_url="/static/docs/swagger-ui-bundle.js",
                                   swagger_css_url="/static/docs/swagger-ui.css",
                                   swagger_favicon_url="/static/docs/favicon.png",
                                   oauth2_redirect_url="/docs/oauth2-redirect"))

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _local_only(get_redoc_html(openapi_url="/openapi.json", title="actuator-sysid · API reference",
                                          redoc_js_url="/static/docs/redoc.standalone.js",
                                          redoc_favicon_url="/static/docs/favicon.png", with_google_fonts=False))

    @app.get("/static/docs/{name}", include_in_schema=False)
    def docs_asset(name: str) -> FileResponse:
        path = pages.docs_asset_path(name)
        if path is None:
            raise NotFoundError(f"no docs asset {name!r}")
        return FileResponse(path, headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        return FileResponse(pages.plotly_js_path(), media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    return app
