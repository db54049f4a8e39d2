"""Across fits: one actuator model's fitted parameters over time (JSON and page) and two fits side by side."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from .. import fleet, pages
from ..deps import Project, Repo, Store
from ..schemas import ERRORS
from .common import fit_context

router = APIRouter()


@router.get("/api/v1/fleet/{actuator_model}", tags=["fleet"], responses=ERRORS)
def fleet_api(repo: Repo, project: Project, actuator_model: str) -> dict[str, Any]:
    """Fitted parameters of every succeeded fit of one actuator model over time, with drift warnings."""
    return fleet.fleet_summary(actuator_model, repo.fleet_fits(actuator_model, project))


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page(repo: Repo, storage: Store, project: Project, a: str, b: str) -> str:
    return pages.render_compare(
        fit_context(repo, storage, a, project), fit_context(repo, storage, b, project)
    )


@router.get("/fleet", response_class=HTMLResponse, include_in_schema=False)
def fleet_page(repo: Repo, project: Project, actuator_model: str | None = None) -> str:
    summary = (
        fleet.fleet_summary(actuator_model, repo.fleet_fits(actuator_model, project))
        if actuator_model
        else None
    )
    return pages.render_fleet(repo.actuator_models(project), summary)
