"""Whether the validation recordings ask the actuator for efforts the training recordings never did.

A held-out recording can drive the actuator harder than any training recording did: a higher gain, a heavier
load, a hold against a limit. Its error then measures how well the model extrapolates, not how well it fits.
The fitted law, run on the logged states (open loop), gives the effort each sample asks for. When enough of
the validation samples ask for more than every training sample did, the model's limits and friction there
were never measured. The result then says so (BAM's XL330 logs with kp = 800 held out: the kp = 800 files
ask for up to 2.8× the training top on 43 % of their driven samples, and their hold at full PWM is what the
families disagree on).

An extrapolation that was tested and held is the best evidence there is: `extrapolation_held` says when the
validation error is no worse than the training error (or within the noise floor), and the verdict then states
it as a caveat instead of lowering the fit (fitting/verdict.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..models.rollout import SegmentBatch

BEYOND_TRAINING = (
    "the validation recordings ask for more effort than any training recording"  # the warning's start
)
MIN_SHARE = 0.05  # warn when at least 5 % of the driven validation samples lie beyond the training range
TRAINING_QUANTILE = 0.999  # the training range's top: its 99.9th percentile, so one spike does not widen it


def demands(traces: Mapping[str, np.ndarray], batch: SegmentBatch) -> dict[tuple[str, str], np.ndarray]:
    """Per (joint, segment), |effort| the fitted law asks for at each driven sample of an open-loop trace
    (candidate 0)."""
    out = {}
    enable = batch.enable
    assert enable is not None  # SegmentBatch.__post_init__ fills it (all driven) when it is not given
    for s in range(batch.n_segments):
        sl = batch.segment_slice(s)
        driven = enable[sl] != 0
        joint = batch.joints[int(batch.seg_joint[s])]
        out[joint, batch.seg_names[s]] = np.abs(np.asarray(traces["computed"][0, sl], np.float64))[driven]
    return out


def beyond_training(per_segment: Mapping[str, np.ndarray], validation: set[str]) -> str | None:
    """A warning when at least MIN_SHARE of the validation segments' driven samples ask for more effort than
    the training segments' top (TRAINING_QUANTILE); None otherwise, or without samples on either side."""
    train = [a for name, a in per_segment.items() if name not in validation and a.size]
    val = [a for name, a in per_segment.items() if name in validation and a.size]
    if not train or not val:
        return None
    pooled = np.concatenate(val)
    found = _exceeds(np.concatenate(train), pooled)
    if found is None:
        return None
    share, top = found
    return (
        f"{BEYOND_TRAINING}: {100 * share:.0f} % of their driven samples ask for more than the training "
        f"recordings' top of {top:.3g} N·m, up to {float(pooled.max()) / top:.1f}× it (the fitted law on the "
        f"logged states). There the effort limits and the friction are extrapolated, not measured, so the "
        f"validation error says how well the model extrapolates. Training recordings that reach those efforts "
        f"(a higher gain, a heavier load, a stall test) would measure them"
    )


def _exceeds(train: np.ndarray, val: np.ndarray) -> tuple[float, float] | None:
    """(share of `val` above the training top, that top) when the share is at least MIN_SHARE; None otherwise.
    The training top is its TRAINING_QUANTILE, so one spike does not widen it."""
    top = float(np.quantile(train, TRAINING_QUANTILE))
    share = float(np.mean(val > top))
    return (share, top) if share >= MIN_SHARE and top > 0 else None


def extrapolation_held(
    train: float | None, validation: float | None, noise: float, times: float
) -> str | None:
    """How a fit tested beyond its training efforts held: a phrase when its validation RMSE is at or below its
    training RMSE, or within `times`× the position noise floor `noise` [rad]; None when the error is worse
    (or the validation error is missing)."""
    if validation is None or not math.isfinite(validation):
        return None
    if train is not None and math.isfinite(train) and validation <= train:
        return f"validation position RMSE {validation:.3g} rad ≤ training {train:.3g} rad"
    if math.isfinite(noise) and noise > 0 and validation <= times * noise:
        return (
            f"validation position RMSE {validation:.3g} rad within {times:g}× the noise floor {noise:.3g} rad"
        )
    return None


def robot_beyond_training(names: list[str], demand: np.ndarray, speed: np.ndarray, split: int) -> str | None:
    """A whole-robot fit's warning when a joint's validated span (samples from `split` on) asks, on at least
    MIN_SHARE of its samples, for more |effort| `demand` (T, J) (the fitted PD law and the log's feed-forward on
    the logged states) or more |speed| (T, J) than its training span's top (TRAINING_QUANTILE); None otherwise."""
    found = []
    for what, unit, x in (("effort", "N·m", np.abs(demand)), ("speed", "rad/s", np.abs(speed))):
        for k, name in enumerate(names):
            train, val = x[:split, k], x[split:, k]
            if train.size and val.size and (hit := _exceeds(train, val)) is not None:
                share, top = hit
                found.append(
                    (
                        share,
                        f"{name} {what} on {100 * share:.0f} %, up to {float(val.max()) / top:.1f}× "
                        f"the training top {top:.3g} {unit}",
                    )
                )
    if not found:
        return None
    found.sort(key=lambda f: -f[0])
    return (
        "the validated span asks for more effort or speed than the training span did ("
        + "; ".join(f for _, f in found[:6])
        + (f"; {len(found) - 6} more" if len(found) > 6 else "")
        + "). There the effort limits and the friction are extrapolated, not measured, so the validation error "
        "says how well the model extrapolates"
    )
