"""Pages an engineer reads at a glance: no number breaks across lines, at 800 and 1280 px, on the XL330 fit report,
the dashboard, the Go2 robot page and a Go2 robot fit report, in real headless Chromium; long ids are shown short
with the whole id on hover and in the copied text; and no 95 % interval prints a bound beyond 1e6 (an interval
spanning decades reads "not identified").

The XL330 fits, the dataset and the Go2 come from tests/test_browser_layout.py's `site`. The robot fit report is
the fit route's own renderer (robot_page.render_robot_fit) over a stored Go2 result in the shapes a robot fit
stores, with long values in its tables (errors of four digits, values such as 1.018e+04 and -0.837) and one
interval spanning 80 decades, so the page is drawn without running a fit.

No page shows a Python literal (True, False, None) as a table cell's or a value's text. The XL330 report is light:
its HTML holds no traces (its plots load them from GET /api/v1/fits/{id}/figures, and Plotly once the page has
loaded), and still draws every plot; the standalone report of the same stored fit holds Plotly and the same
figures inline and draws with the network cut off."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests
from test_browser import browser  # noqa: F401  (the module-scoped Chromium fixture)
from test_browser_layout import WIDTHS, site  # noqa: F401  (the XL330 fits and the Go2 of the layout checks)

from actuator_sysid.service.db import Repository
from actuator_sysid.service.report import render_report
from actuator_sysid.service.robot_page import render_robot_fit
from actuator_sysid.service.routes.common import fit_context
from actuator_sysid.service.storage import Storage
from actuator_sysid.service.templating import interval_text

# every table cell whose whole text is a number, an id, an "a/b" form or an interval, and whether each renders
# on one line: the client rects of the cell's contents (Range.getClientRects), lines of boxes that do not overlap
CELLS_JS = r"""() => {
  const NUM = String.raw`[-+−]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?%?`;
  const ID = String.raw`[0-9a-f]{8,64}`;
  const pat = new RegExp(String.raw`^(?:${NUM}(?:\s*[/×]\s*${NUM})?|${ID}|\[\s*${NUM},\s*${NUM}\s*\])$`, 'i');
  const out = [];
  for (const td of document.querySelectorAll('td, th')) {
    if (!td.getClientRects().length) continue;
    const text = td.textContent.replace(/\s+/g, ' ').trim();
    if (!pat.test(text)) continue;
    const range = document.createRange();
    range.selectNodeContents(td);
    // a rect starts a new line where it lies wholly below every rect before it (boxes of one line overlap)
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0).sort((a, b) => a.top - b.top);
    let lines = 0, bottom = -Infinity;
    for (const r of rects) {
      if (r.top >= bottom - 1) { lines += 1; bottom = r.bottom; } else bottom = Math.max(bottom, r.bottom);
    }
    out.push({text, lines, table: (td.closest('table') || {}).id || ''});
  }
  return out;
}"""

# the visible text of every interval "[lo, hi]" with an exponent beyond ±6
EXPONENT_JS = r"""() => (document.body.innerText.match(/\[[^\]\n]*\]/g) || [])
  .filter(s => /\d\.?\d*e[-+]?0*([7-9]|\d\d)/i.test(s))"""

# every id link: shown short, the whole id in its title and in the text a copy takes
IDS_JS = r"""() => [...document.querySelectorAll('code.id')].filter(c => c.getClientRects().length).map(c => ({
  text: c.textContent, title: (c.closest('[title]') || {}).title || '',
  shown: c.getBoundingClientRect().width, full: c.scrollWidth}))"""


# a Python literal shown as data: a cell, a value or a definition whose whole text is True/False/None, or a
# "key: None" / "key=None" item in a line (a sentence that says "None of ..." is no literal)
LITERALS_JS = r"""() => {
  const whole = /^(True|False|None)$/, item = /(?:^|[\s(,;])[\w.]+(?::|\s?=)\s?(True|False|None)(?=$|[\s),;])/;
  const out = [];
  for (const el of document.querySelectorAll('td, th, dd, dt, li, code, b, strong, span, option, label, p')) {
    if (!el.getClientRects().length) continue;
    const text = el.innerText.replace(/\s+/g, ' ').trim();
    if (whole.test(text) || (el.children.length === 0 && item.test(text))) out.push(el.tagName + ': ' + text.slice(0, 120));
  }
  return out;
}"""

# every .plot div (the live-loss plot of a running fit aside) holds a drawn Plotly graph
DRAWN_JS = """() => { const divs = [...document.querySelectorAll('.plot')];
  return divs.length > 0 && divs.every(d => d.querySelector('.main-svg')); }"""


# the 54 terms of a Go2 fit (12 joints' bias, 3 groups' 14 terms) that the log does not identify, named in one reason
UNIDENTIFIED = [f"{g}.term{k}" for g in ("hip", "thigh", "calf") for k in range(14)] + [
    f"bias{k}" for k in range(12)
]


def _go2_verdict(joints: list[str]) -> dict:
    """A Go2 robot fit's verdict in the shape robot_judge stores: 17 checks worst first, one naming 54 terms."""
    checks = [
        {
            "check": "identifiability",
            "status": "usable",
            "reason": f"{len(UNIDENTIFIED)} terms are not identified by this log: " + ", ".join(UNIDENTIFIED),
        },
        {
            "check": "at_bound",
            "status": "usable",
            "reason": "hip.armature sits at its upper search bound (0.5)",
        },
    ]
    checks += [
        {
            "check": "validation_error",
            "status": "ok",
            "reason": f"{j}: validation RMSE 0.0027 rad, 1 % of its range",
        }
        for j in joints[:12]
    ]
    checks += [
        {"check": "delay", "status": "ok", "reason": "the delay was scanned: 2 steps"},
        {"check": "gains", "status": "ok", "reason": "the PD gains are the log's own"},
        {"check": "export_replay", "status": "ok", "reason": "isaaclab replays the exports within tolerance"},
    ]
    return {"verdict": "usable", "reasons": [c["reason"] for c in checks], "checks": checks}


def _go2_result(joints: list[str]) -> dict:
    """A Go2 robot fit's result in the shapes a robot fit stores (the fields the robot fit page reads)."""
    groups = {
        g: {
            "joint_names_expr": f".*_{g}_joint",
            "joints": [j for j in joints if f"_{g}_" in j],
            "armature": 0.026963,
            "viscous_friction": -0.83712,
            "friction": 0.17634,
            "stiffness": 10183.0,
            "damping": 1.0181,
            "saturation_effort": 23.7,
            "velocity_limit": 30.1,
            "effort_limit": 23.7,
        }
        for g in ("hip", "thigh", "calf")
    }
    per_joint = {j: 0.0026963 + 1e-5 * k for k, j in enumerate(joints)}
    intervals = {
        f"{g}.{t}": {
            "estimate": 0.17634,
            "interval95": [0.17634 - 0.0123, 0.17634 + 0.0123],
            "identified": True,
        }
        for g in groups
        for t in ("armature", "viscous_friction", "friction")
    }
    intervals["calf.friction"] = {
        "estimate": 0.0012,
        "interval95": [1.611e-41, 6.998e39],
        "identified": False,
        "reason": "the log does not excite it",
    }
    decoupled = {
        "note": "each joint fitted alone",
        "rmse": 0.0041,
        "per_joint_rmse": {j: 0.0041 + 1e-5 * k for k, j in enumerate(joints)},
        "groups": {
            g: {t: e[t] * 1.1 for t in ("armature", "friction", "damping")} for g, e in groups.items()
        },
        "delay_steps": 2,
    }
    return {
        "kind": "robot",
        "verdict": _go2_verdict(joints),
        "bounds": {"at_bound": [{"term": "hip.armature", "value": 0.5, "bound": "upper", "limit": 0.5}]},
        "validation": {
            "split": "time",
            "fraction": 0.3,
            "split_time_s": 1.4,
            "replay": "coupled",
            "rmse": 0.0026963,
            "model_defaults_rmse": 0.01254,
            "model_defaults": "the MJCF's terms",
            "per_joint_rmse": per_joint,
            "model_defaults_per_joint_rmse": {j: 0.01254 for j in joints},
            "decoupled_fit": decoupled,
        },
        "encoder_bias": {j: -0.0008371 for j in joints},
        "groups": groups,
        "intervals": intervals,
        "identifiability": {"method": "Gauss-Newton covariance", "warnings": []},
        "delay_steps": 2,
        "delay": "scanned",
        "sim": {"dt": 0.00125, "decimation": 4},
        "gains": "from the log",
        "joint_mapping": "by name",
        "training": {"jacobians": 3, "stopped_on": "budget"},
        "world_steps_per_s": 10183.0,
        "wall_s": 61.8,
        "replays": {
            "part": {"duration_s": 0.6, "what": "the last 30 %"},
            "ours": {"rmse": 0.0026963},
            "definition": "relative difference",
            "consumers": {
                "isaaclab": {
                    "status": "ok",
                    "rmse_replay": 0.0027,
                    "relative_difference": 0.01,
                    "within_tolerance": True,
                }
            },
        },
        "exports": {},
        "assumptions": ["rigid links"],
    }


@pytest.fixture(scope="module")
def robot_report(site, tmp_path_factory: pytest.TempPathFactory) -> str:  # noqa: F811
    """The Go2 robot fit page, as the fit route renders it, over a stored result."""
    server = site["server"]
    robot = requests.get(f"{server.url}/api/v1/robots/{site['robot']}", timeout=30).json()
    joints = [j["name"] for j in robot["joints"]]
    fit = {
        "id": "0123456789abcdef0123456789abcdef",
        "status": "succeeded",
        "progress": 1.0,
        "message": "done",
        "request": {"robot_id": "f" * 32, "robot": {}},
        "dataset_id": "d" * 32,
        "dataset_name": "go2.pt",
        "created_at": "2026-12-05T09:00:00",
        "result": _go2_result(joints),
    }
    repo = Repository(f"sqlite:///{Path(tmp_path_factory.mktemp('nowrap')) / 'r.db'}")
    try:
        return render_robot_fit(fit, None, ["fit.json", "isaaclab.py"], repo, None)
    finally:
        repo.close()


def test_no_number_wraps_nor_wide_interval_nor_python_literal(browser, site, robot_report: str) -> None:  # noqa: F811
    server = site["server"]
    pages = {
        "XL330 report": f"/fits/{site['fits']['holdout']['id']}",
        "dashboard": "/",
        "robot page": f"/robots/{site['robot']}",
        "dataset page": f"/datasets/{site['dataset']}",
        "robot fit report": None,
    }
    broken: list = []
    exponents: list = []
    literals: list = []
    long_ids: list = []
    spans_decades = ""
    for width in WIDTHS:
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        page = ctx.new_page()
        try:
            page.set_default_timeout(30_000)
            for name, path in pages.items():
                if path is None:
                    page.goto(server.url + "/robots", wait_until="load")
                    page.set_content(robot_report, wait_until="load")
                else:
                    page.goto(server.url + path, wait_until="load")
                cells = page.evaluate(CELLS_JS)
                assert len(cells) >= 5, (name, cells)  # the regex finds the tables' numbers
                broken += [(width, name, c["table"], c["text"], c["lines"]) for c in cells if c["lines"] != 1]
                exponents += [(width, name, e) for e in page.evaluate(EXPONENT_JS)]
                literals += [(width, name, t) for t in page.evaluate(LITERALS_JS)]
                ids = page.evaluate(IDS_JS)
                if name == "dashboard" and len(ids) < 3:  # the datasets' and fits' ids
                    long_ids.append((width, name, "no short ids"))
                long_ids += [  # shown short; the title and a copy hold the whole id
                    (width, name, i)
                    for i in ids
                    if not (len(i["text"]) == 32 and i["title"] == i["text"] and i["shown"] < 0.5 * i["full"])
                ]
                if name == "robot fit report":
                    spans_decades = page.locator("#intervals tr:has-text('calf.friction')").inner_text()
        finally:
            ctx.close()
    assert broken == [], broken
    assert exponents == [], exponents
    assert literals == [], literals
    assert long_ids == [], long_ids
    assert "not identified (spans 81 decades)" in spans_decades, spans_decades


def test_interval_text_reads_not_identified_when_it_spans_decades() -> None:
    assert interval_text(0.1, 0.2) == "[0.1, 0.2]"
    assert interval_text(-0.5, 0.7, 0.1) == "[-0.5, 0.7]"
    for lo, hi, est in (
        (1.611e-41, 6.998e39, 0.0012),
        (1e-3, 2.0, None),
        (-3e6, 1.0, None),
        (-5e3, 5e3, 1.0),
    ):
        assert interval_text(lo, hi, est).startswith("not identified"), (lo, hi, est)
    assert interval_text(1e4, 1.1e4, 1.05e4) == "[1e+04, 1.1e+04]"  # a large, tight value stays a number


# the robot verdict block's lines (the client rects of its text nodes, lines counted as CELLS_JS counts a cell's;
# an element's own rect would cover the lines inside it), its bottom edge and its visible text
VERDICT_JS = r"""() => {
  const el = document.querySelector('#verdict');
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const rects = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const range = document.createRange();
    range.selectNodeContents(n);
    rects.push(...[...range.getClientRects()].filter(r => r.width > 0 && r.height > 0));
  }
  rects.sort((a, b) => a.top - b.top);
  let lines = 0, bottom = -Infinity;
  for (const r of rects) {
    if (r.top >= bottom - 1) { lines += 1; bottom = r.bottom; } else bottom = Math.max(bottom, r.bottom);
  }
  const details = document.querySelector('#verdict-details');
  return {lines, bottom: el.getBoundingClientRect().bottom, viewport: window.innerHeight, text: el.innerText,
          details: details ? {open: details.open, text: details.textContent} : null};
}"""


def test_the_robot_verdict_reads_at_a_glance(browser, site, robot_report: str) -> None:  # noqa: F811
    """The Go2 robot report's verdict, at 800 and 1280 px: at most five lines, above the fold, with the headline
    figure (the held-out RMSE beside the model file's own terms', as the page prints them) and the worst reasons
    cut to a line; every check, the 54 unidentified terms whole among them, in a collapsed list below."""
    v = _go2_result([])["validation"]
    figure = [f"{v['rmse']:.4f} rad", f"{v['model_defaults_rmse']:.4f} rad"]
    long_reason = ", ".join(UNIDENTIFIED)
    seen = {}
    for width in WIDTHS:
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        page = ctx.new_page()
        try:
            page.goto(site["server"].url + "/robots", wait_until="load")
            page.set_content(robot_report, wait_until="load")
            seen[width] = page.evaluate(VERDICT_JS)
        finally:
            ctx.close()
    for width, got in seen.items():
        text = " ".join(got["text"].split())
        assert 2 <= got["lines"] <= 5, (width, got["lines"], text)
        assert got["bottom"] <= got["viewport"], (width, got["bottom"])
        assert "verdict: usable" in text and all(f in text for f in figure), (width, text)
        assert "last 30 % of the log in time" in text, (width, text)  # the stated split
        assert "54 terms are not identified" in text and long_reason not in text, (width, text)
        assert got["details"] is not None and not got["details"]["open"], (width, got["details"])
        details = " ".join(got["details"]["text"].split())
        assert long_reason in details and "isaaclab replays the exports within tolerance" in details, details


def test_the_literal_check_finds_python_literals_and_passes_sentences(browser) -> None:  # noqa: F811
    """LITERALS_JS flags a cell or a "key: None" item, and not a sentence that says "None"."""
    page = browser.new_page()
    try:
        page.set_content(
            "<table><tr><td>None</td><td>0.5</td><td> False </td></tr></table><ul><li>stopped_on_budget: True</li>"
            "<li>the gains: none given</li></ul><p>None of the recordings validates; True to its log.</p>"
        )
        found = page.evaluate(LITERALS_JS)
    finally:
        page.close()
    assert found == ["TD: None", "TD: False", "LI: stopped_on_budget: True"], found


def _figure_divs(html: str) -> list[str]:
    return re.findall(r'<div class="plot" id="([^"]+)"', html)


def test_the_xl330_report_is_light_and_still_draws_every_plot(browser, site) -> None:  # noqa: F811
    """The served XL330 report: at most 500 KB of HTML, no trace inline; GET .../figures answers the figures of
    its plot divs, in their order, with the segments' traces; in Chromium every plot is drawn from them."""
    server, fit = site["server"], site["fits"]["holdout"]
    r = requests.get(f"{server.url}/fits/{fit['id']}", timeout=60)
    assert r.status_code == 200 and len(r.content) <= 500_000, len(r.content)
    html = r.text
    assert "const FIGURES = null;" in html and f"/api/v1/fits/{fit['id']}/figures" in html
    divs = _figure_divs(html)
    assert len(divs) >= 12 + 3, divs  # 12 segments, the envelope, convergence, correlation, residuals ...
    got = requests.get(f"{server.url}/api/v1/fits/{fit['id']}/figures", timeout=60)
    assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
    assert got.headers.get("content-encoding") == "gzip"  # requests asks for it; the figures are megabytes
    figures = got.json()
    assert [f["id"] for f in figures] == divs
    segments = [f for f in figures if f["id"].startswith("plot-0-seg-")]
    assert len(segments) == 12
    for f in segments:  # measured and simulated position, each a trace of the same times
        traces = {t["name"]: t for t in f["data"]}
        assert (
            len(traces["measured"]["y"])
            == len(traces["simulated"]["y"])
            == len(traces["measured"]["x"])
            > 100
        )
        assert traces["measured"]["y"] != traces["simulated"]["y"]
    envelope = next(f for f in figures if f["id"] == "plot-0-envelope")
    assert envelope["data"][0]["type"] == "scatter" and 100 < len(envelope["data"][0]["x"]) <= 2000
    for bad, code in (("0" * 32, 404), ("no-such-fit", 404)):
        miss = requests.get(f"{server.url}/api/v1/fits/{bad}/figures", timeout=30)
        assert miss.status_code == code and "detail" in miss.json(), miss.text
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    failed: list[str] = []
    page.on(
        "response", lambda resp: failed.append(f"{resp.status} {resp.url}") if resp.status >= 400 else None
    )
    try:
        page.set_default_timeout(60_000)
        page.goto(f"{server.url}/fits/{fit['id']}", wait_until="load")
        page.wait_for_function(DRAWN_JS)
        drawn = page.evaluate("() => [...document.querySelectorAll('.plot')].map(d => [d.id, d.data.length])")
        assert [d for d, _n in drawn] == divs
        assert all(n == len(f["data"]) for (_d, n), f in zip(drawn, figures, strict=True)), drawn
        assert page.locator(".plot .main-svg").count() >= len(divs)
        text = page.inner_text("body")
    finally:
        ctx.close()
    assert failed == [], failed
    assert "--set" not in text  # the page's advice in the page's words
    if any("--set" in c["reason"] for c in fit["result"]["verdict"]["checks"]):
        assert "the export's set=PARAM=VALUE query" in text


def test_the_standalone_report_holds_its_figures_and_draws_offline(browser, site) -> None:  # noqa: F811
    """render_report(standalone=True) over the stored XL330 fit: Plotly and the figures the API serves, inline;
    in Chromium with every request refused, each plot is drawn."""
    server, fid = site["server"], site["fits"]["holdout"]["id"]
    repo = Repository(f"sqlite:///{server.data_dir / 'actuator_sysid.db'}")
    try:
        fit, plots = fit_context(repo, Storage(server.data_dir), fid, None)
    finally:
        repo.close()
    assert plots is not None
    html = render_report(fit, fit["result"], plots, standalone=True)
    inline = json.loads(re.search(r"const FIGURES = (.*?);\n", html).group(1))
    served = requests.get(f"{server.url}/api/v1/fits/{fid}/figures", timeout=60).json()
    assert inline == served and [f["id"] for f in inline] == _figure_divs(html)
    assert "/static/" not in html and "/api/v1/fits" not in html
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    asked: list[str] = []

    def refuse(route) -> None:
        asked.append(route.request.url)
        route.abort()

    ctx.route("**/*", refuse)
    page = ctx.new_page()
    try:
        page.set_default_timeout(60_000)
        page.set_content(html, wait_until="load")
        page.wait_for_function(DRAWN_JS)
        assert page.locator(".plot .main-svg").count() >= len(inline)
    finally:
        ctx.close()
    assert asked == [], asked
