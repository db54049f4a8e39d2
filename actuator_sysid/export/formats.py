"""The export registry: each export is one writer module plus one `ExportFormat` here — its file name, media
type, help text, renderer, the findings it contributes to validation.json, the family test that picks its model
per joint, the consumer that replays it, and for a whole-robot fit its `RobotWriter`. Format lists
(export.FORMATS, the CLI's `export --format`), media types and help texts are read from here, and
`formats_for(result)` says which formats a fit (joint or robot) exports.

Renderers and findings import their writer module when called, so importing the registry stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..datasets.recording import Recording
from ..fitting.result import ResultLike, RobotResult, RobotResultLike, as_result
from ..models.families import Family
from .selection import ExportError, Finding

if TYPE_CHECKING:
    import numpy as np

    from ..models.robot import RobotModel
    from .robot_common import ReplayLog
    from .selection import ChosenModel


@dataclass(frozen=True)
class RenderArgs:
    """What every text renderer may use (each takes the options its consumer has)."""

    result: ResultLike
    rec: Recording | None
    families: dict[str, str] | str | None
    field_names: str = "isaaclab-3"
    backend: str = "newton"
    loads: dict[str, dict] | None = None
    robot_usd: str | bytes | None = None

    @property
    def per_joint(self) -> dict[str, str] | None:
        """`families` as {joint: family} (one family name applies to every joint)."""
        fam = self.families
        return {j: fam for j in as_result(self.result).joints} if isinstance(fam, str) else fam


Renderer = Callable[[RenderArgs], str]
Findings = Callable[[ResultLike, Recording | None, dict[str, str]], list[Finding]]


@dataclass(frozen=True)
class RobotArgs:
    """What a whole-robot writer uses: the fit (whose creation date its files state, RobotResult.fitted_on)
    and the robot model it was fitted through."""

    result: RobotResult
    robot: RobotModel


# (replayed text, robot, the held-out log part, encoder bias per joint, each joint's model) → positions (T, J)
RobotReplay = Callable[[str, "RobotModel", "ReplayLog", "np.ndarray", "dict[str, ChosenModel]"], "np.ndarray"]


@dataclass(frozen=True)
class RobotWriter:
    """How one consumer's files of a whole-robot fit are written (together: isaaclab.json is checked against
    isaaclab.py) and replayed on the whole robot. fit.json keeps what it noted under `exports[consumer]` and
    its replay under `replays.consumers[consumer]`."""

    consumer: str  # isaaclab, newton, mujoco
    render: Callable[[RobotArgs], tuple[dict[str, str], dict[str, Any]]]  # → {file: text}, what it noted
    replays: str  # the file its replay reads
    replay: RobotReplay


@dataclass(frozen=True)
class ExportFormat:
    """One export format, registered once."""

    name: str  # the file name a fit stores it under, and the CLI's --format value
    media_type: str  # what the service serves it as
    help: str  # one line for `export --format` and the API docs
    render: Renderer | None = None  # text formats; binary ones are network checkpoints (render_bytes)
    findings: Findings | None = None  # its consumer's static findings (once per consumer, on one format)
    expresses: Callable[[Family], bool] | None = None  # which fitted family it writes per joint (None: best)
    consumer: str = ""  # the consumer that replays it (consumer_replay.py): isaaclab, newton, mujoco, or ""
    replayed_on_store: bool = True  # render_all replays it (False: another format's replay covers it)
    robot: RobotWriter | None = None  # how a whole-robot fit writes and replays it (None: no robot export)

    @property
    def binary(self) -> bool:
        return self.render is None


def _isaaclab(kind: str) -> Renderer:
    def render(a: RenderArgs) -> str:
        from . import isaaclab

        fn = {"py": isaaclab.render_python, "json": isaaclab.render_json, "yaml": isaaclab.render_yaml}[kind]
        return fn(
            a.result, a.per_joint, field_names=a.field_names, backend=a.backend, rec=a.rec, loads=a.loads
        )

    return render


def _newton(a: RenderArgs) -> str:
    from .newton_usd import render_usda

    return render_usda(a.result, a.rec, families=a.families, loads=a.loads, robot_usd=a.robot_usd)


def _mjcf(a: RenderArgs) -> str:
    from .mjcf import render_mjcf

    return render_mjcf(a.result, a.rec, families=a.families, loads=a.loads)


def _mjlab(a: RenderArgs) -> str:
    from .mjlab import render_mjlab

    return render_mjlab(a.result, a.families)


def _mjlab_expresses(fam: Family) -> bool:
    from .mjlab import expresses

    return expresses(fam)


def _randomization(a: RenderArgs) -> str:
    from .randomization import render_randomization

    return render_randomization(a.result, a.families)


def _isaaclab_findings(result: ResultLike, rec: Recording | None, files: dict[str, str]) -> list[Finding]:
    """§A.11 hazards of the Isaac Lab cfgs (ACTUATORS, ACTUATORS_NET, and what ACTUATORS_BEST adds)."""
    from . import isaaclab

    result = as_result(result)
    joints = list(result.joints)
    try:
        out = isaaclab.cfg_hazards(isaaclab.actuator_cfgs(result), joints)
        out += isaaclab.cfg_hazards(isaaclab.net_cfgs(result), joints)
        best = isaaclab.best_cfgs(result, rec=rec)
        if best is not None:
            out += [
                f
                for f in isaaclab.cfg_hazards(best, joints)
                if f.code
                in (
                    "EXPORT.ISAACLAB.custom_class",
                    "EXPORT.ISAACLAB.friction_approximated",
                    "EXPORT.ISAACLAB.friction_estimated",
                )
            ]
    except ExportError as e:
        out = [Finding("EXPORT.ISAACLAB.unavailable", "warning", "isaaclab", str(e))]
    return out


def _newton_findings(result: ResultLike, rec: Recording | None, files: dict[str, str]) -> list[Finding]:
    """NEWTON.DJ.001 on the stage, and what the writer noted."""
    from .newton_usd import build_stage
    from .validate import validate_stage

    try:
        stage, notes = build_stage(result, rec)
        return notes + validate_stage(stage)
    except ExportError as e:
        return [Finding("EXPORT.NEWTON.unavailable", "warning", "newton.usda", str(e))]


def _checkpoint_findings(result: ResultLike, rec: Recording | None, files: dict[str, str]) -> list[Finding]:
    from .checkpoints import checkpoint_findings

    return checkpoint_findings(result)


def _mjcf_findings(result: ResultLike, rec: Recording | None, files: dict[str, str]) -> list[Finding]:
    """What the MJCF export substitutes and approximates per joint (with a log or an MJCF file to judge)."""
    from . import mjcf
    from .selection import choose

    if "mjcf.xml" not in files and rec is None:
        return []
    try:
        typed = as_result(result)
        return mjcf.model_findings(typed, choose(typed, expresses=mjcf.expresses), rec)
    except ExportError as e:  # e.g. a fit of networks alone: no MJCF actuator to judge
        return [Finding("EXPORT.MJCF.unavailable", "warning", "mjcf.xml", str(e))]


def _isaaclab_expresses(fam: Family) -> bool:
    return bool(fam.isaaclab_cfg)


def _newton_expresses(fam: Family) -> bool:
    from .newton_usd import expresses

    return expresses(fam)


def _mjcf_expresses(fam: Family) -> bool:
    from .mjcf import expresses

    return expresses(fam)


def _robot_writer(module: str, consumer: str, replays: str) -> RobotWriter:
    """The writer module's `render_robot`, and robot_replay.py's `replay_<consumer>`, imported when called."""
    from importlib import import_module

    def render(a: RobotArgs) -> tuple[dict[str, str], dict[str, Any]]:
        return import_module(f"{__package__}.{module}").render_robot(a)

    def replay(text: str, robot: RobotModel, lg: ReplayLog, bias: np.ndarray, models: dict) -> np.ndarray:
        return getattr(import_module(f"{__package__}.robot_replay"), f"replay_{consumer}")(
            text, robot, lg, bias, models
        )

    return RobotWriter(consumer, render, replays, replay)


_ROBOT_ISAACLAB = _robot_writer("robot_isaaclab", "isaaclab", "isaaclab.py")
_NET = "a fitted network's checkpoint, written to --out or a file of that name"
# the order is validation.json's findings order (Isaac Lab, Newton, checkpoints, MuJoCo)
REGISTRY: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat(
            "isaaclab.py",
            "text/x-python",
            "Isaac Lab ActuatorCfg source (ACTUATORS, ACTUATORS_BEST)",
            _isaaclab("py"),
            _isaaclab_findings,
            _isaaclab_expresses,
            "isaaclab",
            robot=_ROBOT_ISAACLAB,
        ),
        ExportFormat(
            "isaaclab.json",
            "application/json",
            "the Isaac Lab cfgs as JSON",
            _isaaclab("json"),
            expresses=_isaaclab_expresses,
            consumer="isaaclab",
            robot=_ROBOT_ISAACLAB,
        ),
        ExportFormat(
            "isaaclab.yaml",
            "application/yaml",
            "the Isaac Lab cfgs as YAML",
            _isaaclab("yaml"),
            expresses=_isaaclab_expresses,
            consumer="isaaclab",
            replayed_on_store=False,
        ),  # isaaclab.json's
        ExportFormat(
            "newton.usda",
            "text/plain",
            "Newton 1.8 USD: NewtonActuator prims",
            _newton,
            _newton_findings,
            _newton_expresses,
            "newton",
            robot=_robot_writer("robot_usd", "newton", "newton.usda"),
        ),
        ExportFormat(
            "torchscript.pt",
            "application/octet-stream",
            f"Isaac Lab's TorchScript net: {_NET}",
            findings=_checkpoint_findings,
        ),
        ExportFormat(
            "newton.onnx",
            "application/octet-stream",
            f"Newton's ONNX net (the one Newton 1.8 recommends): {_NET}",
        ),
        ExportFormat(
            "newton.pt2", "application/zip", f"Newton's Torch net (deprecated in Newton 1.8): {_NET}"
        ),
        ExportFormat(
            "mjcf.xml",
            "application/xml",
            "MuJoCo MJCF classes and a standalone pendulum model",
            _mjcf,
            _mjcf_findings,
            _mjcf_expresses,
            "mujoco",
            robot=_robot_writer("robot_mjcf", "mujoco", "mjcf.xml"),
        ),
        ExportFormat(
            "randomization.json",
            "application/json",
            "domain-randomization ranges from the intervals",
            _randomization,
        ),
        ExportFormat(
            "mjlab_cfg.py",
            "text/x-python",
            "mjlab 1.6 actuator cfg source (ACTUATORS)",
            _mjlab,
            expresses=_mjlab_expresses,
        ),
    )
}
TEXT_FORMATS = tuple(n for n, f in REGISTRY.items() if not f.binary)
BINARY_FORMATS = tuple(n for n, f in REGISTRY.items() if f.binary)
FORMATS = TEXT_FORMATS + BINARY_FORMATS
REPLAYED = tuple(n for n, f in REGISTRY.items() if f.consumer and f.replayed_on_store)
CONSUMERS = {n: f.consumer for n, f in REGISTRY.items() if f.consumer}
ROBOT_FORMATS = tuple(n for n, f in REGISTRY.items() if f.robot is not None)
# consumer → its whole-robot writer, in registry order (each written once, with all its files)
ROBOT_WRITERS = {f.robot.consumer: f.robot for f in REGISTRY.values() if f.robot is not None}


def whole_robot(result: ResultLike | RobotResultLike) -> bool:
    """Whether a fit result (typed, or as fit.json / the service stores it) is a whole-robot fit."""
    if isinstance(result, RobotResult):
        return True
    return isinstance(result, Mapping) and result.get("kind") == "robot"


def formats_for(result: ResultLike | RobotResultLike) -> dict[str, ExportFormat]:
    """The formats a fit exports, by name, and how: a whole-robot fit's through each one's `robot` writer
    (whether this robot allows it, the writer says), a joint fit's through `render` (text) or render_bytes."""
    if whole_robot(result):
        return {n: REGISTRY[n] for n in ROBOT_FORMATS}
    return dict(REGISTRY)


def get_format(name: str) -> ExportFormat:
    """Registry lookup with an error that lists the formats."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ExportError(f"unknown export format {name!r}: choose from {list(FORMATS)}") from None


def media_type(name: str) -> str:
    """The media type an export (or another stored file, by its extension) is served as."""
    if name in REGISTRY:
        return REGISTRY[name].media_type
    ext = "." + name.rsplit(".", 1)[-1]
    return next((f.media_type for n, f in REGISTRY.items() if n.endswith(ext)), "application/octet-stream")


def format_help() -> str:
    """The `export --format` help: every format and what it is."""
    return "; ".join(f"{n}: {f.help}" for n, f in REGISTRY.items())
