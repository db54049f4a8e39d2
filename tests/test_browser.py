"""The web UI in real headless Chromium (Debian's /usr/bin/chromium driven by Playwright): log in with a
token, upload a log through the form, start a fit, watch the live progress reach done, see the report's
plots drawn, download an export. Auth is on, so the pages work through the login cookie."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import make_recording, start_server

from actuator_sysid.datasets.canonical import sidecar_for, write_table
from actuator_sysid.service.db import Repository

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# a page's plots are all drawn: plots.js marks it once the last one is (those in view first, then the rest)
PLOTS_DRAWN = "() => performance.getEntriesByName('plots-drawn').length > 0"


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            raise RuntimeError(f"{CHROMIUM} missing: .ci/run installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def plot_marks(page, div: str) -> int:
    """Drawn marks in one Plotly div: SVG line/marker paths with geometry, or a non-empty WebGL canvas."""
    return page.evaluate(
        """div => {const el = document.getElementById(div); if (!el) return 0;
      const paths = [...el.querySelectorAll('.scatterlayer path')].filter(p => (p.getAttribute('d') || '').length > 10);
      const canvases = [...el.querySelectorAll('canvas')].filter(c => c.width > 0 && c.height > 0);
      return paths.length + canvases.length}""",
        div,
    )


def test_upload_fit_watch_report_download(browser, tmp_path: Path) -> None:
    rec = make_recording(joints=("hip", "knee"))
    write_table(rec, tmp_path / "bench_log.csv", sidecar=False)
    data = tmp_path / "data"
    repo = Repository(f"sqlite:///{data / 'actuator_sysid.db'}")
    token = repo.create_token("lab")
    repo.close()
    server = start_server(data, {"ACTUATOR_SYSID_AUTH": "required"})
    ctx = browser.new_context(accept_downloads=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.set_default_timeout(30_000)
        page.goto(server.url + "/")
        assert "/login" in page.url  # no token yet: the pages send us to the login form
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        page.wait_for_url(server.url + "/")

        # upload through the form, with the sidecar in the metadata box
        page.set_input_files("#upload input[name=file]", str(tmp_path / "bench_log.csv"))
        page.fill(
            "#upload textarea[name=metadata]",
            json.dumps({**sidecar_for(rec), "actuator_model": "bench-motor", "serial": "SN-7"}),
        )
        page.click("#upload button[type=submit]")
        page.wait_for_url("**/datasets/*")
        assert "bench_log.csv" in page.content() and "bench-motor" in page.content()
        page.wait_for_selector("#seg-0 svg.main-svg")
        assert plot_marks(page, "seg-0") >= 2  # q and q_des drawn

        # a small fit of one family
        page.evaluate("""() => { for (const b of document.querySelectorAll('input[name=model]'))
                                   b.checked = b.value === 'dcmotor'; }""")
        page.fill("#generations", "10")
        page.fill("#population", "8")
        page.click("button.start-fit")
        page.wait_for_url("**/fits/*")
        fit_id = page.url.rsplit("/", 1)[1]

        # live progress over Server-Sent Events until the status reads succeeded (then the page reloads)
        page.wait_for_selector("#live-progress")
        page.wait_for_function(
            """() => { const s = document.getElementById('live-status');
            return (s && s.textContent.trim() === 'succeeded') || document.querySelector('.plot svg.main-svg'); }""",
            polling=50,
            timeout=120_000,
        )
        page.wait_for_selector("#plot-0-seg-0 svg.main-svg", timeout=60_000)
        page.wait_for_selector("#plot-0-envelope .main-svg")
        assert plot_marks(page, "plot-0-seg-0") >= 2
        assert plot_marks(page, "plot-0-envelope") >= 1
        assert "best model" in page.content()

        # every export has a download button; the Isaac Lab config downloads as a file
        labels = page.locator("a.download").all_inner_texts()
        assert any("isaaclab.py" in t for t in labels) and any("isaaclab.json" in t for t in labels)
        with page.expect_download() as dl:
            page.click("a.download:has-text('isaaclab.py')")
        download = dl.value
        assert download.suggested_filename == f"actuator-fit-{fit_id[:8]}-isaaclab.py"
        text = Path(download.path()).read_text()
        compile(text, "isaaclab.py", "exec")
        assert "Cfg(" in text
        assert errors == [], errors
    finally:
        ctx.close()
        server.stop()
