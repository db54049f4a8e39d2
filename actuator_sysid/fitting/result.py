"""The fit result as typed, frozen records: what `fit_recording` returns and `fit.json` holds, read by attribute.

JSON is the result's form only at the edges (the database, `fit.json`, HTTP): `FitResult.from_json(doc)` reads
a stored result and `.to_json()` writes it back key for key, in the same order, so a result goes through the
records unchanged. A key this version does not name (a field added later, or one an older version wrote) is
kept in the record's `extra` and written back where it stood, so results stored by other versions still load.
Values keep their JSON types (no float()/int() coercion), so the round trip is exact.

The fit builds these records where it produces them (fitting/fit.py, fitting/training.py): a record built in code
writes its fields in the order the fit has always written them (`JSON_ORDER`, else the declaration order) and
leaves out the fields a fit writes only when they apply (`OMIT_UNSET`) while they are at their default, so
`fit.json` reads the same as when the fit assembled the dict by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

from ..models.components.friction_position import mid_stroke
from ..models.families import NET_FAMILIES
from ..numbers import is_real

Json = Any  # a JSON value: dict, list, str, int, float, bool or None
TORQUE_METRIC = "torque_rmse"  # a joint ranked by open-loop torque error (a net trained on measured torque)


def utc_stamp(when: str | datetime | None = None) -> str:
    """A fit's creation time as results store it: UTC, ISO 8601 to the second (None: now); a naive time is UTC."""
    if when is None:
        t = datetime.now(UTC)
    else:
        t = when if isinstance(when, datetime) else datetime.fromisoformat(when)
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC).isoformat(timespec="seconds")


def fit_day(created_at: str | None) -> str:
    """The UTC date (YYYY-MM-DD) of a stored creation time; today's where none is stored."""
    return utc_stamp(created_at)[:10]


class _Mismatch(Exception):
    """A stored value whose JSON type is not the one a typed field reads: it is kept raw in `extra`."""


@dataclass(frozen=True)
class Codec:
    """How one field's JSON value becomes its typed value and back."""

    decode: Callable[[Json], Any]
    encode: Callable[[Any], Json]


def _record(cls: type[Record]) -> Codec:
    def decode(v: Json) -> Any:
        if not isinstance(v, Mapping):
            raise _Mismatch
        return cls.from_json(v)

    return Codec(decode, lambda r: r.to_json())


def _optional(c: Codec) -> Codec:
    return Codec(lambda v: None if v is None else c.decode(v), lambda v: None if v is None else c.encode(v))


def _list_of(c: Codec) -> Codec:
    def decode(v: Json) -> Any:
        if not isinstance(v, list):
            raise _Mismatch
        return tuple(c.decode(x) for x in v)

    return Codec(decode, lambda v: [c.encode(x) for x in v])


def _dict_of(c: Codec) -> Codec:
    def decode(v: Json) -> Any:
        if not isinstance(v, Mapping):
            raise _Mismatch
        return {k: c.decode(x) for k, x in v.items()}

    return Codec(decode, lambda v: {k: c.encode(x) for k, x in v.items()})


_BOOKKEEPING = ("extra", "key_order")


@dataclass(frozen=True, kw_only=True)
class Record:
    """A JSON object with named fields: `extra` holds the keys this version does not name, `key_order` the
    stored order of every key (None for a record built in code, which writes the fields that apply)."""

    extra: Mapping[str, Json] = field(default_factory=dict, repr=False)
    key_order: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    CODECS: ClassVar[dict[str, Codec]] = {}  # fields holding records; the others hold their JSON value as is
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset()  # written by a record built in code only when set
    JSON_ORDER: ClassVar[tuple[str, ...]] = ()  # a built record's key order when it is not the declaration's

    @classmethod
    def _named(cls) -> dict[str, Any]:
        out = {}
        for f in fields(cls):
            if f.name not in _BOOKKEEPING:
                out[f.name] = f.default_factory() if f.default_factory is not MISSING else f.default
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Json]) -> Self:
        """The record of a stored JSON object; unnamed keys (and values of an unexpected type) go to `extra`. A
        record-valued field the object lacks reads as an empty stored record (it `has` no key)."""
        named = cls._named()
        kw: dict[str, Any] = {}
        extra: dict[str, Json] = {}
        for k, v in doc.items():
            if k not in named:
                extra[k] = v
                continue
            codec = cls.CODECS.get(k)
            try:
                kw[k] = codec.decode(v) if codec is not None else v
            except _Mismatch:
                extra[k] = v
        for k, default in named.items():
            if k not in kw and isinstance(default, Record):
                kw[k] = type(default).from_json({})
        return cls(**kw, extra=extra, key_order=tuple(doc))

    def _built_keys(self, named: dict[str, Any]) -> list[str]:
        """The keys a record built in code writes: its fields in JSON_ORDER, less the unset OMIT_UNSET ones."""
        order = [*self.JSON_ORDER, *(k for k in named if k not in self.JSON_ORDER)]
        return [k for k in order if k not in self.OMIT_UNSET or getattr(self, k) != named[k]]

    def to_json(self) -> dict[str, Json]:
        """The JSON object: the stored keys in their order, then any named field set since (not at its default)."""
        named = self._named()
        if self.key_order is not None:
            keys = [
                *self.key_order,
                *(k for k in named if k not in self.key_order and getattr(self, k) != named[k]),
            ]
        else:
            keys = [*self._built_keys(named), *(k for k in self.extra if k not in named)]
        out: dict[str, Json] = {}
        for k in keys:
            if k in self.extra:
                out[k] = self.extra[k]
            elif k in named:
                v = getattr(self, k)
                codec = self.CODECS.get(k)
                out[k] = codec.encode(v) if codec is not None else v
        return out

    def has(self, key: str) -> bool:
        """Whether the stored object had `key` (a field at its default may have been absent); for a record
        built in code: whether its JSON writes the key."""
        if self.key_order is not None:
            return key in self.key_order
        return key in self.extra or key in self._built_keys(self._named())


# --- metrics -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SplitMetrics(Record):
    """Pooled errors over the train or the validation segments of one joint [rad, rad/s]."""

    position_rmse: float | None = None
    position_mae: float | None = None
    velocity_rmse: float | None = None
    segments: int | None = None
    samples: int | None = None


@dataclass(frozen=True, kw_only=True)
class SegmentMetrics(Record):
    """One segment's errors and the split it belongs to."""

    segment: str = ""
    samples: int | None = None
    position_rmse: float | None = None
    position_mae: float | None = None
    velocity_rmse: float | None = None
    split: str = ""


@dataclass(frozen=True, kw_only=True)
class Metrics(Record):
    """A model fit's errors: pooled per split, per segment and, with folds, per fold and their mean."""

    train: SplitMetrics | None = None
    validation: SplitMetrics | None = None
    segments: tuple[SegmentMetrics, ...] = ()
    folds: list[Json] | None = None
    folds_mean: Mapping[str, float] | None = None

    CODECS: ClassVar[dict[str, Codec]] = {
        "train": _optional(_record(SplitMetrics)),
        "validation": _optional(_record(SplitMetrics)),
        "segments": _list_of(_record(SegmentMetrics)),
    }
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset({"folds", "folds_mean"})  # with cross-validation only

    def best(self) -> SplitMetrics | None:
        """The validation errors, else the training errors (a fit without validation segments); an empty
        object counts as none, as it does in the JSON."""
        for m in (self.validation, self.train):
            if m is not None and m.to_json():
                return m
        return None


# --- a fitted family -----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Interval(Record):
    """One parameter's uncertainty: its estimate, 95 % interval, relative std, whether the log identifies it
    (`value` is the estimate when it does, else None) and why not."""

    value: float | None = None
    estimate: float | None = None
    std_relative: float | None = None
    interval95: list[float] | None = None
    identified: bool = True
    reason: str | None = None

    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset({"reason"})  # said only for a parameter not identified


@dataclass(frozen=True, kw_only=True)
class ModelFit(Record):
    """One fitted parametric family of one joint: parameters (registry names, SI), their intervals and
    correlation, errors, the search that found them; `unidentified` / `given` once an export prepared it."""

    family: str = ""
    added_for: list[str] | None = None  # a companion family: the requested families it was fitted for
    isaaclab_cfg: str | None = None
    joint_terms: list[str] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    table_positions: list[float] | None = None
    device_gains: Mapping[str, Json] | None = None
    tied: Mapping[str, str] | None = None
    voltage_servo: Mapping[str, Json] | None = None
    metrics: Metrics = field(default_factory=Metrics)
    loss: float | None = None
    intervals: Mapping[str, Interval] = field(default_factory=dict)
    correlation: Mapping[str, Json] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    n_params: int | None = None
    warm_start: Mapping[str, float] | None = None
    search: Mapping[str, Json] | None = None
    torque_metrics: Mapping[str, Json] | None = None  # open-loop torque errors, beside a net on a torque log
    unidentified: Mapping[str, Mapping[str, Json]] | None = None
    given: Mapping[str, float] | None = None

    CODECS: ClassVar[dict[str, Codec]] = {
        "metrics": _record(Metrics),
        "intervals": _dict_of(_record(Interval)),
    }
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset(
        {
            "added_for",
            "table_positions",
            "device_gains",
            "tied",
            "voltage_servo",
            "warm_start",
            "search",
            "torque_metrics",
            "unidentified",
            "given",
        }
    )

    @property
    def is_network(self) -> bool:
        return False

    @property
    def torque_supervised(self) -> bool:
        """Whether the fit learned from measured torque (a net in mode torque): it is judged by torque error."""
        return False

    def torque_error(self, split: str, metric: str = "torque_rmse") -> float | None:
        """A pooled open-loop torque error on "train" or "validation" (torque_rmse, torque_mae, torque_r2,
        torque_rmse_of_range), None where the log measured no torque or the split has none."""
        v = ((self.torque_metrics or {}).get(split) or {}).get(metric)
        return None if v is None else float(v)


@dataclass(frozen=True, kw_only=True)
class NetFit(ModelFit):
    """One fitted actuator network (mlp, lstm, gru): its spec, weights, training record and, with measured
    torque, its open-loop torque errors."""

    network: Mapping[str, Json] = field(default_factory=dict)
    weights: Mapping[str, Json] = field(default_factory=dict)
    pos_error: str | None = None
    training: Mapping[str, Json] = field(default_factory=dict)
    torque_range: float | None = None
    assumptions: str | None = None
    comparison: Mapping[str, Json] | None = None  # against the best parametric model on the same segments

    OMIT_UNSET: ClassVar[frozenset[str]] = ModelFit.OMIT_UNSET | {"torque_range", "comparison"}
    JSON_ORDER: ClassVar[tuple[str, ...]] = (
        "family",
        "isaaclab_cfg",
        "joint_terms",
        "params",
        "network",
        "weights",
        "pos_error",
        "training",
        "metrics",
        "loss",
        "intervals",
        "correlation",
        "warnings",
        "n_params",
        "assumptions",
        "torque_metrics",
        "torque_range",
        "comparison",
    )

    @property
    def is_network(self) -> bool:
        return True

    @property
    def torque_supervised(self) -> bool:
        return self.training.get("mode") == "torque" and self.torque_metrics is not None


def _model(v: Json) -> ModelFit:
    if not isinstance(v, Mapping):
        raise _Mismatch
    return (NetFit if v.get("family") in NET_FAMILIES or "network" in v else ModelFit).from_json(v)


_MODEL = Codec(_model, lambda m: m.to_json())


# --- a joint and the whole fit -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RankRow(Record):
    """One family's place in a joint's ranking: error × (1 + penalty · parameters), lower is better."""

    family: str = ""
    score: float | None = None
    split: str | None = None
    position_rmse: float | None = None
    n_params: int | None = None
    metric: str | None = None  # what `score` ranks: "torque_rmse" (N·m) or, unset, "position_rmse" (rad)
    torque_rmse: float | None = None  # open-loop torque RMSE on `split`, where the log measures torque

    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset({"metric", "torque_rmse"})

    @property
    def error(self) -> float | None:
        """The error this row is ranked by, in its metric's unit."""
        return self.torque_rmse if self.metric == TORQUE_METRIC else self.position_rmse


@dataclass(frozen=True, kw_only=True)
class JointFit(Record):
    """Every family fitted for one joint, their ranking, the best one, the test-bench load and (device units)
    the best model's gain conversion."""

    models: Mapping[str, ModelFit] = field(default_factory=dict)
    load: Mapping[str, Json] | None = None
    ranking: tuple[RankRow, ...] = ()
    best_model: str = ""
    device_gains: Mapping[str, Json] | None = None

    CODECS: ClassVar[dict[str, Codec]] = {"models": _dict_of(_MODEL), "ranking": _list_of(_record(RankRow))}
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset({"load", "device_gains"})

    @property
    def best(self) -> ModelFit:
        """The best model's fit."""
        return self.models[self.best_model]

    def nets_only(self) -> bool:
        """Whether every fitted family is a network."""
        return bool(self.models) and all(f in NET_FAMILIES for f in self.models)

    def ranked_by(self) -> str:
        """The metric this joint's families are ranked and judged by: "torque_rmse" or "position_rmse"."""
        return self.ranking[0].metric or "position_rmse" if self.ranking else "position_rmse"


@dataclass(frozen=True, kw_only=True)
class SplitNames(Record):
    """Which segments trained and which validated (names), how they were chosen, and the folds if any."""

    method: str | None = None
    train: list[str] = field(default_factory=list)
    validation: list[str] = field(default_factory=list)
    holdout: Json = None
    folds: list[list[str]] | None = None
    folds_by: str | None = None
    fold_names: list[str] | None = None

    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset({"holdout", "folds", "folds_by", "fold_names"})


@dataclass(frozen=True, kw_only=True)
class Budget(Record):
    """The fit's time budget [s] and whether it cut the search short."""

    seconds: float | None = None
    stopped_on_budget: bool = False


@dataclass(frozen=True, kw_only=True)
class Assumptions(Record):
    """What the fitted values assume: physics step [s], decimation, effort mode, integrator, loss, units."""

    effort_mode: str = "explicit"
    integrator: str | None = None
    physics_dt: float = 0.005
    decimation: int = 1
    delay_unit: str | None = None
    loss: str | None = None
    training_windows_s: float | None = None
    logged_gains: bool = False
    gain_units: Mapping[str, str] | None = None
    operating_point: Mapping[str, Json] | None = None  # with gains or a supply that vary between segments

    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset({"operating_point"})


@dataclass(frozen=True, kw_only=True)
class Check(Record):
    """One finding of the verdict: the check, its status (ok, usable, poor) and why."""

    check: str = ""
    status: str = "ok"
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Verdict(Record):
    """good / usable / poor for the whole fit, with its checks worst first (fitting/verdict.py)."""

    verdict: str = "not judged"
    reasons: list[str] = field(default_factory=list)
    checks: tuple[Check, ...] = ()
    thresholds: Mapping[str, float] | None = None

    CODECS: ClassVar[dict[str, Codec]] = {"checks": _list_of(_record(Check))}


@dataclass(frozen=True, kw_only=True)
class FitResult(Record):
    """A whole fit: per joint fits, the split, budget and assumptions, and what the CLI or the service adds
    (the dataset summary, the request, the origin, the verdict, the elapsed time)."""

    joints: Mapping[str, JointFit] = field(default_factory=dict)
    split: SplitNames = field(default_factory=SplitNames)
    budget: Budget | None = None
    assumptions: Assumptions = field(default_factory=Assumptions)
    request: Mapping[str, Json] | None = None
    dataset: Mapping[str, Json] | None = None
    elapsed_s: float | None = None
    origin: Mapping[str, Json] | None = None
    verdict: Verdict | None = None
    fit_id: str | None = None
    renamed: Mapping[str, str] | None = None
    created_at: str | None = None  # the fit's UTC creation time, ISO 8601 to the second (pipeline.py sets it)

    CODECS: ClassVar[dict[str, Codec]] = {
        "joints": _dict_of(_record(JointFit)),
        "split": _record(SplitNames),
        "budget": _optional(_record(Budget)),
        "assumptions": _record(Assumptions),
        "verdict": _optional(_record(Verdict)),
    }
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset(
        {"budget", "origin", "verdict", "fit_id", "renamed", "created_at"}
    )

    @property
    def fitted_on(self) -> str:
        """The UTC date (YYYY-MM-DD) of the fit, the one every export states; today's for a result stored
        without `created_at` (a fit.json written before the result recorded it)."""
        return fit_day(self.created_at)

    def model(self, joint: str, family: str) -> ModelFit:
        """One joint's fit of one family."""
        return self.joints[joint].models[family]


ResultLike = FitResult | Mapping[str, Json]  # what readers accept while producers still hand over the dict


def as_result(result: ResultLike) -> FitResult:
    """The typed result of a stored one (a result already typed passes through): the edge where readers that
    still receive the dict convert it."""
    return result if isinstance(result, FitResult) else FitResult.from_json(result)


# --- a whole-robot fit (fitting/robot/) ----------------------------------------------------------------------


# a robot group's fit.json keys that are not registry names (models/parameters.py): the one translation, read by
# the fit, its reports and its exports; every other group key is its registry name
GROUP_KEYS = {"actuator_effort_limit": "effort_limit", "actuator_velocity_limit": "velocity_limit"}


@dataclass(frozen=True, kw_only=True)
class RobotGroup(Record):
    """One joint group's fitted values (SI): its Isaac Lab regex and joints, the joint terms, the PD gains, the
    motor's effort limit and, with a DC envelope, its saturation effort and velocity limit (else None)."""

    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset({"friction_upper"})  # with position_friction only
    joint_names_expr: str = ""
    joints: list[str] = field(default_factory=list)
    armature: float | None = None  # kg·m²
    viscous_friction: float | None = None  # N·m·s/rad
    friction: float | None = None  # N·m, MuJoCo's frictionloss (at the lower limit with friction_upper)
    friction_upper: float | None = None  # N·m at the joint's upper limit, linear between; None: constant
    stiffness: float | None = None  # N·m/rad
    damping: float | None = None  # N·m·s/rad, the PD's kd
    effort_limit: float | None = None  # N·m: the fitted max motor effort with an envelope, else the model's
    saturation_effort: float | None = None
    velocity_limit: float | None = None  # rad/s
    model_effort_limit: float | None = None  # the model file's joint limit, a box after the envelope
    envelope_active: float | None = None  # share of held-out physics steps the envelope cut the PD effort

    def params(self) -> dict[str, float]:
        """The group's stated values by registry name (SI); a term it does not state, or states infinite, is left
        out."""
        values: dict[str, Json] = {
            k: getattr(self, k)
            for k in (
                "stiffness",
                "damping",
                "armature",
                "friction",
                "friction_upper",
                "viscous_friction",
                "saturation_effort",
            )
        }
        values |= {name: getattr(self, key) for name, key in GROUP_KEYS.items()}
        values["actuator_velocity_limit"] = self.envelope_velocity()
        return {k: float(v) for k, v in values.items() if is_real(v)}

    def consumer_friction(self) -> float | None:
        """The one Coulomb friction a consumer holds [N·m]: the mid-stroke value of a friction along the stroke."""
        if self.friction is None or self.friction_upper is None:
            return self.friction
        return mid_stroke(self.friction, self.friction_upper)

    def envelope_velocity(self) -> Json:
        """The envelope's velocity limit as the group states it (a hand-written group may name it
        `actuator_velocity_limit`, Isaac Lab's spelling)."""
        return (
            self.velocity_limit if self.has("velocity_limit") else self.extra.get("actuator_velocity_limit")
        )


@dataclass(frozen=True, kw_only=True)
class DecoupledFit(Record):
    """The decoupled search's fit (each joint's own 1-DoF fit) at the chosen delay, replayed coupled beside the
    coupled fit: its errors [rad], joint terms per group, encoder bias [rad] and delay [physics steps]."""

    rmse: float | None = None
    per_joint_rmse: Mapping[str, float] = field(default_factory=dict)
    groups: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    encoder_bias: Mapping[str, float] = field(default_factory=dict)
    delay_steps: int = 0
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class RobotValidation(Record):
    """The held-out replay: how the log was split, the fit's and the model file's own position errors [rad],
    the envelope's share per joint, the decoupled fit beside them and the validated motion's range and noise."""

    split: str = "time"  # "time" (one recording cut) or "recordings" (held-out recordings, whole)
    split_sample: int = 0
    split_time_s: float = 0.0
    fraction: float = 0.0
    recordings: Mapping[str, Json] | None = None  # {method, training, validation} with split "recordings"
    rmse: float | None = None
    per_joint_rmse: Mapping[str, float] = field(default_factory=dict)
    model_defaults_rmse: float | None = None
    model_defaults_per_joint_rmse: Mapping[str, float] = field(default_factory=dict)
    model_defaults: str = ""
    replay: str = ""
    envelope_active_per_joint: Mapping[str, float] = field(default_factory=dict)
    decoupled_fit: DecoupledFit | None = None
    motion: Mapping[str, Mapping[str, float]] | None = None  # {joint: {range, noise}} rad
    # the joints whose validated span asks for more effort or speed than training (fitting/coverage.py's rule)
    beyond_training: str | None = None

    CODECS: ClassVar[dict[str, Codec]] = {"decoupled_fit": _optional(_record(DecoupledFit))}
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset(
        {"recordings", "decoupled_fit", "motion", "beyond_training"}
    )

    @property
    def validated_recordings(self) -> list[str]:
        """The held-out recordings' names (none on a time split)."""
        return list((self.recordings or {}).get("validation") or [])

    def held_out(self) -> str:
        """What was held out, as the fit split the log: the last part in time, or whole recordings by name."""
        if self.split == "time":
            return (
                f"the last {float(self.fraction or 0):.0%} of the log in time, from {self.split_time_s:.2f} s"
            )
        names = self.validated_recordings
        method = (self.recordings or {}).get("method")
        return (
            f"held-out recording{'s' if len(names) != 1 else ''} {', '.join(names)}, each replayed whole"
            + (f" ({method})" if method else "")
        )


@dataclass(frozen=True, kw_only=True)
class BoundHit(Record):
    """A search variable that ended at a search bound: the term, its value, which bound and the bound's value."""

    term: str = ""
    value: float | None = None
    bound: str = ""  # "lower" or "upper"
    limit: float | None = None


@dataclass(frozen=True, kw_only=True)
class WideBias(Record):
    """An encoder bias beyond a plausible calibration [rad]."""

    joint: str = ""
    bias: float | None = None


@dataclass(frozen=True, kw_only=True)
class RobotBounds(Record):
    """The searched terms' bounds (natural units), the terms that ended at one, the implausible encoder biases,
    the notes naming them and the scales the bounds were drawn from."""

    bounds: Mapping[str, list[float]] = field(default_factory=dict)
    at_bound: tuple[BoundHit, ...] = ()
    implausible_bias: tuple[WideBias, ...] = ()
    notes: list[str] = field(default_factory=list)
    scales: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    CODECS: ClassVar[dict[str, Codec]] = {
        "at_bound": _list_of(_record(BoundHit)),
        "implausible_bias": _list_of(_record(WideBias)),
    }


@dataclass(frozen=True, kw_only=True)
class RobotTraining(Record):
    """The search's record: training windows and their length [s], the path, Jacobians and rollout batches,
    why it stopped, the coupled training RMSE [rad] before and after, the time it took and its start; the
    decoupled path adds the training RMSE at each delay, decoupled and coupled."""

    windows: int = 0
    window_s: float = 0.0
    search: str = ""
    jacobians: int = 0
    decoupled_jacobians: int | None = None
    coupled_batches: int | None = None
    refinement_rounds: int | None = None
    fd_candidates_per_jacobian: int | None = None
    stopped_on: str = ""
    initial_rmse: float | None = None
    rmse: float | None = None
    delay_decoupled_rmse: Mapping[str, float] | None = None
    delay_coupled_rmse: Mapping[str, float] | None = None
    search_s: float | None = None
    start: str = ""

    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset(
        {
            "decoupled_jacobians",
            "coupled_batches",
            "refinement_rounds",
            "delay_decoupled_rmse",
            "delay_coupled_rmse",
        }
    )

    def _built_keys(self, named: dict[str, Any]) -> list[str]:
        """The coupled path (scipy's least squares) states its search after the figures, as it always has."""
        keys = super()._built_keys(named)
        if self.search == "coupled":
            keys.remove("search")
            keys.insert(keys.index("search_s"), "search")
        return keys


@dataclass(frozen=True, kw_only=True)
class RobotIdentifiability(Record):
    """Which fitted robot terms the log identifies, why the others are not, the warnings and the method."""

    identified: list[str] = field(default_factory=list)
    not_identified: Mapping[str, str] = field(default_factory=dict)  # term → why not
    warnings: list[str] = field(default_factory=list)
    method: str = ""


@dataclass(frozen=True, kw_only=True)
class RobotUncertainty(Record):
    """What the coupled training residuals' Jacobian says of the fitted terms (fitting/robot_judge.py)."""

    intervals: Mapping[str, Interval] = field(default_factory=dict)
    correlations: Mapping[str, Json] = field(default_factory=dict)  # {names, matrix}
    identifiability: RobotIdentifiability = field(default_factory=RobotIdentifiability)

    CODECS: ClassVar[dict[str, Codec]] = {
        "intervals": _dict_of(_record(Interval)),
        "identifiability": _record(RobotIdentifiability),
    }


@dataclass(frozen=True, kw_only=True)
class RobotResult(Record):
    """A whole-robot fit (fitting/robot/ `fit_robot`), SI: the robot and how the log's joints met it, the
    groups' values, encoder bias and delay, the search bounds, the physics step, the held-out validation, the
    search's record, the intervals and the verdict; then what later steps add (the selection, the exports and
    their replays, the service's robot id)."""

    kind: str = "robot"
    robot: Mapping[str, Json] = field(default_factory=dict)  # models/robot.py summary(): path, base, joints…
    joint_mapping: str = ""
    groups: Mapping[str, RobotGroup] = field(default_factory=dict)
    motor_envelope: str = "off"  # "dc_motor" or "off"
    gains: str = ""  # where the PD gains came from
    bounds: RobotBounds = field(default_factory=RobotBounds)
    encoder_bias: Mapping[str, float] = field(default_factory=dict)  # rad
    delay_steps: int = 0  # physics steps
    delay: str = ""  # how the delay was found
    sim: Mapping[str, Json] = field(default_factory=dict)  # {dt: physics step s, decimation}
    validation: RobotValidation = field(default_factory=RobotValidation)
    training: RobotTraining = field(default_factory=RobotTraining)
    wall_s: float | None = None
    world_steps: int | None = None
    world_steps_per_s: float | None = None
    effort_mode: str = "explicit"  # every coupled rollout's: "explicit" or Newton's "implicit"
    bodies: Mapping[str, Mapping[str, Json]] | None = None  # payload links: fitted and model mass and COM
    assumptions: list[str] = field(default_factory=list)
    intervals: Mapping[str, Interval] | None = None
    correlations: Mapping[str, Json] | None = None
    identifiability: RobotIdentifiability | None = None
    verdict: Verdict | None = None
    selection: Mapping[str, Json] | None = None  # fitting/robot_select.py: the candidates and the chosen one
    exports: Mapping[str, Json] | None = None  # what each whole-robot export noted (export/robot.py)
    replays: Mapping[str, Json] | None = None  # each export replayed by its consumer
    robot_id: str | None = None  # the service's stored robot model
    created_at: str | None = None  # the fit's UTC creation time, ISO 8601 to the second (pipeline.py sets it)

    CODECS: ClassVar[dict[str, Codec]] = {
        "groups": _dict_of(_record(RobotGroup)),
        "bounds": _record(RobotBounds),
        "validation": _record(RobotValidation),
        "training": _record(RobotTraining),
        "intervals": _optional(_dict_of(_record(Interval))),
        "identifiability": _optional(_record(RobotIdentifiability)),
        "verdict": _optional(_record(Verdict)),
    }
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset(
        {
            "bodies",
            "intervals",
            "correlations",
            "identifiability",
            "verdict",
            "selection",
            "exports",
            "replays",
            "robot_id",
            "created_at",
        }
    )

    @property
    def fitted_on(self) -> str:
        """The UTC date (YYYY-MM-DD) of the fit, the one every whole-robot export states. A fit.json written
        before the result recorded `created_at` gives the date its exports noted when they were written, else
        today's."""
        if not self.created_at:
            for noted in (self.exports or {}).values():
                if isinstance(noted, Mapping) and noted.get("exported"):
                    return str(noted["exported"])
        return fit_day(self.created_at)

    @property
    def stroke_friction_groups(self) -> list[str]:
        """The groups whose friction changes along the stroke (friction_upper), which no consumer holds."""
        return [g for g, e in self.groups.items() if e.friction_upper is not None]

    @property
    def physics_dt(self) -> float:
        """The physics step [s] the delay counts."""
        return float(self.sim["dt"])

    @property
    def decimation(self) -> int:
        return int(self.sim["decimation"])

    @property
    def joint_names(self) -> list[str]:
        """The model's joints, in its order."""
        return [str(j["name"]) for j in self.robot.get("joints") or []]

    def with_uncertainty(self, u: RobotUncertainty) -> RobotResult:
        """This result with the intervals, correlations and identifiability of `u`."""
        return replace(
            self, intervals=u.intervals, correlations=u.correlations, identifiability=u.identifiability
        )


RobotResultLike = (
    RobotResult | Mapping[str, Json]
)  # a stored robot result (a service row, fit.json) or the record


def as_robot_result(result: RobotResultLike) -> RobotResult:
    """The typed robot result of a stored one (a result already typed passes through): the edge where a stored
    fit.json or service row is read."""
    return result if isinstance(result, RobotResult) else RobotResult.from_json(result)
