"""Validation of Newton actuation in a USD stage: the joint-drive rule NEWTON.DJ.001.

No such validator ships with Newton 1.8 or Isaac Lab 3.0 (docs/consumer-semantics.md §0.3, §C.6); this one states
what Newton's importer and `resolve_arguments` would reject or silently misread (§C.2–§C.4). Every clause
has its own code suffix:

| code | clause |
|---|---|
| NEWTON.DJ.001.undriven | a non-fixed articulation joint not excluded from the articulation has no drive (UsdPhysics DriveAPI), no NewtonActuator and no enabled mimic coupling |
| NEWTON.DJ.001.drive_max_force | a drive's maxForce is not authored, not finite, or not > 0 |
| NEWTON.DJ.001.drive_gains | a drive's stiffness or damping is not finite or negative |
| NEWTON.DJ.001.drive_target | a drive's targetPosition or targetVelocity is not finite |
| NEWTON.DJ.001.actuator_target | a NewtonActuator's target is missing, absent, or not a revolute or prismatic joint |
| NEWTON.DJ.001.control_law | a NewtonActuator has no control-law API or more than one (PD, PID, Neural) |
| NEWTON.DJ.001.gains | kp, kd, ki not finite or negative; integralMax negative or NaN |
| NEWTON.DJ.001.clamps | maxEffort, saturationEffort, maxMotorEffort, lookupEfforts not finite or negative; a DC velocityLimit not > 0, or finite without a finite saturationEffort |
| NEWTON.DJ.001.const_effort | constEffort not finite |
| NEWTON.DJ.001.delay_steps | delaySteps not a non-negative integer |

Warnings (the stage loads, but not as probably meant): NEWTON.DJ.001.delay_unauthored (the Delay API without
an authored delaySteps gives no delay), NEWTON.DJ.001.delay_zero (delaySteps 0 under the Delay API fails at
finalize when every DOF of the group has 0).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..consumers.schema import PD_API, SLEW_PD_API
from .selection import Finding

RULE = "NEWTON.DJ.001"
# and the consumer package's drives (actuator_sysid.consumers): Newton's PD law under its name (a friction budget's
# drive), and the same law on a slewed goal (a servo's goal rate)
CONTROL_LAWS = (
    "NewtonPDControlAPI",
    "NewtonPIDControlAPI",
    "NewtonNeuralControlAPI",
    PD_API,
    SLEW_PD_API,
)
GAINS = ("kp", "kd", "ki")
CLAMPS = ("maxEffort", "saturationEffort", "maxMotorEffort")
ACTUATED = ("PhysicsRevoluteJoint", "PhysicsPrismaticJoint")


def _f(code: str, where, message: str, severity: str = "error") -> Finding:
    return Finding(f"{RULE}.{code}", severity, str(where), message)


def _authored(prim, name: str):
    """(authored?, value) of an attribute."""
    attr = prim.GetAttribute(name)
    if not attr or not attr.IsValid() or not attr.HasAuthoredValue():
        return False, None
    return True, attr.Get()


def _num(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _applied(prim) -> list[str]:
    schemas = list(prim.GetAppliedSchemas())
    listed = prim.GetMetadata("apiSchemas")  # unregistered schemas still count, as Newton's importer does
    if listed is not None:
        schemas += [str(s) for s in listed.GetAddedOrExplicitItems() if str(s) not in schemas]
    return schemas


def _in_articulation(prim, roots: list) -> bool:
    from pxr import UsdPhysics

    paths = [prim.GetPath()]
    joint = UsdPhysics.Joint(prim)
    for rel in (joint.GetBody0Rel(), joint.GetBody1Rel()):
        paths += list(rel.GetTargets()) if rel else []
    return any(p.HasPrefix(r) for p in paths for r in roots)


def _mimic_enabled(prim) -> bool:
    schemas = _applied(prim)
    if "NewtonMimicAPI" in schemas:
        authored, enabled = _authored(prim, "newton:mimicEnabled")
        rel = prim.GetRelationship("newton:mimicJoint")
        if (not authored or bool(enabled)) and rel and rel.GetTargets():
            return True
    for s in schemas:
        if s.startswith("PhysxMimicJointAPI:"):
            rel = prim.GetRelationship(f"physxMimicJoint:{s.split(':', 1)[1]}:referenceJoint")
            if rel and rel.GetTargets():
                return True
    return False


def _check_drive(prim, inst: str) -> list[Finding]:
    out = []
    pre = f"drive:{inst}:physics:"
    authored, mf = _authored(prim, pre + "maxForce")
    mf = _num(mf)
    if not authored:
        out.append(
            _f(
                "drive_max_force",
                prim.GetPath(),
                f"DriveAPI:{inst} maxForce is not authored (the default is unlimited)",
            )
        )
    elif mf is None or not math.isfinite(mf) or mf <= 0:
        out.append(
            _f("drive_max_force", prim.GetPath(), f"DriveAPI:{inst} maxForce = {mf} must be finite and > 0")
        )
    for name in ("stiffness", "damping"):
        authored, v = _authored(prim, pre + name)
        v = _num(v)
        if authored and (v is None or not math.isfinite(v) or v < 0):
            out.append(
                _f("drive_gains", prim.GetPath(), f"DriveAPI:{inst} {name} = {v} must be finite and ≥ 0")
            )
    for name in ("targetPosition", "targetVelocity"):
        authored, v = _authored(prim, pre + name)
        v = _num(v)
        if authored and (v is None or not math.isfinite(v)):
            out.append(_f("drive_target", prim.GetPath(), f"DriveAPI:{inst} {name} = {v} must be finite"))
    return out


def _actuator_target(stage, prim, where) -> tuple[list[Finding], list]:
    """The actuator's newton:targets: findings, and the joint path it drives when that is a revolute or
    prismatic joint."""
    rel = prim.GetRelationship("newton:targets")
    targets = list(rel.GetTargets()) if rel else []
    if not targets:
        return [
            _f(
                "actuator_target",
                where,
                "no newton:targets relationship: target one revolute or "
                "prismatic joint, or deactivate the prim",
            )
        ], []
    target = stage.GetPrimAtPath(targets[0])
    if not target or not target.IsValid():
        return [_f("actuator_target", where, f"target {targets[0]} does not exist")], []
    if target.GetTypeName() not in ACTUATED:
        return [
            _f(
                "actuator_target",
                where,
                f"target {targets[0]} is a {target.GetTypeName() or 'typeless prim'}"
                "; a NewtonActuator drives a PhysicsRevoluteJoint or PhysicsPrismaticJoint",
            )
        ], []
    return [], [targets[0]]


def _gain_findings(prim, where) -> list[Finding]:
    """Authored gains must be finite and ≥ 0 (integralMax may be +inf)."""
    out = []
    for name in (*GAINS, "integralMax"):
        authored, v = _authored(prim, f"newton:{name}")
        v = _num(v)
        if not authored:
            continue
        bad = v is None or math.isnan(v) or v < 0 or (name != "integralMax" and not math.isfinite(v))
        if bad:
            out.append(
                _f(
                    "gains",
                    where,
                    f"newton:{name} = {v} must be " + ("≥ 0" if name == "integralMax" else "finite and ≥ 0"),
                )
            )
    return out


def _clamp_findings(prim, where, schemas: list[str]) -> list[Finding]:
    """Effort clamps, velocity limit, the DC clamp's saturation effort, lookup efforts and the constant effort:
    the values Newton's clamps and drives would reject or turn into NaN."""
    out = []
    for name in CLAMPS:
        authored, v = _authored(prim, f"newton:{name}")
        v = _num(v)
        if authored and (v is None or not math.isfinite(v) or v < 0):
            out.append(_f("clamps", where, f"newton:{name} = {v} must be finite and ≥ 0"))
    authored, vlim = _authored(prim, "newton:velocityLimit")
    vlim = _num(vlim)
    if authored and (vlim is None or math.isnan(vlim) or vlim <= 0):
        out.append(_f("clamps", where, f"newton:velocityLimit = {vlim} must be > 0"))
    if "NewtonDCMotorClampingAPI" in schemas and authored and vlim is not None and math.isfinite(vlim):
        sat_authored, sat = _authored(prim, "newton:saturationEffort")
        sat_value = _num(sat)
        if not sat_authored or sat_value is None or not math.isfinite(sat_value):
            out.append(
                _f(
                    "clamps",
                    where,
                    "a finite newton:velocityLimit needs a finite newton:saturationEffort "
                    "(Newton's DC clamp raises otherwise)",
                )
            )
    authored, eff = _authored(prim, "newton:lookupEfforts")
    if authored and eff is not None and any(not math.isfinite(float(e)) or float(e) < 0 for e in eff):
        out.append(_f("clamps", where, "newton:lookupEfforts must be finite and ≥ 0"))
    authored, c = _authored(prim, "newton:constEffort")
    c = _num(c)
    if authored and (c is None or not math.isfinite(c)):
        out.append(_f("const_effort", where, f"newton:constEffort = {c} must be finite"))
    return out


def _delay_findings(prim, where, schemas: list[str]) -> list[Finding]:
    """newton:delaySteps must be a non-negative integer, and NewtonActuatorDelayAPI needs an authored, non-zero one."""
    attr = prim.GetAttribute("newton:delaySteps")
    authored, d = _authored(prim, "newton:delaySteps")
    if authored:
        type_ok = str(attr.GetTypeName()) in ("int", "uint", "int64", "uint64")
        if not type_ok or not isinstance(d, int) or d < 0:
            return [
                _f(
                    "delay_steps",
                    where,
                    f"newton:delaySteps = {d!r} ({attr.GetTypeName()}) must be a non-negative integer",
                )
            ]
        if d == 0 and "NewtonActuatorDelayAPI" in schemas:
            return [
                _f(
                    "delay_zero",
                    where,
                    "NewtonActuatorDelayAPI with delaySteps = 0: Newton's finalize "
                    "fails when every DOF of the group has 0; remove the API for no delay",
                    "warning",
                )
            ]
    elif "NewtonActuatorDelayAPI" in schemas:
        return [
            _f(
                "delay_unauthored",
                where,
                "NewtonActuatorDelayAPI without an authored newton:delaySteps: "
                "Newton's importer reads authored values only, so there is no delay",
                "warning",
            )
        ]
    return []


def _check_actuator(stage, prim) -> tuple[list[Finding], list]:
    """Findings of one NewtonActuator and the joint paths it drives."""
    where = prim.GetPath()
    out, driven = _actuator_target(stage, prim, where)
    schemas = _applied(prim)
    laws = [s for s in schemas if s in CONTROL_LAWS]
    if len(laws) != 1:
        out.append(
            _f(
                "control_law",
                where,
                f"exactly one control-law API is needed ({', '.join(CONTROL_LAWS)}); found {laws or 'none'}",
            )
        )
    out += _gain_findings(prim, where)
    out += _clamp_findings(prim, where, schemas)
    out += _delay_findings(prim, where, schemas)
    return out, driven


def validate_stage(stage) -> list[Finding]:
    """Every NEWTON.DJ.001 finding of a stage, actuators first, then joints, in stage order."""
    from pxr import UsdPhysics

    findings: list[Finding] = []
    driven: set = set()
    roots = [p.GetPath() for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    for prim in stage.Traverse():
        if prim.GetTypeName() == "NewtonActuator":
            more, targets = _check_actuator(stage, prim)
            findings += more
            driven |= set(targets)
    for prim in stage.Traverse():
        if not prim.IsA(UsdPhysics.Joint) or prim.IsA(UsdPhysics.FixedJoint):
            continue
        drives = [s.split(":", 1)[1] for s in _applied(prim) if s.startswith("PhysicsDriveAPI:")]
        for inst in drives:
            findings += _check_drive(prim, inst)
        authored, excluded = _authored(prim, "physics:excludeFromArticulation")
        if authored and excluded:
            continue
        authored, enabled = _authored(prim, "physics:jointEnabled")
        if authored and not enabled:
            continue
        if not _in_articulation(prim, roots):
            continue
        if not drives and prim.GetPath() not in driven and not _mimic_enabled(prim):
            findings.append(
                _f(
                    "undriven",
                    prim.GetPath(),
                    f"{prim.GetTypeName()} in an articulation has no drive "
                    "(DriveAPI), no NewtonActuator and no enabled mimic coupling",
                )
            )
    return findings


def open_stage(text: str):
    """A stage from .usda text, with the Newton schema plugin registered first."""
    from .newton_usd import _pxr

    _Gf, Sdf, Usd, _UsdGeom, _UsdPhysics = _pxr()
    layer = Sdf.Layer.CreateAnonymous(".usda")
    if not layer.ImportFromString(text):
        raise ValueError("the text is not a valid .usda layer")
    return Usd.Stage.Open(layer)


def _usd_reason(e: Exception) -> str:
    """The first quoted reason in a pxr error's text (which also names C++ files and line numbers)."""
    found = re.findall(r" : '(.+?)'(?:\n|$)", str(e), re.DOTALL)
    text = found[0] if found else str(e).strip() or type(e).__name__
    return " ".join(text.split())[:300]


def validate_usd(source: str | Path) -> list[Finding]:
    """Validate a USD file path (any format usd-core opens) or .usda text."""
    from .newton_usd import _pxr

    _Gf, _Sdf, Usd, _UsdGeom, _UsdPhysics = _pxr()
    if isinstance(source, Path):
        try:
            stage = Usd.Stage.Open(str(source))
        except RuntimeError as e:  # pxr.Tf.ErrorException: not a USD layer, or a damaged one
            raise ValueError(f"{source}: usd-core could not open it ({_usd_reason(e)})") from None
        if stage is None:
            raise ValueError(f"{source}: usd-core could not open it")
        return validate_stage(stage)
    return validate_stage(open_stage(source))
