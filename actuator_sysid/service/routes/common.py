"""What several routers share: the public shapes of datasets and fits, a fit's stored JSON artifacts and
report context, and removing blobs nothing refers to any more."""

from __future__ import annotations

import json
import re
from typing import Any

from ...models.families import FAMILIES, NET_FAMILIES
from ..db import NotFoundError, Repository
from ..schemas import DEFAULT_REQUEST
from ..storage import Storage

INTERNAL_ARTIFACTS = ("report_data.json",)  # stored for the report page, not offered as a download


def dataset_out(d: dict) -> dict[str, Any]:
    """The public shape of a dataset: its row and its summary."""
    return {
        "id": d["id"],
        "project": d["project"],
        "name": d["name"],
        "created_at": d["created_at"],
        **d["summary"],
        "sha256": d["sha256"],
        "size": d["size"],
        "actuator_model": d["actuator_model"],
        "serial": d["serial"],
        "robot_id": d.get("robot_id"),
    }


def fit_out(f: dict, artifacts: dict[str, dict] | None = None) -> dict[str, Any]:
    """The public shape of a fit; result/error only when present."""
    out = {
        k: f[k]
        for k in (
            "id",
            "project",
            "dataset_id",
            "status",
            "progress",
            "message",
            "request",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
            "attempts",
            "executor",
            "worker",
            "name",
            "tags",
            "summary",
        )
    }
    for k in ("result", "error"):
        if f.get(k) is not None:
            out[k] = f[k]
    if artifacts is not None:
        out["artifacts"] = [{"name": n, **a} for n, a in artifacts.items()]
    return out


def exports_of(repo: Repository, fit_id: str) -> dict[str, dict]:
    """A fit's stored artifacts that are offered as downloads."""
    return {n: a for n, a in repo.artifacts("fit", fit_id).items() if n not in INTERNAL_ARTIFACTS}


def stored_json(repo: Repository, storage: Storage, fit: dict, name: str) -> dict | None:
    """A JSON artifact of a succeeded fit, parsed; None when the fit has none (older fits, other status)."""
    if fit["status"] != "succeeded":
        return None
    arts = repo.artifacts("fit", fit["id"])
    if name not in arts:
        return None
    try:
        return json.loads(storage.read_bytes(arts[name]["sha256"]))
    except NotFoundError:
        return None


def fit_context(
    repo: Repository, storage: Storage, fit_id: str, project: str | None
) -> tuple[dict, dict | None]:
    """A fit with its dataset's name, actuator model and serial, and its report's plot data (None if absent)."""
    fit = repo.get_fit(fit_id, project)
    try:
        ds = repo.get_dataset(fit["dataset_id"])
        fit["dataset_name"], fit["actuator_model"], fit["serial"] = (
            ds["name"],
            ds["actuator_model"],
            ds["serial"],
        )
    except NotFoundError:
        pass
    plots = stored_json(
        repo, storage, fit, "report_data.json"
    )  # None: the tables still render, the page says so
    return fit, plots


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def display_name(filename: str | None, default: str = "upload") -> str:
    """An upload's name for display only (datasets and robots): its last path component, without control
    characters, at most 255 characters."""
    name = _CONTROL.sub("", re.split(r"[/\\]", filename or "")[-1]).strip()
    return (name or default)[-255:]


def discard(repo: Repository, storage: Storage, shas: set[str]) -> int:
    """Remove blobs no artifact refers to any more."""
    gone = shas - repo.referenced_blobs()
    for sha in gone:
        storage.blob_path(sha).unlink(missing_ok=True)
    return len(gone)


def form_families() -> list[str]:
    """What the fit form offers: every parametric family, then the actuator networks."""
    return [*sorted(FAMILIES), *NET_FAMILIES]


def form_defaults() -> dict[str, Any]:
    """The fit form's budget fields, from the request defaults."""
    return {
        "generations": DEFAULT_REQUEST.generations,
        "population": DEFAULT_REQUEST.population,
        "seed": DEFAULT_REQUEST.seed,
    }
