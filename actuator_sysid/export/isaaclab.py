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

# Fields each cfg class accepts besides joint_names_expr (consumer-semantics §A.1), in the order we write them.
_JOINT = ("armature", "friction", "viscous_friction")
CFG_FIELDS: dict[str, tuple[str, ...]] = {
    "ImplicitActuatorCfg": ("stiffness", "damping", "joint_effort_limit", *_JOINT),
    "IdealPDActuatorCfg": ("stiffness", "damping", "actuator_effort_limit", *_JOINT),
    "DCMotorCfg": ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit",
                   "actuator_effort_limit", *_JOINT),
    "DelayedPDActuatorCfg": ("stiffness", "damping", "actuator_effort_limit", "min_delay", "max_delay", *_JOINT),
    "RemotizedPDActuatorCfg": ("stiffness", "damping", "joint_parameter_lookup", "min_delay", "max_delay",
                               *_JOINT),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "ImplicitActuatorCfg": ("stiffness", "damping"),
    "IdealPDActuatorCfg": ("stiffness", "damping"),
    "DCMotorCfg": ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit"),
    "DelayedPDActuatorCfg": ("stiffness", "damping", "min_delay", "max_delay"),
    "RemotizedPDActuatorCfg": ("stiffness", "damping", "joint_parameter_lookup"),
}


def _cfg_values(cls: str, params: dict, knots: list[float] | None) -> dict:
    """Our fitted parameters under the cfg class's own field names."""
    values = dict(params)
    if "delay" in params:
        values["min_delay"] = values["max_delay"] = int(params["delay"])
    if cls == "ImplicitActuatorCfg":  # the implicit telemetry clip is the solver's joint effort limit (§A.10)
        values["joint_effort_limit"] = params.get("actuator_effort_limit")
    if cls == "RemotizedPDActuatorCfg":
        if knots is None:
            raise ExportError("a remotized_pd result needs its table positions (result 'table_positions')")
        efforts = [params[f"lookup_effort_{k}"] for k in range(parameters.TABLE_KNOTS)]
        # rows [angle, transmission ratio (unused by compute, §A.6), max torque]
        values["joint_parameter_lookup"] = [[float(a), 1.0, float(e)] for a, e in zip(knots, efforts, strict=True)]
    return values


def _exportable(jr: dict) -> str:
    """The best-ranked fitted family that Isaac Lab has a cfg class for."""
    for row in jr.get("ranking") or [{"family": jr["best_model"]}]:
        if get_family(row["family"]).isaaclab_cfg in CFG_FIELDS:
            return row["family"]
    raise ExportError(f"none of the fitted families {sorted(jr['models'])} has an Isaac Lab cfg class; "
                      "fit ideal_pd, dcmotor, delayed_pd, remotized_pd or implicit, or use the Newton export")


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

    `families` picks a family per joint; by default the best-ranked family Isaac Lab can express.
    """
    groups: dict[str, dict] = {}
    for joint, jr in result["joints"].items():
        fam = (families or {}).get(joint) or _exportable(jr)
        if fam not in jr["models"]:
            raise ExportError(f"joint {joint!r} has no fitted {fam!r} model; fitted: {sorted(jr['models'])}")
        cls = get_family(fam).isaaclab_cfg
        if cls not in CFG_FIELDS:
            raise ExportError(f"family {fam!r} has no Isaac Lab cfg class; use the Newton export")
        model = jr["models"][fam]
        values = _cfg_values(cls, model["params"], model.get("table_positions"))
        cfg: dict = {"joint_names_expr": [re.escape(joint)]}
        for name in CFG_FIELDS[cls]:
            v = values.get(name)
            if isinstance(v, list) or (isinstance(v, int) and not isinstance(v, bool)):
                cfg[name] = v
            elif v is not None and math.isfinite(v):
                cfg[name] = float(v)
        groups[_group_name(joint)] = {"class_type": cls, "family": fam, "cfg": cfg}
    validate_cfgs(groups)
    return groups


def validate_cfgs(groups: dict[str, dict]) -> None:
    """Check what Isaac Lab would reject or silently misread: missing required fields, unknown field
    names, non-finite or negative values, delays out of order, an unsorted lookup table (§A.2, §A.4–A.6)."""
    problems = []
    for g, spec in groups.items():
        cls, cfg = spec["class_type"], spec["cfg"]
        problems += [f"{g}: {cls} requires {name}" for name in REQUIRED[cls] if name not in cfg]
        for name, v in cfg.items():
            if name == "joint_names_expr":
                if not v or not all(isinstance(x, str) for x in v):
                    problems.append(f"{g}: joint_names_expr must be a non-empty list of regexes")
            elif name not in CFG_FIELDS[cls]:
                problems.append(f"{g}: {cls} has no field {name}")
            elif name in ("min_delay", "max_delay"):
                if not (isinstance(v, int) and v >= 0):
                    problems.append(f"{g}: {name} = {v!r} must be a non-negative integer")
            elif name == "joint_parameter_lookup":
                angles = [row[0] for row in v]
                if any(len(row) != 3 or not all(math.isfinite(x) for x in row) or row[2] < 0 for row in v):
                    problems.append(f"{g}: joint_parameter_lookup rows must be [angle, ratio, torque ≥ 0], finite")
                if angles != sorted(angles):
                    problems.append(f"{g}: joint_parameter_lookup angles must be sorted ascending")
            elif not (isinstance(v, float) and math.isfinite(v) and v >= 0):
                problems.append(f"{g}: {name} = {v!r} must be a finite, non-negative number")
        if cls == "DCMotorCfg" and cfg.get("actuator_velocity_limit", 1.0) <= 0:
            problems.append(f"{g}: actuator_velocity_limit must be > 0")
        if cfg.get("min_delay", 0) > cfg.get("max_delay", 0):
            problems.append(f"{g}: min_delay must not exceed max_delay")
    if problems:
        raise ExportError("Isaac Lab export failed validation: " + "; ".join(problems))


_UNITS = {p.name: p.unit for p in parameters.PARAMS} | {
    "joint_effort_limit": "N·m", "min_delay": "physics steps", "max_delay": "physics steps",
    "joint_parameter_lookup": "[angle rad, ratio, max torque N·m]"}


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
            unit = f"  # {_UNITS[field]}" if field in _UNITS else ""
            lines.append(f"        {field}={v!r},{unit}")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"
