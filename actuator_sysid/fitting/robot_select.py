"""A robot fit's configuration chosen by its training data alone, by a protocol that extrapolates as use does.

The training part (what `fit_robot` trains on) is split again in time: its earlier part trains, its later part
validates, replayed from the measured state at the inner split (several training recordings: the last ones
validate, whole). The inner validation is as long as the real one (inner_share), so where the motion speeds up
with time, as a chirp's does, it extrapolates about as far as the real use. Each axis lists its entries simplest
first: gains given, then fitted; bias off, within BIAS_PLAUSIBLE, then free; per group, then per joint; with
position_friction, constant friction, then along the stroke; the training window as given, then 2, 4, 8 × it.
The gains and the bias are decided first, on the whole training part (training_choice). With one training
recording and gains stated, by a teacher: every configuration they allow and a richer fit no consumer runs
(teacher_candidate, fitted with the gains given and fitted, the fitted kept where they lower its training RMSE
by GAINS_MARGIN) replay the training commands played TEACHER_SPEED × faster, and the nearest the teacher's
replay is kept. Otherwise (or where no teacher fits): fitted gains are kept when they lower its RMSE by
GAINS_MARGIN, both with a bounded bias; at that fit's delay, the bias off or bounded, whichever fit tracks the
training part's last LATE_SHARE better replayed free from the measured state there, and only over the logged
gains and a bounded bias kept, a free one when it lowers the training RMSE by BIAS_MARGIN.
Then from every other axis's simplest entry, one axis at a time, an entry replaces the one kept only when its
inner RMSE is lower by its margin: MIN_GAIN (the joint ladder's rule) for a richer model, none for a window.
The first candidate scans the delay, the later ones hold it. The one kept is refitted on the whole training
part (the delay scanned again; after a teacher, at the step above its delay where that falls between two of the
fit's steps: delay_from_teacher). The result is `fit_robot`'s with `selection` {protocol, inner_fraction,
training_choice (None with neither to decide: by the teacher {rule, speed, configurations {name: {training_rmse,
delay_steps, teacher_distance}}, teacher {options, training_rmse, delay_steps, gains_margin, by_gains},
delay_steps, kept}; else {gains_training_rmse_with_bias, bias_training_rmse, bias_late_rmse, late_share,
delay_steps, kept, bias_held_off where --no-bias holds it, teacher_failed where a teacher was tried}),
candidates [{name, options, inner_validation_rmse, ...}], chosen, chosen_options, delay_from_teacher, skipped,
search_s, wall_s}.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..datasets.recording import Recording, Segment
from ..models.robot import RobotError, RobotModel
from .ladder import MIN_GAIN
from .result import RobotResult
from .robot import BIAS_PLAUSIBLE, RobotFitOptions, fit_robot, prepare_fit, replay_validation
from .robot_teacher import TEACHER_FINE, TEACHER_SPEED, teacher_changes, teacher_distance
from .robot_traces import result_values

INNER_FRACTION = 0.3  # the least later share of the training part that validates each candidate
INNER_MAX = 0.6  # and the most
# fitted gains replace the given ones only when they cut the whole training part's RMSE by this share, both fitted
# with the bias within its plausible bound: logged gains that are off leave an error several times the fitted
# gains' (which a bias cannot take up), while true ones leave at most a few percent to gain (the lag a gain error
# would add trades against the delay, armature and damping)
GAINS_MARGIN = 0.35
# a free bias (tried only over the logged gains and a bounded one kept) replaces the bounded one only when it cuts
# the whole training part's RMSE by this share, as any richer model must; so does a bounded bias where the late
# replay (LATE_SHARE) cannot be made
BIAS_MARGIN = MIN_GAIN
# the bias off or within its bound: the one whose fit, replayed free from the measured state at the start of the
# training part's last LATE_SHARE to its end, tracks it better. The training RMSE restarts every window from the
# measured state and hides what builds up over a long replay, as the far end's does; the last share of a chirp is
# also its fastest, the nearest to where a policy will drive the joints
LATE_SHARE = 0.3
# longer restart intervals, in turn while each beats the one before (the peer rolls out the whole stretch)
WINDOW_FACTORS = (2.0, 4.0, 8.0)
INNER_ITERATIONS = 6  # each candidate's search budget (refinement rounds / Jacobians), at most the fit's own


@dataclass(frozen=True)
class Candidate:
    """One configuration: a name, the RobotFitOptions fields it sets, and whether the log's gains are ignored."""

    name: str
    changes: dict[str, Any] = field(default_factory=dict)
    fit_gains: bool = False  # the log's kp / kd metadata dropped so the gains are fitted
    ordered: bool = False  # when it loses, the later entries of its axis are not tried
    # the share of the kept entry's inner RMSE it must buy to replace it (a richer model must beat the noise)
    margin: float = MIN_GAIN
    # its axis is decided on the whole training part (training_choice), not on the inner split
    on_training: bool = False

    def described(self) -> dict:
        """The options as the result states them (JSON-ready)."""
        return {**self.changes, "gains": "fitted" if self.fit_gains else "given"}


def name_groups(names: list[str]) -> dict[str, str] | None:
    """Groups of joints that share a name after their first `_` token (a leg's hip, thigh, calf), as regexes;
    None when no two joints share one."""
    rest: dict[str, list[str]] = {}
    for n in names:
        head, sep, tail = n.partition("_")
        rest.setdefault(tail if sep and tail else n, []).append(n)
    if all(len(v) == 1 for v in rest.values()):
        return None
    return {k.removesuffix("_joint") or k: "|".join(map(re.escape, v)) for k, v in rest.items()}


def _gains_given(rec: Recording, opts: RobotFitOptions) -> bool:
    """Whether the options or the log's metadata state PD gains."""
    return opts.kp is not None or any("kp" in s.metadata for s in rec.segments)


def inner_share(rec: Recording, opts: RobotFitOptions) -> float:
    """The later share of the training part that validates each candidate: one recording's inner validation is
    as long as the real one (validation_fraction / (1 − validation_fraction) of the training part), within
    INNER_FRACTION..INNER_MAX; training recordings validate their last INNER_FRACTION."""
    if len(rec.segments) != 1 or opts.holdout:
        return INNER_FRACTION
    v = opts.validation_fraction
    return float(min(INNER_MAX, max(INNER_FRACTION, v / (1.0 - v))))


def gains_bias_axes(gains_given: bool, bias_limit: float, fit_bias: bool = True) -> list[list[Candidate]]:
    """The gains axis (where the log gives gains) and the bias axis, simplest first, with their margins; the bias
    axis is "bias off" alone when the bias is turned off (`fit_bias` False: the user's --no-bias holds, as a given
    delay does)."""
    axes: list[list[Candidate]] = []
    if gains_given:
        axes.append(
            [
                Candidate("gains given", on_training=True),
                Candidate(
                    "gains fitted", {"kp": None, "kd": None}, True, margin=GAINS_MARGIN, on_training=True
                ),
            ]
        )
    if not fit_bias:  # held off: the gains are still decided on the whole training part, without a bias
        return [*axes, [Candidate("bias off", {"fit_bias": False}, on_training=True)]]
    axes.append(
        [
            Candidate("bias off", {"fit_bias": False}, on_training=True),
            Candidate(
                f"bias within ±{bias_limit:g} rad",
                {"fit_bias": True, "bias_limit": bias_limit},
                ordered=True,  # a free bias is tried only over a bounded one that won
                margin=BIAS_MARGIN,
                on_training=True,
            ),
            Candidate(
                "bias on", {"fit_bias": True, "bias_limit": None}, margin=BIAS_MARGIN, on_training=True
            ),
        ]
    )
    return axes


def candidate_axes(
    rec: Recording,
    robot: RobotModel,
    opts: RobotFitOptions,
    inner_fraction: float | None = None,
    train: Recording | None = None,
) -> list[list[Candidate]]:
    """The axes searched, each simplest first (the start); `inner_fraction` None: inner_share; `train`, the
    training part when the caller has it (`training_part`)."""
    inner_fraction = inner_share(rec, opts) if inner_fraction is None else inner_fraction
    limit = opts.bias_limit if opts.bias_limit is not None else BIAS_PLAUSIBLE
    axes = gains_bias_axes(_gains_given(rec, opts), limit, opts.fit_bias)
    grouped = opts.groups if opts.groups is not None else name_groups(list(robot.joint_names))
    if grouped is not None:
        axes.append([Candidate("per group", {"groups": grouped}), Candidate("per joint", {"groups": None})])
    if opts.position_friction:  # asked for: the protocol decides (no consumer holds it; exports get the mean)
        axes.append(
            [Candidate("friction constant", {"position_friction": False}), Candidate("friction by position")]
        )
    train = train if train is not None else training_part(rec, robot, opts)[0]
    one = len(train.segments) == 1  # a window fits in the inner split's training part
    room = max(s.n * s.dt for s in train.segments) * (1.0 - inner_fraction if one else 1.0)
    axes.append(
        [Candidate(f"window {opts.window_s:g} s")]
        + [
            Candidate(
                f"window {opts.window_s * f:g} s", {"window_s": opts.window_s * f}, ordered=True, margin=0.0
            )
            for f in WINDOW_FACTORS
            if opts.window_s * f <= room
        ]
    )
    return axes


def _segment(seg: Segment, a: int, b: int, drop_gains: bool) -> Segment:
    """Samples [a, b) of a segment (its metadata copied, kp / kd dropped when asked)."""
    meta = {k: v for k, v in seg.metadata.items() if not (drop_gains and k in ("kp", "kd"))}

    def cut(x: np.ndarray | None) -> np.ndarray | None:
        return None if x is None else x[a:b]

    return dataclasses.replace(
        seg,
        t=seg.t[a:b],
        q=seg.q[a:b],
        qd=seg.qd[a:b],
        q_des=seg.q_des[a:b],
        qd_des=seg.qd_des[a:b],
        tau_ff=seg.tau_ff[a:b],
        tau=cut(seg.tau),
        enable=cut(seg.enable),
        metadata=meta,
    )


def _with_segments(rec: Recording, segs: list[Segment]) -> Recording:
    return dataclasses.replace(rec, segments=segs, metadata=dict(rec.metadata))


def training_part(rec: Recording, robot: RobotModel, opts: RobotFitOptions) -> tuple[Recording, str]:
    """The log `fit_robot` trains on (the validation part removed), and how it was cut."""
    if len(rec.segments) == 1 and not opts.holdout:
        seg = rec.segments[0]
        split = int(round(seg.n * (1.0 - opts.validation_fraction)))
        return _with_segments(rec, [_segment(seg, 0, split, False)]), f"samples 0–{split - 1} of {seg.n}"
    data, _, _ = prepare_fit(rec, robot, opts)
    names = set(data.recordings["training"])
    segs = [s for s in rec.segments if s.name in names]
    return _with_segments(rec, segs), "the training recordings " + ", ".join(data.recordings["training"])


def _drop_gains(rec: Recording) -> Recording:
    return _with_segments(rec, [_segment(s, 0, s.n, True) for s in rec.segments])


def _combine(chosen: list[Candidate]) -> Candidate:
    """One candidate from a choice on each axis."""
    changes: dict[str, Any] = {}
    for c in chosen:
        changes |= c.changes
    return Candidate(", ".join(c.name for c in chosen), changes, any(c.fit_gains for c in chosen))


def configurations(axes: list[list[Candidate]]) -> list[Candidate]:
    """Every configuration the axes span (one choice per axis), the start first."""
    return [_combine(list(pick)) for pick in itertools.product(*axes)]


def relayed(opts: RobotFitOptions, stage: str) -> Callable[[str], None] | None:
    """A candidate fit's progress: its messages prefixed with `stage`, so the log, the live chart and a cancel
    reach inside it; None where the selection reports nothing."""
    say = opts.progress
    return None if say is None else (lambda m: say(f"{stage}: {m}"))


def fit_candidate(rec: Recording, robot: RobotModel, opts: RobotFitOptions, c: Candidate) -> RobotResult:
    """`fit_robot` with a candidate's options, the log's gains dropped when it fits them."""
    return fit_robot(_drop_gains(rec) if c.fit_gains else rec, robot, dataclasses.replace(opts, **c.changes))


def greedy_choice(
    axes: list[list[Candidate]], score: Callable[[Candidate], float]
) -> tuple[float, list[Candidate]]:
    """One axis at a time from every axis's first entry: an entry replaces the one kept when its score is lower
    by at least its margin; an ordered axis stops at its first step that loses."""
    choice = [a[0] for a in axes]
    best = score(_combine(choice))
    for k, axis in enumerate(axes):
        for alt in axis[1:]:
            trial = choice[:k] + [alt] + choice[k + 1 :]
            s = score(_combine(trial))
            if s < best * (1.0 - alt.margin):
                best, choice = s, trial
            elif alt.ordered:
                break
    return best, choice


def bias_entries(axis: list[Candidate], gains: Candidate | None) -> list[Candidate]:
    """The bias axis as the kept gains allow: over fitted gains (or gains guessed, `gains` None) no free bias is
    tried, since free gains and a free bias trade (a free bias takes up a gain error)."""
    return axis[:2] if gains is None or gains.fit_gains else axis


def training_choice(
    rec: Recording,
    robot: RobotModel,
    opts: RobotFitOptions,
    gains_axis: list[Candidate] | None,
    bias_axis: list[Candidate],
    budget_s: float | None = None,
) -> tuple[list[Candidate], dict]:
    """The gains and the bias decided on the whole training part. The gains first, every entry with the bias
    within its bound (bias_axis[1]; off where the bias is held off, bias_axis alone) and the delay scanned (a
    fitted gain would otherwise take up an encoder bias), fitted gains kept when they lower the training RMSE by
    their margin. Then the bias at the delay the kept gains' fit found: off against bounded by late_rmse (the
    training RMSE by BIAS_MARGIN where there is no late share), then, over the logged gains and a bounded bias
    kept, a free one by BIAS_MARGIN (bias_entries). Returns the kept entries (gains first, where there is a
    gains axis) and their figures."""
    t0 = time.perf_counter()

    made: dict[tuple[str, int | None], RobotResult] = {}

    def fitted(c: Candidate, delay: int | None) -> RobotResult:
        """A candidate's fit at `delay` (None: scanned), made once (the rule below reuses the teacher's)."""
        if (c.name, delay) not in made:
            left = None if budget_s is None else max(1.0, budget_s - (time.perf_counter() - t0))
            progress = relayed(opts, f"select: {c.name}")
            fit_opts = dataclasses.replace(opts, judge=False, progress=progress, budget_s=left, delay=delay)
            made[c.name, delay] = fit_candidate(rec, robot, fit_opts, c)
        return made[c.name, delay]

    failed: dict[str, str] = {}
    if gains_axis and len(bias_axis) > 1 and len(rec.segments) == 1 and not opts.holdout:

        def distance(fits: dict[str, RobotResult], teacher: RobotResult) -> dict[str, float]:
            return teacher_distance(training_part(rec, robot, opts)[0], robot, opts, fits, teacher)

        try:
            return teacher_choice(opts, gains_axis, bias_axis, fitted, distance)
        except RobotError as e:  # the teacher could not be fitted or replayed: the rule below decides
            failed = {"teacher_failed": str(e)}

    def with_gains(g: Candidate | None, b: Candidate) -> Candidate:
        return b if g is None else _combine([g, b])

    bounded = bias_axis[1] if len(bias_axis) > 1 else bias_axis[0]  # bias held off: the gains fitted without
    fits = {g.name: fitted(with_gains(g, bounded), opts.delay) for g in gains_axis or []}
    gains_rmse = {k: float(v.training.rmse or 0.0) for k, v in fits.items()}
    kept_gains = greedy_choice([gains_axis], lambda c: gains_rmse[c.name])[1][0] if gains_axis else None
    reference = fits[kept_gains.name] if kept_gains else fitted(bounded, opts.delay)
    delay = int(reference.delay_steps) if opts.delay is None else opts.delay
    bias_fits = {bounded.name: reference}

    def bias_fit(c: Candidate) -> RobotResult:
        """An entry's fit at that delay, made when the choice first asks for it."""
        if c.name not in bias_fits:
            bias_fits[c.name] = fitted(with_gains(kept_gains, c), delay)
        return bias_fits[c.name]

    def bias_score(c: Candidate) -> float:
        return float(bias_fit(c).training.rmse or 0.0)

    entries = bias_entries(bias_axis, kept_gains)
    late: dict[str, float] = {}
    if len(entries) > 1:  # off against bounded by the free replay of the training part's last share
        late = late_rmse(rec, robot, opts, {c.name: bias_fit(c) for c in entries[:2]})
    if late:
        kept_bias = bounded if late[bounded.name] < late[entries[0].name] else entries[0]
        free = entries[2] if kept_bias is bounded and len(entries) > 2 else None
        if free is not None and bias_score(free) < (1.0 - free.margin) * bias_score(bounded):
            kept_bias = free
    else:  # the bias held off, or no late share to replay (a training part of one recording cut at time gaps)
        kept_bias = greedy_choice([entries], bias_score)[1][0]
    figures = {
        "bias_training_rmse": {k: round(float(v.training.rmse or 0.0), 7) for k, v in bias_fits.items()},
        **(
            {"bias_late_rmse": {k: round(v, 7) for k, v in late.items()}, "late_share": LATE_SHARE}
            if late
            else {}
        ),
        "delay_steps": delay,
        "kept": [kept_bias.name],
    }
    if len(bias_axis) == 1:
        figures["bias_held_off"] = True
    figures |= failed
    if kept_gains is None:
        return [kept_bias], figures
    figures = {"gains_training_rmse_with_bias": {k: round(v, 7) for k, v in gains_rmse.items()}, **figures}
    figures["kept"] = [kept_gains.name, kept_bias.name]
    return [kept_gains, kept_bias], figures


def teacher_choice(
    opts: RobotFitOptions,
    gains_axis: list[Candidate],
    bias_axis: list[Candidate],
    fitted: Callable[[Candidate, int | None], RobotResult],
    distance: Callable[[dict[str, RobotResult], RobotResult], dict[str, float]],
) -> tuple[list[Candidate], dict]:
    """The gains and the bias nearest a teacher. A teacher (teacher_candidate) is fitted with each entry of the
    gains axis, fitted gains kept when they lower its training RMSE by GAINS_MARGIN: a teacher holds the plant's
    other effects, so its RMSE tells a gain error from noise better than a configuration's, and a teacher with
    gains it need not fit does not trade them against the delay. Then every configuration the axes allow
    (bias_entries: no free bias over fitted gains) is fitted on the whole training part, the delay scanned, and
    the one whose replay lies nearest the kept teacher's (`distance`) is kept. Returns the kept entries and the
    figures."""
    bounded = bias_axis[1]
    fine = None if opts.delay is None else opts.delay * TEACHER_FINE
    limit = float(bounded.changes["bias_limit"])
    # the teachers first: where one cannot be fitted, the caller's rule decides before the configurations are fitted
    rich = {g.name: teacher_candidate(opts, limit, g) for g in gains_axis}
    teachers = {k: fitted(c, fine) for k, c in rich.items()}
    teacher_rmse = {k: float(v.training.rmse or 0.0) for k, v in teachers.items()}
    gains = greedy_choice([gains_axis], lambda c: teacher_rmse[c.name])[1][0]
    teacher = teachers[gains.name]
    pairs = {f"{g.name}, {b.name}": (g, b) for g in gains_axis for b in bias_entries(bias_axis, g)}
    fits = {name: fitted(_combine(list(gb)), opts.delay) for name, gb in pairs.items()}
    dist = distance(fits, teacher)
    kept_name = min(fits, key=dist.__getitem__)
    (g_kept, b_kept), kept = pairs[kept_name], fits[kept_name]
    figures = {
        "rule": "teacher",
        "speed": TEACHER_SPEED,
        "configurations": {
            name: {
                "training_rmse": round(float(f.training.rmse or 0.0), 7),
                "delay_steps": int(f.delay_steps),
                "teacher_distance": round(dist[name], 7),
            }
            for name, f in fits.items()
        },
        "teacher": {
            "options": rich[gains.name].described(),
            "training_rmse": round(teacher_rmse[gains.name], 7),
            "delay_steps": int(teacher.delay_steps),
            "gains_margin": GAINS_MARGIN,
            "by_gains": {
                k: {"training_rmse": round(teacher_rmse[k], 7), "delay_steps": int(v.delay_steps)}
                for k, v in teachers.items()
            },
        },
        "delay_steps": int(kept.delay_steps),
        "kept": [g_kept.name, b_kept.name],
    }
    return [g_kept, b_kept], figures


def delay_from_teacher(decided: dict | None, opts: RobotFitOptions) -> int | None:
    """The refit's delay where the followed teacher's (on its grid TEACHER_FINE × finer) falls between two of the
    fit's steps: the step above it. A scan at the fit's rate lands on either side by the training RMSE; on the
    known-truth bench the step above extrapolates better. None where the teacher decided nothing, a delay was
    given, or the teacher's lies on the fit's grid (the scan can hold it)."""
    if opts.delay is not None or decided is None or decided.get("rule") != "teacher":
        return None
    fine = int(decided["teacher"]["delay_steps"])
    return None if fine % TEACHER_FINE == 0 else -(-fine // TEACHER_FINE)


def teacher_candidate(opts: RobotFitOptions, bias_limit: float, gains: Candidate) -> Candidate:
    """The teacher (teacher_changes) as a candidate, with a gains entry's own changes (fitted: the log's
    dropped), named for it."""
    changes = {**teacher_changes(opts, bias_limit), **gains.changes}
    return Candidate(f"teacher, {gains.name}", changes, gains.fit_gains)


def late_rmse(
    rec: Recording,
    robot: RobotModel,
    opts: RobotFitOptions,
    fits: dict[str, RobotResult],
    share: float = LATE_SHARE,
) -> dict[str, float]:
    """Each fit's position RMSE replayed free over the training part's last `share` (its last recordings,
    where it has several) from the measured state there; empty where that part cannot be split so."""
    train = training_part(rec, robot, opts)[0]
    late_opts = dataclasses.replace(opts, validation_fraction=share, holdout=None, progress=None)
    try:
        data, prob, _ = prepare_fit(train, robot, late_opts)
    except RobotError:
        return {}
    out: dict[str, float] = {}
    for name, res in fits.items():
        fitted = result_values(res, prob.names)
        ((sim, _),) = replay_validation(
            robot, prob, data, fitted, int(res.delay_steps), opts.decimation, beside=False
        )
        out[name] = float(np.sqrt(np.mean((sim - data.q[data.split :]) ** 2)))
    return out


def inner_fit(
    train: Recording,
    robot: RobotModel,
    opts: RobotFitOptions,
    c: Candidate,
    delay: int | None,
    inner_fraction: float,
    iterations: int = INNER_ITERATIONS,
    budget_s: float | None = None,
) -> RobotResult:
    """Candidate `c` fitted on the inner split of the training part at `delay` (None: scanned), unjudged."""
    inner = dataclasses.replace(
        opts,
        **c.changes,
        delay=delay,
        validation_fraction=inner_fraction,
        holdout=None,
        max_iterations=min(opts.max_iterations, iterations),
        budget_s=budget_s,
        judge=False,
        progress=relayed(opts, f"select, inner split: {c.name}"),
    )
    return fit_robot(_drop_gains(train) if c.fit_gains else train, robot, inner)


def _row(c: Candidate, res: RobotResult, wall_s: float) -> dict:
    """One candidate's inner fit as the selection states it (JSON-ready)."""
    v = res.validation
    assert v.rmse is not None and res.training.rmse is not None  # fit_robot states both
    return {
        "name": c.name,
        "options": c.described(),
        "inner_validation_rmse": float(v.rmse),
        "inner_validation_per_joint_rmse": v.per_joint_rmse,
        "inner_training_rmse": float(res.training.rmse),
        "delay_steps": int(res.delay_steps),
        "wall_s": round(wall_s, 2),
    }


def _protocol(
    cut: str, inner_fraction: float, iterations: int, delay: int | None, decided: dict | None
) -> str:
    """The selection's protocol in words, as the result states it."""
    first = ""
    if decided is not None and decided.get("rule") == "teacher":
        first = (
            "the gains and the bias first, on the whole training part: every configuration of the gains given or "
            "fitted and the bias off, within its bound or (over the given gains) free fitted, the delay scanned, "
            "beside a teacher no consumer runs (the bias within its bound, friction along the stroke, physics "
            f"{TEACHER_FINE} × finer; fitted with the gains given and fitted, fitted kept when they lower its "
            f"training RMSE by {GAINS_MARGIN:.0%}); each replayed from the training part's first measured "
            f"state on its commands played {TEACHER_SPEED} × faster, and the configuration whose replay lies "
            "nearest the teacher's kept; then the other axes on an "
        )
    elif decided is not None and decided.get("bias_held_off"):
        first = (
            "the gains first, on the whole training part, the bias held off: given and fitted gains, fitted kept "
            f"when they lower the training RMSE by {GAINS_MARGIN:.0%}; then the other axes on an "
        )
    elif decided is not None:
        gains = "gains_training_rmse_with_bias" in decided
        first = (
            ("the gains and the bias" if gains else "the bias")
            + " first, on the whole training part: "
            + (
                "given and fitted gains each with the bias within its bound, fitted kept when they lower the "
                f"training RMSE by {GAINS_MARGIN:.0%}; then "
                if gains
                else "the bias within its bound, then "
            )
            + "the bias off at that fit's delay, the bounded bias kept when it tracks the training part's last "
            f"{LATE_SHARE:.0%} better replayed free from the measured state there, and only then, over the "
            f"logged gains, a free one, kept when it lowers the training RMSE by {BIAS_MARGIN:.0%}; then the "
            "other axes on an "
        )
    return (
        first + f"inner split of the training part ({cut}): the earlier {1 - inner_fraction:.0%} trains, "
        f"the later {inner_fraction:.0%} validates, replayed from the measured state at the inner split; one "
        "axis at a time from every axis's simplest entry; an entry replaces the one kept only when its "
        f"inner-validation RMSE is lower by its margin (a richer model {MIN_GAIN:.0%}, a window: lower); each "
        f"candidate searched for at most {iterations} iterations at the first candidate's delay"
        + ("" if delay is None else " (the given delay)")
        + "; the one kept is refitted on the whole training part"
        + (
            ", at the step above the teacher's delay where that falls between two of the fit's steps"
            if decided is not None and decided.get("rule") == "teacher" and delay is None
            else ""
        )
    )


def select_robot_fit(
    rec: Recording,
    robot: RobotModel,
    opts: RobotFitOptions | None = None,
    *,
    inner_fraction: float | None = None,
    inner_iterations: int = INNER_ITERATIONS,
    budget_s: float | None = None,
    axes: list[list[Candidate]] | None = None,
) -> RobotResult:
    """Choose the configuration on the training part alone (inner split, `inner_fraction` None: inner_share;
    greedy over `axes`, an entry kept when it buys its margin), refit it on the whole training part with
    `fit_robot`; its result with `selection`. `budget_s` caps the candidates' search (the chosen refit runs)."""
    opts = opts or RobotFitOptions()
    inner_fraction = inner_share(rec, opts) if inner_fraction is None else inner_fraction
    if not 0.05 <= inner_fraction <= INNER_MAX:
        raise RobotError(
            f"inner_fraction {inner_fraction}: between 0.05 and {INNER_MAX} of the training part"
        )
    t0 = time.perf_counter()
    say: Callable[[str], None] = opts.progress or (lambda m: None)
    train, cut = training_part(rec, robot, opts)
    axes = axes if axes is not None else candidate_axes(rec, robot, opts, inner_fraction, train)
    gains_axis = next((a for a in axes if a[0].on_training and any(c.fit_gains for c in a)), None)
    bias_axis = next((a for a in axes if a[0].on_training and a is not gains_axis), None)
    decided: dict | None = None
    if bias_axis is not None and (gains_axis is not None or len(bias_axis) > 1):  # on the whole training part
        what = "the gains and the bias" if len(bias_axis) > 1 else "the gains, the bias held off"
        say(f"select: {what}, fitted on the whole training part")
        kept, decided = training_choice(rec, robot, opts, gains_axis, bias_axis, budget_s)
        say(f"select: kept {', '.join(c.name for c in kept)} ({decided})")
        by_axis = {id(a): [c] for a, c in zip([a for a in (gains_axis, bias_axis) if a], kept, strict=True)}
        axes = [by_axis.get(id(a), a) for a in axes]
    tried: dict[str, dict] = {}
    skipped: list[str] = []
    delay: list[int | None] = [opts.delay]  # the first candidate's, held by the later ones (the refit scans)

    def score(c: Candidate) -> float:
        """The candidate's inner validation RMSE at the held delay (the first one scans it); inf when the
        budget is spent."""
        if c.name in tried:
            return float(tried[c.name]["inner_validation_rmse"])
        t1 = time.perf_counter()
        left = None if budget_s is None else budget_s - (t1 - t0)
        if left is not None and left <= 0:
            skipped.append(c.name)
            return float("inf")
        res = inner_fit(train, robot, opts, c, delay[0], inner_fraction, inner_iterations, left)
        delay[:] = [int(res.delay_steps)]
        row = tried[c.name] = _row(c, res, time.perf_counter() - t1)
        say(
            f"select: {c.name}: inner validation {row['inner_validation_rmse']:.5f} rad ({row['wall_s']:.1f} s)"
        )
        return float(row["inner_validation_rmse"])

    if all(len(a) == 1 for a in axes):  # nothing left to choose on the inner split
        best, choice = math.nan, [a[0] for a in axes]
    else:
        best, choice = greedy_choice(axes, score)
        if not np.isfinite(best) and decided is None:
            raise RobotError(
                "the selection budget ran out before one candidate was fitted: give a longer budget"
            )
    chosen = _combine(choice)
    figure = f"inner validation {best:.5f} rad" if np.isfinite(best) else "no inner candidate scored"
    say(f"select: chosen {chosen.name} ({figure}); refitting on the training part")
    search_s = time.perf_counter() - t0
    at = delay_from_teacher(decided, opts)
    final = dataclasses.replace(opts, **chosen.changes)
    if at is not None:
        final = dataclasses.replace(final, delay=at)
    res = fit_robot(_drop_gains(rec) if chosen.fit_gains else rec, robot, final)
    selection = {
        "protocol": _protocol(
            cut, inner_fraction, min(opts.max_iterations, inner_iterations), opts.delay, decided
        ),
        "inner_fraction": inner_fraction,
        "training_choice": decided,
        "candidates": list(tried.values()),
        "chosen": chosen.name,
        "chosen_options": chosen.described(),
        "delay_from_teacher": at,
        "skipped": skipped,
        "search_s": round(search_s, 2),  # the candidates; wall_s adds the chosen one's refit
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    return replace(res, selection=selection)
