"""Model families as data: compositions of components — a drive, ordered clamps, an optional delay, joint terms.

Each component (models/components/) declares its parameters, its kernel flag bit and what each consumer
writes; a family only names them. The rollout kernel reads the flags; exporters loop over the family's
components. Adding a family is one line in FAMILIES plus its consumer class, never a new kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import parameters
from .components import COMPONENTS, Component, get, of_kind

# kernel flag bits (models/kernels.py reads the same values): each declared by its component
F_MAX_EFFORT = get("max_effort").flag  # box clip ±actuator_effort_limit (§A.3, Newton ClampingMaxEffort)
F_DC_MOTOR = get("dc_motor").flag  # four-quadrant DC-motor clip (§A.4, Newton ClampingDCMotor)
F_TABLE = get("position_table").flag  # position-dependent limit (§A.6, Newton ClampingPositionBased)
F_PID = get("pid").flag  # Newton DrivePID instead of PD (§C.2)
F_PHYSX_FRICTION = get("friction_physx").flag  # static + dynamic friction instead of Coulomb frictionloss
F_IMPLICIT = get(
    "implicit"
).flag  # the solver's PD, integrated implicitly (Isaac Lab ImplicitActuator, §A.10)
F_STRIBECK = get("friction_stribeck").flag  # BAM M2: a Stribeck peak above Coulomb friction near standstill
F_LOAD_FRICTION = get("friction_load").flag  # BAM M3/M4: friction grows with the gearbox load |τ_m − τ_e|
F_LOAD_DIRECTIONAL = get("friction_load_directional").flag  # BAM M5: separate motor- and external-side gains
F_LOAD_QUADRATIC = get(
    "friction_load_quadratic"
).flag  # BAM M6: quadratic load terms while motor and load oppose
# modes of a launch, not components
F_OPEN_LOOP = 64  # the actuator sees measured states (effort conformance, torque-supervised losses)
F_IMPLICIT_EFFORT = 128  # Newton's implicit effort mode: the effort solved at the predicted end-of-step state
assert not {F_OPEN_LOOP, F_IMPLICIT_EFFORT} & {c.flag for c in COMPONENTS}, (
    "mode bits collide with a component"
)
EFFORT_MODES = ("explicit", "implicit")
NET_FAMILIES = (
    "mlp",
    "lstm",
    "gru",
)  # actuator networks: models/networks.py, fitted by fitting/training.py, no kernel

DRIVES: dict[str, Component] = {c.name: c for c in of_kind("drive")}
CLAMPS: dict[str, Component] = {c.name: c for c in of_kind("clamp")}
DELAY = get("delay")
JOINT_COMPONENTS = of_kind("joint")
CLAMP_ORDER = tuple(CLAMPS)
# the joint terms a per-joint fit takes; ALL_JOINT_TERMS adds a whole-robot fit's own (models/components robot_only)
JOINT_TERMS = tuple(p for c in JOINT_COMPONENTS if not c.robot_only for p in c.params)
ALL_JOINT_TERMS = tuple(p for c in JOINT_COMPONENTS for p in c.params)
ROBOT_TERMS = tuple(p for c in JOINT_COMPONENTS if c.robot_only for p in c.params)
TERM_COMPONENT: dict[str, Component] = {p: c for c in JOINT_COMPONENTS for p in c.params}
DEFAULT_TERMS = ("armature", "friction", "viscous_friction")
STRIBECK_TERMS = get("friction_stribeck").params
LOAD_TERMS = ("load_friction",)
M4_TERMS = (*STRIBECK_TERMS, *LOAD_TERMS, "load_friction_stribeck")
M5_TERMS = (*M4_TERMS, "load_friction_external", "load_friction_external_stribeck")
M6_TERMS = (*M5_TERMS, "load_friction_quadratic_motor", "load_friction_quadratic_external")
RICH_FRICTION_TERMS = tuple(p for c in JOINT_COMPONENTS if c.budget for p in c.params)
"""BAM's friction-budget terms (M2–M6): no Isaac Lab, Newton or MuJoCo attribute holds them."""
# a term that needs others to mean anything brings them along (each component says which)
_COMPANIONS: dict[str, tuple[str, ...]] = {
    t: need for c in JOINT_COMPONENTS for t, need in c.companions.items()
}


@dataclass(frozen=True)
class Family:
    """An actuator model family and the consumer class that runs it."""

    name: str
    drive: str = "pd"
    clamps: tuple[str, ...] = ()
    delay: bool = False
    joint_terms: tuple[str, ...] = DEFAULT_TERMS
    isaaclab_cfg: str = ""  # Isaac Lab 3.0 cfg class, "" when Isaac Lab has none
    isaaclab_custom: str = ""  # our explicit Isaac Lab subclass when Isaac Lab has none (export/isaaclab.py)
    isaaclab_budget: str = ""  # our subclass of this family's class carrying BAM's friction budget
    doc: str = ""
    approximates: str = ""  # the consumer-native family this one extends with richer friction ("" if none)
    mujoco_family: str = (
        ""  # for a family MuJoCo cannot hold although Isaac Lab can: the nearest one it holds
    )

    @property
    def fitted_with(self) -> str:
        """The family a fit of this one brings along, so every consumer's export has a fit it holds exactly."""
        return self.approximates or self.mujoco_family

    def __post_init__(self) -> None:
        assert self.drive in DRIVES, self.drive
        assert list(self.clamps) == [c for c in CLAMP_ORDER if c in self.clamps], "clamps in kernel order"
        assert set(self.joint_terms) <= set(ALL_JOINT_TERMS), self.joint_terms
        assert all(set(_COMPANIONS.get(t, ())) <= set(self.joint_terms) for t in self.joint_terms), (
            self.joint_terms
        )

    @property
    def components(self) -> tuple[Component, ...]:
        """The components this family composes: its drive, its clamps in kernel order, its delay, its joint terms'."""
        joint = tuple(c for c in JOINT_COMPONENTS if set(c.params) & set(self.joint_terms))
        return (
            DRIVES[self.drive],
            *(CLAMPS[c] for c in self.clamps),
            *((DELAY,) if self.delay else ()),
            *joint,
        )

    @property
    def params(self) -> tuple[str, ...]:
        """Names of the parameters this family fits, in registry order."""
        names = set(self.joint_terms)
        for c in self.components:
            if c.kind != "joint":
                names |= set(c.params)
        return tuple(p.name for p in parameters.PARAMS if p.name in names)

    @property
    def flags(self) -> int:
        """Kernel flag bits for this family: a joint term's bit when its switching parameter is fitted."""
        return sum(c.flag for c in self.components if c.kind != "joint" or c.switch in self.joint_terms)

    @property
    def rich_friction(self) -> tuple[str, ...]:
        """The BAM friction terms this family fits that consumers cannot hold natively."""
        return tuple(t for t in self.joint_terms if t in RICH_FRICTION_TERMS)

    def with_terms(self, joint_terms: tuple[str, ...]) -> Family:
        """The same family with other joint terms (friction model, encoder offset), companions included."""
        wanted = set(joint_terms).union(*(_COMPANIONS.get(t, ()) for t in joint_terms))
        return replace(self, joint_terms=tuple(t for t in ALL_JOINT_TERMS if t in wanted))


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "implicit",
            drive="implicit",
            clamps=("max_effort",),
            isaaclab_cfg="ImplicitActuatorCfg",
            doc="The solver's own PD drive, integrated implicitly (Isaac Lab ImplicitActuator; "
            "effort telemetry clipped to the joint effort limit).",
        ),
        Family(
            "ideal_pd",
            clamps=("max_effort",),
            isaaclab_cfg="IdealPDActuatorCfg",
            doc="PD law clipped to ±actuator_effort_limit (Isaac Lab IdealPDActuator).",
        ),
        Family(
            "dcmotor",
            clamps=("dc_motor",),
            isaaclab_cfg="DCMotorCfg",
            isaaclab_budget="DCMotorBAMFrictionCfg",
            doc="PD law clipped by the four-quadrant DC-motor torque–speed envelope (Isaac Lab DCMotor).",
        ),
        Family(
            "delayed_pd",
            clamps=("max_effort",),
            delay=True,
            isaaclab_cfg="DelayedPDActuatorCfg",
            doc="IdealPD on commands delayed by a whole number of physics steps (Isaac Lab DelayedPDActuator).",
        ),
        Family(
            "dcmotor_delay",
            clamps=("dc_motor",),
            delay=True,
            isaaclab_custom="DelayedDCMotorCfg",
            isaaclab_budget="DelayedDCMotorBAMFrictionCfg",
            doc="DC-motor envelope and command delay together, as a NewtonActuator (PD + DC clamp + delay) "
            "holds them; Isaac Lab has no single class for it.",
        ),
        Family(
            "remotized_pd",
            clamps=("position_table",),
            delay=True,
            isaaclab_cfg="RemotizedPDActuatorCfg",
            mujoco_family="delayed_pd",  # MuJoCo's forcerange is a constant: no position torque table
            doc="Delayed PD clipped by a position-dependent torque limit table (Isaac Lab RemotizedPDActuator).",
        ),
        Family(
            "pid",
            drive="pid",
            clamps=("max_effort",),
            delay=True,
            isaaclab_custom="DelayedPIDActuatorCfg",
            doc="Newton DrivePID with integral clamp, max-effort clamp and delay.",
        ),
        # BAM's richer friction (docs/prior-art.md M2–M6) on the DC-motor envelope: no consumer class holds it;
        # they show how much fidelity the Isaac-Lab-native dcmotor gives up, and export as dcmotor + findings,
        # except Isaac Lab's ACTUATORS_BEST, whose explicit subclass carries the budget (export/isaaclab.py)
        Family(
            "dcmotor_stribeck",
            clamps=("dc_motor",),
            joint_terms=(*DEFAULT_TERMS, *STRIBECK_TERMS),
            approximates="dcmotor",
            doc="DCMotor with BAM M2 friction: Coulomb plus a Stribeck peak that fades with speed.",
        ),
        Family(
            "dcmotor_loadfric",
            clamps=("dc_motor",),
            joint_terms=(*DEFAULT_TERMS, *LOAD_TERMS),
            approximates="dcmotor",
            doc="DCMotor with BAM M3 friction: Coulomb plus a share of the gearbox load |τ_m − τ_e|.",
        ),
        Family(
            "dcmotor_stribeck_load",
            clamps=("dc_motor",),
            joint_terms=(*DEFAULT_TERMS, *M4_TERMS),
            approximates="dcmotor",
            doc="DCMotor with BAM M4 friction: Stribeck and load-dependent terms, with a Stribeck load part.",
        ),
        Family(
            "dcmotor_directional_load",
            clamps=("dc_motor",),
            joint_terms=(*DEFAULT_TERMS, *M5_TERMS),
            approximates="dcmotor",
            doc="DCMotor with BAM M5 friction: M4 with separate motor-side and external-side load gains.",
        ),
        Family(
            "dcmotor_quadratic_load",
            clamps=("dc_motor",),
            joint_terms=(*DEFAULT_TERMS, *M6_TERMS),
            approximates="dcmotor",
            doc="DCMotor with BAM M6 friction: M5 plus quadratic load terms while motor and load oppose.",
        ),
        Family(
            "dcmotor_stribeck_delay",
            clamps=("dc_motor",),
            delay=True,
            joint_terms=(*DEFAULT_TERMS, *STRIBECK_TERMS),
            approximates="dcmotor_delay",
            doc="dcmotor_delay with BAM M2 (Stribeck) friction.",
        ),
        # the load friction families with the command delay: the rungs of the default fit's ladder
        # (fitting/ladder.py), each nesting dcmotor_delay
        Family(
            "dcmotor_loadfric_delay",
            clamps=("dc_motor",),
            delay=True,
            joint_terms=(*DEFAULT_TERMS, *LOAD_TERMS),
            approximates="dcmotor_delay",
            doc="dcmotor_delay with BAM M3 (load-dependent) friction.",
        ),
        Family(
            "dcmotor_stribeck_load_delay",
            clamps=("dc_motor",),
            delay=True,
            joint_terms=(*DEFAULT_TERMS, *M4_TERMS),
            approximates="dcmotor_delay",
            doc="dcmotor_delay with BAM M4 friction: Stribeck and load-dependent terms.",
        ),
        Family(
            "dcmotor_directional_load_delay",
            clamps=("dc_motor",),
            delay=True,
            joint_terms=(*DEFAULT_TERMS, *M5_TERMS),
            approximates="dcmotor_delay",
            doc="dcmotor_delay with BAM M5 friction: separate motor-side and external-side load gains.",
        ),
        Family(
            "dcmotor_quadratic_load_delay",
            clamps=("dc_motor",),
            delay=True,
            joint_terms=(*DEFAULT_TERMS, *M6_TERMS),
            approximates="dcmotor_delay",
            doc="dcmotor_delay with BAM M6 friction: M5 plus quadratic load terms while motor and load oppose.",
        ),
        # MuJoCo's own <dcmotor> (position mode): the plant is MuJoCo itself (models/mujoco_dcmotor.py), fitted
        # by fitting/mujoco_dcmotor_fit.py; only the MJCF export holds it
        *(
            Family(
                name,
                drive=name,
                joint_terms=(),
                doc=f"MuJoCo's own <dcmotor>: PD torque request through a voltage limit and back-EMF{extra}.",
            )
            for name, extra in (
                ("mujoco_dcmotor", ""),
                ("mujoco_dcmotor_lugre", ", with LuGre friction"),
                ("mujoco_dcmotor_slew", ", with a setpoint slew limit"),
                ("mujoco_dcmotor_cogging", ", with cogging torque"),
                ("mujoco_dcmotor_inductance", ", with an electrical time constant"),
            )
        ),
    )
}


def is_mujoco_dcmotor(family: Family) -> bool:
    """Whether a family's plant is MuJoCo's own `<dcmotor>` (models/mujoco_dcmotor.py), not the fused kernel."""
    return family.drive.startswith("mujoco_dcmotor")


def get_family(name: str) -> Family:
    """Family lookup with an error that lists the known names."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown model family {name!r}; known: {sorted(FAMILIES)}") from None


def effort_window(family: str, params: dict[str, float], v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) effort over joint velocities v: the intersection of the family's clamp windows (an actuator
    network: the DC-motor envelope Isaac Lab clips it with); with none, the box of a fitted rated effort."""
    comps = (CLAMPS["dc_motor"],) if family in NET_FAMILIES else get_family(family).components
    windows = [w for c in comps if (w := c.envelope(v, params)) is not None]
    if not windows:  # the box of a fitted rated effort, as the max-effort clamp draws it
        box = CLAMPS["max_effort"].envelope(v, params)
        assert box is not None
        return box
    lo, hi = windows[0]
    for w_lo, w_hi in windows[1:]:
        lo, hi = np.maximum(lo, w_lo), np.minimum(hi, w_hi)
    return lo, hi
