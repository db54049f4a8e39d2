"""The dashboard's runs table: one row per fit with what an engineer sorts and filters by (name, kind, families,
split, verdict, validation error, wall time, tags), read without loading results. A fit's verdict and error are
summarised once, when it finishes (`run_summary`), and stored beside it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..fitting.result import TORQUE_METRIC, as_result
from ..numbers import is_real
from .db import Repository
from .kinds import JOINT_FIT, kind_of

BACKFILL_PER_PAGE = 50  # finished fits stored before summaries existed, summarised per dashboard load


def _joint_error(result: dict) -> tuple[float | None, str, str]:
    """A joint fit's headline error: the worst joint's best-family error, its unit and the split it is on."""
    typed = as_result(result)
    worst: tuple[float | None, str, str] = (None, "", "")
    for jf in typed.joints.values():
        if not jf.ranking:
            continue
        row = jf.ranking[0]
        err = float(row.error) if is_real(row.error) else None
        if err is None:
            continue
        unit = "N·m" if row.metric == TORQUE_METRIC else "rad"
        if worst[0] is None or err > worst[0]:
            worst = (err, unit, row.split or "")
    return worst


def run_summary(fit: dict, result: dict | None) -> dict[str, Any]:
    """What the runs table shows of a finished fit: its verdict, split and headline error (with unit and the
    split it was measured on), from its result."""
    result = result or {}
    kind = kind_of(fit.get("request"))
    verdict = (result.get("verdict") or {}).get("verdict")
    if kind.name == JOINT_FIT:
        error, unit, on = _joint_error(result) if result.get("joints") else (None, "", "")
    else:
        rmse = (result.get("validation") or {}).get("rmse")
        error, unit, on = (float(rmse) if is_real(rmse) else None), "rad", "validation"
    return {
        "verdict": verdict or "not judged",
        "error": error,
        "error_unit": unit,
        "error_split": on,
        "split": kind.split_text({**fit, "result": result}),
    }


def _families(fit: dict) -> str:
    """The model a fit fitted: a joint fit's families; a robot fit's coupled PD model and its options."""
    req = fit.get("request") or {}
    if kind_of(req).name == JOINT_FIT:
        if "families" in req and req["families"] is None or req.get("families") == ["auto"]:
            return "auto (ladder)"
        return ", ".join(str(f) for f in req.get("families") or [])
    terms = ["PD + joint terms"]
    terms += [
        label
        for key, label in (("dc_motor", "DC envelope"), ("position_friction", "stroke friction"))
        if req.get(key)
    ]
    if req.get("select"):
        terms.append("selected")
    return ", ".join(terms)


def _wall_s(fit: dict) -> float | None:
    """Seconds from start to finish (None while it has not finished)."""
    try:
        start, end = fit.get("started_at"), fit.get("finished_at")
        if not start or not end:
            return None
        return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    except ValueError:
        return None


def backfill(repo: Repository, fits: list[dict]) -> list[dict]:
    """Summaries for finished fits stored without one (at most BACKFILL_PER_PAGE per call), stored as found."""
    todo = [f for f in fits if f["status"] == "succeeded" and f.get("summary") is None][:BACKFILL_PER_PAGE]
    for f in todo:
        full = repo.get_fit(f["id"])
        f["summary"] = run_summary(full, full.get("result"))
        repo.set_fit_summary(f["id"], f["summary"])
    return fits


def run_rows(fits: list[dict], dataset_names: dict[str, str]) -> list[dict[str, Any]]:
    """The runs table's rows: each fit with the values its cells show and sort by."""
    rows = []
    for f in fits:
        s = f.get("summary") or {}
        kind = kind_of(f.get("request"))
        verdict = s.get("verdict") if f["status"] == "succeeded" else None
        rows.append(
            {
                "fit": f,
                "name": f.get("name") or "",
                "kind": kind.label,
                "dataset": dataset_names.get(f["dataset_id"], f["dataset_id"][:8]),
                "families": _families(f),
                "split": s.get("split") or kind.split_text(f),
                "verdict": verdict or "",
                "error": s.get("error") if verdict else None,
                "error_unit": s.get("error_unit", ""),
                "error_split": s.get("error_split", ""),
                "wall_s": _wall_s(f),
                "tags": list(f.get("tags") or []),
            }
        )
    return rows
