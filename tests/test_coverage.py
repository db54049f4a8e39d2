"""A fit says when its validation recordings ask for efforts no training recording did (fitting/coverage.py):
the rule on its own, and on logs the real Isaac Lab DCMotor made (the BAM logs: tests/test_real_bam.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from isaaclab_logs import make_recording

from actuator_sysid.fitting.coverage import BEYOND_TRAINING, MIN_SHARE, beyond_training, extrapolation_held
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
    assert len(checks) == int(warned)
    if warned:  # a caveat when the extrapolated error held, a cap at usable only when it is worse
        m = model.metrics
        assert m.train is not None and m.validation is not None
        held = extrapolation_held(m.train.position_rmse, m.validation.position_rmse, noise_floor_of(rec), 3.0)
        assert checks[0].status == ("ok" if held else "usable"), (checks[0], m)
        assert "hinge: dcmotor (the best model)" in checks[0].reason
        assert ("tested beyond training and held" in checks[0].reason) == bool(held)


def noise_floor_of(rec) -> float:
    from actuator_sysid.fitting.verdict import log_stats

    return log_stats(rec)["hinge"]["noise"]


def test_held_is_no_worse_than_training_or_within_the_noise() -> None:
    assert extrapolation_held(0.01, 0.009, 1e-3, 3.0) and extrapolation_held(0.01, 0.01, math.nan, 3.0)
    assert extrapolation_held(1e-7, 2e-3, 1e-3, 3.0) == (
        "validation position RMSE 0.002 rad within 3× the noise floor 0.001 rad"
    )
    assert extrapolation_held(0.01, 0.02, 1e-3, 3.0) is None  # worse, beyond the noise
    assert (
        extrapolation_held(0.01, None, 1e-3, 3.0) is None and extrapolation_held(None, 0.1, 0.0, 3.0) is None
    )
