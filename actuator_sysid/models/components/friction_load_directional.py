"""BAM M5 (docs/prior-art.md): the load gains split into motor and external sides, |Kle·τ_e − Kl·τ_m|."""

from __future__ import annotations

from .base import Component, Param
from .friction_load import M4_TERMS

PARAMS = (
    Param(
        "load_friction_external",
        "N·m/N·m",
        1e-5,
        1.0,
        "log",
        0.0,
        "",
        "BAM M5 external-side load gain Kle: the load term becomes |Kle·τ_e − Kl·τ_m| (Kl the motor side).",
    ),
    Param(
        "load_friction_external_stribeck",
        "N·m/N·m",
        1e-5,
        1.0,
        "log",
        0.0,
        "",
        "BAM M5 external-side Stribeck load gain: the Stribeck load term becomes s·|Kles·τ_e − Kls·τ_m|.",
    ),
)
M5_TERMS = (*M4_TERMS, *(p.name for p in PARAMS))

# M5's external gain needs its motor-side one; the Stribeck one the whole M4 budget
COMPONENT = Component(
    "friction_load_directional",
    "joint",
    100,
    "BAM M5 motor- and external-side load gains.",
    defines=PARAMS,
    flag=1024,
    switch="load_friction_external",
    companions={
        "load_friction_external": ("load_friction", "load_friction_external"),
        "load_friction_external_stribeck": M5_TERMS,
    },
    budget=True,
    newton_doc="`ActuatorSysidFrictionBudgetAPI` (actuator_sysid.consumers, with the other budget terms)",
)
