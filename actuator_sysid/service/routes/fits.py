"""Fits over HTTP: queue one (checked against its dataset first), list, read, cancel, retry, delete, and
stream its progress as Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from ...fitting.fit import validate_request
from ...fitting.request import check_device
from .. import robots
from ..db import TERMINAL
from ..deps import Conf, Owner, Project, Repo, Runner, Store
from ..schemas import ERRORS, FitAccepted, FitCreate, FitOut, Problem, RunLabel
from ..storage import new_id
from .common import discard, fit_out

router = APIRouter()


def _sse(event: str, data: dict, event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, allow_nan=False)}\n\n"


@router.post(
    "/api/v1/fits",
    status_code=202,
    tags=["fits"],
    responses={202: {"model": FitAccepted}, 409: {"model": Problem}, 422: {"model": Problem}, **ERRORS},
)
def create_fit(
    repo: Repo,
    storage: Store,
    runner: Runner,
    settings: Conf,
    project: Project,
    owner: Owner,
    body: FitCreate,
) -> dict[str, Any]:
    """Check the request against the dataset, then queue it (the durable queue in the database)."""
    if body.robot_id is not None or body.robot is not None:  # a whole-robot fit (issue 16)
        return robots.queue_robot_fit(
            repo,
            storage,
            runner,
            settings,
            body.dataset_id,
            body.robot_id,
            body.robot,
            owner,
            project,
            name=body.name or None,
            tags=body.tags,
        )
    repo.get_dataset(body.dataset_id, project)
    req = body.to_request()
    validate_request(storage.load_recording(repo.artifacts("dataset", body.dataset_id)), req)
    if settings.executor != "ray":  # local workers compute here; Ray puts a cuda fit on a GPU node
        check_device(req.device)
    fit = repo.create_fit(
        new_id(), body.dataset_id, asdict(req), project=owner, name=body.name or None, tags=body.tags
    )
    runner.submit(fit["id"])
    return {"id": fit["id"], "status": fit["status"]}


@router.get("/api/v1/fits", tags=["fits"], responses={200: {"model": list[FitOut]}, **ERRORS})
async def list_fits(
    repo: Repo,
    project: Project,
    dataset_id: str | None = None,
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"] | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[dict[str, Any]]:
    """Fits newest first, without results."""
    return [fit_out(f) for f in repo.list_fits(dataset_id, project, status, limit)]


@router.get("/api/v1/fits/{fit_id}", tags=["fits"], responses={200: {"model": FitOut}, **ERRORS})
async def get_fit(repo: Repo, project: Project, fit_id: str) -> dict[str, Any]:
    """One fit with its result (when succeeded), error (when failed) and stored artifacts."""
    return fit_out(repo.get_fit(fit_id, project), repo.artifacts("fit", fit_id))


@router.patch(
    "/api/v1/fits/{fit_id}",
    tags=["fits"],
    responses={200: {"model": FitOut}, 422: {"model": Problem}, **ERRORS},
)
def label_fit(repo: Repo, project: Project, fit_id: str, body: RunLabel) -> dict[str, Any]:
    """Name or tag a fit (the runs table sorts and filters by them); fields left out stay as they are."""
    return fit_out(repo.label_fit(fit_id, project, body.name, body.tags))


@router.post(
    "/api/v1/fits/{fit_id}/cancel",
    status_code=202,
    tags=["fits"],
    responses={202: {"model": FitOut}, 409: {"model": Problem}, **ERRORS},
)
def cancel_fit(repo: Repo, runner: Runner, project: Project, fit_id: str) -> dict[str, Any]:
    """Cancel a queued fit at once, a running one at its worker's next progress report (killed after 10 s)."""
    out = fit_out(repo.request_cancel(fit_id, project))
    runner.submit()
    return out


@router.post(
    "/api/v1/fits/{fit_id}/retry",
    status_code=202,
    tags=["fits"],
    responses={202: {"model": FitOut}, 409: {"model": Problem}, **ERRORS},
)
def retry_fit(repo: Repo, runner: Runner, project: Project, fit_id: str) -> dict[str, Any]:
    """Queue a failed or cancelled fit again, with the same request."""
    out = fit_out(repo.retry_fit(fit_id, project))
    runner.submit(fit_id)
    return out


@router.delete("/api/v1/fits/{fit_id}", tags=["fits"], responses={409: {"model": Problem}, **ERRORS})
def delete_fit(repo: Repo, storage: Store, project: Project, fit_id: str) -> dict[str, Any]:
    """Delete a finished fit and its files (cancel a queued or running one first)."""
    shas = {a["sha256"] for a in repo.artifacts("fit", fit_id).values()}
    repo.delete_fit(fit_id, project)
    return {"deleted": fit_id, "files_removed": discard(repo, storage, shas)}


@router.get(
    "/api/v1/fits/{fit_id}/events",
    tags=["fits"],
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {
                "text/event-stream": {
                    "example": 'event: progress\ndata: {"status": "running", '
                    '"progress": 0.42, "message": "dcmotor: generation 84/200"}\n\n'
                }
            },
            "description": "Server-Sent Events: `progress` (status, progress, message) on every change, "
            "`log` (id, ts, level, message) per log line, then one `end` (status, error) "
            "when the fit is succeeded, failed or cancelled.",
        },
        **ERRORS,
    },
)
async def fit_events(request: Request, repo: Repo, project: Project, fit_id: str) -> StreamingResponse:
    """Stream a fit's progress and log lines until it reaches a terminal state (reconnect with Last-Event-ID)."""
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
                yield _sse(
                    "progress",
                    {
                        "status": fit["status"],
                        "progress": fit["progress"],
                        "message": fit["message"],
                        "attempts": fit["attempts"],
                    },
                )
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

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
