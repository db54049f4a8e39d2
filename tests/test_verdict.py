"""The verdict on a fit (issue 15): good, usable or poor with its reasons, in the result, the report and the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from export_helpers import TRUTH, make_result, model_entry, short_recording

from actuator_sysid.export import render_all
from actuator_sysid.fitting.fit import FitRequest
from actuator_sysid.fitting.verdict import fit_verdict, noise_floor
from actuator_sysid.pipeline import compute_fit
from actuator_sysid.service.report import render_report

QUICK = {"models": ["dcmotor"], "generations": 8, "population": 6, "refine_iterations": 4}
ROW = {"id": "f1", "title": "fit", "status": "succeeded", "dataset_name": "log", "request": {}}


def _page(out) -> str:
    import json

    return render_report(
        ROW,
        out.result,
        None,
        standalone=False,
        exports=sorted(out.exports),
        validation=json.loads(out.exports["validation.json"]),
    )


def test_noise_floor_from_second_differences() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(0, 10, 0.005)
    q = 0.8 * np.sin(2 * np.pi * 0.5 * t)
    assert noise_floor(q + rng.normal(0, 0.01, t.size)) == pytest.approx(0.01, rel=0.1)
    assert noise_floor(q) < 1e-4  # smooth motion alone is far below any encoder noise


def test_a_good_fit_is_good() -> None:
    rec = short_recording(n_segments=5, noise_q=2e-3)
    out = compute_fit(rec, FitRequest(**QUICK), info={"fit_id": "f1", "dataset": "log"})
    v = out.result["verdict"]
    assert v["verdict"] == "good", v
    assert any("of the" in r and "motion range" in r and "noise floor" in r for r in v["reasons"])
    page = _page(out)
    assert "verdict: good" in page and page.index('id="verdict"') < page.index("<h2>")  # at the top
    assert "verdict: GOOD" in out.exports["isaaclab.py"]  # the exports state it too


def test_a_commands_only_fit_is_poor_and_nothing_passes() -> None:
    rec = short_recording(n_segments=5)
    for s in rec.segments:  # q ≡ q_des: a plan, not a recording
        s.q, s.qd = s.q_des.copy(), s.qd_des.copy()
    out = compute_fit(rec, FitRequest(**QUICK))
    v = out.result["verdict"]
    assert v["verdict"] == "poor"
    checks = {c["check"]: c["status"] for c in v["checks"]}
    assert checks["plan"] == "poor" and checks["unidentified"] == "poor"
    page = _page(out)
    assert "verdict: poor" in page and "plan, not a recording" in page
    assert "passed" not in page.lower()


def test_exports_replaying_outside_tolerance_make_a_poor_fit() -> None:
    """An encoder offset the fit claims but Newton and MuJoCo cannot hold (they read the true position): their
    replays follow the log, ours does not, so they stray beyond the tolerance."""
    rec = short_recording(n_segments=3, n_samples=300)
    terms = ("armature", "friction", "viscous_friction", "encoder_offset")
    res = make_result(
        {"hinge": {"dcmotor": model_entry("dcmotor", {**TRUTH, "encoder_offset": 0.1}, terms)}}, rec
    )
    files = render_all(res, rec)
    import json

    validation = json.loads(files["validation.json"])
    v = validation["verdict"]
    assert v["verdict"] == "poor"
    replay = next(c for c in v["checks"] if c["check"] == "export_replay")
    assert replay["status"] == "poor" and "outside their tolerance" in replay["reason"]
    res["verdict"] = v
    ours = validation["replay"]["newton.usda"]["joints"]["hinge"]["rmse_ours"]  # the model's error, as ranked
    res["joints"]["hinge"]["ranking"] = [
        {"family": "dcmotor", "score": ours, "position_rmse": ours, "n_params": 9}
    ]
    page = render_report(ROW, res, None, validation=validation)
    assert "verdict: poor" in page and "outside their tolerance" in page and "passed" not in page.lower()
    assert "POOR" in files["mjcf.xml"] and "POOR" in files["newton.usda"]


def test_budget_and_missing_validation_cap_the_verdict_at_usable() -> None:
    rec = short_recording(n_segments=2, n_samples=200)
    entry = model_entry("ideal_pd", TRUTH)
    entry["metrics"]["train"] = {"position_rmse": 0.001}
    res = make_result({"hinge": {"ideal_pd": entry}}, rec)
    res["split"]["validation"] = []
    res["budget"] = {"seconds": 5, "stopped_on_budget": True}
    v = fit_verdict(res, rec)
    assert v["verdict"] == "usable"
    assert {c["check"] for c in v["checks"] if c["status"] == "usable"} >= {"no_validation", "budget"}


def test_service_result_page_and_download_all_carry_the_verdict(server, tmp_path) -> None:
    """Over HTTP: the stored result has the verdict, the page shows it first, and all.zip holds every export
    plus a standalone report.html that shows it too."""
    import io
    import zipfile

    import requests
    from test_service_flow import SMALL_BUDGET, upload_log, wait_status

    ds = upload_log(server, tmp_path)
    r = requests.post(
        server.url + "/api/v1/fits",
        timeout=30,
        json={
            "dataset_id": ds["id"],
            "joints": ["knee"],
            "models": ["dcmotor"],
            "budget": SMALL_BUDGET,
            "seed": 1,
        },
    )
    assert r.status_code == 202, r.text
    fit = wait_status(server, r.json()["id"], ("succeeded", "failed"), timeout=180)
    assert fit["status"] == "succeeded", fit
    v = fit["result"]["verdict"]
    assert v["verdict"] in ("good", "usable", "poor") and v["reasons"]
    page = requests.get(f"{server.url}/fits/{fit['id']}", timeout=30).text
    assert f"verdict: {v['verdict']}" in page and "all.zip" in page
    assert ("passed" in page.lower()) == (
        v["verdict"] == "good" and all(c["status"] == "ok" for c in v["checks"])
    )
    z = requests.get(f"{server.url}/api/v1/fits/{fit['id']}/export/all.zip", timeout=60)
    assert z.status_code == 200 and z.headers["content-type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(z.content)).namelist()
    assert {
        "isaaclab.py",
        "isaaclab.json",
        "newton.usda",
        "mjcf.xml",
        "validation.json",
        "report.html",
    } <= set(names)
    with zipfile.ZipFile(io.BytesIO(z.content)) as zf:
        report = zf.read("report.html").decode()
        assert f"verdict: {v['verdict']}" in report and "/api/v1/" not in report.split("<script>")[0][:2000]
        assert fit["id"] in zf.read("isaaclab.py").decode()  # provenance: the fit id
    given = requests.get(
        f"{server.url}/api/v1/fits/{fit['id']}/export/isaaclab.py",
        timeout=60,
        params={"set": "actuator_effort_limit=0.6123", "rename": "knee=elbow_joint"},
    )
    assert (
        given.status_code == 200
        and "actuator_effort_limit=0.6123," in given.text
        and "'elbow_joint'" in given.text
    )
    bad = requests.get(
        f"{server.url}/api/v1/fits/{fit['id']}/export/isaaclab.py", params={"set": "nope=1"}, timeout=30
    )
    assert bad.status_code == 422 and "registry parameter" in bad.json()["detail"]
