"""BAM M3/M4 (docs/prior-art.md): friction grows with the gearbox load, + Kl·|τ_m − τ_e| + Kls·s·|τ_m − τ_e|."""

from __future__ import annotations

from .base import Component, Param
from .friction_stribeck import TERMS as STRIBECK_TERMS

PARAMS = (
    Param(
        "load_friction",
        "N·m/N·m",
        1e-5,
        1.0,
        "log",
        0.0,
        "",
        "Load-dependent friction gain (BAM Kl): adds Kl·|τ_m − τ_e| of gearbox load to the friction bound.",
    ),
    Param(
        "load_friction_stribeck",
        "N·m/N·m",
        1e-5,
        1.0,
        "log",
        0.0,
        "",
        "Stribeck part of the load-dependent friction (BAM M4 Kls): adds Kls·s·|τ_m − τ_e| near standstill.",
    ),
)
M4_TERMS = (*STRIBECK_TERMS, "load_friction", "load_friction_stribeck")

COMPONENT = Component(
    "friction_load",
    "joint",
    90,
    "BAM M3/M4 load-dependent friction.",
    defines=PARAMS,
    flag=512,
    switch="load_friction",
    companions={"load_friction_stribeck": M4_TERMS},
    budget=True,
    newton_doc="`ActuatorSysidFrictionBudgetAPI` (actuator_sysid.consumers, with the other budget terms)",
)
