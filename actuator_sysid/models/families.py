"""Model families as data: a drive, an ordered list of clamps, an optional delay and joint terms.

The rollout kernel reads the flags; exporters read the same description to pick the consumer class.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import parameters

CLAMP_NONE, CLAMP_MAX_EFFORT, CLAMP_DC_MOTOR = 0, 1, 2
_CLAMP_CODE = {"max_effort": CLAMP_MAX_EFFORT, "dc_motor": CLAMP_DC_MOTOR}
_CLAMP_PARAMS = {
    "max_effort": ("actuator_effort_limit",),
    "dc_motor": ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit"),
}
_DRIVE_PARAMS = {"pd": ("stiffness", "damping")}


@dataclass(frozen=True)
class Family:
    """An actuator model family and the consumer class that runs it."""

    name: str
    drive: str = "pd"
    clamps: tuple[str, ...] = ()
    delay: bool = False
    joint_terms: tuple[str, ...] = ("armature", "friction", "viscous_friction")
    isaaclab_cfg: str = ""
    doc: str = ""

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
    def clamp_mode(self) -> int:
        """Kernel flag for the (single) clamp this family applies."""
        assert len(self.clamps) <= 1, "the kernel applies one clamp stage"
        return _CLAMP_CODE[self.clamps[0]] if self.clamps else CLAMP_NONE


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("ideal_pd", clamps=("max_effort",), isaaclab_cfg="IdealPDActuatorCfg",
               doc="PD law clipped to ±actuator_effort_limit (Isaac Lab IdealPDActuator)."),
        Family("dcmotor", clamps=("dc_motor",), isaaclab_cfg="DCMotorCfg",
               doc="PD law clipped by the four-quadrant DC-motor torque–speed envelope (Isaac Lab DCMotor)."),
    )
}


def get_family(name: str) -> Family:
    """Family lookup with an error that lists the known names."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown model family {name!r}; known: {sorted(FAMILIES)}") from None
