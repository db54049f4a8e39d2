"""The local fit pipeline: fit, the report's plot data, every export rendered, validated and replayed.

The CLI runs it in-process and the service's workers run it in theirs (service/jobs.py); it imports no web
framework and no database, so `actuator-sysid fit` needs neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from .datasets.recording import Recording
from .files import dumps, json_safe
from .fitting.fit import FitRequest, ProgressFn, fit_result, report_data, validate_request
from .fitting.result import FitResult, Verdict

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
    typed: FitResult | None = None  # the result as the fit built it, for in-process readers

    def files(self) -> dict[str, str]:
        """The artifacts both the service and the CLI write: fit.json plus the exports."""
        return {"fit.json": dumps(self.result), **self.exports}


def compute_fit(
    rec: Recording, req: FitRequest, progress: ProgressFn | None = None, info: dict | None = None
) -> FitOutputs:
    """Fit, collect the report data and render every export with its validation (from the unsanitised result);
    the result carries the fit's verdict (fitting/verdict.py), `info` (fit_id, dataset) the exports' provenance."""
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
