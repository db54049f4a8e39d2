"""The package's codeless USD API schemas (usd/plugInfo.json, usd/generatedSchema.usda) and their attributes.

USD reads a plugin's schemas when its schema registry is first built: register them before opening a stage
(`register_usd_schemas`, which export/newton_usd.py and `actuator_sysid.consumers.register()` call). Needs
usd-core only.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

PD_API = "ActuatorSysidPDControlAPI"  # Newton's DrivePD under our name (newton.py says why)
BUDGET_API = "ActuatorSysidFrictionBudgetAPI"
SLEW_PD_API = "ActuatorSysidSlewedPDControlAPI"  # DrivePD on a slewed target (newton.DriveSlewedPD)
PLUGIN_DIR = Path(__file__).parent / "usd"
# newton: attribute → the component's argument (Newton's parser turns camelCase into snake_case)
BUDGET_ATTRIBUTES: dict[str, str] = {
    "coulombFriction": "coulomb_friction",
    "stribeckFriction": "stribeck_friction",
    "stribeckVelocity": "stribeck_velocity",
    "stribeckExponent": "stribeck_exponent",
    "loadFriction": "load_friction",
    "loadFrictionStribeck": "load_friction_stribeck",
    "loadFrictionExternal": "load_friction_external",
    "loadFrictionExternalStribeck": "load_friction_external_stribeck",
    "loadFrictionQuadraticMotor": "load_friction_quadratic_motor",
    "loadFrictionQuadraticExternal": "load_friction_quadratic_external",
    "jointInertia": "joint_inertia",
    "physicsDt": "physics_dt",
}


def register_usd_schemas() -> bool:
    """Register the plugin with USD (idempotent); False when usd-core is not installed."""
    try:
        from pxr import Plug
    except ImportError:
        return False
    with contextlib.suppress(Exception):  # already registered: USD reports the duplicate, nothing to do
        Plug.Registry().RegisterPlugins([str(PLUGIN_DIR.resolve())])
    return True


def budget_attributes(params: dict[str, float], joint_inertia: float, physics_dt: float) -> dict[str, float]:
    """The `newton:` attributes of BUDGET_API for one fitted model (registry names): every term written, the
    external-side gains equal to the motor-side ones where the family has one gain for both (BAM M3/M4)."""
    kl, kls = params.get("load_friction", 0.0), params.get("load_friction_stribeck", 0.0)
    values = {
        "coulomb_friction": params.get("friction", 0.0),
        "stribeck_friction": params.get("stribeck_friction", 0.0),
        "stribeck_velocity": params.get("stribeck_velocity", 1.0),
        "stribeck_exponent": params.get("stribeck_exponent", 2.0),
        "load_friction": kl,
        "load_friction_stribeck": kls,
        "load_friction_external": params.get("load_friction_external", kl),
        "load_friction_external_stribeck": params.get("load_friction_external_stribeck", kls),
        "load_friction_quadratic_motor": params.get("load_friction_quadratic_motor", 0.0),
        "load_friction_quadratic_external": params.get("load_friction_quadratic_external", 0.0),
        "joint_inertia": joint_inertia,
        "physics_dt": physics_dt,
    }
    return {attr: float(values[name]) for attr, name in BUDGET_ATTRIBUTES.items()}
