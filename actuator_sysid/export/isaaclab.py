"""Isaac Lab 3.0 actuator configs from a fit result: ready-to-paste Python source and JSON.

Field names are Isaac Lab 3.0's (`actuator_effort_limit`, `actuator_velocity_limit`, ...), values SI.
The JSON form loads with `DCMotorCfg(**doc["actuators"][group]["cfg"])`.
"""

from __future__ import annotations

import json
import math
import re

from ..models import parameters
from ..models.families import get_family

ISAACLAB_VERSION = "3.0.0"

# Fields each cfg class accepts besides joint_names_expr (consumer-semantics §A.1).
CFG_FIELDS: dict[str, tuple[str, ...]] = {
    "IdealPDActuatorCfg": ("stiffness", "damping", "actuator_effort_limit", "actuator_velocity_limit",
                           "armature", "friction", "viscous_friction"),
    "DCMotorCfg": ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit",
                   "actuator_effort_limit", "armature", "friction", "viscous_friction"),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "IdealPDActuatorCfg": ("stiffness", "damping"),
    "DCMotorCfg": ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit"),
}

BACKEND_NOTE = (
    "friction is an absolute Coulomb effort [N·m] as Newton/MuJoCo apply joint_friction (frictionloss); "
    "viscous_friction is Newton joint_damping [N·m·s/rad]; armature is added to the joint inertia."
)


class ExportError(ValueError):
    """A result that cannot be exported as asked (unknown joint or family, a cfg that fails validation)."""


def _group_name(joint: str) -> str:
    return re.sub(r"\W+", "_", joint).strip("_") or "joint"


def actuator_cfgs(result: dict, families: dict[str, str] | None = None) -> dict[str, dict]:
    """One group per joint: {group: {"class_type": cfg class name, "family", "cfg": {field: value}}}.

    `families` picks a family per joint; by default each joint's best model.
    """
    groups: dict[str, dict] = {}
    for joint, jr in result["joints"].items():
        fam = (families or {}).get(joint, jr["best_model"])
        if fam not in jr["models"]:
            raise ExportError(f"joint {joint!r} has no fitted {fam!r} model; fitted: {sorted(jr['models'])}")
        family = get_family(fam)
        cls = family.isaaclab_cfg
        if cls not in CFG_FIELDS:
            raise ExportError(f"family {fam!r} has no Isaac Lab export yet")
        params = jr["models"][fam]["params"]
        cfg: dict = {"joint_names_expr": [re.escape(joint)]}
        for name in CFG_FIELDS[cls]:
            v = params.get(name)
            if v is not None and math.isfinite(v):
                cfg[name] = float(v)
        groups[_group_name(joint)] = {"class_type": cls, "family": fam, "cfg": cfg}
    validate_cfgs(groups)
    return groups


def validate_cfgs(groups: dict[str, dict]) -> None:
    """Check what Isaac Lab would reject or silently misread: missing required fields, non-finite or
    negative values, unknown field names, and the DC-motor rule that saturation exceeds the effort limit
    is not required but a velocity limit is (§A.4)."""
    problems = []
    for g, spec in groups.items():
        cls, cfg = spec["class_type"], spec["cfg"]
        for name in REQUIRED[cls]:
            if name not in cfg:
                problems.append(f"{g}: {cls} requires {name}")
        for name, v in cfg.items():
            if name == "joint_names_expr":
                if not v or not all(isinstance(x, str) for x in v):
                    problems.append(f"{g}: joint_names_expr must be a non-empty list of regexes")
                continue
            if name not in CFG_FIELDS[cls]:
                problems.append(f"{g}: {cls} has no field {name}")
            elif not (isinstance(v, float) and math.isfinite(v) and v >= 0):
                problems.append(f"{g}: {name} = {v!r} must be a finite, non-negative number")
        if cls == "DCMotorCfg" and cfg.get("actuator_velocity_limit", 1.0) <= 0:
            problems.append(f"{g}: actuator_velocity_limit must be > 0")
    if problems:
        raise ExportError("Isaac Lab export failed validation: " + "; ".join(problems))


def render_json(result: dict, families: dict[str, str] | None = None) -> str:
    """The cfgs as JSON, with the Isaac Lab version and backend conventions stated."""
    doc = {
        "isaaclab_version": ISAACLAB_VERSION,
        "field_names": "isaaclab-3",
        "units": {p.name: p.unit for p in parameters.PARAMS},
        "backend": "newton",
        "note": BACKEND_NOTE,
        "actuators": actuator_cfgs(result, families),
    }
    return json.dumps(doc, indent=2) + "\n"


def render_python(result: dict, families: dict[str, str] | None = None) -> str:
    """Ready-to-paste Python: imports plus an ACTUATORS dict for `ArticulationCfg(actuators=...)`."""
    groups = actuator_cfgs(result, families)
    classes = sorted({g["class_type"] for g in groups.values()})
    lines = [
        '"""Actuator configs fitted by actuator-sysid for Isaac Lab ' + ISAACLAB_VERSION + '.',
        "",
        "Paste into your ArticulationCfg: actuators=ACTUATORS. Units are SI.",
        "Backend: " + BACKEND_NOTE,
        '"""',
        "",
        f"from isaaclab.actuators import {', '.join(classes)}",
        "",
        "ACTUATORS = {",
    ]
    for name, g in groups.items():
        lines.append(f"    {name!r}: {g['class_type']}(  # family {g['family']}")
        for field, v in g["cfg"].items():
            unit = "" if field == "joint_names_expr" else f"  # {parameters.get(field).unit}"
            lines.append(f"        {field}={v!r},{unit}")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"
