"""Fleet view: the fitted parameters of one actuator model (datasets whose sidecar names `actuator_model`,
and `serial` for the unit) over time, and drift warnings when a fit leaves the spread of the earlier ones.

Every joint of such a dataset is that actuator model, so values are pooled per (model family, parameter)
using each joint's best-ranked family. A value "leaves the earlier spread" when it falls outside the range
of the earlier fits' values widened by half that range (and by 2 % of their median, so identical earlier
values do not flag rounding noise); at least MIN_HISTORY earlier values are needed to judge.
"""

from __future__ import annotations

import statistics
from typing import Any

from ..fitting.result import as_result
from ..models import parameters

MIN_HISTORY = 2


def _when(f: dict[str, Any]) -> tuple[str | None, str]:
    """A fit's place on the time axis: the recording's date (sidecar `recorded_at`), else when its dataset was
    uploaded, else when the fit finished; and which of the three it is."""
    meta = f.get("dataset_metadata") or {}
    for key in ("recorded_at", "recorded", "date"):
        if meta.get(key):
            return str(meta[key]), "recorded"
    if f.get("dataset_created_at"):
        return f["dataset_created_at"], "uploaded"
    return f.get("finished_at") or f.get("created_at"), "fit finished"


def _points(fits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per (fit, joint, parameter of the joint's best family), in the fits' order (oldest first),
    with its 95 % interval where the fit identified the parameter, and whether it did."""
    out = []
    for f in fits:
        when, source = _when(f)
        for joint, jr in as_result(f.get("result") or {}).joints.items():
            family = jr.best_model
            model = jr.models.get(family)
            for name, value in (model.params if model is not None else {}).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    iv = model.intervals.get(name) if model is not None else None
                    band = iv.interval95 if iv is not None and iv.identified and iv.interval95 else None
                    unidentified = (model.unidentified if model is not None else None) or {}
                    identified = not (iv is not None and not iv.identified) and name not in unidentified
                    out.append(
                        {
                            "fit_id": f["id"],
                            "dataset_id": f["dataset_id"],
                            "serial": f.get("serial"),
                            "time": when,
                            "time_source": source,
                            "joint": joint,
                            "family": family,
                            "param": name,
                            "value": float(value),
                            "unit": parameters.unit(name),
                            "low": float(band[0]) if band else None,
                            "high": float(band[1]) if band else None,
                            "identified": identified,
                        }
                    )
    return out


def _band(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    margin = 0.5 * (hi - lo) + 0.02 * abs(statistics.median(values))
    return lo - margin, hi + margin


def drift(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Points that leave the band of the earlier points of the same parameter (whichever family fitted it); a value
    the log did not identify is neither judged nor part of the band."""
    seen: dict[str, list[float]] = {}
    flagged = []
    for p in points:
        if not p.get("identified", True):
            continue
        history = seen.setdefault(p["param"], [])
        if len(history) >= MIN_HISTORY:
            lo, hi = _band(history)
            if not lo <= p["value"] <= hi:
                flagged.append(
                    {
                        **p,
                        "low": lo,
                        "high": hi,
                        "earlier": len(history),
                        "text": f"{p['param']} of {p['family']} on joint {p['joint']} "
                        f"(serial {p['serial'] or '?'}) is {p['value']:.4g}, outside the spread of "
                        f"the {len(history)} earlier fits ({min(history):.4g} … "
                        f"{max(history):.4g}; band {lo:.4g} … {hi:.4g})",
                    }
                )
        history.append(p["value"])
    return flagged


def fleet_summary(actuator_model: str, fits: list[dict[str, Any]]) -> dict[str, Any]:
    """The fleet API's body: every point, grouped series per parameter, and the drift warnings."""
    points = _points(fits)
    series: dict[str, dict[str, Any]] = {}
    for p in points:  # one series per parameter: a unit's values stay one line when the best family changes
        s = series.setdefault(
            p["param"], {"param": p["param"], "unit": p["unit"], "families": [], "points": []}
        )
        if p["family"] not in s["families"]:
            s["families"].append(p["family"])
        s["points"].append(
            {
                k: p[k]
                for k in (
                    "time",
                    "time_source",
                    "value",
                    "low",
                    "high",
                    "serial",
                    "joint",
                    "family",
                    "fit_id",
                    "identified",
                )
            }
        )
    return {
        "actuator_model": actuator_model,
        "fits": len(fits),
        "serials": sorted({str(f.get("serial")) for f in fits if f.get("serial")}),
        "series": list(series.values()),
        "warnings": drift(points),
    }


def warnings_for(fit_id: str, fits: list[dict[str, Any]]) -> list[str]:
    """Drift warnings about one fit, judged against the fits of its actuator model before it."""
    return [w["text"] for w in drift(_points(fits)) if w["fit_id"] == fit_id]
