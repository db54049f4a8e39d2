"""The HTTP edge: `create_app(settings)` builds the FastAPI app from its services, middleware, error
handlers and routers.

The routes live in service/routes/ (one APIRouter per area); they get the services
(service/deps.py) as dependencies and their bodies from service/schemas.py. Uploads are streamed to a temp
file (size limit enforced while streaming), parsed in a parser process and stored whole or not at all; fits
go to the durable queue (jobs.py); every route but /healthz, /static and the login form needs a token when
auth is on (auth.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..datasets.names import clip_text
from ..datasets.recording import DatasetError
from ..fitting.fit import FitRequestError
from . import pages
from .auth import AuthMiddleware
from .db import ConflictError, NotFoundError
from .deps import Services
from .parsing import ParserBusyError
from .routes import ROBOTS, ROUTERS
from .settings import Settings
from .storage import StorageFullError, UploadTooLargeError, out_of_space
from .templating import SITE

log = logging.getLogger("actuator_sysid.service")

__all__ = ["ConflictError", "PayloadTooLargeError", "create_app"]


class PayloadTooLargeError(ValueError):
    """The request body is larger than max_upload_bytes."""


# --- body size limit, counted while streaming ---


class BodyLimitMiddleware:
    """Answer 413 to a request body over `limit` bytes: at once for a declared Content-Length, else as soon
    as the streamed (chunked) body passes the limit; the body is never buffered here."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    def _too_large(self, size: int | None) -> JSONResponse:
        got = f"{size} bytes" if size is not None else "more than that"
        return JSONResponse(
            {
                "detail": f"upload too large: {got}; the limit is {self.limit} bytes "
                "(ACTUATOR_SYSID_MAX_UPLOAD_BYTES)"
            },
            status_code=413,
        )

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


# --- errors, mapped once ---


MAX_DETAIL_CHARS = 4000
"""Characters of an error message a response carries: messages quote input in short pieces, and this is the
backstop, so no answer echoes a whole upload or body."""


def _detail(exc: object) -> str:
    return clip_text(exc, MAX_DETAIL_CHARS)


def _handler(code: int) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        headers = {"Retry-After": "30"} if code == 503 else None
        return JSONResponse({"detail": _detail(exc)}, status_code=code, headers=headers)

    return handle


async def _invalid(request: Request, exc: RequestValidationError) -> Response:
    """A request that fails validation: every error in `detail`, a page for a browser on a page route."""
    errors = exc.errors()
    text = _detail(
        "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}" for e in errors
        )
    )
    errors = [{k: v for k, v in e.items() if k != "input"} for e in errors[:50]]  # never echo the body back
    if pages.wants_html(request.url.path, request.headers.get("accept", "")):  # e.g. /compare without b
        return HTMLResponse(pages.render_error(422, text), status_code=422)
    return JSONResponse({"detail": text, "errors": jsonable_encoder(errors)}, status_code=422)


async def _http(request: Request, exc: StarletteHTTPException) -> Response:
    """Starlette's HTTP errors (404 of an unknown route, 405, ...): a page or a JSON problem."""
    detail = exc.detail if exc.status_code != 404 or exc.detail != "Not Found" else "no such page or route"
    if pages.wants_html(request.url.path, request.headers.get("accept", "")):
        return HTMLResponse(
            pages.render_error(exc.status_code, str(detail)), status_code=exc.status_code, headers=exc.headers
        )
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)


async def _not_found(request: Request, exc: Exception) -> Response:
    """A missing id: a page for a browser on a page route, a JSON problem for everything else."""
    if pages.wants_html(request.url.path, request.headers.get("accept", "")):
        return HTMLResponse(pages.render_error(404, _detail(exc)), status_code=404)
    return JSONResponse({"detail": _detail(exc)}, status_code=404)


def _disk_full(request: Request, exc: Exception) -> JSONResponse:
    """A write the disk (the data folder's or the database's) had no room for: 507 saying so; nothing was
    stored, since every write is whole or not at all."""
    log.error("disk full on %s %s: %s", request.method, request.url.path, exc)
    if isinstance(exc, StorageFullError):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = str(StorageFullError("the request's files", exc))
    else:
        text = "the server's database is out of disk space; nothing was stored. Try again once space is freed"
    return JSONResponse({"detail": text}, status_code=507)


async def _internal(request: Request, exc: Exception) -> JSONResponse:
    """Anything unexpected: logged with its traceback, answered as a 500 that names only its type; a full disk
    is a 507 that says so."""
    if out_of_space(exc):
        return _disk_full(request, exc)
    log.exception("internal error on %s %s", request.method, request.url.path)
    return JSONResponse(
        {"detail": f"internal server error ({type(exc).__name__}); the server log has details"},
        status_code=500,
    )


def add_error_handlers(app: FastAPI) -> None:
    """Map the core's errors to status codes once: bad input 422, conflicts 409, too large 413, missing 404."""
    for exc_type, code in (
        (DatasetError, 422),
        (FitRequestError, 422),
        (ConflictError, 409),
        (PayloadTooLargeError, 413),
        (UploadTooLargeError, 413),
        (ParserBusyError, 503),
    ):
        app.add_exception_handler(exc_type, _handler(code))
    app.exception_handler(RequestValidationError)(_invalid)
    app.exception_handler(StarletteHTTPException)(_http)
    app.exception_handler(NotFoundError)(_not_found)
    app.exception_handler(OSError)(_internal)  # answered here, as handled, not re-raised by the catch-all
    app.exception_handler(Exception)(_internal)


# --- the app ---


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service app: JSON API under /api/v1, HTML pages, Plotly from /static, health and metrics."""
    settings = settings or Settings()
    SITE["auth"] = settings.auth_required
    services = Services.build(settings)
    storage, repo, runner = services.storage, services.repo, services.runner

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(storage.collect_garbage, repo.referenced_blobs())
        await run_in_threadpool(runner.start)
        log.info(
            "serving",
            extra={
                "executor": settings.executor,
                "auth_required": settings.auth_required,
                "database": repo.engine.url.render_as_string(hide_password=True),
                "data_dir": str(settings.data_dir),
            },
        )
        try:
            yield
        finally:
            runner.stop()
            services.parser.shutdown()
            services.robot_loader.shutdown()
            repo.close()

    app = FastAPI(
        title="actuator-sysid",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="Fit actuator models from joint logs and export them to Isaac Lab. Every route except "
        "/healthz and /static needs `Authorization: Bearer <token>` when the server listens beyond "
        "loopback (tokens: `actuator-sysid token create --project NAME`).",
    )
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_upload_bytes)
    app.add_middleware(AuthMiddleware, repo=repo, required=settings.auth_required)
    app.add_middleware(services.metrics.middleware)  # type: ignore[arg-type]
    services.attach(app.state)  # what the routes' dependencies read (service/deps.py)
    add_error_handlers(app)
    app.include_router(ROBOTS)  # POST/GET /api/v1/robots, the robot pages (service/routes/robots.py)
    for router in ROUTERS:  # datasets, excitations, fits, exports, fleet, operations, pages (service/routes/)
        app.include_router(router)
    return app
