"""Public entry points of fitting: plain functions on plain data, used by the CLI and the service worker."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

import numpy as np

from ..datasets.recording import DatasetError, Recording
from ..models import parameters
from ..models.components.servo_goal import GOAL_RATE, fits_goal_rate, held_rate, stated_rates
from ..models.families import (
    F_LOAD_DIRECTIONAL,
    F_LOAD_FRICTION,
    F_LOAD_QUADRATIC,
    F_PID,
    F_STRIBECK,
    F_TABLE,
    FAMILIES,
    NET_FAMILIES,
    Family,
    effort_window,
    get_family,
    is_mujoco_dcmotor,
)
from ..models.rollout import OperatingPoints, RolloutEngine, SegmentBatch, full_params, operating_points
from .coverage import beyond_training, demands
from .objective import KT_SPREAD, LossScales, kt_prior, pool_metrics, segment_metrics
from .plan import Split, plan_split, recordings, split_in_time, split_segments, validate_request
from .request import FitRequest, FitRequestError
from .result import (
    TORQUE_METRIC,
    Assumptions,
    Budget,
    FitResult,
    Interval,
    JointFit,
    Metrics,
    ModelFit,
    RankRow,
    ResultLike,
    SegmentMetrics,
    SplitMetrics,
    SplitNames,
    as_result,
)
from .search import SearchResult, cma_search, local_search, refine
from .space import SearchSpace
from .starts import start_disagreement
from .warmstart import warm_start

__all__ = [
    "FitRequest",
    "FitRequestError",
    "ProgressFn",
    "Split",
    "device_gains",
    "envelope",
    "fit_recording",
    "fit_result",
    "nested_start",
    "nests",
    "params_array",
    "plan_split",
    "recordings",
    "report_data",
    "simulate",
    "split_segments",
    "validate_request",
]

ProgressFn = Callable[[float, str], None]
"""progress(fraction 0..1, message) — called often; must be cheap."""

MODEL_PENALTY = 0.01  # per extra parameter, relative, when ranking families by validation error


class _Clock:
    """The fit's wall clock: elapsed time, ETA and each search's share of a wall-clock budget."""

    def __init__(self, budget_s: float | None, units: int) -> None:
        self.start, self.budget_s, self.units, self.done = time.perf_counter(), budget_s, max(units, 1), 0
        self.unit_start = self.start

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def begin(self) -> float | None:
        """Start the next search; its deadline is 80 % of an equal share of what is left (the rest refines)."""
        self.unit_start = time.perf_counter()
        if self.budget_s is None:
            return None
        left = max(self.start + self.budget_s - self.unit_start, 0.0)
        return self.unit_start + 0.8 * left / (self.units - self.done)

    def fraction(self, unit_fraction: float) -> float:
        return min((self.done + 0.9 * min(unit_fraction, 1.0)) / self.units, 1.0)

    def eta(self, fraction: float) -> float:
        """Seconds left: extrapolated from the fraction done, never past the budget."""
        el = self.elapsed()
        eta = el / fraction - el if fraction > 0 else math.inf
        return min(eta, max(self.budget_s - el, 0.0)) if self.budget_s is not None else eta


def _secs(x: float) -> str:
    return "?" if not math.isfinite(x) else f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


def _family_params(family: Family, space: SearchSpace, x: np.ndarray) -> dict[str, float]:
    """Natural-unit fitted values → the full Isaac Lab parameter dict of a family."""
    out = space.as_dict(x)
    for name in family.params:
        out.setdefault(name, parameters.get(name).neutral)
    if "delay" in out:
        out["delay"] = int(round(out["delay"]))
    return out


def params_array(family: Family, joint_params: list[dict[str, float]]) -> np.ndarray:
    """Per-joint parameter dicts → a (1, J, P) kernel array."""
    cols = {n: np.array([[p[n] for p in joint_params]]) for n in family.params}
    return full_params(family, cols, (1, len(joint_params)))


@dataclass
class _Run:
    """One fit's plan and its shared state: joints, operating points, split, batches, engines, family order."""

    rec: Recording
    req: FitRequest
    progress: ProgressFn | None
    joints: list[str]
    ops: dict[str, OperatingPoints]
    split: Split
    every: SegmentBatch
    train: tuple[RolloutEngine, LossScales, list[dict[str, float]]]
    full_engine: RolloutEngine
    fold_setups: list[tuple[RolloutEngine, LossScales, list[dict[str, float]]]]
    parametric: list[str]  # the requested families and their companions, nested ones fitted first
    companions: list[str]
    clock: _Clock
    stopped_on_budget: bool = False
    # joint → the one goal rate the log states and the fit holds (servo_goal.held_rate)
    held_rates: dict[str, float] = field(default_factory=dict)

    @property
    def val_names(self) -> set[str]:
        return {self.rec.segments[i].name for i in self.split.validation}


def _plan_run(rec: Recording, req: FitRequest, progress: ProgressFn | None) -> _Run:
    """Joints, gains, split, batches and engines of the training sets, and the families in the order they fit."""
    joints = req.joints or rec.joint_names
    try:  # gain units, logged kp / kd / vin and their references, per joint (models/rollout.py)
        ops = {name: operating_points(rec, name) for name in joints}
    except DatasetError as e:
        raise FitRequestError(str(e)) from None
    split = plan_split(rec, req)
    every = SegmentBatch.from_recording(
        rec, joints, substeps=req.decimation, logged_gains=req.use_logged_gains
    )
    window = (
        None
        if not req.window_s
        else max(10, int(round(req.window_s / np.median([s.dt for s in rec.segments]))))
    )

    def setup(ids: list[int]) -> tuple[RolloutEngine, LossScales, list[dict[str, float]]]:
        """Engine, loss scales and warm starts of the training segments `ids`."""
        batch = SegmentBatch.from_recording(
            rec,
            joints,
            ids,
            substeps=req.decimation,
            knots=every.knots,
            window=window,
            logged_gains=req.use_logged_gains,
        )
        scales = dataclasses.replace(LossScales.from_batch(batch), position_mae=req.loss == "position_mae")
        return (
            RolloutEngine(batch, req.device, effort_mode=req.effort_mode),
            scales,
            [warm_start(batch, j) for j in range(len(joints))],
        )

    # a family some consumer cannot hold brings the nearest one it can (Family.fitted_with): a richer-friction
    # family the consumer-native one it extends, remotized_pd delayed_pd for MuJoCo. Every export then has a fit
    # its consumer runs exactly, the report says what the richer one buys, and that one starts from it (nested)
    parametric = [m for m in req.families or [] if m not in NET_FAMILIES]  # networks: fitting/training.py
    companions = [
        n for n in dict.fromkeys(get_family(m).fitted_with for m in parametric) if n and n not in parametric
    ]
    parametric += companions
    second = sum(1 for m in parametric if _searched_twice(req, m, parametric))  # a second start each
    clock = _Clock(
        req.budget_s, (len(req.families or []) + len(companions)) * (1 + len(split.folds)) + second
    )
    return _Run(
        rec,
        req,
        progress,
        joints,
        ops,
        split,
        every,
        setup(split.train),
        RolloutEngine(every, req.device, effort_mode=req.effort_mode),
        [setup([i for i in range(len(rec.segments)) if i not in f]) for f in split.folds],
        parametric,
        companions,
        clock,
        held_rates={n: r for n in joints if (r := held_rate(rec, n)) is not None},
    )


def _search(
    run: _Run,
    engine: RolloutEngine,
    sc: LossScales,
    warm: list[dict[str, float]],
    family: Family,
    space: SearchSpace,
    label: str,
    parent: list[tuple[dict[str, float], dict[str, float]]] | None = None,
    rival: SearchResult | None = None,
) -> SearchResult:
    """CMA-ES then least squares on one training set, reporting progress; one budget unit.

    With `parent` (per joint: a nested family's optimum as the child's equivalent point, and the parent's
    own fitted values) the search starts from the parent's values with the new terms at their warm start,
    and has the equivalent point in its scan; it then needs a fraction of the generations and runs a
    family searched from scratch does. With `rival` (another start's search) a start whose first least squares
    stays clearly worse on every joint (search.local_search) ends there, stopped_on "abandoned"."""
    req, clock, progress = run.req, run.clock, run.progress
    x0, extra = _start_points(warm, space, parent)
    deadline = clock.begin()
    # least squares from the start first: the search then starts from its optimum (search.local_search)
    if progress:
        progress(
            clock.fraction(0.0),
            f"{label}: least squares from the "
            f"{'warm start' if parent is None else 'nested fit'}, "
            f"elapsed {_secs(clock.elapsed())}",
        )
    t_local = time.perf_counter()
    # a kt prior is weighed against the loss the data alone reach from the start (objective.KtPrior.at_loss)
    solved = local_search(
        engine,
        family,
        space,
        sc if sc.prior is None else dataclasses.replace(sc, prior=None),
        x0,
        req.refine_iterations if deadline is None else LOCAL_BUDGET,
        rival,
    )
    x0, after, n_local = solved.best, solved.after, solved.evaluations
    if sc.prior is not None:
        sc = dataclasses.replace(sc, prior=sc.prior.at_loss(after))
    local = {
        "loss_before": solved.before.tolist(),
        "loss_after": after.tolist(),
        "evaluations": n_local,
        "seconds": round(time.perf_counter() - t_local, 3),
    }
    if solved.abandoned:
        clock.done += 1
        return SearchResult(
            x0,
            after,
            [[float(a)] for a in after],
            n_local,
            0,
            [0] * len(x0),
            stopped_on="abandoned",
            local=local,
        )
    gens = req.generations if parent is None else min(req.generations, NESTED_GENERATIONS)
    res = cma_search(
        engine,
        family,
        space,
        sc,
        x0,
        gens,
        req.population,
        req.seed,
        on_generation=_generation_reporter(run, label, deadline),
        backend=req.search_backend,
        deadline=deadline,
        extra_starts=extra,
        parallel_runs=4 if parent is None else 2,
    )
    res.evaluations += n_local
    res.local = local
    if progress:
        progress(
            clock.fraction(1.0),
            f"{label}: refining by least squares"
            f"{' (budget reached)' if res.stopped_on == 'budget' else ''}, "
            f"elapsed {_secs(clock.elapsed())}",
        )
    short = res.stopped_on == "budget"  # out of time: a short refine of the best so far
    res = refine(
        engine,
        family,
        space,
        sc,
        res,
        max_iterations=min(req.refine_iterations, 20) if short else req.refine_iterations,
        starts=1 if short else 3,
    )
    clock.done += 1
    run.stopped_on_budget |= res.stopped_on == "budget"
    return res


def _start_points(
    warm: list[dict[str, float]],
    space: SearchSpace,
    parent: list[tuple[dict[str, float], dict[str, float]]] | None,
) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Per joint: the search's start (the parent's values, new terms at their warm start) and the extra points
    its first generation scans (the start; with a parent also its equivalent point)."""
    own = [{}] * len(warm) if parent is None else [p for _, p in parent]
    x0 = [np.array([p.get(n, w[n]) for n in space.names]) for w, p in zip(warm, own, strict=True)]
    extra = (
        [[x] for x in x0]
        if parent is None
        else [[np.array([p[n] for n in space.names]), x] for (p, _), x in zip(parent, x0, strict=True)]
    )
    return x0, extra


def _generation_reporter(run: _Run, label: str, deadline: float | None) -> Callable[[int, np.ndarray], None]:
    """The CMA-ES callback that reports a generation's progress (its share of the budget unit) and ETA."""
    req, clock, progress = run.req, run.clock, run.progress

    def on_gen(g: int, best: np.ndarray) -> None:
        if progress:
            unit = (g + 1) / req.generations
            if deadline is not None:  # a search begun with no time left is at its deadline at once
                span = deadline - clock.unit_start
                unit = 1.0 if span <= 0 else max(unit, (time.perf_counter() - clock.unit_start) / span)
            frac = clock.fraction(unit)
            progress(
                frac,
                f"{label}: generation {g + 1}/{req.generations}, best loss {float(np.max(best)):.4g}, "
                f"elapsed {_secs(clock.elapsed())}, ETA {_secs(clock.eta(frac))}",
            )

    return on_gen


@dataclass
class _FamilyFit:
    """One family's training fit: its search, fitted values per joint, the start it kept, and its metrics rows."""

    family: Family
    space: SearchSpace
    res: SearchResult
    fitted: list[dict[str, float]]
    tied: list[str]
    started: str
    tried: dict[str, float]
    seconds: float
    seg_rows: list[dict]
    fold_rows: list[list[dict]]  # per fold: validation rows of the fit without that fold
    # the start not kept when two were searched: its name, its search and its rows on every segment
    other: tuple[str, SearchResult, list[dict]] | None = None
    # per (joint, segment): |effort| the fitted law asks for on the logged states, driven samples (coverage.py)
    demand: dict[tuple[str, str], np.ndarray] | None = None


HELD_RATE = "held at the goal rate the log states (servo_goal.held_rate): not searched"


def _held(run: _Run, family: Family) -> list[str]:
    """The terms a fit holds at what the log states instead of searching: a servo's goal rate, where the log
    states one for every joint of the fit (else the term is searched)."""
    held = set(run.joints) <= set(run.held_rates)
    return [GOAL_RATE.name] if held and GOAL_RATE.name in family.params else []


def _several_rates(run: _Run, family: Family, joint: str) -> str | None:
    """A warning where a joint's runs state several goal rates and the family fits none: the kernel runs each
    run's own, no export can."""
    rates = stated_rates(run.rec, joint)
    if len(rates) < 2 or GOAL_RATE.name in family.params:
        return None
    return (
        f"{joint}: the runs state several goal rates ({', '.join(f'{r:.4g}' for r in sorted(rates))} rad/s); the "
        "fit ran each run's own, and no export carries a rate per run: fit the runs of each rate apart"
    )


def _tied_envelope(run: _Run, family: Family) -> list[str]:
    """A voltage servo's DC-motor envelope follows from its gains (the kernel ties it): those are not searched."""
    ops = run.ops
    if "dc_motor" not in family.clamps or not all(ops[j].servo is not None for j in run.joints):
        return []
    return [
        n
        for n in TIED_ENVELOPE
        if n in family.params
        and (
            n != "actuator_effort_limit" or all((ops[j].servo or {}).get("current_limit") for j in run.joints)
        )
    ]


def _fit_family(
    run: _Run,
    fam_name: str,
    fitted_by: dict[str, tuple[Family, list[dict[str, float]], float]],
    second_start: bool = True,
) -> _FamilyFit:
    """Search one family on the training set (from a nested parent when one was fitted), then on every fold.
    `second_start` False: a rich friction family searches from the nested start only (the ladder's climb)."""
    req, (engine, scales, x_warm) = run.req, run.train
    family = family_for(req, fam_name)
    tied = _tied_envelope(run, family)
    prior = kt_prior([run.ops[j] for j in run.joints]) if tied else None
    scales = dataclasses.replace(scales, prior=prior)
    space = SearchSpace.for_family(family, fixed=dict.fromkeys([*tied, *_held(run, family)], 0.0))
    parent = max(
        (v for v in fitted_by.values() if nests(v[0], family)),
        key=lambda v: (len(v[0].params), -v[2]),
        default=None,
    )
    starts = None if parent is None else _nested_starts(parent[0], family, parent[1])
    t_family = time.perf_counter()
    res = _search(run, engine, scales, x_warm, family, space, fam_name, starts)
    started = "warm start" if parent is None else parent[0].name
    tried = {started: float(np.sum(res.best_loss))}
    other: tuple[str, SearchResult] | None = None  # the start not kept, when there were two
    if second_start and parent is not None and _searched_twice(req, fam_name, run.parametric):
        # a rich friction family also searches from the warm start: the nested optimum can hold it in the
        # parent's basin. The lower TRAINING loss wins (validation never chooses); a warm start clearly worse
        # than the nested fit after a few least-squares iterations is abandoned there (its loss then is listed)
        alt = _search(
            run, engine, scales, x_warm, family, space, f"{fam_name} from the warm start", rival=res
        )
        tried["warm start"] = float(np.sum(alt.best_loss))
        if tried["warm start"] < tried[started]:
            other, res, started = (started, res), alt, "warm start"
        else:
            other = ("warm start", alt)
    t_family = time.perf_counter() - t_family
    fitted = _natural_values(run, family, space, tied, res, mark_bounds=True)
    fitted_by[fam_name] = (family, fitted, float(np.sum(res.best_loss)))
    kept = params_array(family, fitted)
    seg_rows = segment_metrics(run.full_engine.traces(family, kept), run.every)
    demand = (  # with recordings held out: the efforts each sample asks for, to compare the two sides
        demands(run.full_engine.traces(family, kept, open_loop=True), run.every)
        if run.split.validation
        else None
    )
    other_fit = (
        None  # the start not kept, replayed on every segment: its validation error beside the kept one's
    )
    if other is not None and run.split.validation:
        values = params_array(family, _natural_values(run, family, space, tied, other[1]))
        other_fit = (*other, segment_metrics(run.full_engine.traces(family, values), run.every))
    fold_rows: list[list[dict]] = []
    for k, (fold, (eng_k, sc_k, warm_k)) in enumerate(zip(run.split.folds, run.fold_setups, strict=True)):
        res_k = _search(
            run,
            eng_k,
            dataclasses.replace(sc_k, prior=prior),
            warm_k,
            family,
            space,
            f"{fam_name} fold {k + 1}/{len(run.split.folds)}",
        )
        fit_k = params_array(family, [_family_params(family, space, x) for x in res_k.best])
        names_k = {run.rec.segments[i].name for i in fold}
        fold_rows.append(
            [
                r
                for r in segment_metrics(run.full_engine.traces(family, fit_k), run.every)
                if r["segment"] in names_k
            ]
        )
    return _FamilyFit(
        family, space, res, fitted, tied, started, tried, t_family, seg_rows, fold_rows, other_fit, demand
    )


def _natural_values(
    run: _Run,
    family: Family,
    space: SearchSpace,
    tied: list[str],
    res: SearchResult,
    mark_bounds: bool = False,
) -> list[dict[str, float]]:
    """Per joint, a search's fitted values as the kernel ran them: a voltage servo's damping and envelope at
    the reference kp and vin (for reports and exports). `mark_bounds`: note a damping held at the winding
    resistance's bound in the search's analysis (the kept fit only)."""
    fitted = [_family_params(family, space, x) for x in res.best]
    for j, (name, p) in enumerate(zip(run.joints, fitted, strict=True)):
        for n in _held(run, family):
            p[n] = run.held_rates[name]
        if not tied:
            continue
        searched, p["damping"] = p["damping"], run.ops[name].tied_damping(p["stiffness"], p["damping"])
        if mark_bounds and p["damping"] != searched:
            _at_resistance_bound(res.analysis[j], run.ops[name], p["damping"], searched > p["damping"])
        elif mark_bounds:
            _kt_from_table(res.analysis[j], run.ops[name], p["stiffness"], p["damping"])
        p.update(
            {k: v for k, v in run.ops[name].tied_envelope(p["stiffness"], p["damping"]).items() if k in tied}
        )
    return fitted


def pooled(rows: list[dict]) -> SplitMetrics | None:
    """The sample-weighted errors of some per-segment rows (objective.pool_metrics); None without rows."""
    m = pool_metrics(rows)
    return None if m is None else SplitMetrics(**m)


def segment_rows(rows: list[dict], val_names: set[str]) -> tuple[SegmentMetrics, ...]:
    """Per-segment error rows of one joint (objective.segment_metrics) with the split each segment is in."""
    return tuple(
        SegmentMetrics(
            segment=r["segment"],
            samples=r["samples"],
            position_rmse=r["position_rmse"],
            position_mae=r["position_mae"],
            velocity_rmse=r["velocity_rmse"],
            split="validation" if r["segment"] in val_names else "train",
        )
        for r in rows
    )


def _joint_metrics(run: _Run, ff: _FamilyFit, name: str) -> Metrics:
    """Train / validation / per-segment metrics of one joint (and per fold, with cross-validation)."""
    split = run.split
    rows = [r for r in ff.seg_rows if r["joint"] == name]
    segments = segment_rows(rows, run.val_names)
    train = pooled([r for r, s in zip(rows, segments, strict=True) if s.split == "train"])
    validation = pooled([r for r, s in zip(rows, segments, strict=True) if s.split == "validation"])
    if not split.folds:
        return Metrics(train=train, validation=validation, segments=segments)
    per_fold = [pool_metrics([r for r in fr if r["joint"] == name]) for fr in ff.fold_rows]
    folds = [
        {
            "fold": k + 1,
            **({"name": split.fold_names[k]} if split.fold_names else {}),
            "validation_segments": [run.rec.segments[i].name for i in f],
            "validation": m,
        }
        for k, (f, m) in enumerate(zip(split.folds, per_fold, strict=True))
    ]
    return Metrics(
        train=train,
        validation=pooled([r for fr in ff.fold_rows for r in fr if r["joint"] == name]),
        segments=segments,
        folds=folds,
        folds_mean={
            k: float(np.mean([m[k] for m in per_fold if m is not None]))
            for k in ("position_rmse", "position_mae", "velocity_rmse")
        },
    )


def _model_entry(run: _Run, fam_name: str, ff: _FamilyFit, j: int, name: str) -> ModelFit:
    """The result's entry of one family on one joint: parameters, metrics, intervals and how the search went."""
    family, res, tied, op = ff.family, ff.res, ff.tied, run.ops[name]
    x_warm = run.train[2]
    # the search's per-joint analysis (fitting/uncertainty.py) is where the intervals are produced: read as is
    intervals = {k: Interval.from_json(v) for k, v in res.analysis[j]["intervals"].items()}
    starts_val = _starts_validation(run, ff, name)
    disagree = None
    if starts_val and ff.other is not None:  # per joint: the training loss each start's search ended at there
        losses = {ff.started: float(res.best_loss[j]), ff.other[0]: float(ff.other[1].best_loss[j])}
        disagree = start_disagreement(losses, starts_val, ff.started)
    beyond = (
        None
        if ff.demand is None
        else beyond_training({seg: a for (jn, seg), a in ff.demand.items() if jn == name}, run.val_names)
    )
    return ModelFit(
        family=fam_name,
        added_for=[m for m in run.parametric if get_family(m).fitted_with == fam_name]
        if fam_name in run.companions
        else None,
        isaaclab_cfg=family.isaaclab_cfg,
        joint_terms=list(family.joint_terms),
        params=ff.fitted[j],
        table_positions=run.every.knots[j].astype(float).tolist()
        if "position_table" in family.clamps
        else None,
        device_gains=device_gains(op, ff.fitted[j], intervals) if op.varies else None,
        tied={
            **{
                k: "voltage servo: from stiffness and damping (kt/R = K/(vin·duty), kt²/R = damping"
                f"{', current limit' if k == 'actuator_effort_limit' else ''})"
                for k in tied
            },
            **{k: HELD_RATE for k in _held(run, family)},
        }
        or None,
        voltage_servo=op.servo if tied else None,
        metrics=_joint_metrics(run, ff, name),
        loss=float(res.best_loss[j]),
        intervals=intervals,
        correlation=res.analysis[j]["correlation"],
        warnings=[
            *res.analysis[j]["warnings"],
            *(w for w in (disagree, beyond, _several_rates(run, family, name)) if w),
        ],
        n_params=len(ff.space.names),
        warm_start={n: float(x_warm[j][n]) for n in ff.space.names},
        search={
            "generations": res.generations,
            "evaluations": res.evaluations,
            "restarts": res.restarts[j],
            "stopped_on": res.stopped_on,
            "population": run.req.population,
            # the start, the least-squares solve from it, every generation, the final refine
            "convergence": [
                res.local["loss_before"][j],
                res.local["loss_after"][j],
                *res.history[j],
                float(res.best_loss[j]),
            ],
            "started_from": ff.started,
            "starts": ff.tried,  # training loss of each start's search
            **({"starts_validation": starts_val} if starts_val else {}),  # and its validation MAE [rad]
            "local_solve": {k: v[j] if isinstance(v, list) else v for k, v in res.local.items()},
            "seconds": round(ff.seconds, 3),
        },
    )


def _starts_validation(run: _Run, ff: _FamilyFit, name: str) -> dict[str, float | None] | None:
    """Validation position MAE of each start's optimum on one joint, when two were searched and the fit holds
    recordings out (fitting/starts.py); None otherwise."""
    if ff.other is None:
        return None
    out: dict[str, float | None] = {}
    for start, rows in ((ff.started, ff.seg_rows), (ff.other[0], ff.other[2])):
        m = pool_metrics([r for r in rows if r["joint"] == name and r["segment"] in run.val_names])
        out[start] = None if m is None else float(m["position_mae"])
    return out


def _rank_joint(models: dict[str, ModelFit], load: dict) -> JointFit:
    """One joint's fits with their ranking and best model (a family an exporter can write), and the best
    model's device-gain conversion at the joint level, for readers and the CLI."""
    ranking = _rank(models)
    # ranked by torque, the lowest torque error is best, a net included (its exports are the checkpoints and
    # Isaac Lab's ActuatorNet cfgs); ranked by position, a network is best only when nothing else was fitted
    torque = ranking[0].metric == TORQUE_METRIC
    best = next((r.family for r in ranking if torque or r.family in FAMILIES), ranking[0].family)
    return JointFit(
        models=models, load=load, ranking=ranking, best_model=best, device_gains=models[best].device_gains
    )


def _assemble(run: _Run, joints: dict[str, JointFit], t_start: float) -> FitResult:
    """The whole result: joints, split, budget, the assumptions the fit made, the request and dataset."""
    rec, req, split, ops = run.rec, run.req, run.split, run.ops
    names = lambda ids: [rec.segments[i].name for i in ids]  # noqa: E731
    return FitResult(
        joints=joints,
        split=SplitNames(
            method=split.method,
            train=names(split.train),
            validation=names(split.validation),
            holdout=req.holdout or None,
            folds=[names(f) for f in split.folds] or None,
            folds_by=req.folds_by if split.fold_names else None,
            fold_names=split.fold_names or None,
        ),
        budget=Budget(seconds=req.budget_s, stopped_on_budget=run.stopped_on_budget),
        assumptions=Assumptions(
            effort_mode=req.effort_mode,
            integrator="semi-implicit Euler with implicit joint damping and Coulomb friction as a "
            "stopping constraint (docs/consumer-semantics.md §F, matches Newton SolverMuJoCo)",
            physics_dt=float(np.median(run.every.seg_dt)),
            decimation=req.decimation,
            delay_unit="physics steps",
            loss="mean |position error| / std(q)"
            if req.loss == "position_mae"
            else "mean squared position error / var(q) + 0.25 · mean squared velocity error / var(qd)",
            training_windows_s=req.window_s,
            logged_gains=req.use_logged_gains,
            gain_units={name: op.units for name, op in ops.items()},
            operating_point={
                name: {"kp": op.kp_reference, "kd": op.kd_reference, "vin": op.vin_reference}
                for name, op in ops.items()
                if op.varies
            }
            or None,
        ),
        request=asdict(req),
        dataset=rec.summary(),
        elapsed_s=round(time.perf_counter() - t_start, 3),
    )


def fit_recording(rec: Recording, req: FitRequest, progress: ProgressFn | None = None) -> dict:
    """Fit every requested family to every requested joint; returns the API `result` object, the JSON of
    `fit_result` (what fit.json and the database hold):

    {"joints": {name: {"models": {family: {"params", "metrics": {"train", "validation", "segments"}, ...}},
                       "best_model": family, "ranking": [...]}}, "split": {...}, "assumptions": {...}, ...}
    """
    return fit_result(rec, req, progress).to_json()


def fit_result(rec: Recording, req: FitRequest, progress: ProgressFn | None = None) -> FitResult:
    """Fit every requested family to every requested joint; the typed result (fitting/result.py).

    In steps: validate the request, plan the run (fitting/plan.py's split, batches, family order), fit one
    family at a time (nested ones first), add the networks, rank, assemble.
    """
    rec = split_in_time(rec, req.validate_last)  # validate_last: every segment cut in time (fitting/plan.py)
    validate_request(rec, req)
    # a servo law that slews its goal at a rate the log does not give fits that rate, on every rung of a ladder too;
    # a rate the log states is held (_held), so that every export carries the slew the kernel runs
    slewed = any(
        fits_goal_rate(rec, n) or held_rate(rec, n) is not None for n in req.joints or rec.joint_names
    )
    if slewed and GOAL_RATE.name not in (req.add_terms or []):
        req = dataclasses.replace(req, add_terms=[*(req.add_terms or []), "goal_rate_limit"])
    if req.families is None:  # no family named: climb the default ladder, from this module's steps
        from .ladder import Engine, climb

        steps = Engine(_plan_run, _fit_family, _model_entry, _rank_joint, _assemble, fit_result, family_for)
        return climb(rec, req, progress, steps)
    t_start = time.perf_counter()
    run = _plan_run(rec, req, progress)
    fits: dict[str, dict[str, ModelFit]] = {j: {} for j in run.joints}  # joint → family → its fit
    fitted_by: dict[str, tuple[Family, list[dict[str, float]], float]] = {}  # family → (family, params, loss)
    for fam_name in sorted(run.parametric, key=lambda m: len(family_for(req, m).params)):  # nested ones first
        if is_mujoco_dcmotor(get_family(fam_name)):  # MuJoCo's own <dcmotor>: MuJoCo is the plant
            from .mujoco_dcmotor_fit import model_fits as dcmotor_fits  # MuJoCo imported where it is used

            split = run.split
            entries = dcmotor_fits(rec, req, run.joints, split.train, split.validation, fam_name)
            for name, entry in entries.items():
                fits[name][fam_name] = entry
            continue
        ff = _fit_family(run, fam_name, fitted_by)
        for j, name in enumerate(run.joints):
            fits[name][fam_name] = _model_entry(run, fam_name, ff, j, name)
    # nested families were fitted first; report them in the order asked
    fits = {name: {m: models[m] for m in run.parametric} for name, models in fits.items()}
    if any(m in NET_FAMILIES for m in req.families or []):
        from .training import add_networks

        # the nets train until the fit's budget is spent (the searches above left them their shares)
        deadline = None if req.budget_s is None else run.clock.start + req.budget_s
        run.stopped_on_budget |= add_networks(
            rec, req, run.joints, run.split.train, run.split.validation, fits, progress, deadline
        )
    joints = {name: _rank_joint(fits[name], asdict(rec.joints[rec.joint_index(name)])) for name in run.joints}
    if progress:
        progress(1.0, "done")
    return _assemble(run, joints, t_start)


LOCAL_BUDGET = 30  # residual evaluations of the first least-squares solve when the fit has a time budget
NESTED_GENERATIONS = 60  # CMA-ES generations of a family that starts from a nested family's optimum
# terms whose neutral values switch them off
_OFF_SWITCHES = F_PID | F_STRIBECK | F_LOAD_FRICTION | F_LOAD_QUADRATIC
# terms that reproduce the parent when they copy one of its values: a directional load friction whose external
# coefficients equal the shared ones, a torque table whose every knot is the effort limit
_COPIES = {
    "load_friction_external": "load_friction",
    "load_friction_external_stribeck": "load_friction_stribeck",
    **{f"lookup_effort_{k}": "actuator_effort_limit" for k in range(parameters.TABLE_KNOTS)},
}


TIED_ENVELOPE = ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit")
"""What a voltage servo's gains determine (models/rollout.py OperatingPoints.tied_envelope)."""


def _kt_from_table(analysis: dict, op: OperatingPoints, stiffness: float, damping: float) -> None:
    """Say where the servo table's kt, not the log alone, set the back-EMF damping: the data's own interval on
    the damping is over half the prior's spread, so the prior holds a fifth or more of what fixes it."""
    kt, per_k = (op.servo or {}).get("kt"), op.ktr_per_stiffness
    iv = analysis["intervals"].get("damping") or {}
    spread = iv.get("std_relative")
    if not kt or per_k is None:
        return
    if iv.get("identified") and spread is not None and spread < KT_SPREAD / 2:
        return
    ktr = stiffness * per_k
    analysis["warnings"].append(
        f"kt: the log does not tell the back-EMF damping from viscous friction (it barely reaches the current or "
        f"PWM limit), so the servo table's motor constant kt = {kt:g} N·m/A (a soft prior, ±{KT_SPREAD:.0%}) "
        f"set it: kt = {damping / ktr:.3g} N·m/A, R = {damping / ktr**2:.3g} Ω as fitted"
    )


def _at_resistance_bound(analysis: dict, op: OperatingPoints, damping: float, above: bool) -> None:
    """A voltage servo's damping held at a winding-resistance bound (`above`: the search wanted more): not
    identified, with the reason, and the value that ran as its estimate."""
    r_min, r_max = op.resistance_range
    why = (
        f"it sits at the voltage servo's winding-resistance bound R = {r_max if above else r_min:g} Ω (kt²/R, R "
        f"in {r_min:g}–{r_max:g} Ω): the log pushes the back-EMF damping {'above' if above else 'below'} the "
        "motor's range (it cannot tell it from viscous friction)"
    )
    iv = analysis["intervals"].get("damping") or {}
    analysis["intervals"]["damping"] = {
        **iv,
        "value": None,
        "estimate": damping,
        "std_relative": None,
        "interval95": None,
        "identified": False,
        "reason": why,
    }
    analysis["warnings"] = [w for w in analysis["warnings"] if not w.startswith("damping ")] + [
        f"damping is not identified: {why}"
    ]


def _key(v: float) -> str:
    """An operating-point value as a result key: 100.0 → "100", 7.4 → "7.4"."""
    return f"{v:g}"


def device_gains(op: OperatingPoints, params: dict[str, float], intervals: Mapping[str, Interval]) -> dict:
    """The fitted conversion from logged device gains (and supply voltage) to SI values, for one joint.

    The fitted stiffness is the SI value at the reference kp and vin, so gain_scale = stiffness / kp_ref
    [N·m/rad per device unit]; its 95 % interval is the stiffness interval over kp_ref. `stiffness_at` gives
    the SI stiffness at every logged kp (at vin_ref); damping likewise when the device logs kd. A logged vin
    scales the saturation effort and velocity limit (`saturation_effort_at`, `velocity_limit_at`)."""
    out: dict = {"units": op.units}

    def scaled(name: str, ref: float, values: dict[str, float | None]) -> dict:
        val = float(params[name])
        iv = intervals[name].interval95 if name in intervals else None
        return {
            "scale": val / ref,
            "scale_interval": None if iv is None else [iv[0] / ref, iv[1] / ref],
            "at": {_key(v): val * v / ref for v in sorted({v for v in values.values() if v is not None})},
        }

    if op.units == "device" and op.kp_reference and "stiffness" in params:
        g = scaled("stiffness", op.kp_reference, op.kp)
        out.update(
            kp_reference=op.kp_reference,
            gain_scale=g["scale"],
            gain_scale_interval=g["scale_interval"],
            stiffness_at=g["at"],
        )
    if op.units == "device" and op.kd_reference and "damping" in params:
        g = scaled("damping", op.kd_reference, op.kd)
        out.update(
            kd_reference=op.kd_reference,
            damping_scale=g["scale"],
            damping_scale_interval=g["scale_interval"],
            damping_at=g["at"],
        )
    if op.vin_reference:
        vins = sorted({v for v in op.vin.values() if v is not None})
        out["vin_reference"] = op.vin_reference
        for name, key in (
            ("saturation_effort", "saturation_effort_at"),
            ("actuator_velocity_limit", "velocity_limit_at"),
        ):
            if name in params and math.isfinite(params[name]):
                out[key] = {_key(v): float(params[name]) * v / op.vin_reference for v in vins}
    return out


def nested_start(parent: Family, child: Family, fitted: dict[str, float]) -> dict[str, float] | None:
    """The parent's fitted parameters as the point of the child's space where the child computes exactly what
    the parent did (new terms switched off or copying the parent's values), or None when it does not nest:
    delayed_pd ⊃ ideal_pd (delay 0), pid ⊃ delayed_pd (ki 0), remotized_pd ⊃ delayed_pd (every knot = the
    effort limit), the BAM friction families ⊃ dcmotor (no Stribeck peak, no load friction)."""
    clamps_ok = parent.clamps == child.clamps or (parent.clamps, child.clamps) == (
        ("max_effort",),
        ("position_table",),
    )
    drive_ok = parent.drive == child.drive or (parent.drive, child.drive) == ("pd", "pid")
    terms_ok = set(parent.joint_terms) <= set(child.joint_terms) and (
        ("dynamic_friction" in parent.joint_terms) == ("dynamic_friction" in child.joint_terms)
    )
    if not (clamps_ok and drive_ok and terms_ok and (child.delay or not parent.delay)):
        return None
    extra_flags = child.flags & ~parent.flags & ~(F_TABLE | F_LOAD_DIRECTIONAL)
    if extra_flags & ~_OFF_SWITCHES or len(child.params) <= len(parent.params):
        return None
    out = {}
    for n in child.params:
        if n in fitted:
            out[n] = fitted[n]
        elif n in _COPIES and _COPIES[n] in fitted:
            out[n] = fitted[_COPIES[n]]
        elif n in _COPIES and "load_friction" in _COPIES[n]:
            out[n] = parameters.get(n).neutral  # the parent has no load friction: none on either side
        elif n in _COPIES:
            return None  # a table without an effort limit to copy
        else:
            out[n] = parameters.get(n).neutral
    return out


def _nested_starts(
    parent: Family, child: Family, fitted: list[dict[str, float]]
) -> list[tuple[dict[str, float], dict[str, float]]]:
    """Per joint: the parent's optimum as the child's equivalent point, and the parent's own values."""
    out = []
    for p in fitted:
        start = nested_start(parent, child, p)
        assert start is not None, f"{child.name} does not nest {parent.name}"
        out.append((start, p))
    return out


def _searched_twice(req: FitRequest, name: str, fitted: list[str]) -> bool:
    """Whether a family searches from both the nested fit and the warm start: a rich friction family (BAM
    M2–M6 terms) that a family of the fit nests into. Measured on the XL330 logs, the nested start alone left
    `dcmotor_directional_load` at a higher training loss than a warm-start search (BENCHMARKS.md)."""
    family = family_for(req, name)
    return bool(family.rich_friction) and any(
        o != name and nests(family_for(req, o), family) for o in fitted if o in FAMILIES
    )


def nests(parent: Family, child: Family) -> bool:
    """Whether `child` reproduces `parent` at some point of its space (see nested_start)."""
    return nested_start(parent, child, {n: 1.0 for n in parent.params}) is not None


def family_for(req: FitRequest, name: str) -> Family:
    """The named family with the request's joint terms, if it asks for other ones (`joint_terms` instead of
    the family's own, then `add_terms` on top: an encoder offset for every family, as BAM fits one)."""
    family = get_family(name)
    if req.joint_terms is not None:
        family = family.with_terms(tuple(req.joint_terms))
    if req.add_terms:
        family = family.with_terms((*family.joint_terms, *req.add_terms))
    return family


def ranking_metric(models: Mapping[str, ModelFit]) -> str:
    """What a joint's families are ranked by: open-loop torque RMSE when a net learned from measured torque
    and every family has that error (the one metric all of them have), else closed-loop position RMSE."""
    if any(m.torque_supervised for m in models.values()) and all(
        m.torque_error("validation") is not None or m.torque_error("train") is not None
        for m in models.values()
    ):
        return TORQUE_METRIC
    return "position_rmse"


def _rank(models: Mapping[str, ModelFit]) -> tuple[RankRow, ...]:
    """Order families by their validation error (train when no validation) in the joint's ranking metric,
    times a parameter penalty. Ranked by torque on validation data, a network's weights are not penalised: its
    size is chosen, not fitted one by one, and the held-out samples guard it."""
    metric = ranking_metric(models)
    rows = []
    for fam, m in models.items():
        split = "validation" if m.metrics.validation is not None else "train"
        pooled = m.metrics.validation or m.metrics.train
        assert pooled is not None and pooled.position_rmse is not None and m.n_params is not None, fam
        torque = None
        if metric == TORQUE_METRIC:
            split = "validation" if m.torque_error("validation") is not None else "train"
            torque = m.torque_error(split)
        err = pooled.position_rmse if torque is None else torque
        penalised = 0 if metric == TORQUE_METRIC and split == "validation" and m.is_network else m.n_params
        score = err * (1 + MODEL_PENALTY * penalised) if math.isfinite(err) else math.inf
        rows.append(
            (
                score,
                RankRow(
                    family=fam,
                    score=score,
                    split=split,
                    position_rmse=pooled.position_rmse,
                    n_params=m.n_params,
                    metric=metric if metric == TORQUE_METRIC else None,
                    torque_rmse=torque,
                ),
            )
        )
    return tuple(row for _, row in sorted(rows, key=lambda r: r[0]))


def simulate(
    rec: Recording,
    joint: str,
    family: str,
    params: dict[str, float],
    device: str = "cpu",
    joint_terms: list[str] | None = None,
    decimation: int = 1,
    table_positions: list[float] | None = None,
    effort_mode: str = "explicit",
    logged_gains: bool = False,
) -> dict:
    """Roll one fitted model over every segment of one joint; per-segment traces as numpy arrays."""
    fam = get_family(family)
    if is_mujoco_dcmotor(fam):  # MuJoCo's own <dcmotor>: MuJoCo is the plant
        from .mujoco_dcmotor_fit import simulate_dcmotor

        return simulate_dcmotor(rec, joint, fam, params, decimation)
    if joint_terms is not None:
        fam = fam.with_terms(tuple(joint_terms))
    knots = None if table_positions is None else np.asarray([table_positions])
    batch = SegmentBatch.from_recording(
        rec, [joint], substeps=decimation, knots=knots, logged_gains=logged_gains
    )
    tr = RolloutEngine(batch, device, effort_mode=effort_mode).traces(fam, params_array(fam, [params]))
    return {
        batch.seg_names[s]: {k: tr[k][0, batch.segment_slice(s)] for k in ("q", "qd", "computed", "applied")}
        for s in range(batch.n_segments)
    }


def envelope(family: str, params: dict[str, float], v_max: float, n: int = 121) -> dict:
    """The family's effort window over joint velocity, for the torque–speed plot."""
    v = np.linspace(-v_max, v_max, n)
    lo, hi = effort_window(family, params, v)  # each clamp component's window (models/components/)
    fin = lambda a: [float(x) if np.isfinite(x) else None for x in a]  # noqa: E731
    return {"velocity": v.tolist(), "effort_max": fin(hi), "effort_min": fin(lo)}


def _network_traces(
    rec: Recording, result: FitResult, joint: str, exclude: str
) -> tuple[dict | None, str | None]:
    """Closed-loop traces of the joint's best-ranked actuator network, if any."""
    models = result.joints[joint].models
    nets = [k for k in models if k in NET_FAMILIES and k != exclude]
    if not nets:
        return None, None

    order = [r.family for r in result.joints[joint].ranking]
    best = min(nets, key=lambda k: order.index(k) if k in order else len(order))  # the best-ranked net
    from .training import simulate_net

    return simulate_net(rec, joint, models[best], decimation=result.assumptions.decimation), best


def report_data(rec: Recording, result: ResultLike, max_points: int = 1500) -> dict:
    """Simulated traces and envelope points for the report plots (downsampled, JSON-ready)."""
    result = as_result(result)
    rec = split_in_time(rec, (result.request or {}).get("validate_last"))  # the segments the fit saw
    val = set(result.split.validation)
    assumed = result.assumptions
    out: dict[str, dict] = {}
    for joint, jr in result.joints.items():
        fam = jr.best_model
        model = jr.models[fam]
        params = dict(model.params)
        if fam in NET_FAMILIES:  # only networks were fitted
            from .training import simulate_net

            sims = simulate_net(rec, joint, model, decimation=assumed.decimation)
        else:
            sims = simulate(
                rec,
                joint,
                fam,
                params,
                joint_terms=model.joint_terms,
                decimation=assumed.decimation,
                table_positions=model.table_positions,
                effort_mode=assumed.effort_mode,
                logged_gains=assumed.logged_gains,
            )
        j = rec.joint_index(joint)
        segs, pv, pe = [], [], []
        has_tau = all(s.tau is not None for s in rec.segments)
        net_sims, net = _network_traces(rec, result, joint, exclude=fam)
        for seg in rec.segments:
            sim = sims[seg.name]
            step = max(1, seg.n // max_points)
            sl = slice(None, None, step)
            beside = (
                {
                    "network": net,
                    "q_net": net_sims[seg.name]["q"][sl].tolist(),  # the best net, closed loop
                    "qd_net": net_sims[seg.name]["qd"][sl].tolist(),
                }
                if net_sims
                else {}
            )
            segs.append(
                {
                    **beside,
                    "name": seg.name,
                    "split": "validation" if seg.name in val else "train",
                    "t": seg.t[sl].tolist(),
                    "q": seg.q[sl, j].tolist(),
                    "q_sim": sim["q"][sl].tolist(),
                    "q_des": seg.q_des[sl, j].tolist(),
                    "qd": seg.qd[sl, j].tolist(),
                    "qd_sim": sim["qd"][sl].tolist(),
                    "tau_sim": sim["applied"][sl].tolist(),
                }
            )
            pv.append(seg.qd[sl, j])
            pe.append(seg.tau[sl, j] if has_tau and seg.tau is not None else sim["applied"][sl])
        v_all = np.concatenate(pv)
        out[joint] = {
            "family": fam,
            "segments": segs,
            "envelope": envelope(fam, params, max(1.2 * float(np.max(np.abs(v_all))), 1e-3)),
            "points": {
                "velocity": v_all.tolist(),
                "effort": np.concatenate(pe).tolist(),
                "source": "measured" if has_tau else "simulated",
            },
        }
    return {"joints": out}
