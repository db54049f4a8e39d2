"""A whole robot from its own model file (MJCF, URDF, USD) through Newton 1.8's importers, for in-air fits.

An in-air fit needs the joint tree and the bodies' inertia only: visuals, collision shapes and meshes are
skipped (a model whose meshes are absent still loads), contacts are off in the rollout, and the base is fixed
to the world by default (the robot hangs on a stand). The joint terms the model states (armature, viscous
damping, frictionloss, limits) are read so a fit can start from them and report against them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..datasets.recording import DatasetError

log = logging.getLogger(__name__)

MJCF_SUFFIXES = (".xml", ".mjcf")
URDF_SUFFIXES = (".urdf",)
USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")


class RobotError(DatasetError):
    """A robot model that cannot be used, or a log that does not fit it; the message names both sides."""


@dataclass
class RobotModel:
    """One robot's articulation as Newton imported it, with its actuated (1-DoF) joints in model order."""

    path: Path
    builder: object  # newton.ModelBuilder holding one copy of the robot (the template worlds replicate)
    joint_names: list[str]  # actuated joints, short names (the label's last path element), model order
    labels: list[str]  # the importer's full joint labels, same order
    dof: np.ndarray  # (J,) int: each actuated joint's DoF index in the builder
    parent: list[int]  # (J,) index of the nearest actuated ancestor joint, -1 at a root
    component: np.ndarray  # (J,) int: joints with the same id load each other; different ids never do
    lower: np.ndarray  # (J,) rad, joint limits as the model states them
    upper: np.ndarray
    armature: np.ndarray  # (J,) kg·m²
    damping: np.ndarray  # (J,) N·m·s/rad, passive viscous damping
    friction: np.ndarray  # (J,) N·m, frictionloss (dry friction)
    effort_limit: np.ndarray  # (J,) N·m, from the joint, or the MJCF motor's ctrlrange; inf where none
    base: str  # the root link's name
    fixed_base: bool = True
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """What was loaded and how, for the fit result and the CLI."""
        return {
            "path": str(self.path), "base": self.base, "fixed_base": self.fixed_base,
            "joints": [{"name": n, "parent": self.joint_names[p] if p >= 0 else None,
                        "limits": [float(lo), float(hi)], "armature": float(a), "damping": float(d),
                        "frictionloss": float(f), "effort_limit": None if not np.isfinite(e) else float(e)}
                       for n, p, lo, hi, a, d, f, e in zip(self.joint_names, self.parent, self.lower, self.upper,
                                                           self.armature, self.damping, self.friction,
                                                           self.effort_limit, strict=True)],
            "notes": list(self.notes),
        }


def _short(label: str) -> str:
    return label.rsplit("/", 1)[-1]


def _mjcf_motor_limits(path: Path) -> dict[str, float]:
    """Joint name → |ctrlrange| of the MJCF <motor> driving it (classes resolved); the importer does not keep it."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return {}
    classes: dict[str, dict] = {}

    def walk(node: ET.Element, inherited: dict) -> None:
        for d in node.findall("default"):
            mine = dict(inherited)
            motor = d.find("motor")
            if motor is not None and "ctrlrange" in motor.attrib:
                mine["ctrlrange"] = motor.attrib["ctrlrange"]
            classes[d.attrib.get("class", "main")] = mine
            walk(d, mine)

    walk(root, {})
    out: dict[str, float] = {}
    for act in root.iter("actuator"):
        for m in act.findall("motor"):
            rng = m.attrib.get("ctrlrange") or classes.get(m.attrib.get("class", "main"), {}).get("ctrlrange")
            if rng and "joint" in m.attrib:
                lo, hi = (float(v) for v in rng.split())
                out[m.attrib["joint"]] = max(abs(lo), abs(hi))
    return out


def load_robot(path: str | Path, fixed_base: str | None = None, floating: bool = False) -> RobotModel:
    """Import a robot model file with Newton, skipping visuals and collisions; the root link fixed by default.

    `fixed_base` names the link expected to be fixed (it must be the root in this version); `floating=True`
    keeps a free base instead (its joints are then not actuated and are not fitted).
    """
    import warp as wp

    wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines
    import newton

    path = Path(path)
    if not path.is_file():
        raise RobotError(f"{path}: robot model not found")
    suffix = path.suffix.lower()
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    notes = ["visuals, collision shapes and meshes skipped: an in-air fit needs only the joint tree and the "
             "bodies' inertia; contacts are off"]
    try:
        if suffix in MJCF_SUFFIXES:
            builder.add_mjcf(str(path), floating=floating, parse_visuals=False, parse_meshes=False,
                             parse_sites=False, ignore_classes=("visual", "collision"), hide_visuals=True)
        elif suffix in URDF_SUFFIXES:
            builder.add_urdf(str(path), floating=floating, hide_visuals=True)
        elif suffix in USD_SUFFIXES:
            builder.add_usd(str(path), floating=floating, load_visual_shapes=False, load_static_visual_shapes=False,
                            hide_collision_shapes=True, skip_mesh_approximation=True, load_sites=False)
        else:
            raise RobotError(f"{path}: unknown robot model type {suffix!r}; give an MJCF (.xml), URDF (.urdf) "
                             f"or USD ({', '.join(USD_SUFFIXES)}) file")
    except RobotError:
        raise
    except Exception as e:  # noqa: BLE001 - the importers raise anything from ParseError to KeyError
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RobotError(f"{path}: Newton could not import this robot model: {type(e).__name__}: {first}") from None
    if builder.body_count == 0:
        raise RobotError(f"{path}: the model has no bodies")
    body_labels = list(builder.body_label)
    base = _short(body_labels[0])
    if fixed_base is not None and fixed_base != base:
        names = [_short(b) for b in body_labels]
        where = "is not the root link" if fixed_base in names else "is not a link of this model"
        raise RobotError(f"--fixed-base {fixed_base!r} {where}; this version fixes the root link, {base!r} "
                         f"(links: {', '.join(names)})")

    labels: list[str] = []
    dofs, parents_j = [], []
    jtypes = list(builder.joint_type)
    revolute = {int(newton.JointType.REVOLUTE), int(newton.JointType.PRISMATIC)}
    joint_of_child = {int(c): j for j, c in enumerate(builder.joint_child)}
    actuated_joint = {}
    for j, jt in enumerate(jtypes):
        if int(jt) in revolute:
            actuated_joint[j] = len(labels)
            labels.append(builder.joint_label[j])
            dofs.append(builder.joint_qd_start[j])
    if not labels:
        raise RobotError(f"{path}: the model has no revolute or prismatic joints to fit")
    # nearest actuated ancestor and the coupling component: the highest movable joint above each joint (a free
    # base is movable, so with it every joint shares one component)
    component = []
    for j in actuated_joint:
        parent, top = -1, j
        body = int(builder.joint_parent[j])
        while body >= 0:
            pj = joint_of_child.get(body)
            if pj is None:
                break
            if int(jtypes[pj]) != int(newton.JointType.FIXED):
                top = pj
                if parent < 0 and pj in actuated_joint:
                    parent = actuated_joint[pj]
            body = int(builder.joint_parent[pj])
        parents_j.append(parent)
        component.append(top)
    _, comp = np.unique(np.array(component), return_inverse=True)
    dof = np.array(dofs, int)
    names = [_short(x) for x in labels]
    if len(set(names)) != len(names):
        names = list(labels)
        notes.append("joint short names repeat; full labels used as names")
    effort = np.array(builder.joint_effort_limit, float)[dof]
    effort = np.where(effort >= 1e5, np.inf, effort)  # the importers' "no limit" is 1e6
    if suffix in MJCF_SUFFIXES:
        motors = _mjcf_motor_limits(path)
        effort = np.array([min(e, motors.get(n, np.inf)) for e, n in zip(effort, names, strict=True)])
    return RobotModel(
        path=path, builder=builder, joint_names=names, labels=labels, dof=dof, parent=parents_j,
        component=comp.astype(int), lower=np.array(builder.joint_limit_lower, float)[dof],
        upper=np.array(builder.joint_limit_upper, float)[dof], armature=np.array(builder.joint_armature, float)[dof],
        damping=np.array(builder.joint_damping, float)[dof], friction=np.array(builder.joint_friction, float)[dof],
        effort_limit=effort, base=base, fixed_base=not floating, notes=notes)


def map_joints(robot: RobotModel, log_names: list[str] | None, n_log: int | None = None) -> tuple[list[int], str]:
    """Log joint i → robot joint index, and how the mapping was made (stated in the summary).

    By name: exact, then with the `_joint` suffix added or removed; a log without names (`log_names` None, with
    `n_log` columns) is taken in the model's actuated-joint order. Every actuated joint must be logged.
    """
    model = robot.joint_names
    if log_names is None:
        if n_log != len(model):
            raise RobotError(f"the log has {n_log} unnamed joint column(s) but the robot model {robot.path.name} has "
                             f"{len(model)} actuated joint(s) ({', '.join(model)}); an unnamed log must list them "
                             "all, in this order")
        return list(range(len(model))), f"unnamed log taken in the model's actuated-joint order: {', '.join(model)}"
    index = {n: i for i, n in enumerate(model)}
    out, missing, suffixed = [], [], 0
    for name in log_names:
        if name in index:
            out.append(index[name])
            continue
        alt = name[:-6] if name.endswith("_joint") else f"{name}_joint"
        if alt in index:
            out.append(index[alt])
            suffixed += 1
        else:
            missing.append(name)
    if missing:
        raise RobotError(f"log joint(s) {', '.join(missing)} not in the robot model {robot.path.name}; "
                         f"the log has {', '.join(log_names)}; the model has {', '.join(model)}")
    if len(set(out)) != len(out):
        raise RobotError(f"two log joints map to one model joint; the log has {', '.join(log_names)}; "
                         f"the model has {', '.join(model)}")
    unlogged = [model[i] for i in range(len(model)) if i not in set(out)]
    if unlogged:
        raise RobotError(f"robot joint(s) {', '.join(unlogged)} are not in the log; this version needs every actuated "
                         f"joint logged; the log has {', '.join(log_names)}; the model has {', '.join(model)}")
    how = "by name" + (f" ({suffixed} with the _joint suffix)" if suffixed else "")
    return out, how
