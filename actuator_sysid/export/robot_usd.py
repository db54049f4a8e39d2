"""A whole robot's Newton USD export: NewtonActuator prims authored on the user's own robot.

For a USD robot, a layer over the user's file (it sublayers their USD by path and authors overs on their joint
prims); for an MJCF or URDF robot, a physics stage written from what Newton's importer made of their file (bodies
with their mass, centre of mass and principal inertia, the joint tree with each joint's frames, axis and limits,
the root welded to the world as the fit had it); visuals and collisions are skipped, as the fit skipped them.
Each actuated joint gets its fitted joint terms (NewtonJointAPI) and one NewtonActuator (PD, its clamps, the
delay), written by export/newton_usd.py's `author_joint` (docs/consumer-semantics.md §C.3–§C.4). A value the log
does not identify says so in its attribute's `doc` ("NOT IDENTIFIED (hip.armature): …"), beside the value; the
header lists them all, and the layer's customLayerData `not_identified` names each (encoder biases too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..fitting.result import RobotResult
from ..models.robot import USD_SUFFIXES
from .newton_usd import _new_stage, _pxr, actuator_attributes, author_joint, joint_attributes, prim_name
from .robot_common import (
    joint_marks,
    joint_models,
    provenance_lines,
    unidentified_bias,
    unidentified_groups,
    written_by,
)
from .selection import ChosenModel, ExportError, Finding, comment_line, prepend_comment

if TYPE_CHECKING:
    from .formats import RobotArgs


def render_robot(a: RobotArgs) -> tuple[dict[str, str], dict[str, Any]]:
    """newton.usda, NEWTON.DJ.001-validated and read back through Newton's add_usd, and what it noted (the
    writer's findings, DJ.001's, and every value Newton did not read back as the fit states it)."""
    from .validate import validate_stage

    stage, findings = build_robot_stage(a.result, a.robot)
    dj = validate_stage(stage)
    text = stage.GetRootLayer().ExportToString()
    text = prepend_comment("newton.usda", text, provenance_lines(a.result, "Newton 1.8 USD"))
    mismatches = readback_mismatches(import_stage(stage), a.result)
    return {"newton.usda": text}, {
        "findings": [f.as_dict() for f in findings],
        "dj001": [f.as_dict() for f in dj],
        "readback_mismatches": mismatches,
        "readback_equal": not mismatches,
    }


def _quat(q_xyzw, Gf):
    x, y, z, w = (float(v) for v in q_xyzw)
    return Gf.Quatf(w, x, y, z)


def _axis_rotation(axis: np.ndarray):
    """The rotation taking +X onto the joint axis (USD joints turn about a principal axis of their frame)."""
    from scipy.spatial.transform import Rotation

    a = np.asarray(axis, float) / np.linalg.norm(axis)
    x = np.array([1.0, 0.0, 0.0])
    c = float(np.clip(x @ a, -1.0, 1.0))
    if c > 1 - 1e-9:
        return Rotation.identity()
    if c < -1 + 1e-9:
        return Rotation.from_rotvec([0.0, 0.0, np.pi])
    v = np.cross(x, a)
    return Rotation.from_rotvec(v / np.linalg.norm(v) * np.arccos(c))


def _mass(prim, mass: float, com, inertia, UsdPhysics, Gf) -> None:
    """MassAPI from Newton's body mass, centre of mass and inertia about it (diagonal + principal axes)."""
    from scipy.spatial.transform import Rotation

    m = UsdPhysics.MassAPI.Apply(prim)
    m.CreateMassAttr(float(mass))
    m.CreateCenterOfMassAttr(Gf.Vec3f(*(float(c) for c in com)))
    d, v = np.linalg.eigh(np.array(inertia, float).reshape(3, 3))
    if np.linalg.det(v) < 0:
        v[:, 0] = -v[:, 0]
    m.CreateDiagonalInertiaAttr(Gf.Vec3f(*(float(max(x, 1e-9)) for x in d)))
    m.CreatePrincipalAxesAttr(_quat(Rotation.from_matrix(v).as_quat(), Gf))


def _body(stage, path: str, b, k: int, Gf, UsdGeom, UsdPhysics):
    xf = UsdGeom.Xform.Define(stage, path)
    tf = np.array(b.body_q[k], float)
    xf.AddTranslateOp().Set(Gf.Vec3d(*tf[:3]))
    xf.AddOrientOp().Set(_quat(tf[3:], Gf))
    UsdPhysics.RigidBodyAPI.Apply(xf.GetPrim())
    _mass(xf.GetPrim(), b.body_mass[k], b.body_com[k], b.body_inertia[k], UsdPhysics, Gf)
    return xf.GetPrim()


def _joint(stage, path: str, b, j: int, bodies: dict[int, str], newton, Gf, UsdPhysics):
    """One joint of the builder as a UsdPhysics joint: frames from joint_X_p / joint_X_c, the axis onto +X."""
    from scipy.spatial.transform import Rotation

    jt = int(b.joint_type[j])
    kinds = {
        int(newton.JointType.FIXED): UsdPhysics.FixedJoint,
        int(newton.JointType.REVOLUTE): UsdPhysics.RevoluteJoint,
        int(newton.JointType.PRISMATIC): UsdPhysics.PrismaticJoint,
    }
    if jt not in kinds:
        raise ExportError(
            f"joint {b.joint_label[j]}: the stage writer authors fixed, revolute and prismatic joints "
            f"only (this one is {newton.JointType(jt).name})"
        )
    joint = kinds[jt].Define(stage, path)
    xp, xc = np.array(b.joint_X_p[j], float), np.array(b.joint_X_c[j], float)
    rot = Rotation.identity()
    if jt != int(newton.JointType.FIXED):
        d = int(b.joint_qd_start[j])
        rot = _axis_rotation(np.array(b.joint_axis[d], float))
        joint.CreateAxisAttr("X")
        lo, hi = float(b.joint_limit_lower[d]), float(b.joint_limit_upper[d])
        per = 180.0 / np.pi if jt == int(newton.JointType.REVOLUTE) else 1.0  # revolute limits in degrees
        if np.isfinite(lo) and np.isfinite(hi) and abs(lo) < 1e5 and abs(hi) < 1e5:
            joint.CreateLowerLimitAttr(lo * per)
            joint.CreateUpperLimitAttr(hi * per)
    parent, child = int(b.joint_parent[j]), int(b.joint_child[j])
    if parent >= 0:
        joint.CreateBody0Rel().SetTargets([bodies[parent]])
    joint.CreateBody1Rel().SetTargets([bodies[child]])
    joint.CreateLocalPos0Attr(Gf.Vec3f(*xp[:3]))
    joint.CreateLocalRot0Attr(_quat((Rotation.from_quat(xp[3:]) * rot).as_quat(), Gf))
    joint.CreateLocalPos1Attr(Gf.Vec3f(*xc[:3]))
    joint.CreateLocalRot1Attr(_quat((Rotation.from_quat(xc[3:]) * rot).as_quat(), Gf))
    return joint.GetPrim()


def stage_from_builder(robot, dt: float):
    """A USD physics stage of the robot as Newton imported it: (stage, {joint name: joint prim})."""
    import newton

    Gf, _Sdf, _Usd, UsdGeom, UsdPhysics = _pxr()
    b = robot.builder
    stage = _new_stage(dt, 9.81)
    root = f"/World/{prim_name(robot.path.stem)}"
    UsdPhysics.ArticulationRootAPI.Apply(UsdGeom.Xform.Define(stage, root).GetPrim())
    bodies: dict[int, str] = {}
    for k, label in enumerate(b.body_label):
        path = f"{root}/{prim_name(label.rsplit('/', 1)[-1])}"
        if path in bodies.values():
            path = f"{path}_{k}"
        _body(stage, path, b, k, Gf, UsdGeom, UsdPhysics)
        bodies[k] = path
    joints = {}
    UsdGeom.Scope.Define(stage, f"{root}/joints")
    for j, label in enumerate(b.joint_label):
        prim = _joint(
            stage,
            f"{root}/joints/{prim_name(label.rsplit('/', 1)[-1])}",
            b,
            j,
            bodies,
            newton,
            Gf,
            UsdPhysics,
        )
        joints[label.rsplit("/", 1)[-1]] = prim
    return stage, joints


def stage_over_usd(path: Path, dt: float):
    """A layer over the user's USD (sublayered by absolute path): (stage, {joint prim name: [prims]})."""
    Gf, Sdf, Usd, _UsdGeom, UsdPhysics = _pxr()
    layer = Sdf.Layer.CreateAnonymous(".usda")
    layer.subLayerPaths.append(str(Path(path).resolve()))
    stage = Usd.Stage.Open(layer)
    stage.SetEditTarget(layer)
    joints: dict[str, list] = {}
    scenes = []
    for prim in stage.Traverse():
        if prim.GetTypeName() in ("PhysicsRevoluteJoint", "PhysicsPrismaticJoint"):
            joints.setdefault(prim.GetName(), []).append(prim)
        if prim.IsA(UsdPhysics.Scene):
            scenes.append(prim)
    if not scenes:
        scenes = [UsdPhysics.Scene.Define(stage, "/PhysicsScene").GetPrim()]
    for scene in scenes:  # delays count physics steps: the stage says which step they were fitted at
        scene.AddAppliedSchema("NewtonSceneAPI")
        scene.CreateAttribute("newton:timeStepsPerSecond", Sdf.ValueTypeNames.Int).Set(int(round(1.0 / dt)))
    return stage, {k: v for k, v in joints.items()}


def _user_joints(stage, found: dict[str, list], joints: list[str], findings: list[Finding]) -> dict:
    """The user's joint prims of the fitted joints, their drives and NewtonActuators replaced in this layer."""
    _Gf, _Sdf, _Usd, _UsdGeom, UsdPhysics = _pxr()
    prims = {}
    actuators = [p for p in stage.Traverse() if p.GetTypeName() == "NewtonActuator"]
    for joint in joints:
        hits = found.get(joint) or found.get(prim_name(joint)) or []
        if not hits:
            raise ExportError(f"no revolute or prismatic joint prim named {joint!r} in the robot USD")
        jp = prims[joint] = hits[0]
        for inst in [s.split(":", 1)[1] for s in jp.GetAppliedSchemas() if s.startswith("PhysicsDriveAPI:")]:
            jp.RemoveAPI(UsdPhysics.DriveAPI, inst)  # the fitted actuator replaces the user's drive
            findings.append(
                Finding(
                    "EXPORT.NEWTON.replaced_drive",
                    "info",
                    str(jp.GetPath()),
                    f"DriveAPI:{inst} removed in this layer: the fitted NewtonActuator drives the joint",
                )
            )
        for other in actuators:
            rel = other.GetRelationship("newton:targets")
            if rel and jp.GetPath() in rel.GetTargets():
                other.SetActive(False)  # the fitted actuator replaces it, as Isaac Lab does (§A.11)
                findings.append(
                    Finding(
                        "EXPORT.NEWTON.replaced_actuator",
                        "info",
                        str(other.GetPath()),
                        f"deactivated: the fitted actuator of {joint!r} replaces it",
                    )
                )
    return prims


def build_robot_stage(result: RobotResult, robot) -> tuple[Any, list[Finding]]:
    """The Newton USD stage of the whole robot with one NewtonActuator per actuated joint: (stage, findings)."""
    models = joint_models(result)
    dt = result.physics_dt
    findings: list[Finding] = []
    if robot.path.suffix.lower() in USD_SUFFIXES:
        stage, found = stage_over_usd(robot.path, dt)
        prims = _user_joints(stage, found, list(models), findings)
        how = f"a layer over {robot.path.name} (sublayered by its path where it was exported: keep that file there)"
    else:
        stage, prims = stage_from_builder(robot, dt)
        how = (
            f"a physics stage written from Newton's import of {robot.path.name} (bodies' mass and inertia, joint "
            "frames, axes and limits; visuals and collisions skipped)"
        )
    marks = joint_marks(result)
    for joint, m in models.items():
        jp = prims[joint]
        path = f"{jp.GetParent().GetPath()}/{prim_name(joint)}_actuator"
        author_joint(stage, jp, m, path)
        _mark(jp, stage.GetPrimAtPath(path), m, marks.get(joint, {}))
    layer = stage.GetRootLayer()
    not_identified = {g: dict(v) for g, v in unidentified_groups(result).items()}
    if bias := unidentified_bias(result):
        not_identified["encoder_bias"] = bias
    layer.customLayerData = {
        **dict(layer.customLayerData),
        "actuator_sysid": {
            "physics_dt": dt,
            "decimation": result.decimation,
            "delay_unit": "physics steps",
            "robot": robot.path.name,  # the file name: the export never carries a server path
            "stage": how,
            "encoder_bias": dict(result.encoder_bias or {}),
            "effort_mode": str(result.effort_mode or "explicit"),
            "not_identified": not_identified,
        },
    }
    findings.append(Finding("EXPORT.NEWTON.robot_stage", "info", "/", how))
    if result.effort_mode == "implicit":  # NewtonActuator has no attribute for it
        findings.append(
            Finding(
                "EXPORT.NEWTON.effort_mode_implicit",
                "warning",
                "/",
                "the fit assumed Newton's implicit effort mode, which no NewtonActuator attribute holds (the layer's "
                "customLayerData says so): call set_effort_mode_implicit on each actuator after add_usd, or it "
                "runs explicitly",
            )
        )
    return stage, findings


def _mark(joint_prim, actuator_prim, m: ChosenModel, marks: dict[str, str]) -> None:
    """Each unidentified value's mark as the `doc` of the `newton:` attributes it sets on the joint prim and its
    NewtonActuator (those that change with it)."""
    angular = joint_prim.GetTypeName() == "PhysicsRevoluteJoint"
    writers: list[tuple[Any, Callable[[ChosenModel], Mapping[str, object]]]] = [
        (joint_prim, lambda c: joint_attributes(c, angular))
    ]
    if actuator_prim and actuator_prim.IsValid():
        writers.append((actuator_prim, lambda c: actuator_attributes(c)[1]))
    for param, mark in marks.items():
        for prim, write in writers:
            for k in written_by(m, param, write):
                attr = prim.GetAttribute(f"newton:{k}")
                if attr:
                    attr.SetDocumentation(comment_line(mark))


def import_stage(stage, floating: bool = False):
    """The stage through Newton's own importer, as the replay and the read-back use it: a finalized CPU model."""
    import newton

    b = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_usd(
        stage,
        floating=floating,
        load_visual_shapes=False,
        load_static_visual_shapes=False,
        hide_collision_shapes=True,
        skip_mesh_approximation=True,
        load_sites=False,
    )
    return b.finalize(device="cpu")


def readback(model, result: RobotResult) -> dict[str, dict[str, float]]:
    """Per joint, what Newton's importer made of the export: gains, clamps, delay and joint terms (SI, float32)."""
    labels = [lab.rsplit("/", 1)[-1] for lab in model.joint_label]
    qd_start = model.joint_qd_start.numpy()
    models = joint_models(result)
    dof = {j: int(qd_start[labels.index(prim_name(j))]) for j in models if prim_name(j) in labels}
    by_dof: dict[int, dict[str, float]] = {}
    for act in model.actuators:
        for k, d in enumerate(act.indices.numpy()):
            v = {
                "stiffness": float(act.drive.kp.numpy()[k]),
                "damping": float(act.drive.kd.numpy()[k]),
                "delay": float(act.delay.delay_steps.numpy()[k]) if act.delay is not None else 0.0,
            }
            for c in act.clamping:
                for attr, name in (
                    ("max_effort", "actuator_effort_limit"),
                    ("saturation_effort", "saturation_effort"),
                    ("velocity_limit", "actuator_velocity_limit"),
                    ("max_motor_effort", "actuator_effort_limit"),
                ):
                    if hasattr(c, attr):
                        v[name] = float(getattr(c, attr).numpy()[k])
            by_dof[int(d)] = v
    out = {}
    for j, d in dof.items():
        out[j] = {
            **by_dof.get(d, {}),
            "armature": float(model.joint_armature.numpy()[d]),
            "friction": float(model.joint_friction.numpy()[d]),
            "viscous_friction": float(model.joint_damping.numpy()[d]),
        }
    return out


def readback_mismatches(model, result: RobotResult, rtol: float = 1e-5) -> list[str]:
    """Every exported value Newton did not read back as the fit states it (float32 rounding allowed)."""
    back = readback(model, result)
    bad = []
    for j, m in joint_models(result).items():
        if j not in back:
            bad.append(f"{j}: not in the imported model")
            continue
        want = {
            k: m.params[k]
            for k in (
                "stiffness",
                "damping",
                "armature",
                "friction",
                "viscous_friction",
                "actuator_effort_limit",
                "saturation_effort",
                "actuator_velocity_limit",
                "delay",
            )
            if k in m.params
        }
        want.setdefault("delay", 0.0)
        for k, v in want.items():
            got = back[j].get(k)
            if got is None or not np.isclose(got, v, rtol=rtol, atol=1e-7):
                bad.append(f"{j}.{k}: exported {v:.7g}, Newton read {got}")
    return bad
