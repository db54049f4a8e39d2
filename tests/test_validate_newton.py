"""NEWTON.DJ.001: a corpus of valid and invalid stages, one per rule clause, gets exactly the expected findings."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from actuator_sysid.export.newton_usd import _pxr
from actuator_sysid.export.validate import validate_stage

Gf, Sdf, Usd, UsdGeom, UsdPhysics = _pxr()
J = "/Robot/hinge"
A = "/Robot/hinge_actuator"


def robot(actuated: bool = True, root: bool = True) -> Usd.Stage:
    """A fixed-base articulation: base welded to the world, a link on the revolute joint J, actuator A (PD)."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/Robot")
    if root:
        UsdPhysics.ArticulationRootAPI.Apply(stage.GetPrimAtPath("/Robot"))
    for name in ("base", "link", "link2"):
        prim = UsdGeom.Xform.Define(stage, f"/Robot/{name}").GetPrim()
        UsdPhysics.RigidBodyAPI.Apply(prim)
        UsdPhysics.MassAPI.Apply(prim).CreateMassAttr(1.0)
    weld = UsdPhysics.FixedJoint.Define(stage, "/Robot/root_joint")
    weld.CreateBody1Rel().SetTargets(["/Robot/base"])
    joint = UsdPhysics.RevoluteJoint.Define(stage, J)
    joint.CreateBody0Rel().SetTargets(["/Robot/base"])
    joint.CreateBody1Rel().SetTargets(["/Robot/link"])
    joint.CreateAxisAttr("Y")
    if actuated:
        actuator(stage)
    return stage


def actuator(stage: Usd.Stage, path: str = A, target: str | None = J, apis=("NewtonPDControlAPI",), **attrs):
    prim = stage.DefinePrim(path, "NewtonActuator")
    for api in apis:
        prim.AddAppliedSchema(api)
    if target is not None:
        prim.CreateRelationship("newton:targets").SetTargets([target])
    prim.CreateAttribute("newton:kp", Sdf.ValueTypeNames.Float).Set(20.0)
    prim.CreateAttribute("newton:kd", Sdf.ValueTypeNames.Float).Set(1.0)
    for name, value in attrs.items():
        kind = (
            Sdf.ValueTypeNames.Int
            if isinstance(value, int)
            else (Sdf.ValueTypeNames.FloatArray if isinstance(value, list) else Sdf.ValueTypeNames.Float)
        )
        prim.CreateAttribute(f"newton:{name}", kind).Set(value)
    return prim


def drive(stage: Usd.Stage, path: str = J, max_force: float | None = 50.0, **attrs) -> None:
    d = UsdPhysics.DriveAPI.Apply(stage.GetPrimAtPath(path), "angular")
    if max_force is not None:
        d.CreateMaxForceAttr(max_force)
    d.CreateStiffnessAttr(attrs.get("stiffness", 1.0))
    d.CreateDampingAttr(attrs.get("damping", 0.1))
    d.CreateTargetPositionAttr(attrs.get("targetPosition", 0.0))
    d.CreateTargetVelocityAttr(attrs.get("targetVelocity", 0.0))


def second_joint(stage: Usd.Stage) -> Usd.Prim:
    j2 = UsdPhysics.RevoluteJoint.Define(stage, "/Robot/follower")
    j2.CreateBody0Rel().SetTargets(["/Robot/link"])
    j2.CreateBody1Rel().SetTargets(["/Robot/link2"])
    return j2.GetPrim()


def _mimic(enabled: bool) -> Usd.Stage:
    stage = robot()
    f = second_joint(stage)
    f.AddAppliedSchema("NewtonMimicAPI")
    f.CreateRelationship("newton:mimicJoint").SetTargets([J])
    f.CreateAttribute("newton:mimicEnabled", Sdf.ValueTypeNames.Bool).Set(enabled)
    return stage


def _physx_mimic() -> Usd.Stage:
    stage = robot()
    f = second_joint(stage)
    f.AddAppliedSchema("PhysxMimicJointAPI:rotX")
    f.CreateRelationship("physxMimicJoint:rotX:referenceJoint").SetTargets([J])
    return stage


def _excluded() -> Usd.Stage:
    stage = robot()
    second_joint(stage).CreateAttribute("physics:excludeFromArticulation", Sdf.ValueTypeNames.Bool).Set(True)
    return stage


def _disabled() -> Usd.Stage:
    stage = robot()
    UsdPhysics.Joint(second_joint(stage)).CreateJointEnabledAttr(False)
    return stage


def _with(fn: Callable[[Usd.Stage], object], **kw) -> Callable[[], Usd.Stage]:
    def make() -> Usd.Stage:
        stage = robot(**kw)
        fn(stage)
        return stage

    return make


def _set(path: str, name: str, value, kind=Sdf.ValueTypeNames.Float) -> Callable[[Usd.Stage], None]:
    return lambda s: s.GetPrimAtPath(path).CreateAttribute(name, kind).Set(value)


U, DMF, DG, DT = "undriven", "drive_max_force", "drive_gains", "drive_target"
CASES: dict[str, tuple[Callable[[], Usd.Stage], set[tuple[str, str]]]] = {
    # valid stages
    "actuator": (robot, set()),
    "drive": (_with(drive, actuated=False), set()),
    "mimic follower": (lambda: _mimic(True), set()),
    "physx mimic follower": (_physx_mimic, set()),
    "excluded from the articulation": (_excluded, set()),
    "disabled joint": (_disabled, set()),
    "no articulation": (lambda: robot(actuated=False, root=False), set()),
    "pid with clamps and delay": (
        _with(
            lambda s: actuator(
                s,
                apis=(
                    "NewtonPIDControlAPI",
                    "NewtonMaxEffortClampingAPI",
                    "NewtonDCMotorClampingAPI",
                    "NewtonPositionBasedClampingAPI",
                    "NewtonActuatorDelayAPI",
                ),
                ki=1.0,
                integralMax=math.inf,
                maxEffort=5.0,
                saturationEffort=8.0,
                velocityLimit=6.0,
                maxMotorEffort=5.0,
                lookupPositions=[-1.0, 1.0],
                lookupEfforts=[2.0, 3.0],
                constEffort=0.5,
                delaySteps=2,
            ),
            actuated=False,
        ),
        set(),
    ),
    # one clause each
    "undriven": (lambda: robot(actuated=False), {(U, J)}),
    "disabled mimic": (lambda: _mimic(False), {(U, "/Robot/follower")}),
    "drive maxForce unauthored": (_with(lambda s: drive(s, max_force=None), actuated=False), {(DMF, J)}),
    "drive maxForce inf": (_with(lambda s: drive(s, max_force=math.inf), actuated=False), {(DMF, J)}),
    "drive maxForce 0": (_with(lambda s: drive(s, max_force=0.0), actuated=False), {(DMF, J)}),
    "drive stiffness negative": (_with(lambda s: drive(s, stiffness=-1.0), actuated=False), {(DG, J)}),
    "drive damping nan": (_with(lambda s: drive(s, damping=math.nan), actuated=False), {(DG, J)}),
    "drive target inf": (_with(lambda s: drive(s, targetPosition=math.inf), actuated=False), {(DT, J)}),
    "actuator without target": (
        _with(lambda s: actuator(s, target=None), actuated=False),
        {("actuator_target", A), (U, J)},
    ),
    "actuator on a missing prim": (
        _with(lambda s: actuator(s, target="/Robot/nope"), actuated=False),
        {("actuator_target", A), (U, J)},
    ),
    "actuator on a fixed joint": (
        _with(lambda s: actuator(s, target="/Robot/root_joint"), actuated=False),
        {("actuator_target", A), (U, J)},
    ),
    "no control law": (_with(lambda s: actuator(s, apis=()), actuated=False), {("control_law", A)}),
    "two control laws": (
        _with(lambda s: actuator(s, apis=("NewtonPDControlAPI", "NewtonPIDControlAPI")), actuated=False),
        {("control_law", A)},
    ),
    "kp negative": (_with(_set(A, "newton:kp", -1.0)), {("gains", A)}),
    "kd inf": (_with(_set(A, "newton:kd", math.inf)), {("gains", A)}),
    "integralMax negative": (_with(_set(A, "newton:integralMax", -1.0)), {("gains", A)}),
    "maxEffort negative": (_with(_set(A, "newton:maxEffort", -2.0)), {("clamps", A)}),
    "maxMotorEffort inf": (_with(_set(A, "newton:maxMotorEffort", math.inf)), {("clamps", A)}),
    "velocityLimit 0": (_with(_set(A, "newton:velocityLimit", 0.0)), {("clamps", A)}),
    "dc velocity limit without saturation": (
        _with(
            lambda s: actuator(s, apis=("NewtonPDControlAPI", "NewtonDCMotorClampingAPI"), velocityLimit=6.0),
            actuated=False,
        ),
        {("clamps", A)},
    ),
    "lookupEfforts negative": (
        _with(_set(A, "newton:lookupEfforts", [1.0, -1.0], Sdf.ValueTypeNames.FloatArray)),
        {("clamps", A)},
    ),
    "constEffort inf": (_with(_set(A, "newton:constEffort", math.inf)), {("const_effort", A)}),
    "delaySteps negative": (
        _with(_set(A, "newton:delaySteps", -1, Sdf.ValueTypeNames.Int)),
        {("delay_steps", A)},
    ),
    "delaySteps not an integer": (_with(_set(A, "newton:delaySteps", 2.5)), {("delay_steps", A)}),
    # warnings: loads, but not as meant
    "delay API without delaySteps": (
        _with(lambda s: actuator(s, apis=("NewtonPDControlAPI", "NewtonActuatorDelayAPI")), actuated=False),
        {("delay_unauthored", A)},
    ),
    "delay API with 0": (
        _with(
            lambda s: actuator(s, apis=("NewtonPDControlAPI", "NewtonActuatorDelayAPI"), delaySteps=0),
            actuated=False,
        ),
        {("delay_zero", A)},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_stage_gets_exactly_the_expected_findings(case: str) -> None:
    make, expected = CASES[case]
    found = {(f.code.removeprefix("NEWTON.DJ.001."), f.where) for f in validate_stage(make())}
    assert found == expected


def test_warnings_are_not_errors_and_every_clause_has_its_own_code() -> None:
    stage = CASES["delay API with 0"][0]()
    assert {f.severity for f in validate_stage(stage)} == {"warning"}
    codes = {c for _make, expected in CASES.values() for c, _where in expected}
    assert codes == {
        U,
        DMF,
        DG,
        DT,
        "actuator_target",
        "control_law",
        "gains",
        "clamps",
        "const_effort",
        "delay_steps",
        "delay_unauthored",
        "delay_zero",
    }


@pytest.mark.parametrize(
    "case,accepted",
    [
        ("actuator", True),
        ("pid with clamps and delay", True),
        ("kp negative", False),
        ("no control law", False),
        ("actuator on a fixed joint", False),
        ("delay API with 0", False),
    ],
)
def test_newton_agrees_with_the_validator(case: str, accepted: bool) -> None:
    """Newton 1.8's importer accepts the valid stages and rejects what the rule calls an error."""
    import newton

    builder = newton.ModelBuilder()
    if accepted:
        builder.add_usd(CASES[case][0]())
        builder.finalize(device="cpu")
    else:
        with pytest.raises(ValueError):
            builder.add_usd(CASES[case][0]())
            builder.finalize(device="cpu")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=ROOT)


def test_cli_validate_prints_code_and_prim_and_exits_nonzero_on_error(tmp_path: Path) -> None:
    bad = CASES["kp negative"][0]()
    second_joint(bad)
    bad.GetRootLayer().Export(str(tmp_path / "bad.usda"))
    r = _cli("validate", str(tmp_path / "bad.usda"))
    assert r.returncode == 1, r.stderr
    lines = r.stdout.strip().splitlines()
    assert f"ERROR NEWTON.DJ.001.gains {A}: " in lines[0]
    assert any(line.startswith("ERROR NEWTON.DJ.001.undriven /Robot/follower: ") for line in lines)
    warn = CASES["delay API with 0"][0]()  # held: an in-memory stage's layer lives as long as the stage
    warn.GetRootLayer().Export(str(tmp_path / "warn.usda"))
    r = _cli("validate", str(tmp_path / "warn.usda"))
    assert r.returncode == 0 and "WARNING NEWTON.DJ.001.delay_zero" in r.stdout
    r = _cli("validate", str(tmp_path / "missing.usda"))
    assert r.returncode == 2 and "not found" in r.stderr
