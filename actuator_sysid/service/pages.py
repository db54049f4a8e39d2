"""HTML pages of the service: a shared page shell and the index. No external assets, no template engine."""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

PLOTLY_URL = "/static/plotly.min.js"

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1200px;
     padding:0 1rem;color:#222}
h1,h2,h3{font-weight:600} a{color:#0b5cad}
table{border-collapse:collapse;margin:.5rem 0 1rem} th,td{border:1px solid #ccc;padding:.25rem .6rem;
     text-align:left;font-variant-numeric:tabular-nums} th{background:#f3f3f3}
tr.best td{background:#eef7ee} .muted{color:#777} .error{color:#a00;white-space:pre-wrap}
.status-succeeded{color:#176a17} .status-failed{color:#a00} .status-running,.status-queued{color:#8a5a00}
progress{width:20rem} textarea{width:100%;font-family:monospace} fieldset{margin:1rem 0}
.plot{width:100%;height:420px} .split-train{color:#0b5cad} .split-validation{color:#b35c00}
"""


def plotly_js_path() -> Path:
    """plotly.min.js shipped inside the installed plotly package (served locally; no CDN)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


def script_json(obj: Any) -> str:
    """JSON for inline <script>: strict, with '</' escaped so data cannot close the script element."""
    return json.dumps(obj, allow_nan=False).replace("</", "<\\/")


def page(title: str, body: str, head: str = "") -> str:
    """A complete HTML document around `body`."""
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{CSS}</style>{head}</head>\n<body>\n{body}\n</body></html>\n")


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


_INDEX_JS = """
async function apiError(r){try{const j=await r.json();return typeof j.detail==='string'?j.detail
  :JSON.stringify(j.detail)}catch(e){return r.status+' '+r.statusText}}
document.getElementById('upload').addEventListener('submit',async ev=>{ev.preventDefault();
  const out=document.getElementById('upload-msg');out.textContent='uploading…';
  const r=await fetch('/api/v1/datasets',{method:'POST',body:new FormData(ev.target)});
  if(r.ok){location.reload()}else{out.textContent='Upload failed: '+await apiError(r)}});
for(const b of document.querySelectorAll('button.start-fit')){b.addEventListener('click',async()=>{
  const models=[...document.querySelectorAll('input[name=model]:checked')].map(e=>e.value);
  const body={dataset_id:b.dataset.id,models,seed:+document.getElementById('seed').value,
    budget:{generations:+document.getElementById('generations').value,
            population:+document.getElementById('population').value}};
  const r=await fetch('/api/v1/fits',{method:'POST',headers:{'Content-Type':'application/json'},
    body:JSON.stringify(body)});
  if(r.ok){location.href='/fits/'+(await r.json()).id}else{alert('Fit not started: '+await apiError(r))}})}
async function poll(){const r=await fetch('/api/v1/fits');if(!r.ok)return;let active=false;
  for(const f of await r.json()){const row=document.getElementById('fit-'+f.id);if(!row)continue;
    row.querySelector('.st').innerHTML='<span class="status-'+f.status+'">'+f.status+'</span>';
    row.querySelector('progress').value=f.progress;row.querySelector('.pct').textContent=Math.round(f.progress*100)+'%';
    row.querySelector('.msg').textContent=f.error||f.message||'';active||=f.status==='queued'||f.status==='running'}
  if(active)setTimeout(poll,1500)}
poll();
"""


def render_index(datasets: list[dict], fits: list[dict], families: list[str], defaults: dict) -> str:
    """The index: upload form, datasets (with a start-fit button each) and fits with their progress."""
    names = {d["id"]: d["name"] for d in datasets}
    ds_rows = "".join(
        f"<tr><td><code>{escape(d['id'][:8])}</code></td><td>{escape(d['name'])}</td>"
        f"<td>{escape(', '.join(d['summary'].get('joints', [])))}</td><td>{d['summary'].get('segments', '')}</td>"
        f"<td>{fmt_num(d['summary'].get('duration_s'))}</td><td>{fmt_num(d['summary'].get('rate_hz'))}</td>"
        f"<td>{len(d['summary'].get('warnings', []))}</td><td>{escape(d['created_at'][:19])}</td>"
        f"<td><button class=\"start-fit\" data-id=\"{escape(d['id'])}\">start fit</button></td></tr>"
        for d in datasets)
    fit_rows = "".join(
        f"<tr id=\"fit-{escape(f['id'])}\"><td><a href=\"/fits/{escape(f['id'])}\"><code>{escape(f['id'][:8])}"
        f"</code></a></td><td>{escape(names.get(f['dataset_id'], f['dataset_id'][:8]))}</td>"
        f"<td class=\"st\">{status_html(f['status'])}</td><td><progress value=\"{f['progress']:.3f}\" max=\"1\">"
        f"</progress> <span class=\"pct\">{f['progress'] * 100:.0f}%</span></td>"
        f"<td class=\"msg\">{escape(f['error'] or f['message'] or '')}</td><td>{escape(f['created_at'][:19])}</td></tr>"
        for f in fits)
    model_boxes = " ".join(
        f"<label><input type=\"checkbox\" name=\"model\" value=\"{escape(m)}\" checked> {escape(m)}</label>"
        for m in families)
    body = f"""<h1>actuator-sysid</h1>
<form id="upload"><fieldset><legend>Upload a joint log</legend>
<p><input type="file" name="file" required> format <input name="format" placeholder="auto" size="8"></p>
<p><label>metadata (JSON: joints, loads, gains; optional)<br>
<textarea name="metadata" rows="4" placeholder='{{"joints": {{"j1": {{"mass": 0.5, "com_distance": 0.1}}}}}}'></textarea></label></p><button type="submit">upload</button> <span id="upload-msg"></span></fieldset></form>
<h2>Datasets</h2>
<fieldset><legend>Fit settings</legend>models {model_boxes} &nbsp; generations
<input id="generations" type="number" min="1" value="{defaults['generations']}" size="5"> population
<input id="population" type="number" min="2" value="{defaults['population']}" size="5"> seed
<input id="seed" type="number" value="{defaults['seed']}" size="5"></fieldset>
<table><tr><th>id</th><th>name</th><th>joints</th><th>segments</th><th>duration [s]</th><th>rate [Hz]</th>
<th>warnings</th><th>created (UTC)</th><th></th></tr>{ds_rows or '<tr><td colspan="9" class="muted">none yet</td></tr>'}
</table>
<h2>Fits</h2>
<table><tr><th>id</th><th>dataset</th><th>status</th><th>progress</th><th>message</th><th>created (UTC)</th></tr>
{fit_rows or '<tr><td colspan="6" class="muted">none yet</td></tr>'}</table>
<p class="muted">API: <a href="/openapi.json">OpenAPI schema</a> · <a href="/docs">interactive docs</a> (loads Swagger UI from the internet) · <a href="/healthz">health</a></p>
<script>{_INDEX_JS}</script>"""
    return page("actuator-sysid", body)
