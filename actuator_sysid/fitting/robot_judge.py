"""What a whole-robot fit can and cannot tell, and how far to trust it: intervals, identifiability, verdict.

`uncertainty` reads the coupled training residuals r and their Jacobian J (the search's own variables:
log10 of each group term and payload mass, the encoder bias and COM offset in BIAS_UNIT) at the optimum and
hands them to fitting/uncertainty.py's `analyse`, the per-joint path's sandwich covariance whose residual
variance is estimated per block (here one block per joint, all its training windows) and inflated for the
residuals' lag-1 autocorrelation, with the noise of each window's measured initial positions as a nuisance
input (the rollouts start from them; robot/jacobian.py `jacobian_and_initial_state_effect`). It gives 95 % intervals, the correlation matrix and, per term, whether the
data identify it (narrow interval, not at a search bound, not blind) and why not.

`robot_verdict` judges a robot result (fitting/robot/) as fitting/verdict.py judges a joint fit, with its
thresholds and its Check / Verdict records: per joint the validation position RMSE against the validated
motion's range and noise floor, the terms at a search bound and the encoder biases beyond a plausible
calibration (robot/result.py `bound_report`, read, not recomputed), the identifiability, the search budget, and the
export replays (a replay that did not run is "not checked", never passed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .coverage import extrapolation_held
from .result import (
    Check,
    Interval,
    RobotBounds,
    RobotIdentifiability,
    RobotResult,
    RobotUncertainty,
    RobotValidation,
    Verdict,
)
from .space import SearchSpace
from .uncertainty import analyse
from .verdict import (
    NOISE_OK,
    NOT_CHECKED,
    RANGE_OK,
    RANGE_USABLE,
    STILL_RAD,
    UNIDENTIFIED_POOR,
    noise_floor,
    verdict_of,
)

TORQUE_OK, TORQUE_USABLE = 0.10, 0.30  # torque-driven logs: torque prediction RMSE / RMS logged effort
LINEAR = (".bias", ".com_x", ".com_y", ".com_z")  # search variables linear in BIAS_UNIT; the others are log10


def _linear(names: list[str]) -> np.ndarray:
    return np.array([n.endswith(LINEAR) for n in names], bool)


def search_space(names: list[str], lo: np.ndarray, hi: np.ndarray, unit: float) -> SearchSpace:
    """The robot's search variables as a SearchSpace in natural units: log-scaled terms and payload masses,
    linear encoder biases [rad] and COM offsets from the model's COM [m]."""
    lin = _linear(names)
    return SearchSpace(
        tuple(names),
        np.where(lin, lo * unit, 10.0**lo),
        np.where(lin, hi * unit, 10.0**hi),
        ~lin,
        np.zeros(len(names), bool),
    )


def position_noise(q: np.ndarray) -> float:
    """σ [rad] of white position noise, the smaller of the second- and fourth-difference MAD estimates: smooth
    motion inflates the second differences (verdict.py's noise floor) far more than the fourth."""
    d4 = np.diff(np.asarray(q, float), 4)
    if d4.size < 5:
        return noise_floor(q)
    mad = float(np.median(np.abs(d4 - np.median(d4))))
    return min(noise_floor(q), 1.4826 * mad / math.sqrt(70.0))  # var(Δ⁴ε) = 70 σ²


def _initial_state_nuisance(
    jac_unit: np.ndarray, effect: np.ndarray, q_train: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(nuisance Jacobian (R, d), variances (d,)) equivalent to every window's measured initial positions: their
    noise (σ per joint from the training log) moves the estimate through gᵀ = Jᵀ·J_n. The (R, J·W) J_n is folded
    to rank d: jac (JᵀJ)⁺ U √S with U S Uᵀ = g diag(σ²) gᵀ, which analyse turns back into the same term."""
    src, w, length, joints = effect.shape
    ju = jac_unit.reshape(joints, w, length, -1)
    g = np.einsum("kwld,jwlk->djw", ju, effect).reshape(ju.shape[-1], src * w)
    var = np.repeat([position_noise(q_train[:, j]) ** 2 for j in range(src)], w)
    s, u = np.linalg.eigh((g * var[None]) @ g.T)
    fold = u * np.sqrt(np.clip(s, 0.0, None))[None]
    return jac_unit @ (np.linalg.pinv(jac_unit.T @ jac_unit, rcond=1e-10) @ fold), np.ones(fold.shape[1])


def uncertainty(
    names: list[str],
    x: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    jac: np.ndarray,
    r: np.ndarray,
    unit: float,
    initial: tuple[np.ndarray, np.ndarray] | None = None,
) -> RobotUncertainty:
    """The intervals, correlations and identifiability of the fitted robot terms from the Jacobian `jac` (R, d)
    of the residuals `r` (R,) at x, all in search units; rows joint-major, (J, W windows, L samples). `initial`
    (effect (J, W, L, J) of each window's initial position on its simulated positions, the training log's q)
    adds the noise of the measured initial states the rollouts start from."""
    lo, hi = bounds
    lin = _linear(names)
    space = search_space(names, lo, hi, unit)
    natural = np.where(lin, x * unit, 10.0**x)
    jac_unit = jac * (hi - lo)[None, :]  # d r / d u, u = (x − lo) / (hi − lo) the unit-cube coordinate
    joints = initial[0].shape[0] if initial is not None else 1
    blocks = np.repeat(np.arange(joints), r.size // joints)
    nj, nv = _initial_state_nuisance(jac_unit, *initial) if initial is not None else (None, None)
    out = analyse(space, natural, jac_unit, r, blocks, np.ones(len(names), bool), nj, nv)
    lost = {n: iv["reason"] for n, iv in out["intervals"].items() if not iv["identified"]}
    return RobotUncertainty(
        intervals={n: Interval.from_json(iv) for n, iv in out["intervals"].items()},
        correlations=out["correlation"],
        identifiability=RobotIdentifiability(
            identified=[n for n in names if n not in lost],
            not_identified=lost,
            warnings=out["warnings"],
            method="sandwich covariance from the coupled training residuals' Jacobian at the optimum, the "
            "residual variance per joint inflated for its lag-1 autocorrelation, and the noise of each window's measured "
            "initial positions (velocities taken as logged) (fitting/uncertainty.py); "
            "log-scaled terms' intervals are symmetric in ln(value); COM terms are offsets from the model's COM",
        ),
    )


def motion_stats(q: np.ndarray, names: list[str]) -> dict[str, dict[str, float]]:
    """Per joint the validated motion's range and position noise floor [rad], which its error is judged against."""
    return {
        nm: {"range": float(np.ptp(q[:, k])) if q.shape[0] else 0.0, "noise": noise_floor(q[:, k])}
        for k, nm in enumerate(names)
    }


def _check(out: list[Check], status: str, check: str, text: str) -> None:
    out.append(Check(check=check, status=status, reason=text))


def _validation_checks(out: list[Check], validation: RobotValidation) -> bool:
    """Each joint's held-out position RMSE against its motion's range and noise (verdict.py's thresholds);
    returns whether every joint predicts (good or usable)."""
    stats = validation.motion or {}
    predicts = True
    for joint, rmse in (validation.per_joint_rmse or {}).items():
        st = stats.get(joint)
        if st is None:
            _check(out, "usable", "validation_error", f"{joint}: validation RMSE {rmse:.3g} rad, not judged")
            continue
        if st["range"] <= STILL_RAD:
            _check(out, "poor", "still", f"{joint}: the joint does not move in the validated span")
            predicts = False
            continue
        rel, noise = rmse / st["range"], st["noise"]
        times = rmse / noise if math.isfinite(noise) and noise > 0 else math.inf
        status = "ok" if rel <= RANGE_OK or times <= NOISE_OK else "usable" if rel <= RANGE_USABLE else "poor"
        predicts = predicts and status != "poor"
        floor = f", {times:.3g}× the noise floor σ_q = {noise:.3g} rad" if math.isfinite(times) else ""
        _check(
            out,
            status,
            "validation_error",
            f"{joint}: validation position RMSE {rmse:.3g} rad = {rel:.1%} of the {st['range']:.3g} rad "
            f"motion range{floor} (good ≤ {RANGE_OK:.0%} of the range or ≤ {NOISE_OK:g}× noise; "
            f"usable ≤ {RANGE_USABLE:.0%})",
        )
    return predicts


def torque_driven_checked(validation: RobotValidation) -> bool:
    """Whether the validation carries the torque-driven checks (robot/torque_check.py) that replace the long
    open-loop replay in the verdict."""
    return any("window_s" in m for m in (validation.motion or {}).values())


def _grade(rel: float, ok: float, usable: float) -> str:
    return "ok" if rel <= ok else "usable" if rel <= usable else "poor"


def _torque_driven_checks(out: list[Check], validation: RobotValidation) -> bool:
    """Each joint's short forward windows (validation.motion[joint].window_rmse against window_motion, the RMS
    displacement over a window) and its torque prediction (torque_rmse against effort_rms); the long open-loop
    replay (validation.per_joint_rmse) shown, not judged. Returns whether every joint predicts."""
    predicts = True
    for joint, m in (validation.motion or {}).items():
        if m.get("range", 1.0) <= STILL_RAD:
            _check(out, "poor", "still", f"{joint}: the joint does not move in the validated span")
            predicts = False
            continue
        rmse, motion = m.get("window_rmse", math.nan), m.get("window_motion", math.nan)
        noise = m.get("noise") or math.nan  # None where a stored result's NaN came back
        if math.isfinite(rmse) and motion > 0:
            rel = rmse / motion
            at_noise = math.isfinite(noise) and noise > 0 and rmse <= NOISE_OK * noise
            status = "ok" if at_noise else _grade(rel, RANGE_OK, RANGE_USABLE)
            text = (
                f"{joint}: {m['window_s']:.3g} s forward windows from the measured state ({m['windows']:.0f} on "
                f"the held-out span): position RMSE {rmse:.3g} rad = {rel:.1%} of the {motion:.3g} rad the joint "
                f"moves in a window (good ≤ {RANGE_OK:.0%} or ≤ {NOISE_OK:g}× noise; usable ≤ "
                f"{RANGE_USABLE:.0%}; validation.motion.window_rmse)"
            )
        else:
            status, text = "usable", f"{joint}: the held-out span is shorter than one forward window"
        predicts = predicts and status != "poor"
        _check(out, status, "window_replay", text)
        tr, er = m.get("torque_rmse", math.nan), m.get("effort_rms", math.nan)
        if math.isfinite(tr) and er > 0:
            rel = tr / er
            status = _grade(rel, TORQUE_OK, TORQUE_USABLE)
            text = (
                f"{joint}: torque prediction (inverse dynamics along the measured held-out motion plus the fitted "
                f"joint terms, {m['torque_samples']:.0f} samples moving ≥ {m.get('torque_min_qd', 0):g} rad/s): RMSE {tr:.3g} N·m = "
                f"{rel:.1%} of the {er:.3g} N·m RMS logged effort, R² {m.get('torque_r2', math.nan):.4f} (good ≤ "
                f"{TORQUE_OK:.0%}, usable ≤ {TORQUE_USABLE:.0%}; validation.motion.torque_rmse)"
            )
        else:
            status, text = "usable", f"{joint}: too few held-out samples move to check the torque prediction"
        predicts = predicts and status != "poor"
        _check(out, status, "torque_prediction", text)
    if validation.rmse is not None:
        _check(
            out,
            "ok",
            "open_loop_shown",
            f"the long open-loop replay of the held-out span (RMSE {validation.rmse:.3g} rad; "
            "validation.per_joint_rmse) is shown, not judged: a torque-driven arm has no controller to hold it "
            "to the log, so it drifts with any approximate inertia",
        )
    return predicts


def _bound_checks(out: list[Check], bounds: RobotBounds) -> None:
    """Terms at a search bound and encoder biases beyond a plausible calibration, as robot/result.py flagged them."""
    at = bounds.at_bound
    if at:
        _check(
            out,
            "usable",
            "at_bound",
            "at a search bound, so not identified (the data push them beyond the range the model and the log "
            "make plausible): "
            + "; ".join(f"{e.term} = {e.value:.4g} at its {e.bound} bound {e.limit:.4g}" for e in at),
        )
    wide = bounds.implausible_bias
    if wide:
        _check(
            out,
            "usable",
            "implausible_bias",
            "encoder bias beyond a plausible calibration absorbs model error (gravity, friction or a "
            "transmission the model lacks), not a calibration: "
            + "; ".join(f"{w.joint} {w.bias:+.4f} rad" for w in wide)
            + "; refit without bias (--no-bias) to see the model's own error",
        )


def _identifiability_checks(
    out: list[Check], ident: RobotIdentifiability | None, predicts: bool, total: int
) -> None:
    """Unidentified terms: usable when validation shows the fit predicts (use it as a whole), poor when half
    or more are unidentified without that evidence."""
    lost = sorted(ident.not_identified if ident is not None else {})
    if not lost:
        return
    many = len(lost) / max(total, 1) >= UNIDENTIFIED_POOR
    status = "poor" if many and not predicts else "usable"
    _check(
        out,
        status,
        "unidentified",
        f"{len(lost)} of {total} fitted terms are not identified one by one ({', '.join(lost)})"
        + (
            ": the fit predicts the held-out data, so use it for simulation as a whole; do not read or "
            "randomise them one by one"
            if predicts
            else ": no validation shows the fit predicts, so the log does not determine the model"
        ),
    )


def _replay_checks(out: list[Check], replays: Mapping[str, Any] | None) -> None:
    """The exports replayed through their consumers: failed or outside tolerance is poor; not run, not checked."""
    if not replays:
        _check(
            out,
            "ok",
            NOT_CHECKED,
            "not checked: the exports were not replayed (export the fit to replay them)",
        )
        return
    if replays.get("status") == "failed":
        _check(out, "poor", "export_replay", f"the export replays failed: {replays.get('note', '')}")
        return
    consumers = replays.get("consumers") or {}
    bad = [
        f"{n} replays with RMSE {c.get('rmse_replay', math.nan):.3g} rad against ours' "
        f"{(replays.get('ours') or {}).get('rmse', math.nan):.3g} rad"
        for n, c in consumers.items()
        if c.get("status") == "ok" and not c.get("within_tolerance", False)
    ] + [f"{n} failed ({c.get('note', '')})" for n, c in consumers.items() if c.get("status") == "failed"]
    skipped = {n: c for n, c in consumers.items() if c.get("status") not in ("ok", "failed")}
    if bad:
        _check(out, "poor", "export_replay", "exports replay outside their tolerance: " + "; ".join(bad))
    if skipped or not consumers:
        why = "; ".join(f"{n} replay {c.get('status')} ({c.get('note', '')})" for n, c in skipped.items())
        _check(out, "ok", NOT_CHECKED, "not checked: " + (why or "no export was replayed"))
    ran = sorted(n for n, c in consumers.items() if c.get("status") == "ok")
    if ran and not bad:
        _check(out, "ok", "export_replay", f"{', '.join(ran)} replay the exports within tolerance")


# delays whose coupled training loss lies within this share of the lowest are not told apart by the training part
# (the delay scan keeps the step above the lowest within it; the verdict names them all)
DELAY_TIE = 0.05

GAINS_GUESSED = "fitted per group (the log states none)"
"""The gains note (RobotResult.gains) of a fit whose log states no PD gains: the fit guessed them."""


def robot_verdict(result: RobotResult) -> Verdict:
    """good | usable | poor of a robot fit result, its reasons worst first and every check."""
    checks: list[Check] = []
    v = result.validation
    predicts = _torque_driven_checks(checks, v) if torque_driven_checked(v) else _validation_checks(checks, v)
    _bound_checks(checks, result.bounds)
    _identifiability_checks(checks, result.identifiability, predicts, len(result.intervals or {}))
    if result.training.stopped_on == "budget":
        _check(
            checks,
            "usable",
            "budget",
            "the search stopped on its time budget before it converged: refit with a larger budget",
        )
    _replay_checks(checks, result.replays)
    _coverage_check(checks, result)
    if result.gains.startswith(GAINS_GUESSED):
        _check(
            checks,
            "usable",
            "gains_guessed",
            "the log states no PD gains, so the fit guessed them (fitted per group): the exported stiffness and "
            "damping need not be the controller's, and fitted gains extrapolate worse than the real ones. Give "
            "the controller's gains: --kp and --kd on the CLI, kp and kd in the API and on the robot page",
        )
    _delay_check(checks, result)
    if moving := result.stroke_friction_groups:
        _check(
            checks,
            "usable",
            "friction_position",
            f"the friction of {', '.join(moving)} changes along the stroke (friction_upper), which no consumer "
            "holds: the Isaac Lab, Newton and MuJoCo exports carry its mid-stroke value",
        )
    return verdict_of(checks)


def _delay_check(out: list[Check], result: RobotResult) -> None:
    """Whether the scanned delay is told apart from the others by the training part: a caveat naming --delay where
    several delays fit within DELAY_TIE. On motion slower than use, damping and armature make up a delay too
    short, so such delays can part far apart on faster motion (BENCHMARKS.md, the robot selection bench)."""
    losses = {int(d): float(v) for d, v in (result.training.delay_coupled_rmse or {}).items()}
    kept = int(result.delay_steps)
    if len(losses) < 2 or kept not in losses or not all(map(math.isfinite, losses.values())):
        return  # the delay was given, or not scanned on the fast path
    dt = float(result.sim.get("dt") or math.nan)
    within = (1.0 + DELAY_TIE) * min(losses.values())
    close = sorted(d for d, v in losses.items() if v <= within)
    if close == [kept]:
        worse = min(v for d, v in losses.items() if d != kept) / losses[kept] - 1.0
        _check(
            out,
            "ok",
            "delay",
            f"delay {kept} physics steps ({kept * dt * 1e3:.3g} ms): every other delay scanned fits the training "
            f"part at least {worse:.1%} worse",
        )
        return
    _check(
        out,
        "ok",
        "delay",
        f"delay {kept} physics steps ({kept * dt * 1e3:.3g} ms) kept, but delays "
        + ", ".join(map(str, close))
        + f" fit the training part within {DELAY_TIE:.0%} of the lowest training RMSE: the training motion does not "
        "tell them apart, and on faster motion one step can change the error several times over. Give the "
        "delay where it is known (--delay on the CLI, delay in the API), or fit a log with faster motion",
    )


def _coverage_check(out: list[Check], result: RobotResult) -> None:
    """Validation beyond the training span: a caveat when the extrapolation held (validation RMSE at or below
    training, or within the noise floor), else usable at best (fitting/coverage.py's rule, as a joint fit's)."""
    warning = result.validation.beyond_training
    if not warning:
        return
    noise = [
        float(m["noise"]) for m in (result.validation.motion or {}).values() if math.isfinite(m["noise"])
    ]
    v = result.validation
    val = (  # a torque-driven log's windows compare with the training windows; its long replay drifts
        float(np.sqrt(np.mean([m.get("window_rmse", math.nan) ** 2 for m in (v.motion or {}).values()])))
        if torque_driven_checked(v)
        else v.rmse
    )
    held = extrapolation_held(
        result.training.rmse, val, float(np.median(noise)) if noise else math.nan, NOISE_OK
    )
    if held:
        _check(out, "ok", "beyond_training", f"tested beyond training and held ({held}). {warning}")
    else:
        _check(out, "usable", "beyond_training", f"{warning}; its validation error is worse than training")
