"""Viscous friction that differs by direction: while the joint turns backwards (qd < 0) its viscous coefficient is
viscous_friction · viscous_friction_negative_ratio (a gearbox or seal that drags more one way).

The kernel (models/kernels.py `viscous_coefficient`) picks the coefficient by the direction of qd at the start of
each physics step and integrates it implicitly, as the symmetric term; the oracle (models/oracle.py) writes the
same rule again. A joint the friction holds (qd within STILL_VELOCITY of 0, rounding) counts as turning forwards,
so float32 and float64 rollouts take the same branch. No consumer holds a direction-dependent damping: Isaac Lab, Newton and MuJoCo get the mean of the two
coefficients as their one viscous coefficient, with a finding that says so.
"""

from __future__ import annotations

from typing import Any

from .base import Component, Model, Note, Param
from .viscous import RAD_PER_DEG, VISCOUS

STILL_VELOCITY = 1e-6  # rad/s: below this backward speed the joint counts as held (forward coefficient)
RATIO = Param(
    "viscous_friction_negative_ratio",
    "1",
    0.1,
    10.0,
    "log",
    1.0,
    "",
    "Viscous coefficient for qd < 0 over viscous_friction (qd ≥ 0); 1 is symmetric damping.",
)


def mean_coefficient(m: Model) -> float | None:
    """The one symmetric coefficient a consumer gets: the mean of the forward and backward ones [N·m·s/rad]."""
    visc, ratio = m.value(VISCOUS.name), m.value(RATIO.name)
    return None if visc is None or ratio is None else visc * (1.0 + ratio) / 2.0


class DirectionalViscous(Component):
    """Overrides the symmetric viscous term's consumer value with the mean; each consumer's finding says so."""

    def newton_joint(self, m: Model, angular: bool) -> dict[str, float]:
        mean = mean_coefficient(m)
        return {} if mean is None else {VISCOUS.newton_attr: mean * (RAD_PER_DEG if angular else 1.0)}

    def mjcf_joint(self, m: Model) -> dict[str, float]:
        mean = mean_coefficient(m)
        return {} if mean is None else {"damping": mean}

    def isaaclab_values(self, values: dict[str, Any], m: Model) -> dict[str, Any]:
        mean = mean_coefficient(m)
        return values if mean is None else {**values, VISCOUS.name: mean}

    def notes(self, consumer: str, m: Model) -> list[Note]:
        mean, visc, ratio = mean_coefficient(m), m.value(VISCOUS.name), m.value(RATIO.name)
        if mean is None or visc is None or ratio is None or ratio == 1.0:
            return []
        field = {"isaaclab": "viscous_friction", "newton": "newton:damping", "mjcf": "damping"}[consumer]
        return [
            (
                "viscous_direction",
                "warning",
                f"{field} holds one viscous coefficient: the mean {mean:.4g} "
                f"N·m·s/rad of the fitted {visc:.4g} (qd ≥ 0) and {visc * ratio:.4g} (qd < 0)",
            )
        ]


COMPONENT = DirectionalViscous(
    "friction_viscous_directional",
    "joint",
    170,
    "Viscous friction that differs by direction.",
    defines=(RATIO,),
    flag=4096,
    switch=RATIO.name,
    companions={RATIO.name: (VISCOUS.name, RATIO.name)},
    newton_doc="NewtonJointAPI damping = the mean coefficient (a finding)",
)
