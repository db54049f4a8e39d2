"""The local fit pipeline: fit, the report's plot data, every export rendered, validated and replayed.

One path per kind of fit: `compute_fit` for a joint fit, `compute_robot_fit` for a whole robot. The CLI runs
them in-process and the service's workers run them in theirs (service/jobs.py); it imports no web framework and
no database, so `actuator-sysid fit` needs neither.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .datasets.recording import Recording
from .files import dumps, json_safe
from .fitting.fit import FitRequest, ProgressFn, fit_result, report_data, validate_request
from .fitting.result import FitResult, RobotResult, Verdict, utc_stamp

if TYPE_CHECKING:
    from .fitting.robot import RobotFitOptions
    from .models.robot import RobotModel

log = logging.getLogger(__name__)

# the stages after the search, as progress text (the fit page and the event stream show them)
STAGE_REPORT = "search done: computing the report traces"
STAGE_EXPORTS = "validating exports: rendering each and replaying it through its consumer"
STAGE_STORE = "storing the result and the exports"


@dataclass
class FitOutputs:
    """What one fit produces: the API `result` (the typed result's JSON, as fit.json and the database hold it),
    the report's plot data and the export files by name."""

    result: dict
    report: dict
    exports: dict[str, str]
    typed: FitResult | RobotResult | None = None  # the result as the fit built it, for in-process readers

    def files(self) -> dict[str, str]:
        """The artifacts both the service and the CLI write: fit.json plus the exports."""
        return {"fit.json": dumps(self.result), **self.exports}


def compute_fit(
    rec: Recording,
    req: FitRequest,
    progress: ProgressFn | None = None,
    info: dict | None = None,
    created_at: str | None = None,
) -> FitOutputs:
    """Fit, collect the report data and render every export with its validation (from the unsanitised result);
    the result carries the fit's verdict (fitting/verdict.py), `info` (fit_id, dataset) the exports' provenance,
    and `created_at` (the service's fit row's creation time; None: now, in UTC) the date every export states."""
    created_at = utc_stamp(created_at)
    validate_request(
        rec, req
    )  # a stored request may predate a restart: say what is wrong before importing more
    from .export import render_all  # the worker's dependency, not the API's
    from .fitting.plan import split_in_time

    rec = split_in_time(rec, req.validate_last)  # a time split's pieces are the segments everything reads

    result = fit_result(rec, req, progress)
    stage = progress or (lambda _f, _m: None)
    stage(1.0, STAGE_REPORT)  # the search is done; what follows takes seconds and is shown as its own stage
    report = report_data(rec, result)
    stage(1.0, STAGE_EXPORTS)
    result = replace(result, created_at=created_at)
    if info:
        result = replace(
            result, origin=dict(info)
        )  # where the fit came from, for exports rendered from fit.json
    exports = render_all(result, rec, info=info)
    # judged with the exports' replays: validation.json is where render_all writes the verdict
    result = replace(result, verdict=Verdict.from_json(json.loads(exports["validation.json"])["verdict"]))
    stage(
        1.0, STAGE_STORE
    )  # a cancel asked while the exports replayed stops the fit here, before it is stored
    return FitOutputs(
        result=json_safe(result.to_json()), report=json_safe(report), exports=exports, typed=result
    )


# a robot fit's stages after the search, as fractions of the fit page's progress bar
ROBOT_SEARCH_END = 0.95
# a selection reports about as many messages as this many fits: the two teachers and the gains and bias fits on
# the training part, the inner candidates and the refit each relay theirs (thirteen fits on the Go2 log with its
# gains given, its five inner candidates on a shorter budget: about twelve)
SELECTION_FITS = 12
STAGE_ROBOT_EXPORTS = "fit done: rendering the whole-robot exports"
STAGE_ROBOT_TRACES = "replaying the validation span for the report"


def compute_robot_fit(
    rec: Recording,
    robot: RobotModel,
    opts: RobotFitOptions,
    progress: ProgressFn | None = None,
    *,
    select: bool = False,
    replay: bool = True,
    traces: bool = True,
    model_name: str | None = None,
    created_at: str | None = None,
) -> FitOutputs:
    """A whole-robot fit: the fit (`select`: the configuration chosen on the training part first), the exports
    rendered and (`replay`) replayed by their consumers, the verdict judged again with them, and (`traces`) the
    report's validation traces.

    `progress` gets each of fit_robot's messages (a selection's candidates' too) with a fraction of the
    iterations expected or of the budget, whichever is further; `model_name` is the model's name in the result
    and the exports where `robot.path` is a temporary copy; `created_at` (the service's fit row's creation
    time; None: now, in UTC) the date every export states. A failed replay or trace is stated in the result or
    left out of the report; the fit stands."""
    from .export.robot import with_exports
    from .fitting.robot import fit_robot
    from .fitting.robot_select import select_robot_fit

    created_at = utc_stamp(created_at)
    stage = progress or (lambda _f, _m: None)
    started, calls = time.monotonic(), [0]
    steps = (opts.max_iterations + 3) * (SELECTION_FITS if select else 1)

    # fit_robot reports scans and iterations; progress counts them and the budget
    def say(message: str) -> None:
        calls[0] += 1
        by_steps = calls[0] / steps
        by_time = (time.monotonic() - started) / opts.budget_s if opts.budget_s else 0.0
        stage(min(ROBOT_SEARCH_END, max(by_steps, by_time)), message)

    opts = replace(opts, progress=say)
    result = select_robot_fit(rec, robot, opts) if select else fit_robot(rec, robot, opts)
    if str(rec.metadata.get("joint_names_from", "")).startswith("robot"):  # an unnamed log, read so
        result = replace(
            result,
            joint_mapping="unnamed log taken in the model's actuated-joint order: "
            + ", ".join(robot.joint_names),
        )
    if model_name is not None:
        result = replace(result, robot={**result.robot, "path": model_name})
    result = replace(result, created_at=created_at)
    stage(0.96, STAGE_ROBOT_EXPORTS)
    # each replay says which consumer runs
    result, files = with_exports(result, rec, robot, replay, lambda m: stage(0.97, m))
    report: dict = {}
    if traces:
        stage(0.98, STAGE_ROBOT_TRACES)
        report = _robot_traces(rec, robot, result, opts)
    # a cancel asked while the exports replayed (with_exports states a stopped replay as failed) stops it here
    stage(1.0, STAGE_STORE)
    return FitOutputs(
        result=json_safe(result.to_json()), report=json_safe(report), exports=files, typed=result
    )


def _robot_traces(rec: Recording, robot: RobotModel, result: RobotResult, opts: RobotFitOptions) -> dict:
    """The report's validation traces; empty when their replay fails (the page then says so)."""
    from .fitting.robot_traces import validation_traces

    try:
        return validation_traces(rec, robot, result, opts)
    except Exception:  # noqa: BLE001 - the fit and its exports stand without the drawing
        log.exception("robot fit of %s: validation traces failed", result.robot.get("path"))
        return {}
