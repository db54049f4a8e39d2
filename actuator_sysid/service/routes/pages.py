"""The HTML pages of datasets and fits: the dashboard, a dataset's page and a fit's report."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from .. import pages, robots
from ..db import NotFoundError, Repository
from ..deps import Project, Repo, Store
from ..kinds import kind_of
from ..runs import backfill
from .common import exports_of, fit_context, form_defaults, form_families, stored_json

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(repo: Repo, project: Project) -> str:
    return pages.render_index(
        repo.list_datasets(project, limit=200),
        backfill(repo, repo.list_fits(project=project, limit=200)),
        form_families(),
        form_defaults(),
        repo.fit_counts(project),
        repo.actuator_models(project),
    )


@router.get("/datasets/{dataset_id}", response_class=HTMLResponse, include_in_schema=False)
def dataset_page(repo: Repo, storage: Store, project: Project, dataset_id: str) -> str:
    d = repo.get_dataset(dataset_id, project)
    rec = storage.load_recording(repo.artifacts("dataset", dataset_id))
    return pages.render_dataset(
        d,
        rec,
        repo.list_fits(dataset_id, project),
        form_families(),
        form_defaults(),
        robots=robots_of(repo, d, project),
    )


def robots_of(repo: Repository, d: dict, project: str | None) -> list[dict]:
    """The robots a dataset belongs to: the one it was uploaded for, else every robot whose model has all of its
    joints (a log of two joints or more: one joint alone is an actuator's, fitted on its own)."""
    if d.get("robot_id"):
        try:
            return [repo.get_robot(d["robot_id"], project)]
        except NotFoundError:  # the robot was deleted since
            return []
    joints = d["summary"].get("joints") or []
    if len(joints) < 2:
        return []
    return [r for r in repo.list_robots(project, limit=200) if robots.joints_match(joints, r)]


@router.get("/fits/{fit_id}", response_class=HTMLResponse, include_in_schema=False)
def report_page(repo: Repo, storage: Store, project: Project, fit_id: str) -> str:
    fit, plots = fit_context(repo, storage, fit_id, project)
    validation = stored_json(repo, storage, fit, "validation.json")
    exports = sorted(exports_of(repo, fit_id))
    return kind_of(fit["request"]).render(repo, project, fit, plots, exports, validation, False)
