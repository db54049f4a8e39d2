"""Splits by metadata key and k-fold, a wall-clock budget, and progress messages (issue 5)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import make_recording
from isaaclab_logs import TRUTH_DCMOTOR
from isaaclab_logs import make_recording as isaaclab_recording
from test_cli import cli

from actuator_sysid.datasets.canonical import write_table
from actuator_sysid.fitting.api import FitRequest, FitRequestError, fit_recording, plan_split

SMALL = {"models": ["ideal_pd"], "generations": 8, "population": 8, "refine_iterations": 10}


def _kp_recording():
    """Four segments recorded at kp 10, 20, 20.0 and 30 (metadata as a sidecar would give it)."""
    rec = make_recording(segments=4)
    for seg, kp in zip(rec.segments, (10, 20, 20.0, 30), strict=True):
        seg.metadata["kp"] = kp
    return rec


def test_holdout_by_metadata_key_is_the_validation_set() -> None:
    rec = _kp_recording()
    split = plan_split(rec, FitRequest(holdout="kp=20"))
    assert split.validation == [1, 2] and split.train == [0, 3]  # 20 and 20.0 both match "20"
    result = fit_recording(rec, FitRequest(holdout="kp=20", **SMALL))
    assert result["split"]["validation"] == ["s1", "s2"] and result["split"]["train"] == ["s0", "s3"]
    assert result["split"]["holdout"] == "kp=20" and "kp = 20" in result["split"]["method"]
    metrics = result["joints"]["j1"]["models"]["ideal_pd"]["metrics"]
    assert metrics["validation"]["segments"] == 2 and metrics["train"]["segments"] == 2
    assert {r["segment"] for r in metrics["segments"] if r["split"] == "validation"} == {"s1", "s2"}


@pytest.mark.parametrize(("holdout", "folds", "needles"), [
    ("kp=25", None, ["no segment has kp = 25", "'10'", "'30'"]),
    ("kd=0.1", None, ["every segment has kd = 0.1", "none is left to train on"]),
    ("load=heavy", None, ["no segment has metadata key 'load'", "'kp'"]),
    ("kp", None, ["KEY=VALUE", "'kp'"]),
    ("kp=", None, ["KEY=VALUE"]),
    ("kp=20", 2, ["holdout and folds exclude each other"]),
    (None, 1, ["folds must be between 2 and the number of recordings (4), got 1"]),
    (None, 5, ["got 5"]),
])
def test_bad_split_requests_name_the_problem(holdout: str | None, folds: int | None, needles: list[str]) -> None:
    with pytest.raises(FitRequestError) as err:
        fit_recording(_kp_recording(), FitRequest(holdout=holdout, folds=folds, **SMALL))
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_k_fold_reports_every_fold_and_the_mean() -> None:
    rec = _kp_recording()
    result = fit_recording(rec, FitRequest(folds=2, **SMALL))
    assert result["split"]["folds"] == [["s0", "s2"], ["s1", "s3"]]
    assert result["split"]["validation"] == [] and len(result["split"]["train"]) == 4  # final fit: every segment
    metrics = result["joints"]["j1"]["models"]["ideal_pd"]["metrics"]
    folds = metrics["folds"]
    assert [f["fold"] for f in folds] == [1, 2] and folds[1]["validation_segments"] == ["s1", "s3"]
    rmse = [f["validation"]["position_rmse"] for f in folds]
    assert all(math.isfinite(v) and v > 0 for v in rmse)
    assert metrics["folds_mean"]["position_rmse"] == pytest.approx(sum(rmse) / 2)
    # the pooled cross-validation error is what ranking uses; each segment is validated exactly once
    assert metrics["validation"]["segments"] == 4
    # a fold's model never saw its validation segments, so it cannot beat the fit on every segment there
    assert metrics["validation"]["position_rmse"] >= 0.999 * metrics["train"]["position_rmse"]


def test_budget_stops_the_search_gracefully_and_says_so() -> None:
    rec = isaaclab_recording("dcmotor", TRUTH_DCMOTOR)
    rec.segments = rec.segments[:2]
    messages: list[tuple[float, str]] = []
    result = fit_recording(rec, FitRequest(models=["dcmotor"], generations=10_000, population=64, budget_s=0.5),
                           progress=lambda f, m: messages.append((f, m)))
    model = result["joints"]["hinge"]["models"]["dcmotor"]
    assert result["budget"] == {"seconds": 0.5, "stopped_on_budget": True}
    assert model["search"]["stopped_on"] == "budget" and model["search"]["generations"] < 10_000
    assert all(math.isfinite(v) for v in model["params"].values())
    # the best so far is refined and still near the truth (the scan and warm start are good on this log)
    assert abs(model["params"]["stiffness"] / TRUTH_DCMOTOR["stiffness"] - 1) < 0.2
    gens = [m for _, m in messages if "generation" in m]
    assert gens and all(k in m for m in gens for k in ("best loss", "elapsed", "ETA"))
    assert any("budget reached" in m for _, m in messages)
    fractions = [f for f, _ in messages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_unbudgeted_fit_records_why_it_stopped() -> None:
    result = fit_recording(make_recording(), FitRequest(**SMALL))
    model = result["joints"]["j1"]["models"]["ideal_pd"]
    assert result["budget"] == {"seconds": None, "stopped_on_budget": False}
    assert model["search"]["stopped_on"] in ("generations", "plateau")


def test_cli_split_and_budget_flags(tmp_path: Path) -> None:
    write_table(_kp_recording(), tmp_path / "log.csv")
    r = cli("fit", str(tmp_path / "log.csv"), "--holdout", "kp=99", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "no segment has kp = 99" in r.stderr and "Traceback" not in r.stderr
    r = cli("fit", str(tmp_path / "log.csv"), "--folds", "9", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "folds must be between 2" in r.stderr
    r = cli("fit", str(tmp_path / "log.csv"), "--budget", "-1", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "budget.seconds" in r.stderr
    assert not (tmp_path / "out").exists()
