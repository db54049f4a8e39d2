"""The kinds of fit the service runs, one object each: what the worker computes, which page renders the fit, what
its page headers say of its split and request, whether /compare sets it beside another, and what its exports'
validation document is.

A fit request names its kind (`"kind": "robot"` for a whole robot; none for a joint fit); `kind_of(request)` is
the one lookup the worker, the pages and the export routes read it through (`render(standalone=True)` for
all.zip's report, `validation` for the exports' checks). Whether an export renders again with other values is
the export registry's answer (export.render_format), not the kind's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..datasets.recording import Recording
from ..fitting.fit import FitRequest, FitRequestError
from ..pipeline import FitOutputs, compute_fit
from . import fleet, report, robot_page, robots
from .db import Repository
from .settings import Settings
from .storage import Storage

JOINT_FIT = "joint"  # a request without a "kind": each joint fitted alone

# (repo, storage, settings, fit row, recording, progress) → what the fit produces
Compute = Callable[[Repository, Storage, Settings, dict, Recording, Callable[[float, str], None]], FitOutputs]
# (repo, project, fit row, report data, export names, stored validation.json, standalone) → the fit's page
Render = Callable[[Repository, str | None, dict, dict | None, list[str], dict | None, bool], str]
# (fit row, stored validation.json) → the exports' validation document, None where there is none
Validation = Callable[[dict, dict | None], dict[str, Any] | None]
# fit row → how it was split (what its result states, else what its request asks), for the page headers
SplitText = Callable[[dict], str]
# fit row → what it was asked, as (name, value) header rows
AskedRows = Callable[[dict], list[tuple[str, str]]]


@dataclass(frozen=True)
class FitKind:
    """What differs between kinds of fit, for the worker (`compute`), the fit page and all.zip's report
    (`render`), the headers of the fit page and /compare (`split_text`, `asked_rows`), /compare (`label`,
    `comparable`) and `GET /api/v1/fits/{id}/validation` (`validation`)."""

    name: str
    label: str  # how the pages name it: "a {label} fit"
    comparable: bool  # /compare sets two such fits side by side: the result is a FitResult of joints
    compute: Compute
    render: Render
    split_text: SplitText
    asked_rows: AskedRows
    validation: Validation


def _compute_joint(
    _repo: Repository,
    _storage: Storage,
    _settings: Settings,
    fit: dict,
    rec: Recording,
    progress: Callable[[float, str], None],
) -> FitOutputs:
    info = {"fit_id": fit["id"], "dataset": fit["dataset_id"]}
    return compute_fit(rec, FitRequest.from_dict(fit["request"]), progress, info, fit.get("created_at"))


def _render_joint(
    repo: Repository,
    project: str | None,
    fit: dict,
    plots: dict | None,
    exports: list[str],
    validation: dict | None,
    standalone: bool,
) -> str:
    if standalone:  # all.zip's report.html: the files lie beside it
        return report.render_report(fit, fit.get("result"), plots, standalone=True, validation=validation)
    warnings: list[str] = []
    if fit["status"] == "succeeded" and fit.get("actuator_model"):
        warnings = fleet.warnings_for(fit["id"], repo.fleet_fits(fit["actuator_model"], project))
    return report.render_report(
        fit, fit.get("result"), plots, exports=exports, fleet_warnings=warnings, validation=validation
    )


def _render_robot(
    repo: Repository,
    project: str | None,
    fit: dict,
    plots: dict | None,
    exports: list[str],
    _validation: dict | None,
    standalone: bool,
) -> str:
    return robot_page.render_robot_fit(fit, plots, exports, repo, project, standalone=standalone)


JOINT = FitKind(
    name=JOINT_FIT,
    label="joint",
    comparable=True,
    compute=_compute_joint,
    render=_render_joint,
    split_text=report.split_text,
    asked_rows=report.asked_rows,
    validation=lambda _fit, stored: stored,  # validation.json, as render_all wrote it
)
ROBOT = FitKind(
    name=robots.ROBOT_FIT,
    label="whole-robot",
    comparable=False,  # its result is per group, through the coupled model: compared on its own page
    compute=robots.worker_fit,
    render=_render_robot,
    split_text=robot_page.split_text,
    asked_rows=robot_page.asked_rows,
    validation=lambda fit, _stored: robots.export_validation(fit),  # the result holds its exports' checks
)
KINDS = {k.name: k for k in (JOINT, ROBOT)}


def kind_of(request: Mapping[str, Any] | None) -> FitKind:
    """The kind a fit request asks for; a request without one is a joint fit."""
    name = (request or {}).get("kind") or JOINT_FIT
    if name not in KINDS:
        raise FitRequestError(f"fit kind {str(name)[:40]!r} is unknown; the kinds are {', '.join(KINDS)}")
    return KINDS[name]
