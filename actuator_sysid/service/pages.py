"""HTML pages of the service: the page shell, dashboard, dataset, compare, fleet and login pages.

Server-rendered strings; their CSS and JS are the files in service/static/, inlined, so a page (and a
standalone report) loads no external assets (Plotly is served from /static)."""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from ..files import json_safe
from ..models import parameters

PLOTLY_URL = "/static/plotly.min.js"


def _static(name: str) -> str:
    """A CSS or JS source from service/static/, inlined by the pages (a standalone report needs no server)."""
    return (Path(__file__).resolve().parent / "static" / name).read_text(encoding="utf-8")


CSS = _static("site.css")
COMMON_JS = _static("common.js")  # apiError, apiPost: every page's fetch helpers


def plotly_js_path() -> Path:
    """plotly.min.js shipped inside the installed plotly package (served locally; no CDN)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


DOCS_ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
               "redoc.standalone.js": "text/javascript", "favicon.png": "image/png"}


def docs_asset_path(name: str) -> Path | None:
    """A Swagger UI / ReDoc file shipped by the installed fastapi-offline package, so /docs works offline."""
    if name not in DOCS_ASSETS:
        return None
    return Path(str(resources.files("fastapi_offline") / "static" / name))


_NOT_PAGES = ("/api/", "/openapi", "/metrics", "/healthz", "/static/")


def wants_html(path: str, accept: str) -> bool:
    """An error on a page route asked for by a browser (Accept names text/html) is answered with a page;
    API routes, and clients that do not ask for HTML, keep the JSON problem."""
    return not path.startswith(_NOT_PAGES) and "text/html" in accept


def render_error(status: int, detail: str) -> str:
    """An HTML error page: what was not found (or went wrong) and where to go from here."""
    title = {404: "Not found", 401: "Not logged in", 409: "Conflict", 422: "Not a valid request"}.get(status, "Error")
    body = (f"<h1>{status} · {escape(title)}</h1><p class=\"error\">{escape(detail)}</p>"
            '<p><a href="/">back to the dashboard</a> · <a href="/fleet">fleet</a> · '
            '<a href="/docs">API docs</a></p>')
    return page(f"{status} {title}", body, nav=True)


def script_json(obj: Any) -> str:
    """JSON for inline <script>: strict, with '</' escaped so data cannot close the script element."""
    return json.dumps(obj, allow_nan=False).replace("</", "<\\/")


NAV = ('<nav><a href="/"><b>actuator-sysid</b></a><a href="/">dashboard</a><a href="/fleet">fleet</a>'
       '<a href="/robots">robots</a><a href="/metrics">metrics</a><a href="/docs">API docs</a>'
       '<form class="right" method="post" action="/logout"><button>log out</button></form></nav>')


def page(title: str, body: str, head: str = "", nav: bool = False) -> str:
    """A complete HTML document around `body` (with the site navigation when `nav`)."""
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{CSS}</style><script>{COMMON_JS}</script>{head}</head>\n"
            f"<body>\n{NAV if nav else ''}{body}\n</body></html>\n")


def fmt_num(v: Any) -> str:
    """A number as a table cell: 4 significant digits; anything else as text."""
    if isinstance(v, bool) or v is None:
        return escape(str(v)) if v is not None else "—"
    if isinstance(v, int | float):
        return f"{v:.4g}"
    if isinstance(v, list | dict):
        return escape(json.dumps(v))
    return escape(str(v))


def status_html(status: str) -> str:
    return f'<span class="status-{escape(status)}">{escape(status)}</span>'


def plot_script(figures: list[dict]) -> str:
    """Plotly (served locally) and the code drawing `figures` ({id, data, layout}) into their divs."""
    if not figures:
        return ""
    return (f'<script src="{PLOTLY_URL}"></script><script>const FIGURES = {script_json(figures)};\n'
            "for (const f of FIGURES) Plotly.newPlot(f.id, f.data, f.layout, {responsive: true, "
            "displaylogo: false});</script>")


DEFAULT_MODELS = ("dcmotor", "dcmotor_delay", "delayed_pd")  # ticked in the form: a DC motor with and without
# delay, and the plain delayed PD — the families most logs need; the rest are one tick away
PRESETS = {  # the form's quick presets: budget fields and families (None: keep what is ticked)
    "quick": {"generations": 40, "population": 8, "seconds": 30, "models": ["dcmotor", "delayed_pd"]},
    "standard": {"generations": 200, "population": 16, "seconds": "", "models": list(DEFAULT_MODELS)},
    "thorough": {"generations": 600, "population": 32, "seconds": 900, "models": None},
}


_LIVE_LOSS_JS = _static("live_loss.js")  # a running fit's loss curve from its progress messages


def live_loss_html() -> str:
    """A live loss curve for a running fit's page: each progress message's "generation g/G, best loss L"
    (shown in #live-msg) becomes a point of that family's curve."""
    return (f'<div class="plot" id="live-loss" style="height:260px"></div><script src="{PLOTLY_URL}"></script>'
            f"<script>{_LIVE_LOSS_JS}</script>")


def _fit_settings(families: list[str], defaults: dict) -> str:
    """The fit form: every field POST /api/v1/fits takes (families, budget, joints, split, effort mode, nets)."""
    boxes = " ".join(f"<label><input type=\"checkbox\" name=\"model\" value=\"{escape(m)}\""
                     f"{' checked' if m in DEFAULT_MODELS else ''}> {escape(m)}</label>" for m in families)
    presets = "".join(f'<option value="{k}">{k}</option>' for k in PRESETS)
    return f"""<fieldset id="fit-settings"><legend>Fit settings</legend>
<p><label>preset <select id="preset"><option value="">custom</option>{presets}</select></label>
<span class="muted">quick: two families, 30 s; standard: the defaults; thorough: a longer search</span></p>
<p>models {boxes}</p>
<p><label>generations <input id="generations" type="number" min="1" max="10000" value="{defaults['generations']}"
 size="5"></label> <label>population <input id="population" type="number" min="4" max="4096"
 value="{defaults['population']}" size="5"></label> <label title="wall-clock budget for the whole fit: the search
 stops with its best so far">time budget [s] <input id="budget_s" type="number" min="1" max="86400" step="any"
 placeholder="none" size="6"></label> <label>seed <input id="seed" type="number" value="{defaults['seed']}"
 size="5"></label></p>
<p><label title="comma-separated joint names; empty: every joint">joints <input id="joints"
 placeholder="all, or e.g. hip,knee" size="18"></label>
<label title="Newton's implicit effort mode suits stiff gains">effort mode <select id="effort_mode">
<option value="explicit" selected>explicit</option><option value="implicit">implicit</option></select></label>
<label title="physics steps per log sample (commands held)">decimation <input id="decimation" type="number"
 min="1" max="64" value="1" size="3"></label></p>
<p><label title="the recordings whose segment metadata KEY equals VALUE validate; empty: evenly spaced
 recordings">holdout <input id="holdout" name="holdout" placeholder="KEY=VALUE, e.g. kp=800" size="18"></label>
 or <label title="k-fold cross-validation over whole recordings">folds <input id="folds" type="number" min="2"
 max="100" placeholder="k" size="3"></label> or <label title="leave-one-value-out: one fold per value of this
 metadata key">folds by <input id="folds_by" name="folds_by" placeholder="KEY, e.g. kp" size="10"></label></p>
<details><summary>actuator networks (mlp, lstm, gru options)</summary>
<textarea id="networks" rows="3" placeholder='{{"hidden": [32, 32], "epochs": 200, "mode": "auto"}}'></textarea>
<p class="muted">JSON object: input_idx, hidden, activation, hidden_size, num_layers, epochs, patience, lr, window,
in_loop_epochs, mode (auto | torque | in_the_loop); used only by the ticked network families.</p></details>
</fieldset>"""


_START_FIT_JS = "\nconst PRESETS=" + script_json(PRESETS) + ";\n" + _static("start_fit.js")  # the fit form

_INDEX_JS = _static("index.js")  # the dashboard: upload, compare, live fit rows


def _fits_table(fits: list[dict], names: dict[str, str], pick: bool = False) -> str:
    rows = "".join(
        f"<tr id=\"fit-{escape(f['id'])}\">"
        + (f"<td><input type=\"checkbox\" class=\"pick\" value=\"{escape(f['id'])}\"></td>" if pick else "")
        + f"<td><a href=\"/fits/{escape(f['id'])}\"><code>{escape(f['id'][:8])}</code></a></td>"
        f"<td>{escape(names.get(f['dataset_id'], f['dataset_id'][:8]))}</td>"
        f"<td class=\"st\">{status_html(f['status'])}</td><td><progress value=\"{f['progress']:.3f}\" max=\"1\">"
        f"</progress> <span class=\"pct\">{f['progress'] * 100:.0f}%</span></td>"
        f"<td class=\"msg\">{escape(f['error'] or f['message'] or '')}</td>"
        f"<td>{escape((f['created_at'] or '')[:19])}</td></tr>"
        for f in fits)
    head = ("<th></th>" if pick else "") + ("<th>id</th><th>dataset</th><th>status</th><th>progress</th>"
                                            "<th>message</th><th>created (UTC)</th>")
    empty = f'<tr><td colspan="{7 if pick else 6}" class="muted">none yet</td></tr>'
    return f"<table><tr>{head}</tr>{rows or empty}</table>"


def render_index(datasets: list[dict], fits: list[dict], families: list[str], defaults: dict,
                 counts: dict[str, int] | None = None, models: list[tuple[str, int]] | None = None) -> str:
    """The dashboard: counts, upload form, datasets (start fit, delete) and fits (live progress, compare)."""
    names = {d["id"]: d["name"] for d in datasets}
    counts = counts or {}
    cards = "".join(f'<div class="card">{escape(k)}<b>{v}</b></div>' for k, v in
                    [("datasets", len(datasets)), *counts.items()])
    ds_rows = "".join(
        f"<tr><td><a href=\"/datasets/{escape(d['id'])}\"><code>{escape(d['id'][:8])}</code></a></td>"
        f"<td>{escape(d['name'])}</td><td>{escape(d.get('actuator_model') or '')}</td>"
        f"<td>{escape(d.get('serial') or '')}</td>"
        f"<td>{escape(', '.join(d['summary'].get('joints', [])))}</td><td>{d['summary'].get('segments', '')}</td>"
        f"<td>{fmt_num(d['summary'].get('duration_s'))}</td><td>{fmt_num(d['summary'].get('rate_hz'))}</td>"
        f"<td>{len(all_warnings(d['summary']))}</td><td>{escape((d['created_at'] or '')[:19])}</td>"
        f"<td><button class=\"start-fit\" data-id=\"{escape(d['id'])}\">start fit</button> "
        f"<button class=\"delete-dataset danger\" data-id=\"{escape(d['id'])}\" data-name=\"{escape(d['name'])}\">"
        "delete</button></td></tr>"
        for d in datasets)
    fleet = " · ".join(f'<a href="/fleet?actuator_model={quote(m)}">{escape(m)}</a> ({n})' for m, n in models or [])
    body = f"""<h1>Dashboard</h1>
<div class="cards">{cards}</div>
<form id="upload"><fieldset><legend>Upload a joint log</legend>
<p><input type="file" name="file" required> <label>format <input name="format" placeholder="auto" size="8"></label>
<label title="for logs without joint names (PACE, Float64MultiArray, LeRobot, HDF5)">joint names
<input name="joint_names" placeholder="e.g. hip,knee" size="14"></label></p>
<p><label>metadata (JSON sidecar: joints, loads, gains; <code>actuator_model</code> and <code>serial</code> for the
fleet view; optional)<br>
<textarea name="metadata" rows="4" placeholder='{{"actuator_model": "AK80-9", "serial": "SN-0042", "joints": {{"j1": {{"mass": 0.5, "com_distance": 0.1}}}}}}'></textarea></label></p><button type="submit">upload</button> <span id="upload-msg"></span></fieldset></form>
<h2>Datasets</h2>
{_fit_settings(families, defaults)}
<table><tr><th>id</th><th>name</th><th>actuator model</th><th>serial</th><th>joints</th><th>segments</th>
<th>duration [s]</th><th>rate [Hz]</th><th>warnings</th><th>created (UTC)</th><th></th></tr>
{ds_rows or '<tr><td colspan="11" class="muted">none yet</td></tr>'}</table>
<h2>Fits</h2>
<p><button id="compare">compare the two ticked fits</button></p>
{_fits_table(fits, names, pick=True)}
<h2>Fleet</h2><p>{fleet or '<span class="muted">no dataset names an actuator_model yet</span>'}</p>
<p class="muted">API: <a href="/openapi.json">OpenAPI schema</a> · <a href="/docs">interactive docs</a> · <a href="/redoc">reference</a> · <a href="/healthz">health</a> · <a href="/metrics">metrics</a></p>
<script>{_START_FIT_JS}{_INDEX_JS}</script>"""
    return page("actuator-sysid", body, nav=True)


def _downsample(n: int, limit: int = 2000) -> slice:
    return slice(None, None, max(1, -(-n // limit)))


def all_warnings(summary: dict) -> list[str]:
    """A dataset's warnings: the reader's and the quality report's, each once."""
    quality = summary.get("quality") or {}
    return list(dict.fromkeys([*summary.get("warnings", []), *(quality.get("warnings") or [])]))


def commands_only(rec: Any) -> bool:
    """True when every logged position equals its command (q ≡ q_des): a trajectory plan, not a recording."""
    segs = [s for s in rec.segments if s.q_des is not None]
    if not segs:
        return False
    span = max(float(np.ptp(s.q_des)) for s in segs) or 1.0
    return all(np.allclose(s.q, s.q_des, rtol=0.0, atol=1e-9 * span) for s in segs)


def _table(head: list[str], rows: list[list[str]], empty: str = "none") -> str:
    """A table of pre-escaped cells (wide tables scroll inside themselves: see CSS)."""
    ths = "".join(f"<th>{h}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{ths}</tr>{trs or f'<tr><td colspan={len(head)} class=muted>{escape(empty)}</td></tr>'}</table>"


def _pct(v: Any) -> str:
    return f"{100 * v:.0f} %" if isinstance(v, int | float) else "—"


def _range(v: Any, unit: str = "") -> str:
    if not v:
        return "—"
    return f"{fmt_num(v[0])} … {fmt_num(v[1])}{(' ' + unit) if unit else ''}"


def _limit_cell(rep: dict | None, unit: str) -> str:
    """An effort or velocity plateau: the peak, the limit and where it comes from, time spent at it."""
    if not rep:
        return '<span class="muted">not logged</span>'
    text = f"max |·| {fmt_num(rep.get('max_abs'))} {unit}"
    if rep.get("limit"):
        text += (f"; limit {fmt_num(rep['limit'])} {unit} ({escape(str(rep.get('limit_source') or ''))}), "
                 f"at it {_pct(rep.get('fraction_at_limit'))} of the time")
    else:
        text += "; no plateau"
    return text


_SEG_META = ("kp", "kd", "vin", "trajectory", "gain_units", "recording")


def _segment_meta(meta: dict) -> list[str]:
    """A segment's metadata cells: the gains, supply and trajectory (BAM keeps the trajectory under "bam")."""
    bam = meta.get("bam")
    nested: dict = bam if isinstance(bam, dict) else {}
    cells = []
    for k in _SEG_META:
        v = meta.get(k, nested.get(k))
        cells.append(fmt_num(v) if v is not None else '<span class="muted">—</span>')
    return cells


def _quality_html(summary: dict, rec: Any) -> str:
    """The quality report the upload computed: per joint ranges, band and plateaus; per segment timing,
    free swing and metadata."""
    q = summary.get("quality") or {}
    joints = q.get("joints") or {}
    jrows = [[escape(name), _range(j.get("q_range"), "rad"),
              f"{fmt_num((j.get('velocity') or {}).get('max_abs'))} (p95 {fmt_num((j.get('velocity') or {}).get('p95_abs'))})",
              _pct((j.get("velocity") or {}).get("fraction_near_zero")), _range(j.get("excitation_band_hz"), "Hz"),
              _limit_cell(j.get("effort"), "N·m"), _limit_cell(j.get("velocity_limit"), "rad/s")]
             for name, j in joints.items()]
    joint_table = _table(["joint", "q range", "|qd| max [rad/s]", "nearly still", "excitation band",
                          "effort plateau", "velocity plateau"], jrows, "no quality report stored")
    segs = q.get("segments") or []
    metas = {s.name: s.metadata for s in rec.segments}
    srows = [[escape(str(s.get("name"))), fmt_num(s.get("samples")), fmt_num(s.get("duration_s")),
              fmt_num(s.get("rate_hz")), "yes" if s.get("free_swing") else "no", _pct(s.get("driven_fraction")),
              fmt_num(s.get("gap_before_s")), *_segment_meta(metas.get(s.get("name"), {}))] for s in segs]
    seg_table = _table(["segment", "samples", "duration [s]", "rate [Hz]", "free swing", "driven",
                        "gap before [s]", "kp", "kd", "vin [V]", "trajectory", "gain units", "recording"], srows,
                       "no segments")
    free = q.get("free_swing_segments") or []
    gaps = q.get("gaps") or {}
    facts = [("rate [Hz]", fmt_num(q.get("rate_hz"))), ("duration [s]", fmt_num(q.get("duration_s"))),
             ("free-swing segments", escape(", ".join(free)) if free else "none"),
             ("time gaps", f"{gaps.get('count', 0)} (longest {fmt_num(gaps.get('longest_s', 0.0))} s)"),
             ("samples dropped", fmt_num(q.get("samples_dropped", 0))),
             ("effort logged in every segment", "yes" if q.get("has_effort") else "no")]
    fact_table = "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts) + "</table>"
    return (f'<h2>Data quality</h2><div id="quality">{fact_table}<h3>Joints</h3>{joint_table}'
            f"<h3>Segments</h3>{seg_table}</div>")


def _plotted(x: np.ndarray) -> np.ndarray:
    """Plot data at 1 µ-unit resolution (µs, µrad, µN·m): far below a pixel, and a third of the page's bytes."""
    return np.round(np.asarray(x, dtype=np.float64), 6)


MAX_SEGMENT_PLOTS = 40  # segments drawn on the dataset page; the quality tables list every one


def _segment_figures(rec: Any) -> list[dict]:
    """Per segment: q and q_des, then qd and (when logged) τ on a second axis."""
    figures = []
    margin = {"t": 40, "l": 60, "r": 60, "b": 40}
    for k, seg in enumerate(rec.segments[:MAX_SEGMENT_PLOTS]):
        sl = _downsample(seg.n)
        t = _plotted(seg.t[sl])
        pos, vel = [], []
        for j, joint in enumerate(rec.joint_names):
            pos.append({"x": t, "y": _plotted(seg.q[sl, j]), "name": f"{joint} q", "type": "scatter", "mode": "lines"})
            if seg.q_des is not None:
                pos.append({"x": t, "y": _plotted(seg.q_des[sl, j]), "name": f"{joint} q_des", "type": "scatter",
                            "mode": "lines", "line": {"dash": "dash"}})
            vel.append({"x": t, "y": _plotted(seg.qd[sl, j]), "name": f"{joint} qd", "type": "scatter", "mode": "lines"})
            if seg.tau is not None:
                vel.append({"x": t, "y": _plotted(seg.tau[sl, j]), "name": f"{joint} τ", "type": "scatter", "mode": "lines",
                            "yaxis": "y2", "line": {"dash": "dot"}})
        figures.append({"id": f"seg-{k}", "data": pos, "layout": {
            "title": {"text": f"segment {escape(seg.name)} · position"}, "xaxis": {"title": {"text": "t [s]"}},
            "yaxis": {"title": {"text": "q, q_des [rad]"}}, "margin": margin,
            "legend": {"orientation": "h"}, "height": 300}})
        layout: dict[str, Any] = {
            "title": {"text": f"segment {escape(seg.name)} · velocity" + (" and effort" if seg.tau is not None
                                                                         else "")},
            "xaxis": {"title": {"text": "t [s]"}}, "yaxis": {"title": {"text": "qd [rad/s]"}}, "margin": margin,
            "legend": {"orientation": "h"}, "height": 260}
        if seg.tau is not None:
            layout["yaxis2"] = {"title": {"text": "τ [N·m]"}, "overlaying": "y", "side": "right"}
        figures.append({"id": f"segv-{k}", "data": vel, "layout": layout})
    return json_safe(figures)


def render_dataset(d: dict, rec: Any, fits: list[dict], families: list[str], defaults: dict) -> str:
    """A dataset: summary, every warning, the quality report, metadata, q/q_des and qd/τ per segment, its
    fits, fit and delete."""
    summary = d["summary"]
    rows = [("name", escape(d["name"])), ("id", f"<code>{escape(d['id'])}</code>"),
            ("project", escape(d["project"])), ("actuator model", escape(d.get("actuator_model") or "—")),
            ("serial", escape(d.get("serial") or "—")), ("joints", escape(", ".join(summary.get("joints", [])))),
            ("segments", fmt_num(summary.get("segments"))), ("samples", fmt_num(summary.get("samples"))),
            ("duration [s]", fmt_num(summary.get("duration_s"))), ("rate [Hz]", fmt_num(summary.get("rate_hz"))),
            ("format", escape(str(summary.get("source_format", "")))),
            ("velocity", escape(str(summary.get("velocity_source", "")))),
            ("effort logged", fmt_num(summary.get("has_effort"))),
            ("size", f"{d['size']:,} bytes"), ("sha256", f"<code>{escape(d['sha256'])}</code>"),
            ("uploaded (UTC)", escape((d["created_at"] or "")[:19]))]
    table = "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"
    every = all_warnings(summary)
    plan = ""
    if commands_only(rec):
        plan = ('<div class="warn plan" id="plan-warning"><b>This looks like a plan, not a recording:</b> every '
                "logged position q equals its command q_des, so nothing here shows how the actuator moved. A fit "
                "of it identifies nothing; upload the measured positions (and velocities, efforts) instead.</div>")
    warnings = plan + ("".join(f'<div class="warn">{escape(w)}</div>' for w in every)
                       or ('' if plan else '<p class="muted">no warnings</p>'))
    figures = _segment_figures(rec)
    plots = "".join(f'<div class="plot" style="height:{f["layout"]["height"]}px" id="{f["id"]}"></div>'
                    for f in figures)
    more = len(rec.segments) - MAX_SEGMENT_PLOTS
    if more > 0:
        plots += f'<p class="muted">the first {MAX_SEGMENT_PLOTS} segments are drawn; {more} more are listed above</p>'
    meta = escape(json.dumps(d.get("metadata") or {}, indent=1))
    body = f"""<h1>Dataset {escape(d['name'])}</h1>
{table}
<p><a class="download" href="/api/v1/datasets/{escape(d['id'])}/original" download>download the uploaded file</a>
<button class="delete-dataset danger" data-id="{escape(d['id'])}" data-name="{escape(d['name'])}">delete dataset</button></p>
<h2>Warnings</h2><div id="warnings">{warnings}</div>
{_quality_html(summary, rec)}
<h2>Start a fit</h2>{_fit_settings(families, defaults)}
<p><button class="start-fit" data-id="{escape(d['id'])}">start fit</button></p>
<h2>Fits of this dataset</h2>{_fits_table(fits, {d['id']: d['name']})}
<h2>Position, command, velocity and effort per segment</h2>{plots}
<details><summary>metadata</summary><pre>{meta}</pre></details>
{plot_script(figures)}<script>{_START_FIT_JS}</script>"""
    return page(f"dataset {d['name']}", body, nav=True)


def _best_params(result: dict | None) -> dict[tuple[str, str], tuple[str, Any, list[float] | None]]:
    """(joint, parameter) → (best family, value, its 95 % interval where identified)."""
    out = {}
    for joint, jr in ((result or {}).get("joints") or {}).items():
        best = jr.get("best_model")
        model = (jr.get("models") or {}).get(best) or {}
        for name, value in (model.get("params") or {}).items():
            iv = (model.get("intervals") or {}).get(name) or {}
            band = iv.get("interval95") if iv.get("identified", True) else None
            out[(joint, name)] = (best, value, band)
    return out


def _with_interval(value: Any, band: list[float] | None) -> str:
    if band is None or not isinstance(value, int | float):
        return fmt_num(value)
    return f"{fmt_num(value)} <span class=\"muted\">[{fmt_num(band[0])}, {fmt_num(band[1])}]</span>"


def _validation_rows(fa: dict, fb: dict) -> str:
    """Each joint's validation position RMSE / MAE of the best model, A beside B."""
    def errs(f: dict) -> dict[str, dict]:
        out = {}
        for joint, jr in (((f.get("result") or {}).get("joints")) or {}).items():
            m = ((jr.get("models") or {}).get(jr.get("best_model")) or {}).get("metrics") or {}
            out[joint] = m.get("validation") or {}
        return out
    ea, eb = errs(fa), errs(fb)
    return "".join(f"<tr><td>{escape(j)}</td><td>{fmt_num(ea.get(j, {}).get('position_rmse'))}</td>"
                   f"<td>{fmt_num(eb.get(j, {}).get('position_rmse'))}</td>"
                   f"<td>{fmt_num(ea.get(j, {}).get('position_mae'))}</td>"
                   f"<td>{fmt_num(eb.get(j, {}).get('position_mae'))}</td></tr>" for j in sorted(set(ea) | set(eb)))


def _trajectory_figures(joints: list[str], pa: dict | None, pb: dict | None) -> list[dict[str, Any]]:
    """Measured vs each fit's simulation on the first validation segment of each joint, overlaid."""
    figures = []
    for j, joint in enumerate(joints):
        data: list[dict[str, Any]] = []
        for label, plots, color in (("A", pa, "#d62728"), ("B", pb, "#1f77b4")):
            segs = (((plots or {}).get("joints") or {}).get(joint) or {}).get("segments") or []
            seg = next((sg for sg in segs if sg.get("split") == "validation"), segs[0] if segs else None)
            if seg is None:
                continue
            if not data:
                data.append({"x": seg["t"], "y": seg["q"], "name": f"measured ({seg['name']})", "type": "scatter",
                             "mode": "lines", "line": {"color": "#444"}})
            data.append({"x": seg["t"], "y": seg["q_sim"], "name": f"{label} simulated", "type": "scatter",
                         "mode": "lines", "line": {"color": color, "dash": "dash"}})
        if data:
            figures.append({"id": f"cmp-q-{j}", "data": data, "layout": {
                "title": {"text": f"{escape(joint)} · measured vs simulated (validation)"},
                "xaxis": {"title": {"text": "time [s]"}}, "yaxis": {"title": {"text": "position [rad]"}},
                "margin": {"t": 40, "l": 60, "r": 20, "b": 40}, "legend": {"orientation": "h"}}})
    return figures


def render_compare(a: tuple[dict, dict | None], b: tuple[dict, dict | None]) -> str:
    """Two fits side by side: headers, best-model parameters with the relative difference, envelopes overlaid."""
    (fa, pa), (fb, pb) = a, b
    ka, kb = _best_params(fa.get("result")), _best_params(fb.get("result"))
    rows = []
    for key in sorted(set(ka) | set(kb)):
        va, vb = ka.get(key, (None, None, None)), kb.get(key, (None, None, None))
        diff = "—"
        if isinstance(va[1], int | float) and isinstance(vb[1], int | float) and va[1]:
            diff = f"{100 * (vb[1] - va[1]) / abs(va[1]):+.1f}%"
        rows.append(f"<tr><td>{escape(key[0])}</td><td><code>{escape(key[1])}</code></td>"
                    f"<td>{escape(parameters.unit(key[1]))}</td>"
                    f"<td>{escape(str(va[0] or ''))} {_with_interval(va[1], va[2])}</td>"
                    f"<td>{escape(str(vb[0] or ''))} {_with_interval(vb[1], vb[2])}</td><td>{diff}</td></tr>")

    def head(f: dict) -> str:
        req = f.get("request") or {}
        items = [("fit", f"<a href=\"/fits/{escape(f['id'])}\"><code>{escape(f['id'][:8])}</code></a>"),
                 ("status", status_html(f["status"])), ("dataset", escape(str(f.get("dataset_name", "")))),
                 ("serial", escape(str(f.get("serial") or "—"))),
                 ("models", escape(", ".join(req.get("models") or []))),
                 ("budget", escape(f"{req.get('generations')} × {req.get('population')}")),
                 ("finished", escape(str(f.get("finished_at") or "")[:19]))]
        return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in items) + "</table>"

    figures = []
    joints = sorted(set((pa or {}).get("joints") or {}) | set((pb or {}).get("joints") or {}))
    for j, joint in enumerate(joints):
        data = []
        for label, plots, color in (("A", pa, "#d62728"), ("B", pb, "#1f77b4")):
            env = (((plots or {}).get("joints") or {}).get(joint) or {}).get("envelope") or {}
            for side, dash in (("effort_max", "solid"), ("effort_min", "dot")):
                if env.get(side):
                    data.append({"x": env.get("velocity", []), "y": env[side], "type": "scatter", "mode": "lines",
                                 "name": f"{label} {side}", "line": {"color": color, "dash": dash}})
        if data:
            figures.append({"id": f"cmp-{j}", "data": data, "layout": {
                "title": {"text": f"{escape(joint)} · torque–speed envelopes"},
                "xaxis": {"title": {"text": "velocity [rad/s]"}}, "yaxis": {"title": {"text": "effort [N·m]"}},
                "margin": {"t": 40, "l": 60, "r": 20, "b": 40}, "legend": {"orientation": "h"}}})

    figures = json_safe(_trajectory_figures(joints, pa, pb) + figures)
    body = f"""<h1>Compare fits</h1>
<div class="cols"><div><h2>A</h2>{head(fa)}</div><div><h2>B</h2>{head(fb)}</div></div>
<h2>Validation error of each joint's best model</h2>
<table><tr><th>joint</th><th>A position RMSE [rad]</th><th>B position RMSE [rad]</th>
<th>A position MAE [rad]</th><th>B position MAE [rad]</th></tr>{_validation_rows(fa, fb) or
'<tr><td colspan="5" class="muted">no validation data</td></tr>'}</table>
<h2>Parameters of each joint's best model</h2>
<p class="muted">value [95 % interval] where the fit identified it</p>
<table><tr><th>joint</th><th>parameter</th><th>unit</th><th>A</th><th>B</th><th>B vs A</th></tr>
{''.join(rows) or '<tr><td colspan="6" class="muted">no succeeded fit to compare</td></tr>'}</table>
{''.join(f'<div class="plot" id="{f["id"]}"></div>' for f in figures)}
{plot_script(figures)}"""
    return page("compare fits", body, nav=True)


def _fleet_trace(serial: str, pts: list[dict]) -> dict[str, Any]:
    """One serial's values over time, with its 95 % intervals as error bars (none where not identified)."""
    trace: dict[str, Any] = {"x": [p["time"] for p in pts], "y": [p["value"] for p in pts], "name": f"serial {serial}",
                             "type": "scatter", "mode": "lines+markers",
                             "text": [f"{p['fit_id'][:8]} · {p['family']} · {p['joint']}" for p in pts]}
    if any(p.get("low") is not None for p in pts):
        trace["error_y"] = {"type": "data", "symmetric": False, "visible": True,
                            "array": [p["high"] - p["value"] if p.get("high") is not None else 0 for p in pts],
                            "arrayminus": [p["value"] - p["low"] if p.get("low") is not None else 0 for p in pts]}
    return trace


def render_fleet(models: list[tuple[str, int]], summary: dict | None) -> str:
    """The fleet: actuator models, and for one of them every parameter over time per serial, with drift."""
    links = " · ".join(f'<a href="/fleet?actuator_model={quote(m)}">{escape(m)}</a> ({n} datasets)'
                       for m, n in models) or '<span class="muted">no dataset names an actuator_model yet: ' \
                                              'add "actuator_model" and "serial" to the sidecar</span>'
    body = [f"<h1>Fleet</h1><p>{links}</p>"]
    figures: list[dict[str, Any]] = []
    if summary is not None:
        body.append(f"<h2>{escape(summary['actuator_model'])}</h2><p>{summary['fits']} succeeded fits · serials: "
                    f"{escape(', '.join(summary['serials']) or '—')}</p>")
        body += [f'<div class="warn">drift: {escape(w["text"])} · <a href="/fits/{escape(w["fit_id"])}">fit '
                 f'{escape(w["fit_id"][:8])}</a></div>' for w in summary["warnings"]]
        flagged = {(w["fit_id"], w["param"], w["joint"]) for w in summary["warnings"]}
        for k, s in enumerate(summary["series"]):
            by_serial: dict[str, list[dict]] = {}
            for p in s["points"]:
                by_serial.setdefault(str(p["serial"] or "?"), []).append(p)
            data: list[dict[str, Any]] = [_fleet_trace(serial, pts) for serial, pts in sorted(by_serial.items())]
            bad = [p for p in s["points"] if (p["fit_id"], s["param"], p["joint"]) in flagged]
            if bad:
                data.append({"x": [p["time"] for p in bad], "y": [p["value"] for p in bad], "name": "drift",
                             "type": "scatter", "mode": "markers",
                             "marker": {"size": 14, "symbol": "circle-open", "color": "#e0a000", "line": {"width": 3}}})
            sources = sorted({p["time_source"] for p in s["points"]})
            unit = f" [{s['unit']}]" if s.get("unit") else ""
            figures.append({"id": f"fleet-{k}", "data": data, "layout": {
                "title": {"text": f"{escape(s['param'])}{escape(unit)} · {escape(', '.join(s['families']))}"},
                "height": 300, "xaxis": {"title": {"text": " / ".join(sources) + " (UTC)"}},
                "yaxis": {"title": {"text": f"{escape(s['param'])}{escape(unit)}"}},
                "margin": {"t": 40, "l": 60, "r": 20, "b": 40}, "legend": {"orientation": "h"}}})
        body.append("".join(f'<div class="plot" style="height:300px" id="{f["id"]}"></div>' for f in figures)
                    or '<p class="muted">no succeeded fits of this model yet</p>')
    body.append(plot_script(figures))
    return page("fleet", "\n".join(body), nav=True)


def render_login(next_url: str, error: str = "") -> str:
    """The login form: paste an API token; it is kept in an HttpOnly cookie for the pages."""
    err = f'<p class="error">{escape(error)}</p>' if error else ""
    body = f"""<h1>actuator-sysid · log in</h1>{err}
<form method="post" action="/login"><input type="hidden" name="next" value="{escape(next_url)}">
<p><label>API token <input type="password" name="token" size="50" autocomplete="off" required></label>
<button type="submit">log in</button></p></form>
<p class="muted">Make a token on the server with <code>actuator-sysid token create --project NAME</code>.</p>"""
    return page("log in", body)
