"""Isaac Lab actuator configs from a fit result: ready-to-paste Python source, JSON and YAML.

Field names are Isaac Lab 3.0's (`actuator_effort_limit`, `actuator_velocity_limit`, ...) by default, or
Isaac Lab 2.x's (`effort_limit`, `velocity_limit`, `effort_limit_sim`) on request; values SI. Joints whose
cfgs are equal share one group under one regex. The JSON form loads with
`DCMotorCfg(**doc["actuators"][group]["cfg"])`.

`ACTUATORS` holds, per joint, the best-ranked family Isaac Lab has a built-in class for: those also run
Newton-native (docs/consumer-semantics.md §A.11). When a joint's best model needs more — the `dcmotor_delay` or
`pid` family, or an encoder offset — `ACTUATORS_BEST` uses our explicit subclass built on Isaac Lab's own
classes, which the Python source imports from the consumer package (`actuator_sysid.consumers.isaaclab`); Isaac
Lab runs such classes only with `SimulationCfg(use_newton_actuators=False)` (the Newton USD export expresses the
same model natively). MuJoCo's `<dcmotor>` is written as the DC-motor model it equals, its setpoint slew (like a
servo's fitted goal_rate_limit) as our `DCMotorGoalSlewCfg` (export/mujoco_dcmotor_equivalent.py).

BAM's friction budget (families `dcmotor_stribeck` … `dcmotor_stribeck_delay`, docs/prior-art.md M2–M6) has no
Isaac Lab, Newton or MuJoCo field. `ACTUATORS` writes such a joint as the class of the family it extends with
the Coulomb `friction` alone (finding `friction_approximated`); `ACTUATORS_BEST` writes our
`DCMotorBAMFrictionCfg` / `DelayedDCMotorBAMFrictionCfg`, whose actuator adds the rest of the budget as a
stopping torque computed with the fitted joint inertia and the external torque, given each step or estimated
(finding `friction_estimated` states the estimate). newton.usda carries the budget too (the package's clamp).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re

from ..datasets.recording import Recording
from ..fitting.result import FitResult, JointFit, ModelFit, RankRow, ResultLike, as_result
from ..models import parameters
from ..models.families import (
    DRIVES,
    FAMILIES,
    JOINT_COMPONENTS,
    NET_FAMILIES,
    RICH_FRICTION_TERMS,
    Family,
    get_family,
    is_mujoco_dcmotor,
)
from ..numbers import is_real
from .mujoco_dcmotor_equivalent import as_kernel_fit
from .mujoco_dcmotor_equivalent import note as dcmotor_note
from .selection import (
    ChosenModel,
    ExportError,
    Finding,
    bench_loads,
    comment_line,
    joint_family,
    physics_dt,
)

__all__ = [
    "ExportError",
    "actuator_cfgs",
    "best_cfgs",
    "cfg_hazards",
    "render_json",
    "render_python",
    "render_yaml",
    "validate_cfgs",
]

ISAACLAB_VERSION = "3.0.0"
FIELD_NAMES = ("isaaclab-3", "isaaclab-2")
BACKENDS = ("newton", "physx")
_DELAY = ("min_delay", "max_delay")
CONSUMER_MODULE = "actuator_sysid.consumers.isaaclab"  # our classes: the consumer package, installed with us


def class_fields(family: Family) -> tuple[str, ...]:
    """The fields the cfg class of a family accepts besides joint_names_expr (docs/consumer-semantics.md §A.1), in
    the order we write them: its drive's, clamps' and delay's, then every joint term Isaac Lab has a field for."""
    renames = DRIVES[family.drive].isaaclab_renames
    own = [renames.get(f, f) for c in family.components if c.kind != "joint" for f in c.isaaclab_fields]
    return (*own, *(f for c in JOINT_COMPONENTS for f in c.isaaclab_fields))


# each family's Isaac Lab class (models/families.py: Isaac Lab's own, else our explicit subclass in the Python
# source, CUSTOM below) with the fields its components write
CFG_FIELDS: dict[str, tuple[str, ...]] = {
    cls: class_fields(f) for f in FAMILIES.values() for cls in (f.isaaclab_cfg, f.isaaclab_custom) if cls
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "ImplicitActuatorCfg": ("stiffness", "damping"),
    "IdealPDActuatorCfg": ("stiffness", "damping"),
    "DCMotorCfg": ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit"),
    "DelayedPDActuatorCfg": ("stiffness", "damping", "min_delay", "max_delay"),
    "RemotizedPDActuatorCfg": ("stiffness", "damping", "joint_parameter_lookup"),
    "DelayedDCMotorCfg": ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit", *_DELAY),
    "DelayedPIDActuatorCfg": ("stiffness", "damping", "ki", "physics_dt", *_DELAY),
}
# BAM's friction budget (docs/prior-art.md M2–M6) on the class of the family a rich-friction family extends
BAM_FAMILY_CFG = {f.name: f.isaaclab_budget for f in FAMILIES.values() if f.isaaclab_budget}
_BAM_BASE = {
    f.isaaclab_budget: f.isaaclab_cfg or f.isaaclab_custom for f in FAMILIES.values() if f.isaaclab_budget
}
_BAM_FIELDS = ("joint_inertia", "physics_dt", *RICH_FRICTION_TERMS)
CFG_FIELDS |= {bam: CFG_FIELDS[base] + _BAM_FIELDS for bam, base in _BAM_BASE.items()}
REQUIRED |= {bam: REQUIRED[base] + ("joint_inertia", "physics_dt") for bam, base in _BAM_BASE.items()}
BUILTIN = tuple(dict.fromkeys(f.isaaclab_cfg for f in FAMILIES.values() if f.isaaclab_cfg))  # Isaac Lab's own
CUSTOM_FAMILY_CFG = {f.name: f.isaaclab_custom for f in FAMILIES.values() if f.isaaclab_custom}
# a slewed position target (goal_rate_limit, MuJoCo's <dcmotor> slewmax): our subclass of the class it slews
SLEWED = {
    "DCMotorCfg": "DCMotorGoalSlewCfg",
    "IdealPDActuatorCfg": "IdealPDActuatorGoalSlewCfg",
    "DelayedDCMotorCfg": "DelayedDCMotorGoalSlewCfg",
    **{bam: bam.removesuffix("Cfg") + "GoalSlewCfg" for bam in _BAM_BASE},
}
_SLEW_FIELDS = ("goal_rate_limit", "physics_dt", "slew_from_target")
CFG_FIELDS |= {
    slewed: tuple(dict.fromkeys(CFG_FIELDS[base] + _SLEW_FIELDS)) for base, slewed in SLEWED.items()
}
REQUIRED |= {
    slewed: tuple(dict.fromkeys(REQUIRED[base] + _SLEW_FIELDS[:2])) for base, slewed in SLEWED.items()
}
_DC_CLASSES = (
    "DCMotorCfg",
    "DelayedDCMotorCfg",
    *_BAM_BASE,
    *(SLEWED[c] for c in ("DCMotorCfg", "DelayedDCMotorCfg", *_BAM_BASE)),
)
OFFSET_SUFFIX = "WithEncoderOffset"
# Isaac Lab 2.x names (deprecated aliases in 3.0, actuator_compat.py): explicit vs implicit meaning (§A.1, §A.10)
_V2_NAMES = {
    "actuator_effort_limit": "effort_limit",
    "actuator_velocity_limit": "velocity_limit",
    "joint_effort_limit": "effort_limit_sim",
    "joint_velocity_limit": "velocity_limit_sim",
}


def _cfg_class(family: str, offset: bool = False, bam: bool = False) -> str:
    """The cfg class name that expresses a family: Isaac Lab's own, else ours; for BAM's richer friction our
    subclass carrying the budget (bam), else the class of the family it extends (Coulomb friction alone);
    offset adds the subclass."""
    fam = get_family(family)
    base = fam.isaaclab_cfg or fam.isaaclab_custom  # the one table: models/families.py
    if not base and fam.approximates:
        extended = get_family(fam.approximates)
        base = (extended.isaaclab_budget if bam else "") or extended.isaaclab_cfg or extended.isaaclab_custom
    if not base:
        raise ExportError(f"family {family!r} has no Isaac Lab cfg class; use the Newton export")
    return base.removesuffix("Cfg") + OFFSET_SUFFIX + "Cfg" if offset else base


def _cfg_values(cls: str, params: dict, knots: list[float] | None) -> dict:
    """Our fitted parameters under the cfg class's own field names."""
    values = dict(params)
    if "delay" in params:
        values["min_delay"] = values["max_delay"] = int(params["delay"])
    if cls == "ImplicitActuatorCfg":  # the implicit telemetry clip is the solver's joint effort limit (§A.10)
        values["joint_effort_limit"] = params.get("actuator_effort_limit")
    if cls.startswith("RemotizedPDActuator"):
        if knots is None:
            raise ExportError("a remotized_pd result needs its table positions (result 'table_positions')")
        efforts = [params[f"lookup_effort_{k}"] for k in range(parameters.TABLE_KNOTS)]
        # rows [angle, transmission ratio (unused by compute, §A.6), max torque]
        values["joint_parameter_lookup"] = [
            [float(a), 1.0, float(e)] for a, e in zip(knots, efforts, strict=True)
        ]
    return values


def _fields(cls: str) -> tuple[str, ...]:
    base = cls.replace(OFFSET_SUFFIX, "")
    return CFG_FIELDS[base] + (("encoder_offset",) if OFFSET_SUFFIX in cls else ())


def _exportable(jr: JointFit) -> str | None:
    """The best-ranked fitted family that Isaac Lab has a built-in cfg class for (None: none has)."""
    for row in jr.ranking or (RankRow(family=jr.best_model),):
        if row.family not in NET_FAMILIES and get_family(row.family).isaaclab_cfg in CFG_FIELDS:
            return row.family
    return None


BACKEND_NOTE = (
    "friction is an absolute Coulomb effort [N·m] as Newton/MuJoCo apply joint_friction (frictionloss); "
    "viscous_friction is Newton joint_damping [N·m·s/rad]; armature is added to the joint inertia."
)
BACKEND_NOTES = {
    "newton": BACKEND_NOTE,
    "physx": "PhysX (Isaac Sim >= 5.0): friction is the static (breakaway) joint friction effort [N·m], "
    "dynamic_friction the sliding friction effort [N·m] (set equal to friction for a Coulomb fit), "
    "viscous_friction the viscous coefficient [N·m·s/rad]; armature [kg·m²] is added to the joint "
    "inertia. Below Isaac Sim 5.0 PhysX reads friction as a unitless coefficient: do not use these values.",
}


def _group_name(joint: str) -> str:
    return re.sub(r"\W+", "_", joint).strip("_") or "joint"


def _joint_cfg(
    joint: str,
    fam_name: str,
    model: ModelFit,
    family,
    *,
    custom: bool,
    backend: str,
    bam: bool = False,
    physics_dt: float = 0.005,
    load_inertia: float | None = None,
) -> dict:
    """One joint's {"class_type", "family", "cfg"} under Isaac Lab 3.0 names; bam: BAM's friction budget in
    our subclass (`load_inertia` then gives the joint inertia it stops the joint with)."""
    fitted, dcmotor = fam_name, is_mujoco_dcmotor(family)
    mapped = [list(dcmotor_note(family, dict(model.params)))] if dcmotor else []
    if dcmotor:  # MuJoCo's <dcmotor>: the kernel model it equals (mujoco_dcmotor_equivalent)
        family, model = as_kernel_fit(family, model, "Isaac Lab")
        fam_name = family.name
    offset = custom and "encoder_offset" in family.joint_terms and family.drive != "implicit"
    cls = _cfg_class(fam_name, offset, bam) if custom else get_family(fam_name).isaaclab_cfg
    slewed = _slews(model.params) and cls in SLEWED and (custom or dcmotor)
    cls = SLEWED[cls] if slewed else cls
    if cls not in CFG_FIELDS and not custom:
        raise ExportError(
            f"family {fam_name!r} has no Isaac Lab cfg class; use the Newton export "
            "or the Python source's explicit subclass (ACTUATORS_BEST)"
        )
    params = dict(model.params)
    values = _cfg_values(cls, params, model.table_positions)
    chosen = ChosenModel(joint, family, params, model.table_positions)
    for comp in family.components:  # a term a cfg field only approximates rewrites that field's value
        values = comp.isaaclab_values(values, chosen)
    notes = [list(n) for comp in family.components for n in comp.notes("isaaclab", chosen)]
    notes = mapped + [n for n in notes if not (slewed and n[0] == "goal_rate_limit")]  # the class slews
    carries_budget = "joint_inertia" in _fields(cls)
    if "physics_dt" in _fields(cls):
        values["physics_dt"] = float(physics_dt)
    if carries_budget:  # the inertia the fit stepped the joint with: the bench load plus the fitted armature
        if load_inertia is None:
            raise ExportError(
                f"joint {joint!r}: {cls} needs the bench load's inertia (pass the recording or loads)"
            )
        values["joint_inertia"] = float(load_inertia) + float(params.get("armature", 0.0))
    if backend == "physx" and "dynamic_friction" not in family.joint_terms and "friction" in values:
        values["dynamic_friction"] = values["friction"]  # Coulomb: sliding friction equals breakaway
        if "stribeck_friction" in family.joint_terms and not carries_budget:  # the Stribeck peak as breakaway
            values["friction"] = values["friction"] + values["stribeck_friction"]
    cfg: dict = {"joint_names_expr": [re.escape(joint)]}
    for name in _fields(cls):
        v = values.get(name)
        if isinstance(v, list) or (isinstance(v, int) and not isinstance(v, bool)):
            cfg[name] = v
        elif v is not None and math.isfinite(v):
            cfg[name] = float(v)
    if slewed and dcmotor:  # MuJoCo's slew state starts at the setpoint, a servo's goal at the position
        cfg["slew_from_target"] = True
    spec = {"class_type": cls, "family": fitted, "cfg": cfg}
    if notes:  # [code, severity, message]: what a component's cfg field approximates (cfg_hazards says it)
        spec["notes"] = notes
    marks = {
        f: "NOT IDENTIFIED: " + u["reason"]
        for p, u in (model.unidentified or {}).items()
        for f in _CFG_NAMES.get(p, (p,))
        if f in cfg
    }
    if marks:  # written although unidentified (required by the class, or asked for): said beside the value
        spec["unidentified"] = marks
    if family.rich_friction and carries_budget:
        spec["estimate"] = _estimate_note(family, cls, cfg)
    elif family.rich_friction:
        spec["approximation"] = _friction_note(family, params, backend)
    return spec


def _slews(params) -> bool:
    """Whether a fit slews its position target (a finite goal_rate_limit)."""
    v = params.get("goal_rate_limit")
    return is_real(v) and math.isfinite(float(v)) and float(v) > 0


_CFG_NAMES = {
    "delay": ("min_delay", "max_delay"),
    "actuator_effort_limit": ("actuator_effort_limit", "joint_effort_limit"),
}


def _friction_note(family, params: dict, backend: str) -> str:
    """What an Isaac Lab built-in cfg keeps of BAM's friction budget (docs/prior-art.md M2–M6): only Coulomb."""
    dropped = ", ".join(f"{t} = {float(params[t]):.4g}" for t in family.rich_friction if t in params)
    kept = (
        "friction = static (Coulomb + Stribeck peak), dynamic_friction = Coulomb"
        if backend == "physx" and "stribeck_friction" in family.joint_terms
        else "friction = the Coulomb part"
    )
    return (
        f"Isaac Lab has no field for BAM's friction budget of family {family.name}: {kept}; "
        f"dropped {dropped}. The ranking says how much worse the native family fits; {bam_carrier(family)}."
    )


def bam_carrier(family) -> str:
    """Which export carries a rich-friction family's whole budget (the other exports' findings name it)."""
    return (
        f"isaaclab.py's ACTUATORS_BEST carries the whole budget ({BAM_FAMILY_CFG[family.approximates]}, an "
        f"explicit actuator subclass from {CONSUMER_MODULE} run with SimulationCfg(use_newton_actuators=False)), "
        "and newton.usda does (the package's ActuatorSysidFrictionBudgetAPI clamp)"
    )


def _estimate_note(family, cls: str, cfg: dict) -> str:
    """What our BAM-friction subclass estimates to carry the budget (its class docstring says the same)."""
    return (
        f"{cls} carries BAM's friction budget of family {family.name}: the engine applies friction = "
        f"{cfg.get('friction', 0.0):.4g} N·m as Coulomb friction and the actuator adds a stopping torque up to "
        "the rest of the budget. It stops the joint as the fit's plant does, with joint_inertia = "
        f"{cfg['joint_inertia']:.4g} kg·m² (the bench load plus armature) and physics_dt = {cfg['physics_dt']:g} s, "
        "and takes the external torque (gravity, contacts, coupling) from set_external_effort when the "
        "simulation gives it each step (exact), else estimates it from the previous step's velocity "
        "change: joint_inertia·Δqd/dt − its previous output + viscous_friction·qd − the engine's Coulomb "
        "friction as it predicted it (exact while the joint slides, within ±friction while it is held, one "
        "step late). On a robot the effective inertia varies with the configuration: set joint_inertia to the "
        "joint-space inertia there, or the stop is approximate; physics_dt must be the simulation step."
    )


def _grouped(per_joint: dict[str, dict]) -> dict[str, dict]:
    """Joints with equal class and values share one group, their names joined in one regex."""
    buckets: dict[str, list[tuple[str, dict]]] = {}
    for joint, g in per_joint.items():
        key = json.dumps(
            {**g, "cfg": {k: v for k, v in g["cfg"].items() if k != "joint_names_expr"}}, sort_keys=True
        )
        buckets.setdefault(key, []).append((joint, g))
    groups: dict[str, dict] = {}
    for members in buckets.values():
        joints = [j for j, _ in members]
        g = members[0][1]
        if len(joints) == 1:
            name = _group_name(joints[0])
        else:
            g = {
                **g,
                "cfg": {**g["cfg"], "joint_names_expr": ["(" + "|".join(re.escape(j) for j in joints) + ")"]},
            }
            prefix = _group_name(os.path.commonprefix(joints))
            name = prefix if len(prefix) >= 2 else _group_name(joints[0]) + "_group"
        while name in groups:
            name += "_"
        groups[name] = g
    return groups


def _load_inertia(
    result: FitResult, joint: str, rec: Recording | None, loads: dict[str, dict] | None
) -> float:
    """The joint's bench load inertia without armature [kg·m²] (selection.bench_loads: loads, the fit, the log)."""
    one = dataclasses.replace(result, joints={joint: result.joints[joint]})
    return bench_loads(one, rec, loads)[joint].load_inertia


def actuator_cfgs(
    result: ResultLike,
    families: dict[str, str] | None = None,
    *,
    custom: bool = False,
    backend: str = "newton",
    rec: Recording | None = None,
    loads: dict[str, dict] | None = None,
) -> dict[str, dict]:
    """Cfg groups: {group: {"class_type": cfg class name, "family", "cfg": {field: value}}}, 3.0 names.

    `families` picks a family per joint; by default the best-ranked family Isaac Lab has a class for, or
    our subclass when the joint has no such fit. custom=True allows our explicit subclasses (Newton-only families, encoder offset) and, by default,
    takes each joint's best model; a rich-friction family then gets our BAM-friction subclass, whose joint
    inertia needs the bench load (`rec` or `loads`, else the fit's own).
    """
    if backend not in BACKENDS:
        raise ExportError(f"unknown backend {backend!r}: choose from {list(BACKENDS)}")
    per_joint: dict[str, dict] = {}
    typed = as_result(result)
    net_joints = []
    for joint, jr in typed.joints.items():
        named = (families or {}).get(joint)
        if jr.nets_only() or (named or jr.best_model) in NET_FAMILIES:  # ActuatorNetMLPCfg / LSTMCfg
            net_joints.append(joint)
            continue
        fam, joint_custom = (families or {}).get(joint), custom
        if not fam:  # a joint fitted with Newton-only families alone gets our subclass
            fam = jr.best_model if custom else _exportable(jr)
            fam, joint_custom = (fam, custom) if fam else (jr.best_model, True)
        family = joint_family(typed, joint, fam)
        inertia = _load_inertia(typed, joint, rec, loads) if custom and family.rich_friction else None
        per_joint[joint] = _joint_cfg(
            joint,
            fam,
            jr.models[fam],
            family,
            custom=joint_custom,
            backend=backend,
            bam=custom,
            physics_dt=physics_dt(typed),
            load_inertia=inertia,
        )
    groups = _grouped(per_joint)
    validate_cfgs(groups)
    return groups | net_cfgs(typed, net_joints)


def best_cfgs(
    result: ResultLike,
    backend: str = "newton",
    *,
    rec: Recording | None = None,
    loads: dict[str, dict] | None = None,
) -> dict[str, dict] | None:
    """Each joint's best model with our subclasses where needed; None when ACTUATORS already holds it."""
    typed = as_result(result)
    for joint, jr in typed.joints.items():
        if jr.nets_only() or jr.best_model in NET_FAMILIES:
            continue
        fam = joint_family(typed, joint, jr.best_model)
        built_in = _exportable(jr)
        if (
            (built_in is not None and built_in != jr.best_model)
            or fam.rich_friction
            or ("encoder_offset" in fam.joint_terms and fam.drive != "implicit")
            or (_slews(jr.models[jr.best_model].params) and not is_mujoco_dcmotor(fam))
        ):
            return actuator_cfgs(typed, custom=True, backend=backend, rec=rec, loads=loads)
    return None


NET_CFG_FIELDS: dict[str, tuple[str, ...]] = {
    "ActuatorNetMLPCfg": (
        "network_file",
        "pos_scale",
        "vel_scale",
        "torque_scale",
        "input_order",
        "input_idx",
        "saturation_effort",
        "actuator_velocity_limit",
        "actuator_effort_limit",
    ),
    "ActuatorNetLSTMCfg": (
        "network_file",
        "saturation_effort",
        "actuator_velocity_limit",
        "actuator_effort_limit",
    ),
}
# nets that read the drive's commands (NetSpec.inputs): our subclasses (consumers/isaaclab.py)
COMMAND_NET_CFGS = ("ActuatorNetMLPCommandsCfg", "ActuatorNetLSTMCommandsCfg")
NET_CFG_FIELDS |= {
    "ActuatorNetMLPCommandsCfg": (*NET_CFG_FIELDS["ActuatorNetMLPCfg"], "inputs", "command_scales"),
    "ActuatorNetLSTMCommandsCfg": (*NET_CFG_FIELDS["ActuatorNetLSTMCfg"], "inputs"),
}
NET_NOTE = (
    "Actuator networks (consumer-semantics §A.7-A.9): network_file is the TorchScript export of this fit\n"
    "(place it next to this file or give an absolute path). Inputs: position error q_des - q and the measured\n"
    "velocity, index k = k physics steps back; Isaac Lab clips the output with the fitted DC-motor envelope.\n"
    "Isaac Lab 3.0 hands nets to Newton 1.8 as TorchScript, which Newton rejects: run them with\n"
    "SimulationCfg(use_newton_actuators=False), or give Newton the newton.onnx export (NewtonNeuralControlAPI)."
)


def net_cfgs(result: ResultLike, joints: list[str] | None = None) -> dict[str, dict]:
    """ActuatorNetMLPCfg / ActuatorNetLSTMCfg groups for the joints with a fitted network (each joint's
    best-ranked net; `joints`: only those), pointing at the checkpoint file the fit's exports hold."""
    from .checkpoints import as_net, checkpoint_files, isaaclab_checkpoint

    groups: dict[str, dict] = {}
    typed = as_result(result)
    for joint in checkpoint_files(typed):
        isaac = isaaclab_checkpoint(typed, joint)  # a GRU's joint: its best MLP / LSTM (checkpoint_findings)
        if (joints is not None and joint not in joints) or isaac is None:
            continue
        kind, file = isaac
        spec = as_net(typed.model(joint, kind)).network
        commands = list(spec.get("inputs") or ["pos_error", "vel"]) != ["pos_error", "vel"]
        cls = {"mlp": "ActuatorNetMLP", "lstm": "ActuatorNetLSTM"}[kind] + (
            "CommandsCfg" if commands else "Cfg"
        )
        values = {**spec, "network_file": file}
        cfg: dict = {"joint_names_expr": [re.escape(joint)]}
        for name in NET_CFG_FIELDS[cls]:
            v = values[name]
            if isinstance(v, dict):  # command_scales
                cfg[name] = {str(k): float(x) for k, x in v.items()}
                continue
            cfg[name] = list(v) if isinstance(v, list) else v if isinstance(v, str) else float(v)
        name = _group_name(joint) + "_" + kind
        groups[name] = {"class_type": cls, "family": kind, "cfg": cfg}
    problems = [
        f"{g}: {k} = {v!r} must be finite and > 0"
        for g, spec in groups.items()
        for k, v in spec["cfg"].items()
        if isinstance(v, float) and not (math.isfinite(v) and v > 0)
    ]
    if problems:
        raise ExportError("Isaac Lab network export failed validation: " + "; ".join(problems))
    return groups


def _rename(cfg: dict, cls: str, field_names: str) -> dict:
    """Isaac Lab 2.x spelling of a 3.0 cfg dict (the deprecated aliases Isaac Lab 3.0 still accepts)."""
    if field_names == "isaaclab-3":
        return cfg
    if field_names not in FIELD_NAMES:
        raise ExportError(f"unknown field names {field_names!r}: choose from {list(FIELD_NAMES)}")
    return {_V2_NAMES.get(k, k): v for k, v in cfg.items()}


def validate_cfgs(groups: dict[str, dict]) -> None:
    """Check what Isaac Lab would reject or silently misread: missing required fields, unknown field
    names, non-finite or negative values, delays out of order, an unsorted lookup table (§A.2, §A.4–A.6)."""
    problems = []
    for g, spec in groups.items():
        cls, cfg = spec["class_type"], spec["cfg"]
        base = cls.replace(OFFSET_SUFFIX, "")
        problems += [f"{g}: {cls} requires {name}" for name in REQUIRED[base] if name not in cfg]
        for name, v in cfg.items():
            if name == "joint_names_expr":
                if not v or not all(isinstance(x, str) for x in v):
                    problems.append(f"{g}: joint_names_expr must be a non-empty list of regexes")
            elif name not in _fields(cls):
                problems.append(f"{g}: {cls} has no field {name}")
            elif name in ("min_delay", "max_delay"):
                if not (isinstance(v, int) and v >= 0):
                    problems.append(f"{g}: {name} = {v!r} must be a non-negative integer")
            elif name == "joint_parameter_lookup":
                angles = [row[0] for row in v]
                if any(len(row) != 3 or not all(math.isfinite(x) for x in row) or row[2] < 0 for row in v):
                    problems.append(
                        f"{g}: joint_parameter_lookup rows must be [angle, ratio, torque ≥ 0], finite"
                    )
                if angles != sorted(angles):
                    problems.append(f"{g}: joint_parameter_lookup angles must be sorted ascending")
            elif name == "slew_from_target":
                if not isinstance(v, bool):
                    problems.append(f"{g}: slew_from_target = {v!r} must be true or false")
            elif name == "encoder_offset":
                if not is_real(v):
                    problems.append(f"{g}: encoder_offset = {v!r} must be finite")
            elif not (isinstance(v, float) and math.isfinite(v) and v >= 0):
                problems.append(f"{g}: {name} = {v!r} must be a finite, non-negative number")
        if base in _DC_CLASSES and cfg.get("actuator_velocity_limit", 1.0) <= 0:
            problems.append(f"{g}: actuator_velocity_limit must be > 0")
        problems += [
            f"{g}: {name} must be > 0"
            for name in ("joint_inertia", "physics_dt", "stribeck_velocity", "goal_rate_limit")
            if name in _fields(cls) and is_real(cfg.get(name)) and cfg[name] <= 0
        ]
        if cfg.get("min_delay", 0) > cfg.get("max_delay", 0):
            problems.append(f"{g}: min_delay must not exceed max_delay")
    if problems:
        raise ExportError("Isaac Lab export failed validation: " + "; ".join(problems))


def _hazard(code: str, g: str, msg: str, severity: str = "warning") -> Finding:
    """One cfg_hazards finding for group `g`."""
    return Finding(f"EXPORT.ISAACLAB.{code}", severity, g, msg)


def _value_hazards(g: str, cls: str, base: str, cfg: dict) -> list[Finding]:
    """Cfg values Newton-native execution treats differently: our subclass, a delay range, no velocity limit,
    None gains."""
    out = []
    if base not in BUILTIN:
        out.append(
            _hazard(
                "custom_class",
                g,
                f"{cls} is our explicit subclass: Isaac Lab 3.0 rejects it while "
                "SimulationCfg.use_newton_actuators is True (the default); set it False, or load "
                "newton.usda for Newton-native execution",
            )
        )
    if "max_delay" in cfg and cfg.get("max_delay", 0) > 0:
        if cfg.get("min_delay", 0) != cfg["max_delay"]:
            out.append(
                _hazard(
                    "delay_fixed",
                    g,
                    "Newton-native execution fixes the delay at max_delay = "
                    f"{cfg['max_delay']} steps; min_delay = {cfg.get('min_delay', 0)} is dropped (no "
                    "per-env draw at reset)",
                )
            )
        else:
            out.append(
                _hazard(
                    "delay_fixed",
                    g,
                    "Newton-native execution fixes the delay at max_delay "
                    f"({cfg['max_delay']} physics steps), as fitted",
                    "info",
                )
            )
    if (
        base in (*_DC_CLASSES, *NET_CFG_FIELDS)
        and cfg.get("actuator_velocity_limit", cfg.get("velocity_limit")) is None
    ):
        out.append(
            _hazard(
                "dc_no_velocity_limit",
                g,
                "a DCMotor without actuator_velocity_limit gets no speed "
                "derating in Newton (velocityLimit = inf) instead of Isaac Lab's ValueError",
                "error",
            )
        )
    for name in ("stiffness", "damping"):
        if cfg.get(name, 0.0) is None:
            out.append(
                _hazard(
                    f"{name}_none",
                    g,
                    f"{name} None becomes 0 in Newton-native execution instead of the USD value",
                )
            )
    return out


def _unmatched_keys(g: str, cfg: dict, joints: list[str] | None) -> list[Finding]:
    """Joints of the group that a per-joint regex dict (saturation_effort, stiffness, damping) leaves at 0."""
    out = []
    for name in ("saturation_effort", "stiffness", "damping"):
        v = cfg.get(name)
        if isinstance(v, dict) and joints is not None:
            matched = {j for j in joints for k in v if re.fullmatch(k, j)}
            group_joints = {j for j in joints for e in cfg["joint_names_expr"] if re.fullmatch(e, j)}
            if group_joints - matched:
                sev = "error" if name == "saturation_effort" else "warning"
                out.append(
                    _hazard(
                        f"unmatched_{name}",
                        g,
                        f"joints {sorted(group_joints - matched)} are matched "
                        f"by no {name} key: they get 0 (§A.2)"
                        + (
                            ", which with a finite velocity limit collapses the DC window to [0, 0]"
                            if name == "saturation_effort"
                            else ""
                        ),
                        sev,
                    )
                )
    return out


def _model_hazards(g: str, base: str, spec: dict, backend: str) -> list[Finding]:
    """What a consumer cannot run as fitted: actuator nets on Newton, dynamic friction, approximated or
    estimated friction, the export's own notes, implicit-actuator telemetry."""
    out = []
    if base in NET_CFG_FIELDS:
        out.append(
            _hazard(
                "net_torchscript_to_newton",
                g,
                "Isaac Lab 3.0 hands actuator nets to Newton 1.8 as "
                "TorchScript (use_newton_actuators=True, the default), which Newton 1.8 rejects "
                "(consumer-semantics §0.2): set SimulationCfg(use_newton_actuators=False), or give "
                "Newton the newton.onnx export (newton.pt2 for an LSTM of several layers; Newton 1.8 "
                "deprecates it)",
            )
        )
    if base == "ActuatorNetLSTMCfg":
        out.append(
            _hazard(
                "lstm_metadata",
                g,
                "Newton's LSTM drive needs num_layers and hidden_size in the "
                "checkpoint metadata; Isaac Lab does not add them",
            )
        )
    if (
        backend == "newton"
        and spec["cfg"].get("dynamic_friction")
        and base in (*BUILTIN, *CUSTOM_FAMILY_CFG.values(), *_BAM_BASE)
    ):
        out.append(
            _hazard(
                "dynamic_friction_ignored",
                g,
                "the Newton backend ignores dynamic_friction (§D); "
                "friction is applied as Coulomb friction at the static value",
            )
        )
    if spec.get("approximation"):
        out.append(_hazard("friction_approximated", g, spec["approximation"]))
    out += [_hazard(code, g, msg, severity) for code, severity, msg in spec.get("notes", ())]
    if spec.get("estimate"):
        out.append(_hazard("friction_estimated", g, spec["estimate"]))
    if base == "ImplicitActuatorCfg":
        out.append(
            _hazard(
                "implicit_telemetry",
                g,
                "ImplicitActuator's applied-effort telemetry is clipped at "
                "joint_effort_limit, which also limits the solver's drive",
                "info",
            )
        )
    return out


def cfg_hazards(
    groups: dict[str, dict], joints: list[str] | None = None, backend: str = "newton"
) -> list[Finding]:
    """Where Newton-native execution of these cfgs departs from Isaac Lab's PyTorch path (§A.11), as findings.

    `joints` are the articulation's joint names, to find values a regex dict leaves unmatched.
    """
    out: list[Finding] = []
    for g, spec in groups.items():
        cls, cfg = spec["class_type"], spec["cfg"]
        base = cls.replace(OFFSET_SUFFIX, "")
        out += _value_hazards(g, cls, base, cfg)
        out += _unmatched_keys(g, cfg, joints)
        out += _model_hazards(g, base, spec, backend)
    return out


_UNITS = {p.name: p.unit for p in parameters.PARAMS} | {
    "joint_effort_limit": "N·m",
    "min_delay": "physics steps",
    "max_delay": "physics steps",
    "joint_parameter_lookup": "[angle rad, ratio, max torque N·m]",
    "physics_dt": "s",
    "joint_inertia": "kg·m²",
}
_UNITS |= {_V2_NAMES[k]: _UNITS[k] for k in _V2_NAMES if k in _UNITS}


def _doc(
    result: ResultLike,
    families: dict[str, str] | None,
    field_names: str,
    backend: str,
    custom: bool | None = None,
    rec: Recording | None = None,
    loads: dict[str, dict] | None = None,
) -> dict:
    result = as_result(result)
    groups = actuator_cfgs(
        result,
        families,
        backend=backend,
        custom=bool(families) if custom is None else custom,
        rec=rec,
        loads=loads,
    )
    doc: dict = {
        "isaaclab_version": ISAACLAB_VERSION if field_names == "isaaclab-3" else "2.x",
        "field_names": field_names,
        "units": {p.name: p.unit for p in parameters.PARAMS},
        "backend": backend,
        "note": BACKEND_NOTES[backend],
        "actuators": {
            g: {
                **s,
                **(
                    {"defined_in": CONSUMER_MODULE}
                    if s["class_type"] in COMMAND_NET_CFGS
                    or s["class_type"] not in (*BUILTIN, *NET_CFG_FIELDS)
                    else {}
                ),
                "cfg": _rename(s["cfg"], s["class_type"], field_names),
            }
            for g, s in groups.items()
        },
    }
    nets = net_cfgs(result)
    if nets:
        doc["actuators_net"] = nets
        doc["network_note"] = NET_NOTE
    best = best_cfgs(result, backend, rec=rec, loads=loads) if families is None else None
    if best is not None:
        doc["actuators_best"] = {
            g: {**s, "defined_in": CONSUMER_MODULE, "cfg": _rename(s["cfg"], s["class_type"], field_names)}
            for g, s in best.items()
        }
    return doc


def render_json(
    result: ResultLike,
    families: dict[str, str] | None = None,
    *,
    field_names: str = "isaaclab-3",
    backend: str = "newton",
    custom: bool | None = None,
    rec: Recording | None = None,
    loads: dict[str, dict] | None = None,
) -> str:
    """The cfgs as JSON, with the Isaac Lab version and backend conventions stated.

    A family named in `families` that needs our subclass is written with "defined_in": CONSUMER_MODULE.
    """
    return json.dumps(_doc(result, families, field_names, backend, custom, rec, loads), indent=2) + "\n"


def render_yaml(
    result: ResultLike,
    families: dict[str, str] | None = None,
    *,
    field_names: str = "isaaclab-3",
    backend: str = "newton",
    custom: bool | None = None,
    rec: Recording | None = None,
    loads: dict[str, dict] | None = None,
) -> str:
    """The same document as render_json, as YAML."""
    import yaml

    head = f"# Actuator configs fitted by actuator-sysid for Isaac Lab ({field_names}, backend {backend}). SI units.\n"
    return head + yaml.safe_dump(
        _doc(result, families, field_names, backend, custom, rec, loads),
        sort_keys=False,
        allow_unicode=True,
        width=110,
    )


def code_name(name: str, what: str) -> str:
    """`name` where it is written as Python code (a class or keyword): only an identifier, never other text."""
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
        raise ExportError(f"{what} {name!r} is not a Python identifier; it cannot be written as code")
    return name


def _entries(groups: dict[str, dict], field_names: str) -> list[str]:
    """The dict entries of a cfg group table as Python source: names and values as literals (repr), the class
    and field names as checked identifiers, free text only inside one-line comments."""
    lines = []
    for name, g in groups.items():
        cls = code_name(g["class_type"], "cfg class")
        lines.append(f"    {str(name)!r}: {cls}(  # {comment_line('family ' + str(g['family']))}")
        marks = g.get("unidentified") or {}
        for orig, (field, v) in zip(
            g["cfg"], _rename(g["cfg"], g["class_type"], field_names).items(), strict=True
        ):
            unit = f"  # {_UNITS[field]}" if field in _UNITS else ""
            if orig in marks:
                unit = (
                    (unit or "  #")
                    + " "
                    + comment_line(
                        f"— {marks[orig]} (the fit's estimate: give the datasheet value with --set)"
                    )
                )
            lines.append(f"        {code_name(field, 'cfg field')}={v!r},{unit}")
        lines.append("    ),")
    return lines


def render_python(
    result: ResultLike,
    families: dict[str, str] | None = None,
    *,
    field_names: str = "isaaclab-3",
    backend: str = "newton",
    custom: bool | None = None,
    rec: Recording | None = None,
    loads: dict[str, dict] | None = None,
) -> str:
    """Ready-to-paste Python: imports plus an ACTUATORS dict for `ArticulationCfg(actuators=...)`.

    With custom (default: when `families` are named), ACTUATORS itself holds the chosen (or best) models,
    our subclasses included where Isaac Lab has no class. `rec` / `loads` give the bench load that our
    BAM-friction subclass's joint_inertia needs when the fit does not carry it.
    """
    custom = bool(families) if custom is None else custom
    result = as_result(result)
    groups = actuator_cfgs(result, families, custom=custom, backend=backend, rec=rec, loads=loads)
    best = best_cfgs(result, backend, rec=rec, loads=loads) if families is None and not custom else None
    nets = net_cfgs(result)
    net_classes = sorted({g["class_type"] for g in [*groups.values(), *nets.values()]} & set(NET_CFG_FIELDS))
    used = [g["class_type"] for g in [*groups.values(), *(best or {}).values()]]
    used = [c for c in used if c not in NET_CFG_FIELDS]  # imported with the nets below
    customs = [c for c in dict.fromkeys(used) if c not in BUILTIN]
    classes = sorted({c for c in used if c in BUILTIN})
    version = ISAACLAB_VERSION if field_names == "isaaclab-3" else "2.x (field names)"
    lines = [
        '"""Actuator configs fitted by actuator-sysid for Isaac Lab ' + version + ".",
        "",
        "Paste into your ArticulationCfg: actuators=ACTUATORS. Units are SI.",
        "Backend: " + BACKEND_NOTES[backend],
    ]
    if customs:
        lines += [
            "",
            f"Our explicit subclasses ({CONSUMER_MODULE}, installed with actuator-sysid) run only with",
            "SimulationCfg(use_newton_actuators=False): Isaac Lab 3.0 hands built-in classes alone to Newton.",
            "newton.usda expresses them natively.",
        ]
    lines += ['"""', ""]
    if customs:
        lines += [
            "# pip install actuator-sysid: its consumer package holds the classes Isaac Lab lacks",
            f"from {CONSUMER_MODULE} import {', '.join(sorted(customs))}",
        ]
        if classes:
            lines.append(f"from isaaclab.actuators import {', '.join(classes)}")
    elif classes:
        lines.append(f"from isaaclab.actuators import {', '.join(classes)}")
    builtin_nets = [c for c in net_classes if c not in COMMAND_NET_CFGS]
    our_nets = [c for c in net_classes if c in COMMAND_NET_CFGS]  # nets that read the drive's commands
    if builtin_nets:
        lines.append("from isaaclab.actuators import " + ", ".join(builtin_nets))
    if our_nets:
        lines.append(f"from {CONSUMER_MODULE} import " + ", ".join(our_nets))
    lines += ["", "ACTUATORS = {", *_entries(groups, field_names), "}"]
    if nets:
        lines += [
            "",
            *("# " + line for line in NET_NOTE.split("\n")),
            "ACTUATORS_NET = {",
            *_entries(nets, "isaaclab-3"),
            "}",
        ]
    if best is not None:
        lines += [
            "",
            "# Each joint's best-ranked fitted model, with our classes (imported above) where Isaac Lab has none.",
            "ACTUATORS_BEST = {",
            *_entries(best, field_names),
            "}",
        ]
    return "\n".join(lines) + "\n"
