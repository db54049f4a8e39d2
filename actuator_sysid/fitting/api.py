"""Public entry points of fitting: plain functions on plain data, used by the CLI and the service worker."""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..datasets.recording import DatasetError, Recording, Segment
from ..models import parameters
from ..models.families import (
    EFFORT_MODES,
    F_LOAD_DIRECTIONAL,
    F_LOAD_FRICTION,
    F_LOAD_QUADRATIC,
    F_PID,
    F_STRIBECK,
    F_TABLE,
    FAMILIES,
    JOINT_TERMS,
    NET_FAMILIES,
    Family,
    effort_window,
    get_family,
)
from ..models.rollout import OperatingPoints, RolloutEngine, SegmentBatch, full_params, operating_points
from .objective import LOSSES, LossScales, pool_metrics, segment_metrics
from .search import BACKENDS, SearchResult, cma_search, local_search, refine
from .space import SearchSpace
from .warmstart import warm_start

ProgressFn = Callable[[float, str], None]
"""progress(fraction 0..1, message) — called often; must be cheap."""

MODEL_PENALTY = 0.01  # per extra parameter, relative, when ranking families by validation error


class FitRequestError(ValueError):
    """A fit request that cannot run on this dataset (unknown joint, unknown model family, bad budget)."""


@dataclass
class FitRequest:
    joints: list[str] | None = None  # None = every joint in the recording
    models: list[str] = field(default_factory=lambda: ["dcmotor"])  # family names, see models.families
    generations: int = 200
    population: int = 16  # per CMA-ES run; four runs search side by side
    seed: int = 0
    refine_iterations: int = 200
    device: str = "cpu"
    search_backend: str = "cmaes"  # or "optuna": the same CMA-ES through an Optuna study
    decimation: int = 1  # physics steps per log sample; commands held, delay counted in physics steps
    joint_terms: list[str] | None = None  # None: each family's default (armature, friction, viscous_friction)
    effort_mode: str = "explicit"  # or "implicit": Newton's implicit effort mode, for stiff gains
    window_s: float | None = 1.0  # training rollouts restart from the log every window_s seconds (None: never)
    use_logged_gains: bool = False  # segments' recorded kp/kd (metadata, SI) replace the fitted gains there
    holdout: str | None = None  # "KEY=VALUE": recordings of segments whose metadata KEY equals VALUE validate
    folds: int | None = None  # k-fold cross-validation over whole recordings; final fit on every segment
    folds_by: str | None = None  # metadata KEY: leave-one-value-out folds (e.g. "kp"); final fit on every segment
    budget_s: float | None = None  # wall-clock budget for the whole fit: search stops, keeps its best, refines
    networks: dict | None = None  # options of the mlp/lstm families (fitting.nets.NetOptions), None: defaults
    loss: str = "mse"  # or "position_mae": mean |position error|, BAM's objective (fitting/objective.py LOSSES)


def validate_request(rec: Recording, req: FitRequest) -> None:
    """Raise FitRequestError naming the problem, before anything is queued or stored."""
    max_joints, max_folds = 64, 100  # every field that sizes work is bounded (issue 15)
    if req.joints is not None and len(req.joints) > max_joints:
        raise FitRequestError(f"joints names {len(req.joints)} joints; the limit is {max_joints} per fit")
    for what, names in (("joints", req.joints or []), ("models", req.models or []),
                        ("joint_terms", req.joint_terms or [])):
        seen: set[str] = set()
        twice: set[str] = set()
        for n in names:
            (twice if n in seen else seen).add(n)
        if twice:
            raise FitRequestError(f"{what} lists {', '.join(map(repr, sorted(twice)))} more than once; "
                                  "name each once")
    if req.folds is not None and req.folds > max_folds:  # the lower bound and the recordings: plan_split
        raise FitRequestError(f"folds must be between 2 and {max_folds}, got {req.folds}")
    for name in req.joints or []:
        if name not in rec.joint_names:
            raise FitRequestError(f"unknown joint {name!r}: the dataset has joints {rec.joint_names}")
    if req.joints is not None and not req.joints:
        raise FitRequestError("joints is empty: name at least one joint or omit the field")
    if not req.models:
        raise FitRequestError(f"models is empty: choose from {sorted(FAMILIES)}")
    for m in req.models:
        if m not in FAMILIES and m not in NET_FAMILIES:
            raise FitRequestError(f"unknown model family {m!r}: choose from {sorted(FAMILIES) + list(NET_FAMILIES)}")
    if any(m in NET_FAMILIES for m in req.models) or req.networks:  # network options are bounded even unused
        from .nets import check_request

        check_request(rec, req)
    if not 1 <= req.generations <= 10_000:
        raise FitRequestError(f"budget.generations must be between 1 and 10000, got {req.generations}")
    if not 4 <= req.population <= 4096:
        raise FitRequestError(f"budget.population must be between 4 and 4096, got {req.population}")
    if not 1 <= req.decimation <= 64:
        raise FitRequestError(f"decimation must be between 1 and 64 physics steps per sample, got {req.decimation}")
    for term in req.joint_terms or []:
        if term not in JOINT_TERMS:
            raise FitRequestError(f"unknown joint term {term!r}: choose from {list(JOINT_TERMS)}")
    if req.window_s is not None and not 0.01 <= req.window_s <= 86_400:
        raise FitRequestError(f"window_s must be between 0.01 and 86400 seconds or null, got {req.window_s}")
    if req.effort_mode not in EFFORT_MODES:
        raise FitRequestError(f"unknown effort mode {req.effort_mode!r}: choose from {list(EFFORT_MODES)}")
    if req.loss not in LOSSES:
        raise FitRequestError(f"unknown loss {req.loss!r}: choose from {list(LOSSES)}")
    if req.search_backend not in BACKENDS:
        raise FitRequestError(f"unknown search backend {req.search_backend!r}: choose from {list(BACKENDS)}")
    if req.budget_s is not None and not 0 < req.budget_s <= 86_400:
        raise FitRequestError(f"budget.seconds must be between 0 and 86400 (one day), got {req.budget_s}")
    if not rec.segments:
        raise FitRequestError("the dataset has no segments")
    plan_split(rec, req)  # raises FitRequestError for a holdout or folds the segments cannot satisfy
    missing = [s.name for s in rec.segments if s.q_des is None]
    if missing:
        raise FitRequestError(f"segments {missing} have no q_des: closed-loop fits need the commanded position")


def _evenly(m: int, k: int) -> list[int]:
    """k of m positions, evenly spaced and away from both ends (0 … m-1)."""
    return sorted({int(round(x)) for x in np.linspace(0, m - 1, k + 2)[1:-1]})


def split_segments(n: int, validation_fraction: float = 0.2) -> tuple[list[int], list[int]]:
    """Hold out evenly spaced whole segments for validation; a single segment is train only."""
    if n < 2:
        return list(range(n)), []
    val = _evenly(n, max(1, int(round(validation_fraction * n))))
    return [i for i in range(n) if i not in val], val


@dataclass
class Split:
    """Which segments train and which validate; cross-validation adds each fold's validation segments."""

    method: str
    train: list[int]
    validation: list[int]
    folds: list[list[int]] = field(default_factory=list)
    fold_names: list[str] = field(default_factory=list)  # leave-one-value-out: "kp=100", … per fold


def _matches(value: object, wanted: str) -> bool:
    """A metadata value equals the text of a holdout: as text, or as numbers (kp=20 matches 20.0)."""
    if str(value) == wanted or (isinstance(value, bool) and str(value).lower() == wanted.lower()):
        return True
    try:
        return float(value) == float(wanted)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def recordings(rec: Recording) -> list[list[int]]:
    """Segment indices per recording (one run: a file, or a table's declared segment), in order of appearance.

    A segment's recording is its metadata ``recording`` (readers set it on the pieces of a run split at time
    gaps), else its own name; BAM datasets read before a file was one segment (no per-sample enable) named a
    file's torque-on and torque-off stretches ``<file>.<k>`` with the same ``bam`` fields: those stay together.
    """
    names = [str(s.metadata["recording"]) if "recording" in s.metadata else s.name for s in rec.segments]
    stems = [re.fullmatch(r"(.+)\.\d+", s.name) if "recording" not in s.metadata and s.enable is None
             and isinstance(s.metadata.get("bam"), dict) else None for s in rec.segments]
    for i, m in enumerate(stems):
        if m and sum(1 for j, o in enumerate(stems) if o and o.group(1) == m.group(1)
                     and rec.segments[j].metadata["bam"] == rec.segments[i].metadata["bam"]) > 1:
            names[i] = m.group(1)
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name, []).append(i)
    return list(groups.values())


def _free_swing(seg: Segment) -> bool:
    """Whether the actuator is off anywhere in the segment (metadata free_swing, or a torque-off stretch)."""
    return bool(seg.metadata.get("free_swing")) or (seg.enable is not None and not bool(np.all(seg.enable)))


def _leaves(meta: dict, prefix: str = "") -> dict[str, object]:
    """Every non-object value of nested metadata by its dotted path ({"bam": {"kp": 100}} → "bam.kp")."""
    out: dict[str, object] = {}
    for k, v in meta.items():
        if isinstance(v, dict):
            out.update(_leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _metadata_key(rec: Recording, key: str, what: str) -> tuple[str, list[dict[str, object]]]:
    """The dotted path a user's key names (top level, dotted, or a unique nested name) and each segment's values."""
    leaves = [_leaves(s.metadata) for s in rec.segments]
    paths = sorted({p for lv in leaves for p in lv})
    if key in paths:
        return key, leaves
    nested = [p for p in paths if p.endswith("." + key)]
    if len(nested) == 1:
        return nested[0], leaves
    if nested:
        raise FitRequestError(f"{what}: metadata key {key!r} is ambiguous, it is {' and '.join(nested)}; "
                              "write the one you mean")
    raise FitRequestError(f"{what}: no segment has metadata key {key!r}; the keys you can write are {paths}")


def _value_id(value: object) -> object:
    """Values that _matches the same text are one value: 20 and 20.0 are both 20.0."""
    if not isinstance(value, bool):
        try:
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass
    return str(value)


def _value_text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _whole(groups: list[list[int]], ids: set[int]) -> list[int]:
    """Every segment of the recordings that hold any of `ids`."""
    return sorted(i for g in groups if ids.intersection(g) for i in g)


def _leave_one_value_out(rec: Recording, key: str, groups: list[list[int]]) -> Split:
    """One fold per value of a metadata key: its recordings validate, the rest train (folds_by)."""
    what = f"folds_by {key!r}"
    if not key:
        raise FitRequestError("folds_by must name a metadata key, e.g. kp")
    path, leaves = _metadata_key(rec, key, what)
    values: dict[object, object] = {}
    for lv in leaves:
        if path in lv:
            values.setdefault(_value_id(lv[path]), lv[path])
    order = sorted(values, key=lambda v: (isinstance(v, str), v))  # numbers ascending, then text
    if len(order) < 2:
        who = "every segment has" if all(path in lv for lv in leaves) else "every segment with it has"
        raise FitRequestError(f"{what}: {who} {path} = {_value_text(values[order[0]])}; "
                              "leave-one-value-out needs two values or more")
    folds = []
    for v in order:
        folds.append(_whole(groups, {i for i, lv in enumerate(leaves) if path in lv and _value_id(lv[path]) == v}))
    owner: dict[int, int] = {}
    for k, fold in enumerate(folds):
        for i in fold:
            if i in owner:
                other = [rec.segments[j].name for j in next(g for g in groups if i in g)]
                raise FitRequestError(f"{what}: the recording of segments {other} has {path} = "
                                      f"{_value_text(values[order[owner[i]]])} and {_value_text(values[order[k]])}; "
                                      "a recording must stay in one fold")
            owner[i] = k
    names = [f"{path}={_value_text(values[v])}" for v in order]
    n = len(rec.segments)
    return Split(f"leave one {path} out ({', '.join(names)}), whole recordings; final parameters from a fit on "
                 "every segment", list(range(n)), [], folds, names)


def plan_split(rec: Recording, req: FitRequest) -> Split:
    """The request's split, always of whole recordings: by metadata value (holdout), one fold per value (folds_by),
    k-fold (folds), or evenly spaced recordings with those that swing freely kept in training."""
    n = len(rec.segments)
    given = [k for k in ("holdout", "folds", "folds_by") if getattr(req, k) is not None]
    if len(given) > 1:
        raise FitRequestError(f"{' and '.join(given)} exclude each other: give one of them")
    groups = recordings(rec)
    r = len(groups)
    if req.folds is not None:
        if not 2 <= req.folds <= r:
            raise FitRequestError(f"folds must be between 2 and the number of recordings ({r}), got {req.folds}")
        folds = [sorted(i for g in groups[f::req.folds] for i in g) for f in range(req.folds)]
        return Split(f"{req.folds}-fold over whole recordings; final parameters from a fit on every segment",
                     list(range(n)), [], folds)
    if req.folds_by is not None:
        return _leave_one_value_out(rec, req.folds_by.strip(), groups)
    if req.holdout is not None:
        key, sep, value = req.holdout.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise FitRequestError(f"holdout must be KEY=VALUE (e.g. kp=20), got {req.holdout!r}")
        path, leaves = _metadata_key(rec, key, f"holdout {req.holdout!r}")
        hit = {i for i, lv in enumerate(leaves) if path in lv and _matches(lv[path], value)}
        seen = sorted({str(lv[path]) for lv in leaves if path in lv})
        if not hit:
            raise FitRequestError(f"holdout {req.holdout!r}: no segment has {path} = {value}; its values are {seen}")
        val = _whole(groups, hit)
        if len(val) == n:
            who = "every segment has" if len(hit) == n else "the recordings of the segments with"
            raise FitRequestError(f"holdout {req.holdout!r}: {who} {path} = {value}, none is left to train on; "
                                  f"hold out another value of {seen}")
        more = f" (and the {len(val) - len(hit)} other segments of their recordings)" if len(val) > len(hit) else ""
        return Split(f"recordings whose {path} = {value} held out{more}", [i for i in range(n) if i not in val], val)
    if r < 2:
        return Split("one recording: every segment trains, none validates", list(range(n)), [])
    free = [g for g in range(r) if any(_free_swing(rec.segments[i]) for i in groups[g])]
    candidates = [g for g in range(r) if g not in free] or free[1:]  # all swing freely: the first keeps training
    picked = [candidates[j] for j in _evenly(len(candidates), min(max(1, int(round(0.2 * r))), len(candidates)))]
    val = sorted(i for g in picked for i in groups[g])
    why = "; recordings with free swing train" if free else ""
    return Split(f"whole recordings, evenly spaced{why}", [i for i in range(n) if i not in val], val)


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


def fit_recording(rec: Recording, req: FitRequest, progress: ProgressFn | None = None) -> dict:
    """Fit every requested family to every requested joint; returns the API `result` object.

    {"joints": {name: {"models": {family: {"params", "metrics": {"train", "validation", "segments"}, ...}},
                       "best_model": family, "ranking": [...]}}, "split": {...}, "assumptions": {...}, ...}
    """
    validate_request(rec, req)
    t_start = time.perf_counter()
    joints = req.joints or rec.joint_names
    try:  # gain units, logged kp / kd / vin and their references, per joint (models/rollout.py)
        ops = {name: operating_points(rec, name) for name in joints}
    except DatasetError as e:
        raise FitRequestError(str(e)) from None
    split = plan_split(rec, req)
    train_ids, val_ids = split.train, split.validation
    every = SegmentBatch.from_recording(rec, joints, substeps=req.decimation, logged_gains=req.use_logged_gains)
    window = None if not req.window_s else max(10, int(round(req.window_s / np.median([s.dt for s in rec.segments]))))

    def setup(ids: list[int]) -> tuple[RolloutEngine, LossScales, list[dict[str, float]]]:
        """Engine, loss scales and warm starts of the training segments `ids`."""
        batch = SegmentBatch.from_recording(rec, joints, ids, substeps=req.decimation, knots=every.knots,
                                            window=window, logged_gains=req.use_logged_gains)
        scales = dataclasses.replace(LossScales.from_batch(batch), position_mae=req.loss == "position_mae")
        return (RolloutEngine(batch, req.device, effort_mode=req.effort_mode), scales,
                [warm_start(batch, j) for j in range(len(joints))])

    train_engine, scales, x_warm = setup(train_ids)
    full_engine = RolloutEngine(every, req.device, effort_mode=req.effort_mode)
    fold_setups = [setup([i for i in range(len(rec.segments)) if i not in f]) for f in split.folds]
    val_names = {rec.segments[i].name for i in val_ids}
    # a family some consumer cannot hold brings the nearest one it can (Family.fitted_with): a richer-friction
    # family the consumer-native one it extends, remotized_pd delayed_pd for MuJoCo. Every export then has a fit
    # its consumer runs exactly, the report says what the richer one buys, and that one starts from it (nested)
    parametric = [m for m in req.models if m not in NET_FAMILIES]  # networks: fitting/nets.py below
    companions = [n for n in dict.fromkeys(get_family(m).fitted_with for m in parametric)
                  if n and n not in parametric]
    parametric += companions
    second = sum(1 for m in parametric if _searched_twice(req, m, parametric))  # a second start each
    clock = _Clock(req.budget_s, (len(req.models) + len(companions)) * (1 + len(split.folds)) + second)

    def search(engine: RolloutEngine, sc: LossScales, warm: list[dict[str, float]], family: Family,
               space: SearchSpace, label: str, parent: list[tuple[dict[str, float], dict[str, float]]] | None = None
               ) -> SearchResult:
        """CMA-ES then least squares on one training set, reporting progress; one budget unit.

        With `parent` (per joint: a nested family's optimum as the child's equivalent point, and the parent's
        own fitted values) the search starts from the parent's values with the new terms at their warm start,
        and has the equivalent point in its scan; it then needs a fraction of the generations and runs a
        family searched from scratch does."""
        own = [{}] * len(warm) if parent is None else [p for _, p in parent]
        x0 = [np.array([p.get(n, w[n]) for n in space.names]) for w, p in zip(warm, own, strict=True)]
        extra = [[x] for x in x0] if parent is None else \
            [[np.array([p[n] for n in space.names]), x] for (p, _), x in zip(parent, x0, strict=True)]
        deadline = clock.begin()
        # least squares from the start first: the search then starts from its optimum (search.local_search)
        if progress:
            progress(clock.fraction(0.0), f"{label}: least squares from the "
                                          f"{'warm start' if parent is None else 'nested fit'}, "
                                          f"elapsed {_secs(clock.elapsed())}")
        t_local = time.perf_counter()
        x0, before, after, n_local = local_search(engine, family, space, sc, x0,
                                                  req.refine_iterations if deadline is None else LOCAL_BUDGET)
        local = {"loss_before": before.tolist(), "loss_after": after.tolist(), "evaluations": n_local,
                 "seconds": round(time.perf_counter() - t_local, 3)}

        def on_gen(g: int, best: np.ndarray) -> None:
            if progress:
                unit = (g + 1) / req.generations
                if deadline is not None:
                    unit = max(unit, (time.perf_counter() - clock.unit_start) / (deadline - clock.unit_start))
                frac = clock.fraction(unit)
                progress(frac, f"{label}: generation {g + 1}/{req.generations}, best loss {float(np.max(best)):.4g}, "
                               f"elapsed {_secs(clock.elapsed())}, ETA {_secs(clock.eta(frac))}")

        gens = req.generations if parent is None else min(req.generations, NESTED_GENERATIONS)
        res = cma_search(engine, family, space, sc, x0, gens, req.population, req.seed, on_generation=on_gen,
                         backend=req.search_backend, deadline=deadline, extra_starts=extra,
                         parallel_runs=4 if parent is None else 2)
        res.evaluations += n_local
        res.local = local
        if progress:
            progress(clock.fraction(1.0), f"{label}: refining by least squares"
                                           f"{' (budget reached)' if res.stopped_on == 'budget' else ''}, "
                                           f"elapsed {_secs(clock.elapsed())}")
        short = res.stopped_on == "budget"  # out of time: a short refine of the best so far
        res = refine(engine, family, space, sc, res, max_iterations=min(req.refine_iterations, 20) if short
                     else req.refine_iterations, starts=1 if short else 3)
        clock.done += 1
        return res

    per_joint: dict[str, dict] = {j: {"models": {}, "load": asdict(rec.joints[rec.joint_index(j)])} for j in joints}
    stopped_on_budget = False
    fitted_by: dict[str, tuple[Family, list[dict[str, float]], float]] = {}  # family → (family, params, loss)
    for fam_name in sorted(parametric, key=lambda m: len(family_for(req, m).params)):  # nested ones first
        family = family_for(req, fam_name)
        # a voltage servo's DC-motor envelope follows from its gains (the kernel ties it): not searched
        tied = [n for n in TIED_ENVELOPE if n in family.params and (n != "actuator_effort_limit" or all(
            (ops[j].servo or {}).get("current_limit") for j in joints))] if "dc_motor" in family.clamps and all(
            ops[j].servo is not None for j in joints) else []
        space = SearchSpace.for_family(family, fixed=dict.fromkeys(tied, 0.0))
        parent = max((v for v in fitted_by.values() if nests(v[0], family)),
                     key=lambda v: (len(v[0].params), -v[2]), default=None)
        starts = None if parent is None else _nested_starts(parent[0], family, parent[1])
        t_family = time.perf_counter()
        res = search(train_engine, scales, x_warm, family, space, fam_name, starts)
        started = "warm start" if parent is None else parent[0].name
        tried = {started: float(np.sum(res.best_loss))}
        if parent is not None and _searched_twice(req, fam_name, parametric):
            # a rich friction family also searches from the warm start: the nested optimum can hold it in the
            # parent's basin. The lower TRAINING loss wins (validation never chooses)
            stopped_on_budget |= res.stopped_on == "budget"
            alt = search(train_engine, scales, x_warm, family, space, f"{fam_name} from the warm start")
            tried["warm start"] = float(np.sum(alt.best_loss))
            if tried["warm start"] < tried[started]:
                res, started = alt, "warm start"
        t_family = time.perf_counter() - t_family
        stopped_on_budget |= res.stopped_on == "budget"

        fitted = [_family_params(family, space, x) for x in res.best]
        for j, (name, p) in enumerate(zip(joints, fitted, strict=True)):
            if tied:  # the damping and envelope the kernel ran, at the reference kp and vin, for reports and exports
                searched, p["damping"] = p["damping"], ops[name].tied_damping(p["stiffness"], p["damping"])
                if p["damping"] != searched:
                    _at_resistance_bound(res.analysis[j], ops[name], p["damping"], searched > p["damping"])
                p.update({k: v for k, v in ops[name].tied_envelope(p["stiffness"], p["damping"]).items()
                          if k in tied})
        fitted_by[fam_name] = (family, fitted, float(np.sum(res.best_loss)))
        p_arr = params_array(family, fitted)
        traces = full_engine.traces(family, p_arr)
        seg_rows = segment_metrics(traces, every)
        fold_rows: list[list[dict]] = []  # per fold: validation rows of the fit without that fold
        for k, (fold, (eng_k, sc_k, warm_k)) in enumerate(zip(split.folds, fold_setups, strict=True)):
            res_k = search(eng_k, sc_k, warm_k, family, space, f"{fam_name} fold {k + 1}/{len(split.folds)}")
            stopped_on_budget |= res_k.stopped_on == "budget"
            fit_k = params_array(family, [_family_params(family, space, x) for x in res_k.best])
            names_k = {rec.segments[i].name for i in fold}
            fold_rows.append([r for r in segment_metrics(full_engine.traces(family, fit_k), every)
                              if r["segment"] in names_k])
        for j, name in enumerate(joints):
            rows = [dict(r, split="validation" if r["segment"] in val_names else "train")
                    for r in seg_rows if r["joint"] == name]
            for r in rows:
                del r["joint"]
            metrics = {
                "train": pool_metrics([r for r in rows if r["split"] == "train"]),
                "validation": pool_metrics([r for r in rows if r["split"] == "validation"]),
                "segments": rows,
            }
            if split.folds:
                per_fold = [pool_metrics([r for r in fr if r["joint"] == name]) for fr in fold_rows]
                metrics["validation"] = pool_metrics([r for fr in fold_rows for r in fr if r["joint"] == name])
                metrics["folds"] = [{"fold": k + 1, **({"name": split.fold_names[k]} if split.fold_names else {}),
                                     "validation_segments": [rec.segments[i].name for i in f],
                                     "validation": m} for k, (f, m) in enumerate(zip(split.folds, per_fold,
                                                                                     strict=True))]
                metrics["folds_mean"] = {k: float(np.mean([m[k] for m in per_fold if m is not None]))
                                         for k in ("position_rmse", "position_mae", "velocity_rmse")}
            per_joint[name]["models"][fam_name] = {
                "family": fam_name,
                **({"added_for": [m for m in parametric if get_family(m).fitted_with == fam_name]}
                   if fam_name in companions else {}),
                "isaaclab_cfg": family.isaaclab_cfg,
                "joint_terms": list(family.joint_terms),
                "params": fitted[j],
                **({"table_positions": every.knots[j].astype(float).tolist()} if "position_table" in family.clamps
                   else {}),
                **({"device_gains": device_gains(ops[name], fitted[j], res.analysis[j]["intervals"])}
                   if ops[name].varies else {}),
                **({"tied": {k: "voltage servo: from stiffness and damping (kt/R = K/(vin·duty), kt²/R = damping"
                                f"{', current limit' if k == 'actuator_effort_limit' else ''})" for k in tied},
                    "voltage_servo": ops[name].servo} if tied else {}),
                "metrics": metrics,
                "loss": float(res.best_loss[j]),
                "intervals": res.analysis[j]["intervals"],
                "correlation": res.analysis[j]["correlation"],
                "warnings": res.analysis[j]["warnings"],
                "n_params": len(space.names),
                "warm_start": {n: float(x_warm[j][n]) for n in space.names},
                "search": {"generations": res.generations, "evaluations": res.evaluations,
                           "restarts": res.restarts[j], "stopped_on": res.stopped_on,
                           "population": req.population,
                           # the start, the least-squares solve from it, every generation, the final refine
                           "convergence": [res.local["loss_before"][j], res.local["loss_after"][j], *res.history[j],
                                           float(res.best_loss[j])],
                           "started_from": started, "starts": tried,  # training loss of each start's search
                           "local_solve": {k: v[j] if isinstance(v, list) else v for k, v in res.local.items()},
                           "seconds": round(t_family, 3)},
            }
    for name in joints:  # nested families were fitted first; report them in the order asked
        models = per_joint[name]["models"]
        per_joint[name]["models"] = {m: models[m] for m in parametric}
    if any(m in NET_FAMILIES for m in req.models):
        from .nets import add_networks

        # the nets train until the fit's budget is spent (the searches above left them their shares)
        deadline = None if req.budget_s is None else clock.start + req.budget_s
        stopped_on_budget |= add_networks(rec, req, joints, train_ids, val_ids, per_joint, progress, deadline)
    for name in joints:
        per_joint[name]["ranking"] = _rank(per_joint[name]["models"])
        # exporters need a family they can write: a network is best only when nothing else was fitted
        per_joint[name]["best_model"] = next((r["family"] for r in per_joint[name]["ranking"]
                                              if r["family"] in FAMILIES), per_joint[name]["ranking"][0]["family"])
        best_gains = per_joint[name]["models"][per_joint[name]["best_model"]].get("device_gains")
        if best_gains is not None:  # the best model's conversion, at the joint level for readers and the CLI
            per_joint[name]["device_gains"] = best_gains
    if progress:
        progress(1.0, "done")
    return {
        "joints": per_joint,
        "split": {"method": split.method, "train": [rec.segments[i].name for i in train_ids],
                  "validation": [rec.segments[i].name for i in val_ids],
                  **({"holdout": req.holdout} if req.holdout else {}),
                  **({"folds": [[rec.segments[i].name for i in f] for f in split.folds]} if split.folds else {}),
                  **({"folds_by": req.folds_by, "fold_names": split.fold_names} if split.fold_names else {})},
        "budget": {"seconds": req.budget_s, "stopped_on_budget": stopped_on_budget},
        "assumptions": {
            "effort_mode": req.effort_mode,
            "integrator": "semi-implicit Euler with implicit joint damping and Coulomb friction as a "
                          "stopping constraint (docs/consumer-semantics.md §F, matches Newton SolverMuJoCo)",
            "physics_dt": float(np.median(every.seg_dt)),
            "decimation": req.decimation,
            "delay_unit": "physics steps",
            "loss": "mean |position error| / std(q)" if req.loss == "position_mae" else
                    "mean squared position error / var(q) + 0.25 · mean squared velocity error / var(qd)",
            "training_windows_s": req.window_s,
            "logged_gains": req.use_logged_gains,
            "gain_units": {name: op.units for name, op in ops.items()},
            **({"operating_point": {name: {"kp": op.kp_reference, "kd": op.kd_reference, "vin": op.vin_reference}
                                    for name, op in ops.items() if op.varies}}
               if any(op.varies for op in ops.values()) else {}),
        },
        "request": asdict(req),
        "dataset": rec.summary(),
        "elapsed_s": round(time.perf_counter() - t_start, 3),
    }


LOCAL_BUDGET = 30  # residual evaluations of the first least-squares solve when the fit has a time budget
NESTED_GENERATIONS = 60  # CMA-ES generations of a family that starts from a nested family's optimum
# terms whose neutral values switch them off
_OFF_SWITCHES = F_PID | F_STRIBECK | F_LOAD_FRICTION | F_LOAD_QUADRATIC
# terms that reproduce the parent when they copy one of its values: a directional load friction whose external
# coefficients equal the shared ones, a torque table whose every knot is the effort limit
_COPIES = {"load_friction_external": "load_friction", "load_friction_external_stribeck": "load_friction_stribeck",
           **{f"lookup_effort_{k}": "actuator_effort_limit" for k in range(parameters.TABLE_KNOTS)}}


TIED_ENVELOPE = ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit")
"""What a voltage servo's gains determine (models/rollout.py OperatingPoints.tied_envelope)."""


def _at_resistance_bound(analysis: dict, op: OperatingPoints, damping: float, above: bool) -> None:
    """A voltage servo's damping held at a winding-resistance bound (`above`: the search wanted more): not
    identified, with the reason, and the value that ran as its estimate."""
    r_min, r_max = op.resistance_range
    why = (f"it sits at the voltage servo's winding-resistance bound R = {r_max if above else r_min:g} Ω (kt²/R, R "
           f"in {r_min:g}–{r_max:g} Ω): the log pushes the back-EMF damping {'above' if above else 'below'} the "
           "motor's range (it cannot tell it from viscous friction)")
    iv = analysis["intervals"].get("damping") or {}
    analysis["intervals"]["damping"] = {**iv, "value": None, "estimate": damping, "std_relative": None,
                                        "interval95": None, "identified": False, "reason": why}
    analysis["warnings"] = [w for w in analysis["warnings"] if not w.startswith("damping ")] + [
        f"damping is not identified: {why}"]


def _key(v: float) -> str:
    """An operating-point value as a result key: 100.0 → "100", 7.4 → "7.4"."""
    return f"{v:g}"


def device_gains(op: OperatingPoints, params: dict[str, float], intervals: dict[str, dict]) -> dict:
    """The fitted conversion from logged device gains (and supply voltage) to SI values, for one joint.

    The fitted stiffness is the SI value at the reference kp and vin, so gain_scale = stiffness / kp_ref
    [N·m/rad per device unit]; its 95 % interval is the stiffness interval over kp_ref. `stiffness_at` gives
    the SI stiffness at every logged kp (at vin_ref); damping likewise when the device logs kd. A logged vin
    scales the saturation effort and velocity limit (`saturation_effort_at`, `velocity_limit_at`)."""
    out: dict = {"units": op.units}

    def scaled(name: str, ref: float, values: dict[str, float | None]) -> dict:
        val = float(params[name])
        iv = (intervals.get(name) or {}).get("interval95")
        return {"scale": val / ref, "scale_interval": None if iv is None else [iv[0] / ref, iv[1] / ref],
                "at": {_key(v): val * v / ref for v in sorted({v for v in values.values() if v is not None})}}

    if op.units == "device" and op.kp_reference and "stiffness" in params:
        g = scaled("stiffness", op.kp_reference, op.kp)
        out.update(kp_reference=op.kp_reference, gain_scale=g["scale"], gain_scale_interval=g["scale_interval"],
                   stiffness_at=g["at"])
    if op.units == "device" and op.kd_reference and "damping" in params:
        g = scaled("damping", op.kd_reference, op.kd)
        out.update(kd_reference=op.kd_reference, damping_scale=g["scale"],
                   damping_scale_interval=g["scale_interval"], damping_at=g["at"])
    if op.vin_reference:
        vins = sorted({v for v in op.vin.values() if v is not None})
        out["vin_reference"] = op.vin_reference
        for name, key in (("saturation_effort", "saturation_effort_at"), ("actuator_velocity_limit",
                                                                          "velocity_limit_at")):
            if name in params and math.isfinite(params[name]):
                out[key] = {_key(v): float(params[name]) * v / op.vin_reference for v in vins}
    return out


def nested_start(parent: Family, child: Family, fitted: dict[str, float]) -> dict[str, float] | None:
    """The parent's fitted parameters as the point of the child's space where the child computes exactly what
    the parent did (new terms switched off or copying the parent's values), or None when it does not nest:
    delayed_pd ⊃ ideal_pd (delay 0), pid ⊃ delayed_pd (ki 0), remotized_pd ⊃ delayed_pd (every knot = the
    effort limit), the BAM friction families ⊃ dcmotor (no Stribeck peak, no load friction)."""
    clamps_ok = parent.clamps == child.clamps or (parent.clamps, child.clamps) == (("max_effort",),
                                                                                   ("position_table",))
    drive_ok = parent.drive == child.drive or (parent.drive, child.drive) == ("pd", "pid")
    terms_ok = set(parent.joint_terms) <= set(child.joint_terms) and (
        ("dynamic_friction" in parent.joint_terms) == ("dynamic_friction" in child.joint_terms))
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


def _nested_starts(parent: Family, child: Family, fitted: list[dict[str, float]]
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
        o != name and nests(family_for(req, o), family) for o in fitted if o in FAMILIES)


def nests(parent: Family, child: Family) -> bool:
    """Whether `child` reproduces `parent` at some point of its space (see nested_start)."""
    return nested_start(parent, child, {n: 1.0 for n in parent.params}) is not None


def family_for(req: FitRequest, name: str) -> Family:
    """The named family with the request's joint terms, if it asks for other ones."""
    family = get_family(name)
    return family.with_terms(tuple(req.joint_terms)) if req.joint_terms is not None else family


def _rank(models: dict[str, dict]) -> list[dict]:
    """Order families by validation position RMSE (train when no validation) with a parameter penalty."""
    rows = []
    for fam, m in models.items():
        split = "validation" if m["metrics"]["validation"] else "train"
        err = m["metrics"][split]["position_rmse"]
        rows.append({"family": fam, "score": err * (1 + MODEL_PENALTY * m["n_params"]), "split": split,
                     "position_rmse": err, "n_params": m["n_params"]})
    return sorted(rows, key=lambda r: r["score"])


def simulate(rec: Recording, joint: str, family: str, params: dict[str, float], device: str = "cpu",
             joint_terms: list[str] | None = None, decimation: int = 1,
             table_positions: list[float] | None = None, effort_mode: str = "explicit",
             logged_gains: bool = False) -> dict:
    """Roll one fitted model over every segment of one joint; per-segment traces as numpy arrays."""
    fam = get_family(family)
    if joint_terms is not None:
        fam = fam.with_terms(tuple(joint_terms))
    knots = None if table_positions is None else np.asarray([table_positions])
    batch = SegmentBatch.from_recording(rec, [joint], substeps=decimation, knots=knots, logged_gains=logged_gains)
    tr = RolloutEngine(batch, device, effort_mode=effort_mode).traces(fam, params_array(fam, [params]))
    return {batch.seg_names[s]: {k: tr[k][0, batch.segment_slice(s)] for k in ("q", "qd", "computed", "applied")}
            for s in range(batch.n_segments)}


def envelope(family: str, params: dict[str, float], v_max: float, n: int = 121) -> dict:
    """The family's effort window over joint velocity, for the torque–speed plot."""
    v = np.linspace(-v_max, v_max, n)
    lo, hi = effort_window(family, params, v)  # each clamp component's window (models/components/)
    fin = lambda a: [float(x) if np.isfinite(x) else None for x in a]  # noqa: E731
    return {"velocity": v.tolist(), "effort_max": fin(hi), "effort_min": fin(lo)}


def _network_traces(rec: Recording, result: dict, joint: str, exclude: str) -> tuple[dict | None, str | None]:
    """Closed-loop traces of the joint's actuator network with the lowest validation position RMSE, if any."""
    models = result["joints"][joint]["models"]
    nets = [k for k in models if k in NET_FAMILIES and k != exclude]
    if not nets:
        return None, None
    score = lambda k: ((models[k]["metrics"].get("validation") or models[k]["metrics"].get("train") or {})  # noqa: E731
                       .get("position_rmse", float("inf")))
    best = min(nets, key=score)
    from .nets import simulate_net

    return simulate_net(rec, joint, models[best], decimation=result.get("assumptions", {}).get("decimation", 1)), best


def report_data(rec: Recording, result: dict, max_points: int = 1500) -> dict:
    """Simulated traces and envelope points for the report plots (downsampled, JSON-ready)."""
    val = set(result["split"]["validation"])
    out: dict[str, dict] = {}
    for joint, jr in result["joints"].items():
        fam = jr["best_model"]
        model = jr["models"][fam]
        params = model["params"]
        assumed = result.get("assumptions", {})
        if fam in NET_FAMILIES:  # only networks were fitted
            from .nets import simulate_net

            sims = simulate_net(rec, joint, model, decimation=assumed.get("decimation", 1))
        else:
            sims = simulate(rec, joint, fam, params, joint_terms=model.get("joint_terms"),
                            decimation=assumed.get("decimation", 1), table_positions=model.get("table_positions"),
                            effort_mode=assumed.get("effort_mode", "explicit"),
                            logged_gains=assumed.get("logged_gains", False))
        j = rec.joint_index(joint)
        segs, pv, pe = [], [], []
        has_tau = all(s.tau is not None for s in rec.segments)
        net_sims, net = _network_traces(rec, result, joint, exclude=fam)
        for seg in rec.segments:
            sim = sims[seg.name]
            step = max(1, seg.n // max_points)
            sl = slice(None, None, step)
            beside = ({"network": net, "q_net": net_sims[seg.name]["q"][sl].tolist(),  # the best net, closed loop
                       "qd_net": net_sims[seg.name]["qd"][sl].tolist()} if net_sims else {})
            segs.append({
                **beside,
                "name": seg.name, "split": "validation" if seg.name in val else "train",
                "t": seg.t[sl].tolist(), "q": seg.q[sl, j].tolist(), "q_sim": sim["q"][sl].tolist(),
                "q_des": seg.q_des[sl, j].tolist(),
                "qd": seg.qd[sl, j].tolist(), "qd_sim": sim["qd"][sl].tolist(),
                "tau_sim": sim["applied"][sl].tolist(),
            })
            pv.append(seg.qd[sl, j])
            pe.append(seg.tau[sl, j] if has_tau and seg.tau is not None else sim["applied"][sl])
        v_all = np.concatenate(pv)
        out[joint] = {
            "family": fam,
            "segments": segs,
            "envelope": envelope(fam, params, max(1.2 * float(np.max(np.abs(v_all))), 1e-3)),
            "points": {"velocity": v_all.tolist(), "effort": np.concatenate(pe).tolist(),
                       "source": "measured" if has_tau else "simulated"},
        }
    return {"joints": out}
