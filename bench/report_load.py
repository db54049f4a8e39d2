"""Report page benchmark: how heavy the XL330 fit report is and where its first load goes.

    .venv/bin/python bench/report_load.py              # 3 browser loads; a table, then one JSON line
    .venv/bin/python bench/report_load.py --loads 5

A real server (`actuator-sysid serve`, as tests/conftest.py starts it) gets the 12 shared XL330 logs as one zip
and one cheap joint fit of them (dcmotor, 4 generations × 6, kp = 800 held out). Then, for GET /fits/{id}:

- the HTML's size and the server's time for the first GET and the median of the next ones (render of the page);
- the figures the page draws: their JSON's size and server time (GET /api/v1/fits/{id}/figures where the page
  loads them from the API, else the page's inline `const FIGURES = ...`), and the browser's time to parse them;
- each first load in headless Chromium (a fresh context, so nothing cached): time to the first byte, the
  response end, DOMContentLoaded, the load event and every plot drawn (each `.plot` div holds a Plotly graph),
  and how long drawing every figure again takes in that page (Plotly's share); and, in another fresh context,
  how long fetching and running plotly.min.js alone takes (what any page drawing plots pays first).

Loopback only; the fit and each wait are bounded in time.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
BAM = ROOT.parent / "shared" / "data" / "bam-xl330" / "processed"
CHROMIUM = "/usr/bin/chromium"
FIT = {"families": ["dcmotor"], "budget": {"generations": 4, "population": 6}, "holdout": "kp=800"}

# every .plot div holds a drawn Plotly graph (its .main-svg), and there is at least one
DRAWN_JS = """() => { const divs = [...document.querySelectorAll('.plot')];
  return divs.length > 0 && divs.every(d => d.querySelector('.main-svg')); }"""

# the navigation's phases [ms from its start]
TIMING_JS = """() => { const n = performance.getEntriesByType('navigation')[0];
  return {ttfb: n.responseStart, response_end: n.responseEnd, dom_content_loaded: n.domContentLoadedEventEnd,
          load: n.loadEventEnd, plots: document.querySelectorAll('.plot').length,
          in_view: (performance.getEntriesByName('plots-in-view')[0] || {startTime: null}).startTime}; }"""

# parse the figures' JSON text and draw every figure again into a detached div: the browser's share of each
PARSE_DRAW_JS = """async text => {
  const t0 = performance.now(); const figs = JSON.parse(text); const t1 = performance.now();
  const host = document.createElement('div'); host.style.width = '1000px'; document.body.appendChild(host);
  for (const f of figs) { const d = document.createElement('div'); host.appendChild(d);
    await Plotly.newPlot(d, f.data, f.layout, {displaylogo: false}); }
  const t2 = performance.now(); host.remove();
  return {parse_ms: t1 - t0, draw_ms: t2 - t1, figures: figs.length}; }"""


# fetch, compile and run plotly.min.js in a page that has not seen it [ms]: what any page drawing plots pays first
PLOTLY_JS = """() => new Promise((done, fail) => { const t0 = performance.now();
  const s = document.createElement('script'); s.src = '/static/plotly.min.js';
  s.onload = () => done(performance.now() - t0); s.onerror = fail; document.head.appendChild(s); })"""

# what each load reports, as the table names it
PHASES = (
    ("ttfb", "time to first byte"),
    ("response_end", "response end"),
    ("dom_content_loaded", "DOMContentLoaded"),
    ("load", "load event"),
    ("in_view", "the plots in view drawn"),
    ("wall_plots_ms", "every plot drawn"),
    ("parse_ms", "JSON.parse of the figures"),
    ("plotly_script_ms", "plotly.min.js: fetch + run"),
    ("draw_ms", "Plotly: draw them again"),
)


def _cpu() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(BAM.glob("*.json")):
            z.write(p, f"bam-xl330/{p.name}")
    return buf.getvalue()


def _fit(url: str, timeout: float = 300.0) -> tuple[str, str]:
    """Upload the XL330 zip, start the cheap fit and wait for it: the dataset's and the fit's ids."""
    r = requests.post(url + "/api/v1/datasets", files={"file": ("bam-xl330.zip", _zip())}, timeout=120)
    r.raise_for_status()
    q = requests.post(url + "/api/v1/fits", json={"dataset_id": r.json()["id"], **FIT}, timeout=30)
    q.raise_for_status()
    fid = str(q.json()["id"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fit = requests.get(f"{url}/api/v1/fits/{fid}", timeout=10).json()
        if fit["status"] not in ("queued", "running"):
            if fit["status"] != "succeeded":
                raise RuntimeError(f"fit {fid} {fit['status']}: {fit.get('error')}")
            return str(r.json()["id"]), fid
        time.sleep(0.3)
    raise RuntimeError(f"fit {fid} still running after {timeout} s")


def _get(url: str) -> tuple[float, requests.Response]:
    t0 = time.perf_counter()
    r = requests.get(url, timeout=60)
    return (time.perf_counter() - t0) * 1e3, r


def _figures_text(url: str, fid: str, html: str) -> tuple[str, str, float | None]:
    """The figures' JSON text, where the page takes it from ("api" or "inline") and the route's time (None when
    the page holds them inline)."""
    inline = html.split("const FIGURES = ", 1)[1].split(";\n", 1)[0]
    if inline != "null":
        return inline, "inline", None
    ms, r = _get(f"{url}/api/v1/fits/{fid}/figures")
    r.raise_for_status()
    return r.text, "api", ms


def _browser_loads(url: str, fid: str, n: int, figures: str, ds: str) -> list[dict]:
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            for _ in range(n):
                ctx = browser.new_context(viewport={"width": 1280, "height": 900})
                page = ctx.new_page()
                try:
                    t0 = time.perf_counter()
                    page.goto(f"{url}/fits/{fid}", wait_until="load", timeout=60_000)
                    load = (time.perf_counter() - t0) * 1e3
                    page.wait_for_function(DRAWN_JS, timeout=60_000, polling=10)
                    drawn = (time.perf_counter() - t0) * 1e3
                    row = {"wall_load_ms": load, "wall_plots_ms": drawn, **page.evaluate(TIMING_JS)}
                    row.update(page.evaluate(PARSE_DRAW_JS, figures))
                finally:
                    ctx.close()
                ctx = browser.new_context(viewport={"width": 1280, "height": 900})  # the dataset's page
                page = ctx.new_page()
                try:
                    t0 = time.perf_counter()
                    page.goto(f"{url}/datasets/{ds}", wait_until="load", timeout=60_000)
                    row["dataset_load_ms"] = (time.perf_counter() - t0) * 1e3
                    page.wait_for_function(DRAWN_JS, timeout=60_000, polling=10)
                    row["dataset_plots_ms"] = (time.perf_counter() - t0) * 1e3
                finally:
                    ctx.close()
                ctx = browser.new_context()  # another fresh one: Plotly not cached
                page = ctx.new_page()
                try:
                    page.goto(f"{url}/healthz")
                    row["plotly_script_ms"] = page.evaluate(PLOTLY_JS)
                finally:
                    ctx.close()
                out.append(row)
        finally:
            browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loads", type=int, default=3, help="first loads in fresh browser contexts (1..20)")
    args = ap.parse_args()
    loads = min(max(args.loads, 1), 20)
    if len(list(BAM.glob("*.json"))) != 12:
        sys.exit(f"the 12 shared XL330 logs are not in {BAM}")
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import start_server

    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "data", {"ACTUATOR_SYSID_WORKERS": "1"})
        try:
            ds, fid = _fit(server.url)
            ds_ms, ds_page = _get(f"{server.url}/datasets/{ds}")
            ds_page.raise_for_status()
            first_ms, r = _get(f"{server.url}/fits/{fid}")
            r.raise_for_status()
            html = r.text
            again = statistics.median(_get(f"{server.url}/fits/{fid}")[0] for _ in range(5))
            figures, source, route_ms = _figures_text(server.url, fid, html)
            rows = _browser_loads(server.url, fid, loads, figures, ds)
        finally:
            server.stop()

    def med(key: str) -> float:
        return statistics.median(float(row[key]) for row in rows)

    figures_out = {
        "html_kb": len(r.content) / 1e3,
        "server_first_get_ms": first_ms,
        "server_get_median_ms": again,
        "figures_source": source,
        "figures_kb": len(figures.encode()) / 1e3,
        "figures_route_ms": route_ms,
        "first_load": rows[0],
        "median": {k: med(k) for k, _label in PHASES},
        "dataset_html_kb": len(ds_page.content) / 1e3,
        "dataset_first_get_ms": ds_ms,
        "dataset_load_ms": med("dataset_load_ms"),
        "dataset_plots_ms": med("dataset_plots_ms"),
        "loads": loads,
        "machine": f"{_cpu()}, {os.cpu_count()} cores",
    }
    print(f"XL330 report, fit {fid[:8]}: {figures_out['first_load']['plots']} plots, figures {source}")
    print(f"  on {figures_out['machine']}")
    print(f"  {'HTML':28s} {figures_out['html_kb']:9.1f} KB")
    print(f"  {'figures JSON':28s} {figures_out['figures_kb']:9.1f} KB")
    print(f"  {'server: first GET':28s} {first_ms:9.1f} ms   (next GETs, median {again:.1f} ms)")
    if route_ms is not None:
        print(f"  {'server: GET figures':28s} {route_ms:9.1f} ms")
    print(f"  {'browser first load':28s} {'first':>9s} {'median':>9s}  [ms]")
    for key, label in PHASES:
        print(f"  {label:28s} {float(rows[0][key]):9.1f} {med(key):9.1f}")
    print(
        f"XL330 dataset page: HTML {figures_out['dataset_html_kb']:.1f} KB, server first GET {ds_ms:.1f} ms; "
        f"browser load event {figures_out['dataset_load_ms']:.1f} ms, plots drawn "
        f"{figures_out['dataset_plots_ms']:.1f} ms (medians)"
    )
    print(json.dumps(figures_out))


if __name__ == "__main__":
    main()
