"""The ladder chooses on its training data alone (fitting/ladder.py): the inner split never holds a held-out
sample, the choice does not move when the held-out part does, and on logs BAM's simulator made with a far end
past what the ladder chose on (bench/ladder_selection.py), the pick beats the first rung far out and the figure
reported for it is its own fit's."""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.fitting.fit import FitRequest, fit_result
from actuator_sysid.fitting.ladder import INNER_KEY, INNER_ON, INNER_SHARE, inner_split
from actuator_sysid.fitting.plan import plan_split, split_in_time

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import ladder_selection as bench  # noqa: E402

SEEDS = [0]  # one seed here: bench/ladder_selection.py runs ten
LOG_S = 3.0  # seconds per recording (the bench's quick length)


def _rec(kps: list[float], n: int = 60) -> Recording:
    """Segments of plain arrays, one recording each, with a firmware kp in their metadata."""
    t = np.arange(n) * 0.01
    segs = []
    for k, kp in enumerate(kps):
        q = np.sin(t + k)[:, None]
        z = np.zeros_like(q)
        segs.append(
            Segment(f"s{k}", t + 10.0 * k, q=q, qd=z, q_des=q, qd_des=z, tau_ff=z, metadata={"kp": kp})
        )
    return Recording([JointInfo("j", mass=0.5, com_distance=0.1)], segs)


def test_the_last_training_recordings_judge_whole_and_the_held_out_ones_are_not_there() -> None:
    rec = _rec([10, 10, 20, 20, 40, 40])
    inner = inner_split(rec, FitRequest(families=None, ladder_judge="training", holdout="kp=40"))
    assert inner is not None and inner.held_out is not None and "kp = 40" in inner.held_out
    assert [s.name for s in inner.rec.segments] == ["s0", "s1", "s2", "s3"]  # no held-out recording
    split = plan_split(inner.rec, inner.req)
    judges = [inner.rec.segments[i].name for i in split.validation]
    assert judges == ["s3"] and inner.req.holdout == f"{INNER_KEY}=yes"  # round(0.3 · 4) = 1, the last
    assert "the last 1 of the 4 training recordings" in inner.how


def test_a_split_in_time_is_cut_again_in_time_before_the_outer_cut() -> None:
    rec = split_in_time(_rec([10, 20], n=100), 0.2)
    inner = inner_split(rec, FitRequest(families=None, ladder_judge="training", validate_last=0.2))
    assert inner is not None and inner.req.validate_last == INNER_SHARE
    outer_cut = {s.name: s.t[0] for s in rec.segments if "continues" in s.metadata}
    for s in inner.rec.segments:  # every inner sample lies before its segment's outer cut
        assert s.t[-1] < outer_cut[s.name.split("@")[0] + "@validation"]
    judged = [s for s in inner.rec.segments if "continues" in s.metadata]
    assert [s.n for s in judged] == [24, 24]  # 30 % of each 80-sample training piece


def test_one_recording_is_cut_in_time_and_folds_leave_nothing_untouched() -> None:
    one = inner_split(_rec([10]), FitRequest(families=None))
    assert one is not None and one.held_out is None and "in time" in one.how
    folds = inner_split(_rec([10, 20, 30, 40]), FitRequest(families=None, ladder_judge="training", folds=2))
    assert folds is not None and folds.held_out is None and len(folds.rec.segments) == 4
    assert inner_split(_rec([10], n=4), FitRequest(families=None)) is None  # too short to cut again


def _bam_log(seed: int) -> Recording:
    with tempfile.TemporaryDirectory() as tmp:
        from actuator_sysid.datasets.readers import read_paths

        return bench.tagged(read_paths(bench.write_logs(Path(tmp), bench.truth(seed), LOG_S)))


@pytest.mark.slow
def test_the_choice_does_not_see_the_held_out_part() -> None:
    rec = _bam_log(0)
    req = FitRequest(families=None, ladder_judge="training", holdout=f"band_hz={bench.FAR:g}", **bench.QUICK)
    far = [i for i, s in enumerate(rec.segments) if s.metadata["band_hz"] == bench.FAR]
    moved = dataclasses.replace(
        rec,
        segments=[dataclasses.replace(s, q=s.q + 0.2) if i in far else s for i, s in enumerate(rec.segments)],
    )
    a, b = (fit_result(r, req).extra["ladder"] for r in (rec, moved))
    assert a["judged_on"] == INNER_ON and a["held_out"] and "the last 2 of the 6" in a["inner_split"]
    assert a["joints"]["xl330"]["steps"] == b["joints"]["xl330"]["steps"]  # the same climb, to the digit
    assert a["joints"]["xl330"]["picked"] == b["joints"]["xl330"]["picked"]
    assert a["joints"]["xl330"]["picked_held_out"] != b["joints"]["xl330"]["picked_held_out"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_far_out_the_pick_beats_the_first_rung_and_its_figure_is_its_own_fit(seed: int) -> None:
    row = bench.one_seed(seed, LOG_S, bench.QUICK)
    assert row["inner_split"].startswith("the last 2 of the 6 training recordings"), row["inner_split"]
    assert row["pick_far_mae"] < row["first_rung_far_mae"], row  # the climb buys something past the split
    assert row["refit_minus_path_fit"] == 0.0, row  # the reported figure is the rung's own fit, unselected
