"""The solver's own PD drive, integrated implicitly (Isaac Lab ImplicitActuator, §A.10; a UsdPhysics DriveAPI)."""

from __future__ import annotations

from .base import Model, Note
from .pd import DAMPING, PD, STIFFNESS


class Implicit(PD):
    """Newton writes it as a UsdPhysics DriveAPI (export/newton_usd.py); its actuator attributes are the PD's."""

    def notes(self, consumer: str, m: Model) -> list[Note]:
        if consumer == "newton":
            return [
                (
                    "implicit",
                    "info",
                    "the implicit family is the solver's own PD: written as a UsdPhysics "
                    "DriveAPI (stiffness/damping per degree), not a NewtonActuator",
                )
            ]
        return []


COMPONENT = Implicit(
    "implicit",
    "drive",
    160,
    "The solver's PD drive, implicit.",
    params=(STIFFNESS.name, DAMPING.name),
    flag=32,
    isaaclab_fields=("stiffness", "damping"),
    # the implicit telemetry clip is the solver's joint effort limit (§A.10)
    isaaclab_renames={"actuator_effort_limit": "joint_effort_limit"},
    newton_api="NewtonPDControlAPI",
    newton_doc="UsdPhysics DriveAPI (stiffness, damping per degree)",
)
