"""The verdict on a fit (issue 15): good, usable or poor with its reasons, in the result, the report and the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from export_helpers import TRUTH, make_result, model_entry, short_recording

from actuator_sysid.export import render_all
from actuator_sysid.fitting.fit import FitRequest
from actuator_sysid.fitting.verdict import all_passed, fit_verdict, noise_floor
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
    assert ("passed" in page.lower()) == all_passed(v)  # a check that did not run never passed
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


def _judged(train: float, val: float, warnings: list[str], intervals: dict | None = None, rec=None) -> dict:
    """The verdict of a dcmotor fit with the given pooled errors [rad], model warnings and intervals."""
    rec = rec or short_recording(n_segments=3, n_samples=300, noise_q=1e-3)
    entry = model_entry("dcmotor", TRUTH)
    entry["metrics"]["train"] = {"position_rmse": train}
    entry["metrics"]["validation"] = {"position_rmse": val, "segments": 1}
    entry["warnings"] = warnings
    entry["intervals"] = intervals or {}
    return fit_verdict(make_result({"hinge": {"dcmotor": entry}}, rec), rec)


def test_an_extrapolation_that_held_is_a_caveat_and_one_that_did_not_is_usable() -> None:
    """Validation asks for more effort than training did (fitting/coverage.py): tested and held (error ≤ the
    training error, or within the noise floor) keeps the fit good with the caveat said; a worse error caps it."""
    from actuator_sysid.fitting.coverage import BEYOND_TRAINING

    rec = short_recording(n_segments=3, n_samples=300, noise_q=1e-3)
    span = float(np.ptp(np.concatenate([s.q[:, 0] for s in rec.segments])))
    warn = [f"{BEYOND_TRAINING}: 40 % of their driven samples ask for more than the training top"]
    held = _judged(0.01 * span, 0.008 * span, warn, rec=rec)  # validation below training: held
    check = next(c for c in held["checks"] if c["check"] == "beyond_training")
    assert held["verdict"] == "good", held
    assert check["status"] == "ok" and "tested beyond training and held" in check["reason"]
    floor = _judged(1e-9, 2e-3, warn, rec=rec)  # above a near-zero training error, within 3× the noise floor
    check = next(c for c in floor["checks"] if c["check"] == "beyond_training")
    assert floor["verdict"] == "good" and "within 3× the noise floor" in check["reason"], check
    worse = _judged(0.01 * span, 0.03 * span, warn, rec=rec)  # 3× the training error, beyond the noise
    check = next(c for c in worse["checks"] if c["check"] == "beyond_training")
    assert worse["verdict"] == "usable" and check["status"] == "usable"
    assert "worse than training" in check["reason"]


def _intervals(names: list[str], lost: set[str]) -> dict:
    return {
        n: {"estimate": 1.0, "identified": n not in lost, "reason": None if n not in lost else "sloppy"}
        for n in names
    }


def test_a_model_that_predicts_is_usable_whatever_its_unidentified_parameters() -> None:
    """Prediction and identification are two questions: half the parameters unidentified with a good validation
    error is usable for simulation, naming what not to read or randomise one by one; without validation it is
    poor, for nothing shows the model predicts."""
    rec = short_recording(n_segments=3, n_samples=300, noise_q=1e-3)
    span = float(np.ptp(np.concatenate([s.q[:, 0] for s in rec.segments])))
    names = ["stiffness", "damping", "armature", "friction", "viscous_friction", "saturation_effort"]
    lost = {"armature", "friction", "viscous_friction"}
    v = _judged(0.01 * span, 0.01 * span, [], _intervals(names, lost), rec)
    check = next(c for c in v["checks"] if c["check"] == "unidentified")
    assert v["verdict"] == "usable" and check["status"] == "usable", v
    assert "do not read or randomise one by one: armature, friction, viscous_friction" in check["reason"]
    bad = _judged(
        0.01 * span, 0.5 * span, [], _intervals(names, lost), rec
    )  # does not predict: poor by error
    assert {c["check"]: c["status"] for c in bad["checks"]}["validation_error"] == "poor"
    entry = model_entry("dcmotor", TRUTH)
    entry["metrics"]["train"] = {"position_rmse": 0.01 * span}
    entry["intervals"] = _intervals(names, lost)
    res = make_result({"hinge": {"dcmotor": entry}}, rec)
    res["split"]["validation"] = []
    blind = fit_verdict(res, rec)
    assert {c["check"]: c["status"] for c in blind["checks"]}["unidentified"] == "poor"


def test_a_skipped_replay_is_not_checked_and_never_passed() -> None:
    """A check that did not run is said "not checked": never "within tolerance", and nothing "passed"."""
    from actuator_sysid.fitting.verdict import all_passed

    rec = short_recording(n_segments=3, n_samples=300, noise_q=1e-3)
    entry = model_entry("dcmotor", TRUTH)
    span = float(np.ptp(np.concatenate([s.q[:, 0] for s in rec.segments])))
    entry["metrics"]["train"] = {"position_rmse": 0.01 * span}
    entry["metrics"]["validation"] = {"position_rmse": 0.01 * span, "segments": 1}
    res = make_result({"hinge": {"dcmotor": entry}}, rec)
    note = "no replayed segment runs at the export's operating point"
    skipped = {f: {"format": f, "status": "skipped", "note": note} for f in ("isaaclab.py", "newton.usda")}
    v = fit_verdict(res, rec, {"replay": skipped, "findings": []})
    assert v["verdict"] == "good" and not all_passed(v)
    assert not any("within tolerance" in r for r in v["reasons"]), v["reasons"]
    (nc,) = [c for c in v["checks"] if c["check"] == "exports_not_checked"]
    assert nc["reason"].startswith("not checked:") and "isaaclab.py" in nc["reason"] and note in nc["reason"]
    ran = {"mjcf.xml": {"status": "ok", "joints": {"hinge": {"within_tolerance": True}}}}
    mixed = fit_verdict(res, rec, {"replay": {**skipped, **ran}, "findings": []})
    (ok,) = [c for c in mixed["checks"] if c["check"] == "export_replay"]
    assert ok["reason"] == "mjcf.xml replay through its consumer within tolerance", ok
    full = fit_verdict(res, rec, {"replay": ran, "findings": []})
    assert all_passed(full) and any("every export replays" in r for r in full["reasons"])


def test_the_share_of_the_range_is_over_the_validated_segments() -> None:
    """A one-episode holdout is judged against that episode's motion, not the whole data set's range."""
    rec = short_recording(n_segments=3, n_samples=300, noise_q=1e-3)
    entry = model_entry("dcmotor", TRUTH)
    entry["metrics"]["train"] = {"position_rmse": 0.01}
    entry["metrics"]["validation"] = {"position_rmse": 0.01, "segments": 1}
    res = make_result({"hinge": {"dcmotor": entry}}, rec)
    (held,) = res["split"]["validation"]
    span = float(np.ptp(next(s for s in rec.segments if s.name == held).q[:, 0]))
    whole = float(np.ptp(np.concatenate([s.q[:, 0] for s in rec.segments])))
    assert span < 0.9 * whole  # the held-out episode moves less than the data set does
    v = fit_verdict(res, rec)
    (check,) = [c for c in v["checks"] if c["check"] == "validation_error"]
    assert f"{0.01 / span:.1%} of the {span:.3g} rad motion range" in check["reason"], check
