"""Newton 1.8 USD: one `NewtonActuator` prim per joint, joint armature/friction/damping as Newton attributes.

Written with usd-core `pxr` following docs/consumer-semantics.md §C.3–§C.4: the drive API (NewtonPDControlAPI or
NewtonPIDControlAPI), the clamps in the family's order, NewtonActuatorDelayAPI only with an authored
`newton:delaySteps` ≥ 1, radians, `rel newton:targets`. Joint terms go on the joint through NewtonJointAPI:
`newton:armature` [kg·m²], `newton:friction` [N·m, Coulomb], `newton:damping` per DEGREE for angular DOFs
(the importer multiplies by 180/π). The `implicit` family is the solver's own drive: a UsdPhysics DriveAPI
whose stiffness and damping are per degree.

BAM's friction budget (families dcmotor_stribeck … dcmotor_stribeck_delay) is the consumer package's clamp
(actuator_sysid.consumers.newton): `ActuatorSysidFrictionBudgetAPI` after the family's clamps, with the Coulomb
friction, the joint inertia the stop assumes and the physics step, and `ActuatorSysidPDControlAPI` as the drive,
so that the stage loads only after `actuator_sysid.consumers.register()`; the joint's own `newton:friction` is 0.

An actuator network (a joint whose chosen family is mlp, lstm or gru) is a NewtonNeuralControlAPI prim whose
`newton:modelPath` is the fit's newton.onnx beside the .usda (Newton picks DriveNeuralMLP / DriveNeuralLSTM /
DriveNeuralGRU from the checkpoint's metadata `model_type`) with NewtonDCMotorClampingAPI holding the fitted envelope, as Isaac Lab clips.

Either stand-alone (one pendulum per joint with the fitted test-bench load, so Newton can simulate it) or
onto a robot USD the user uploads, matching joints by prim name.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass

from ..consumers.schema import BUDGET_API, SLEW_PD_API, budget_attributes, register_usd_schemas
from ..consumers.schema import PD_API as BUDGET_PD_API
from ..datasets.recording import JointInfo, Recording
from ..fitting.result import ResultLike, as_result
from ..models.components import get as get_component
from ..models.components.dc_motor import NEWTON_NAMES as DC_NAMES
from ..models.components.servo_goal import GOAL_RATE, slew_rate
from ..models.families import CLAMPS, NET_FAMILIES, Family, is_mujoco_dcmotor
from .mujoco_dcmotor_equivalent import BASE as DCMOTOR_BASE
from .mujoco_dcmotor_equivalent import as_kernel_model
from .mujoco_dcmotor_equivalent import note as dcmotor_note
from .selection import (
    RAD_PER_DEG,
    ChosenModel,
    ExportError,
    Finding,
    bench_loads,
    export_family,
    joint_family,
    physics_dt,
    substitutions,
)

# docs/consumer-semantics.md §C.3 schema names: each drive, clamp and delay component declares its own
PD_API, PID_API = get_component("pd").newton_api, get_component("pid").newton_api
CLAMP_API = {name: c.newton_api for name, c in CLAMPS.items()}
DELAY_API = get_component("delay").newton_api
NEURAL_API = "NewtonNeuralControlAPI"
JOINT_API = "NewtonJointAPI"
ACTUATED_JOINT_TYPES = ("PhysicsRevoluteJoint", "PhysicsPrismaticJoint")
MIN_MASS, MIN_INERTIA = 1e-6, 1e-8  # a massless or inertia-free link is not a simulatable body
REQUIRES = (
    f"{BUDGET_API} needs actuator-sysid's consumer package (pip install actuator-sysid): call "
    "actuator_sysid.consumers.register() before add_usd, else Newton finds no drive on these actuators"
)


def _pxr():
    """usd-core, with the Newton and consumer-package schema plugins registered first so attributes are schema
    properties (USD reads plugins when its schema registry is first built)."""
    register_usd_schemas()
    with contextlib.suppress(ImportError):
        import newton_usd_schemas  # noqa: F401
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

    return Gf, Sdf, Usd, UsdGeom, UsdPhysics


def prim_name(joint: str) -> str:
    """A valid USD prim name (and MJCF/XML name) for a joint name: ASCII letters, digits and '_' only, so no
    character of the name is USD, XML or path syntax, and USD builds of any age read it."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", str(joint)) or "joint"
    return "_" + name if name[0].isdigit() else name


@dataclass
class NetChoice:
    """A joint whose exported actuator is a fitted network: its kind, DC-motor envelope and checkpoint file."""

    joint: str
    kind: str  # "mlp", "lstm" or "gru"
    envelope: dict[str, float]
    model_path: str  # relative to the .usda: the checkpoint file sits beside it


def expresses(family: Family) -> bool:
    """Whether Newton 1.8 runs this family exactly: every one, BAM's friction budgets through the consumer
    package's component (actuator_sysid.consumers.newton), MuJoCo's base <dcmotor> as DrivePD + ClampingDCMotor
    (export/mujoco_dcmotor_equivalent.py); its extensions have no Newton class."""
    return not is_mujoco_dcmotor(family) or family.name == DCMOTOR_BASE


def choose_models(
    result: ResultLike, families: dict[str, str] | str | None = None
) -> tuple[list[ChosenModel | NetChoice], list[Finding]]:
    """One model per joint like selection.choose, but an actuator network is a NetChoice (a neural prim)."""
    from .checkpoints import as_net, checkpoint_files, newton_unsupported, onnx_unsupported

    files = None
    out: list[ChosenModel | NetChoice] = []
    findings: list[Finding] = []
    typed = as_result(result)
    for joint, jr in typed.joints.items():
        name = export_family(typed, joint, families, expresses)
        if name not in NET_FAMILIES:
            fam = joint_family(typed, joint, name)
            model = jr.models[name]
            out.append(ChosenModel(joint, fam, dict(model.params), model.table_positions))
            continue
        if name not in jr.models:
            raise ExportError(f"joint {joint!r} has no fitted {name!r} model; fitted: {sorted(jr.models)}")
        net = as_net(jr.models[name])
        if (why := newton_unsupported(net)) is not None:  # consumer-semantics §C.8
            raise ExportError(f"joint {joint!r}: no neural prim for Newton: {why}")
        files = files if files is not None else checkpoint_files(typed)
        kind, names = files[joint]
        fmt = "newton.onnx" if onnx_unsupported(net) is None else "newton.pt2"
        path = names[fmt] if kind == name else f"{prim_name(joint)}.{name}.{fmt}"
        if kind != name:
            findings.append(
                Finding(
                    "EXPORT.NEWTON.checkpoint_file",
                    "info",
                    joint,
                    f"newton:modelPath is ./{path}: write it beside the .usda with `actuator-sysid "
                    f"export FIT --format {fmt} --family {joint}={name} --out {path}` (the fit's "
                    f"own {names.get(fmt, fmt)} holds its {kind})",
                )
            )
        if fmt == "newton.pt2":
            findings.append(
                Finding(
                    "EXPORT.NEWTON.torch_checkpoint",
                    "warning",
                    joint,
                    f"newton:modelPath is the Torch checkpoint ./{path}, which Newton 1.8 parses only "
                    "with the deprecated allow_unsafe_torch_checkpoints=True: "
                    + (onnx_unsupported(net) or ""),
                )
            )
        env = {
            k: float(net.network[k])
            for k in ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit")
        }
        out.append(NetChoice(joint, name, env, "./" + path))
    return out, findings


def neural_attributes(m: NetChoice) -> tuple[list[str], dict[str, float | str]]:
    """NewtonNeuralControlAPI with the checkpoint path, and the DC-motor clamp with the net's envelope (§C.3)."""
    apis: list[str] = [NEURAL_API]
    attrs: dict[str, float | str] = {"modelPath": m.model_path}
    dc = {attr: m.envelope[name] for name, attr in DC_NAMES.items() if math.isfinite(m.envelope[name])}
    if dc:
        sat_attr, vlim_attr = DC_NAMES["saturation_effort"], DC_NAMES["actuator_velocity_limit"]
        if vlim_attr in dc and sat_attr not in dc:  # Newton rejects that clamp (§C.4)
            dc[sat_attr] = 1e30
        apis.append(CLAMP_API["dc_motor"])
        attrs |= dc
    return apis, attrs


def actuator_attributes(
    m: ChosenModel, joint_inertia: float | None = None, physics_dt: float | None = None
) -> tuple[list[str], dict[str, float | int | list[float]]]:
    """The API schemas and `newton:` attributes of one joint's NewtonActuator (§C.3), in radians, SI: each of the
    family's drive, clamp and delay components writes its own (models/components/); a friction budget adds the
    consumer package's clamp last, with the joint inertia [kg·m²] and physics step [s] its stop assumes."""
    dcmotor = is_mujoco_dcmotor(m.family)
    m = as_kernel_model(m, "Newton")  # a <dcmotor>: the PD + DC clamp it equals
    apis: list[str] = []
    attrs: dict[str, float | int | list[float]] = {}
    for comp in m.family.components:
        try:
            more_apis, more = comp.newton_actuator(m)
        except ValueError as e:  # a model the component cannot write (a table without its positions)
            raise ExportError(str(e)) from None
        apis += more_apis
        attrs |= more
    if m.family.rich_friction:
        if joint_inertia is None or physics_dt is None:
            raise ExportError(
                f"joint {m.joint!r}: {BUDGET_API} needs the joint inertia and physics step (pass the "
                "recording or loads)"
            )
        apis = [BUDGET_PD_API if a == PD_API else a for a in apis] + [BUDGET_API]
        inertia = float(joint_inertia) + float(m.value("armature") or 0.0)
        attrs |= budget_attributes(m.params, inertia, physics_dt)
    if (rate := slew_rate(m)) > 0:  # a servo's goal slew: the consumer package's PD drive on a slewed target
        if not {PD_API, BUDGET_PD_API} & set(apis):
            raise ExportError(f"joint {m.joint!r}: only a PD drive slews its target ({GOAL_RATE.name})")
        apis = [SLEW_PD_API if a in (PD_API, BUDGET_PD_API) else a for a in apis]
        attrs["goalRateLimit"] = rate
        if dcmotor:  # MuJoCo's slew state starts at the setpoint, not at the joint position
            attrs["slewFromTarget"] = True
    return apis, attrs


def joint_attributes(m: ChosenModel, angular: bool = True) -> dict[str, float]:
    """NewtonJointAPI attributes: armature, Coulomb friction, and damping per degree for angular DOFs (§C.4),
    each from its joint-term component."""
    out: dict[str, float] = {}
    m = as_kernel_model(m, "Newton")
    for comp in m.family.components:
        out |= comp.newton_joint(m, angular)
    if (
        m.family.rich_friction and "friction" in out
    ):  # the budget's clamp carries the Coulomb part as a hard stop
        out["friction"] = 0.0
    return out


def newton_warnings(m: ChosenModel) -> list[Finding]:
    """What Newton cannot express of a model, and what a friction budget needs of the user: stated on the export,
    never silently dropped. Each component says what Newton cannot hold of it."""
    out = []
    if is_mujoco_dcmotor(m.family):  # written as the PD + DC clamp it equals
        code, severity, msg = dcmotor_note(m.family, m.params)
        out.append(Finding(f"EXPORT.NEWTON.{code}", severity, m.joint, msg))
        m = as_kernel_model(m, "Newton")
    if m.family.rich_friction:
        out.append(
            Finding(
                "EXPORT.NEWTON.friction_budget",
                "info",
                m.joint,
                f"BAM's friction budget ({', '.join(m.family.rich_friction)}) is {BUDGET_API}, a clamp of "
                "actuator-sysid's consumer package: call actuator_sysid.consumers.register() before add_usd "
                "(without it Newton finds no drive on the actuator and refuses the stage), and give the joints' "
                "external torque every step (actuator_sysid.consumers.newton.set_external_effort). It carries "
                f"the Coulomb friction ({m.value('friction')} N·m) as a hard stop: the joint's newton:friction is 0",
            )
        )
    for comp in m.family.components:
        out += [
            Finding(f"EXPORT.NEWTON.{code}", severity, m.joint, msg)
            for code, severity, msg in comp.notes("newton", m)
            if not (code == GOAL_RATE.name and slew_rate(m) > 0)  # the drive slews: said below
        ]
    if slew_rate(m) > 0:
        msg = (
            f"the servo slews its goal at most {slew_rate(m):.6g} rad/s: the drive is {SLEW_PD_API}, Newton's PD law on a "
            "slewed target from actuator-sysid's consumer package (call actuator_sysid.consumers.register() before "
            "add_usd; without it Newton finds no drive on the actuator and refuses the stage)"
        )
        out.append(Finding(f"EXPORT.NEWTON.{GOAL_RATE.name}", "info", m.joint, msg))
    return out


def _set(prim, name: str, value, Sdf) -> None:
    """Author one `newton:` attribute: strings as Asset, bools as Bool, ints as Int, lists as FloatArray, else Float
    (§A.11)."""
    if isinstance(value, str):
        prim.CreateAttribute(f"newton:{name}", Sdf.ValueTypeNames.Asset).Set(Sdf.AssetPath(value))
    elif isinstance(value, bool):
        prim.CreateAttribute(f"newton:{name}", Sdf.ValueTypeNames.Bool).Set(value)
    elif isinstance(value, list):
        prim.CreateAttribute(f"newton:{name}", Sdf.ValueTypeNames.FloatArray).Set(value)
    elif isinstance(value, int):
        prim.CreateAttribute(f"newton:{name}", Sdf.ValueTypeNames.Int).Set(value)
    else:
        prim.CreateAttribute(f"newton:{name}", Sdf.ValueTypeNames.Float).Set(float(value))


def author_joint(
    stage,
    joint_prim,
    m: ChosenModel | NetChoice,
    actuator_path: str,
    joint_inertia: float | None = None,
    physics_dt: float | None = None,
) -> None:
    """Write one joint's actuator (or implicit drive) and its Newton joint attributes onto a stage; a friction
    budget's stop needs the joint's load inertia without armature [kg·m²] and the physics step [s]."""
    _Gf, Sdf, _Usd, _UsdGeom, UsdPhysics = _pxr()
    if isinstance(m, NetChoice):  # the net holds the actuator and whatever joint losses it learned
        _define_actuator(stage, joint_prim, actuator_path, *neural_attributes(m))
        return
    angular = joint_prim.GetTypeName() == "PhysicsRevoluteJoint"
    jattrs = joint_attributes(m, angular)
    if jattrs:
        joint_prim.AddAppliedSchema(JOINT_API)
        for k, value in jattrs.items():
            _set(joint_prim, k, value, Sdf)
    if m.family.drive == "implicit":
        drive = UsdPhysics.DriveAPI.Apply(joint_prim, "angular" if angular else "linear")
        per = RAD_PER_DEG if angular else 1.0  # UsdPhysics drive gains are per degree for angular DOFs
        drive.CreateTypeAttr("force")
        drive.CreateStiffnessAttr(float(m.value("stiffness") or 0.0) * per)
        drive.CreateDampingAttr(float(m.value("damping") or 0.0) * per)
        drive.CreateMaxForceAttr(float(m.value("actuator_effort_limit") or 1e6))
        drive.CreateTargetPositionAttr(0.0)
        drive.CreateTargetVelocityAttr(0.0)
        return
    _define_actuator(stage, joint_prim, actuator_path, *actuator_attributes(m, joint_inertia, physics_dt))


def _define_actuator(stage, joint_prim, actuator_path: str, apis: list[str], attrs: dict) -> None:
    """A NewtonActuator prim targeting the joint, with its control-law APIs and attributes. An explicit actuator
    replaces the solver's drive: the joint's drive gains are zeroed (Isaac Lab zeroes explicit groups', §A.3)."""
    _Gf, Sdf, _Usd, _UsdGeom, UsdPhysics = _pxr()
    for drive in UsdPhysics.DriveAPI.GetAll(joint_prim):
        drive.CreateStiffnessAttr().Set(0.0)
        drive.CreateDampingAttr().Set(0.0)
    act = stage.DefinePrim(actuator_path, "NewtonActuator")
    for api in apis:
        act.AddAppliedSchema(api)
    act.CreateRelationship("newton:targets").SetTargets([joint_prim.GetPath()])
    for k, value in attrs.items():
        _set(act, k, value, Sdf)


def _new_stage(dt: float, gravity: float):
    Gf, Sdf, Usd, UsdGeom, UsdPhysics = _pxr()
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    world = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(world.GetPrim())
    scene = UsdPhysics.Scene.Define(stage, "/World/PhysicsScene")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr(float(gravity))
    scene.GetPrim().AddAppliedSchema("NewtonSceneAPI")
    # delays count physics steps: the stage says which step they were fitted at
    scene.GetPrim().CreateAttribute("newton:timeStepsPerSecond", Sdf.ValueTypeNames.Int).Set(
        int(round(1.0 / dt))
    )
    return stage


def standalone_stage(models: list[ChosenModel | NetChoice], loads: dict[str, JointInfo], dt: float):
    """One fixed-base pendulum per joint with its test-bench load (q = 0 hanging down, gravity −Z).

    Returns (stage, findings). A joint whose load has no gravity torque turns about the vertical axis.
    """
    Gf, _Sdf, _Usd, UsdGeom, UsdPhysics = _pxr()
    findings: list[Finding] = []
    gravities = sorted({round(loads[m.joint].gravity, 9) for m in models if loads[m.joint].gravity_coeff > 0})
    g = gravities[0] if gravities else 9.81
    if len(gravities) > 1:
        findings.append(
            Finding(
                "EXPORT.NEWTON.gravity",
                "warning",
                "/World/PhysicsScene",
                f"the joints' benches have different gravity {gravities}; the stage uses {g}",
            )
        )
    stage = _new_stage(dt, g)
    for i, m in enumerate(models):
        info = loads[m.joint]
        name = prim_name(m.joint)
        root = f"/World/{name}_bench"
        bench = UsdGeom.Xform.Define(stage, root)
        UsdPhysics.ArticulationRootAPI.Apply(bench.GetPrim())
        x = float(i)  # benches side by side, 1 m apart
        # the fixed base: a body welded to the world, so the bench is a fixed-base articulation for Newton
        base = UsdGeom.Xform.Define(stage, f"{root}/base")
        base.AddTranslateOp().Set(Gf.Vec3d(x, 0.0, 0.0))
        UsdPhysics.RigidBodyAPI.Apply(base.GetPrim())
        base_mass = UsdPhysics.MassAPI.Apply(base.GetPrim())
        base_mass.CreateMassAttr(1.0)
        base_mass.CreateDiagonalInertiaAttr(Gf.Vec3f(1e-3, 1e-3, 1e-3))
        weld = UsdPhysics.FixedJoint.Define(stage, f"{root}/root_joint")
        weld.CreateBody1Rel().SetTargets([base.GetPath()])
        weld.CreateLocalPos0Attr(Gf.Vec3f(x, 0.0, 0.0))
        weld.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
        link = UsdGeom.Xform.Define(stage, f"{root}/link")
        link.AddTranslateOp().Set(Gf.Vec3d(x, 0.0, 0.0))
        UsdPhysics.RigidBodyAPI.Apply(link.GetPrim())
        mass_api = UsdPhysics.MassAPI.Apply(link.GetPrim())
        prismatic = info.joint_type == "prismatic"
        mass = max(info.load_inertia if prismatic else info.mass, MIN_MASS)
        com = 0.0 if prismatic or info.mass <= 0 else info.com_distance
        inertia = max(info.inertia, MIN_INERTIA)
        mass_api.CreateMassAttr(float(mass))
        mass_api.CreateCenterOfMassAttr(Gf.Vec3f(0.0, 0.0, -float(com)))
        mass_api.CreateDiagonalInertiaAttr(Gf.Vec3f(inertia, inertia, inertia))
        mass_api.CreatePrincipalAxesAttr(Gf.Quatf(1.0, 0.0, 0.0, 0.0))
        if prismatic:
            joint = UsdPhysics.PrismaticJoint.Define(stage, f"{root}/{name}")
            joint.CreateAxisAttr("X")  # horizontal: no gravity along the slide
        else:
            joint = UsdPhysics.RevoluteJoint.Define(stage, f"{root}/{name}")
            joint.CreateAxisAttr("Y" if info.gravity_coeff > 0 else "Z")
        joint.CreateBody0Rel().SetTargets([base.GetPath()])
        joint.CreateBody1Rel().SetTargets([link.GetPath()])
        joint.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.0, 0.0))
        joint.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
        author_joint(stage, joint.GetPrim(), m, f"{root}/{name}_actuator", info.load_inertia, dt)
        if info.gravity_coeff > 0 and abs(info.gravity - g) > 1e-9:
            findings.append(
                Finding(
                    "EXPORT.NEWTON.gravity",
                    "warning",
                    str(joint.GetPath()),
                    f"bench gravity {info.gravity} m/s² differs from the stage's {g} m/s²",
                )
            )
    return stage, findings


def open_robot(robot_usd: str | bytes):
    """A robot USD given as .usda text (or bytes of .usda / .usdc) as an editable stage."""
    _Gf, Sdf, Usd, _UsdGeom, _UsdPhysics = _pxr()
    if isinstance(robot_usd, bytes) and robot_usd[:8] == b"PXR-USDC":
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "robot.usdc"
            path.write_bytes(robot_usd)
            src = Sdf.Layer.FindOrOpen(str(path))
            layer = Sdf.Layer.CreateAnonymous(".usda")
            layer.TransferContent(src)
    else:
        text = robot_usd.decode("utf-8") if isinstance(robot_usd, bytes) else robot_usd
        layer = Sdf.Layer.CreateAnonymous(".usda")
        if not layer.ImportFromString(text):
            raise ExportError("the robot USD could not be parsed as .usda text")
    return Usd.Stage.Open(layer)


def robot_stage(
    models: list[ChosenModel | NetChoice],
    robot_usd: str | bytes,
    inertias: dict[str, float] | None = None,
    dt: float | None = None,
):
    """The user's robot with one NewtonActuator per fitted joint, matched by joint prim name; `inertias` (the
    bench loads without armature) and `dt` are what a friction budget's stop assumes.

    Existing NewtonActuator prims targeting those joints are deactivated, as Isaac Lab does (§A.11).
    """
    stage = open_robot(robot_usd)
    findings: list[Finding] = []
    joints: dict[str, list] = {}
    for prim in stage.Traverse():
        if prim.GetTypeName() in ACTUATED_JOINT_TYPES:
            joints.setdefault(prim.GetName(), []).append(prim)
    for m in models:
        found = joints.get(m.joint) or joints.get(prim_name(m.joint)) or []
        if not found:
            findings.append(
                Finding(
                    "EXPORT.NEWTON.unmatched_joint",
                    "error",
                    m.joint,
                    f"no revolute or prismatic joint prim named {m.joint!r} in the robot USD",
                )
            )
            continue
        if len(found) > 1:
            findings.append(
                Finding(
                    "EXPORT.NEWTON.ambiguous_joint",
                    "warning",
                    m.joint,
                    f"{len(found)} joint prims are named {m.joint!r}; all get the fitted actuator",
                )
            )
        for jp in found:
            for other in list(stage.Traverse()):
                if other.GetTypeName() == "NewtonActuator":
                    rel = other.GetRelationship("newton:targets")
                    if rel and jp.GetPath() in rel.GetTargets():
                        other.SetActive(False)
                        findings.append(
                            Finding(
                                "EXPORT.NEWTON.replaced_actuator",
                                "info",
                                str(other.GetPath()),
                                f"deactivated: the fitted actuator of {m.joint!r} replaces it",
                            )
                        )
            path = f"{jp.GetParent().GetPath()}/{prim_name(jp.GetName())}_actuator"
            author_joint(stage, jp, m, path, (inertias or {}).get(m.joint), dt)
    return stage, findings


def build_stage(
    result: ResultLike,
    rec: Recording | None = None,
    *,
    families: dict[str, str] | str | None = None,
    loads: dict[str, dict] | None = None,
    robot_usd: str | bytes | None = None,
):
    """The export stage and what the exporter noted about it: (stage, findings)."""
    typed = as_result(result)
    models, findings = choose_models(typed, families)
    rich = [m.joint for m in models if isinstance(m, ChosenModel) and m.family.rich_friction]
    findings += substitutions(typed, models, "Newton", "EXPORT.NEWTON")
    findings += [f for m in models if isinstance(m, ChosenModel) for f in newton_warnings(m)]
    if robot_usd is not None:
        inertias = {j: v.load_inertia for j, v in bench_loads(typed, rec, loads).items()} if rich else None
        stage, more = robot_stage(models, robot_usd, inertias, physics_dt(typed))
    else:
        stage, more = standalone_stage(models, bench_loads(typed, rec, loads), physics_dt(typed))
    layer = stage.GetRootLayer()
    layer.customLayerData = {
        **dict(layer.customLayerData),
        "actuator_sysid": {
            "physics_dt": physics_dt(typed),
            "delay_unit": "physics steps",
            "families": {m.joint: m.kind if isinstance(m, NetChoice) else m.family.name for m in models},
        },
    }
    if rich:  # said where a user opening the file reads first, as Newton's own error will not name us
        layer.customLayerData = {**dict(layer.customLayerData), "requires": REQUIRES}
        layer.documentation = REQUIRES
    return stage, findings + more


def render_usda(result: ResultLike, rec: Recording | None = None, **kwargs) -> str:
    """The Newton USD export as .usda text (see build_stage for the options)."""
    stage, _ = build_stage(result, rec, **kwargs)
    return stage.GetRootLayer().ExportToString()
