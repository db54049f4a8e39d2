"""The HTTP edge: `create_app(settings)` builds the FastAPI app. Routes validate, call the core, map errors.

Uploads are parsed completely before anything is stored; fits are queued to worker processes (jobs.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..datasets.canonical import read_table
from ..datasets.recording import DatasetError
from ..fitting.api import FitRequest, FitRequestError, validate_request
from ..models.families import FAMILIES
from .db import NotFoundError, Repository
from .jobs import JobRunner
from .pages import plotly_js_path, render_index
from .report import render_report
from .settings import Settings
from .storage import Storage, json_safe, new_id

log = logging.getLogger("actuator_sysid.service")

EXPORTS = {"isaaclab.py": "text/x-python", "isaaclab.json": "application/json"}
_DEFAULT = FitRequest()


class ConflictError(RuntimeError):
    """The resource exists but is not in a state that allows the request (e.g. export of an unfinished fit)."""


class PayloadTooLargeError(ValueError):
    """The request body is larger than max_upload_bytes."""


# --- request bodies ---


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generations: int = Field(_DEFAULT.generations, description="CMA-ES generations per model family")
    population: int = Field(_DEFAULT.population, description="CMA-ES population size")


class FitCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dataset_id: str
    joints: list[str] | None = Field(None, description="joints to fit; omit for every joint")
    models: list[str] = Field(default_factory=lambda: list(_DEFAULT.models),
                              description=f"model families, from {sorted(FAMILIES)}")
    budget: Budget = Field(default_factory=Budget)
    seed: int = _DEFAULT.seed

    def to_request(self) -> FitRequest:
        return FitRequest(joints=self.joints, models=self.models, generations=self.budget.generations,
                          population=self.budget.population, seed=self.seed)


# --- body size limit ---


class BodyLimitMiddleware:
    """Answer 413 to a request body over `limit` bytes before the app reads it (chunked bodies are counted)."""

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
        if length is not None:
            if length.isdigit() and int(length) > self.limit:
                await self._too_large(int(length))(scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server enforces the declared length
            return
        # no Content-Length (chunked): buffer up to the limit, then replay to the app
        chunks: list[Message] = []
        total = 0
        while True:
            msg = await receive()
            chunks.append(msg)
            total += len(msg.get("body", b""))
            if total > self.limit:
                await self._too_large(None)(scope, receive, send)
                return
            if msg["type"] != "http.request" or not msg.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)


# --- the app ---


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


def _dataset_out(d: dict) -> dict[str, Any]:
    return {"id": d["id"], "name": d["name"], "created_at": d["created_at"], **d["summary"]}


def _fit_out(f: dict) -> dict[str, Any]:
    """The public shape of a fit; result/error only when present."""
    out = {k: f[k] for k in ("id", "dataset_id", "status", "progress", "message", "request", "created_at",
                             "updated_at")}
    for k in ("result", "error"):
        if f.get(k) is not None:
            out[k] = f[k]
    return out


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service app: JSON API under /api/v1, HTML pages at / and /fits/{id}, Plotly from /static."""
    settings = settings or Settings()
    storage = Storage(settings.data_dir)
    repo = Repository(settings.database_url)
    runner = JobRunner(settings, repo)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        runner.start()
        try:
            yield
        finally:
            runner.stop()
            repo.close()

    app = FastAPI(title="actuator-sysid", version="0.1.0", lifespan=lifespan,
                  description="Fit actuator models from joint logs and export them to Isaac Lab.")
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_upload_bytes)
    app.state.settings, app.state.repo, app.state.storage, app.state.runner = settings, repo, storage, runner

    # --- errors, mapped once ---

    def _handler(code: int) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
        async def handle(_request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=code)
        return handle

    for exc_type, code in ((DatasetError, 422), (FitRequestError, 422), (NotFoundError, 404),
                           (ConflictError, 409), (PayloadTooLargeError, 413)):
        app.add_exception_handler(exc_type, _handler(code))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
                         for e in errors)
        return JSONResponse({"detail": text, "errors": jsonable_encoder(errors)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if exc.status_code != 404 or exc.detail != "Not Found" else "no such page or route"
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse({"detail": f"internal server error ({type(exc).__name__}); the server log has "
                                       "details"}, status_code=500)

    # --- datasets ---

    @app.post("/api/v1/datasets", status_code=201, tags=["datasets"])
    async def upload_dataset(
        file: Annotated[UploadFile, File(description="canonical CSV or Parquet joint log")],
        metadata: Annotated[str | None, Form(description="sidecar JSON object (loads, gains, units)")] = None,
        fmt: Annotated[str | None, Form(alias="format", description="csv | parquet; empty to detect")] = None,
    ) -> dict[str, Any]:
        """Parse and store a joint log; nothing is stored unless the whole file parses."""
        data = await file.read()
        if len(data) > settings.max_upload_bytes:
            raise PayloadTooLargeError(f"upload too large: {len(data)} bytes; the limit is "
                                       f"{settings.max_upload_bytes} bytes (ACTUATOR_SYSID_MAX_UPLOAD_BYTES)")
        name = (file.filename or "upload")[-255:]
        if not data:
            raise DatasetError(f"{name}: the uploaded file is empty; choose a file with a header and rows")
        rec = await run_in_threadpool(read_table, data, name, _parse_metadata(metadata), fmt or None)
        dataset_id = new_id()
        path = await run_in_threadpool(storage.save_dataset, dataset_id, rec, data)
        try:
            row = repo.create_dataset(dataset_id, name, json_safe(rec.summary()), path)
        except Exception:
            storage.remove_dataset(dataset_id)
            raise
        return _dataset_out(row)

    @app.get("/api/v1/datasets", tags=["datasets"])
    def list_datasets() -> list[dict[str, Any]]:
        return [_dataset_out(d) for d in repo.list_datasets()]

    @app.get("/api/v1/datasets/{dataset_id}", tags=["datasets"])
    def get_dataset(dataset_id: str) -> dict[str, Any]:
        return _dataset_out(repo.get_dataset(dataset_id))

    # --- fits ---

    @app.post("/api/v1/fits", status_code=202, tags=["fits"])
    def create_fit(body: FitCreate) -> dict[str, Any]:
        """Check the request against the dataset, then queue it for a worker process."""
        repo.get_dataset(body.dataset_id)
        req = body.to_request()
        validate_request(storage.load_recording(body.dataset_id), req)
        fit = repo.create_fit(new_id(), body.dataset_id, asdict(req))
        runner.submit(fit["id"])
        return {"id": fit["id"], "status": fit["status"]}

    @app.get("/api/v1/fits", tags=["fits"])
    def list_fits(dataset_id: str | None = None) -> list[dict[str, Any]]:
        return [_fit_out(f) for f in repo.list_fits(dataset_id)]

    @app.get("/api/v1/fits/{fit_id}", tags=["fits"])
    def get_fit(fit_id: str) -> dict[str, Any]:
        return _fit_out(repo.get_fit(fit_id))

    @app.get("/api/v1/fits/{fit_id}/export/{name}", tags=["fits"])
    def export_fit(fit_id: str, name: str) -> Response:
        """A stored export of a succeeded fit, as a download."""
        fit = repo.get_fit(fit_id)
        if name not in EXPORTS:
            raise NotFoundError(f"unknown export format {name!r}; available: {sorted(EXPORTS)}")
        if fit["status"] != "succeeded":
            raise ConflictError(f"fit {fit_id} is {fit['status']}; exports exist once it has succeeded")
        return Response(storage.read_fit_file(fit_id, name), media_type=EXPORTS[name], headers={
            "Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}-{name}"'})

    # --- pages ---

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> str:
        defaults = {"generations": _DEFAULT.generations, "population": _DEFAULT.population, "seed": _DEFAULT.seed}
        return render_index(repo.list_datasets(), repo.list_fits(), sorted(FAMILIES), defaults)

    @app.get("/fits/{fit_id}", response_class=HTMLResponse, include_in_schema=False)
    def report_page(fit_id: str) -> str:
        fit = repo.get_fit(fit_id)
        try:
            fit["dataset_name"] = repo.get_dataset(fit["dataset_id"])["name"]
        except NotFoundError:
            pass
        plots = None
        if fit["status"] == "succeeded":
            try:
                plots = json.loads(storage.read_fit_file(fit_id, "report_data.json"))
            except NotFoundError:
                pass  # the tables still render; the page says there is no plot data
        return render_report(fit, fit.get("result"), plots)

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        return FileResponse(plotly_js_path(), media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
