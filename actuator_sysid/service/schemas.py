"""The service's request and response bodies, in one place; their fields' descriptions and examples feed
/openapi.json. A whole-robot fit's options (`RobotFitIn`) and a robot's shape live with the robots router
(robots.py) and are used here as they are.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from ..datasets.excitation import ExcitationSpec
from ..datasets.names import NAME_RULE, name_problem
from ..fitting.fit import FitRequest
from ..fitting.request import BOUNDS, DEVICE_PATTERN
from ..models.families import FAMILIES
from . import robots

DEFAULT_REQUEST = FitRequest()  # the defaults a fit request body starts from (and the pages' fit form shows)
MAX_FIT_JOINTS = 64  # joints one fit request may name (fitting/fit.py validate_request says the same)
MAX_TAGS = 16  # tags one fit may carry


def _run_name(v: str | None) -> str | None:
    """A run's name: empty clears it; otherwise the rule every name follows."""
    if v is None or v == "":
        return v
    problem = name_problem(v)
    if problem:
        raise ValueError(f"{problem}; a run name has {NAME_RULE}")
    return v


def _run_tags(v: list[str] | None) -> list[str] | None:
    """A run's tags: each follows the name rule, each once, in the order given."""
    if v is None:
        return v
    for k, tag in enumerate(v):
        problem = name_problem(tag)
        if problem:
            raise ValueError(f"tag {k + 1}: {problem}; a tag has {NAME_RULE}")
    return list(dict.fromkeys(v))


class RunLabel(BaseModel):
    """A fit's name and tags, as the runs table shows, sorts and filters them."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "go2 kp20", "tags": ["go2"]}]}
    )
    name: str | None = Field(None, description="the run's name; empty clears it; omit to keep it")
    tags: list[str] | None = Field(
        None, max_length=MAX_TAGS, description=f"the run's tags (at most {MAX_TAGS}); omit to keep them"
    )

    _name = field_validator("name")(classmethod(lambda _cls, v: _run_name(v)))
    _tags = field_validator("tags")(classmethod(lambda _cls, v: _run_tags(v)))


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generations: int = Field(
        DEFAULT_REQUEST.generations, description="CMA-ES generations per model family", examples=[200]
    )
    population: int = Field(DEFAULT_REQUEST.population, description="CMA-ES population size", examples=[16])
    seconds: float | None = Field(
        None,
        description="wall-clock budget for the whole fit, "
        f"{BOUNDS['budget_s'][0]:g}..{BOUNDS['budget_s'][1]:g} s: the search stops with "
        "its best so far and refines it briefly",
        examples=[60],
    )


class FitCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "dataset_id": "3f2b9c0e5d6a4b1c8e7f6a5b4c3d2e1f",
                    "joints": ["knee"],
                    "families": ["dcmotor", "ideal_pd"],
                    "budget": {"generations": 200, "population": 16},
                    "seed": 0,
                    "device": "cpu",
                }
            ]
        },
    )
    dataset_id: str = Field(description="id from POST /api/v1/datasets")
    name: str | None = Field(None, description="a name for the run, shown in the runs table")
    tags: list[str] | None = Field(
        None,
        max_length=MAX_TAGS,
        description=f"tags for the run (at most {MAX_TAGS}), to filter the runs table",
    )
    joints: list[str] | None = Field(
        None,
        max_length=MAX_FIT_JOINTS,
        description=f"joints to fit, each once (at most {MAX_FIT_JOINTS}); omit for every joint",
    )
    robot_id: str | None = Field(
        None,
        max_length=64,
        description="id from POST /api/v1/robots: fit every actuator "
        "through the robot's coupled dynamics; `robot` holds that fit's options and "
        "joints / families / budget are not used",
    )
    robot: robots.RobotFitIn | None = Field(None, description="options of a robot fit (with robot_id)")
    families: list[str] | None = Field(
        None,
        max_length=32,
        description=f"model families, from {sorted(FAMILIES)}, or the actuator "
        f'networks mlp, lstm and gru (default {DEFAULT_REQUEST.families}); ["auto"] climbs the ladder '
        "(dcmotor, its delay, friction with the delay, MuJoCo's dcmotor) and keeps the step that pays",
    )
    models: list[str] | None = Field(
        None,
        max_length=32,
        deprecated=True,
        description="deprecated alias of `families` (give one of the two)",
    )
    budget: Budget = Field(default_factory=Budget)
    seed: int = Field(
        DEFAULT_REQUEST.seed,
        description=f"random seed, {int(BOUNDS['seed'][0])}..{int(BOUNDS['seed'][1])} (what numpy takes)",
    )
    device: str = Field(
        "cpu",
        pattern=rf"^({DEVICE_PATTERN})$",
        description="where the fit computes; cuda needs a GPU worker (the Ray executor gives "
        "such a fit one GPU; the local executor refuses it with a 422 on a machine without one)",
    )

    decimation: int = Field(
        DEFAULT_REQUEST.decimation, description="physics steps per log sample (commands held)"
    )
    effort_mode: str = Field(
        DEFAULT_REQUEST.effort_mode, description="explicit, or implicit (Newton's implicit effort mode)"
    )
    joint_terms: list[str] | None = Field(
        None,
        max_length=16,
        description="joint terms instead of each family's default, e.g. "
        "armature, friction, dynamic_friction, viscous_friction, "
        "encoder_offset",
    )
    add_terms: list[str] | None = Field(
        None,
        max_length=16,
        description="joint terms added to every family's own (after joint_terms), e.g. encoder_offset",
    )
    holdout: str | None = Field(
        None,
        max_length=200,
        description="KEY=VALUE: the recordings of segments whose metadata KEY "
        "equals VALUE are the validation set, e.g. kp=20 (a nested key "
        "as bam.kp, or by its unique name)",
        examples=["kp=20"],
    )
    folds: int | None = Field(
        None,
        description="k-fold cross-validation over whole recordings (2 ≤ k ≤ 100); the final "
        "parameters come from a fit on every segment",
        examples=[5],
    )
    folds_by: str | None = Field(
        None,
        max_length=200,
        description="leave-one-value-out cross-validation: one fold per value of "
        "this metadata key (its recordings validate); the final "
        "parameters come from a fit on every segment",
        examples=["kp"],
    )
    validate_last: float | None = Field(
        None,
        description="a split in time: the last fraction (0.01-0.9) of every segment validates, a network's "
        "history carried across the cut; excludes holdout, folds and folds_by",
        examples=[0.3],
    )
    ladder_judge: Literal["held-out", "training"] = Field(
        "held-out",
        description='with the ladder (families null or ["auto"]): held-out judges the rungs on the split the '
        "fit reports; training judges them on an inner split of the training part, refits the pick on the "
        "whole of it and leaves the held-out figure untouched by any choice",
    )
    networks: dict[str, Any] | None = Field(
        None,
        description="options of the mlp/lstm/gru families (fitting.training.NetOptions): history_ms (the "
        "MLP's history in ms, converted at the log's rate) or input_idx (physics steps back; neither: the "
        "MLP's history is chosen on the inner split), hidden, "
        "activation, hidden_size, num_layers, epochs, patience, lr, batch_size, window, lstm_window, burn_in, "
        "in_loop_epochs, in_loop_lr, mode (auto | torque | in_the_loop), gain_normalise, inner_fraction, "
        "inputs (auto | error | commands | a list of channels: pos_error, vel or vel_error, tau_ff, tau_cmd, "
        "kp, kd)",
        examples=[{"history_ms": [0, 20, 40], "hidden": [32, 32]}],
    )

    _name = field_validator("name")(classmethod(lambda _cls, v: _run_name(v)))
    _tags = field_validator("tags")(classmethod(lambda _cls, v: _run_tags(v)))

    @model_validator(mode="after")
    def _one_family_field(self) -> FitCreate:
        if self.families is not None and self.models is not None:
            raise ValueError("give families or its deprecated alias models, not both")
        return self

    def to_request(self) -> FitRequest:
        families = self.families if self.families is not None else self.models
        return FitRequest(
            joints=self.joints,
            families=list(DEFAULT_REQUEST.families or []) if families is None else families,
            generations=self.budget.generations,
            population=self.budget.population,
            seed=self.seed,
            device=self.device,
            decimation=self.decimation,
            effort_mode=self.effort_mode,
            joint_terms=self.joint_terms,
            add_terms=self.add_terms,
            holdout=self.holdout,
            folds=self.folds,
            folds_by=self.folds_by,
            validate_last=self.validate_last,
            ladder_judge=self.ladder_judge,
            budget_s=self.budget.seconds,
            networks=self.networks,
        )


_DATASET_EXAMPLE: JsonDict = {
    "id": "3f2b9c0e5d6a4b1c8e7f6a5b4c3d2e1f",
    "project": "default",
    "name": "knee_bench.csv",
    "created_at": "2026-03-01T09:30:00+00:00",
    "joints": ["knee"],
    "segments": 6,
    "samples": 7200,
    "duration_s": 35.97,
    "rate_hz": 200.0,
    "source_format": "canonical-csv-long",
    "velocity_source": "measured",
    "has_effort": True,
    "warnings": [],
    "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "size": 412345,
    "actuator_model": "AK80-9",
    "serial": "SN-0042",
}
_FIT_EXAMPLE: JsonDict = {
    "id": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
    "project": "default",
    "dataset_id": _DATASET_EXAMPLE["id"],
    "status": "running",
    "progress": 0.42,
    "message": "dcmotor: generation 84/200",
    "attempts": 1,
    "request": {"joints": ["knee"], "families": ["dcmotor"], "generations": 200, "population": 16, "seed": 0},
    "created_at": "2026-03-01T09:31:00+00:00",
    "updated_at": "2026-03-01T09:31:20+00:00",
    "started_at": "2026-03-01T09:31:01+00:00",
    "finished_at": None,
    "artifacts": [],
}


class DatasetOut(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_DATASET_EXAMPLE]})
    id: str
    name: str
    created_at: str
    joints: list[str]
    segments: int
    warnings: list[str]


class FitOut(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_FIT_EXAMPLE]})
    id: str
    dataset_id: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    progress: float
    message: str


class FitAccepted(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"id": _FIT_EXAMPLE["id"], "status": "queued"}]}
    )
    id: str
    status: str


class Problem(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"detail": "fit 'x' not found; GET /api/v1/fits lists the ids"}]}
    )
    detail: str


# the problems every id-taking route may answer with (token missing or wrong, id not found)
ERRORS: dict[int | str, dict[str, Any]] = {c: {"model": Problem} for c in (401, 404)}


def _checked_excitation(spec: ExcitationSpec) -> ExcitationSpec:
    """The excitation request's own check (datasets/excitation.py: every number within LIMITS, the samples
    and the prediction's work bounded), run while the body is validated: a 422 naming the field and limit."""
    spec.check()
    return spec


ExcitationIn = Annotated[ExcitationSpec, AfterValidator(_checked_excitation)]
"""The body of POST /api/v1/excitations: an ExcitationSpec that passed its check."""
