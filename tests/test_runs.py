"""The runs table's data: a database made before runs had names, tags and summaries upgrades in place with every
row kept, and the dashboard summarises the finished fits it finds without one (verdict, headline error, split)
from their stored results; names and tags follow the name rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from actuator_sysid.fitting.result import as_result
from actuator_sysid.service import db as dbmod
from actuator_sysid.service.runs import backfill, run_rows, run_summary
from actuator_sysid.service.schemas import FitCreate, RunLabel

GOLDEN = Path(__file__).parent / "golden" / "fit.json"


def _at(url: str, revision: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", str(Path(dbmod.__file__).with_name("migrations")))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    engine.dispose()


def test_a_database_before_runs_upgrades_and_the_dashboard_summarises_its_fits(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _at(url, "0002")
    result = json.loads(GOLDEN.read_text())
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(
            sa.text(
                "insert into datasets (id, project, name, created_at, summary, meta, sha256, size) "
                "values ('d1', 'default', 'knee.csv', :t, :s, '{}', 'ab', 3)"
            ),
            {"t": now, "s": json.dumps({"joints": ["knee"]})},
        )
        c.execute(
            sa.text(
                "insert into fits (id, project, dataset_id, status, progress, message, request, result, "
                "created_at, updated_at, started_at, finished_at, attempts, cancel_requested) values "
                "('f1', 'default', 'd1', 'succeeded', 1.0, 'done', :req, :res, :t, :t, :t, :end, 1, 0)"
            ),
            {
                "req": json.dumps({"families": ["dcmotor"]}),
                "res": json.dumps(result),
                "t": now,
                "end": datetime(2026, 12, 5, 9, 0, 42, tzinfo=UTC),
            },
        )
    engine.dispose()
    repo = dbmod.Repository(url)  # migrates to head
    try:
        d = repo.get_dataset("d1")
        assert d["robot_id"] is None and d["summary"] == {"joints": ["knee"]}
        fits = repo.list_fits()
        assert [(f["id"], f["name"], f["tags"], f["summary"]) for f in fits] == [("f1", None, [], None)]
        rows = run_rows(backfill(repo, fits), {"d1": "knee.csv"})
        typed = as_result(result)
        best = max(  # the worst joint's best family
            min(r.error for r in jf.ranking if r.error is not None) for jf in typed.joints.values()
        )
        assert rows[0]["verdict"] == result["verdict"]["verdict"]
        assert rows[0]["error"] == pytest.approx(best) and rows[0]["error_unit"] == "rad"
        assert rows[0]["wall_s"] == pytest.approx(42.0) and rows[0]["dataset"] == "knee.csv"
        assert rows[0]["families"] == "dcmotor" and rows[0]["kind"] == "joint"
        assert repo.get_fit("f1")["summary"] == run_summary(repo.get_fit("f1"), result)  # stored once found
        labelled = repo.label_fit("f1", None, "knee 1", ["bench"])
        assert (labelled["name"], labelled["tags"]) == ("knee 1", ["bench"])
        assert repo.label_fit("f1", None, "", None)["name"] is None  # "" clears; None keeps the tags
        assert repo.get_fit("f1")["tags"] == ["bench"]
    finally:
        repo.close()


def test_run_names_and_tags_follow_the_name_rule() -> None:
    assert FitCreate(dataset_id="d", name="go2 kp20", tags=["a", "b", "a"]).tags == ["a", "b"]
    for bad in ({"name": "<script>"}, {"tags": ["ok", "x;y"]}, {"tags": [f"t{k}" for k in range(17)]}):
        with pytest.raises(ValueError) as e:
            FitCreate(dataset_id="d", **bad)
        assert "name" in str(e.value) or "tag" in str(e.value) or "16" in str(e.value), e.value
    assert RunLabel(name="").name == ""
