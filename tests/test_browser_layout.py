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
"""

from __future__ import annotations

import io
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


def test_actions_fit_the_viewport_at_800_and_1280_px(browser, site) -> None:  # noqa: F811
    server = site["server"]
    pages = {
        "/": "#upload",
        f"/datasets/{site['dataset']}": "#seg-0 .main-svg",
        f"/fits/{site['fits']['holdout']['id']}": "#plot-0-seg-0 .main-svg",
        f"/robots/{site['robot']}": "#joints",
    }
    for width in WIDTHS:
        ctx, _off, _failed = _context(browser, viewport={"width": width, "height": 900})
        page = ctx.new_page()
        try:
            page.set_default_timeout(30_000)
            for path, ready in pages.items():
                page.goto(server.url + path, wait_until="load")
                page.wait_for_selector(ready)
                if "main-svg" in ready:
                    page.wait_for_function(PLOTS_DRAWN)
                assert page.locator("button, a.download").count() > 0, path
                assert page.evaluate(LAYOUT_JS) == [], (width, path)
        finally:
            ctx.close()


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


# the runs table's visible rows, top to bottom: id, verdict and the validation error it sorts by
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
