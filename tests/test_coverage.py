"""A fit says when its validation recordings ask for efforts no training recording did (fitting/coverage.py):
the rule on its own, and on logs the real Isaac Lab DCMotor made (the BAM logs: tests/test_real_bam.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from isaaclab_logs import make_recording

from actuator_sysid.fitting.coverage import BEYOND_TRAINING, MIN_SHARE, beyond_training
from actuator_sysid.fitting.fit import FitRequest, fit_result
from actuator_sysid.fitting.verdict import judge

SMALL = {"families": ["dcmotor"], "generations": 10, "population": 8, "refine_iterations": 10}


def test_the_share_beyond_the_training_top_decides() -> None:
    rng = np.random.default_rng(0)
    train = {"a": rng.uniform(0, 1, 2000), "b": rng.uniform(0, 1, 2000)}
    within = rng.uniform(0, 1, 1000)
    assert beyond_training({**train, "v": within}, {"v"}) is None
    beyond = np.concatenate([within[:900], np.full(100, 2.5)])  # 10 % of the samples at 2.5× the top
    w = beyond_training({**train, "v": beyond}, {"v"})
    assert w is not None and w.startswith(BEYOND_TRAINING)
    top = np.quantile(np.concatenate(list(train.values())), 0.999)  # the training range's top
    assert "10 % of their driven samples" in w and f"top of {top:.3g} N·m, up to {2.5 / top:.1f}×" in w
    few = np.concatenate([within[: 1000 - 30], np.full(30, 2.5)])  # 3 %: under MIN_SHARE
    assert 30 / 1000 < MIN_SHARE and beyond_training({**train, "v": few}, {"v"}) is None


def test_one_training_spike_does_not_widen_the_range_and_empty_sides_say_nothing() -> None:
    rng = np.random.default_rng(1)
    spike = np.concatenate(
        [rng.uniform(0, 1, 4000), [50.0]]
    )  # one sample in 4001: above the 99.9th percentile
    val = np.full(500, 2.0)
    assert beyond_training({"t": spike, "v": val}, {"v"}) is not None
    assert beyond_training({"t": spike}, {"v"}) is None  # nothing held out
    assert beyond_training({"v": val}, {"v"}) is None  # nothing trained
    assert beyond_training({"t": spike, "v": np.array([])}, {"v"}) is None  # the held-out one never driven


def _gentle_and_fast():
    """Three Isaac Lab DCMotor segments: two gentle tracking runs and a ±1.6 rad square wave that asks its PD law
    for many times their effort (the real class made them: tests/isaaclab_logs.py)."""
    rec = make_recording("dcmotor")
    keep = [s for s in rec.segments if s.metadata["trajectory"] in ("slow", "multisine", "fast")]
    return dataclasses.replace(rec, segments=keep)


@pytest.mark.parametrize(("held_out", "warned"), [("fast", True), ("multisine", False)])
def test_a_fit_warns_only_when_the_held_out_log_is_driven_harder(held_out: str, warned: bool) -> None:
    rec = _gentle_and_fast()
    result = fit_result(rec, FitRequest(holdout=f"trajectory={held_out}", **SMALL))
    model = result.joints["hinge"].models["dcmotor"]
    found = [w for w in model.warnings if w.startswith(BEYOND_TRAINING)]
    assert bool(found) == warned, model.warnings
    checks = [c for c in judge(result, rec).checks if c.check == "beyond_training"]
    assert [c.status for c in checks] == (["usable"] if warned else [])
    if warned:
        assert "hinge: dcmotor (the best model)" in checks[0].reason
