"""The pages' templates (service/templates/, issue 13 item 5): data is escaped wherever a page shows it, the
report's header names the request's families under either spelling, a standalone report inlines Plotly, and
every template and static file is one the wheel's package-data carries."""

from __future__ import annotations

import json
import re
import tomllib
from fnmatch import fnmatch
from html import unescape
from pathlib import Path

import numpy as np
import pytest
from conftest import make_recording

from actuator_sysid.service import pages, report, robot_page, robots, templating

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = json.loads((ROOT / "tests" / "golden" / "fit.json").read_text())
EVIL = "<script>alert('x')</script> & \"q\""
DEFAULTS = {"generations": 10, "population": 8, "seed": 0}


def _row(status: str, **kw) -> dict:
    return {
        "id": "f" * 32,
        "status": status,
        "dataset_id": "d" * 32,
        "dataset_name": EVIL,
        "progress": 0.5,
        "message": EVIL,
        "error": EVIL,
        "created_at": "2026-01-01T00:00:00+00:00",
        **kw,
    }


def _dataset() -> dict:
    summary = {
        "joints": ["j1"],
        "segments": 3,
        "duration_s": 2.0,
        "rate_hz": 100.0,
        "warnings": [EVIL],
        "quality": {"warnings": [EVIL + " (quality)"]},
    }
    return {
        "id": "d" * 32,
        "name": EVIL,
        "project": "default",
        "actuator_model": EVIL,
        "serial": EVIL,
        "summary": summary,
        "size": 1234,
        "sha256": "0" * 64,
        "created_at": "2026-01-01T00:00:00",
        "metadata": {"note": EVIL},
    }


def test_every_page_escapes_what_it_shows() -> None:
    d = _dataset()
    rec = make_recording()
    rec.segments[0].name = EVIL
    html = {
        "index": pages.render_index([d], [_row("failed")], ["dcmotor"], DEFAULTS, {EVIL: 1}, [(EVIL, 1)]),
        "dataset": pages.render_dataset(d, rec, [_row("succeeded")], ["dcmotor"], DEFAULTS),
        "error": pages.render_error(404, EVIL),
        "login": pages.render_login(EVIL, EVIL),
        "fleet": pages.render_fleet([(EVIL, 2)], None),
        **{
            f"report-{s}": report.render_report(_row(s, title=EVIL), None, None, exports=[EVIL])
            for s in ("running", "failed", "succeeded")
        },
    }
    for name, page in html.items():
        assert "<script>alert" not in page, name  # escaped in the text, in attributes and in script data
        assert EVIL in unescape(page), name  # and still shown as it is
        assert len(re.findall(r"<script[ >]", page)) == page.count("</script>"), name
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;q&#34;" in html["dataset"]
    assert (
        f'href="/fleet?actuator_model={"%3Cscript%3Ealert%28%27x%27%29%3C/script%3E%20%26%20%22q%22"}"'
        in html["index"]
    )  # a query string quoted, not HTML-escaped
    titles = [
        f["layout"]["title"]["text"] for f in pages.segment_figures(rec)
    ]  # what its figures route serves
    assert titles[0].startswith("segment &lt;script"), titles[0]  # a Plotly title: escaped inside the JSON


def test_the_report_header_names_the_families_under_either_request_spelling() -> None:
    for key in ("families", "models"):
        row = _row(
            "succeeded", request={key: ["dcmotor", "ideal_pd"], "generations": 3, "population": 8, "seed": 0}
        )
        page = report.render_report(row, GOLDEN, None)
        assert "<tr><th>families</th><td>dcmotor, ideal_pd</td></tr>" in page, key
        assert "<tr><th>budget</th><td>3 generations × 8</td></tr>" in page, key
        cmp = pages.render_compare(({**row, "result": GOLDEN}, None), ({**row, "result": GOLDEN}, None))
        assert cmp.count("<tr><th>families</th><td>dcmotor, ideal_pd</td></tr>") == 2, key


def _inline_figures(page: str) -> list | None:
    """The figures a page holds inline (`const FIGURES = ...`); None where it loads them from the API."""
    return json.loads(re.search(r"const FIGURES = (.*?);\n", page).group(1))


def test_a_standalone_report_inlines_plotly_and_figures_and_the_served_one_loads_them() -> None:
    rec = make_recording()
    from actuator_sysid.fitting.fit import report_data

    plots = report_data(rec, GOLDEN)
    row = _row("succeeded")
    served = report.render_report(row, GOLDEN, plots, exports=["isaaclab.py"])
    alone = report.render_report(row, GOLDEN, plots, standalone=True)
    figures = report.report_figures(GOLDEN, plots)
    assert figures and all(f'id="{f["id"]}"' in served and f'id="{f["id"]}"' in alone for f in figures)
    # served: neither Plotly nor the traces in the HTML; the page asks the API and /static for them
    assert _inline_figures(served) is None and f'FIGURES_URL = "/api/v1/fits/{row["id"]}/figures"' in served
    assert 'PLOTLY_URL = "/static/plotly.min.js"' in served and "<script src=" not in served
    assert len(served) < 100_000, len(served)
    # standalone: Plotly and every figure inline, nothing asked of a server
    assert "/static/plotly.min.js" not in alone and "/api/v1/" not in alone
    assert len(alone) - len(served) > 1_000_000  # plotly.min.js itself
    assert _inline_figures(alone) == json.loads(report.figures_json(figures))
    assert "data-action" in served and "data-action" not in alone and "<nav>" not in alone


def test_the_served_reports_advice_names_what_the_page_offers_not_cli_flags() -> None:
    """The stored verdict tells the CLI user "give a datasheet value with --set"; the served page says the
    export's `set` query (what its download links and the API take), the standalone file keeps the flag."""
    checks = GOLDEN["verdict"]["checks"]
    assert sum("with --set" in c["reason"] for c in checks) == 2  # the stored text names the flag
    served = _text(report.render_report(_row("succeeded"), GOLDEN, None, exports=["isaaclab.py"]))
    alone = _text(report.render_report(_row("succeeded"), GOLDEN, None, standalone=True))
    assert "verdict: usable" in served and "--set" not in served, served
    assert served.count("the export's set=PARAM=VALUE query on its download link") == 2, served
    assert "give a datasheet value with --set" in alone  # the CLI's file, in the CLI's words
    assert report.page_words("refit with a larger --decimation (finer steps)") == (
        "refit with a larger decimation (finer steps)"
    )
    assert report.page_words("--at kp=800: no such kp") == "at kp=800: no such kp"
    assert report.page_words("a --settle-time flag") == "a --settle-time flag"  # another flag, left alone


def test_a_scatter_cloud_is_thinned_to_its_shape_and_extremes() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30_000), rng.normal(size=30_000)
    x[123], y[4567] = 40.0, -55.0  # two outliers that must stay drawn
    tx, ty = report.thin_cloud(x.tolist(), y.tolist())
    assert 500 < len(tx) == len(ty) <= report.CLOUD_POINTS
    assert max(tx) == 40.0 and min(ty) == -55.0 and min(tx) == x.min() and max(ty) == y.max()
    pairs = set(zip(x.tolist(), y.tolist(), strict=True))
    assert all(p in pairs for p in zip(tx, ty, strict=True))  # points of the cloud, not made-up ones
    assert report.thin_cloud([1.0, 2.0], [3.0, None]) == ([1.0, 2.0], [3.0, None])  # small: as it is
    env = report._envelope_figure("e", "j", {}, {"velocity": x.tolist(), "effort": y.tolist()})
    assert env["data"][0]["type"] == "scatter" and len(env["data"][0]["x"]) <= report.CLOUD_POINTS


def test_templates_and_static_files_ship_in_the_wheel() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = ROOT / "actuator_sysid"
    for folder in ("service/templates", "service/static"):
        files = [p for p in (package / folder).rglob("*") if p.is_file()]
        assert files, folder
        for p in files:
            rel = p.relative_to(package).as_posix()
            assert any(
                fnmatch(rel, pat) and "/" not in rel[len(folder) + 1 :] for pat in patterns["actuator_sysid"]
            ), rel
    env = templating.templates()
    assert env.autoescape is True
    for name in env.list_templates():
        env.get_template(name)  # every template compiles


def _text(page: str) -> str:
    """A page's visible text, one space between words (scripts and styles left out)."""
    page = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", page)))


def test_each_reason_a_parameter_is_not_identified_is_printed_once() -> None:
    text = _text(report.render_report(_row("succeeded"), GOLDEN, None))
    joint = GOLDEN["joints"]["j1"]
    model = joint["models"][joint["best_model"]]
    reasons = [w.split(": ", 1)[1] for w in model["warnings"] if " is not identified: " in w]
    assert reasons
    for reason in reasons:  # in the parameter table, not again as a warning under it
        n_params = sum(reason in w for w in model["warnings"])
        assert text.count(reason) == n_params, reason
    assert "hard to separate" in text  # the warnings that say something else are still there


def test_every_header_states_the_split_and_what_was_asked() -> None:
    done = _text(report.render_report(_row("succeeded", request=GOLDEN["request"]), GOLDEN, None))
    assert "split whole recordings, evenly spaced · 1 training, 1 validation segments" in done, done[:600]
    asked = {"families": ["dcmotor"], "generations": 5, "population": 8, "seed": 3, "holdout": "kp=800"}
    queued = _text(report.render_report(_row("queued", request={**asked, "budget_s": 30}), None, None))
    assert "holdout kp=800" in queued and "5 generations × 8, at most 30 s" in queued, queued[:600]
    folds = _text(
        report.render_report(_row("queued", request={**asked, "holdout": None, "folds_by": "kp"}), None, None)
    )
    assert "folds by kp" in folds
    cmp = _text(
        pages.render_compare(
            ({**_row("succeeded"), "result": GOLDEN}, None), (_row("queued", request=asked), None)
        )
    )
    assert "whole recordings, evenly spaced" in cmp and "holdout kp=800" in cmp


def test_compare_across_kinds_says_they_cannot_be_compared() -> None:
    joint = {**_row("succeeded", request=GOLDEN["request"]), "result": GOLDEN}
    asked = robots.RobotFitIn(
        validation_fraction=0.25, budget_s=300, groups={"hip": ".*_hip"}, kp=20.0, delay=1
    )
    robot_request = robots.stored_request("r" * 32, asked)  # as queue_robot_fit stores it
    robot = {**_row("succeeded", request=robot_request), "result": {"kind": "robot", "validation": {}}}
    for a, b in ((robot, joint), (joint, robot)):
        text = _text(pages.render_compare((a, None), (b, None)))
        assert "cannot be compared" in text and "whole-robot fit" in text, text[:800]
        assert "None" not in text and "Validation error" not in text
        assert "the last 25 % of the log validates" in text and "300 s" in text
        assert "options delay=1, groups={'hip': '.*_hip'}, kp=20.0, validation_fraction=0.25 " in text, text
    both = _text(pages.render_compare((robot, None), (robot, None)))
    assert "Two whole-robot fits are compared on their own pages" in both
    assert "cannot be compared" not in _text(pages.render_compare((joint, None), (joint, None)))


def test_a_robot_fits_split_is_the_one_its_result_states() -> None:
    """Once run, a robot fit's header states the split its validation made: a time cut, or whole recordings
    (a log of several, whose split the request's validation_fraction does not describe)."""
    request = robots.stored_request("r" * 32, robots.RobotFitIn(validation_fraction=0.25))
    fit = {**_row("succeeded", request=request)}
    by_time = {"split": "time", "fraction": 0.25}
    assert robot_page.split_text({**fit, "result": {"validation": by_time}}).startswith(
        "time split: the last 25 % of the log validates"
    )
    recs = {"method": "the last 1 of 3 recordings", "validation": ["run3"], "training": ["run1", "run2"]}
    by_recs = {"split": "recordings", "fraction": 0.31, "recordings": recs}
    text = robot_page.split_text({**fit, "result": {"validation": by_recs}})
    assert text == "the last 1 of 3 recordings: recordings run3 validate, whole", text
    held = robots.stored_request("r" * 32, robots.RobotFitIn(holdout="kp=20"))
    assert (
        robot_page.split_text(_row("queued", request=held))
        == "holdout kp=20: those recordings validate, whole (asked)"
    )


def test_report_plots_label_their_axes_legibly() -> None:
    from actuator_sysid.fitting.fit import report_data

    figures = {f["id"]: f for f in report.report_figures(GOLDEN, report_data(make_recording(), GOLDEN))}
    log_axis = figures["plot-0-convergence"]["layout"]["yaxis"]
    assert log_axis["type"] == "log" and log_axis["tickformat"]  # full numbers, not Plotly's bare digits
    bars = figures["plot-0-residuals"]["layout"]
    assert bars["xaxis"]["automargin"] and bars["xaxis"]["title"]["standoff"] > 0  # title below the ticks
    assert "b" not in bars.get("margin", {})  # the bottom margin grows with the tick labels


def test_the_fit_form_carries_the_requests_own_bounds() -> None:
    from actuator_sysid.fitting.request import BOUNDS

    page = pages.render_dataset(_dataset(), make_recording(), [], ["dcmotor"], DEFAULTS)
    for field, (low, high) in BOUNDS.items():
        m = re.search(
            rf'<input id="{field}" type="number" data-name="[^"]+" min="([^"]+)" max="([^"]+)"', page
        )
        assert m and (float(m.group(1)), float(m.group(2))) == (low, high), field
        assert f'id="err-{field}"' in page  # where its error shows
    for js in (ROOT / "actuator_sysid" / "service" / "static").glob("*.js"):  # messages stay on the page
        assert "alert(" not in js.read_text(), js.name


def test_the_device_gain_panel_states_what_the_export_writes_at_each_point() -> None:
    """A device-unit fit logged at kp 100 and 400 and at 6 and 7.4 V: one panel row per (kp, vin), each the
    values `export --at` writes there (the SI stiffness scales with kp and the supply, the envelope with the
    supply), and the parameter table marks the reference point."""
    import copy

    from actuator_sysid.export import render_format

    result = copy.deepcopy(GOLDEN)
    joint = result["joints"]["j1"]
    params = joint["models"][joint["best_model"]]["params"]
    result["assumptions"].update(
        operating_point={"j1": {"kp": 100.0, "kd": None, "vin": 7.4}}, gain_units={"j1": "device"}
    )
    stiffness = params["stiffness"]
    joint["device_gains"] = {
        "units": "device",
        "kp_reference": 100.0,
        "gain_scale": stiffness / 100.0,
        "gain_scale_interval": [0.9 * stiffness / 100.0, 1.1 * stiffness / 100.0],
        "stiffness_at": {"100": stiffness, "400": 4.0 * stiffness},
        "vin_reference": 7.4,
        "saturation_effort_at": {"6": 1.0, "7.4": 1.0},
    }
    page = report.render_report(_row("succeeded"), result, None, exports=["isaaclab.json", "isaaclab.py"])
    rows = re.findall(r'<tr data-at="([^"]+)"[^>]*><td>.*?</td><td>([^<]+)</td>', page)
    assert [at for at, _ in rows] == ["kp=100,vin=6", "kp=100,vin=7.4", "kp=400,vin=6", "kp=400,vin=7.4"]
    for at, shown in rows:
        point = {k: float(v) for k, v in (item.split("=") for item in at.split(","))}
        text = render_format(result, None, "isaaclab.py", at=point)
        written = float(re.search(r"^\s*stiffness=([-0-9.e+]+),", text, re.M).group(1))
        assert float(shown) == pytest.approx(written, rel=6e-3), (at, shown, written)
        assert float(shown) == pytest.approx(stiffness * point["kp"] / 100 * point["vin"] / 7.4, rel=1e-3)
    assert 'export/isaaclab.py?at=kp%3D400%2Cvin%3D6"' in page  # the row's download, isaaclab.py first
    assert "at kp = 100, vin = 7.4 V" in _text(page)  # the table's stiffness, marked
    assert "(reference)" in _text(page) and "gain_scale" in page


def test_the_torque_speed_cloud_is_one_shade_with_one_legend_entry_above_the_axes() -> None:
    """Translucent points darkened where they overlap, reading as two greys for one legend entry: the cloud is
    one opaque shade, and the legend stands above the plot, clear of the axis titles."""
    env = {"velocity": [-1.0, 1.0], "effort_max": [1.0, 0.5], "effort_min": [-0.5, -1.0]}
    fig = report._envelope_figure("e", "knee", env, {"velocity": [0.1, 0.1, 0.2], "effort": [0.3, 0.3, 0.1]})
    cloud = fig["data"][0]
    assert cloud["mode"] == "markers" and cloud["marker"]["opacity"] == 1.0
    assert [d["name"] for d in fig["data"]].count(cloud["name"]) == 1
    assert fig["layout"]["legend"]["y"] >= 1.0 and fig["layout"]["legend"]["yanchor"] == "bottom"
