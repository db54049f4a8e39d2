"""The pages do what the API does, at every width (issue 26; /compare from issue 24), in real headless Chromium
(Debian's /usr/bin/chromium through Playwright) against a real server, on the shared XL330 bench logs
(firmware kp 100, 200, 800) and the Go2 model:

- at 800 and 1280 px every action on the dashboard, the dataset, fit and robot pages is inside the viewport,
  and no element scrolls sideways but a wide table, in its own frame (its first column held: site.css);
- the fit page's device-gain panel states the SI stiffness at each logged kp, and its "export at" control
  downloads an export at kp = 800 that holds the stiffness the panel shows; the export route takes `at` as the
  CLI's `--at` does, and OpenAPI lists its four query parameters;
- a form error (a bound the form knows, a holdout only the server can judge) shows beside its field, with
  no dialog;
- no page asks anything of another host, and nothing it asks for is missing (the favicon included);
- /compare draws each fit's own traces (the same numbers its own report draws) and states each fit's split.

And pages an engineer reads at a glance, on the same fits and the same Go2 (one server, one pair of fits for
both sets of checks): no number breaks across lines, at 800 and 1280 px, on the XL330 fit report, the dashboard,
the Go2 robot page and a Go2 robot fit report; long ids are shown short with the whole id on hover and in the
copied text; no 95 % interval prints a bound beyond 1e6 (an interval spanning decades reads "not identified").
The robot fit report is the fit route's own renderer (robot_page.render_robot_fit) over a stored Go2 result
(tests/test_numbers_nowrap.py's `_go2_result`), so the page is drawn without running a fit.

No page shows a Python literal (True, False, None) as a table cell's or a value's text. The XL330 report is light:
its HTML holds no traces (its plots load them from GET /api/v1/fits/{id}/figures, and Plotly once the page has
loaded), and still draws every plot; the standalone report of the same stored fit holds Plotly and the same
figures inline and draws with the network cut off.
"""

from __future__ import annotations

import io
import json
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests
from conftest import Server, start_server
from test_browser import PLOTS_DRAWN, browser  # noqa: F401  (the module-scoped Chromium fixture)
from test_numbers_nowrap import UNIDENTIFIED, _go2_result

from actuator_sysid.service.db import Repository
from actuator_sysid.service.report import render_report
from actuator_sysid.service.robot_page import render_robot_fit
from actuator_sysid.service.routes.common import fit_context
from actuator_sysid.service.storage import Storage

ROOT = Path(__file__).resolve().parents[1]
BAM = ROOT.parent / "shared" / "data" / "bam-xl330" / "processed"
GO2 = ROOT.parent / "shared" / "data" / "go2-in-air" / "go2.xml"
CHEAP = {"families": ["dcmotor"], "budget": {"generations": 4, "population": 6}}  # a few seconds a fit
WIDTHS = (800, 1280)

pytestmark = pytest.mark.skipif(
    len(list(BAM.glob("*.json"))) != 12 or not GO2.is_file(),
    reason="the shared XL330 logs or the Go2 model are not in shared/data",
)


def _wait(server: Server, fid: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    fit: dict = {}
    while time.monotonic() < deadline:
        fit = requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=10).json()
        if fit["status"] not in ("queued", "running"):
            return fit
        time.sleep(0.3)
    raise AssertionError(f"fit {fid} still {fit.get('status')} after {timeout} s")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A server with the XL330 zip, two cheap fits of it (kp = 800 held out; the default split) and the Go2."""
    tmp = tmp_path_factory.mktemp("layout")
    server = start_server(tmp / "data", {"ACTUATOR_SYSID_WORKERS": "2"})
    try:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for p in sorted(BAM.glob("*.json")):
                z.write(p, f"bam-xl330/{p.name}")
        r = requests.post(
            server.url + "/api/v1/datasets", files={"file": ("bam-xl330.zip", buf.getvalue())}, timeout=120
        )
        assert r.status_code == 201, r.text
        ds = r.json()["id"]
        fits = {}
        for name, extra in (("holdout", {"holdout": "kp=800"}), ("default", {})):
            q = requests.post(
                server.url + "/api/v1/fits", json={"dataset_id": ds, **CHEAP, **extra}, timeout=30
            )
            assert q.status_code == 202, q.text
            fits[name] = q.json()["id"]
        robot = requests.post(
            server.url + "/api/v1/robots", files={"file": ("go2.xml", GO2.read_bytes())}, timeout=180
        )
        assert robot.status_code == 201, robot.text
        done = {name: _wait(server, fid) for name, fid in fits.items()}
        assert all(f["status"] == "succeeded" for f in done.values()), done
        yield {"server": server, "dataset": ds, "fits": done, "robot": robot.json()["id"]}
    finally:
        server.stop()


def _context(browser, **kw):  # noqa: F811
    """A context that aborts every request off this machine and records them, and every 4xx/5xx answer."""
    ctx = browser.new_context(**kw)
    off: list[str] = []
    failed: list[str] = []

    def route(r) -> None:
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            off.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    ctx.on(
        "response", lambda resp: failed.append(f"{resp.status} {resp.url}") if resp.status >= 400 else None
    )
    return ctx, off, failed


# what a page may not do at any width: an action outside the viewport, or an element that scrolls sideways (a
# table may: its numbers never wrap, so a wide one scrolls in its own frame, its first column sticky)
LAYOUT_JS = """() => {
  const W = window.innerWidth, bad = [];
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  for (const el of document.querySelectorAll('button, a.download, input[type=submit]')) {
    if (!visible(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.left < -0.5 || r.right > W + 0.5) bad.push('outside: ' + el.outerHTML.slice(0, 80) + ' ' + r.left + '..' + r.right);
  }
  for (const el of [document.documentElement, ...document.body.querySelectorAll('*')]) {
    const o = getComputedStyle(el).overflowX;
    const scrolls = el === document.documentElement || o === 'auto' || o === 'scroll';
    if (el.tagName === 'TABLE' && o === 'auto') {
      const first = el.querySelector('td:first-child, th:first-child');
      if (!first || getComputedStyle(first).position !== 'sticky') bad.push('table frame without a held column');
      continue;
    }
    if (scrolls && el.scrollWidth > el.clientWidth + 1)
      bad.push('scrolls: ' + el.tagName + '.' + el.className + ' ' + el.scrollWidth + ' > ' + el.clientWidth);
  }
  return bad;
}"""


def test_actions_fit_the_viewport_at_800_and_1280_px(glance) -> None:
    for (width, name), seen in glance.items():
        if name in VIEWPORT_PAGES:
            assert seen["actions"] > 0, (width, name)
            assert seen["layout"] == [], (width, name, seen["layout"])


def _panel_stiffness(page) -> dict[str, float]:
    """The device-gain panel's SI stiffness per logged kp, as the page shows it."""
    rows = page.locator("table.operating-points tr[data-at]")
    out = {}
    for k in range(rows.count()):
        at = rows.nth(k).get_attribute("data-at")
        kp = dict(item.split("=") for item in at.split(","))["kp"]
        out[kp] = float(rows.nth(k).locator("td").nth(1).inner_text())
    return out


def _stiffness_of(isaaclab_py: str) -> float:
    return float(re.search(r"^\s*stiffness=([-0-9.e+]+),", isaaclab_py, re.M).group(1))


def test_device_gain_panel_states_each_kp_and_exports_at_it(browser, site) -> None:  # noqa: F811
    server, fit = site["server"], site["fits"]["holdout"]
    gains = fit["result"]["joints"]["xl330"]["device_gains"]
    assert sorted(gains["stiffness_at"], key=float) == ["100", "200", "800"]
    ctx = browser.new_context(accept_downloads=True)
    page = ctx.new_page()
    try:
        page.set_default_timeout(30_000)
        page.goto(f"{server.url}/fits/{fit['id']}")
        panel = page.locator("#device-gains-xl330")
        assert "kp = 100" in panel.inner_text() and "gain_scale" in panel.inner_text()
        shown = _panel_stiffness(page)
        assert set(shown) == {"100", "200", "800"}
        for kp, value in gains["stiffness_at"].items():  # the page's 4 significant digits of the fit's value
            assert shown[kp] == pytest.approx(value, rel=5e-4), (kp, shown, gains)
        assert "at kp = 100" in page.locator("table.params").inner_text()  # the table's stiffness, marked
        page.select_option("p.export-at select.export-format", "isaaclab.py")
        page.select_option("p.export-at select.export-point", "kp=800,vin=7.4")
        with page.expect_download() as dl:
            page.click("a.export-at-link")
        text = Path(dl.value.path()).read_text()
        assert "kp=800" in text.splitlines()[0], text[:300]
        assert _stiffness_of(text) == pytest.approx(shown["800"], rel=6e-3)  # the file keeps 3 digits
        assert _stiffness_of(text) != pytest.approx(shown["100"], rel=0.5)
    finally:
        ctx.close()


def test_export_route_takes_at_as_the_cli_does_and_openapi_lists_its_parameters(site) -> None:
    server, fit = site["server"], site["fits"]["holdout"]
    gains = fit["result"]["joints"]["xl330"]["device_gains"]["stiffness_at"]
    url = f"{server.url}/api/v1/fits/{fit['id']}/export/isaaclab.py"
    at800 = requests.get(url, params={"at": "kp=800"}, timeout=60)
    assert at800.status_code == 200, at800.text
    assert _stiffness_of(at800.text) == pytest.approx(gains["800"], rel=6e-3)
    assert "kp800" in at800.headers["content-disposition"]
    stored = requests.get(url, timeout=30)
    assert _stiffness_of(stored.text) == pytest.approx(gains["100"], rel=6e-3)
    bad = requests.get(url, params={"at": "kq=800"}, timeout=30)
    assert bad.status_code == 422 and "KEY one of" in bad.json()["detail"], bad.text
    for stored_only in ("fit.json", "all.zip"):  # never silently ignored
        r = requests.get(f"{server.url}/api/v1/fits/{fit['id']}/export/{stored_only}?at=kp=800", timeout=30)
        assert r.status_code == 422 and "served as stored" in r.json()["detail"], (stored_only, r.text)
    spec = requests.get(server.url + "/openapi.json", timeout=30).json()
    params = spec["paths"]["/api/v1/fits/{fit_id}/export/{name}"]["get"]["parameters"]
    query = {p["name"]: p for p in params if p["in"] == "query"}
    assert set(query) == {"at", "set", "rename", "unidentified"}, query
    assert all(p.get("description") for p in query.values())


def test_form_errors_show_beside_their_field_without_a_dialog(browser, site) -> None:  # noqa: F811
    server = site["server"]
    ctx = browser.new_context(viewport={"width": 800, "height": 900})
    page = ctx.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    before = len(requests.get(server.url + "/api/v1/fits", timeout=10).json())
    try:
        page.set_default_timeout(30_000)
        page.goto(f"{server.url}/datasets/{site['dataset']}")
        assert page.get_attribute("#generations", "max") == "10000"  # the request's own bound
        page.fill("#generations", "20000")
        page.click("button.start-fit")
        err = page.locator("#err-generations")
        err.wait_for(state="visible")
        assert "between 1 and 10000" in err.inner_text(), err.inner_text()
        assert posts == []  # checked before sending
        box, field = err.bounding_box(), page.locator("#generations").bounding_box()
        assert abs(box["x"] - field["x"]) < 200 and 0 <= box["y"] - field["y"] < 80, (box, field)
        page.fill("#generations", "4")
        page.fill("#holdout", "kp=999")  # only the server knows the logged values
        page.click("button.start-fit")
        hold = page.locator("#err-holdout")
        hold.wait_for(state="visible")
        assert "kp" in hold.inner_text() and "999" in hold.inner_text(), hold.inner_text()
        assert page.locator("#err-generations").is_hidden()
        assert dialogs == [] and "/datasets/" in page.url
        assert len(requests.get(server.url + "/api/v1/fits", timeout=10).json()) == before
    finally:
        ctx.close()


def test_no_page_asks_another_host_or_misses_a_file(browser, site) -> None:  # noqa: F811
    server, fits = site["server"], site["fits"]
    ctx, off, failed = _context(browser)
    page = ctx.new_page()
    refused: list[str] = []  # what a Content-Security-Policy stopped before it became a request
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        page.set_default_timeout(30_000)
        for path in (
            "/",
            f"/datasets/{site['dataset']}",
            f"/fits/{fits['holdout']['id']}",
            f"/compare?a={fits['holdout']['id']}&b={fits['default']['id']}",
            f"/robots/{site['robot']}",
            "/robots",
            "/fleet",
            "/login",
            "/docs",
            "/redoc",
            "/metrics",
        ):
            page.goto(server.url + path, wait_until="networkidle")
            if path == "/redoc":
                page.wait_for_selector("[data-section-id^='operation/']", state="attached")
                page.wait_for_load_state("networkidle")
        assert off == [] and failed == [] and refused == [], (off, failed, refused)
        bundle = requests.get(server.url + "/static/docs/redoc.standalone.js", timeout=30).text
        assert "Redoc" in bundle and "https://cdn." not in bundle  # its footer logo comes from this server
        icon = requests.get(server.url + "/favicon.ico", timeout=10)
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    finally:
        ctx.close()


def _report_traces(page, url: str) -> dict[str, list[float]]:
    """A fit's own report: the simulated position trace of every segment, by segment name."""
    page.goto(url)
    page.wait_for_function(PLOTS_DRAWN)
    return page.evaluate(
        """() => { const out = {};
        for (const d of document.querySelectorAll('div[id^="plot-0-seg-"]')) {
          const name = d.layout.title.text.split(' · ')[1].replace('segment ', '');
          out[name] = d.data.find(t => t.name === 'simulated').y; }
        return out; }"""
    )


def test_compare_draws_each_fits_own_traces_and_states_its_split(browser, site) -> None:  # noqa: F811
    server, fits = site["server"], site["fits"]
    a, b = fits["holdout"], fits["default"]
    assert a["result"]["split"]["validation"] != b["result"]["split"]["validation"]
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        page.set_default_timeout(30_000)
        page.goto(f"{server.url}/compare?a={a['id']}&b={b['id']}")
        page.wait_for_function(PLOTS_DRAWN)
        drawn = page.evaluate(
            """() => [...document.querySelectorAll('div[id^="cmp-q-"]')].flatMap(d =>
                 d.data.filter(t => t.meta).map(t => ({...t.meta, y: t.y})))"""
        )
        splits = page.locator("td.split").all_inner_texts()
        assert "kp = 800" in splits[0] and "kp = 800" not in splits[1], splits
        assert page.locator("#split-differs").count() == 1
        own = {
            label: _report_traces(page, f"{server.url}/fits/{f['id']}") for label, f in (("A", a), ("B", b))
        }
        for label in ("A", "B"):  # each fit's first validation segment is drawn, with both fits' traces of it
            assert any(t["fit"] == label and t["split"] == "validation" for t in drawn), (label, drawn)
        picks = {  # the first segment (in the log's order) each fit validated on
            next(n for n in own[label] if n in f["result"]["split"]["validation"])
            for label, f in (("A", a), ("B", b))
        }
        assert sorted((t["segment"], t["fit"]) for t in drawn) == sorted(
            (n, label) for n in picks for label in ("A", "B")
        )
        for t in drawn:  # every drawn trace is that fit's own report trace of that segment
            assert t["y"] == own[t["fit"]][t["segment"]], (t["fit"], t["segment"])
            want = (
                "validation"
                if t["segment"] in (a if t["fit"] == "A" else b)["result"]["split"]["validation"]
                else "train"
            )
            assert t["split"] == want, t
    finally:
        ctx.close()


def test_upload_errors_read_as_errors_on_the_dashboard_and_the_robot_page(browser, site, tmp_path) -> None:  # noqa: F811
    """A refused upload says why in the error colour, announced (role alert), on both upload forms."""
    bad = tmp_path / "broken.csv"
    bad.write_text("t,joint,q,q_des\n0,knee,not-a-number,0\n")
    ctx = browser.new_context(viewport={"width": 800, "height": 900})
    page = ctx.new_page()
    try:
        page.set_default_timeout(30_000)
        for path, form, out in (
            ("/", "#upload", "#upload-msg"),
            (f"/robots/{site['robot']}", "#robot-upload", "#robot-upload-msg"),
        ):
            page.goto(site["server"].url + path)
            page.set_input_files(f"{form} input[type=file]", str(bad))
            page.click(f"{form} button[type=submit]")
            page.wait_for_function(f"document.querySelector('{out}').textContent.startsWith('Upload failed')")
            msg = page.locator(out)
            assert "line 2" in msg.inner_text() or "not-a-number" in msg.inner_text(), msg.inner_text()
            assert msg.get_attribute("role") == "alert" and "form-error" in (msg.get_attribute("class") or "")
            assert (
                page.evaluate(f"getComputedStyle(document.querySelector('{out}')).color") == "rgb(170, 0, 0)"
            )
    finally:
        ctx.close()


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


@pytest.fixture(scope="module")
def robot_report(site, tmp_path_factory: pytest.TempPathFactory) -> str:
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


def test_no_number_wraps_nor_wide_interval_nor_python_literal(glance) -> None:
    broken: list = []
    exponents: list = []
    literals: list = []
    long_ids: list = []
    for (width, name), seen in glance.items():
        cells = seen["cells"]
        assert len(cells) >= 5, (name, cells)  # the regex finds the tables' numbers
        broken += [(width, name, c["table"], c["text"], c["lines"]) for c in cells if c["lines"] != 1]
        exponents += [(width, name, e) for e in seen["exponents"]]
        literals += [(width, name, t) for t in seen["literals"]]
        ids = seen["ids"]
        if name == "dashboard" and len(ids) < 3:  # the datasets' and fits' ids
            long_ids.append((width, name, "no short ids"))
        long_ids += [  # shown short; the title and a copy hold the whole id
            (width, name, i)
            for i in ids
            if not (len(i["text"]) == 32 and i["title"] == i["text"] and i["shown"] < 0.5 * i["full"])
        ]
    assert broken == [], broken
    assert exponents == [], exponents
    assert literals == [], literals
    assert long_ids == [], long_ids
    for width in WIDTHS:
        spans_decades = glance[width, "robot fit report"]["spans_decades"]
        assert "not identified (spans 81 decades)" in spans_decades, (width, spans_decades)


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


# the pages both sets of checks read: each action in the viewport (LAYOUT_JS) on the first four, numbers whole
# (CELLS_JS and the rest) on all five; the robot fit report is the fit route's page of a stored result
VIEWPORT_PAGES = ("dashboard", "dataset page", "XL330 report", "robot page")


@pytest.fixture(scope="module")
def glance(browser, site, robot_report: str) -> dict[tuple[int, str], dict]:  # noqa: F811
    """What each page shows at 800 and 1280 px, read once for the viewport, number and verdict checks: each page
    loaded in a context that refuses other hosts, its plots drawn, then every check's figures read."""
    server = site["server"]
    pages = {  # name: path (None: the robot fit report, set as the page's content) and what marks it ready
        "dashboard": ("/", "#upload"),
        "dataset page": (f"/datasets/{site['dataset']}", "#seg-0 .main-svg"),
        "XL330 report": (f"/fits/{site['fits']['holdout']['id']}", "#plot-0-seg-0 .main-svg"),
        "robot page": (f"/robots/{site['robot']}", "#joints"),
        "robot fit report": (None, "#verdict"),
    }
    seen: dict[tuple[int, str], dict] = {}
    for width in WIDTHS:
        ctx, _off, _failed = _context(browser, viewport={"width": width, "height": 900})
        page = ctx.new_page()
        try:
            page.set_default_timeout(30_000)
            for name, (path, ready) in pages.items():
                if path is None:
                    page.goto(server.url + "/robots", wait_until="load")
                    page.set_content(robot_report, wait_until="load")
                else:
                    page.goto(server.url + path, wait_until="load")
                page.wait_for_selector(ready)
                if "main-svg" in ready:
                    page.wait_for_function(PLOTS_DRAWN)
                got = {
                    "actions": page.locator("button, a.download").count(),
                    "layout": page.evaluate(LAYOUT_JS),
                    "cells": page.evaluate(CELLS_JS),
                    "exponents": page.evaluate(EXPONENT_JS),
                    "literals": page.evaluate(LITERALS_JS),
                    "ids": page.evaluate(IDS_JS),
                }
                if path is None:
                    got["spans_decades"] = page.locator(
                        "#intervals tr:has-text('calf.friction')"
                    ).inner_text()
                    got["verdict"] = page.evaluate(VERDICT_JS)
                seen[width, name] = got
        finally:
            ctx.close()
    return seen


def test_the_robot_verdict_reads_at_a_glance(glance) -> None:
    """The Go2 robot report's verdict, at 800 and 1280 px: at most five lines, above the fold, with the headline
    figure (the held-out RMSE beside the model file's own terms', as the page prints them) and the worst reasons
    cut to a line; every check, the 54 unidentified terms whole among them, in a collapsed list below."""
    v = _go2_result([])["validation"]
    figure = [f"{v['rmse']:.4f} rad", f"{v['model_defaults_rmse']:.4f} rad"]
    long_reason = ", ".join(UNIDENTIFIED)
    seen = {width: glance[width, "robot fit report"]["verdict"] for width in WIDTHS}
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


# the runs table's visible rows, top to bottom: id, verdict and the validation error it sorts by (the last test of
# this module: it names and tags the held-out fit, which the dashboard then shows by its name, not its id)
RUNS_JS = """() => [...document.querySelectorAll('#runs tbody tr[id^="fit-"]')].filter(r => !r.hidden).map(r => ({
  id: r.id.slice(4), verdict: r.dataset.verdict, error: r.querySelector('td.err').dataset.v}))"""


def test_runs_table_sorts_by_validation_error_filters_by_verdict_and_compares_two(browser, site) -> None:  # noqa: F811
    """The dashboard's runs table, as an engineer used to W&B reads it: named and tagged runs (PATCH), sorted by
    validation error either way with unfinished runs last, filtered by verdict, kind and text, and two ticked
    rows opened in /compare."""
    server, fits = site["server"], site["fits"]
    a, b = fits["holdout"], fits["default"]
    named = requests.patch(
        f"{server.url}/api/v1/fits/{a['id']}",
        json={"name": "xl330 kp800 held out", "tags": ["xl330", "kp800"]},
    )
    assert named.status_code == 200 and named.json()["tags"] == ["xl330", "kp800"], named.text
    bad = requests.patch(f"{server.url}/api/v1/fits/{b['id']}", json={"tags": ["ok", "<b>"]})
    assert bad.status_code == 422 and "tag 2" in bad.json()["detail"], bad.text
    q = requests.post(server.url + "/api/v1/fits", json={"dataset_id": site["dataset"], **CHEAP}, timeout=30)
    assert q.status_code == 202, q.text
    cancelled = q.json()["id"]
    requests.post(f"{server.url}/api/v1/fits/{cancelled}/cancel", timeout=30)
    assert _wait(server, cancelled)["status"] == "cancelled"
    summaries = {f["id"]: f["summary"] for f in requests.get(server.url + "/api/v1/fits", timeout=30).json()}
    errors = {fid: summaries[fid]["error"] for fid in (a["id"], b["id"])}
    assert all(isinstance(e, float) and e > 0 for e in errors.values()), summaries
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    try:
        page.set_default_timeout(30_000)
        page.goto(server.url + "/")
        header = page.locator("#runs th", has_text="val. error")
        header.click()
        up = page.evaluate(RUNS_JS)
        header.click()
        down = page.evaluate(RUNS_JS)
        by_error = sorted(errors, key=errors.__getitem__)
        assert [r["id"] for r in up][:2] == by_error and [r["id"] for r in down][:2] == by_error[::-1], (
            up,
            down,
        )
        assert up[-1]["id"] == cancelled and down[-1]["id"] == cancelled  # no error: last either way
        verdict = summaries[a["id"]]["verdict"]
        page.select_option("#runs-verdict", verdict)
        shown = page.evaluate(RUNS_JS)
        assert shown and all(r["verdict"] == verdict for r in shown), shown
        assert {r["id"] for r in shown} == {
            f for f in (a["id"], b["id"]) if summaries[f]["verdict"] == verdict
        }
        page.select_option("#runs-verdict", "-")
        assert [r["id"] for r in page.evaluate(RUNS_JS)] == [cancelled]
        page.select_option("#runs-verdict", "")
        page.fill("#runs-filter", "kp800")  # a tag
        assert [r["id"] for r in page.evaluate(RUNS_JS)] == [a["id"]]
        assert "1 of 3 runs" in page.locator("#runs-count").inner_text()
        page.select_option("#runs-kind", "whole-robot")
        assert page.evaluate(RUNS_JS) == [] and page.locator("#runs-empty").is_visible()
        page.select_option("#runs-kind", "")
        page.fill("#runs-filter", "")
        row = page.locator(f"#fit-{a['id']}")
        assert "xl330 kp800 held out" in row.inner_text() and "kp800" in row.locator("td.tags").inner_text()
        page.check(f"#fit-{a['id']} input.pick")
        page.check(f"#fit-{b['id']} input.pick")
        page.click("#compare")
        page.wait_for_url("**/compare?*")
        assert a["id"] in page.url and b["id"] in page.url
    finally:
        ctx.close()
        requests.delete(f"{server.url}/api/v1/fits/{cancelled}", timeout=30)
