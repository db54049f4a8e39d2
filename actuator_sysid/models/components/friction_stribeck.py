"""BAM M2 (docs/prior-art.md): a Stribeck peak above Coulomb friction near standstill, s = exp(−|qd/q̇_s|^α).

Part of BAM's friction budget: the stopping constraint's bound becomes friction + stribeck_friction·s + the load
terms (friction_load*.py). Isaac Lab, Newton and MuJoCo have no such field.
"""

from __future__ import annotations

from .base import Component, Param

PARAMS = (
    Param(
        "stribeck_friction",
        "N·m",
        1e-5,
        1e2,
        "log",
        0.0,
        "",
        "Stribeck peak above Coulomb friction at standstill (BAM Kcs), fading with speed as s(qd).",
    ),
    Param(
        "stribeck_velocity",
        "rad/s",
        1e-3,
        1e2,
        "log",
        1.0,
        "",
        "Characteristic speed of the Stribeck fade (BAM q̇_s): s = exp(−|qd / q̇_s|^α).",
    ),
    Param(
        "stribeck_exponent",
        "1",
        0.5,
        10.0,
        "linear",
        2.0,
        "",
        "Shape α of the Stribeck fade (BAM alpha; 2 is Gaussian, 1 exponential).",
    ),
)
TERMS = tuple(p.name for p in PARAMS)

# a Stribeck peak needs its speed and shape
COMPONENT = Component(
    "friction_stribeck",
    "joint",
    80,
    "BAM M2 Stribeck friction peak.",
    defines=PARAMS,
    flag=256,
    switch="stribeck_friction",
    companions=dict.fromkeys(TERMS, TERMS),
    budget=True,
    newton_doc="`ActuatorSysidFrictionBudgetAPI` (actuator_sysid.consumers, with the other budget terms)",
)
