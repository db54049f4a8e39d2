"""Exports at an operating point: a device-unit fit's SI gains and envelope at a chosen kp (and supply vin).

A fit of segments logged in device units (`gain_units = "device"`) states its stiffness in SI at the
reference kp, and its saturation effort and velocity limit at the reference supply voltage (fit result
`assumptions.operating_point`, models/rollout.py `OperatingPoints`). An export for a simulator needs one
SI value: `at_operating_point` scales every fitted model to the requested point (default: the reference,
which leaves the values as fitted), and `annotate` writes into the export which point it used.
"""

from __future__ import annotations

import json
from dataclasses import replace

from ..fitting.result import FitResult, JointFit, ResultLike, as_result
from .selection import ExportError, prepend_comment

SCALED = ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit")
AT_KEYS = ("kp", "kd", "vin")


def parse_at(text: str | None) -> dict[str, float] | None:
    """`kp=400,vin=7.4` → {"kp": 400.0, "vin": 7.4}; the error names a bad item."""
    if not text:
        return None
    out: dict[str, float] = {}
    for item in (x.strip() for x in text.split(",") if x.strip()):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in AT_KEYS:
            raise ExportError(f"--at takes KEY=VALUE items with KEY one of {list(AT_KEYS)}, got {item!r}")
        try:
            out[key] = float(value)
        except ValueError:
            raise ExportError(f"--at {key} must be a number, got {value.strip()!r}") from None
        if key == "vin" and not out[key] > 0:
            raise ExportError(f"--at vin must be a positive voltage, got {value.strip()!r}")
    return out


def _multipliers(units: str, ref: dict, at: dict[str, float]) -> dict[str, float]:
    """Stiffness, damping, saturation effort and velocity limit multipliers from the reference to `at`."""
    v = at["vin"] / ref["vin"] if ref.get("vin") and "vin" in at else 1.0
    kp = (
        at["kp"] / ref["kp"] * v
        if units == "device" and ref.get("kp") and "kp" in at
        else (v if units == "device" else 1.0)
    )
    kd = (
        at["kd"] / ref["kd"] * v
        if units == "device" and ref.get("kd") and "kd" in at
        else (v if units == "device" and ref.get("kd") else 1.0)
    )
    return {"stiffness": kp, "damping": kd, "saturation_effort": v, "actuator_velocity_limit": v}


def _scaled(jr: JointFit, mult: dict[str, float]) -> JointFit:
    """A joint's fits with the SCALED parameters of every model multiplied by `mult`."""

    def scale(name: str, v: object) -> object:
        return float(v) * mult[name] if name in SCALED and isinstance(v, int | float) else v

    return replace(
        jr,
        models={
            k: replace(m, params={n: scale(n, v) for n, v in m.params.items()}) for k, m in jr.models.items()
        },
    )


def at_operating_point(
    result: ResultLike, at: dict[str, float] | None = None
) -> tuple[FitResult, dict | None]:
    """(result with every model's SI parameters at `at`, the point used per joint) — or (result, None) for a fit
    that logged no device gains or supply voltage. Raises ExportError when `at` asks for what the fit lacks."""
    typed = as_result(result)
    refs = typed.assumptions.operating_point or {}
    units = typed.assumptions.gain_units or {}
    if not refs:
        if at:
            raise ExportError(
                f"--at {','.join(f'{k}={v:g}' for k, v in at.items())}: this fit's segments log "
                "no device-unit gains or supply voltage; its parameters are SI as fitted"
            )
        return typed, None
    joints = dict(typed.joints)
    points: dict[str, dict] = {}
    for joint, ref in refs.items():
        unit = units.get(joint, "si")
        want = dict(at or {})
        for key in want:
            if key in ("kp", "kd") and (unit != "device" or not ref.get(key)):
                raise ExportError(f"--at {key}: joint {joint!r} logs no {key} in device units")
            if key == "vin" and not ref.get("vin"):
                raise ExportError(f"--at vin: joint {joint!r} logs no supply voltage")
        point = {k: want.get(k, ref.get(k)) for k in AT_KEYS if ref.get(k) is not None}
        points[joint] = {
            **point,
            "gain_units": unit,
            "reference": {k: v for k, v in ref.items() if v is not None},
            "default": not want,
        }
        if not want:
            continue
        if joint in joints:
            joints[joint] = _scaled(joints[joint], _multipliers(unit, ref, want))
    return (replace(typed, joints=joints) if at else typed), points


def describe(points: dict) -> str:
    """One line: which operating point each joint's values are stated at."""
    parts = []
    for joint, p in points.items():
        vals = ", ".join(f"{k}={p[k]:g}" + (" V" if k == "vin" else "") for k in AT_KEYS if k in p)
        how = "the fit's reference" if p["default"] else "requested"
        parts.append(f"{joint}: {vals} ({p['gain_units']} gain units, {how})")
    return "operating point: " + "; ".join(parts) + " — SI gains and envelope at this point"


def annotate(fmt: str, text: str, points: dict | None) -> str:
    """The export with its operating point stated: a comment (.py, .yaml, .usda, .xml) or a key (.json)."""
    if not points:
        return text
    line = describe(points)
    if fmt.endswith(".json"):
        doc = json.loads(text)
        if isinstance(doc, dict):
            return json.dumps({"operating_point": points, **doc}, indent=2) + "\n"
        return text
    return prepend_comment(fmt, text, [line])
