"""Datasets over HTTP: upload (streamed, parsed in a parser process, stored whole or not at all), list, read,
download the original, delete."""

from __future__ import annotations

import json
import shutil
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from ...datasets.jsontext import check_depth
from ...datasets.recording import DatasetError
from ...datasets.sources import parse_names
from .. import robots
from ..db import NotFoundError
from ..deps import Conf, Owner, Parser, Project, Repo, Store
from ..schemas import ERRORS, DatasetOut, Problem
from ..storage import new_id
from .common import dataset_out, discard, display_name

MAX_UPLOAD_JOINT_NAMES = 256  # names an upload's joint_names field may give
NAMES_FROM_ROBOT = (
    "upload the robot model at /robots (POST /api/v1/robots) and give its id, and the log is read in that model's "
    "actuated-joint order"
)

router = APIRouter()


def _parse_metadata(text: str | None) -> dict | None:
    """The `metadata` form field: empty → None; otherwise it must be one JSON object."""
    if text is None or not text.strip():
        return None
    check_depth(text, "metadata")  # before json.loads, which recurses once per level
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(
            f"metadata: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}; "
            "send one JSON object (the sidecar), or leave the field out"
        ) from None
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
        raise DatasetError(
            f"joint_names lists {', '.join(map(repr, twice))} more than once; name each joint once"
        )
    return names


# The list and status routes that dashboards poll are `async`: each is one or two indexed reads, cheaper
# on the event loop than the two thread hand-offs (handler, response check) a sync route costs.


@router.post(
    "/api/v1/datasets",
    status_code=201,
    tags=["datasets"],
    responses={201: {"model": DatasetOut}, 413: {"model": Problem}, 422: {"model": Problem}, **ERRORS},
)
async def upload_dataset(
    repo: Repo,
    storage: Store,
    parser: Parser,
    settings: Conf,
    project: Project,
    owner: Owner,
    file: Annotated[UploadFile, File(description="joint log in any supported format (or a zip of several)")],
    metadata: Annotated[
        str | None,
        Form(
            description="sidecar JSON object (loads, gains, units; "
            "actuator_model and serial for the fleet view)"
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        Form(
            alias="format",
            description="csv | parquet | bam | pace | mcap | rosbag | "
            "actuator-net | actuator-net-pickle | lerobot | isaaclab-hdf5; empty to "
            "detect",
        ),
    ] = None,
    joint_names: Annotated[
        str | None,
        Form(
            description="comma-separated joint names, for logs without "
            "them (PACE, Float64MultiArray, LeRobot, HDF5)"
        ),
    ] = None,
    robot_id: Annotated[
        str | None,
        Form(
            max_length=64,
            description="id from POST /api/v1/robots: the log is uploaded for that robot (its joints must be "
            "the model's; a log without joint names is read in the model's actuated-joint order), and the robot's "
            "page lists it",
        ),
    ] = None,
) -> dict[str, Any]:
    """Parse and store a joint log; nothing is stored unless the whole file parses."""
    name = display_name(file.filename)
    sidecar = _parse_metadata(metadata)
    names = _joint_names(joint_names)
    robot = await run_in_threadpool(repo.get_robot, robot_id, project) if robot_id else None
    tmp, (sha, size) = await run_in_threadpool(storage.receive, file.file, settings.max_upload_bytes)
    out_dir = storage.temp_path(".rec")
    try:
        if size == 0:
            raise DatasetError(f"{name}: the uploaded file is empty; choose a file with a header and rows")
        parse = partial(parser.parse, tmp, name, sidecar, fmt or None, out_dir, any_format=True)
        try:
            parsed = await (
                robots.parse_for_robot(parse, robot) if robot and names is None else parse(joint_names=names)
            )
        except DatasetError as e:
            if robot is None and names is None and "no joint names" in str(e):
                raise DatasetError(f"{e}, or the robot_id form field: {NAMES_FROM_ROBOT}") from None
            raise
        if robot is not None:
            robots.check_joints_of(parsed["summary"].get("joints") or [], robot)
        arts = await run_in_threadpool(storage.put_folder, out_dir)
        arts["original"] = await run_in_threadpool(storage.put_file, tmp, sha)
        row = await run_in_threadpool(
            lambda: repo.create_dataset(
                new_id(),
                name,
                parsed["summary"],
                arts,
                project=owner,
                metadata=parsed["metadata"],
                robot_id=robot["id"] if robot else None,
            )
        )
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(out_dir, ignore_errors=True)
    return _out(row)


def _out(d: dict) -> dict[str, Any]:
    """A dataset as the API shows it: its `warnings` are the dataset page's (the reader's and the quality
    report's, the plan flag among them), so an API client sees what the page says."""
    from ..pages import all_warnings

    return {**dataset_out(d), "warnings": all_warnings(d["summary"])}


@router.get("/api/v1/datasets", tags=["datasets"], responses={200: {"model": list[DatasetOut]}, **ERRORS})
async def list_datasets(
    repo: Repo,
    project: Project,
    actuator_model: str | None = None,
    serial: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[dict[str, Any]]:
    """Datasets newest first; filter by the sidecar's actuator_model / serial."""
    return [_out(d) for d in repo.list_datasets(project, actuator_model, serial, limit)]


@router.get(
    "/api/v1/datasets/{dataset_id}", tags=["datasets"], responses={200: {"model": DatasetOut}, **ERRORS}
)
async def get_dataset(repo: Repo, project: Project, dataset_id: str) -> dict[str, Any]:
    return _out(repo.get_dataset(dataset_id, project))


@router.get(
    "/api/v1/datasets/{dataset_id}/original", tags=["datasets"], response_class=FileResponse, responses=ERRORS
)
def download_original(repo: Repo, storage: Store, project: Project, dataset_id: str) -> FileResponse:
    """The uploaded file as it was received (its sha256 is the dataset's `sha256`)."""
    d = repo.get_dataset(dataset_id, project)
    path = storage.blob_path(d["sha256"])
    if not path.is_file():
        raise NotFoundError(f"the uploaded file of dataset {dataset_id} is missing from the store")
    return FileResponse(
        path, media_type="application/octet-stream", filename=f"dataset-{dataset_id[:8]}-{d['name']}"
    )


@router.delete(
    "/api/v1/datasets/{dataset_id}", tags=["datasets"], responses={409: {"model": Problem}, **ERRORS}
)
def delete_dataset(
    repo: Repo, storage: Store, project: Project, dataset_id: str, force: bool = False
) -> dict[str, Any]:
    """Delete a dataset and its fits. Refused (409, naming them) while fits of it are queued or running,
    unless force=true, which cancels them."""
    shas = {a["sha256"] for a in repo.artifacts("dataset", dataset_id).values()}
    fit_ids = [f["id"] for f in repo.list_fits(dataset_id, project)]
    for fid in fit_ids:
        shas |= {a["sha256"] for a in repo.artifacts("fit", fid).values()}
    deleted = repo.delete_dataset(dataset_id, project, force=force)
    storage_removed = discard(repo, storage, shas)
    return {"deleted": dataset_id, "fits_deleted": deleted, "files_removed": storage_removed}
