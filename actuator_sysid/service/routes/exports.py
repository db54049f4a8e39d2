"""A succeeded fit's exports over HTTP: their stored validation, each export as a download (rendered again
with given values, joint names or flagged estimates on request), and all.zip with a standalone report."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ...export.formats import TEXT_FORMATS, media_type
from ...fitting.fit import FitRequestError
from .. import robots
from ..db import ConflictError, NotFoundError, Repository
from ..deps import Project, Repo, Store
from ..report import render_report
from ..schemas import ERRORS, Problem
from ..storage import Storage
from .common import exports_of, fit_context, stored_json

router = APIRouter()


@router.get("/api/v1/fits/{fit_id}/validation", tags=["fits"], responses={409: {"model": Problem}, **ERRORS})
def fit_validation(repo: Repo, storage: Store, project: Project, fit_id: str) -> dict[str, Any]:
    """The exports' validation, run before they were offered: NEWTON.DJ.001 and export findings (code,
    severity, where, message) and each export replayed through its consumer next to our own rollout."""
    fit = repo.get_fit(fit_id, project)
    if fit["status"] != "succeeded":
        raise ConflictError(f"fit {fit_id} is {fit['status']}; exports are validated once it has succeeded")
    if fit["request"].get("kind") == robots.ROBOT_FIT:  # its exports' notes and replays are in its result
        return robots.export_validation(fit)
    validation = stored_json(repo, storage, fit, "validation.json")
    if validation is None:
        raise NotFoundError(f"fit {fit_id} has no stored export validation")
    return validation


def _rendered(
    repo: Repository, storage: Storage, fit: dict, name: str, given: list[str], rename: list[str], mode: str
) -> bytes:
    """A text export rendered again with the user's values (`set`), joint names (`rename`) and handling of
    unidentified parameters (`unidentified`: omit | comment), from the stored result and bench loads."""
    from ...export import ExportError, render_format
    from ...export.selection import parse_assignments, parse_rename

    loads = (stored_json(repo, storage, fit, "validation.json") or {}).get("bench") or None
    try:
        text = render_format(
            fit["result"],
            None,
            name,
            loads=loads,
            unidentified=mode,
            given=parse_assignments(given),
            rename=parse_rename(rename),
        )
    except ExportError as e:
        raise FitRequestError(str(e)) from None
    return text.encode()


def _all_zip(
    repo: Repository, storage: Storage, project: str | None, fit: dict, exports: dict[str, dict]
) -> bytes:
    """A zip of every stored export of a fit and its report as one standalone report.html."""
    ctx, plots = fit_context(repo, storage, fit["id"], project)
    if ctx["request"].get("kind") == robots.ROBOT_FIT:
        html = robots.render_robot_fit(ctx, plots, sorted(exports), repo, project, standalone=True)
    else:
        html = render_report(
            ctx,
            ctx.get("result"),
            plots,
            standalone=True,
            validation=stored_json(repo, storage, fit, "validation.json"),
        )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, a in sorted(exports.items()):
            z.writestr(n, storage.read_bytes(a["sha256"]))
        z.writestr("report.html", html)
    return buf.getvalue()


@router.get(
    "/api/v1/fits/{fit_id}/export/{name}",
    tags=["fits"],
    response_class=Response,
    responses={409: {"model": Problem}, **ERRORS},
)
def export_fit(
    request: Request, repo: Repo, storage: Store, project: Project, fit_id: str, name: str
) -> Response:
    """A stored export of a succeeded fit (isaaclab.py, isaaclab.json, fit.json), as a download; all.zip
    holds every export and a standalone report.html. Query `set=PARAM=VALUE` (repeatable), `rename=A=B` or
    `unidentified=comment` render a text export again with given values, joint names or flagged estimates."""
    fit = repo.get_fit(fit_id, project)
    if fit["status"] != "succeeded":
        raise ConflictError(f"fit {fit_id} is {fit['status']}; exports exist once it has succeeded")
    exports = exports_of(repo, fit_id)
    if name == "all.zip":  # every export plus the standalone report (issue 15)
        return Response(
            _all_zip(repo, storage, project, fit, exports),
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}.zip"'},
        )
    if name not in exports:
        raise NotFoundError(f"unknown export format {name!r}; available: {sorted(exports)} or all.zip")
    q = request.query_params
    if (q.getlist("set") or q.getlist("rename") or q.get("unidentified")) and name in TEXT_FORMATS:
        robots.refuse_rerender(fit)
        data = _rendered(
            repo, storage, fit, name, q.getlist("set"), q.getlist("rename"), q.get("unidentified") or "omit"
        )
        return Response(
            data,
            media_type=media_type(name),
            headers={"Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}-{name}"'},
        )
    data = storage.read_bytes(exports[name]["sha256"])
    return Response(
        data,
        media_type=media_type(name),
        headers={
            "Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}-{name}"',
            "X-Content-SHA256": exports[name]["sha256"],
        },
    )
