"""What a family's second search start says beside the one the fit kept: its validation error, and a warning
when the training data barely choose between the two optima although the validation recordings tell them apart.

A rich friction family is searched from its nested parent's optimum and from the warm start (fitting/fit.py),
and the lower training loss wins: validation never chooses. On real logs the two optima can train within a few
per cent of each other and predict a held-out gain 2× apart (BAM's XL330 logs with kp = 800 held out:
`dcmotor_quadratic_load` at seed 2 keeps the warm start's optimum, 0.139 rad, over the nested one's 0.056 rad,
which trained 18 % worse). The result then says so, so that nobody trusts one of them more than the data do.
"""

from __future__ import annotations

from collections.abc import Mapping

DISAGREEMENT = "the training data barely choose between two optima"  # the warning's start (verdict.py)
NEAR_START_LOSS = 0.25  # the other start trained at most 25 % worse: the data barely prefer the kept one
START_DISAGREEMENT = 1.25  # ... while the two validate 25 % or more apart


def start_disagreement(
    losses: Mapping[str, float], validation: Mapping[str, float | None], kept: str
) -> str | None:
    """A warning when another start's optimum trained nearly as well as the kept one and validates far from
    it; None otherwise (or without validation errors). `losses` and `validation` are keyed by start."""
    kept_val = validation.get(kept)
    if kept_val is None or kept not in losses:
        return None
    for name, val in validation.items():
        if name == kept or val is None or name not in losses:
            continue
        worse = losses[name] / losses[kept] - 1.0 if losses[kept] > 0 else float("inf")
        apart = max(val, kept_val) / max(min(val, kept_val), 1e-12)
        if worse <= NEAR_START_LOSS and apart >= START_DISAGREEMENT:
            return (
                f"{DISAGREEMENT}: the search from {_origin(name)} trained "
                f"{100 * max(worse, 0.0):.0f} % worse and validates at {val:.3g} rad against {kept_val:.3g} rad "
                f"for the fit kept (position MAE). The lower training loss is kept; validation never chooses. "
                f"Training recordings that reach what the validation ones do (a higher gain, a heavier load, "
                f"the effort limit) would tell them apart"
            )
    return None


def _origin(start: str) -> str:
    """A start's name in a sentence: the warm start, or the nested family whose optimum it began at."""
    return "the warm start" if start == "warm start" else f"{start}'s optimum"
