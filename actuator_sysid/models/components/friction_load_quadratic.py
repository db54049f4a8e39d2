"""BAM M6 (docs/prior-art.md): quadratic load terms while motor and load oppose."""

from __future__ import annotations

from .base import Component, Param
from .friction_load_directional import M5_TERMS

PARAMS = (
    Param(
        "load_friction_quadratic_motor",
        "1/(N·m)",
        1e-6,
        1.0,
        "log",
        0.0,
        "",
        "BAM M6: adds s·Kqm·τ_m² while motor and load oppose and the load is the larger torque.",
    ),
    Param(
        "load_friction_quadratic_external",
        "1/(N·m)",
        1e-6,
        1.0,
        "log",
        0.0,
        "",
        "BAM M6: adds s·Kqe·τ_e² while motor and load oppose and the motor is the larger torque.",
    ),
)
M6_TERMS = (*M5_TERMS, *(p.name for p in PARAMS))

# as in BAM, the quadratic terms come with the whole M5 budget
COMPONENT = Component(
    "friction_load_quadratic",
    "joint",
    110,
    "BAM M6 quadratic load friction.",
    defines=PARAMS,
    flag=2048,
    switch="load_friction_quadratic_motor",
    companions={p.name: M6_TERMS for p in PARAMS},
    budget=True,
    newton_doc="`ActuatorSysidFrictionBudgetAPI` (actuator_sysid.consumers, with the other budget terms)",
)
