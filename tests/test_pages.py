"""The pages and the request bounds over real HTTP (a real uvicorn server, SQLite, real fits): API docs from
the installed package's assets, HTML error pages, the dataset page's quality report and plan flag, a
bound with a 4xx naming its limit on every field that sizes work, and a cancel during the export stage."""

from __future__ import annotations

import io
import re
import time
import zipfile
from html import unescape
from pathlib import Path

import numpy as np
import pytest
import requests
from conftest import Server, make_recording
from test_service import good_upload, upload

from actuator_sysid.datasets.canonical import sidecar_for, write_table
from actuator_sysid.fitting.fit import FitRequest, FitRequestError, validate_request

HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}  # what a browser sends for a page


def test_api_docs_load_only_local_assets(server: Server) -> None:
    for path in ("/docs", "/redoc"):
        r = requests.get(server.url + path, timeout=10)
        assert r.status_code == 200 and "text/html" in r.headers["content-type"], path
        urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", r.text) + re.findall(
            r"url: *'([^']+)'", r.text
        )
        assert urls, r.text
        assert all(u.startswith("/") and not u.startswith("//") for u in urls), (
            path,
            urls,
        )  # nothing from a CDN
        assert "/openapi.json" in r.text
        assert (
            "default-src 'self'" in r.headers["content-security-policy"]
        )  # the browser may fetch nothing else
        for u in urls:
            if u.startswith("/static/"):
                asset = requests.get(server.url + u, timeout=10)
                assert asset.status_code == 200 and len(asset.content) > 1000, u
    js = requests.get(server.url + "/static/docs/swagger-ui-bundle.js", timeout=10)
    assert "SwaggerUIBundle" in js.text and js.headers["content-type"].startswith("text/javascript")
    assert requests.get(server.url + "/static/docs/../app.py", timeout=10).status_code == 404
    assert requests.get(server.url + "/static/docs/core.py", timeout=10).status_code == 404


def test_missing_pages_are_html_404_and_api_keeps_json(server: Server) -> None:
    for path in ("/fits/nope", "/datasets/nope", "/compare?a=nope&b=nope"):
        r = requests.get(server.url + path, headers=HTML, timeout=10)
        assert r.status_code == 404, path
        assert r.headers["content-type"].startswith("text/html"), (path, r.headers)
        assert "<h1>404" in r.text and "'nope'" in unescape(r.text) and 'href="/"' in r.text, r.text
    r = requests.get(server.url + "/no/such/page", headers=HTML, timeout=10)
    assert (
        r.status_code == 404
        and r.headers["content-type"].startswith("text/html")
        and "no such page" in r.text
    )
    for path in ("/api/v1/fits/nope", "/api/v1/datasets/nope"):  # the API answers a browser with JSON too
        r = requests.get(server.url + path, headers=HTML, timeout=10)
        assert r.status_code == 404 and "'nope'" in r.json()["detail"], path
    assert "'nope'" in requests.get(server.url + "/fits/nope", timeout=10).json()["detail"]  # curl: JSON
    r = requests.get(server.url + "/compare?a=nope", headers=HTML, timeout=10)  # b missing: a page saying so
    assert (
        r.status_code == 422
        and r.headers["content-type"].startswith("text/html")
        and "b: Field required" in r.text
    )
    r = requests.post(server.url + "/api/v1/fits", headers=HTML, json={}, timeout=10)
    assert r.status_code == 422 and "dataset_id" in r.json()["detail"]


# --- every request field that sizes work has a bound, and the 4xx names it ---


def test_fit_request_bounds_name_the_limit(server: Server, tmp_path: Path) -> None:
    ds = good_upload(server, tmp_path)["id"]
    cases = [
        ({"joints": [f"j{i}" for i in range(65)]}, ["joints", "64"]),
        ({"joints": ["hip", "knee", "hip"]}, ["'hip'", "more than once"]),
        ({"models": ["dcmotor", "dcmotor"]}, ["'dcmotor'", "more than once"]),
        ({"models": ["dcmotor"] * 33}, ["models", "32"]),
        ({"joint_terms": ["armature", "armature"]}, ["'armature'", "more than once"]),
        ({"folds": 101}, ["folds", "100"]),
        ({"decimation": 65}, ["decimation", "64"]),
        ({"budget": {"seconds": 1e6}}, ["budget.seconds", "86400"]),
        ({"budget": {"generations": 10_001}}, ["generations", "10000"]),
        ({"budget": {"population": 5000}}, ["population", "4096"]),
        ({"holdout": "kp=" + "5" * 300}, ["holdout", "200"]),
        ({"networks": {"hidden": [100_000_000]}}, ["hidden"]),
    ]
    for extra, needles in cases:
        r = requests.post(server.url + "/api/v1/fits", json={"dataset_id": ds, **extra}, timeout=30)
        assert r.status_code == 422, (extra, r.status_code, r.text[:300])
        for needle in needles:
            assert needle in r.json()["detail"], (extra, r.json()["detail"])
    assert requests.get(server.url + f"/api/v1/fits?dataset_id={ds}", timeout=10).json() == []


def test_window_s_is_bounded() -> None:
    rec = make_recording()
    for bad in (1e-6, 0.0, 1e6):
        with pytest.raises(FitRequestError, match=r"window_s must be between 0\.01 and 86400"):
            validate_request(rec, FitRequest(window_s=bad))
    validate_request(rec, FitRequest(window_s=0.5))


def test_excitation_and_upload_bounds_name_the_limit(server: Server) -> None:
    base = {"kind": "chirp", "duration": 10, "rate": 200, "q_min": -1, "q_max": 1, "qd_max": 5}
    for extra, needle in (
        ({"duration": 4000}, "3600"),
        ({"rate": 20_000, "f_max": 5}, "10000"),
        ({"duration": 3000, "rate": 1000}, "500000"),
        ({"models": ["dcmotor", "dcmotor"]}, "more than once"),
    ):
        r = requests.post(server.url + "/api/v1/excitations", json={**base, **extra}, timeout=30)
        assert r.status_code == 422 and needle in r.json()["detail"], (extra, r.text[:300])
    assert requests.post(server.url + "/api/v1/excitations", json=base, timeout=60).status_code == 200
    csv = b"t,joint,q,q_des\n0,j1,0,0\n0.01,j1,0,0\n"
    many = ",".join(f"j{i}" for i in range(300))
    r = requests.post(
        server.url + "/api/v1/datasets",
        files={"file": ("x.csv", csv)},
        data={"joint_names": many},
        timeout=30,
    )
    assert r.status_code == 422 and "256" in r.json()["detail"], r.text
    r = requests.post(
        server.url + "/api/v1/datasets",
        files={"file": ("x.csv", csv)},
        data={"joint_names": "hip,knee,hip"},
        timeout=30,
    )
    assert r.status_code == 422 and "'hip'" in r.json()["detail"] and "more than once" in r.json()["detail"]


# --- the dataset page shows the quality report ---


def test_dataset_page_shows_every_warning_and_the_quality_report(server: Server, tmp_path: Path) -> None:
    rec = make_recording(joints=("hip", "knee"))
    for k, seg in enumerate(rec.segments):
        seg.tau = 0.3 * np.tanh(seg.qd)  # a logged effort, so the page has τ plots and an effort row
        seg.metadata["trajectory"] = f"chirp{k}"
    write_table(rec, tmp_path / "log.csv")
    r = upload(server, (tmp_path / "log.csv").read_bytes(), metadata=sidecar_for(rec))
    assert r.status_code == 201, r.text
    body = r.json()
    quality_warnings = body["quality"]["warnings"]
    assert any(w.startswith("no free-swing segment") for w in quality_warnings)
    html = requests.get(f"{server.url}/datasets/{body['id']}", timeout=30).text
    for w in [*quality_warnings, *body["warnings"]]:
        assert f'<div class="warn">{w}' in unescape(html), w
    q = body["quality"]["joints"]["hip"]
    assert "Data quality" in html and f"{q['q_range'][0]:.4g} … {q['q_range'][1]:.4g} rad" in html
    band = q["excitation_band_hz"]
    assert f"{band[0]:.4g} … {band[1]:.4g} Hz" in html
    assert f"max |·| {q['effort']['max_abs']:.4g} N·m" in html
    assert "chirp0" in html and "chirp2" in html  # per-segment metadata: the trajectory and the gains
    assert html.count("<td>5</td>") >= 3  # kp = 5 in each of the three segment rows
    assert "const FIGURES = null;" in html  # the page loads its plots from the API: its HTML stays small
    plotted = requests.get(f"{server.url}/api/v1/datasets/{body['id']}/figures", timeout=30)
    assert plotted.status_code == 200 and f"/api/v1/datasets/{body['id']}/figures" in html
    figures = {f["id"]: f for f in plotted.json()}
    assert 'id="segv-0"' in html and {"seg-0", "segv-0", "segv-2"} <= set(figures)
    vel = figures["segv-0"]
    lines = [(t["name"], t["line"]["dash"], t.get("yaxis", "y"), t["showlegend"]) for t in vel["data"]]
    assert lines == [  # one colour and one legend entry per joint: qd solid, τ dotted on its own axis
        ("hip", "solid", "y", True),
        ("hip", "dot", "y2", False),
        ("knee", "solid", "y", True),
        ("knee", "dot", "y2", False),
    ]
    assert (
        vel["layout"]["yaxis"]["title"]["text"] == "qd [rad/s]"
        and vel["layout"]["yaxis2"]["title"]["text"] == "τ [N·m]"
    )
    assert "plan, not a recording" not in html
    every = set(quality_warnings) | set(body["warnings"])  # the dashboard counts them all, each once
    assert (
        f'<td>{len(every)}</td><td class="when">{body["created_at"][:19].replace("T", " ")}</td>'
        in requests.get(server.url + "/", timeout=10).text
    )


def test_a_commands_only_upload_is_flagged_as_a_plan(server: Server) -> None:
    t = np.arange(300) / 100.0
    q = 0.5 * np.sin(2 * np.pi * 0.7 * t)
    rows = "".join(f"{ti:.4f},j1,{qi:.9f},{qi:.9f}\n" for ti, qi in zip(t, q, strict=True))
    r = upload(server, ("t,joint,q,q_des\n" + rows).encode(), filename="plan.csv")
    assert r.status_code == 201, r.text
    html = requests.get(f"{server.url}/datasets/{r.json()['id']}", timeout=30).text
    assert 'id="plan-warning"' in html and "plan, not a recording" in html


# --- the stage after the search, and a cancel pressed during it ---


def test_cancel_during_the_export_stage_ends_cancelled(server: Server, tmp_path: Path) -> None:
    ds = good_upload(server, tmp_path)["id"]
    r = requests.post(
        server.url + "/api/v1/fits",
        json={
            "dataset_id": ds,
            "joints": ["hip"],
            "models": ["dcmotor"],
            "budget": {"generations": 10, "population": 8},
        },
        timeout=30,
    )
    assert r.status_code == 202, r.text
    fid = r.json()["id"]
    deadline, fit = time.monotonic() + 120, {}
    while time.monotonic() < deadline:
        fit = requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=10).json()
        if (
            fit["status"] != "queued"
            and fit["status"] != "running"
            or fit["message"].startswith("validating exports")
        ):
            break
        time.sleep(0.03)
    assert fit["status"] == "running" and fit["message"].startswith("validating exports"), fit
    page = requests.get(f"{server.url}/fits/{fid}", timeout=10).text  # the fit page names the stage
    assert "validating exports" in page
    assert requests.post(f"{server.url}/api/v1/fits/{fid}/cancel", timeout=10).status_code == 202
    while time.monotonic() < deadline:
        fit = requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=10).json()
        if fit["status"] not in ("queued", "running"):
            break
        time.sleep(0.1)
    assert fit["status"] == "cancelled", fit
    names = [a["name"] for a in fit.get("artifacts", [])]
    assert names == [], names  # nothing of the cancelled fit is offered
    assert requests.get(f"{server.url}/api/v1/fits/{fid}/export/isaaclab.py", timeout=10).status_code == 409


BAM = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "bam-xl330" / "processed"


@pytest.mark.skipif(len(list(BAM.glob("*.json"))) != 12, reason=f"the 12 BAM XL330 logs are not in {BAM}")
def test_real_bam_dataset_page_lists_segments_gains_trajectories_and_quality_warnings(server: Server) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:  # 0.5 MB, under the test server's 1 MB limit
        for p in sorted(BAM.glob("*.json")):
            z.write(p, f"bam-xl330/{p.name}")
    up = upload(server, buf.getvalue(), filename="bam-xl330.zip")
    assert up.status_code == 201, up.text
    ds = up.json()
    still = [w for w in ds["quality"]["warnings"] if "nearly still" in w]
    assert still and all(w in ds["warnings"] for w in still)  # the API's warnings are the page's (issue 24)
    html = unescape(requests.get(f"{server.url}/datasets/{ds['id']}", timeout=30).text)
    assert all(f'<div class="warn">{w}' in html for w in still)
    seg_rows = re.findall(r"<tr><td>(2026-01-15_[^<]+)</td>(.*?)</tr>", html)
    assert len(seg_rows) == 12, seg_rows[:2]
    cells = {name: re.findall(r"<td>(.*?)</td>", rest) for name, rest in seg_rows}
    # columns after the name: samples, duration, rate, free swing, driven, gap, kp, kd, vin, trajectory, …
    assert {c[6] for c in cells.values()} == {"100", "200", "800"}
    assert {c[9] for c in cells.values()} == {"sin_sin", "lift_and_drop", "up_and_down", "sin_time_square"}
    assert {c[8] for c in cells.values()} == {"7.4"}
    free = ds["quality"]["free_swing_segments"]
    assert len(free) == 3 and all(cells[n][9] == "lift_and_drop" and cells[n][3] == "yes" for n in free)
    assert "plan, not a recording" not in html


def test_without_auth_the_navigation_offers_no_log_out_and_no_raw_metrics(server: Server) -> None:
    """With auth off there is nothing to log out of, and the Prometheus text is for scrapers: the navigation
    offers neither (the dashboard's API line still links /metrics, named as what it is)."""
    for path in ("/", "/robots", "/fleet"):
        html = requests.get(server.url + path, timeout=30).text
        nav = html.split("<nav>", 1)[1].split("</nav>", 1)[0]
        assert "/logout" not in nav and "/metrics" not in nav and "/robots" in nav, (path, nav)
