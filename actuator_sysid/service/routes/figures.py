"""A joint fit's report figures and a dataset's segment plots over HTTP: the Plotly figures their pages draw,
loaded by the page after its HTML, so the HTML stays a few tens of KB whatever the log's length."""

from __future__ import annotations

import gzip
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..db import ConflictError, NotFoundError
from ..deps import Project, Repo, Store
from ..kinds import JOINT_FIT, kind_of
from ..pages import segment_figures
from ..report import figures_json, report_figures
from ..schemas import ERRORS, Problem
from .common import fit_context

router = APIRouter()

GZIP_FROM = 32_000  # bytes: a smaller answer goes as it is

FIGURES_OK: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the report's figures, in the order of its plot divs: `[{id, data, layout}, ...]`, "
        "each a Plotly figure drawn into the div of that id",
        "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}},
    }
}


@router.get(
    "/api/v1/fits/{fit_id}/figures",
    tags=["fits"],
    response_class=Response,
    responses={**FIGURES_OK, 409: {"model": Problem}, **ERRORS},
)
def fit_figures(request: Request, repo: Repo, storage: Store, project: Project, fit_id: str) -> Response:
    """The Plotly figures of a succeeded joint fit's report page (measured against simulated traces per
    segment, the torque–speed envelope, the search convergence, correlations, residuals and the residual
    findings), as the page draws them; gzip when the client takes it. A whole-robot fit's page holds its own."""
    fit, plots = fit_context(repo, storage, fit_id, project)
    if kind_of(fit["request"]).name != JOINT_FIT:
        raise NotFoundError(
            f"fit {fit_id} is a whole-robot fit: its figures are drawn by its page, /fits/{fit_id}"
        )
    if fit["status"] != "succeeded":
        raise ConflictError(
            f"fit {fit_id} is {fit['status']}; its report's figures exist once it has succeeded"
        )
    return _json(request, figures_json(report_figures(fit.get("result"), plots)).encode())


@router.get(
    "/api/v1/datasets/{dataset_id}/figures",
    tags=["datasets"],
    response_class=Response,
    responses={**FIGURES_OK, **ERRORS},
)
def dataset_figures(
    request: Request, repo: Repo, storage: Store, project: Project, dataset_id: str
) -> Response:
    """The Plotly figures of a dataset's page: position and command, velocity and effort per segment (the first
    segments), as the page draws them; gzip when the client takes it."""
    repo.get_dataset(dataset_id, project)
    rec = storage.load_recording(repo.artifacts("dataset", dataset_id))
    return _json(request, figures_json(segment_figures(rec)).encode())


def _json(request: Request, body: bytes) -> Response:
    """A JSON body, gzipped where it is large and the client takes it."""
    headers = {"Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
    if len(body) >= GZIP_FROM and "gzip" in request.headers.get("accept-encoding", "").lower():
        body = gzip.compress(body, compresslevel=1)
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type="application/json", headers=headers)
