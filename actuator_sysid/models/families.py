"""Model families as data: a drive, an ordered list of clamps, an optional delay and joint terms.

The rollout kernel reads the flags; exporters read the same description to pick the consumer class.
Adding a family is one line in FAMILIES plus its consumer mapping, never a new kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import parameters

# kernel flag bits (models/kernels.py reads the same values)
F_MAX_EFFORT = 1  # box clip ±actuator_effort_limit (§A.3, Newton ClampingMaxEffort)
F_DC_MOTOR = 2  # four-quadrant DC-motor clip (§A.4, Newton ClampingDCMotor)
F_TABLE = 4  # position-dependent limit (§A.6, Newton ClampingPositionBased)
F_PID = 8  # Newton DrivePID instead of PD (§C.2)
F_PHYSX_FRICTION = 16  # static + dynamic friction instead of Coulomb frictionloss
F_IMPLICIT = 32  # the solver's PD, integrated implicitly (Isaac Lab ImplicitActuator, §A.10)
F_OPEN_LOOP = 64  # the actuator sees measured states (effort conformance, torque-supervised losses)
F_IMPLICIT_EFFORT = 128  # Newton's implicit effort mode: the effort solved at the predicted end-of-step state
F_STRIBECK = 256  # BAM M2: a Stribeck peak above Coulomb friction near standstill (docs/prior-art.md)
F_LOAD_FRICTION = 512  # BAM M3/M4: friction grows with the gearbox load |τ_m − τ_e|
F_LOAD_DIRECTIONAL = 1024  # BAM M5: separate motor-side and external-side load gains
F_LOAD_QUADRATIC = 2048  # BAM M6: quadratic load terms while motor and load oppose
EFFORT_MODES = ("explicit", "implicit")
NET_FAMILIES = ("mlp", "lstm", "gru")  # actuator networks: models/networks.py, fitted by fitting/nets.py, no kernel

CLAMP_ORDER = ("max_effort", "dc_motor", "position_table")
_CLAMP_FLAG = {"max_effort": F_MAX_EFFORT, "dc_motor": F_DC_MOTOR, "position_table": F_TABLE}
_CLAMP_PARAMS = {
    "max_effort": ("actuator_effort_limit",),
    "dc_motor": ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit"),
    "position_table": tuple(f"lookup_effort_{k}" for k in range(parameters.TABLE_KNOTS)),
}
_DRIVE_PARAMS = {"pd": ("stiffness", "damping"), "pid": ("stiffness", "damping", "ki", "integral_max"),
                 "implicit": ("stiffness", "damping")}
JOINT_TERMS = ("armature", "friction", "dynamic_friction", "viscous_friction", "stribeck_friction",
               "stribeck_velocity", "stribeck_exponent", "load_friction", "load_friction_stribeck",
               "load_friction_external", "load_friction_external_stribeck", "load_friction_quadratic_motor",
               "load_friction_quadratic_external", "encoder_offset")
DEFAULT_TERMS = ("armature", "friction", "viscous_friction")
STRIBECK_TERMS = ("stribeck_friction", "stribeck_velocity", "stribeck_exponent")
LOAD_TERMS = ("load_friction",)
M4_TERMS = (*STRIBECK_TERMS, *LOAD_TERMS, "load_friction_stribeck")
M5_TERMS = (*M4_TERMS, "load_friction_external", "load_friction_external_stribeck")
M6_TERMS = (*M5_TERMS, "load_friction_quadratic_motor", "load_friction_quadratic_external")
RICH_FRICTION_TERMS = M6_TERMS
"""BAM's friction-budget terms (M2–M6): no Isaac Lab, Newton or MuJoCo attribute holds them."""
# a term that needs others to mean anything brings them along (a Stribeck peak needs its speed and shape;
# M5's external gain its motor-side one; M6's quadratic terms, as in BAM, the whole M5 budget)
_COMPANIONS = {"stribeck_friction": STRIBECK_TERMS, "stribeck_velocity": STRIBECK_TERMS,
               "stribeck_exponent": STRIBECK_TERMS, "load_friction_stribeck": M4_TERMS,
               "load_friction_external": ("load_friction", "load_friction_external"),
               "load_friction_external_stribeck": M5_TERMS,
               "load_friction_quadratic_motor": M6_TERMS, "load_friction_quadratic_external": M6_TERMS}


@dataclass(frozen=True)
class Family:
    """An actuator model family and the consumer class that runs it."""

    name: str
    drive: str = "pd"
    clamps: tuple[str, ...] = ()
    delay: bool = False
    joint_terms: tuple[str, ...] = DEFAULT_TERMS
    isaaclab_cfg: str = ""  # Isaac Lab 3.0 cfg class, "" when Isaac Lab has none
    doc: str = ""
    approximates: str = ""  # the consumer-native family this one extends with richer friction ("" if none)
    mujoco_family: str = ""  # for a family MuJoCo cannot hold although Isaac Lab can: the nearest one it holds

    @property
    def fitted_with(self) -> str:
        """The family a fit of this one brings along, so every consumer's export has a fit it holds exactly."""
        return self.approximates or self.mujoco_family

    def __post_init__(self) -> None:
        assert self.drive in _DRIVE_PARAMS, self.drive
        assert list(self.clamps) == [c for c in CLAMP_ORDER if c in self.clamps], "clamps in kernel order"
        assert set(self.joint_terms) <= set(JOINT_TERMS), self.joint_terms
        assert all(set(_COMPANIONS.get(t, ())) <= set(self.joint_terms) for t in self.joint_terms), self.joint_terms

    @property
    def params(self) -> tuple[str, ...]:
        """Names of the parameters this family fits, in registry order."""
        names = set(_DRIVE_PARAMS[self.drive]) | set(self.joint_terms)
        for c in self.clamps:
            names |= set(_CLAMP_PARAMS[c])
        if self.delay:
            names.add("delay")
        return tuple(p.name for p in parameters.PARAMS if p.name in names)

    @property
    def flags(self) -> int:
        """Kernel flag bits for this family."""
        f = sum(_CLAMP_FLAG[c] for c in self.clamps)
        f |= F_PID if self.drive == "pid" else 0
        f |= F_IMPLICIT if self.drive == "implicit" else 0
        f |= F_PHYSX_FRICTION if "dynamic_friction" in self.joint_terms else 0
        f |= F_STRIBECK if "stribeck_friction" in self.joint_terms else 0
        f |= F_LOAD_FRICTION if "load_friction" in self.joint_terms else 0
        f |= F_LOAD_DIRECTIONAL if "load_friction_external" in self.joint_terms else 0
        f |= F_LOAD_QUADRATIC if "load_friction_quadratic_motor" in self.joint_terms else 0
        return f

    @property
    def rich_friction(self) -> tuple[str, ...]:
        """The BAM friction terms this family fits that consumers cannot hold natively."""
        return tuple(t for t in self.joint_terms if t in RICH_FRICTION_TERMS)

    def with_terms(self, joint_terms: tuple[str, ...]) -> Family:
        """The same family with other joint terms (friction model, encoder offset), companions included."""
        wanted = set(joint_terms).union(*(_COMPANIONS.get(t, ()) for t in joint_terms))
        return replace(self, joint_terms=tuple(t for t in JOINT_TERMS if t in wanted))


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("implicit", drive="implicit", clamps=("max_effort",), isaaclab_cfg="ImplicitActuatorCfg",
               doc="The solver's own PD drive, integrated implicitly (Isaac Lab ImplicitActuator; "
                   "effort telemetry clipped to the joint effort limit)."),
        Family("ideal_pd", clamps=("max_effort",), isaaclab_cfg="IdealPDActuatorCfg",
               doc="PD law clipped to ±actuator_effort_limit (Isaac Lab IdealPDActuator)."),
        Family("dcmotor", clamps=("dc_motor",), isaaclab_cfg="DCMotorCfg",
               doc="PD law clipped by the four-quadrant DC-motor torque–speed envelope (Isaac Lab DCMotor)."),
        Family("delayed_pd", clamps=("max_effort",), delay=True, isaaclab_cfg="DelayedPDActuatorCfg",
               doc="IdealPD on commands delayed by a whole number of physics steps (Isaac Lab DelayedPDActuator)."),
        Family("dcmotor_delay", clamps=("dc_motor",), delay=True,
               doc="DC-motor envelope and command delay together, as a NewtonActuator (PD + DC clamp + delay) "
                   "holds them; Isaac Lab has no single class for it."),
        Family("remotized_pd", clamps=("position_table",), delay=True, isaaclab_cfg="RemotizedPDActuatorCfg",
               mujoco_family="delayed_pd",  # MuJoCo's forcerange is a constant: no position torque table
               doc="Delayed PD clipped by a position-dependent torque limit table (Isaac Lab RemotizedPDActuator)."),
        Family("pid", drive="pid", clamps=("max_effort",), delay=True,
               doc="Newton DrivePID with integral clamp, max-effort clamp and delay."),
        # BAM's richer friction (docs/prior-art.md M2–M6) on the DC-motor envelope: no consumer class holds it;
        # they show how much fidelity the Isaac-Lab-native dcmotor gives up, and export as dcmotor + findings,
        # except Isaac Lab's ACTUATORS_BEST, whose explicit subclass carries the budget (export/isaaclab.py)
        Family("dcmotor_stribeck", clamps=("dc_motor",), joint_terms=(*DEFAULT_TERMS, *STRIBECK_TERMS),
               approximates="dcmotor",
               doc="DCMotor with BAM M2 friction: Coulomb plus a Stribeck peak that fades with speed."),
        Family("dcmotor_loadfric", clamps=("dc_motor",), joint_terms=(*DEFAULT_TERMS, *LOAD_TERMS),
               approximates="dcmotor",
               doc="DCMotor with BAM M3 friction: Coulomb plus a share of the gearbox load |τ_m − τ_e|."),
        Family("dcmotor_stribeck_load", clamps=("dc_motor",), joint_terms=(*DEFAULT_TERMS, *M4_TERMS),
               approximates="dcmotor",
               doc="DCMotor with BAM M4 friction: Stribeck and load-dependent terms, with a Stribeck load part."),
        Family("dcmotor_directional_load", clamps=("dc_motor",), joint_terms=(*DEFAULT_TERMS, *M5_TERMS),
               approximates="dcmotor",
               doc="DCMotor with BAM M5 friction: M4 with separate motor-side and external-side load gains."),
        Family("dcmotor_quadratic_load", clamps=("dc_motor",), joint_terms=(*DEFAULT_TERMS, *M6_TERMS),
               approximates="dcmotor",
               doc="DCMotor with BAM M6 friction: M5 plus quadratic load terms while motor and load oppose."),
        Family("dcmotor_stribeck_delay", clamps=("dc_motor",), delay=True,
               joint_terms=(*DEFAULT_TERMS, *STRIBECK_TERMS), approximates="dcmotor_delay",
               doc="dcmotor_delay with BAM M2 (Stribeck) friction."),
    )
}


def get_family(name: str) -> Family:
    """Family lookup with an error that lists the known names."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown model family {name!r}; known: {sorted(FAMILIES)}") from None
