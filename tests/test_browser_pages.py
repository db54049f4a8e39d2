"""Pages in real headless Chromium (Debian's /usr/bin/chromium through Playwright): /docs and /redoc render
with every request off this machine aborted, no page scrolls sideways at 800 px, the fit form posts what
the API takes (a seconds budget, a holdout) and its fit's page draws a live loss curve, shows the stage after
the search and cancels the fit in it; report pages show the verdict: good for a good fit, poor with the
reasons for a plan (commands only) and for exports that replay outside their tolerance, never "passed"."""

from __future__ import annotations

import json
import time
from urllib.parse import urlparse

import pytest
import requests
from conftest import Server, make_recording, upload_recording
from export_helpers import short_recording
from test_browser import PLOTS_DRAWN, browser  # noqa: F401  (the module-scoped Chromium fixture)

from actuator_sysid.datasets.canonical import sidecar_for, write_table
from actuator_sysid.models.families import FAMILIES

KPS = (5.0, 5.0, 8.0, 5.0)  # one recording at kp = 8: the holdout the form asks for
ENCODER_OFFSET = 0.1  # [rad] in the site's log: a fit claims it, MuJoCo's export cannot hold it
QUICK = {"models": ["dcmotor"], "budget": {"generations": 8, "population": 6}}


def _wait(server: Server, fid: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fit = requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=10).json()
        if fit["status"] not in ("queued", "running"):
            return fit
        time.sleep(0.2)
    raise AssertionError(f"fit {fid} still {fit['status']} after {timeout} s")


def _queue(server: Server, ds: str, **body) -> str:
    r = requests.post(server.url + "/api/v1/fits", json={"dataset_id": ds, **body}, timeout=30)
    assert r.status_code == 202, r.text
    return r.json()["id"]


@pytest.fixture(scope="module")
def site(server: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Server, str, str, dict[str, str]]:
    """The worker's shared server (these pages need no setting of their own) with one dataset (an actuator
    model and serial, no free swing, an encoder offset) and one succeeded fit of it that claims the offset; a
    good fit (the Isaac Lab bench log, a little noise) and a fit of the same log's commands alone (q ≡ q_des: a
    plan), all three run to their end before the first test, so the fit the form starts is the only one in flight."""
    tmp = tmp_path_factory.mktemp("pages")
    rec = make_recording(joints=("hip", "knee"), segments=len(KPS))
    for seg, kp in zip(rec.segments, KPS, strict=True):
        seg.metadata["kp"] = kp
        seg.q = seg.q + ENCODER_OFFSET
    write_table(rec, tmp / "bench_log.csv", sidecar=False)
    meta = {**sidecar_for(rec), "actuator_model": "bench-motor", "serial": "SN-7"}
    r = requests.post(
        server.url + "/api/v1/datasets",
        files={"file": ("bench_log.csv", (tmp / "bench_log.csv").read_bytes())},
        data={"metadata": json.dumps(meta)},
        timeout=60,
    )
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    fid = _queue(
        server,
        ds,
        models=["dcmotor"],
        budget={"generations": 8, "population": 6},
        joint_terms=["armature", "friction", "viscous_friction", "encoder_offset"],
    )
    good = short_recording(n_segments=5, noise_q=2e-3)
    plan = short_recording(n_segments=5)
    for s in plan.segments:
        s.q, s.qd = s.q_des.copy(), s.qd_des.copy()
    more = {
        name: upload_recording(server, r, tmp / f"{name}.csv")["id"]
        for name, r in (("good", good), ("plan", plan))
    }
    verdict_fits = {name: _queue(server, d, **QUICK) for name, d in more.items()}
    fit = _wait(server, fid)
    assert fit["status"] == "succeeded", fit
    for fid_more in verdict_fits.values():  # test_report_pages_show_the_verdict_and_its_reasons judges them
        _wait(server, fid_more)
    return server, ds, fit["id"], {**verdict_fits, **{f"{k}_dataset": v for k, v in more.items()}}


def _offline_context(browser, **kw):  # noqa: F811
    """A browser context that aborts every request not to 127.0.0.1: the network unplugged."""
    ctx = browser.new_context(**kw)
    blocked: list[str] = []

    def route(r) -> None:
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    return ctx, blocked


def test_api_docs_render_with_the_network_unplugged(browser, site) -> None:  # noqa: F811
    server, _ds, _fid, _more = site
    paths = requests.get(server.url + "/openapi.json", timeout=10).json()["paths"]
    operations = sum(len(v) for v in paths.values())
    ctx, blocked = _offline_context(browser)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.set_default_timeout(30_000)
        page.goto(server.url + "/docs")
        page.wait_for_selector(".opblock")
        assert page.locator(".opblock").count() == operations
        assert "/api/v1/fits" in page.locator(".opblock-summary-path").all_inner_texts()
        page.goto(server.url + "/redoc")
        page.wait_for_selector("[data-section-id^='operation/']", state="attached")
        assert page.locator("[data-section-id^='operation/']").count() == operations
        assert blocked == [] and errors == [], (blocked, errors)
    finally:
        ctx.close()


def test_no_page_scrolls_sideways_at_800_px(browser, site) -> None:  # noqa: F811
    server, ds, fid, _more = site
    ctx, _blocked = _offline_context(browser, viewport={"width": 800, "height": 900})
    page = ctx.new_page()
    try:
        page.set_default_timeout(30_000)
        pages = {
            "/": "#upload",
            f"/datasets/{ds}": "#seg-0 .main-svg",
            f"/fits/{fid}": "#plot-0-seg-0 .main-svg",
            "/fleet?actuator_model=bench-motor": ".plot .main-svg",
            f"/compare?a={fid}&b={fid}": "table",
            "/fits/nope": "h1",
            "/docs": ".opblock",
        }
        for path, ready in pages.items():
            page.goto(server.url + path, wait_until="load")
            page.wait_for_selector(ready)
            if "main-svg" in ready:
                page.wait_for_function(PLOTS_DRAWN)
            widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            assert widths[0] <= widths[1], (path, widths)
            if path.startswith("/datasets/"):  # a log without free swing says so on its page
                assert "no free-swing segment" in page.locator("#warnings").inner_text()
                assert page.locator("#quality table").count() == 3
            if path == "/fits/nope":
                assert "404" in page.locator("h1").inner_text() and "'nope'" in page.content().replace(
                    "&#x27;", "'"
                )
    finally:
        ctx.close()


def test_fit_form_posts_a_seconds_budget_and_a_holdout_and_cancel_in_the_last_stage_cancels(
    browser,  # noqa: F811
    site,
) -> None:
    server, ds, _fid, _more = site
    ctx = browser.new_context()
    page = ctx.new_page()
    page.on("dialog", lambda d: d.accept())
    try:
        page.set_default_timeout(30_000)
        page.goto(f"{server.url}/datasets/{ds}")
        ticked = page.evaluate(
            "() => [...document.querySelectorAll('input[name=model]:checked')].map(e => e.value)"
        )
        assert sorted(ticked) == ["dcmotor", "dcmotor_delay", "delayed_pd"]  # not all 13 by default
        page.select_option("#preset", "quick")
        assert page.input_value("#budget_s") == "30"
        page.fill("#generations", "10000")  # the seconds budget, not the generations, ends this search
        page.fill(
            "#population", "256"
        )  # wide generations: a quiet machine's search would otherwise stall in 1 s
        page.fill("#budget_s", "8")
        page.fill("#holdout", "kp=8")
        page.fill("#joints", "knee")
        page.select_option("#effort_mode", "implicit")
        with page.expect_request(lambda r: r.url.endswith("/api/v1/fits") and r.method == "POST") as req:
            page.click("button.start-fit")
        posted = req.value.post_data_json
        assert posted["budget"] == {"generations": 10000, "population": 256, "seconds": 8}, posted
        assert (
            posted["holdout"] == "kp=8"
            and posted["joints"] == ["knee"]
            and posted["effort_mode"] == "implicit"
        )
        assert sorted(posted["families"]) == [
            "dcmotor",
            "delayed_pd",
        ]  # the request field since issue 13 item 6
        page.wait_for_url("**/fits/*")
        fid = page.url.rsplit("/", 1)[1]
        stored = requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=10).json()
        assert stored["request"]["budget_s"] == 8 and stored["request"]["holdout"] == "kp=8", stored[
            "request"
        ]
        page.wait_for_function(
            "() => document.getElementById('live-status').textContent.trim() === 'running'", timeout=60_000
        )
        # the live loss curve: each progress message's best loss becomes a point of its family's curve
        page.wait_for_function(
            "() => { const d = document.getElementById('live-loss');"
            " return d && d.data && d.data.length > 0 && d.data[0].x.length >= 3; }",
            timeout=60_000,
        )
        curve = page.evaluate("() => document.getElementById('live-loss').data[0]")
        assert curve["name"].split()[0] in FAMILIES, curve["name"]
        assert curve["x"] == sorted(curve["x"]) and all(y > 0 for y in curve["y"]), curve
        # the budget ends the search; the page names the stage after it, and a cancel there cancels the fit
        page.wait_for_function(
            "() => document.getElementById('live-msg').textContent.startsWith('validating exports')",
            timeout=90_000,
        )
        page.click("button[data-action=cancel]")
        fit = _wait(server, fid, 60)
        assert fit["status"] == "cancelled", fit
        page.wait_for_selector("button[data-action=retry]")  # the page reloaded at the end of the stream
        assert "was cancelled" in page.content()
    finally:
        ctx.close()


def test_report_pages_show_the_verdict_and_its_reasons(browser, site) -> None:  # noqa: F811
    server, _ds, replay_fit, more = site
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        page.set_default_timeout(30_000)
        fits = {"good": more["good"], "plan": more["plan"], "replay": replay_fit}
        for name, fid in fits.items():
            fit = _wait(server, fid, 180)
            assert fit["status"] == "succeeded", (name, fit)
            page.goto(f"{server.url}/fits/{fid}")
            verdict = page.locator("#verdict").inner_text()
            expected = "good" if name == "good" else "poor"
            assert verdict.startswith(f"verdict: {expected}"), (name, verdict)
            assert page.evaluate(
                "() => document.getElementById('verdict').getBoundingClientRect().top <"
                " document.querySelector('h2').getBoundingClientRect().top"
            )  # at the top
            if name == "good":
                assert "motion range" in verdict and "noise floor" in verdict, verdict
                continue
            assert "passed" not in page.content().lower(), name
            if name == "plan":
                assert "plan, not a recording" in verdict and "not identified" in verdict, verdict
            else:
                # Newton's replay follows its finding (targets less the offset); MuJoCo's cannot hold the offset
                assert "outside their tolerance" in verdict and "mjcf.xml" in verdict, verdict
        page.goto(f"{server.url}/datasets/{more['plan_dataset']}")  # the upload itself is flagged as a plan
        assert "plan, not a recording" in page.locator("#plan-warning").inner_text()
    finally:
        ctx.close()
