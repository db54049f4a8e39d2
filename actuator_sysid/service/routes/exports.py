"""A succeeded fit's exports over HTTP: their stored validation, each export as a download (rendered again
with given values, joint names or flagged estimates on request), and all.zip with a standalone report.
What a fit's kind shows (service/kinds.py) and what re-rendering allows (the export registry: export.render_format)
are each answered once."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response

from ...export.formats import TEXT_FORMATS, media_type
from ...fitting.fit import FitRequestError
from ..db import ConflictError, NotFoundError, Repository
from ..deps import Project, Repo, Store
from ..kinds import kind_of
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
    validation = kind_of(fit["request"]).validation(fit, stored_json(repo, storage, fit, "validation.json"))
    if validation is None:
        raise NotFoundError(f"fit {fit_id} has no stored export validation")
    return validation


def _rendered(
    repo: Repository,
    storage: Storage,
    fit: dict,
    name: str,
    opts: dict[str, Any],
) -> bytes:
    """A text export rendered again at an operating point (`at`, as the CLI's --at), with the user's values
    (`set`), joint names (`rename`) and handling of unidentified parameters (`unidentified`: omit | comment),
    from the stored result and bench loads; a whole-robot fit's exports are served as written, so the registry
    refuses to re-render them (422)."""
    from ...export import ExportError, render_format
    from ...export.operating import parse_at
    from ...export.selection import parse_assignments, parse_rename

    loads = (stored_json(repo, storage, fit, "validation.json") or {}).get("bench") or None
    try:
        text = render_format(
            fit["result"],
            None,
            name,
            loads=loads,
            at=parse_at(opts["at"]),
            unidentified=opts["unidentified"],
            given=parse_assignments(opts["set"]),
            rename=parse_rename(opts["rename"]),
            info={"fit_id": fit["id"], "dataset": fit["dataset_id"]},
        )
    except ExportError as e:
        raise FitRequestError(str(e)) from None
    return text.encode()


def _all_zip(
    repo: Repository, storage: Storage, project: str | None, fit: dict, exports: dict[str, dict]
) -> bytes:
    """A zip of every stored export of a fit and its report as one standalone report.html."""
    ctx, plots = fit_context(repo, storage, fit["id"], project)
    validation = stored_json(repo, storage, fit, "validation.json")
    html = kind_of(fit["request"]).render(repo, project, ctx, plots, sorted(exports), validation, True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, a in sorted(exports.items()):
            z.writestr(n, storage.read_bytes(a["sha256"]))
        z.writestr("report.html", html)
    return buf.getvalue()


AtQuery = Annotated[
    str | None,
    Query(
        max_length=200,
        description="operating point of a fit of device-unit gains, as the CLI's `export --at`: the SI "
        "stiffness (and damping) at this firmware kp (kd) and the envelope at this supply voltage, e.g. "
        "`kp=800` or `kp=800,vin=7.4` (default: the fit's reference point); the export states the point",
        examples=["kp=800"],
    ),
]
SetQuery = Annotated[
    list[str] | None,
    Query(
        description="`[JOINT/]PARAM=VALUE`, repeatable: a value to write instead of the fitted one (a "
        "datasheet limit the log never pressed), as the CLI's `export --set`",
        examples=[["actuator_effort_limit=0.6"]],
    ),
]
RenameQuery = Annotated[
    list[str] | None,
    Query(
        description="`FIT_JOINT=ROBOT_JOINT`, repeatable: write a joint under the robot's name, as the "
        "CLI's `export --rename`",
        examples=[["pendulum=elbow_joint"]],
    ),
]
UnidentifiedQuery = Annotated[
    Literal["omit", "comment"] | None,
    Query(
        description="a parameter the fit did not identify: `omit` leaves it at the consumer's default "
        "(the stored export), `comment` writes the estimate marked NOT IDENTIFIED",
    ),
]


@router.get(
    "/api/v1/fits/{fit_id}/export/{name}",
    tags=["fits"],
    response_class=Response,
    responses={409: {"model": Problem}, 422: {"model": Problem}, **ERRORS},
)
def export_fit(
    repo: Repo,
    storage: Store,
    project: Project,
    fit_id: str,
    name: str,
    at: AtQuery = None,
    set: SetQuery = None,  # noqa: A002  (the query parameter's name, as the CLI's --set)
    rename: RenameQuery = None,
    unidentified: UnidentifiedQuery = None,
) -> Response:
    """A stored export of a succeeded fit (isaaclab.py, isaaclab.json, fit.json), as a download; all.zip
    holds every export and a standalone report.html. `at`, `set`, `rename` or `unidentified` render a text
    export again at another operating point, with given values, joint names or flagged estimates."""
    fit = repo.get_fit(fit_id, project)
    if fit["status"] != "succeeded":
        raise ConflictError(f"fit {fit_id} is {fit['status']}; exports exist once it has succeeded")
    exports = exports_of(repo, fit_id)
    opts = {"at": at, "set": set or [], "rename": rename or [], "unidentified": unidentified}
    if any(opts.values()) and name not in TEXT_FORMATS:  # never ignored: all.zip and binaries are as stored
        raise FitRequestError(
            f"at, set, rename and unidentified re-render a text export ({', '.join(TEXT_FORMATS)}); "
            f"{name} is served as stored"
        )
    if name == "all.zip":  # every export plus the standalone report (issue 15)
        return Response(
            _all_zip(repo, storage, project, fit, exports),
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}.zip"'},
        )
    if name not in exports:
        raise NotFoundError(f"unknown export format {name!r}; available: {sorted(exports)} or all.zip")
    if any(opts.values()):  # render_format refuses a robot fit's, with the reason
        point = "-" + re.sub(r"[^A-Za-z0-9.-]+", "", at.replace(",", "-").replace("=", "")) if at else ""
        return Response(
            _rendered(repo, storage, fit, name, opts),
            media_type=media_type(name),
            headers={
                "Content-Disposition": f'attachment; filename="actuator-fit-{fit_id[:8]}{point}-{name}"'
            },
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
