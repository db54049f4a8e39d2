"""What a component is: one drive, clamp, delay or joint term of an actuator model (Newton's `actuators` shape).

A component declares, in one module, the registry parameters it owns (`Param`), the kernel flag bit that
switches its maths on in the fused Warp kernel (models/kernels.py), its effort window for plots (numpy), and
what it writes for each consumer: Isaac Lab cfg fields, Newton USD API schemas and attributes (names from
`Param.newton`, the one map of Newton names), MJCF attributes, and the findings where a consumer cannot hold it.
The PyTorch oracle (models/oracle.py) does not read components: it is written again, independently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

TABLE_KNOTS = 5
"""Knots of the position-dependent torque-limit table (RemotizedPD, Newton ClampingPositionBased)."""
KINDS = ("drive", "clamp", "delay", "joint")
CONSUMERS = ("isaaclab", "newton", "mjcf")


@dataclass(frozen=True)
class PlantBound:
    """A range scaled to the plant a fit runs on, for a whole-robot fit, where a fixed range would be a cap.

    The upper bound is `multiple` × the largest of the plant's quantities `of` (a name, or "a/b" for a ratio:
    effort, speed, max_speed, acceleration, inertia, range); the lower bound is `decades` below it, or
    `lower` × the same quantity. fitting/space.py evaluates it on the plant's scales.
    """

    multiple: float
    of: tuple[str, ...]
    decades: float = 0.0
    lower: float | None = None


@dataclass(frozen=True)
class Param:
    """One fitted quantity: how it is named, measured, bounded and searched."""

    name: str  # Isaac Lab field name (or ours where Isaac Lab has none)
    unit: str
    lower: float
    upper: float
    scale: str  # "log" or "linear": how the search moves through [lower, upper]
    neutral: float  # value that switches the term off, used when a family does not include it
    newton: str  # Newton attribute the exporter writes ("newton:…"; "" where Newton has none)
    doc: str
    integer: bool = False
    plant: PlantBound | None = None  # the range a whole-robot fit searches, scaled to its model and log

    def clip(self, value: float) -> float:
        """Keep a value inside the registry bounds."""
        return min(max(value, self.lower), self.upper)

    @property
    def newton_attr(self) -> str:
        """The attribute name under the `newton:` namespace ("" when Newton has no such attribute)."""
        return self.newton.removeprefix("newton:") if self.newton.startswith("newton:") else ""


class Model(Protocol):
    """What an exporter hands a component: one joint's family and fitted values (export.selection.ChosenModel)."""

    joint: str
    family: Any  # models.families.Family
    params: dict[str, float]
    table_positions: list[float] | None

    def value(self, name: str) -> float | None: ...


Note = tuple[str, str, str]  # (finding code without the consumer prefix, severity, message)


@dataclass(frozen=True)
class Component:
    """One piece of an actuator model. Subclasses override the consumer hooks that differ from the defaults.

    `rank` orders components everywhere: the registry's parameter columns (the `defines` of every component in
    rank order), the clamps' order in the kernel, the joint terms' order.
    """

    name: str
    kind: str  # one of KINDS
    rank: int
    doc: str
    defines: tuple[Param, ...] = ()  # the registry parameters this component owns, declared once, here
    params: tuple[str, ...] = ()  # the registry parameters a family with this component fits ("" = defines)
    flag: int = 0  # kernel flag bit (models/kernels.py reads the same value)
    switch: str = ""  # a joint term: the parameter whose presence in a family's joint terms turns the flag on
    companions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a term → the terms it needs
    budget: bool = (
        False  # part of BAM's friction budget (docs/prior-art.md M2–M6), which no consumer field holds
    )
    isaaclab_fields: tuple[str, ...] = ()  # the Isaac Lab cfg fields it contributes, in the order written
    isaaclab_renames: dict[str, str] = field(
        default_factory=dict
    )  # a drive: other components' fields its class names
    newton_api: str = ""  # the Newton API schema it applies (docs/consumer-semantics.md §C.3)
    newton_doc: str = ""  # docs/models.md: how Newton USD holds it, where what it writes does not say
    robot_only: bool = False  # a whole-robot fit's term: the per-joint kernel has no maths for it

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
        if not self.params:
            object.__setattr__(self, "params", tuple(p.name for p in self.defines))

    def envelope(self, v: np.ndarray, params: dict[str, float]) -> tuple[np.ndarray, np.ndarray] | None:
        """The effort window (min, max) over joint velocities v for the torque–speed plot; None: no window."""
        return None

    def newton_actuator(self, m: Model) -> tuple[list[str], dict[str, Any]]:
        """API schemas and `newton:` attributes on the joint's NewtonActuator prim (§C.3)."""
        return [], {}

    def newton_joint(self, m: Model, angular: bool) -> dict[str, float]:
        """NewtonJointAPI attributes on the joint (§C.4): a joint term's parameters with a `newton:` name, SI."""
        if self.kind != "joint":
            return {}
        return {
            p.newton_attr: v for p in self.defines if p.newton_attr and (v := m.value(p.name)) is not None
        }

    def mjcf_joint(self, m: Model) -> dict[str, float]:
        """MJCF joint attributes (SI)."""
        return {}

    def isaaclab_values(self, values: dict[str, Any], m: Model) -> dict[str, Any]:
        """The Isaac Lab cfg values after this component (a term a field approximates rewrites it)."""
        return values

    def notes(self, consumer: str, m: Model) -> list[Note]:
        """What `consumer` cannot hold of this component for this model, as findings."""
        return []
