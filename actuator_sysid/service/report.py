"""The fit report as one HTML page: parameter and metric tables per joint, and Plotly plots.

Served by the app (Plotly linked from /static/plotly.min.js) and written by the CLI as a standalone file
(Plotly inlined), from the same function, so both work without internet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ..files import json_safe
from ..fitting.diagnostics import diagnose
from ..fitting.result import Interval, ModelFit, NetFit, RankRow, SegmentMetrics, as_result
from ..models import parameters
from ..models.families import FAMILIES
from .pages import PLOTLY_URL, fmt_num, live_loss_html, page, plotly_js_path, script_json, status_html

_COLORS = {"measured": "#222222", "commanded": "#9aa0a6", "simulated": "#d62728", "train": "#0b5cad", "validation": "#b35c00",
           "network": "#2ca02c"}

_DASH = {"simulated": "dot", "commanded": "dash", "network": "dashdot"}

_PLOT_JS = """
for (const f of FIGURES) Plotly.newPlot(f.id, f.data, f.layout, {responsive: true, displaylogo: false});
"""


def _params_table(params: Mapping[str, Any], intervals: Mapping[str, Interval]) -> str:
    """Fitted values with unit, 95 % interval and whether the log identifies them."""
    rows = []
    for name, value in params.items():
        p = parameters.BY_NAME.get(name)
        unit, doc = (p.unit, p.doc) if p else ("", "")
        iv = intervals.get(name)
        if iv is None or not iv.to_json():
            band = '<td class="muted">—</td>'
        elif not iv.identified:
            band = f'<td class="warn">not identified: {escape(iv.reason or "")}</td>'
        elif iv.interval95:
            lo, hi = iv.interval95
            band = f"<td>[{fmt_num(lo)}, {fmt_num(hi)}]</td>"
        else:
            band = "<td>exact (neighbours fit clearly worse)</td>"
        rows.append(f"<tr><td><code>{escape(name)}</code></td><td>{fmt_num(value)}</td><td>{escape(unit)}</td>"
                    f"{band}<td class=\"muted\">{escape(doc)}</td></tr>")
    return ("<table><tr><th>parameter</th><th>value</th><th>unit</th><th>95 % interval</th><th>meaning</th></tr>"
            + "".join(rows) + "</table>")


def _network_section(models: Mapping[str, ModelFit]) -> str:
    """Each fitted actuator network against the best parametric model on the same segments: closed loop
    (position and velocity RMSE of the trajectory) and, with measured torque, open loop (torque RMSE)."""
    rows = []
    nets = {k: m for k, m in models.items() if isinstance(m, NetFit) and m.comparison}
    for kind, m in nets.items():
        cmp = m.comparison or {}
        tr = m.training
        metrics = [("closed loop: position RMSE", "position_rmse", "rad"),
                   ("closed loop: velocity RMSE", "velocity_rmse", "rad/s"),
                   ("open loop: torque RMSE", "torque_rmse", "N·m")]
        for label, key, unit in metrics:
            if key not in cmp:
                continue
            net, par = cmp[key].get("network"), cmp[key].get("parametric")
            ratio = f"{net / par:.2f}×" if isinstance(net, float) and isinstance(par, float) and par > 0 else "–"
            rows.append(f"<tr><td>{escape(kind)}</td><td>{escape(label)}</td><td>{fmt_num(net)}</td>"
                        f"<td>{fmt_num(par)}</td><td>{ratio}</td><td>{escape(unit)}</td></tr>")
        rows.append(f"<tr><td>{escape(kind)}</td><td colspan=\"5\" class=\"muted\">trained "
                    f"{escape(str(tr.get('mode', '?')).replace('_', ' '))} on {escape(str(tr.get('torque_source', '')))}"
                    f"; {m.n_params if m.has('n_params') else '?'} weights; input "
                    f"{escape(str(m.network.get('input_idx')))} steps back (MLP); "
                    f"{escape(str(m.assumptions if m.has('assumptions') else ''))}</td></tr>")
    if not rows:
        return ""
    first = next(iter(nets.values())).comparison or {}
    best, split = first["parametric_family"], first["split"]
    return (f"<h3>Actuator networks against {escape(best)}</h3><p>On the {escape(split)} segments; the ratio is "
            "network ÷ parametric (below 1: the network is better).</p><table><tr><th>network</th><th>metric</th>"
            f"<th>network</th><th>{escape(best)}</th><th>ratio</th><th>unit</th></tr>" + "".join(rows) + "</table>")


def _rows(ranking: Sequence[RankRow | Mapping[str, Any]]) -> list[RankRow]:
    return [r if isinstance(r, RankRow) else RankRow.from_json(r) for r in ranking]


def _ranking_table(ranking: Sequence[RankRow | Mapping[str, Any]]) -> str:
    """Families by validation error with the per-parameter penalty, and why the first one won."""
    ranked = _rows(ranking)
    if not ranked:
        return ""
    rows = "".join(f"<tr><td>{i + 1}</td><td>{escape(r.family)}</td><td>{fmt_num(r.position_rmse)}</td>"
                   f"<td>{r.n_params}</td><td>{fmt_num(r.score)}</td></tr>" for i, r in enumerate(ranked))
    why = ""
    if len(ranked) > 1:
        a, b = ranked[0], ranked[1]
        why = (f"<p>{escape(a.family)} wins: its {escape(str(a.split))} position RMSE {fmt_num(a.position_rmse)} "
               f"rad with {a.n_params} parameters scores {fmt_num(a.score)} against "
               f"{escape(b.family)}'s {fmt_num(b.score)} (RMSE × (1 + 0.01 · parameters)).</p>")
    gaps = "".join(f"<p>{escape(g)}</p>" for g in fidelity_gaps(ranked))
    return ("<table><tr><th>rank</th><th>family</th><th>position RMSE [rad]</th><th>parameters</th>"
            f"<th>score</th></tr>{rows}</table>{why}{gaps}")


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
            out.append(f"{native.family} fits at least as well as {r.family} on {r.split} {errors}: "
                       "the richer friction buys nothing on this log.")
        else:
            out.append(f"{native.family} is {100.0 * (a / b - 1.0):.0f} % worse on {r.split} than "
                       f"{r.family} {errors}: what exporting the consumer-native family gives up.")
    return out


def _convergence_figure(div: str, joint: str, models: Mapping[str, ModelFit]) -> dict:
    """Best loss of every family's fit (log scale): the start, least squares from it, each CMA-ES generation,
    and the final refine."""
    data = [{"type": "scatter", "mode": "lines", "name": fam, "y": (m.search or {}).get("convergence", [])}
            for fam, m in models.items()]
    return {"id": div, "data": data, "layout": {
        "title": {"text": f"{joint} · search convergence"}, "height": 320,
        "xaxis": {"title": {"text": "start · least squares · CMA-ES generations · refine"}},
        "yaxis": {"title": {"text": "best loss"}, "type": "log"}}}


def _correlation_figure(div: str, joint: str, family: str, corr: Mapping[str, Any]) -> dict | None:
    """Heat map of the parameter correlation matrix at the optimum."""
    names = corr.get("names") or []
    if len(names) < 2:
        return None
    return {"id": div, "data": [{"type": "heatmap", "z": corr["matrix"], "x": names, "y": names, "zmin": -1,
                                 "zmax": 1, "colorscale": "RdBu", "reversescale": True}],
            "layout": {"title": {"text": f"{joint} · {family} · parameter correlation"}, "height": 420,
                       "margin": {"l": 170, "b": 150}}}


def _residual_figure(div: str, joint: str, family: str, rows: Sequence[SegmentMetrics]) -> dict | None:
    """Position RMSE per segment, coloured by split."""
    if not rows:
        return None
    colours = ["#c06000" if r.split == "validation" else "#1f5fa8" for r in rows]
    return {"id": div, "data": [{"type": "bar", "x": [str(r.segment) for r in rows],
                                 "y": [r.position_rmse for r in rows], "marker": {"color": colours}}],
            "layout": {"title": {"text": f"{joint} · {family} · position RMSE per segment (blue train, orange "
                                         "validation)"}, "height": 300, "xaxis": {"title": {"text": "segment"}},
                       "yaxis": {"title": {"text": "RMSE [rad]"}}}}


def _residual_findings(j: int, joint: str, family: str, segments: list[dict], physics_dt: float | None,
                       stiffness: float | None) -> tuple[str, list[dict]]:
    """"What the residual shows": each finding's sentence beside its small plot (fitting/diagnostics.py)."""
    findings = diagnose(segments, physics_dt, stiffness)
    if not findings:
        return "", []
    items, figures = [], []
    for k, f in enumerate(findings):
        div = f"plot-{j}-diag-{k}"
        p = f["plot"]
        data = [{"type": "scattergl" if t["mode"] == "markers" and len(t["x"]) > 5000 else "scatter",
                 "mode": t["mode"], "name": t["name"], "x": t["x"], "y": t["y"],
                 "marker": {"size": 3, "opacity": 0.4}} for t in p["traces"]]
        figures.append({"id": div, "data": data, "layout": {
            "title": {"text": escape(p["title"]), "font": {"size": 12}}, "height": 260, "showlegend": len(data) > 1,
            "xaxis": {"title": {"text": escape(p["x_label"])}}, "yaxis": {"title": {"text": escape(p["y_label"])}},
            "margin": {"t": 36, "l": 60, "r": 10, "b": 40}, "legend": {"orientation": "h"}}})
        items.append(f'<div class="finding finding-{escape(f["kind"])}" style="flex:1 1 340px;min-width:300px">'
                     f'<p><strong>{escape(f["kind"].replace("_", " "))}</strong> '
                     f'<span class="muted">(strength {fmt_num(f["strength"])})</span>: {escape(f["sentence"])}</p>'
                     f'<div class="plot" id="{div}" style="height:270px"></div></div>')
    html = (f'<h3>What the residual shows</h3><p class="muted">{escape(joint)} · {escape(family)}: the position '
            "residual q − q_sim of the report traces, read for a friction band, a dead zone, missing friction, "
            "position-dependent error and lag.</p>"
            f'<div class="residual-findings" style="display:flex;flex-wrap:wrap;gap:12px">{"".join(items)}</div>')
    return html, figures


SPLITS = ("train", "validation")


def _split_metrics(m: ModelFit, split: str) -> dict[str, Any] | None:
    """One split's pooled metrics as stored (every key, the ones this version does not name too)."""
    v = m.metrics.train if split == "train" else m.metrics.validation
    return v.to_json() if v is not None else None


def _metrics_table(models: Mapping[str, ModelFit], best: str | None) -> str:
    """One row per family and split (train, validation); columns are the union of the scalar metric names."""
    cols: list[str] = []
    for m in models.values():
        for split in SPLITS:
            stored = _split_metrics(m, split) or {}
            cols += [k for k, v in stored.items() if k not in cols and not isinstance(v, list | dict)]
    rows = []
    for family, m in models.items():
        for split in SPLITS:
            values = _split_metrics(m, split)
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
    if seg.get("q_net"):  # the best actuator network, closed loop
        name = f"network ({seg.get('network', '')})"
        data += [line("q_net", "y", name, "network", True), line("qd_net", "y2", name, "network", False)]
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


def _validation_section(validation: dict, verdict: dict | None = None) -> str:
    """The exports' validation before they are offered: findings (rule code, where, why) and each export
    replayed through its consumer next to our own rollout. It says "passed" only when every check of the
    fit's verdict passed (fitting/verdict.py)."""
    from ..fitting.verdict import all_passed

    errors, warnings = validation.get("errors", 0), validation.get("warnings", 0)
    outside = sum(not j.get("within_tolerance", True) for r in (validation.get("replay") or {}).values()
                  for j in (r.get("joints") or {}).values())
    outside += sum(r.get("status") == "failed" for r in (validation.get("replay") or {}).values())
    if all_passed(verdict) and not errors and not warnings:
        state = "<strong>all passed</strong>"
    elif errors or outside:
        state = "<strong class=\"error\">failed</strong>"
    else:
        state = "<strong>done, with warnings</strong>"
    out = [f"<h2>Export validation</h2><p>{escape(str(validation.get('rule', '')))} and export checks: {state}: "
           f"{errors} error(s), {warnings} warning(s), {outside} replay(s) outside tolerance.</p>"]
    rows = []
    for fmt, r in (validation.get("replay") or {}).items():
        if r.get("status") != "ok":
            rows.append(f"<tr><td>{escape(fmt)}</td><td colspan=\"5\" class=\"muted\">{escape(str(r.get('status')))}: "
                        f"{escape(str(r.get('note', '')))}</td></tr>")
            continue
        for joint, j in r.get("joints", {}).items():
            ok = "within" if j.get("within_tolerance") else "<span class=\"error\">outside</span>"
            rows.append(f"<tr><td>{escape(fmt)} ({escape(str(r.get('consumer', '')))})</td><td><code>{escape(joint)}"
                        f"</code></td><td>{escape(str(j.get('family', '')))}</td><td>{fmt_num(j.get('rmse_replay'))}</td>"
                        f"<td>{fmt_num(j.get('rmse_ours'))}</td><td>{ok}</td></tr>")
    if rows:
        out.append("<h3>Replay through each consumer (validation segments)</h3><table class=\"replay\"><tr>"
                   "<th>export</th><th>joint</th><th>family</th><th>replay RMSE [rad]</th><th>our RMSE [rad]</th>"
                   "<th>10 % bound</th></tr>" + "".join(rows) + "</table>")
    findings = validation.get("findings") or []
    if findings:
        out.append("<h3>Findings</h3><table class=\"findings\"><tr><th>severity</th><th>code</th><th>where</th>"
                   "<th>message</th></tr>" + "".join(
                       f"<tr><td>{escape(f.get('severity', ''))}</td><td><code>{escape(f.get('code', ''))}</code></td>"
                       f"<td>{escape(f.get('where', ''))}</td><td>{escape(f.get('message', ''))}</td></tr>"
                       for f in findings) + "</table>")
    return "".join(out)


VERDICT_STYLE = {"good": "background:#eaf6ea;border-left:6px solid #2a8a2a",
                 "usable": "background:#fff6e0;border-left:6px solid #e0a000",
                 "poor": "background:#fdeaea;border-left:6px solid #b00000"}


def verdict_html(verdict: dict | None) -> str:
    """The fit's verdict (good | usable | poor) with its reasons, worst first, for the top of the report."""
    if not verdict:
        return ""
    word = str(verdict.get("verdict", "?"))
    checks = verdict.get("checks") or [{"status": "", "reason": r} for r in verdict.get("reasons", [])]
    mark = {"ok": "✓", "usable": "!", "poor": "✗"}
    items = "".join(f"<li>{mark.get(c.get('status', ''), '·')} {escape(str(c.get('reason', '')))}</li>"
                    for c in checks)
    return (f'<div class="verdict verdict-{escape(word)}" id="verdict" style="{VERDICT_STYLE.get(word, "")};'
            f'padding:.5rem 1rem;margin:.6rem 0"><strong style="font-size:1.3em">verdict: {escape(word)}</strong>'
            f"<ul style=\"margin:.3rem 0\">{items}</ul></div>")


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


_LIVE_JS = """
const FIT_ID=document.body.dataset.fit;
const es=new EventSource('/api/v1/fits/'+FIT_ID+'/events');
const bar=document.getElementById('live-progress'),pct=document.getElementById('live-pct'),
      msg=document.getElementById('live-msg'),st=document.getElementById('live-status'),logbox=document.getElementById('live-log');
es.addEventListener('progress',e=>{const d=JSON.parse(e.data);bar.value=d.progress;
  pct.textContent=Math.round(d.progress*100)+'%';msg.textContent=d.message||'';
  st.innerHTML='<span class="status-'+d.status+'">'+d.status+'</span>'});
es.addEventListener('log',e=>{const d=JSON.parse(e.data);logbox.textContent+=d.ts.slice(11,19)+' '+d.message+'\\n';
  logbox.scrollTop=logbox.scrollHeight});
es.addEventListener('end',e=>{es.close();const d=JSON.parse(e.data);st.innerHTML='<span class="status-'+d.status+'">'+d.status+'</span>';
  setTimeout(()=>location.reload(),300)});
"""

_ACTIONS_JS = """
for(const b of document.querySelectorAll('button[data-action]')){b.addEventListener('click',async()=>{
  const id=document.body.dataset.fit,a=b.dataset.action;
  if(a==='delete'){if(!confirm('Delete this fit and its files? This cannot be undone.'))return;
    if(await apiPost('/api/v1/fits/'+id,'DELETE'))location.href='/';return}
  if(a==='cancel'&&!confirm('Cancel this fit?'))return;
  if(await apiPost('/api/v1/fits/'+id+'/'+a))location.reload()})}
"""


def _actions(fit: dict, exports: list[str]) -> str:
    """Download buttons for every export, and cancel / retry / delete / compare as the status allows."""
    fid = escape(str(fit.get("id") or ""))
    status = fit.get("status")
    out = [f'<a class="download" href="/api/v1/fits/{fid}/export/{escape(n)}" download>download {escape(n)}</a>'
           for n in exports] if status == "succeeded" else []
    if out:  # every export and a standalone report.html in one zip
        out.insert(0, f'<a class="download" href="/api/v1/fits/{fid}/export/all.zip" download>download all (zip)</a>')
    if status in ("queued", "running"):
        out.append('<button data-action="cancel">cancel fit</button>')
    if status in ("failed", "cancelled"):
        out.append('<button data-action="retry">retry fit</button>')
    if status not in ("queued", "running"):
        out.append('<button class="danger" data-action="delete">delete fit</button>')
    if fit.get("dataset_id"):
        out.append(f'<a href="/datasets/{escape(str(fit["dataset_id"]))}">dataset</a>')
    return f'<p class="actions">{" ".join(out)}</p>'


def render_report(fit: dict, result: dict | None, report_data: dict | None, *, standalone: bool = False,
                  exports: list[str] | None = None, fleet_warnings: list[str] | None = None,
                  validation: dict | None = None) -> str:
    """The report page of one fit (a fit row dict): live progress (Server-Sent Events) while queued/running,
    the error when failed, else tables, plots, downloads and fleet drift warnings.

    standalone=True (the CLI's report.html) inlines plotly.min.js and leaves out the live parts and buttons.
    """
    status = fit.get("status", "succeeded")
    title = fit.get("title") or f"fit {str(fit.get('id') or '')[:8]}".strip()
    body = [f"<h1>{escape(title)}</h1>", _header(fit)]
    if not standalone:
        body.append(_actions(fit, exports or []))
    fid = escape(str(fit.get("id") or ""))
    if status in ("queued", "running"):
        progress = float(fit.get("progress") or 0.0)
        body.append(f"<p>status <span id=\"live-status\">{status_html(status)}</span> · "
                    f"<progress id=\"live-progress\" value=\"{progress:.3f}\" max=\"1\"></progress> "
                    f"<span id=\"live-pct\">{progress * 100:.0f}%</span> · "
                    f"<span id=\"live-msg\">{escape(fit.get('message') or '')}</span></p>"
                    f"{live_loss_html()}<h3>Log</h3><pre class=\"log\" id=\"live-log\"></pre>"
                    f"<script>{_LIVE_JS}{_ACTIONS_JS}</script>")
        return _page(title, body, fid, standalone)
    if status in ("failed", "cancelled"):
        what = "failed" if status == "failed" else "was cancelled"
        body.append(f"<h2>The fit {what}</h2><p class=\"error\">"
                    f"{escape(fit.get('error') or fit.get('message') or 'unknown error')}</p>"
                    f"<script>{_ACTIONS_JS}</script>")
        return _page(title, body, fid, standalone)

    typed = as_result(result or {})
    verdict = typed.verdict.to_json() if typed.verdict is not None else typed.extra.get("verdict")
    if verdict is None and result:  # a result stored before verdicts: judged from what is at hand
        from ..fitting.verdict import fit_verdict

        verdict = fit_verdict(typed, None, validation)
    body.insert(2, verdict_html(verdict))
    body += [f'<div class="warn">fleet drift: {escape(w)}</div>' for w in fleet_warnings or []]
    figures: list[dict] = []
    plots = (report_data or {}).get("joints", {})
    for j, (joint, jr) in enumerate(typed.joints.items()):
        best = jr.best_model
        models = jr.models
        body.append(f"<h2>Joint <code>{escape(joint)}</code> — best model: {escape(str(best))}</h2>")
        if best in models:
            model = models[best]
            body.append(f"<h3>Parameters of {escape(best)}</h3>{_params_table(model.params, model.intervals)}")
            body += [f'<div class="warn">{escape(w)}</div>' for w in model.warnings]
        body.append(f"<h3>Metrics</h3>{_metrics_table(models, best)}")
        body.append(f"<h3>Model ranking</h3>{_ranking_table(jr.ranking)}")
        body.append(_network_section(models))
        extra: list[dict | None] = [_convergence_figure(f"plot-{j}-convergence", joint, models)]
        if best in models:
            extra += [_correlation_figure(f"plot-{j}-correlation", joint, best, models[best].correlation),
                      _residual_figure(f"plot-{j}-residuals", joint, best, models[best].metrics.segments)]
        jp = plots.get(joint)
        if not jp:
            body.append('<p class="muted">No plot data for this joint.</p>')
            continue
        for k, seg in enumerate(jp.get("segments", [])):
            figures.append(_segment_figure(f"plot-{j}-seg-{k}", joint, seg))
        if jp.get("envelope") or jp.get("points"):
            figures.append(_envelope_figure(f"plot-{j}-envelope", joint, jp.get("envelope") or {},
                                            jp.get("points") or {}))
        kp = models[best].params.get("stiffness") if best in models else None
        dt = typed.assumptions.physics_dt if typed.assumptions.has("physics_dt") else None
        findings, diag = _residual_findings(j, joint, str(jp.get("family") or best), jp.get("segments", []), dt,
                                            kp if isinstance(kp, int | float) else None)
        figures += [f for f in extra if f]
        divs = [(f'{findings if f["id"] == f"plot-{j}-residuals" else ""}<div class="plot" id="{f["id"]}"></div>')
                for f in figures if f["id"].startswith(f"plot-{j}-")]
        body.append("".join(divs) + ("" if any(f and f["id"] == f"plot-{j}-residuals" for f in extra) else findings))
        figures += diag
    if validation:
        body.append(_validation_section(validation, verdict))
    if figures:
        if standalone:
            js = plotly_js_path().read_text(encoding="utf-8").replace("</script", "<\\/script")
            body.append(f"<script>{js}</script>")
        else:
            body.append(f'<script src="{PLOTLY_URL}"></script>')
        body.append(f"<script>const FIGURES = {script_json(json_safe(figures))};{_PLOT_JS}</script>")
    if not standalone:
        body.append(f"<script>{_ACTIONS_JS}</script>")
    return _page(title, body, fid, standalone)


def _page(title: str, body: list[str], fit_id: str, standalone: bool) -> str:
    html = page(title, "\n".join(body), nav=not standalone)
    return html.replace("<body>", f'<body data-fit="{fit_id}">', 1)
