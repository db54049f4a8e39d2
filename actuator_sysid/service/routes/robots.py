"""Whole robots over HTTP: upload a robot model (imported by Newton in the loader process, stored only if it
imports), list, read and delete robots, and the robot pages; the fit side is in service/robots.py."""

from __future__ import annotations

import zipfile
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from ...fitting.robot import require_stand
from ...models.robot import USD_SUFFIXES, RobotError
from .. import robots
from ..deps import Conf, Loader, Owner, Project, Repo, Store
from ..robot_loader import MAX_ZIP_RATIO, MODEL_SUFFIXES
from ..robot_page import joint_depths
from ..storage import new_id
from ..templating import fmt_num, page, templates
from .common import discard, display_name

router = APIRouter()
_PROBLEM: dict[int | str, dict[str, Any]] = {
    c: {"description": "a problem, named in `detail`"} for c in (401, 404, 413, 422)
}


@router.post(
    "/api/v1/robots",
    status_code=201,
    tags=["robots"],
    responses={201: {"model": robots.RobotOut}, **_PROBLEM},
)
async def upload_robot(
    repo: Repo,
    storage: Store,
    settings: Conf,
    loader: Loader,
    owner: Owner,
    file: Annotated[
        UploadFile,
        File(description="an MJCF (.xml), URDF (.urdf) or USD file, or a zip of the model with its meshes"),
    ],
    fixed_base: Annotated[
        str | None,
        Form(
            max_length=255,
            description="the link fixed to the world (default: the root link; the robot hangs)",
        ),
    ] = None,
    floating: Annotated[
        bool,
        Form(
            description="the model's base floats (a free joint): then name the link that "
            "hangs on the stand in fixed_base"
        ),
    ] = False,
    model: Annotated[
        str | None,
        Form(max_length=1000, description="inside a zip: the model file to load, when the zip holds several"),
    ] = None,
) -> dict[str, Any]:
    """Import a robot model with Newton and store it; nothing is stored unless it imports."""
    name = display_name(file.filename, default="robot")
    stand = require_stand(floating, fixed_base)
    tmp, blob = await run_in_threadpool(storage.receive, file.file, settings.max_upload_bytes)
    try:
        if blob[1] == 0:
            raise RobotError(f"{name}: the uploaded file is empty; send the robot's MJCF, URDF or USD file")
        if not name.lower().endswith(MODEL_SUFFIXES) and not await run_in_threadpool(zipfile.is_zipfile, tmp):
            raise RobotError(
                f"{name}: unknown robot model type; give an MJCF (.xml), URDF (.urdf) or USD "
                f"({', '.join(USD_SUFFIXES)}) file, or a zip of the model with its meshes"
            )
        loaded = await loader.load(
            tmp, name, model or None, fixed_base or None, settings.max_upload_bytes * MAX_ZIP_RATIO
        )
        original = await run_in_threadpool(storage.put_file, tmp, blob[0])
        if stand:
            loaded["summary"]["notes"].append(stand)
        row = await run_in_threadpool(
            lambda: repo.create_robot(
                new_id(),
                name,
                loaded["summary"],
                {**loaded["options"], "floating": floating},
                original,
                project=owner,
            )
        )
    finally:
        tmp.unlink(missing_ok=True)
    return robots.robot_out(row)


@router.get("/api/v1/robots", tags=["robots"], responses={200: {"model": list[robots.RobotOut]}, **_PROBLEM})
async def list_robots(
    repo: Repo, project: Project, limit: Annotated[int, Query(ge=1, le=1000)] = 200
) -> list[dict[str, Any]]:
    """Robots newest first."""
    return [robots.robot_out(r) for r in await run_in_threadpool(repo.list_robots, project, limit)]


@router.get(
    "/api/v1/robots/{robot_id}", tags=["robots"], responses={200: {"model": robots.RobotOut}, **_PROBLEM}
)
async def get_robot(repo: Repo, project: Project, robot_id: str) -> dict[str, Any]:
    """One robot: its joint tree, limits, the armature, damping, frictionloss and effort limit the model states."""
    return robots.robot_out(await run_in_threadpool(repo.get_robot, robot_id, project))


@router.delete(
    "/api/v1/robots/{robot_id}", tags=["robots"], responses={409: {"description": "fits use it"}, **_PROBLEM}
)
def delete_robot(repo: Repo, storage: Store, project: Project, robot_id: str) -> dict[str, Any]:
    """Delete a robot and its stored upload; refused (409, naming them) while fits use it."""
    shas = {a["sha256"] for a in repo.artifacts("robot", robot_id).values()}
    repo.delete_robot(robot_id, project)
    return {"deleted": robot_id, "files_removed": discard(repo, storage, shas)}


@router.get("/robots/{robot_id}", response_class=HTMLResponse, include_in_schema=False)
def robot_page(repo: Repo, project: Project, robot_id: str, dataset: str | None = None) -> str:
    """A robot: its joint tree with limits and joint terms, the notes of its import, an upload for it, the fit
    form over the logs whose joints are its own (`dataset` preselected), and its fits."""
    row = repo.get_robot(robot_id, project)
    r = robots.robot_out(row)
    fits = [f for f in repo.list_fits(project=project, limit=500) if f["request"].get("robot_id") == robot_id]
    logs = [
        d
        for d in repo.list_datasets(project, limit=200)
        if d.get("robot_id") == robot_id or robots.joints_match(d["summary"].get("joints") or [], row)
    ]
    logs.sort(key=lambda d: d.get("robot_id") != robot_id)  # those uploaded for it first, newest first
    body = (
        templates()
        .get_template("robot.html")
        .render(
            robot=r,
            depth=joint_depths(r["joints"]),
            fits=fits,
            datasets=logs,
            chosen=dataset,
            fmt=fmt_num,
            bounds=robots.form_bounds(),
        )
    )
    return page(f"robot {r['name']}", body, nav=True)


@router.get("/robots", response_class=HTMLResponse, include_in_schema=False)
def robots_page(repo: Repo, project: Project) -> str:
    """Every robot, and the upload form."""
    rows = [robots.robot_out(r) for r in repo.list_robots(project, limit=200)]
    return page("robots", templates().get_template("robots.html").render(robots=rows), nav=True)
