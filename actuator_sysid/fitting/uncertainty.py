"""What the data can and cannot tell: covariance, 95 % intervals, correlations and identifiability.

From the residual vector r and its Jacobian J (in the search's unit coordinates) at the optimum, the
parameter covariance is the least-squares sandwich (JᵀJ)⁻¹ Jᵀ Σ J (JᵀJ)⁻¹. Σ is estimated per block
(one segment's position or velocity residuals) from the residuals themselves, inflated for their lag-1
autocorrelation, because trajectory errors are not independent from sample to sample.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .space import SearchSpace

Z95 = 1.959963984540054
WIDE = math.log(2.0)  # a 95 % half-width beyond a factor of 2 means the data barely constrain the value
RIVAL_RTOL = (
    1e-3  # a rival optimum closer than this (relative) is the same answer at float32 rollout precision
)
CORRELATED = 0.95  # |correlation| above which two parameters are reported as not separable


def _block_variance(r: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Per-row noise variance: each block's mean square, times the AR(1) inflation (1 + ρ) / (1 − ρ)."""
    var = np.empty_like(r)
    for b in np.unique(blocks):
        rb = r[blocks == b]
        v = float(np.mean(rb**2))
        rho = 0.0
        if rb.size > 3 and v > 0:
            rho = float(np.clip(np.mean(rb[1:] * rb[:-1]) / v, 0.0, 0.98))
        var[blocks == b] = v * (1 + rho) / (1 - rho)
    return var


def covariance(
    jac: np.ndarray,
    r: np.ndarray,
    blocks: np.ndarray,
    nuisance_jac: np.ndarray | None,
    nuisance_var: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(σ in unit coordinates, correlation, blind mask, per-row residual variance) of the free parameters:
    the sandwich covariance with correlation-inflated residual variance and the nuisance inputs' noise."""
    a = jac.T @ jac
    row_var = _block_variance(r, blocks)
    b = jac.T @ (jac * row_var[:, None])
    if nuisance_jac is not None and nuisance_var is not None:
        g = jac.T @ nuisance_jac
        b = b + g @ (g * nuisance_var[None, :]).T
    # a parameter the residuals do not depend on at all (a limit the log never reaches) has no
    # information; the pseudo-inverse would report it as perfectly known, so mark it instead
    info = np.diag(a)
    blind = info <= 1e-12 * max(float(info.max()), 1e-300)
    a_inv = np.linalg.pinv(a, rcond=1e-10)
    cov_u = a_inv @ b @ a_inv
    sd_u = np.sqrt(np.clip(np.diag(cov_u), 0.0, None))
    sd_u[blind] = np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = cov_u / np.outer(sd_u, sd_u)
    corr[blind, :] = 0.0
    corr[:, blind] = 0.0
    corr = np.where(np.isfinite(corr), corr, 0.0)
    return sd_u, corr, blind, row_var


def _interval(space: SearchSpace, i: int, value: float, sd_unit: float) -> tuple[float, float, bool, float]:
    """(lo, hi, narrow enough, relative σ) of one parameter's 95 % interval: symmetric in ln(value) for a
    log-scaled dimension (narrow: within a factor of 2), else in value (narrow: within 10 % of the range)."""
    if space.log[i]:
        sd_ln = sd_unit * math.log(space.upper[i] / space.lower[i])  # σ of ln(value)
        half = min(Z95 * sd_ln, 700.0)  # beyond e^700 the interval is unbounded anyway
        return value * math.exp(-half), value * math.exp(half), Z95 * sd_ln <= WIDE, sd_ln
    span = space.upper[i] - space.lower[i]
    sd = sd_unit * span
    return value - Z95 * sd, value + Z95 * sd, Z95 * sd <= 0.1 * span, sd / abs(value) if value else math.inf


def _unidentified_reason(narrow: bool, released: bool, blind: bool, at_bound: str | None) -> str:
    """Why a parameter is not identified ("" when it is, as far as its own interval tells); `at_bound` names the
    search bound an estimate sits at ("lower" or "upper", with its value), None when it sits at neither."""
    if released:
        return (
            "the log never presses this limit: it is set to the search bound, where it does not bind "
            "(the fit is the same); use the datasheet value"
        )
    if blind:
        return "the log never reaches the regime where it acts (the fit does not depend on it)"
    if at_bound and at_bound.startswith("lower"):
        return (
            f"it sits at its {at_bound}: the data push it down to the smallest value searched, "
            "so the term may be absent or another term stands in for it"
        )
    if at_bound:
        return f"it sits at its {at_bound}: the data push it beyond any plausible value"
    if not narrow:
        return "the data barely constrain it (its 95 % interval spans more than a factor of 2)"
    return ""


def _rival_reason(
    name: str,
    i: int,
    value: float,
    lo: float,
    hi: float,
    rivals: list[tuple[np.ndarray, float]],
    bound: float,
) -> str:
    """Why a rival optimum within the noise bound but outside [lo, hi] unidentifies the parameter ("" if none)."""
    alt = [
        float(xr[i])
        for xr, loss in rivals
        if loss <= bound and not lo <= xr[i] <= hi and abs(xr[i] - value) > RIVAL_RTOL * abs(value)
    ]
    if not alt:
        return ""
    return (
        f"another optimum fits the log as well (loss within the noise) with {name} = {alt[0]:.4g}, "
        "outside this interval: the log does not tell the two explanations apart"
    )


def _correlation_warnings(
    names: list[str], corr: np.ndarray, intervals: dict[str, dict[str, Any]]
) -> list[str]:
    """Pairs correlated beyond CORRELATED where at least one of the two is not identified."""
    out = []
    for a_i in range(len(names)):
        for b_i in range(a_i + 1, len(names)):
            c = corr[a_i, b_i]
            if (
                abs(c) > CORRELATED
                and intervals[names[a_i]]["identified"] + intervals[names[b_i]]["identified"] < 2
            ):
                out.append(
                    f"{names[a_i]} and {names[b_i]} are hard to separate (correlation {c:+.2f}): "
                    "record excitation that moves them differently"
                )
    return out


def analyse(
    space: SearchSpace,
    x: np.ndarray,
    jac: np.ndarray,
    r: np.ndarray,
    blocks: np.ndarray,
    free: np.ndarray,
    nuisance_jac: np.ndarray | None = None,
    nuisance_var: np.ndarray | None = None,
    rivals: list[tuple[np.ndarray, float]] | None = None,
    released: set[str] | None = None,
) -> dict:
    """Intervals, correlations and identifiability of the continuous parameters in `free`.

    jac is (R, k) in unit coordinates of the free dimensions; x holds natural values of all dimensions.
    nuisance_jac (R, m) and nuisance_var (m,) describe inputs measured with noise that the fit takes as
    given (each segment's initial state): their noise moves the estimate by −(JᵀJ)⁻¹Jᵀ·J_n·ε, which
    the covariance includes. `rivals` are other local optima (natural values, loss) the refinement
    reached: one whose loss is within what the noise explains (the 95 % likelihood-ratio bound, ΔSSR ≤
    z²·v with v the correlation-inflated residual variance) yet lies outside a parameter's interval shows
    that the local interval is not the whole truth, and that parameter is reported as not identified.
    `released` are limits the fit moved to their search bound because the log never presses them
    (search.release_limits): not identified, and said so.
    Returns {"intervals": {name: {...}}, "correlation": {...}, "warnings": [...]}.
    """
    names = [n for n, f in zip(space.names, free, strict=True) if f]
    idx = np.flatnonzero(free)
    sd_u, corr, blind, row_var = covariance(jac, r, blocks, nuisance_jac, nuisance_var)
    u = space.to_unit(x)
    intervals: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    for k, (name, i) in enumerate(zip(names, idx, strict=True)):
        value = float(x[i])
        lo, hi, narrow, rel = _interval(space, int(i), value, sd_u[k])
        at_bound = (
            f"lower search bound ({space.lower[i]:.3g})"
            if u[i] <= 1e-3
            else f"upper search bound ({space.upper[i]:.3g})"
            if u[i] >= 1 - 1e-3
            else None
        )
        reason = _unidentified_reason(narrow, name in (released or ()), bool(blind[k]), at_bound)
        identified = not reason
        if identified and rivals and math.isfinite(lo) and math.isfinite(hi):
            bound = float(np.sum(r**2)) + Z95**2 * float(np.mean(row_var))
            reason = _rival_reason(name, int(i), value, lo, hi, rivals, bound)
            identified = not reason
        intervals[name] = {
            "value": value if identified else None,
            "estimate": value,
            "std_relative": float(rel) if math.isfinite(rel) else None,
            "interval95": [float(lo), float(hi)] if math.isfinite(lo) and math.isfinite(hi) else None,
            "identified": bool(identified),
            **({"reason": reason} if reason else {}),
        }
        if not identified:
            warnings.append(f"{name} is not identified: {reason}")
    warnings += _correlation_warnings(names, corr, intervals)
    return {
        "intervals": intervals,
        "correlation": {"names": names, "matrix": np.round(corr, 4).tolist()},
        "warnings": warnings,
    }


def delay_profile(losses: dict[int, float], best: int) -> dict:
    """Whether the neighbouring delays are clearly worse: identified when both cost ≥ 5 % more loss."""
    base = losses[best]
    worse = [losses[d] / base - 1 if base > 0 else math.inf for d in (best - 1, best + 1) if d in losses]
    identified = bool(worse) and min(worse) >= 0.05
    return {
        "value": best if identified else None,
        "estimate": best,
        "identified": identified,
        "loss_at": {str(d): float(v) for d, v in sorted(losses.items())},
        **({} if identified else {"reason": "neighbouring delays fit almost as well"}),
    }
