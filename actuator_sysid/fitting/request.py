"""A fit request and the checks of its own fields: what the CLI, the API and the worker hand to the fit.

The checks that need the plan (a holdout the segments cannot satisfy) or the networks' options live beside
them: `fitting.plan.validate_request` runs all of them, in one place, before anything is queued or stored.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import InitVar, dataclass, field, fields

from ..datasets.recording import Recording
from ..models.families import EFFORT_MODES, FAMILIES, JOINT_TERMS, NET_FAMILIES
from .objective import LOSSES
from .search import BACKENDS

# every numeric field that sizes work, inclusive; check_fields and the pages' fit form read them
BOUNDS: dict[str, tuple[float, float]] = {
    "generations": (1, 10_000),
    "population": (4, 4096),
    "decimation": (1, 64),
    "folds": (2, 100),
    "budget_s": (0.1, 86_400),  # under a tenth of a second no search generation fits
    "seed": (0, 2**32 - 1),  # what numpy's SeedSequence takes
}
DEVICE_PATTERN = r"cpu|cuda(:\d{1,2})?"  # the fit request's `device`; the service's model reads it too
# a whole-robot fit's option bounds, read by fitting/robot/ and the service's request model alike
ROBOT_BOUNDS: dict[str, tuple[float, float]] = {
    "bias_limit": (0.001, 0.3),  # rad: a cap on every joint's encoder bias, from a tight calibration to 17°
}


AUTO = "auto"  # families=["auto"] is families=None: no family named, the fit climbs the default ladder


class FitRequestError(ValueError):
    """A fit request that cannot run on this dataset (unknown joint, unknown model family, bad budget)."""


LADDER_JUDGES = ("held-out", "training")  # FitRequest.ladder_judge


@dataclass
class FitRequest:
    joints: list[str] | None = None  # None = every joint in the recording
    # model families (models.families); None, or ["auto"]: climb the default ladder (fitting/ladder.py)
    families: list[str] | None = field(default_factory=lambda: ["dcmotor"])
    generations: int = 200
    population: int = 16  # per CMA-ES run; four runs search side by side
    seed: int = 0
    refine_iterations: int = 200
    device: str = "cpu"
    search_backend: str = "cmaes"  # or "optuna": the same CMA-ES through an Optuna study
    decimation: int = 1  # physics steps per log sample; commands held, delay counted in physics steps
    joint_terms: list[str] | None = None  # None: each family's default (armature, friction, viscous_friction)
    add_terms: list[str] | None = None  # joint terms added to every family's own (e.g. encoder_offset)
    effort_mode: str = "explicit"  # or "implicit": Newton's implicit effort mode, for stiff gains
    window_s: float | None = (
        1.0  # training rollouts restart from the log every window_s seconds (None: never)
    )
    use_logged_gains: bool = False  # segments' recorded kp/kd (metadata, SI) replace the fitted gains there
    holdout: str | None = None  # "KEY=VALUE": recordings of segments whose metadata KEY equals VALUE validate
    folds: int | None = None  # k-fold cross-validation over whole recordings; final fit on every segment
    folds_by: str | None = (
        None  # metadata KEY: leave-one-value-out folds (e.g. "kp"); final fit on every segment
    )
    validate_last: float | None = None  # the last fraction of every segment validates (a split in time)
    budget_s: float | None = (
        None  # wall-clock budget for the whole fit: search stops, keeps its best, refines
    )
    networks: dict | None = (
        None  # options of the mlp/lstm families (fitting.training.NetOptions), None: defaults
    )
    loss: str = (
        "mse"  # or "position_mae": mean |position error|, BAM's objective (fitting/objective.py LOSSES)
    )
    # the ladder's judge: "held-out" the split the fit reports; "training" an inner split of the training part,
    # the pick refitted on the whole of it and the held-out part left untouched (fitting/ladder.py)
    ladder_judge: str = "held-out"
    models: InitVar[list[str] | None] = None  # deprecated alias of `families` (the field's name before 0.3)

    def __post_init__(self, models: list[str] | None) -> None:
        if models is not None:
            warnings.warn(
                "FitRequest(models=...) is deprecated: use families=", DeprecationWarning, stacklevel=3
            )
            self.families = list(models)
        if self.families == [AUTO]:  # the ladder's spelled name: the API can ask for it without a null
            self.families = None

    @classmethod
    def from_dict(cls, d: dict) -> FitRequest:
        """A stored or posted request as a FitRequest: the deprecated key `models` is read as `families`; keys
        this version does not know (older rows) are dropped."""
        d = dict(d)
        if "models" in d:
            old = d.pop("models")
            d.setdefault("families", old)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def check_fields(rec: Recording, req: FitRequest) -> None:
    """The request's own fields against their bounds and the dataset's names; FitRequestError naming the problem."""
    max_joints, max_folds = 64, int(BOUNDS["folds"][1])  # every field that sizes work is bounded (issue 15)
    if req.joints is not None and len(req.joints) > max_joints:
        raise FitRequestError(f"joints names {len(req.joints)} joints; the limit is {max_joints} per fit")
    for what, names in (
        ("joints", req.joints or []),
        ("families", req.families or []),
        ("joint_terms", req.joint_terms or []),
        ("add_terms", req.add_terms or []),
    ):
        seen: set[str] = set()
        twice: set[str] = set()
        for n in names:
            (twice if n in seen else seen).add(n)
        if twice:
            raise FitRequestError(
                f"{what} lists {', '.join(map(repr, sorted(twice)))} more than once; name each once"
            )
    if req.folds is not None and req.folds > max_folds:  # the lower bound and the recordings: plan_split
        raise FitRequestError(f"folds must be between 2 and {max_folds}, got {req.folds}")
    for name in req.joints or []:
        if name not in rec.joint_names:
            raise FitRequestError(f"unknown joint {name!r}: the dataset has joints {rec.joint_names}")
    if req.joints is not None and not req.joints:
        raise FitRequestError("joints is empty: name at least one joint or omit the field")
    if req.families is not None and not req.families:
        raise FitRequestError(
            f"families is empty: choose from {sorted(FAMILIES)}, or give {AUTO!r} for the default ladder"
        )
    if AUTO in (req.families or []):
        raise FitRequestError(
            f"families {AUTO!r} climbs the default ladder: give it alone, not with other families"
        )
    for m in req.families or []:
        if m not in FAMILIES and m not in NET_FAMILIES:
            raise FitRequestError(
                f"unknown model family {m!r}: choose from {sorted(FAMILIES) + list(NET_FAMILIES)}"
            )
    (g0, g1), (p0, p1), (d0, d1) = BOUNDS["generations"], BOUNDS["population"], BOUNDS["decimation"]
    if not g0 <= req.generations <= g1:
        raise FitRequestError(f"budget.generations must be between {g0} and {g1}, got {req.generations}")
    if not p0 <= req.population <= p1:
        raise FitRequestError(f"budget.population must be between {p0} and {p1}, got {req.population}")
    if not d0 <= req.decimation <= d1:
        raise FitRequestError(
            f"decimation must be between {d0} and {d1} physics steps per sample, got {req.decimation}"
        )
    for what, terms in (("joint_terms", req.joint_terms or []), ("add_terms", req.add_terms or [])):
        if len(terms) > len(JOINT_TERMS):
            raise FitRequestError(f"{what} names {len(terms)} terms; there are {len(JOINT_TERMS)}")
        for term in terms:
            if term not in JOINT_TERMS:
                raise FitRequestError(
                    f"unknown joint term {term!r} in {what}: choose from {list(JOINT_TERMS)}"
                )
    if req.window_s is not None and not 0.01 <= req.window_s <= 86_400:
        raise FitRequestError(f"window_s must be between 0.01 and 86400 seconds or null, got {req.window_s}")
    if req.ladder_judge not in LADDER_JUDGES:
        raise FitRequestError(
            f"ladder_judge must be one of {', '.join(LADDER_JUDGES)}, got {req.ladder_judge!r}"
        )
    if req.effort_mode not in EFFORT_MODES:
        raise FitRequestError(f"unknown effort mode {req.effort_mode!r}: choose from {list(EFFORT_MODES)}")
    if req.loss not in LOSSES:
        raise FitRequestError(f"unknown loss {req.loss!r}: choose from {list(LOSSES)}")
    if req.search_backend not in BACKENDS:
        raise FitRequestError(f"unknown search backend {req.search_backend!r}: choose from {list(BACKENDS)}")
    if req.validate_last is not None and (
        isinstance(req.validate_last, bool)
        or not isinstance(req.validate_last, int | float)
        or not 0.01 <= req.validate_last <= 0.9
    ):
        raise FitRequestError(
            f"validate_last must be a fraction between 0.01 and 0.9, got {req.validate_last!r}"
        )
    check_numbers(req)


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_numbers(req: FitRequest) -> None:
    """The seed, the budget and the device: a value numpy, the clock or Warp would refuse mid-fit, refused now."""
    s0, s1 = BOUNDS["budget_s"]
    if req.budget_s is not None and (not _number(req.budget_s) or not s0 <= req.budget_s <= s1):
        raise FitRequestError(
            f"budget.seconds must be between {s0:g} and {s1:g} (one day) or null, got {req.budget_s!r}"
        )
    lo, hi = (int(b) for b in BOUNDS["seed"])
    if not isinstance(req.seed, int) or isinstance(req.seed, bool) or not lo <= req.seed <= hi:
        raise FitRequestError(f"seed must be an integer between {lo} and {hi} (2^32 - 1), got {req.seed!r}")
    if not isinstance(req.device, str) or not re.fullmatch(DEVICE_PATTERN, req.device):
        raise FitRequestError(f"device must be cpu, cuda or cuda:N, got {str(req.device)[:40]!r}")


def cuda_device_count() -> int:
    """CUDA devices Warp sees on this machine (0 without a driver or GPU)."""
    import warp as wp

    from ..models import kernels  # noqa: F401  (initialises Warp quietly)

    return int(wp.get_cuda_device_count())


def check_device(device: str) -> None:
    """Refuse a CUDA device this machine does not have (FitRequestError), before a fit is queued or run."""
    if not device.startswith("cuda"):
        return
    count = cuda_device_count()
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        have = "no CUDA GPU" if count == 0 else f"{count} CUDA device(s), cuda:0..cuda:{count - 1}"
        raise FitRequestError(f"device {device!r} is not available: this machine has {have}; use device cpu")
