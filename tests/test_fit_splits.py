"""Splits by metadata key and k-fold, a wall-clock budget, and progress messages (issue 5); splits of whole
recordings, nested metadata keys and leave-one-value-out folds (issue 14)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import good_rows, long_csv, make_recording
from isaaclab_logs import TRUTH_DCMOTOR
from isaaclab_logs import make_recording as isaaclab_recording
from test_cli import cli
from test_readers import _bam

from actuator_sysid.datasets.canonical import write_table
from actuator_sysid.datasets.excitation import ExcitationSpec, design
from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.fitting.fit import FitRequest, FitRequestError, fit_recording, plan_split, recordings

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


@pytest.mark.parametrize(
    ("holdout", "folds", "needles"),
    [
        ("kp=25", None, ["no segment has kp = 25", "'10'", "'30'"]),
        ("kd=0.1", None, ["every segment has kd = 0.1", "none is left to train on"]),
        ("load=heavy", None, ["no segment has metadata key 'load'", "'kp'"]),
        ("kp", None, ["KEY=VALUE", "'kp'"]),
        ("kp=", None, ["KEY=VALUE"]),
        ("kp=20", 2, ["holdout and folds exclude each other"]),
        (None, 1, ["folds must be between 2 and the number of recordings (4), got 1"]),
        (None, 5, ["got 5"]),
    ],
)
def test_bad_split_requests_name_the_problem(
    holdout: str | None, folds: int | None, needles: list[str]
) -> None:
    with pytest.raises(FitRequestError) as err:
        fit_recording(_kp_recording(), FitRequest(holdout=holdout, folds=folds, **SMALL))
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_k_fold_reports_every_fold_and_the_mean() -> None:
    rec = _kp_recording()
    result = fit_recording(rec, FitRequest(folds=2, **SMALL))
    assert result["split"]["folds"] == [["s0", "s2"], ["s1", "s3"]]
    assert (
        result["split"]["validation"] == [] and len(result["split"]["train"]) == 4
    )  # final fit: every segment
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
    result = fit_recording(
        rec,
        FitRequest(models=["dcmotor"], generations=10_000, population=64, budget_s=0.5),
        progress=lambda f, m: messages.append((f, m)),
    )
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


# --- whole recordings (issue 14) ---


def _sides(split) -> dict[int, str]:
    """segment index → "train" / "validation" of a split."""
    return {**{i: "train" for i in split.train}, **{i: "validation" for i in split.validation}}


def _assert_whole(rec, split) -> None:
    """Every recording lies on one side of the split, and in at most one fold."""
    for group in recordings(rec):
        assert len({_sides(split)[i] for i in group}) == 1, [rec.segments[i].name for i in group]
        assert sum(bool(set(group) & set(f)) for f in split.folds) <= 1


def _bam_set(tmp_path: Path) -> list[Path]:
    """Five BAM runs as Rhoban's recorder writes them; the middle one, at kp 800, is a lift-and-drop whose torque
    is off for its last 200 entries, with a pause in its time stamps that splits it into two pieces."""
    paths = []
    for k, kp in enumerate((100, 200, 800, 100, 200)):
        run = _bam(
            n=500,
            seed=k,
            kp=kp,
            off=(300, 500) if k == 2 else None,
            trajectory="lift_and_drop" if k == 2 else "sin_time_square",
        )
        if k == 2:
            for e in run["entries"][150:]:
                e["timestamp"] += 0.5  # a 0.5 s pause: more than five sample periods
        paths.append(tmp_path / f"run{k}.json")
        paths[-1].write_text(json.dumps(run))
    return paths


def test_a_lift_and_drop_file_stays_whole_by_default_and_by_holdout(tmp_path: Path) -> None:
    rec = read_paths(_bam_set(tmp_path))
    lift = [i for i, s in enumerate(rec.segments) if s.name.startswith("run2")]
    assert len(lift) == 2 and len(recordings(rec)) == 5  # two pieces, one recording
    split = plan_split(rec, FitRequest())
    _assert_whole(rec, split)
    assert split.validation and not set(lift) & set(
        split.validation
    )  # evenly spaced would pick run2: it trains
    assert "free swing train" in split.method
    for holdout in ("kp=800", "trajectory=lift_and_drop", "bam.kp=800.0"):
        split = plan_split(rec, FitRequest(holdout=holdout))
        assert split.validation == lift, holdout
    split = plan_split(rec, FitRequest(holdout="kp=100"))
    assert [rec.segments[i].name for i in split.validation] == ["run0", "run3"]


def _old_bam_recording():
    """Segments as the BAM reader made them before a file was one segment: a lift-and-drop file's torque-on and
    torque-off stretches were segments "<file>.<k>" with the file's fields under metadata["bam"], no "recording"."""
    rec = make_recording(segments=7)
    files = [("f0", 100), ("f1.0", 200), ("f1.1", 200), ("f1.2", 200), ("f2", 100), ("f3", 200), ("f4", 800)]
    for seg, (name, kp) in zip(rec.segments, files, strict=True):
        seg.name = name
        seg.metadata = {
            "bam": {
                "kp": float(kp),
                "mass": 0.49,
                "trajectory": "lift_and_drop" if "." in name else "sin_sin",
            },
            "joints": {"j1": {"mass": 0.49}},
        }
    rec.segments[2].metadata["free_swing"] = True
    return rec


def test_old_reader_stretches_of_one_file_stay_together() -> None:
    rec = _old_bam_recording()
    assert recordings(rec) == [[0], [1, 2, 3], [4], [5], [6]]
    for req in (FitRequest(), FitRequest(folds=2), FitRequest(folds_by="kp")):
        _assert_whole(rec, plan_split(rec, req))
    split = plan_split(rec, FitRequest())
    assert split.validation and not {1, 2, 3} & set(split.validation)  # the one free-swing file trains
    # one matching stretch takes its whole file along, and says so
    split = plan_split(rec, FitRequest(holdout="free_swing=true"))
    assert split.validation == [1, 2, 3] and "2 other segments" in split.method
    assert plan_split(rec, FitRequest(holdout="kp=200")).validation == [1, 2, 3, 5]  # kp found under bam


@pytest.mark.parametrize(
    ("holdout", "needles"),
    [
        ("mass=0.49", ["ambiguous", "bam.mass", "joints.j1.mass"]),
        (
            "load=1",
            ["no segment has metadata key 'load'", "'bam.kp'", "'bam.trajectory'", "'joints.j1.mass'"],
        ),
        ("kp=400", ["no segment has bam.kp = 400", "'800.0'"]),
        ("bam=1", ["no segment has metadata key 'bam'"]),  # an object is not a value
    ],
)
def test_holdout_key_errors_list_the_dotted_keys(holdout: str, needles: list[str]) -> None:
    with pytest.raises(FitRequestError) as err:
        plan_split(_old_bam_recording(), FitRequest(holdout=holdout))
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_folds_by_leaves_one_value_out() -> None:
    rec = _old_bam_recording()
    split = plan_split(rec, FitRequest(folds_by="kp"))
    assert split.fold_names == ["bam.kp=100", "bam.kp=200", "bam.kp=800"]
    assert (
        split.folds == [[0, 4], [1, 2, 3, 5], [6]]
        and split.validation == []
        and split.train == list(range(7))
    )
    assert "leave one bam.kp out" in split.method


@pytest.mark.parametrize(
    ("req", "needles"),
    [
        (FitRequest(folds_by="mass"), ["ambiguous"]),
        (FitRequest(folds_by="bam.mass"), ["every segment has bam.mass = 0.49", "two values or more"]),
        (FitRequest(folds_by="kp", holdout="kp=100"), ["holdout and folds_by exclude each other"]),
        (FitRequest(folds_by="kp", folds=2), ["folds and folds_by exclude each other"]),
        (FitRequest(folds_by="nope"), ["no segment has metadata key 'nope'", "'bam.kp'"]),
        (FitRequest(folds_by=" "), ["folds_by must name a metadata key"]),
    ],
)
def test_bad_folds_by_names_the_problem(req: FitRequest, needles: list[str]) -> None:
    with pytest.raises(FitRequestError) as err:
        plan_split(_old_bam_recording(), req)
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_folds_by_refuses_a_recording_with_two_values() -> None:
    rec = _old_bam_recording()
    rec.segments[3].metadata["bam"]["kp"] = (
        800.0  # no longer the file's fields: f1.* are one file only by name
    )
    rec.segments[3].metadata["recording"] = "f1"
    for s in rec.segments[1:3]:
        s.metadata["recording"] = "f1"
    with pytest.raises(
        FitRequestError, match=r"segments \['f1.0', 'f1.1', 'f1.2'\] has bam.kp = 200 and 800"
    ):
        plan_split(rec, FitRequest(folds_by="kp"))


def test_folds_by_fit_names_each_fold_by_its_value() -> None:
    rec = _kp_recording()  # kp 10, 20, 20.0, 30
    result = fit_recording(rec, FitRequest(folds_by="kp", **SMALL))
    assert (
        result["split"]["fold_names"] == ["kp=10", "kp=20", "kp=30"] and result["split"]["folds_by"] == "kp"
    )
    assert result["split"]["folds"] == [["s0"], ["s1", "s2"], ["s3"]] and len(result["split"]["train"]) == 4
    folds = result["joints"]["j1"]["models"]["ideal_pd"]["metrics"]["folds"]
    assert [(f["fold"], f["name"], f["validation"]["segments"]) for f in folds] == [
        (1, "kp=10", 1),
        (2, "kp=20", 2),
        (3, "kp=30", 1),
    ]
    assert all(math.isfinite(f["validation"]["position_rmse"]) for f in folds)


def test_two_files_runs_of_one_name_are_two_recordings(tmp_path: Path) -> None:
    """A BAM run "run.json" paused once (two pieces of recording "run") beside a table whose segment is "run"."""
    bam = _bam(n=300)
    for e in bam["entries"][150:]:
        e["timestamp"] += 0.5
    (tmp_path / "run.json").write_text(json.dumps(bam))
    (tmp_path / "table.csv").write_bytes(long_csv(good_rows(30, joint="xl330", segment="run")))
    rec = read_paths([tmp_path / "run.json", tmp_path / "table.csv"])
    assert [s.name for s in rec.segments] == ["run.0", "run.1", "run"]
    assert recordings(rec) == [[0, 1], [2]]
    split = plan_split(rec, FitRequest())
    assert split.validation == [0, 1] and split.train == [2]  # one of two recordings validates, whole


def test_a_designed_bam_set_keeps_lift_and_drop_together(tmp_path: Path) -> None:
    """The excitation's lift and its free drop are one run on the bench: the written log keeps them together."""
    spec = ExcitationSpec(
        kind="bam", duration=6, rate=100, q_min=-0.5, q_max=1.5, qd_max=4.0, mass=0.5, com_distance=0.1
    )
    write_table(design(spec), tmp_path / "bam_set.csv")
    rec = read_paths([tmp_path / "bam_set.csv"])
    assert [s.name for s in rec.segments] == ["sin_time_square", "lift", "drop", "up_and_down"]
    assert recordings(rec) == [[0], [1, 2], [3]]
    split = plan_split(rec, FitRequest())
    assert split.validation and not {1, 2} & set(split.validation)


def test_bam_files_named_like_stretches_are_still_two_recordings(tmp_path: Path) -> None:
    """Two repeats of one run, sin.1.json and sin.2.json: one segment per file, not one file's stretches."""
    for k in (1, 2):
        (tmp_path / f"sin.{k}.json").write_text(json.dumps(_bam(n=300)))
    rec = read_paths([tmp_path / "sin.1.json", tmp_path / "sin.2.json"])
    assert [s.name for s in rec.segments] == ["sin.1", "sin.2"] and recordings(rec) == [[0], [1]]


def _drop_log(tmp_path: Path) -> Path:
    """A canonical long-form CSV of a DC motor on the Isaac Lab bench: two tracking episodes and two drops whose
    torque goes off after 0.5 s (an `enable` column), the positions our rollout of the truth makes, torque-off
    stretches swinging freely."""
    import numpy as np
    from export_helpers import TRUTH, short_recording

    from actuator_sysid.fitting.fit import simulate

    rec = short_recording(n_segments=4, n_samples=300)
    for k, s in enumerate(rec.segments):
        s.metadata = {"kind": "track" if k < 2 else "drop"}
        s.enable = np.ones((s.n, 1), bool)
        if k >= 2:
            s.enable[100:] = False
    sims = simulate(rec, "hinge", "dcmotor", {**TRUTH, "delay": 0})
    for s in rec.segments:
        s.q, s.qd = (
            sims[s.name]["q"][:, None].astype(np.float64),
            sims[s.name]["qd"][:, None].astype(np.float64),
        )
    path = tmp_path / "drops.csv"
    write_table(rec, path)
    return path


def test_enable_is_a_canonical_column_and_folds_by_replays_drops_torque_off(tmp_path: Path) -> None:
    """The `enable` column is read (not ignored), and `folds_by` replays the drops through every consumer with
    the torque off where the log has it off: the replays follow our rollout, not a servo holding its target."""
    from export_helpers import TRUTH, make_result, model_entry

    from actuator_sysid.export import render_all

    rec = read_paths([_drop_log(tmp_path)])
    assert not any("enable" in w for w in rec.warnings), rec.warnings
    drops = [s for s in rec.segments if s.metadata["kind"] == "drop"]
    assert all(s.enable is not None and s.enable[:100].all() and not s.enable[100:].any() for s in drops)
    split = plan_split(rec, FitRequest(folds_by="kind"))
    assert split.fold_names == ["kind=drop", "kind=track"]
    res = make_result({"hinge": {"dcmotor": model_entry("dcmotor", {**TRUTH, "delay": 0})}}, rec)
    res["split"] = {
        "train": [s.name for s in rec.segments],
        "validation": [],
        "folds": [["2", "3"], ["0", "1"]],
    }
    validation = json.loads(render_all(res, rec)["validation.json"])
    for fmt in ("isaaclab.py", "newton.usda", "mjcf.xml"):
        r = validation["replay"][fmt]
        assert r["status"] == "ok" and set(r["segments"]) == {"0", "1", "2", "3"}, r
        rows = {row["segment"]: row for row in r["joints"]["hinge"]["segments"]}
        for s in drops:  # a driven replay of a drop holds the target: tenths of a radian away
            assert rows[s.name]["rmse_replay_vs_ours"] < 1e-2, (fmt, rows[s.name])
        assert r["within_tolerance"], (fmt, r["joints"])


def test_a_bad_enable_value_names_its_row(tmp_path: Path) -> None:
    import pandas as pd

    from actuator_sysid.datasets.recording import DatasetError

    path = _drop_log(tmp_path)
    frame = pd.read_csv(path)
    frame.loc[7, "enable"] = 0.5
    frame.to_csv(path, index=False)
    with pytest.raises(DatasetError, match=r"line 9, column 'enable'.*1 where the actuator is driven"):
        read_paths([path])


@pytest.mark.parametrize("form", ["long", "wide"])
def test_enable_round_trips_through_the_canonical_table(tmp_path: Path, form: str) -> None:
    """write_table writes the enable, read_table (streamed and whole-file) reads it back; in wide form a joint
    without its <joint>/enable column is driven throughout."""
    import numpy as np
    import pandas as pd

    from actuator_sysid.datasets.canonical import read_table, sidecar_for

    rec = make_recording(joints=("hip", "knee"), segments=2)
    for s in rec.segments:
        s.enable = np.ones((s.n, 2), bool)
        s.enable[s.n // 2 :, 0] = False
    for suffix in (".csv", ".parquet"):
        path = tmp_path / f"log_{form}{suffix}"
        write_table(rec, path, form=form)  # type: ignore[arg-type]
        back = read_table(path, path.name, sidecar_for(rec))
        for a, b in zip(rec.segments, back.segments, strict=True):
            assert b.enable is not None and (a.enable == b.enable).all(), (suffix, b.name)
    if form == "wide":
        path = tmp_path / "log_wide.csv"
        pd.read_csv(path).drop(columns=["knee/enable"]).to_csv(path, index=False)
        back = read_table(path, path.name, sidecar_for(rec))
        assert all(
            s.enable is not None and s.enable[:, 1].all() and not s.enable[-1, 0] for s in back.segments
        )
