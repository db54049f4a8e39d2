"""The fleet view and the compare page from stored fits (issue 15): one series per parameter and serial on the
recording's date with its 95 % intervals as error bars, drift flagged; compare with intervals, units,
validation errors and the validation trajectories overlaid."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from actuator_sysid.service import fleet, pages

GOLDEN = json.loads((Path(__file__).parent / "golden" / "fit.json").read_text())


def stored_fit(
    fid: str, serial: str, stiffness: float, family: str, *, recorded: str | None, uploaded: str
) -> dict:
    """A stored fit as the repository hands it to the fleet view: the golden result with one joint's best
    family set to `family`, its stiffness to `stiffness` and identified with a ±1 % interval."""
    result = copy.deepcopy(GOLDEN)
    jr = result["joints"]["j1"]
    model = jr["models"][family]
    jr["best_model"] = family
    model["params"]["stiffness"] = stiffness
    model["intervals"]["stiffness"] = {
        "estimate": stiffness,
        "value": stiffness,
        "identified": True,
        "interval95": [0.99 * stiffness, 1.01 * stiffness],
        "std_relative": 0.005,
    }
    return {
        "id": fid * 8,
        "dataset_id": "d" + fid,
        "serial": serial,
        "status": "succeeded",
        "result": result,
        "finished_at": "2026-12-01T00:00:00+00:00",
        "dataset_created_at": uploaded,
        "dataset_metadata": {"recorded_at": recorded} if recorded else {},
    }


def test_fleet_series_pool_families_carry_intervals_and_sit_on_the_recording_date() -> None:
    fits = [
        stored_fit("a", "SN-1", 8.0, "ideal_pd", recorded="2026-01-05", uploaded="2026-11-01T00:00:00+00:00"),
        stored_fit("b", "SN-1", 8.01, "dcmotor", recorded="2026-02-05", uploaded="2026-11-02T00:00:00+00:00"),
        stored_fit("c", "SN-2", 8.02, "ideal_pd", recorded=None, uploaded="2026-11-03T00:00:00+00:00"),
        stored_fit(
            "d", "SN-2", 12.0, "ideal_pd", recorded="2026-03-05", uploaded="2026-11-04T00:00:00+00:00"
        ),
    ]
    summary = fleet.fleet_summary("bench-motor", fits)
    stiff = next(s for s in summary["series"] if s["param"] == "stiffness")
    assert stiff["families"] == ["ideal_pd", "dcmotor"]  # one series although the best family changed
    assert stiff["unit"] == "N·m/rad"
    assert [p["time"] for p in stiff["points"]] == [
        "2026-01-05",
        "2026-02-05",
        "2026-11-03T00:00:00+00:00",
        "2026-03-05",
    ]
    assert [p["time_source"] for p in stiff["points"]] == ["recorded", "recorded", "uploaded", "recorded"]
    assert stiff["points"][1]["low"] == 0.99 * 8.01 and stiff["points"][1]["high"] == 1.01 * 8.01
    limit = next(s for s in summary["series"] if s["param"] == "actuator_effort_limit")
    assert all(p["low"] is None for p in limit["points"])  # unidentified: no error bar
    flagged = [w for w in summary["warnings"] if w["param"] == "stiffness"]
    assert [w["fit_id"] for w in flagged] == [
        "d" * 8
    ]  # 12 leaves the spread of 8.00-8.02; 8.01 and 8.02 do not
    html = pages.render_fleet([("bench-motor", 4)], summary)
    assert '"error_y"' in html and '"arrayminus"' in html and "serial SN-2" in html
    assert "recorded / uploaded (UTC)" in html and "stiffness [N\\u00b7m/rad]" in html  # the figure's JSON


def test_compare_shows_intervals_units_validation_errors_and_trajectories() -> None:
    a = stored_fit("a", "SN-1", 8.0, "ideal_pd", recorded=None, uploaded="2026-11-01T00:00:00+00:00")
    b = stored_fit("b", "SN-1", 8.4, "ideal_pd", recorded=None, uploaded="2026-11-02T00:00:00+00:00")
    for f in (a, b):
        f.update(request=GOLDEN["request"], dataset_name="log")
    seg = {"name": "s1", "split": "validation", "t": [0.0, 0.01], "q": [0.0, 0.1], "q_sim": [0.0, 0.09]}
    plots = {"joints": {"j1": {"segments": [seg], "envelope": {}}}}
    html = pages.render_compare((a, plots), (b, plots))
    assert "[7.92, 8.08]" in html and "[8.316, 8.484]" in html  # value [95 % interval]
    assert "<td>N·m/rad</td>" in html and "+5.0%" in html
    rmse = GOLDEN["joints"]["j1"]["models"]["ideal_pd"]["metrics"]["validation"]["position_rmse"]
    assert "Validation error of each joint" in html and pages.fmt_num(rmse) in html
    assert "cmp-q-0" in html and "A simulated" in html and "B simulated" in html


def test_an_unidentified_value_is_drawn_apart_and_never_drift() -> None:
    """A serial's stiffness of 12 where the log did not identify it (its interval says so) is not drift beside
    8.0–8.02: the fleet plots it hollow and grey, off the serial's line, and warns of nothing."""
    fits = [
        stored_fit("a", "SN-1", 8.0, "ideal_pd", recorded="2026-01-05", uploaded="2026-11-01T00:00:00+00:00"),
        stored_fit(
            "b", "SN-1", 8.01, "ideal_pd", recorded="2026-02-05", uploaded="2026-11-02T00:00:00+00:00"
        ),
        stored_fit(
            "c", "SN-2", 8.02, "ideal_pd", recorded="2026-02-07", uploaded="2026-11-03T00:00:00+00:00"
        ),
        stored_fit(
            "d", "SN-2", 12.0, "ideal_pd", recorded="2026-03-05", uploaded="2026-11-04T00:00:00+00:00"
        ),
    ]
    iv = fits[3]["result"]["joints"]["j1"]["models"]["ideal_pd"]["intervals"]["stiffness"]
    iv.update(identified=False, value=None, reason="the log does not excite it")
    summary = fleet.fleet_summary("bench-motor", fits)
    assert [w for w in summary["warnings"] if w["param"] == "stiffness"] == []
    stiff = next(s for s in summary["series"] if s["param"] == "stiffness")
    assert [p["identified"] for p in stiff["points"]] == [True, True, True, False]
    fig = next(
        f for f in pages._fleet_figures(summary) if f["layout"]["title"]["text"].startswith("stiffness")
    )
    lines = {t["name"]: t for t in fig["data"]}
    assert 12.0 not in lines["serial SN-2"]["y"] and lines["serial SN-2"]["y"] == [8.02]
    loose = lines["not identified"]
    assert loose["y"] == [12.0] and loose["marker"]["symbol"] == "circle-open" and "drift" not in lines
    assert fleet.warnings_for("d" * 8, fits) == []


def test_compare_says_a_fit_failed_instead_of_comparing_recordings() -> None:
    a = stored_fit("a", "SN-1", 8.0, "ideal_pd", recorded=None, uploaded="2026-11-01T00:00:00+00:00")
    a.update(request=GOLDEN["request"], dataset_name="log")
    failed = {
        **a,
        "id": "b" * 8,
        "status": "failed",
        "result": None,
        "error": "the fit exceeded the time limit of 60 s",
    }
    html = pages.render_compare((a, None), (failed, None))
    text = " ".join(html.split())
    assert "cannot be compared" in text and "B failed: the fit exceeded the time limit of 60 s" in text, text
    assert "different recordings" not in text and "Validation error of each joint" not in text
    running = {**failed, "status": "running", "progress": 0.42, "error": None}
    assert "B is still running (42 %)" in " ".join(pages.render_compare((a, None), (running, None)).split())
