"""The held-out verdict of a torque identification: its torque residual against the logged effort and against
trivial predictors on the same rows.

A fit that explains the held-out torque well is worth little if a trivial model does as well. Three predictors
run on the held-out rows the fit is judged on: zero (the logged effort's own RMS), the model file's nominal
inertials and joint terms, and rigid-body least squares fitted on the training rows without any friction term.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..result import Check, Verdict
from ..robot_judge import TORQUE_OK, TORQUE_USABLE
from ..verdict import BEAT, verdict_of

BASELINES = {  # name: what it is, as the verdict's text says it
    "zero": "zero torque",
    "nominal": "the model file's inertials and joint terms",
    "rigid_body": "rigid-body least squares without friction",
}


def per_joint_rmse(res: np.ndarray, joint: np.ndarray, names: list[str]) -> dict[str, float]:
    """Each joint's RMS of `res` over its rows (NaN where it has none)."""
    return {
        n: float(np.sqrt(np.mean(res[joint == i] ** 2))) if np.any(joint == i) else float("nan")
        for i, n in enumerate(names)
    }


def baselines(
    train: tuple[np.ndarray, np.ndarray],
    held: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    nominal: np.ndarray,
    n_rb: int,
    names: list[str],
) -> dict[str, dict[str, float]]:
    """Each trivial predictor's held-out torque RMSE per joint. `train` (A, b) and `held` (A, b, logged effort,
    row joint) are the regression systems; `nominal` the model file's parameters; n_rb the rigid-body columns."""
    a, b = train
    av, bv, tau, jv = held
    rigid = np.linalg.lstsq(a[:, :n_rb], b, rcond=None)[0]
    return {
        "zero": per_joint_rmse(tau, jv, names),
        "nominal": per_joint_rmse(av @ nominal - bv, jv, names),
        "rigid_body": per_joint_rmse(av[:, :n_rb] @ rigid - bv, jv, names),
    }


def inertial_verdict(held_out: dict[str, float], base: dict[str, dict[str, float]]) -> Verdict:
    """good / usable / poor from each joint's held-out torque RMSE: against the logged effort's RMS (good ≤
    TORQUE_OK, usable ≤ TORQUE_USABLE) and against the best trivial predictor, which it must beat by BEAT."""
    if not held_out:
        return Verdict(verdict="not judged", reasons=["no held-out log: the torque residual was not checked"])
    checks = []
    for joint, rmse in held_out.items():
        effort = base["zero"][joint]
        rel = rmse / effort if effort > 0 else float("inf")
        status = "ok" if rel <= TORQUE_OK else "usable" if rel <= TORQUE_USABLE else "poor"
        best = min(base, key=lambda k: base[k][joint])
        beaten = rmse <= BEAT * base[best][joint]
        others = ", ".join(f"{BASELINES[k]} {base[k][joint]:.3g}" for k in base)
        reason = (
            f"{joint}: held-out torque RMSE {rmse:.3g} = {rel:.1%} of the logged effort's RMS {effort:.3g} "
            f"(good ≤ {TORQUE_OK:.0%}, usable ≤ {TORQUE_USABLE:.0%}); the trivial predictors: {others}"
        )
        if not beaten:
            status = "poor"
            reason += f"; it does not beat {BASELINES[best]} by the factor {BEAT:g}"
        checks.append(Check(check="held_out_torque", status=status, reason=reason))
    return dataclasses.replace(
        verdict_of(checks),
        thresholds={"torque_ok": TORQUE_OK, "torque_usable": TORQUE_USABLE, "beat": BEAT},
    )
