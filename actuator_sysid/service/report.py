"""The fit report as one HTML page: parameter and metric tables per joint, and Plotly plots.

Served by the app (Plotly linked from /static/plotly.min.js) and written by the CLI as a standalone file
(Plotly inlined), from the same function, so both work without internet.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..models import parameters
from .pages import PLOTLY_URL, fmt_num, page, plotly_js_path, script_json, status_html
from .storage import json_safe

_COLORS = {"measured": "#222222", "commanded": "#9aa0a6", "simulated": "#d62728", "train": "#0b5cad", "validation": "#b35c00"}

_DASH = {"simulated": "dot", "commanded": "dash"}

_PLOT_JS = """
for (const f of FIGURES) Plotly.newPlot(f.id, f.data, f.layout, {responsive: true, displaylogo: false});
"""


def _params_table(params: dict[str, Any]) -> str:
    rows = []
    for name, value in params.items():
        p = parameters.BY_NAME.get(name)
        unit, doc = (p.unit, p.doc) if p else ("", "")
        rows.append(f"<tr><td><code>{escape(name)}</code></td><td>{fmt_num(value)}</td><td>{escape(unit)}</td>"
                    f"<td class=\"muted\">{escape(doc)}</td></tr>")
    return ("<table><tr><th>parameter</th><th>value</th><th>unit</th><th>meaning</th></tr>"
            + "".join(rows) + "</table>")


SPLITS = ("train", "validation")


def _metrics_table(models: dict[str, Any], best: str | None) -> str:
    """One row per family and split (train, validation); columns are the union of the scalar metric names."""
    cols: list[str] = []
    for m in models.values():
        for split in SPLITS:
            values = m.get("metrics", {}).get(split) or {}
            cols += [k for k, v in values.items() if k not in cols and not isinstance(v, list | dict)]
    rows = []
    for family, m in models.items():
        for split in SPLITS:
            values = m.get("metrics", {}).get(split)
            cls = ' class="best"' if family == best else ""
            cells = ("".join(f"<td>{fmt_num(values.get(c))}</td>" for c in cols) if values
                     else f'<td colspan="{max(len(cols), 1)}" class="muted">no {split} segments</td>')
            rows.append(f"<tr{cls}><td>{escape(family)}{' ★' if family == best else ''}</td>"
                        f"<td class=\"split-{split}\">{split}</td>{cells}</tr>")
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    return f"<table><tr><th>model</th><th>split</th>{head}</tr>{''.join(rows)}</table>"


def _segment_figure(div: str, joint: str, seg: dict) -> dict:
    """Measured vs simulated position (top) and velocity (bottom) of one segment; the title marks the split."""
    split = seg.get("split", "")

    def line(y: str, axis: str, name: str, kind: str, show: bool) -> dict:
        return {"x": seg.get("t", []), "y": seg.get(y, []), "xaxis": "x", "yaxis": axis, "name": name,
                "type": "scatter", "mode": "lines", "legendgroup": kind, "showlegend": show,
                "line": {"color": _COLORS[kind], "width": 1.5, "dash": _DASH.get(kind, "solid")}}

    data = [line("q", "y", "measured", "measured", True), line("q_sim", "y", "simulated", "simulated", True),
            line("q_des", "y", "commanded q_des", "commanded", True),
            line("qd", "y2", "measured", "measured", False), line("qd_sim", "y2", "simulated", "simulated", False)]
    layout = {
        "title": {"text": f"{escape(joint)} · segment {escape(str(seg.get('name', '')))} · "
                          f"<span style='color:{_COLORS.get(split, '#222')}'>{escape(split)}</span>"},
        "xaxis": {"title": {"text": "t [s]"}, "anchor": "y2"},
        "yaxis": {"title": {"text": "q [rad]"}, "domain": [0.55, 1.0]},
        "yaxis2": {"title": {"text": "qd [rad/s]"}, "domain": [0.0, 0.45]},
        "margin": {"t": 50, "l": 60, "r": 20, "b": 40}, "legend": {"orientation": "h"},
    }
    return {"id": div, "data": data, "layout": layout}


def _envelope_figure(div: str, joint: str, envelope: dict, points: dict) -> dict:
    """The fitted torque–speed envelope (effort_max / effort_min vs velocity) over the (velocity, effort) points."""
    source = points.get("source", "measured")
    velocity = points.get("velocity", [])
    data = [
        {"x": velocity, "y": points.get("effort", []), "type": "scattergl" if len(velocity) > 5000 else "scatter",
         "mode": "markers",
         "name": f"{source} (velocity, effort)", "marker": {"size": 3, "opacity": 0.35, "color": "#555"}},
        {"x": envelope.get("velocity", []), "y": envelope.get("effort_max", []), "type": "scatter",
         "mode": "lines", "name": "effort_max", "line": {"color": "#d62728", "width": 2}},
        {"x": envelope.get("velocity", []), "y": envelope.get("effort_min", []), "type": "scatter",
         "mode": "lines", "name": "effort_min", "line": {"color": "#1f77b4", "width": 2}},
    ]
    layout = {"title": {"text": f"{escape(joint)} · torque–speed envelope"},
              "xaxis": {"title": {"text": "velocity [rad/s]"}, "zeroline": True},
              "yaxis": {"title": {"text": "effort [N·m]"}, "zeroline": True},
              "margin": {"t": 50, "l": 60, "r": 20, "b": 40}, "legend": {"orientation": "h"}}
    return {"id": div, "data": data, "layout": layout}


def _header(fit: dict) -> str:
    req = fit.get("request") or {}
    budget = f"{req.get('generations', '?')} generations × {req.get('population', '?')}"
    items = [
        ("status", status_html(fit.get("status", "?"))),
        ("dataset", escape(str(fit.get("dataset_name") or fit.get("dataset_id") or ""))),
        ("models", escape(", ".join(req.get("models") or []))),
        ("joints", escape(", ".join(req["joints"])) if req.get("joints") else "all"),
        ("budget", escape(budget)), ("seed", escape(str(req.get("seed", "")))),
        ("created", escape(str(fit.get("created_at", ""))[:19])),
    ]
    return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in items) + "</table>"


def render_report(fit: dict, result: dict | None, report_data: dict | None, *, standalone: bool = False) -> str:
    """The report page of one fit (a fit row dict); progress while queued/running, the error when failed.

    standalone=True inlines plotly.min.js so the file opens anywhere; otherwise it links PLOTLY_URL.
    """
    status = fit.get("status", "succeeded")
    title = fit.get("title") or f"fit {str(fit.get('id') or '')[:8]}".strip()
    body = ["<p><a href=\"/\">← all datasets and fits</a></p>" if not standalone else "",
            f"<h1>{escape(title)}</h1>", _header(fit)]
    if status in ("queued", "running"):
        progress = float(fit.get("progress") or 0.0)
        body.append(f"<p><progress value=\"{progress:.3f}\" max=\"1\"></progress> {progress * 100:.0f}% · "
                    f"{escape(fit.get('message') or '')}</p><p class=\"muted\">This page refreshes itself.</p>")
        return page(title, "\n".join(body), '<meta http-equiv="refresh" content="2">')
    if status == "failed":
        body.append(f"<h2>The fit failed</h2><p class=\"error\">{escape(fit.get('error') or 'unknown error')}</p>")
        return page(title, "\n".join(body))

    figures: list[dict] = []
    plots = (report_data or {}).get("joints", {})
    for j, (joint, jr) in enumerate((result or {}).get("joints", {}).items()):
        best = jr.get("best_model")
        models = jr.get("models", {})
        body.append(f"<h2>Joint <code>{escape(joint)}</code> — best model: {escape(str(best))}</h2>")
        if best in models:
            body.append(f"<h3>Parameters of {escape(best)}</h3>{_params_table(models[best].get('params', {}))}")
        body.append(f"<h3>Metrics</h3>{_metrics_table(models, best)}")
        jp = plots.get(joint)
        if not jp:
            body.append('<p class="muted">No plot data for this joint.</p>')
            continue
        for k, seg in enumerate(jp.get("segments", [])):
            figures.append(_segment_figure(f"plot-{j}-seg-{k}", joint, seg))
        if jp.get("envelope") or jp.get("points"):
            figures.append(_envelope_figure(f"plot-{j}-envelope", joint, jp.get("envelope") or {},
                                            jp.get("points") or {}))
        body.append("".join(f'<div class="plot" id="{f["id"]}"></div>'
                            for f in figures if f["id"].startswith(f"plot-{j}-")))
    if figures:
        if standalone:
            js = plotly_js_path().read_text(encoding="utf-8").replace("</script", "<\\/script")
            body.append(f"<script>{js}</script>")
        else:
            body.append(f'<script src="{PLOTLY_URL}"></script>')
        body.append(f"<script>const FIGURES = {script_json(json_safe(figures))};{_PLOT_JS}</script>")
    return page(title, "\n".join(body))
