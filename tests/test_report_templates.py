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

from conftest import make_recording

from actuator_sysid.service import pages, report, templating

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
    assert '"segment &lt;script' in html["dataset"]  # a Plotly title: escaped inside the figure's JSON


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


def test_a_standalone_report_inlines_plotly_and_the_served_one_links_it() -> None:
    rec = make_recording()
    from actuator_sysid.fitting.fit import report_data

    plots = report_data(rec, GOLDEN)
    served = report.render_report(_row("succeeded"), GOLDEN, plots, exports=["isaaclab.py"])
    alone = report.render_report(_row("succeeded"), GOLDEN, plots, standalone=True)
    assert '<script src="/static/plotly.min.js"></script>' in served and "/static/plotly.min.js" not in alone
    assert len(alone) - len(served) > 1_000_000  # plotly.min.js itself
    for page in (served, alone):
        figures = json.loads(re.search(r"const FIGURES = (.*?);\n", page).group(1))
        assert figures and all(f'id="{f["id"]}"' in page for f in figures)  # each figure has its div
    assert "data-action" in served and "data-action" not in alone and "<nav>" not in alone


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
