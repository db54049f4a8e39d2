"""The default fit: a ladder of nested families, each rung kept only when it buys a stated gain on data that
the reported validation never sees.

With no family named, the fit climbs: the native envelope (dcmotor), with a delay (dcmotor_delay), with friction
(the rich-friction families that extend the model kept so far, nested, fewest parameters first), the friction kept
across the delay (its twin with the delay, or without it: the two interact), and last MuJoCo's own `<dcmotor>`
once that family is registered. Each rung starts from the fit of the rung below it (fit.py's nested starts) and
searches from there only; a named fit, and so the training judge's refit of the pick, also searches a rich friction
family from the warm start. The rungs are judged on an inner split of the training part (`inner_split`): its
earlier part trains, its later part (the last recordings, or each segment's end in time) judges. A rung replaces
the model kept so far only when its inner-validation position MAE is at least `MIN_GAIN` lower. The pick and the
rungs it nests from are then refitted on the whole training part and validated on the held-out part, untouched by
the choice; the result says what each rung bought and what the pick scores held out (`ladder` in fit.json, the
CLI's lines).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..datasets.recording import Recording
from ..models.families import FAMILIES, Family
from .plan import plan_split, recordings, split_in_time
from .request import BOUNDS, FitRequest, FitRequestError
from .result import Budget, FitResult, JointFit, ModelFit

ProgressFn = Callable[[float, str], None]

MIN_GAIN = 0.05
"""A rung is kept when it lowers the judged position MAE by at least this fraction of the kept model's."""
NATIVE, DELAY = "dcmotor", "dcmotor_delay"
MUJOCO_RUNG = "mujoco_dcmotor"
"""MuJoCo's own `<dcmotor>` (models/mujoco_dcmotor.py): the ladder's last rung whenever FAMILIES has it."""
BUDGET_SPENT = "not fitted: the time budget was spent"
RULE = (
    "rungs climbed in order (native envelope, delay, friction fewest parameters first, the friction kept across "
    "the delay, then MuJoCo <dcmotor>); "
    "a rung replaces the model kept so far only when its {on} position MAE is at least {gain:.0%} lower"
)
REFIT = (
    "; the pick and the rungs it nests from refitted on the whole training part, validated on the held-out part "
    "no choice saw"
)
INNER_SHARE = 0.3
"""The later share of the training part that judges the rungs: whole recordings, or each segment's end in time."""
INNER_KEY = "ladder_judges"
"""Segment metadata marking the training recordings that judge the rungs (the inner split's holdout)."""
CLIMB_SHARE = 0.75
"""Of a time budget, the share the climb may spend; the refit of the pick gets the rest."""
INNER_ON = "inner-validation"


@dataclass(frozen=True)
class Rung:
    """One rung: the step of the ladder it belongs to and the family it fits."""

    step: str
    family: str


def first_rungs() -> list[Rung]:
    """The native envelope, then the same with a command delay."""
    return [Rung("native envelope", NATIVE), Rung("delay", DELAY)]


def friction_rungs(base: str) -> list[Rung]:
    """The rich-friction families that extend `base` (their `approximates`), fewest parameters first: each
    nests `base`, and a richer one nests the ones below it where their terms allow."""
    names = [n for n, f in FAMILIES.items() if f.approximates == base]
    return [Rung("friction", n) for n in sorted(names, key=lambda n: (len(FAMILIES[n].params), n))]


ACROSS = "friction across the delay"
"""The step that judges the kept friction rung's counterpart: the same friction with the delay, or without it."""


def counterpart(family: str | None) -> str | None:
    """The friction rung with `family`'s friction terms on the other base (with the delay, or without it); None
    for a rung that is not a friction rung or has no such twin."""
    f = FAMILIES.get(family or "")
    if f is None or f.approximates not in (NATIVE, DELAY):
        return None
    want = set(f.params) ^ {"delay"}
    other = DELAY if f.approximates == NATIVE else NATIVE
    return next((r.family for r in friction_rungs(other) if set(FAMILIES[r.family].params) == want), None)


def walk_errors(errors: dict[str, float | None], min_gain: float = MIN_GAIN) -> Walk:
    """The ladder's rule on given errors per family, as the climb walks them: the first two rungs, the friction
    rungs of the base kept, the kept friction rung's counterpart across the delay, then MuJoCo's plant."""
    walk = choose([(r, errors.get(r.family)) for r in first_rungs()], min_gain)
    for r in friction_rungs(walk.kept or NATIVE):
        walk.judge(r, errors.get(r.family))
    twin = counterpart(walk.kept)
    if twin is not None:
        walk.judge(Rung(ACROSS, twin), errors.get(twin))
    for r in mujoco_rungs():
        walk.judge(r, errors.get(r.family))
    return walk


def mujoco_rungs() -> list[Rung]:
    """The ladder's last step: MuJoCo's `<dcmotor>`, once models/families.py registers it (not nested: it
    starts from its own warm start)."""
    return [Rung("MuJoCo <dcmotor>", MUJOCO_RUNG)] if MUJOCO_RUNG in FAMILIES else []


def every_rung() -> list[Rung]:
    """Every rung any joint may climb to, without repeats."""
    rungs = [*first_rungs(), *friction_rungs(NATIVE), *friction_rungs(DELAY), *mujoco_rungs()]
    return list({r.family: r for r in rungs}.values())


@dataclass(frozen=True)
class Outcome:
    """What one rung bought on one joint: its error, the model it was measured against, and the decision."""

    rung: Rung
    error: float | None  # judged position MAE [rad]; None: not fitted
    against: str | None = None  # the model kept before this rung (None: the first rung)
    bought: float | None = None  # (kept error − this error) / kept error
    kept: bool = False
    why: str = ""

    def to_json(self) -> dict:
        return {
            "step": self.rung.step,
            "family": self.rung.family,
            "position_mae": self.error,
            "against": self.against,
            "bought": self.bought,
            "kept": self.kept,
            **({"why": self.why} if self.why else {}),
        }


@dataclass
class Walk:
    """One joint's climb: the model kept so far, its error, and every rung's outcome in order."""

    min_gain: float = MIN_GAIN
    kept: str | None = None
    kept_error: float = math.inf
    outcomes: list[Outcome] = field(default_factory=list)

    def judge(self, rung: Rung, error: float | None, why: str = "") -> Outcome:
        """Keep `rung` when it is the first with an error, or buys at least `min_gain` over the kept model."""
        if error is None or not math.isfinite(error):
            out = Outcome(rung, None, self.kept, why=why or "no finite error")
        elif self.kept is None:
            out = Outcome(rung, error, kept=True)
        else:
            bought = (self.kept_error - error) / self.kept_error if self.kept_error > 0 else 0.0
            out = Outcome(rung, error, self.kept, bought, kept=bought >= self.min_gain)
        if out.kept:
            self.kept, self.kept_error = rung.family, float(error)  # type: ignore[arg-type]
        self.outcomes.append(out)
        return out


def choose(errors: Iterable[tuple[Rung, float | None]], min_gain: float = MIN_GAIN) -> Walk:
    """The rule alone: walk rungs with their errors in order; the walk's `kept` is the pick."""
    walk = Walk(min_gain)
    for rung, error in errors:
        walk.judge(rung, error)
    return walk


def note_lines(joint: str, walk: Walk, on: str) -> list[str]:
    """The climb in words, one rung a line, then the pick."""
    out = []
    for o in walk.outcomes:
        head = f"{joint}: {o.rung.step} ({o.rung.family})"
        if o.error is None:
            out.append(f"{head}: {o.why}")
        elif o.against is None:
            out.append(f"{head}: {on} position MAE {o.error:.4g} rad, the first rung")
        else:
            assert o.bought is not None
            verdict = "kept" if o.kept else f"under the {walk.min_gain:.0%} a rung must buy, {o.against} kept"
            out.append(
                f"{head}: {on} position MAE {o.error:.4g} rad, bought {o.bought:+.1%} over {o.against}: {verdict}"
            )
    first = next((o for o in walk.outcomes if o.error is not None), None)
    if walk.kept is not None and first is not None:
        out.append(
            f"{joint}: picked {walk.kept} ({on} position MAE {walk.kept_error:.4g} rad; "
            f"{first.rung.family} {first.error:.4g} rad)"
        )
    return out


def _error(model: ModelFit | None, on: str) -> float | None:
    """A fit's pooled position MAE on the judged split (its validation part unless only training is judged)."""
    if model is None:
        return None
    m = model.metrics.train if on == "train" else model.metrics.validation
    return None if m is None or m.position_mae is None else float(m.position_mae)


@dataclass(frozen=True)
class Engine:
    """The joint fit's steps the ladder composes, handed over by fitting/fit.py (which imports this module, so
    this one cannot import it): plan a run, fit one family on it (nested from the fits so far), its result
    entry per joint, rank a joint, assemble the result, and a whole fit of named families."""

    plan: Callable[..., Any]  # fit._plan_run(rec, req, progress) -> run
    fit_family: Callable[..., Any]  # fit._fit_family(run, name, fitted_by, second_start) -> family fit
    entry: Callable[..., ModelFit]  # fit._model_entry(run, name, family fit, j, joint)
    rank: Callable[..., JointFit]  # fit._rank_joint(models, load)
    assemble: Callable[..., FitResult]  # fit._assemble(run, joints, t_start)
    fit_named: Callable[..., FitResult]  # fit.fit_result(rec, req, progress)
    family_for: Callable[[FitRequest, str], Family]  # fit.family_for


class _Climb:
    """One ladder fit's shared state: the planned run (fit.py), the fits per joint, and each joint's walk."""

    def __init__(
        self,
        rec: Recording,
        req: FitRequest,
        progress: ProgressFn | None,
        engine: Engine,
        on: str | None = None,
    ) -> None:
        self.rec, self.req, self.progress, self.engine = rec, req, progress, engine
        self.run = engine.plan(rec, replace(req, families=[r.family for r in every_rung()]), progress)
        folds = len(self.run.split.folds)
        rich = max(len(friction_rungs(NATIVE)), len(friction_rungs(DELAY)))
        # searches one joint's climb runs (each rung once, from the nested start; its twin across the delay
        # too); MuJoCo's rung: one more
        held = self.run.split.validation or self.run.split.folds
        self.on = on or ("validation" if held else "train")  # what the walk's errors are measured on
        self.run.clock.units = (len(first_rungs()) + rich + 1) * (1 + folds) + len(mujoco_rungs())
        self.fits: dict[str, dict[str, ModelFit]] = {j: {} for j in self.run.joints}
        # family → (family, fitted values per joint, loss): where fit.py finds a nested rung's parent
        self.fitted_by: dict[str, tuple[Family, list[dict[str, float]], float]] = {}
        self.walks = {j: Walk() for j in self.run.joints}
        self.skipped: dict[str, str] = {}  # family → why it was not fitted

    def spent(self) -> bool:
        budget = self.req.budget_s
        return budget is not None and self.run.clock.elapsed() >= budget

    def fit(self, rungs: Iterable[Rung]) -> None:
        """Fit rungs not fitted yet, nested ones first (each starts from the richest fit it nests)."""
        todo = {r.family for r in rungs} - set(self.fitted_by) - set(self.skipped)
        for name in sorted(todo, key=lambda n: (len(self.engine.family_for(self.req, n).params), n)):
            if self.fitted_by and self.spent():  # the first rung is always fitted
                self.skipped[name] = BUDGET_SPENT
                continue
            ff = self.engine.fit_family(self.run, name, self.fitted_by, False)
            for j, joint in enumerate(self.run.joints):
                self.fits[joint][name] = self.engine.entry(self.run, name, ff, j, joint)

    def fit_apart(self, rung: Rung) -> None:
        """A rung that does not nest (MuJoCo's plant): its own fit through the public entry, on the same split. A
        log that family cannot fit skips the rung, with the reason."""
        if self.spent():
            self.skipped[rung.family] = BUDGET_SPENT
            return
        left = None if self.req.budget_s is None else self.req.budget_s - self.run.clock.elapsed()
        try:
            res = self.engine.fit_named(
                self.rec, replace(self.req, families=[rung.family], budget_s=left), self._tail()
            )
        except FitRequestError as e:
            self.skipped[rung.family] = f"not fitted: {e}"
            return
        self.run.stopped_on_budget |= bool(res.budget and res.budget.stopped_on_budget)
        for joint in self.run.joints:
            self.fits[joint][rung.family] = res.joints[joint].models[rung.family]

    def _tail(self) -> ProgressFn | None:
        """Progress of a fit apart, drawn over what is left of this fit's bar."""
        progress, start = self.progress, self.run.clock.fraction(0.0)
        if progress is None:
            return None

        def tail(fraction: float, message: str) -> None:
            progress(start + (1 - start) * fraction, message)

        return tail

    def judge(self, joint: str, rungs: Iterable[Rung]) -> None:
        for rung in rungs:
            why = self.skipped.get(rung.family, "")
            self.walks[joint].judge(rung, _error(self.fits[joint].get(rung.family), self.on), why)


@dataclass(frozen=True)
class Inner:
    """The split the ladder chooses on: the training part cut again, the request that cuts it, both in words."""

    rec: Recording  # the outer split's training part, its judging recordings marked
    req: FitRequest  # the request that splits it: the earlier part trains, the later part judges
    how: str  # the inner split in words
    held_out: str | None  # the outer split's held-out part in words; None when no part is held out untouched


def inner_split(rec: Recording, req: FitRequest) -> Inner | None:
    """The training part of `req`'s split, cut again the way the outer split cuts: a split in time, or a single
    recording, cuts each training segment's last INNER_SHARE in time; otherwise the last INNER_SHARE of the
    training recordings (in the log's order) judge, whole. None when it cannot be cut."""
    outer = plan_split(rec, req)
    part = replace(rec, segments=[rec.segments[i] for i in outer.train])
    base = replace(req, holdout=None, folds=None, folds_by=None, validate_last=None, budget_s=None)
    held = outer.method if outer.validation else None
    groups = recordings(part)
    if req.validate_last is not None or len(groups) < 2:
        try:
            cut = split_in_time(part, INNER_SHARE)
        except FitRequestError:  # a segment too short to keep two samples on each side
            return None
        how = f"the last {INNER_SHARE:.0%} of each training segment in time"
        return Inner(cut, replace(base, validate_last=INNER_SHARE), how, held)
    judge, how = _judges(groups)
    segs = [
        replace(s, metadata={**s.metadata, INNER_KEY: "yes"}) if i in judge else s
        for i, s in enumerate(part.segments)
    ]
    return Inner(replace(part, segments=segs), replace(base, holdout=f"{INNER_KEY}=yes"), how, held)


def _judges(groups: list[list[int]]) -> tuple[set[int], str]:
    """The last INNER_SHARE of the training recordings, whole (one at least, one left to train)."""
    k = min(len(groups) - 1, max(1, round(INNER_SHARE * len(groups))))
    judges = {i for g in groups[-k:] for i in g}
    return judges, f"the last {k} of the {len(groups)} training recordings, whole"


def _scaled(progress: ProgressFn | None, a: float, b: float) -> ProgressFn | None:
    """Progress of one stage drawn over [a, b] of the fit's bar."""
    if progress is None:
        return None

    def stage(fraction: float, message: str) -> None:
        progress(a + (b - a) * fraction, message)

    return stage


def _walk(
    rec: Recording, req: FitRequest, progress: ProgressFn | None, engine: Engine, on: str | None
) -> _Climb:
    """Fit and judge every rung on `rec`'s split: the first two, the friction rungs of the base each joint
    kept, then MuJoCo's plant."""
    c = _Climb(rec, req, progress, engine, on)
    c.fit(first_rungs())
    for joint in c.run.joints:
        c.judge(joint, first_rungs())
    bases = {joint: c.walks[joint].kept or NATIVE for joint in c.run.joints}
    c.fit(r for base in set(bases.values()) for r in friction_rungs(base))
    for joint, base in bases.items():
        c.judge(joint, friction_rungs(base))
    # the delay judged again beside friction: a delay that buys nothing alone can with friction, and the reverse
    twins = {joint: counterpart(c.walks[joint].kept) for joint in c.run.joints}
    c.fit(Rung(ACROSS, t) for t in set(twins.values()) if t is not None)
    for joint, twin in twins.items():
        if twin is not None:
            c.judge(joint, [Rung(ACROSS, twin)])
    for rung in mujoco_rungs():  # MuJoCo's <dcmotor>: the last step, fitted apart (not nested)
        c.fit_apart(rung)
        for joint in c.run.joints:
            c.judge(joint, [rung])
    return c


def climb(rec: Recording, req: FitRequest, progress: ProgressFn | None, engine: Engine) -> FitResult:
    """Climb the ladder (rec already split in time, req validated) on the inner split of the training part; per
    joint the simplest model no later rung beats by MIN_GAIN there is the pick. The pick and the rungs it nests
    from are refitted on the whole training part, nested as in the climb, and validated on the held-out part.
    The result's `ladder` says what each rung bought and what the pick scores held out; its `request` keeps
    families None."""
    t_start = time.perf_counter()
    inner = inner_split(rec, req) if req.ladder_judge == "training" else None
    if inner is None:  # judged on the split the fit reports (asked, or the training part cannot be cut)
        c = _walk(rec, req, progress, engine, None)
        result = engine.assemble(c.run, {joint: _joint(c, joint) for joint in c.run.joints}, t_start)
        if progress:
            progress(1.0, "done")
        return replace(result, request=asdict(req), extra={**result.extra, "ladder": _record(c)})
    share = CLIMB_SHARE  # of the progress bar, as of a budget
    climb_budget = None if req.budget_s is None else CLIMB_SHARE * req.budget_s
    c = _walk(
        inner.rec, replace(inner.req, budget_s=climb_budget), _scaled(progress, 0, share), engine, INNER_ON
    )
    refit = _refit_families(c)
    left = None
    if req.budget_s is not None:
        left = max(BOUNDS["budget_s"][0], req.budget_s - (time.perf_counter() - t_start))
    res = engine.fit_named(rec, replace(req, families=refit, budget_s=left), _scaled(progress, share, 1))
    joints = {joint: _picked(jr, c.walks[joint].kept or NATIVE) for joint, jr in res.joints.items()}
    stopped = c.run.stopped_on_budget or bool(res.budget and res.budget.stopped_on_budget)
    return replace(
        res,
        joints=joints,
        request=asdict(req),
        budget=Budget(seconds=req.budget_s, stopped_on_budget=stopped),
        elapsed_s=round(time.perf_counter() - t_start, 3),
        extra={**res.extra, "ladder": _record(c, inner, res)},
    )


def _refit_families(c: _Climb) -> list[str]:
    """Every joint's pick and the chain it nests from on its path, in the order climbed: refitted together, each
    starts from the one below it as a named fit's nested start does."""
    out: list[str] = []
    for w in c.walks.values():
        pick = w.kept or NATIVE
        if pick == MUJOCO_RUNG:  # not nested: fitted apart, alone
            out.append(pick)
            continue
        base = DELAY if pick == DELAY or FAMILIES[pick].approximates == DELAY else NATIVE
        path = [NATIVE, *([DELAY] if base == DELAY else []), *(r.family for r in friction_rungs(base))]
        out += nest_chain(pick, path[: path.index(pick)])
    return [r.family for r in every_rung() if r.family in out]


def nest_chain(family: str, below: list[str]) -> list[str]:
    """`family` and, down from it, the richest of `below` whose parameters it holds (the parent a named fit
    starts it from), and that one's parent, to the first rung."""
    params = set(FAMILIES[family].params)
    inside = [b for b in below if set(FAMILIES[b].params) < params]
    if not inside:
        return [family]
    parent = max(inside, key=lambda b: len(FAMILIES[b].params))
    return [*nest_chain(parent, [b for b in below if b != parent]), family]


def _picked(jr: JointFit, pick: str) -> JointFit:
    """A refitted joint with the ladder's pick as its best model."""
    return replace(jr, best_model=pick, device_gains=jr.models[pick].device_gains)


def _joint(c: _Climb, joint: str) -> JointFit:
    """One joint's fits in the order climbed, ranked as any fit ranks them, the ladder's pick its best model."""
    models = c.fits[joint]
    load = asdict(c.rec.joints[c.rec.joint_index(joint)])
    ranked = c.engine.rank(models, load)
    return _picked(ranked, c.walks[joint].kept or ranked.best_model)


def _held_out(res: FitResult | None, joint: str) -> dict[str, float | None]:
    """Each refitted family's held-out position MAE on one joint."""
    if res is None:
        return {}
    return {f: _error(m, "validation") for f, m in res.joints[joint].models.items()}


def _record(c: _Climb, inner: Inner | None = None, res: FitResult | None = None) -> dict:
    """The result's `ladder`: the rule, the splits, each joint's rungs, pick and held-out figures, what was not
    fitted, the notes."""
    joints = {}
    notes = []
    for j, w in c.walks.items():
        held = _held_out(res, j)
        joints[j] = {
            "picked": w.kept,
            "steps": [o.to_json() for o in w.outcomes],
            **({"held_out": held, "picked_held_out": held.get(w.kept or NATIVE)} if res is not None else {}),
        }
        notes += note_lines(j, w, c.on)
        if inner is not None and res is not None:
            notes.append(held_out_line(j, w.kept or NATIVE, held, inner.held_out, res.split.method or ""))
    return {
        "rule": RULE.format(on=c.on, gain=MIN_GAIN) + (REFIT if inner is not None else ""),
        "min_gain": MIN_GAIN,
        "judged_on": c.on,
        "inner_split": None if inner is None else inner.how,
        "held_out": None if inner is None else inner.held_out,
        "refitted": None if res is None else sorted({f for jr in res.joints.values() for f in jr.models}),
        "joints": joints,
        "not_fitted": dict(sorted(c.skipped.items())),
        "notes": notes,
    }


def held_out_line(
    joint: str, pick: str, held: dict[str, float | None], outer: str | None, method: str
) -> str:
    """The pick's figure on the part the choice never saw, beside the other refitted rungs'."""
    others = ", ".join(f"{f} {e:.4g}" for f, e in held.items() if f != pick and e is not None)
    also = f" (refitted beside it: {others})" if others else ""
    mae = held.get(pick)
    if outer is None or mae is None:
        return (
            f"{joint}: {pick} refitted on the whole training part; nothing is held out untouched ({method})"
        )
    return (
        f"{joint}: held out ({outer}): {pick} position MAE {mae:.4g} rad, refitted on the whole training "
        f"part; no choice saw this part{also}"
    )
