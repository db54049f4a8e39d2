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
from actuator_sysid.fitting.ladder import INNER_KEY, INNER_ON, INNER_SHARE, NATIVE, inner_split
from actuator_sysid.fitting.plan import plan_split, split_in_time
from actuator_sysid.fitting.result import FitResult

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import ladder_selection as bench  # noqa: E402

SEED = 0  # one seed here: bench/ladder_selection.py runs ten
# Shorter logs and a smaller search than the bench's quick run (3 s, 20 generations, 25 least-squares iterations):
# on seed 0 the pick's far-end MAE is 0.34 of the first rung's with these, 0.24 with the bench's
LOG_S = 2.0  # seconds per recording
SEARCH = {"generations": 8, "population": 8, "refine_iterations": 15}


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


@dataclasses.dataclass(frozen=True)
class Climbed:
    """The logs BAM's simulator made for one seed, the ladder's request on them, and its fit."""

    rec: Recording
    req: FitRequest
    res: FitResult


@pytest.fixture(scope="module")
def climbed() -> Climbed:
    """One ladder fit on the bench's logs, the far end held out: the two tests below read it."""
    with tempfile.TemporaryDirectory() as tmp:
        from actuator_sysid.datasets.readers import read_paths

        rec = bench.tagged(read_paths(bench.write_logs(Path(tmp), bench.truth(SEED), LOG_S)))
    holdout = f"band_hz={bench.FAR:g}"
    req = FitRequest(families=None, ladder_judge="training", holdout=holdout, seed=SEED, **SEARCH)
    return Climbed(rec, req, fit_result(rec, req))


@pytest.mark.slow
def test_the_choice_does_not_see_the_held_out_part(climbed: Climbed) -> None:
    rec = climbed.rec
    far = [i for i, s in enumerate(rec.segments) if s.metadata["band_hz"] == bench.FAR]
    moved = dataclasses.replace(
        rec,
        segments=[dataclasses.replace(s, q=s.q + 0.2) if i in far else s for i, s in enumerate(rec.segments)],
    )
    a, b = climbed.res.extra["ladder"], fit_result(moved, climbed.req).extra["ladder"]
    assert a["judged_on"] == INNER_ON and a["held_out"] and "the last 2 of the 6" in a["inner_split"]
    assert a["joints"]["xl330"]["steps"] == b["joints"]["xl330"]["steps"]  # the same climb, to the digit
    assert a["joints"]["xl330"]["picked"] == b["joints"]["xl330"]["picked"]
    assert a["joints"]["xl330"]["picked_held_out"] != b["joints"]["xl330"]["picked_held_out"]


@pytest.mark.slow
def test_far_out_the_pick_beats_the_first_rung_and_its_figure_is_its_own_fit(climbed: Climbed) -> None:
    ladder, pick = climbed.res.extra["ladder"], climbed.res.joints["xl330"].best_model
    assert ladder["inner_split"].startswith("the last 2 of the 6 training recordings"), ladder["inner_split"]
    # the pick's path (bench.rung_paths) up to it, fitted as one named fit on the whole training part, nested in
    # order, no choice made: the first rung's far-end figure and the pick's own fit
    path = next(p for p in bench.rung_paths() if pick in p)
    path = path[: path.index(pick) + 1]
    families = path if path[0] == NATIVE else [NATIVE, *path]
    req = FitRequest(families=families, holdout=climbed.req.holdout, seed=SEED, **SEARCH)
    far, refit = bench._far(fit_result(climbed.rec, req)), bench._far(climbed.res)
    assert refit[pick] < far[NATIVE], (pick, refit, far)  # the climb buys something past the split
    assert refit[pick] - far[pick] == 0.0, (pick, refit, far)  # the reported figure is the rung's own fit
