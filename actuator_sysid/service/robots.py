"""Whole robots in the service (issue 16): the robot fit's request checks, its queueing and the worker step; the
robot pages are robot_page.py's.

The routes are in service/routes/robots.py and the model loader in service/robot_loader.py: a robot model is
imported with Newton in a separate process, as uploads are parsed (parsing.py), and a model that does not import
is a 422 with nothing stored. A robot fit is queued like any fit (routes/fits.py hands `POST /api/v1/fits`
requests that name a `robot_id` to `queue_robot_fit`); its worker (jobs.py) calls `compute_robot_fit`, which
runs pipeline.py's `compute_robot_fit` (the CLI's path too) on the stored model.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..datasets.recording import DatasetError, Recording
from ..files import json_safe
from ..fitting.request import ROBOT_BOUNDS
from ..fitting.result import RobotResult
from ..models.robot import RobotError, RobotModel
from ..pipeline import FitOutputs
from .db import Repository
from .robot_loader import MAX_ZIP_RATIO, unpack
from .settings import Settings
from .storage import Storage, new_id

MAX_GROUPS = 64
MAX_EXPR_CHARS = 200
MAX_DELAY_STEPS = 64
MAX_ITERATIONS = 100
MAX_DECIMATION = 32
MAX_WINDOWS = 400  # training windows of one fit: each is a batched world per candidate
MAX_BUDGET_S = 3600.0
ROBOT_FIT = "robot"  # a fit request's "kind" for whole-robot fits


class Submitter(Protocol):
    """What a queued fit needs of the job runner (jobs.JobRunner): a wake-up."""

    def submit(self, _fit_id: str | None = None) -> None: ...


# --- request and response bodies ---


class RobotFitIn(BaseModel):
    """Options of a whole-robot fit (fitting/robot/ RobotFitOptions); every field that sizes work is bounded."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "groups": {"hip": ".*_hip_joint", "thigh": ".*_thigh_joint", "calf": ".*_calf_joint"},
                    "fit_bias": True,
                    "delay": None,
                    "budget_s": 120,
                }
            ]
        },
    )
    groups: dict[str, str] | None = Field(
        None,
        max_length=MAX_GROUPS,
        description=(
            "parameter sharing as Isaac Lab's joint_names_expr: group name → regex matched in full against the "
            f"model's joint names (at most {MAX_GROUPS}); omit for one group per joint"
        ),
    )
    fit_bias: bool = Field(True, description="fit an encoder bias per joint")
    bias_limit: float | None = Field(
        None,
        ge=ROBOT_BOUNDS["bias_limit"][0],
        le=ROBOT_BOUNDS["bias_limit"][1],
        description="rad: cap every joint's encoder bias (a plausible calibration); with select, tried against "
        "the uncapped bias; omit for the bound the model's strokes give",
    )
    position_friction: bool = Field(
        False,
        description="Coulomb friction linear along each joint's stroke (friction_upper at the upper limit); with "
        "select, tried against constant friction. No consumer holds it: the exports carry the mid-stroke friction",
    )
    dc_motor: bool = Field(
        False,
        description="fit a DC-motor envelope (saturation effort, velocity limit) per "
        "group; off: the log must not saturate the motors",
    )
    delay: int | None = Field(
        None,
        ge=0,
        le=MAX_DELAY_STEPS,
        description="command delay in physics steps; omit to scan 0..max_delay",
    )
    max_delay: int = Field(
        8, ge=0, le=MAX_DELAY_STEPS, description="the delay scan's upper end (physics steps)"
    )
    kp: float | None = Field(
        None,
        ge=0,
        le=1e4,
        description="PD stiffness, N·m/rad (default: the log's, else fitted); 0 with kd 0 for a torque-driven "
        "arm whose log carries the commanded effort as tau_ff",
    )
    kd: float | None = Field(None, ge=0, le=1e3, description="PD damping, N·m·s/rad (default: the log's)")
    decimation: int = Field(4, ge=1, le=MAX_DECIMATION, description="physics steps per log sample")
    validation_fraction: float = Field(
        0.3, ge=0.05, le=0.5, description="the last part of the log, in time, that validates"
    )
    window_s: float = Field(
        0.5,
        ge=0.05,
        le=10.0,
        description="training rollouts restart from the measured state this often (seconds)",
    )
    iterations: int = Field(12, ge=1, le=MAX_ITERATIONS, description="least-squares Jacobian evaluations")
    budget_s: float = Field(
        300.0,
        gt=0,
        le=MAX_BUDGET_S,
        description="wall-clock cap on the search (seconds); the validation replay always runs",
    )
    replay: bool = Field(
        True,
        description="replay each whole-robot export (Isaac Lab, Newton USD, MJCF) through "
        "its consumer on the held-out part, beside our coupled rollout",
    )
    effort_mode: Literal["explicit", "implicit"] = Field(
        "explicit",
        description="explicit (the default in Isaac Lab and Newton), or Newton's implicit effort mode "
        "(set_effort_mode_implicit with a JointSpaceResponse), for stiff gains",
    )
    holdout: str | None = Field(
        None,
        max_length=200,
        description="KEY=VALUE on segment metadata: those recordings validate, whole (as a joint fit's holdout); "
        "omit: the last recordings of a log of several, or the last validation_fraction of one in time",
    )
    payload: list[str] | None = Field(
        None,
        max_length=MAX_GROUPS,
        description="links of the model whose mass is fitted (a payload, a battery); the fit then searches coupled",
    )
    payload_com: bool = Field(False, description="with payload: fit each payload link's COM too")
    select: bool = Field(
        True,
        description="choose the configuration on the training part first (fitted or given gains, bias capped or "
        "free, friction constant or along the stroke), as the CLI's fit does unless --no-select; the report "
        "lists each alternative's figures. false: fit the options as given",
    )

    @field_validator("groups")
    @classmethod
    def _group_names(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        for name, expr in (v or {}).items():
            if not re.fullmatch(r"[A-Za-z_][\w-]{0,63}", name):
                raise ValueError(f"group name {name[:80]!r}: letters, digits, _ or -, at most 64 characters")
            if len(expr) > MAX_EXPR_CHARS:
                raise ValueError(
                    f"group {name}: the regex has {len(expr)} characters; the limit is {MAX_EXPR_CHARS}"
                )
        return v


_ROBOT_EXAMPLE: dict[str, Any] = {
    "id": "5c1e0b7a9d2f4e6a8b3c1d0e9f8a7b6c",
    "project": "default",
    "name": "go2.xml",
    "created_at": "2026-03-01T09:30:00+00:00",
    "model": "go2.xml",
    "fixed_base": None,
    "base": "base",
    "joints": [
        {
            "name": "FL_hip_joint",
            "parent": None,
            "limits": [-1.05, 1.05],
            "armature": 0.01,
            "damping": 0.6,
            "frictionloss": 0.2,
            "effort_limit": 23.7,
        }
    ],
    "notes": [
        "visuals, collision shapes and meshes skipped: an in-air fit needs only the joint tree and the "
        "bodies' inertia; contacts are off"
    ],
    "sha256": "9f86d0…",
    "size": 14899,
}


class RobotOut(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_ROBOT_EXAMPLE]})
    id: str
    name: str
    created_at: str
    base: str
    joints: list[dict[str, Any]]
    notes: list[str]


def robot_out(r: dict) -> dict[str, Any]:
    """The public shape of a robot: its row and the RobotModel summary (joint tree, limits, joint terms)."""
    s = r["summary"]
    return {
        "id": r["id"],
        "project": r["project"],
        "name": r["name"],
        "created_at": r["created_at"],
        "model": r["options"].get("model"),
        "fixed_base": r["options"].get("fixed_base"),
        "base": s.get("base"),
        "base_fixed": s.get("fixed_base", True),
        "joints": s.get("joints", []),
        "notes": s.get("notes", []),
        "sha256": r["sha256"],
        "size": r["size"],
    }


def form_bounds() -> dict[str, tuple[float, float]]:
    """Each bounded number of RobotFitIn as (min, max), read from its JSON schema: the robot fit form checks the
    bounds the API checks, so the two cannot drift."""
    out: dict[str, tuple[float, float]] = {}
    for name, prop in RobotFitIn.model_json_schema()["properties"].items():
        for p in [prop, *prop.get("anyOf", [])]:
            lo = p.get("minimum", p.get("exclusiveMinimum"))
            if lo is not None and "maximum" in p:
                out[name] = (lo, p["maximum"])
    return out


# --- the checks a robot fit passes before it is queued ---


def robot_from_summary(r: dict) -> RobotModel:
    """The parts of a RobotModel the request checks read (joint names, limits, effort), from the stored summary;
    no Newton builder: the worker loads the model itself."""
    joints = r["summary"]["joints"]
    names = [j["name"] for j in joints]
    arr = {k: np.array([j[k] for j in joints], float) for k in ("armature", "damping", "frictionloss")}
    limits = np.array([j["limits"] for j in joints], float).reshape(-1, 2)
    effort = np.array([np.inf if j["effort_limit"] is None else j["effort_limit"] for j in joints], float)
    servo = np.array([j.get("servo_force_range", np.inf) for j in joints], float)  # a servo the fit replaces
    has_servo = bool(np.isfinite(servo).any())
    return RobotModel(
        path=Path(r["name"]),
        builder=None,
        joint_names=names,
        labels=names,
        dof=np.arange(len(names)),
        parent=[names.index(j["parent"]) if j["parent"] else -1 for j in joints],
        component=np.zeros(len(names), int),
        lower=limits[:, 0],
        upper=limits[:, 1],
        armature=arr["armature"],
        viscous_friction=arr["damping"],
        friction=arr["frictionloss"],
        effort_limit=effort,
        base=r["summary"].get("base", ""),
        servo_effort_limit=servo if has_servo else None,
        box_effort_limit=np.where(np.isfinite(servo), np.inf, effort) if has_servo else None,
    )


def fit_options(body: RobotFitIn, progress: Callable[[str], None] | None = None) -> Any:
    """The request's options as fitting/robot/'s RobotFitOptions, field by field under the options' own names."""
    from ..fitting.robot import RobotFitOptions

    return RobotFitOptions.from_fields({**dict(body), "progress": progress})


def check_robot_fit(rec: Recording, robot: dict, body: RobotFitIn, settings: Settings) -> None:
    """Every check fit_robot makes before it computes (joint mapping, groups, split, windows), as a 422 now."""
    from ..fitting.robot import prepare_fit  # the same checks and messages the CLI's fit gives

    if body.budget_s > settings.job_time_limit_s:
        raise RobotError(
            f"robot.budget_s is {body.budget_s:g} s; the limit is the job time limit, "
            f"{settings.job_time_limit_s:g} s (ACTUATOR_SYSID_JOB_TIME_LIMIT_S)"
        )
    data, _prob, _known = prepare_fit(rec, robot_from_summary(robot), fit_options(body))
    if data.starts.size > MAX_WINDOWS:
        raise RobotError(
            f"the training part makes {data.starts.size} windows of robot.window_s = {body.window_s:g} s; "
            f"the limit is {MAX_WINDOWS}: raise window_s"
        )


def stored_request(robot_id: str, body: RobotFitIn) -> dict[str, Any]:
    """A robot fit's request as the fit row stores it: its kind and robot, and every option of `body` at the top
    level (the worker and the pages read them there), defaults filled in."""
    return {"kind": ROBOT_FIT, "robot_id": robot_id, "device": "cpu", **body.model_dump()}


def queue_robot_fit(
    repo: Repository,
    storage: Storage,
    runner: Submitter,
    settings: Settings,
    dataset_id: str,
    robot_id: str | None,
    body: RobotFitIn | None,
    owner: str,
    project: str | None,
    name: str | None = None,
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """POST /api/v1/fits with a robot_id: check the dataset against the robot, then queue a robot fit."""
    if robot_id is None:
        raise RobotError(
            "robot options were given without a robot_id; upload the model with POST /api/v1/robots"
        )
    body = body or RobotFitIn()
    repo.get_dataset(dataset_id, project)
    robot = repo.get_robot(robot_id, project)
    rec = storage.load_recording(repo.artifacts("dataset", dataset_id))
    check_robot_fit(rec, robot, body, settings)
    fit = repo.create_fit(
        new_id(), dataset_id, stored_request(robot_id, body), project=owner, name=name, tags=tags
    )
    runner.submit(fit["id"])
    return {"id": fit["id"], "status": fit["status"]}


def export_validation(fit: dict) -> dict[str, Any]:
    """A robot fit's export checks: what each whole-robot export noted (DJ.001, read-back) and its replays."""
    result = fit.get("result") or {}
    return {"kind": ROBOT_FIT, "exports": result.get("exports") or {}, "replays": result.get("replays")}


def robot_joint_names(robot: dict) -> list[str]:
    """A stored robot's actuated joints, in the model's order."""
    return [j["name"] for j in robot["summary"]["joints"]]


def joints_match(joints: list[str], robot: dict) -> bool:
    """Whether a log's joints are all joints of the robot's model (a log of some of them is a match)."""
    names = set(robot_joint_names(robot))
    return bool(joints) and all(j in names for j in joints)


def check_joints_of(joints: list[str], robot: dict) -> None:
    """A log uploaded for a robot names only the model's joints; else a RobotError naming the strangers."""
    names = robot_joint_names(robot)
    known = set(names)
    strangers = [j for j in joints if j not in known]
    if strangers:
        shown = ", ".join(strangers[:8]) + (f" and {len(strangers) - 8} more" if len(strangers) > 8 else "")
        raise RobotError(
            f"the log's joint(s) {shown} are not actuated joints of robot {robot['name']} ({robot['id']}), "
            f"whose joints are {', '.join(names)}; rename them (sidecar joints, or the export's rename) or "
            "upload without robot_id"
        )


async def parse_for_robot(parse: Callable[..., Awaitable[dict[str, Any]]], robot: dict) -> dict[str, Any]:
    """An upload naming a robot: parsed as it is, and a log without joint names again in the model's
    actuated-joint order (as the CLI's fit --robot reads one); a count that does not match names both sides."""
    try:
        return await parse(joint_names=None)
    except DatasetError as e:
        if "no joint names" not in str(e):
            raise
    names = robot_joint_names(robot)
    try:
        parsed = await parse(joint_names=names)
    except DatasetError as e:
        raise RobotError(
            f"{e}; the robot model {robot['name']} has {len(names)} actuated joint(s): {', '.join(names)}"
        ) from None  # the CLI's fit --robot says the same
    parsed["metadata"]["joint_names_from"] = (
        f"robot {robot['id']} ({robot['name']}), in its actuated-joint order"
    )
    return parsed


# --- the worker side ---


def _stored_robot(storage: Storage, robot: dict, work: Path, limit: int) -> RobotModel:
    """The stored upload unpacked into `work` and imported again, with the options it was accepted with."""
    from ..models.robot import load_robot

    model, _ = unpack(
        storage.blob_path(robot["sha256"]), robot["name"], work, robot["options"].get("model"), limit
    )
    return load_robot(model, fixed_base=robot["options"].get("fixed_base"), root=work)


def worker_fit(
    repo: Repository,
    storage: Storage,
    settings: Settings,
    fit: dict,
    rec: Recording,
    progress: Callable[[float, str], None],
) -> FitOutputs:
    """The worker's edge of a robot fit: the stored model imported into a temporary folder, pipeline.py's
    `compute_robot_fit` with the request's options, the uploaded file's name in place of the temporary path
    and the robot's id in the result."""
    from ..pipeline import compute_robot_fit

    req = fit["request"]
    body = RobotFitIn(**{k: v for k, v in req.items() if k in RobotFitIn.model_fields})
    row = repo.get_robot(req["robot_id"])
    work = Path(tempfile.mkdtemp(dir=storage.tmp))
    try:
        robot = _stored_robot(storage, row, work, settings.max_upload_bytes * MAX_ZIP_RATIO)
        progress(0.0, f"robot {row['name']} loaded: {len(robot.joint_names)} joints")
        out = compute_robot_fit(
            rec,
            robot,
            fit_options(body),
            progress,
            select=body.select,
            replay=body.replay,
            model_name=row["name"],
            created_at=fit.get("created_at"),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert isinstance(out.typed, RobotResult)
    result = replace(out.typed, robot_id=req["robot_id"])
    return replace(out, result=json_safe(result.to_json()), typed=result)
