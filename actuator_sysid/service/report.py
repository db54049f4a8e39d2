"""The fit report as one HTML page (templates/report.html): parameter and metric tables per joint, and
Plotly plots.

Served by the app and written by the CLI as a standalone file, from the same function, so both work without
internet. The served page stays small: its plots' figures come from GET /api/v1/fits/{id}/figures
(routes/figures.py, `report_figures`) and Plotly from /static/plotly.min.js once the page has loaded; the
standalone file holds both inline. This module gathers what each section shows and builds the Plotly figures as
dicts; the sections' HTML is in templates/_report.html.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from html import escape, unescape
from typing import Any
from urllib.parse import quote

import numpy as np

from ..export.formats import TEXT_FORMATS
from ..export.operating import at_operating_point
from ..export.selection import ExportError
from ..files import json_safe
from ..fitting.diagnostics import diagnose
from ..fitting.result import (
    FitResult,
    Interval,
    JointFit,
    ModelFit,
    NetFit,
    RankRow,
    SegmentMetrics,
    as_result,
)
from ..models import parameters
from ..models.families import FAMILIES
from .templating import macro, num_text, plotly_inline, render

_COLORS = {
    "measured": "#222222",
    "commanded": "#9aa0a6",
    "simulated": "#d62728",
    "train": "#0b5cad",
    "validation": "#b35c00",
    "network": "#2ca02c",
}

_DASH = {"simulated": "dot", "commanded": "dash", "network": "dashdot"}


def _stated_at(point: Mapping[str, Any] | None, units: str) -> dict[str, str]:
    """Which operating point a device-unit fit states each scaled SI value at: the stiffness at the
    reference kp, the damping at the reference kd, the envelope at the reference supply."""
    if not point:
        return {}
    vin = f", vin = {point['vin']:g} V" if point.get("vin") else ""
    out = {}
    if units == "device" and point.get("kp"):
        out["stiffness"] = f"at kp = {point['kp']:g}{vin}"
    if units == "device" and point.get("kd"):
        out["damping"] = f"at kd = {point['kd']:g}{vin}"
    if point.get("vin"):
        out["saturation_effort"] = out["actuator_velocity_limit"] = f"at vin = {point['vin']:g} V"
    return out


def _param_rows(
    params: Mapping[str, Any], intervals: Mapping[str, Interval], at: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Fitted values with unit, the operating point a device-unit value is stated at, 95 % interval (band:
    none, unidentified, interval or exact) and meaning."""
    rows = []
    for name, value in params.items():
        p = parameters.BY_NAME.get(name)
        row: dict[str, Any] = {
            "name": name,
            "value": value,
            "unit": p.unit if p else "",
            "at": (at or {}).get(name, ""),
            "doc": p.doc if p else "",
        }
        iv = intervals.get(name)
        if iv is None or not iv.to_json():
            row["band"] = "none"
        elif not iv.identified:
            row.update(band="unidentified", reason=iv.reason or "")
        elif iv.interval95:
            row.update(band="interval", low=iv.interval95[0], high=iv.interval95[1])
        else:
            row["band"] = "exact"
        rows.append(row)
    return rows


def _networks(models: Mapping[str, ModelFit]) -> dict[str, Any] | None:
    """Each fitted actuator network against the best parametric model on the same segments: closed loop
    (position and velocity RMSE of the trajectory) and, with measured torque, open loop (torque RMSE)."""
    rows: list[dict[str, Any]] = []
    nets = {k: m for k, m in models.items() if isinstance(m, NetFit) and m.comparison}
    for kind, m in nets.items():
        cmp = m.comparison or {}
        tr = m.training
        metrics = [
            ("closed loop: position RMSE", "position_rmse", "rad"),
            ("closed loop: velocity RMSE", "velocity_rmse", "rad/s"),
            ("open loop: torque RMSE", "torque_rmse", "N·m"),
        ]
        for label, key, unit in metrics:
            if key not in cmp:
                continue
            net, par = cmp[key].get("network"), cmp[key].get("parametric")
            ratio = (
                f"{net / par:.2f}×" if isinstance(net, float) and isinstance(par, float) and par > 0 else "–"
            )
            rows.append({"kind": kind, "label": label, "net": net, "par": par, "ratio": ratio, "unit": unit})
        rows.append(
            {
                "kind": kind,
                "training": (
                    f"trained {str(tr.get('mode', '?')).replace('_', ' ')} on {tr.get('torque_source', '')}"
                    f"; {m.n_params if m.has('n_params') else '?'} weights; input "
                    f"{m.network.get('input_idx')} steps back (MLP); {m.assumptions if m.has('assumptions') else ''}"
                    + (f"; early stopping watched {tr['early_stopping']}" if tr.get("early_stopping") else "")
                ),
            }
        )
    if not rows:
        return None
    first = next(iter(nets.values())).comparison or {}
    return {"rows": rows, "best": first["parametric_family"], "split": first["split"]}


def _rows(ranking: Sequence[RankRow | Mapping[str, Any]]) -> list[RankRow]:
    return [r if isinstance(r, RankRow) else RankRow.from_json(r) for r in ranking]


def _ranking_table(ranking: Sequence[RankRow | Mapping[str, Any]]) -> str:
    """Families by validation error with the per-parameter penalty, why the first one won, and what the
    consumer-native families give up (fidelity_gaps)."""
    ranked = _rows(ranking)
    return str(macro("_report.html", "ranking_table")(ranked, fidelity_gaps(ranked)))


def fidelity_gaps(ranking: Sequence[RankRow | Mapping[str, Any]]) -> list[str]:
    """What a consumer-native family gives up against the richer-friction family that extends it.

    One line per fitted pair, e.g. "dcmotor is 42 % worse on validation than dcmotor_stribeck", so the
    report says what exporting the native family (Isaac Lab, Newton, MuJoCo hold no BAM friction) costs.
    """
    ranked = _rows(ranking)
    rows = {r.family: r for r in ranked}
    out = []
    for r in ranked:
        native = rows.get(getattr(FAMILIES.get(r.family), "approximates", ""))
        if native is None or not r.position_rmse or native.split != r.split:
            continue
        a, b = native.position_rmse, r.position_rmse
        if a is None:
            raise TypeError(f"ranking row {native.family!r} has no position_rmse")
        errors = f"(position RMSE {a:.3g} vs {b:.3g} rad)"
        if a - b <= max(0.02 * b, 1e-6):  # within 2 % or float32 precision: nothing to give up
            out.append(
                f"{native.family} fits at least as well as {r.family} on {r.split} {errors}: "
                "the richer friction buys nothing on this log."
            )
        else:
            out.append(
                f"{native.family} is {100.0 * (a / b - 1.0):.0f} % worse on {r.split} than "
                f"{r.family} {errors}: what exporting the consumer-native family gives up."
            )
    return out


CLOUD_POINTS = 2000  # the most points a report's scatter cloud draws: SVG markers, quick to draw


def thin_cloud(x: Sequence[Any], y: Sequence[Any], max_points: int = CLOUD_POINTS) -> tuple[list, list]:
    """A scatter cloud of at most `max_points` (in its order): one point per occupied cell of the finest grid
    over its extent that keeps under the cap, and its outermost points, so its shape and extremes still show.

    A cloud of every logged sample (the envelope's tens of thousands) would need WebGL and weigh megabytes."""
    n = min(len(x), len(y))
    if n <= max_points:
        return list(x[:n]), list(y[:n])
    xa, ya = np.array(x[:n], dtype=float), np.array(y[:n], dtype=float)  # None → NaN
    ok = np.flatnonzero(np.isfinite(xa) & np.isfinite(ya))
    if ok.size == 0:
        return [], []
    extremes = {int(ok[f(v[ok])]) for v in (xa, ya) for f in (np.argmin, np.argmax)}
    span = [(v[ok].min(), max(float(v[ok].max() - v[ok].min()), 1e-300)) for v in (xa, ya)]
    first = ok[:0]
    for cells in (512, 256, 128, 64, 32, 16, 8, 4, 2, 1):
        ix, iy = (
            np.minimum(((v[ok] - lo) / width * cells).astype(np.int64), cells - 1)
            for v, (lo, width) in zip((xa, ya), span, strict=True)
        )
        _, where = np.unique(ix * cells + iy, return_index=True)
        first = ok[where]
        if first.size + len(extremes) <= max_points:
            break
    keep = np.array(sorted(set(first.tolist()) | extremes))
    return [x[k] for k in keep], [y[k] for k in keep]


def _convergence_figure(div: str, joint: str, models: Mapping[str, ModelFit]) -> dict:
    """Best loss of every family's fit (log scale): the start, least squares from it, each CMA-ES generation,
    and the final refine."""
    data = [
        {"type": "scatter", "mode": "lines", "name": fam, "y": (m.search or {}).get("convergence", [])}
        for fam, m in models.items()
    ]
    return {
        "id": div,
        "data": data,
        "layout": {
            "title": {"text": f"{joint} · search convergence"},
            "height": 320,
            "xaxis": {"title": {"text": "start · least squares · CMA-ES generations · refine"}},
            "yaxis": {
                "title": {"text": "best loss"},
                "type": "log",
                "tickformat": ".2~g",
                "automargin": True,
            },
        },
    }


def _correlation_figure(div: str, joint: str, family: str, corr: Mapping[str, Any]) -> dict | None:
    """Heat map of the parameter correlation matrix at the optimum."""
    names = corr.get("names") or []
    if len(names) < 2:
        return None
    return {
        "id": div,
        "data": [
            {
                "type": "heatmap",
                "z": corr["matrix"],
                "x": names,
                "y": names,
                "zmin": -1,
                "zmax": 1,
                "colorscale": "RdBu",
                "reversescale": True,
            }
        ],
        "layout": {
            "title": {"text": f"{joint} · {family} · parameter correlation"},
            "height": 420,
            "margin": {"l": 170, "b": 150},
        },
    }


def _residual_figure(div: str, joint: str, family: str, rows: Sequence[SegmentMetrics]) -> dict | None:
    """Position RMSE per segment, coloured by split."""
    if not rows:
        return None
    colours = ["#c06000" if r.split == "validation" else "#1f5fa8" for r in rows]
    return {
        "id": div,
        "data": [
            {
                "type": "bar",
                "x": [str(r.segment) for r in rows],
                "y": [r.position_rmse for r in rows],
                "marker": {"color": colours},
            }
        ],
        "layout": {
            "title": {
                "text": f"{joint} · {family} · position RMSE per segment (blue train, orange validation)"
            },
            "height": 340,
            "xaxis": {"title": {"text": "segment", "standoff": 12}, "automargin": True, "tickangle": -40},
            "yaxis": {"title": {"text": "RMSE [rad]", "standoff": 8}, "automargin": True},
            "margin": {"t": 50, "l": 60, "r": 20},
        },
    }


def _residual_findings(
    j: int, joint: str, family: str, segments: list[dict], physics_dt: float | None, stiffness: float | None
) -> tuple[dict[str, Any] | None, list[dict]]:
    """ "What the residual shows": each finding's sentence beside its small plot (fitting/diagnostics.py),
    as the findings macro's input and the plots' figures."""
    findings = diagnose(segments, physics_dt, stiffness)
    if not findings:
        return None, []
    items, figures = [], []
    for k, f in enumerate(findings):
        div = f"plot-{j}-diag-{k}"
        p = f["plot"]
        data = []
        for t in p["traces"]:
            x, y = thin_cloud(t["x"], t["y"]) if t["mode"] == "markers" else (t["x"], t["y"])
            data.append(
                {
                    "type": "scatter",
                    "mode": t["mode"],
                    "name": t["name"],
                    "x": x,
                    "y": y,
                    "marker": {"size": 3, "opacity": 0.4},
                }
            )
        figures.append(
            {
                "id": div,
                "data": data,
                "layout": {
                    "title": {"text": escape(p["title"]), "font": {"size": 12}},
                    "height": 260,
                    "showlegend": len(data) > 1,
                    "xaxis": {"title": {"text": escape(p["x_label"])}},
                    "yaxis": {"title": {"text": escape(p["y_label"])}},
                    "margin": {"t": 36, "l": 60, "r": 10, "b": 40},
                    "legend": {"orientation": "h"},
                },
            }
        )
        items.append(
            {
                "kind": f["kind"],
                "strength": f["strength"],
                "sentence": f["sentence"],
                "div": div,
                "label": figure_label(figures[-1]),
            }
        )
    return {"joint": joint, "family": family, "items": items}, figures


def figure_label(figure: Mapping[str, Any]) -> str:
    """What a plot shows, in words, for its div's aria-label: its title and its traces' names (read by a screen
    reader, and there before the plot is drawn)."""
    title = unescape(
        re.sub(r"<[^>]+>", "", str(((figure.get("layout") or {}).get("title") or {}).get("text", "")))
    )
    names = list(dict.fromkeys(str(t["name"]) for t in figure.get("data") or [] if t.get("name")))
    return f"{title}: {', '.join(names)}" if names else title


SPLITS = ("train", "validation")


def _split_metrics(m: ModelFit, split: str) -> dict[str, Any] | None:
    """One split's pooled metrics as stored (every key, the ones this version does not name too)."""
    v = m.metrics.train if split == "train" else m.metrics.validation
    return v.to_json() if v is not None else None


def _metric_table(models: Mapping[str, ModelFit]) -> tuple[list[str], list[tuple[str, str, dict | None]]]:
    """The metrics table: columns (the union of the scalar metric names) and one row per family and split."""
    cols: list[str] = []
    for m in models.values():
        for split in SPLITS:
            stored = _split_metrics(m, split) or {}
            cols += [k for k, v in stored.items() if k not in cols and not isinstance(v, list | dict)]
    return cols, [
        (family, split, _split_metrics(m, split)) for family, m in models.items() for split in SPLITS
    ]


def _segment_figure(div: str, joint: str, seg: dict) -> dict:
    """Measured vs simulated position (top) and velocity (bottom) of one segment; the title marks the split."""
    split = seg.get("split", "")

    def line(y: str, axis: str, name: str, kind: str, show: bool) -> dict:
        return {
            "x": seg.get("t", []),
            "y": seg.get(y, []),
            "xaxis": "x",
            "yaxis": axis,
            "name": name,
            "type": "scatter",
            "mode": "lines",
            "legendgroup": kind,
            "showlegend": show,
            "line": {"color": _COLORS[kind], "width": 1.5, "dash": _DASH.get(kind, "solid")},
        }

    data = [
        line("q", "y", "measured", "measured", True),
        line("q_sim", "y", "simulated", "simulated", True),
        line("q_des", "y", "commanded q_des", "commanded", True),
        line("qd", "y2", "measured", "measured", False),
        line("qd_sim", "y2", "simulated", "simulated", False),
    ]
    if seg.get("q_net"):  # the best actuator network, closed loop
        name = f"network ({seg.get('network', '')})"
        data += [line("q_net", "y", name, "network", True), line("qd_net", "y2", name, "network", False)]
    layout = {
        "title": {
            "text": f"{escape(joint)} · segment {escape(str(seg.get('name', '')))} · "
            f"<span style='color:{_COLORS.get(split, '#222')}'>{escape(split)}</span>"
        },
        "xaxis": {"title": {"text": "t [s]"}, "anchor": "y2"},
        "yaxis": {"title": {"text": "q [rad]"}, "domain": [0.55, 1.0]},
        "yaxis2": {"title": {"text": "qd [rad/s]"}, "domain": [0.0, 0.45]},
        "margin": {"t": 50, "l": 60, "r": 20, "b": 40},
        "legend": {"orientation": "h"},
    }
    return {"id": div, "data": data, "layout": layout}


def _envelope_figure(div: str, joint: str, envelope: dict, points: dict) -> dict:
    """The fitted torque–speed envelope (effort_max / effort_min vs velocity) over the (velocity, effort) points."""
    source = points.get("source", "measured")
    velocity, effort = thin_cloud(points.get("velocity", []), points.get("effort", []))
    data = [
        {
            "x": velocity,
            "y": effort,
            "type": "scatter",
            "mode": "markers",
            "name": f"{source} (velocity, effort)",
            "marker": {"size": 3, "opacity": 1.0, "color": "#b0b0b0"},  # one shade: overlaps do not darken
        },
        {
            "x": envelope.get("velocity", []),
            "y": envelope.get("effort_max", []),
            "type": "scatter",
            "mode": "lines",
            "name": "effort_max",
            "line": {"color": "#d62728", "width": 2},
        },
        {
            "x": envelope.get("velocity", []),
            "y": envelope.get("effort_min", []),
            "type": "scatter",
            "mode": "lines",
            "name": "effort_min",
            "line": {"color": "#1f77b4", "width": 2},
        },
    ]
    layout = {
        "title": {"text": f"{escape(joint)} · torque–speed envelope"},
        "xaxis": {"title": {"text": "velocity [rad/s]"}, "zeroline": True},
        "yaxis": {"title": {"text": "effort [N·m]"}, "zeroline": True},
        "margin": {"t": 70, "l": 60, "r": 20, "b": 40},
        "legend": {"orientation": "h", "x": 1.0, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
    }
    return {"id": div, "data": data, "layout": layout}


def _validation(validation: dict, verdict: dict | None = None) -> dict[str, Any]:
    """The exports' validation before they are offered: findings (rule code, where, why) and each export
    replayed through its consumer next to our own rollout. It says "passed" only when every check of the
    fit's verdict passed (fitting/verdict.py)."""
    from ..fitting.verdict import all_passed

    errors, warnings = validation.get("errors", 0), validation.get("warnings", 0)
    replays = validation.get("replay") or {}
    outside = sum(
        not j.get("within_tolerance", True)
        for r in replays.values()
        for j in (r.get("joints") or {}).values()
    )
    outside += sum(r.get("status") == "failed" for r in replays.values())
    state = (
        "passed"
        if all_passed(verdict) and not errors and not warnings
        else ("failed" if errors or outside else "warnings")
    )
    rows: list[dict[str, Any]] = []
    for fmt, r in replays.items():
        if r.get("status") != "ok":
            rows.append({"format": fmt, "status": str(r.get("status")), "note": str(r.get("note", ""))})
            continue
        rows += [
            {
                "format": fmt,
                "consumer": str(r.get("consumer", "")),
                "joint": joint,
                "family": str(j.get("family", "")),
                "rmse_replay": j.get("rmse_replay"),
                "rmse_ours": j.get("rmse_ours"),
                "within": j.get("within_tolerance"),
            }
            for joint, j in r.get("joints", {}).items()
        ]
    return {
        "rule": validation.get("rule", ""),
        "state": state,
        "errors": errors,
        "warnings": warnings,
        "outside": outside,
        "rows": rows,
        "findings": validation.get("findings") or [],
    }


DEVICE_COLUMNS = (
    ("stiffness", "stiffness [N·m/rad]"),
    ("damping", "damping [N·m·s/rad]"),
    ("saturation_effort", "stall effort [N·m]"),
    ("actuator_velocity_limit", "no-load speed [rad/s]"),
)


def _points(gains: Mapping[str, Any]) -> list[dict[str, float]]:
    """Every logged operating point of a joint: each logged kp at each logged supply voltage."""
    kps = sorted(float(k) for k in gains.get("stiffness_at") or {})
    vins = sorted(float(v) for v in gains.get("saturation_effort_at") or gains.get("velocity_limit_at") or {})
    if not vins and gains.get("vin_reference"):
        vins = [float(gains["vin_reference"])]
    kp_opts: list[float | None] = [*kps] or [None]
    vin_opts: list[float | None] = [*vins] or [None]
    points = [
        {k: v for k, v in (("kp", kp), ("vin", vin)) if v is not None} for kp in kp_opts for vin in vin_opts
    ]
    return [p for p in points if p]


def _device_panel(
    typed: FitResult, joint: str, jr: JointFit, exports: Sequence[str]
) -> dict[str, Any] | None:
    """The device-gain panel of a joint fitted in firmware gain units or at a logged supply: the reference
    point, gain_scale with its interval, and the SI values the exports write at every logged kp and vin
    (export/operating.py at_operating_point, the same scaling as `export --at`)."""
    gains = dict(jr.device_gains or {})
    if not gains or jr.best_model not in jr.models:
        return None
    rows = []
    for point in _points(gains):
        at = ",".join(f"{k}={v:g}" for k, v in point.items())
        row: dict[str, Any] = {"at": at, "point": point, "error": ""}
        try:
            scaled, _used = at_operating_point(typed, point)
            params = scaled.joints[joint].models[jr.best_model].params
            row["values"] = [params.get(name) for name, _label in DEVICE_COLUMNS]
        except ExportError as e:  # another joint of the fit logs no such gain: the export refuses it
            row["values"], row["error"] = [None] * len(DEVICE_COLUMNS), str(e)
        row["reference"] = point.get("kp") == gains.get("kp_reference") and point.get("vin") == gains.get(
            "vin_reference"
        )
        rows.append(row)
    text = [f for f in TEXT_FORMATS if f in exports]  # the registry's order: isaaclab.py first
    return {
        "joint": joint,
        "family": jr.best_model,
        "gains": gains,
        "columns": [label for _name, label in DEVICE_COLUMNS],
        "rows": rows,
        "formats": text,
    }


VERDICT_STYLE = {
    "good": "background:#eaf6ea;border-left:6px solid #2a8a2a",
    "usable": "background:#fff6e0;border-left:6px solid #e0a000",
    "poor": "background:#fdeaea;border-left:6px solid #b00000",
}


def verdict_html(verdict: dict | None) -> str:
    """The fit's verdict (good | usable | poor) with its reasons, worst first, for the top of the report."""
    return str(macro("_report.html", "verdict")(verdict, VERDICT_STYLE))


def _joint(
    j: int, joint: str, typed: FitResult, jp: dict | None, exports: Sequence[str]
) -> tuple[dict, list[dict]]:
    """One joint's section (the joint macro's input) and its figures: the device-gain panel, the segments,
    the envelope, the search convergence, the correlation and residual plots, the residual findings' plots."""
    jr = typed.joints[joint]
    physics_dt = typed.assumptions.physics_dt if typed.assumptions.has("physics_dt") else None
    best, models = jr.best_model, jr.models
    model = models.get(best) if best is not None else None
    cols, rows = _metric_table(models)
    point = (typed.assumptions.operating_point or {}).get(joint)
    units = str((typed.assumptions.gain_units or {}).get(joint, "si"))
    params = None if model is None else _param_rows(model.params, model.intervals, _stated_at(point, units))
    unidentified = tuple(
        f"{r['name']} is not identified" for r in params or [] if r["band"] == "unidentified"
    )
    view: dict[str, Any] = {
        "name": joint,
        "best": best,
        "params": params,
        "device": _device_panel(typed, joint, jr, exports),
        "warnings": [w for w in model.warnings if not w.startswith(unidentified)]
        if model is not None
        else [],
        "metric_cols": cols,
        "metric_rows": rows,
        "ranked": _rows(jr.ranking),
        "gaps": fidelity_gaps(_rows(jr.ranking)),
        "networks": _networks(models),
        "plots": None,
    }
    if not jp:
        return view, []
    figures = [
        _segment_figure(f"plot-{j}-seg-{k}", joint, seg) for k, seg in enumerate(jp.get("segments", []))
    ]
    if jp.get("envelope") or jp.get("points"):
        figures.append(
            _envelope_figure(f"plot-{j}-envelope", joint, jp.get("envelope") or {}, jp.get("points") or {})
        )
    figures.append(_convergence_figure(f"plot-{j}-convergence", joint, models))
    if model is not None and best is not None:
        figures += [
            f
            for f in (
                _correlation_figure(f"plot-{j}-correlation", joint, best, model.correlation),
                _residual_figure(f"plot-{j}-residuals", joint, best, model.metrics.segments),
            )
            if f
        ]
    kp = model.params.get("stiffness") if model is not None else None
    findings, diag = _residual_findings(
        j,
        joint,
        str(jp.get("family") or best),
        jp.get("segments", []),
        physics_dt,
        kp if isinstance(kp, int | float) else None,
    )
    plots: list[tuple[str, Any]] = []
    for f in figures:  # the findings stand just before the residual plot, else after the joint's plots
        if findings is not None and f["id"] == f"plot-{j}-residuals":
            plots.append(("findings", findings))
        plots.append(("div", {"id": f["id"], "label": figure_label(f)}))
    if findings is not None and not any(kind == "findings" for kind, _ in plots):
        plots.append(("findings", findings))
    view["plots"] = plots
    order = [
        i
        for kind, item in plots
        for i in ([d["div"] for d in item["items"]] if kind == "findings" else [item["id"]])
    ]
    by_id = {f["id"]: f for f in figures + diag}
    return view, [by_id[i] for i in order]  # in the order of the page's plot divs


def _verdict(typed: FitResult, result: dict | None, validation: dict | None) -> dict | None:
    """The stored verdict; for a result stored before verdicts, judged from what is at hand."""
    verdict = typed.verdict.to_json() if typed.verdict is not None else typed.extra.get("verdict")
    if verdict is None and result:
        from ..fitting.verdict import fit_verdict

        verdict = fit_verdict(typed, None, validation)
    return verdict


def split_text(fit: dict) -> str:
    """How a joint fit was split, for its page's and /compare's header: the plan the fit ran (its result) or,
    before it ran, the split its request asked for."""
    req = fit.get("request") or {}
    result = fit.get("result") or {}
    split = result.get("split") or {}
    if split:
        text = str(split.get("method") or "")
        n_train, n_val = len(split.get("train") or []), len(split.get("validation") or [])
        folds = split.get("folds")
        text += f" · {n_train} training, {n_val} validation segments"
        if folds:
            text += f" · {len(folds)} folds" + (f" by {split['folds_by']}" if split.get("folds_by") else "")
        return text
    if req.get("holdout"):
        return f"holdout {req['holdout']}: those recordings validate (asked)"
    if req.get("folds_by"):
        return f"leave-one-value-out folds by {req['folds_by']} (asked)"
    if req.get("folds"):
        return f"{req['folds']} folds over whole recordings (asked)"
    return "default: evenly spaced recordings validate (asked)"


def asked_rows(fit: dict) -> list[tuple[str, str]]:
    """What a joint fit was asked, as header rows: families, joints, budget, seed and the options that change it."""
    req = fit.get("request") or {}
    budget = f"{req.get('generations', '?')} generations × {req.get('population', '?')}"
    if req.get("budget_s"):
        budget += f", at most {num_text(req['budget_s'])} s"
    rows = [
        (
            "families",
            "auto (ladder)"
            if ("families" in req and req["families"] is None) or req.get("families") == ["auto"]
            else ", ".join(req.get("families") or req.get("models") or []),
        ),
        ("joints", ", ".join(req["joints"]) if req.get("joints") else "all"),
        ("budget", budget),
        ("seed", str(req.get("seed", ""))),
    ]
    options = {
        k: req[k]
        for k in ("decimation", "effort_mode", "joint_terms", "add_terms", "loss")
        if req.get(k) not in (None, [], 1, "explicit", "mse")
    }
    if options:
        rows.append(("options", ", ".join(f"{k}={v}" for k, v in options.items())))
    return rows


def _sections(
    result: dict | None, report_data: dict | None, exports: Sequence[str]
) -> tuple[FitResult, list[dict], list[dict]]:
    """A done fit's result, typed, each joint's section (the joint macro's input) and every figure, in the
    page's order (the order of the plot divs)."""
    typed = as_result(result or {})
    joints, figures = [], []
    for j, joint in enumerate(typed.joints):
        view, figs = _joint(j, joint, typed, (report_data or {}).get("joints", {}).get(joint), exports)
        joints.append(view)
        figures += figs
    return typed, joints, figures


def report_figures(result: dict | None, report_data: dict | None) -> list[dict]:
    """The Plotly figures ({id, data, layout}) a done joint fit's report draws, in the order of its plot divs:
    what GET /api/v1/fits/{id}/figures serves to the page and a standalone report holds inline."""
    return _sections(result, report_data, ())[2]


def figures_json(figures: list[dict]) -> str:
    """The figures as compact strict JSON; non-finite numbers become null (the common case, plain floats
    only, skips json_safe's walk over every point)."""
    try:
        return json.dumps(figures, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(json_safe(figures), allow_nan=False, separators=(",", ":"))


# a CLI flag that a stored sentence names (a verdict's reason, a warning, a finding, an export's refusal), as the
# served page says it: the export's query on its download link (`?set=`, `?at=`) and the fit form's fields
_PAGE_WORDS = (
    (re.compile(r"(?<![\w-])with --set\b"), "with the export's set=PARAM=VALUE query on its download link"),
    (re.compile(r"(?<![\w-])--set\b"), "the export's set query"),
    (re.compile(r"(?<![\w-])--at\b"), "at"),
    (re.compile(r"(?<![\w-])--(decimation|holdout)\b"), r"\1"),
)


def page_words(text: str) -> str:
    """A stored sentence in the served page's words: the CLI's flags (the verdict's "give a datasheet value
    with --set") become what the page and its API offer (the export's `set` query). The CLI and the standalone
    report keep the flags."""
    for pattern, words in _PAGE_WORDS:
        text = pattern.sub(words, text)
    return text


def _verdict_in_page_words(verdict: dict | None) -> dict | None:
    """The verdict with its reasons and checks in the page's words (page_words)."""
    if not verdict:
        return verdict
    out = dict(verdict)
    if isinstance(out.get("reasons"), list):
        out["reasons"] = [page_words(str(r)) for r in out["reasons"]]
    if isinstance(out.get("checks"), list):
        out["checks"] = [
            {**c, "reason": page_words(str(c.get("reason", "")))} if isinstance(c, dict) else c
            for c in out["checks"]
        ]
    return out


def _joint_in_page_words(view: dict[str, Any]) -> None:
    """A joint section's warnings, residual findings and device-panel refusals in the page's words."""
    view["warnings"] = [page_words(w) for w in view["warnings"]]
    for kind, item in view["plots"] or []:
        if kind == "findings":
            for f in item["items"]:
                f["sentence"] = page_words(str(f["sentence"]))
    for row in (view["device"] or {}).get("rows", []):
        row["error"] = page_words(row["error"])


def render_report(
    fit: dict,
    result: dict | None,
    report_data: dict | None,
    *,
    standalone: bool = False,
    exports: list[str] | None = None,
    fleet_warnings: list[str] | None = None,
    validation: dict | None = None,
) -> str:
    """The report page of one fit (a fit row dict): live progress (Server-Sent Events) while queued/running,
    the error when failed, else tables, plots, downloads and fleet drift warnings.

    Served (standalone=False), the page stays small: its plots load their figures from
    GET /api/v1/fits/{id}/figures, and Plotly once the page has loaded; its advice names what the page and the
    API offer, not CLI flags. standalone=True (the CLI's report.html, all.zip's) inlines plotly.min.js and the
    figures, so it draws offline, and leaves out the live parts and buttons.
    """
    status = fit.get("status", "succeeded")
    fid = str(fit.get("id") or "")
    title = fit.get("title") or f"fit {fid[:8]}".strip()
    page: dict[str, Any] = {
        "title": title,
        "nav": not standalone,
        "fit_id": fid,
        "fit": fit,
        "standalone": standalone,
        "exports": exports or [],
        "verdict": None,
        "split": split_text({**fit, "result": result or fit.get("result")}),
        "asked": asked_rows(fit),
    }
    if status in ("queued", "running"):
        return render("report.html", state="live", progress=float(fit.get("progress") or 0.0), **page)
    if status in ("failed", "cancelled"):
        return render("report.html", state="ended", **page)
    typed, joints, figures = _sections(result, report_data, exports or [])
    verdict = _verdict(typed, result, validation)
    if not standalone:
        for view in joints:
            _joint_in_page_words(view)
    from_api = not standalone and bool(fid)  # the served page of a stored fit: GET .../figures has them
    return render(
        "report.html",
        state="done",
        **{**page, "verdict": verdict if standalone else _verdict_in_page_words(verdict)},
        verdict_style=VERDICT_STYLE,
        fleet_warnings=fleet_warnings or [],
        joints=joints,
        figures=[] if from_api else json_safe(figures),
        figures_url=f"/api/v1/fits/{quote(fid, safe='')}/figures" if from_api and figures else None,
        validation=_validation(validation, verdict) if validation else None,
        plotly_js=plotly_inline() if standalone and figures else None,
    )
