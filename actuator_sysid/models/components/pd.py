"""The PD drive (§A.3, Newton ControllerPD): τ = kp·(q_des − q) + kd·(qd_des − qd) + τ_ff."""

from __future__ import annotations

from typing import Any

from .base import Component, Model, Param, PlantBound

STIFFNESS = Param(
    "stiffness",
    "N·m/rad",
    1e-2,
    1e4,
    "log",
    0.0,
    "newton:kp",
    "PD proportional gain Kp acting on q_des − q.",
    plant=PlantBound(200.0, ("effort",), decades=5.0),  # up to the plant's effort scale at 5 mrad of error
)
DAMPING = Param(
    "damping",
    "N·m·s/rad",
    1e-4,
    1e2,
    "log",
    0.0,
    "newton:kd",
    "PD derivative gain Kd acting on qd_des − qd.",
    plant=PlantBound(10.0, ("effort/speed",), decades=5.0),
)


class PD(Component):
    """Newton's NewtonPDControlAPI: kp and kd always authored (0 when the family leaves one out)."""

    def newton_actuator(self, m: Model) -> tuple[list[str], dict[str, Any]]:
        return [self.newton_api], {p.newton_attr: m.value(p.name) or 0.0 for p in (STIFFNESS, DAMPING)}


COMPONENT = PD(
    "pd",
    "drive",
    10,
    "PD law on position and velocity errors plus feed-forward.",
    defines=(STIFFNESS, DAMPING),
    isaaclab_fields=("stiffness", "damping"),
    newton_api="NewtonPDControlAPI",
)
