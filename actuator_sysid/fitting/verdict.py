"""A verdict on every fit — good, usable or poor — with the reasons, so a bad result never looks like a good one.

`judge(result, rec, validation)` judges the fit result (fitting/fit.py), the log it was fitted to and the
exports' validation (export/__init__.py `render_all`: findings and consumer replays). Each check gives a
status — "ok", "usable" (caps the verdict at usable) or "poor" — and a sentence; the verdict is the worst
status ("ok" reads "good"); it builds the Verdict and Check records of fitting/result.py, and `fit_verdict`
is their JSON, as validation.json and the stored result hold it. Thresholds, per joint on its best model:

- validation position RMSE against the motion's range (max q − min q over the validated segments, which the
  error is measured on; the whole log with folds or without validation): ≤ 5 % ok, ≤ 15 % usable,
  beyond poor. An RMSE within 3× the position noise floor is ok whatever the range (the model explains all
  but the noise). The noise floor σ_q is estimated from the log as 1.4826·MAD(Δ²q)/√6 (white position noise
  of σ gives second differences of variance 6σ²; the MAD ignores the motion's own rare large accelerations):
  an upper bound, since smooth motion adds to it.
- a net that learned measured torque is judged by its validation torque RMSE against the torque range (same
  bounds), and against the trivial predictors on the same samples: zero (the measured torque's RMS), the
  commanded torque (τ_ff and the PD law at the log's SI gains, where the log states them) and the best parametric
  family; above BEAT × the best of them it is poor (it learned nothing they do not give), and the reason says how
  each compares.
- a joint that never moves (range ≤ 1e-6 rad), or a log whose positions equal their commands (max |q − q_des|
  ≤ 1e-9 rad: a plan, not a recording): poor.
- no validation segment (the error is measured on the data fitted): usable; with folds, the folds' pooled
  validation counts.
- a search stopped by its time budget (`result.budget.stopped_on_budget`): usable.
- unidentified parameters (the intervals' `identified` flags): prediction and identification are two questions.
  A model whose validation error was judged good or usable predicts held-out data, so its unidentified
  parameters make it usable for simulation, named as parameters not to read or randomise one by one; half or
  more unidentified is poor only when no validation shows the model predicts. A limit the log never presses is
  named (exports leave it at the consumer's default) but does not lower the verdict: the fit does not depend on it.
- two optima of one family that trained within 25 % of each other and validate 25 % or more apart
  (fitting/starts.py): usable when it is the best model (the export is one of them, and the data did not
  choose it), named otherwise (ok: its rank among the families rests on the one kept).
- the best model's validation recordings ask for more effort than any training recording did, on 5 % or more
  of their driven samples (fitting/coverage.py): a caveat (ok) when the extrapolation held (validation RMSE ≤
  training RMSE, or within NOISE_OK× the noise floor), usable when the extrapolated error is worse.
- the physics step coarse for the best model's gains (fitting/diagnostics.py `coarse_step`): usable, the gains
  hold at that step only; a pendulum that rests away from q = 0 with its torque off (datasets/quality.py
  `frame_warnings`): usable, the log's zero is likely not the plant's (the sidecar's zero_angle gives it).
- exports: a consumer replay that failed, or strays from our rollout beyond its tolerance (export/consumer_replay.py),
  or a validation error finding: poor. A replay that was skipped is said "not checked", never passed, and a
  page then does not say "passed" (`all_passed`); exports not yet checked (a stored fit's export) are named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..datasets.recording import Recording
from .coverage import BEYOND_TRAINING, extrapolation_held
from .result import Check, FitResult, JointFit, ModelFit, ResultLike, Verdict, as_result
from .starts import DISAGREEMENT

RANGE_OK, RANGE_USABLE = 0.05, 0.15  # validation RMSE / motion range
NOISE_OK = 3.0  # validation RMSE / noise floor σ_q at or below which the fit is at the noise floor
STILL_RAD = 1e-6  # a range at or below this: the joint never moves
PLAN_RAD = 1e-9  # max |q − q_des| at or below this: the log's positions are its commands
UNIDENTIFIED_POOR = 0.5  # this share of the best model's parameters unidentified or more: poor
RANK = {"ok": 0, "usable": 1, "poor": 2}
BEAT = 0.8  # a net's validation torque RMSE at most this share of the best trivial predictor's, else poor
NOT_CHECKED = "exports_not_checked"  # an ok-status check that says a check did not run: nothing "passed"
WORD = {"ok": "good", "usable": "usable", "poor": "poor"}


def noise_floor(q: np.ndarray) -> float:
    """Position noise σ [rad] of one sampled series, from its second differences (robust: the MAD)."""
    q = np.asarray(q, dtype=np.float64)
    if q.size < 5:
        return math.nan
    d2 = q[2:] - 2.0 * q[1:-1] + q[:-2]
    mad = float(np.median(np.abs(d2 - np.median(d2))))
    return 1.4826 * mad / math.sqrt(6.0)


def log_stats(rec: Recording, segments: set[str] | None = None) -> dict[str, dict[str, float]]:
    """Per joint: the motion's range [rad], its noise floor σ_q [rad] and max |q − q_des| [rad] over the named
    segments (the validated ones, which an error is judged against; every segment when None or none match)."""
    out: dict[str, dict[str, float]] = {}
    segs = [s for s in rec.segments if segments is None or s.name in segments] or rec.segments
    for j, name in enumerate(rec.joint_names):
        qs = [s.q[:, j] if s.q.ndim > 1 else s.q for s in segs]
        qds = [s.q_des[:, j] if s.q_des.ndim > 1 else s.q_des for s in segs]
        allq = np.concatenate(qs) if qs else np.zeros(0)
        floors = [noise_floor(q) for q in qs if q.size >= 5]
        weights = [q.size for q in qs if q.size >= 5]
        track = max(
            (float(np.max(np.abs(q - qd))) for q, qd in zip(qs, qds, strict=True) if q.size), default=0.0
        )
        out[name] = {
            "range": float(np.ptp(allq)) if allq.size else 0.0,
            "noise": float(np.average(floors, weights=weights)) if floors else math.nan,
            "tracking_max": track,
        }
    return out


def _check(out: list[Check], status: str, check: str, text: str) -> None:
    out.append(Check(check=check, status=status, reason=text))


def _validation_rmse(model: ModelFit | None) -> float | None:
    v = model.metrics.validation if model is not None else None
    x = v.position_rmse if v is not None else None
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def _motion_checks(out: list[Check], joint: str, st: dict[str, float] | None) -> None:
    """A joint that never moves, or whose positions are its commands, teaches nothing about its actuator."""
    if st is not None and st["range"] <= STILL_RAD:
        _check(
            out,
            "poor",
            "still",
            f"{joint}: the joint never moves in the log (range {st['range']:.3g} rad): "
            "nothing about its actuator can be learned from it",
        )
    elif st is not None and st["tracking_max"] <= PLAN_RAD:
        _check(
            out,
            "poor",
            "plan",
            f"{joint}: the logged positions equal the commands (max |q − q_des| = "
            f"{st['tracking_max']:.3g} rad): this is a plan, not a recording of the actuator",
        )


def torque_baselines(model: ModelFit, jr: JointFit | None = None) -> dict[str, float]:
    """The trivial predictors' validation torque RMSE on the net's own samples, by what they are: zero, the
    commanded torque (τ_ff and the PD law at the log's SI gains) and the best parametric family of the joint."""
    out = {}
    zero, cmd = (
        model.torque_error("validation", "zero_rmse"),
        model.torque_error("validation", "command_rmse"),
    )
    if zero is not None:
        out["predicting zero"] = zero
    if cmd is not None:
        out["the command (τ_ff + the PD law at the log's gains)"] = cmd
    families = [
        (m.torque_error("validation"), f)
        for f, m in (jr.models.items() if jr is not None else [])
        if not m.is_network and m.torque_error("validation") is not None
    ]
    if families:
        err, fam = min(families)
        out[f"the best parametric family ({fam})"] = float(err)  # type: ignore[arg-type]
    return out


def _baseline_check(out: list[Check], joint: str, best: str, rmse: float, baselines: dict[str, float]) -> str:
    """A net must beat the best trivial predictor clearly (its RMSE at most BEAT of theirs), else it is poor:
    it learned nothing a constant or the command does not already give."""
    if not baselines:
        return "ok"
    name, base = min(baselines.items(), key=lambda kv: kv[1])
    ratio = rmse / base if base > 0 else math.inf
    status = "ok" if ratio <= BEAT else "poor"
    each = ", ".join(
        f"{n} {v:.3g} N·m ({rmse / v:.2f}×)" if v > 0 else f"{n} 0 N·m" for n, v in baselines.items()
    )
    _check(
        out,
        status,
        "baselines",
        f"{joint}: {best} validation torque RMSE {rmse:.3g} N·m is {ratio:.2f}× the best trivial predictor, "
        f"{name} ({base:.3g} N·m)"
        + (f"; a net must be at most {BEAT:.0%} of it" if status == "poor" else "")
        + f" — on the same samples: {each}",
    )
    return status


def _torque_check(
    out: list[Check], joint: str, best: str, model: ModelFit, jr: JointFit | None = None
) -> str:
    """A torque-supervised net's validation torque RMSE judged against the measured torque range, with the
    same bounds as a position error against the motion range, and against the trivial predictors on the same
    samples (torque_baselines), which it must beat clearly."""
    rmse, rel = model.torque_error("validation"), model.torque_error("validation", "torque_rmse_of_range")
    assert rmse is not None and rel is not None  # _error_checks asks only when the validation has them
    mae, r2 = model.torque_error("validation", "torque_mae"), model.torque_error("validation", "torque_r2")
    status = "ok" if rel <= RANGE_OK else "usable" if rel <= RANGE_USABLE else "poor"
    _check(
        out,
        status,
        "validation_error",
        f"{joint}: {best} validation torque RMSE {rmse:.3g} N·m = {rel:.1%} of the measured torque range"
        + (f", MAE {mae:.3g} N·m" if mae is not None else "")
        + (f", R² {r2:.3f}" if r2 is not None else "")
        + f" (open loop on the logged states; good ≤ {RANGE_OK:.0%} of the range, usable ≤ {RANGE_USABLE:.0%})",
    )
    beaten = _baseline_check(out, joint, best, rmse, torque_baselines(model, jr))
    return beaten if RANK[beaten] > RANK[status] else status


def _error_checks(
    out: list[Check],
    joint: str,
    best: str,
    model: ModelFit | None,
    st: dict[str, float] | None,
    has_validation: bool,
    jr: JointFit | None = None,
) -> str | None:
    """The best model's validation position RMSE judged against the motion's range and the noise floor (or,
    without validation data, its training RMSE, said to be no validation error). Returns the status of the
    validation error judged against the log, None where none was."""
    if model is not None and model.torque_supervised and model.torque_error("validation") is not None:
        return _torque_check(out, joint, best, model, jr)  # a net that learned measured torque: judged by it
    rmse = _validation_rmse(model)
    if rmse is None:
        train = model.metrics.train.position_rmse if model is not None and model.metrics.train else None
        if has_validation:
            _check(out, "usable", "validation_error", f"{joint}: no validation error of {best} was computed")
        elif isinstance(train, int | float) and st is not None and st["range"] > STILL_RAD:
            _check(
                out,
                "usable",
                "validation_error",
                f"{joint}: {best} training position RMSE {train:.3g} rad "
                f"({train / st['range']:.1%} of the {st['range']:.3g} rad range) — not a validation error",
            )
        return None
    if st is None:
        _check(
            out,
            "usable",
            "validation_error",
            f"{joint}: {best} validation position RMSE {rmse:.3g} rad "
            "(the log is not at hand to judge it against the motion's range and noise)",
        )
        return None
    if st["range"] <= STILL_RAD:
        return None
    rel = rmse / st["range"]
    noise = st["noise"]
    times = rmse / noise if math.isfinite(noise) and noise > 0 else math.inf
    floor = (
        f", {times:.3g}× the noise floor σ_q = {noise:.3g} rad"
        if math.isfinite(times)
        else ", the log shows no position noise"
    )
    status = "ok" if rel <= RANGE_OK or times <= NOISE_OK else "usable" if rel <= RANGE_USABLE else "poor"
    limits = f"(good ≤ {RANGE_OK:.0%} of the range or ≤ {NOISE_OK:g}× noise; usable ≤ {RANGE_USABLE:.0%})"
    _check(
        out,
        status,
        "validation_error",
        f"{joint}: {best} validation position RMSE {rmse:.3g} rad = "
        f"{rel:.1%} of the {st['range']:.3g} rad motion range{floor} {limits}",
    )
    return status


def _identifiability_checks(
    out: list[Check], joint: str, best: str, model: ModelFit | None, predicts: bool
) -> None:
    """Unidentified parameters of the best model. Prediction and identification are two questions: a model
    whose validation shows it predicts is usable for simulation, its unidentified parameters named as ones not
    to read or randomise one by one; half or more unidentified is poor only without that evidence. Limits the
    log never presses are said apart (ok: the consumer's default stands)."""
    intervals = model.intervals if model is not None else {}
    if not intervals:
        return
    lost = {n: iv for n, iv in intervals.items() if not iv.identified}
    released = {n for n, iv in lost.items() if "never presses" in str(iv.reason or "")}
    others = sorted(set(lost) - released)
    n = max(len(intervals), 1)
    many = len(lost) / n >= UNIDENTIFIED_POOR
    if many and not predicts:
        _check(
            out,
            "poor",
            "unidentified",
            f"{joint}: {len(lost)} of {len(intervals)} parameters of {best} "
            f"are not identified ({', '.join(sorted(lost))}) and no validation shows the model predicts: "
            "the log does not determine the model",
        )
    elif others or many:
        named = others if others else sorted(lost)
        _check(
            out,
            "usable",
            "unidentified",
            f"{joint}: {len(named)} of {len(intervals)} parameters of {best} are not identified one by one "
            f"({', '.join(named)})"
            + (
                ": prediction and identification are two questions, and the model's validation error "
                "(judged on its own) shows it predicts held-out data, so use it for simulation as a whole"
                if predicts
                else ""
            )
            + f"; do not read or randomise one by one: {', '.join(named)}. Exports write each fitted value "
            "flagged NOT IDENTIFIED (the model validated), the consumer's default only for one whose estimate "
            "sits at it already; give a datasheet value with --set",
        )
    if released and not (many and not predicts):
        _check(
            out,
            "ok",
            "limits_not_pressed",
            f"{joint}: the log never presses {', '.join(sorted(released))}"
            ": exports leave them at the consumer's default (set the datasheet value with --set)",
        )


def _optimum_checks(out: list[Check], joint: str, jr: JointFit) -> None:
    """Families whose two search starts the training data barely tell apart while validation does."""
    for family, model in jr.models.items():
        for w in model.warnings:
            if w.startswith(DISAGREEMENT):
                best = family == jr.best_model
                _check(
                    out,
                    "usable" if best else "ok",
                    "rival_optima",
                    f"{joint}: {family}{' (the best model)' if best else ''}: {w}"
                    + ("" if best else "; its rank among the families rests on the optimum kept"),
                )


def _coverage_checks(out: list[Check], joint: str, jr: JointFit, st: dict[str, float] | None) -> None:
    """The best model's validation recordings ask for efforts no training recording did (fitting/coverage.py):
    a stated caveat when the extrapolation held (tested beyond training), usable when its error is worse."""
    model = jr.models.get(jr.best_model)
    for w in model.warnings if model is not None else []:
        if not w.startswith(BEYOND_TRAINING):
            continue
        assert model is not None
        train = model.metrics.train.position_rmse if model.metrics.train else None
        held = extrapolation_held(train, _validation_rmse(model), st["noise"] if st else math.nan, NOISE_OK)
        lead = f"{joint}: {jr.best_model} (the best model)"
        if held is not None:
            _check(out, "ok", "beyond_training", f"{lead}: tested beyond training and held ({held}). {w}")
        else:
            _check(
                out, "usable", "beyond_training", f"{lead}: {w}; its validation error is worse than training"
            )


def _fit_checks(result: FitResult, stats: dict[str, dict[str, float]] | None) -> list[Check]:
    """The fit's own checks: validation data, search budget, and per joint motion, error and identifiability."""
    out: list[Check] = []
    split = result.split
    if not split.validation and not split.folds:
        _check(
            out,
            "usable",
            "no_validation",
            "no validation segment: every error is measured on the data the "
            "fit was made from, so nothing shows how it predicts a new log",
        )
    if result.budget is not None and result.budget.stopped_on_budget:
        _check(
            out,
            "usable",
            "budget",
            "the search stopped on its time budget before it converged: refit with "
            "a larger budget to know whether it finds a better optimum",
        )
    for joint, jr in result.joints.items():
        best = jr.best_model
        model = jr.models.get(best)
        st = (stats or {}).get(joint)
        _motion_checks(out, joint, st)
        status = _error_checks(out, joint, best, model, st, bool(split.validation or split.folds), jr)
        recorded = st is None or st["tracking_max"] > PLAN_RAD  # a plan's "prediction" shows nothing
        _identifiability_checks(out, joint, best, model, recorded and status in ("ok", "usable"))
        _optimum_checks(out, joint, jr)
        _coverage_checks(out, joint, jr, st)
    return out


def _step_checks(result: FitResult, rec: Recording | None) -> list[Check]:
    """Per joint, whether the physics step is coarse for the best model's gains (fitting/diagnostics.py):
    usable, since the fitted gains then hold at this step only."""
    from .diagnostics import coarse_step

    out: list[Check] = []
    if rec is None:
        return out
    a = result.assumptions
    for joint, jr in result.joints.items():
        model = jr.models.get(jr.best_model)
        if model is None or model.is_network or joint not in rec.joint_names:
            continue
        params = {k: float(v) for k, v in model.params.items() if isinstance(v, int | float)}
        w = coarse_step(params, rec.joints[rec.joint_index(joint)].load_inertia, a.physics_dt, a.decimation)
        if w is not None:
            _check(out, "usable", "physics_step", f"{joint}: {jr.best_model}: {w}")
    return out


def _frame_checks(rec: Recording | None) -> list[Check]:
    """A pendulum that rests away from q = 0 with its torque off: the fit ran in another frame than the log's
    (datasets/quality.py), so it is usable at best and says how to give the zero."""
    from ..datasets.quality import frame_warnings

    out: list[Check] = []
    for w in frame_warnings(rec) if rec is not None else []:
        _check(out, "usable", "frame", w)
    return out


def _export_checks(validation: dict | None) -> list[Check]:
    """The exports' checks, from their validation document: replays that failed or stray, validation errors."""
    out: list[Check] = []
    if validation is None:
        _check(
            out,
            "ok",
            "exports_unchecked",
            "the exports were not replayed here (see the fit's validation.json)",
        )
        return out
    bad, apart = [], []
    for fmt, r in (validation.get("replay") or {}).items():
        if r.get("status") == "failed":
            bad.append(f"{fmt} failed to replay ({r.get('note', '')})")
        rows = r.get("joints") or {}
        for joint, j in rows.items():
            if j.get("within_tolerance", True):
                continue
            line = (
                f"{fmt} ({r.get('consumer', '')}) replays {joint} with position RMSE "
                f"{j.get('rmse_replay', math.nan):.3g} rad against our rollout's "
                f"{j.get('rmse_ours', math.nan):.3g} rad"
            )
            if j.get("shown_apart"):  # a cfg that says what it lacks, beside one that runs the model
                apart.append(
                    f"{line} (it does not carry {', '.join(j['approximates'])}; ACTUATORS_BEST does)"
                )
            else:
                bad.append(line)
    if bad:
        _check(out, "poor", "export_replay", "exports replay outside their tolerance: " + "; ".join(bad))
    if apart:
        _check(out, "ok", "export_approximation", "shown apart: " + "; ".join(apart))
    errors = [f for f in validation.get("findings") or [] if f.get("severity") == "error"]
    if errors:
        _check(
            out,
            "poor",
            "export_errors",
            f"{len(errors)} export validation error(s): "
            + "; ".join(f"{f.get('code')} at {f.get('where')}" for f in errors[:5]),
        )
    replays = validation.get("replay") or {}
    ran = sorted(fmt for fmt, r in replays.items() if r.get("status") == "ok")
    skipped = {fmt: r for fmt, r in replays.items() if r.get("status") not in ("ok", "failed")}
    if skipped:
        _check(
            out,
            "ok",
            NOT_CHECKED,
            "not checked: "
            + "; ".join(
                f"{fmt} replay {r.get('status')} ({r.get('note', '')})" for fmt, r in skipped.items()
            ),
        )
    if not bad and not errors and ran:
        every = "every export replays" if not skipped else f"{', '.join(ran)} replay"
        _check(out, "ok", "export_replay", f"{every} through its consumer within tolerance")
    return out


def judge(result: ResultLike, rec: Recording | None = None, validation: dict | None = None) -> Verdict:
    """good | usable | poor, the reasons worst first and every check (Verdict and Check records)."""
    typed = as_result(result)
    stats = log_stats(rec, set(typed.split.validation) or None) if rec is not None else None
    checks = (
        _fit_checks(typed, stats) + _step_checks(typed, rec) + _frame_checks(rec) + _export_checks(validation)
    )
    return verdict_of(checks)


def verdict_of(checks: list[Check]) -> Verdict:
    """The verdict of a set of checks, a joint fit's or a robot fit's: the worst status, its reasons worst first."""
    checks = sorted(checks, key=lambda c: -RANK[c.status])
    worst = max((c.status for c in checks), key=RANK.__getitem__, default="ok")
    return Verdict(
        verdict=WORD[worst],
        reasons=[c.reason for c in checks],
        checks=tuple(checks),
        thresholds={
            "range_ok": RANGE_OK,
            "range_usable": RANGE_USABLE,
            "noise_ok": NOISE_OK,
            "unidentified_poor": UNIDENTIFIED_POOR,
        },
    )


def fit_verdict(result: ResultLike, rec: Recording | None = None, validation: dict | None = None) -> dict:
    """{"verdict": good|usable|poor, "reasons": [worst first], "checks": [{check, status, reason}]}: the JSON
    of `judge`, as validation.json holds it."""
    return judge(result, rec, validation).to_json()


def all_passed(verdict: Verdict | Mapping[str, Any] | None) -> bool:
    """Whether every check passed (a check that did not run did not pass): only then may a page say "passed"."""
    if not verdict:
        return False
    v = verdict if isinstance(verdict, Verdict) else Verdict.from_json(verdict)
    return all(c.status == "ok" and c.check != NOT_CHECKED for c in v.checks) and v.verdict == "good"
