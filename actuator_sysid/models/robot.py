"""A whole robot from its own model file (MJCF, URDF, USD) through Newton 1.8's importers, for in-air fits.

An in-air fit needs the joint tree and the bodies' inertia only: visuals, collision shapes and meshes are
skipped (a model whose meshes are absent still loads), contacts are off in the rollout, and the base is fixed
to the world by default (the robot hangs on a stand). A URDF link keeps its collision shapes only where they
carry its mass (no <inertial> mass): Newton then reads their meshes through trimesh. An MJCF body whose mass
and inertia MuJoCo computes from its mesh geoms gets MuJoCo's own (its compiler reads the meshes); without them
it is refused, named. The joint terms the model states (armature, viscous damping, frictionloss, limits) are
read so a fit can start from them and report against them; the drives it states on the fitted joints are
zeroed, since the fitted actuators replace them: a position servo whole (gains, bias, activation dynamics), its
force range only the start of a fitted effort limit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..datasets.names import check_name
from ..datasets.recording import DatasetError
from .model_files import ModelFileError, check_model_files

log = logging.getLogger(__name__)

MJCF_SUFFIXES = (".xml", ".mjcf")
URDF_SUFFIXES = (".urdf",)
USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")


# how the notes on what became of the model's own drives begin (the CLI shows them beside the verdict)
OWN_ACTUATOR_NOTES = ("the model's own drives zeroed", "the force range of the model's position servos")


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
    viscous_friction: np.ndarray  # (J,) N·m·s/rad, passive viscous damping (the model file's joint damping)
    friction: np.ndarray  # (J,) N·m, frictionloss (dry friction)
    effort_limit: np.ndarray  # (J,) N·m, the joint's limit and its MuJoCo actuators' (geared); inf where none
    base: str  # the root link's name
    fixed_base: bool = True
    notes: list[str] = field(default_factory=list)
    # a URDF as the importers read it (urdf_for_fit): file names checked and absolute, visuals and the collision
    # shapes of links whose <inertial> states the mass removed; None for other formats
    source_text: str | None = None
    # (J,) N·m: the model's position servos' force range (inf where none) and the limit without it; a fit replaces
    # those servos, so it fits their effort limit from there and holds only the rest as a box; None: no servos
    servo_effort_limit: np.ndarray | None = None
    box_effort_limit: np.ndarray | None = None

    def servo_limits(self) -> np.ndarray:
        """(J,) the position servos' force range per joint, inf where none."""
        if self.servo_effort_limit is None:
            return np.full(len(self.joint_names), np.inf)
        return np.asarray(self.servo_effort_limit, float)

    def summary(self) -> dict:
        """What was loaded and how, for the fit result and the CLI."""
        return {
            "path": str(self.path),
            "base": self.base,
            "fixed_base": self.fixed_base,
            "joints": [
                {
                    "name": n,
                    "parent": self.joint_names[p] if p >= 0 else None,
                    "limits": [float(lo), float(hi)],
                    "armature": float(a),
                    "damping": float(d),
                    "frictionloss": float(f),
                    "effort_limit": None if not np.isfinite(e) else float(e),
                    **({"servo_force_range": float(s)} if np.isfinite(s) else {}),
                }
                for n, p, lo, hi, a, d, f, e, s in zip(
                    self.joint_names,
                    self.parent,
                    self.lower,
                    self.upper,
                    self.armature,
                    self.viscous_friction,
                    self.friction,
                    self.effort_limit,
                    self.servo_limits(),
                    strict=True,
                )
            ],
            "notes": list(self.notes),
        }


def _short(label: str) -> str:
    return label.rsplit("/", 1)[-1]


def _mujoco_actuators(builder) -> list[dict]:
    """The MuJoCo actuators Newton's importer kept on the builder (`mujoco:actuator_*`, classes resolved), one dict
    per actuator with its short attribute names; empty when the model states none (URDF, most USD)."""
    attrs = {
        k.split(":", 1)[1].removeprefix("actuator_"): a
        for k, a in builder.custom_attributes.items()
        if getattr(a, "frequency", None) == "mujoco:actuator"
    }
    if "trnid" not in attrs:
        return []
    count = len(attrs["trnid"].values or [])

    def value(a, i: int):
        vals = a.values or []
        return a.default if i >= len(vals) or vals[i] is None else vals[i]

    return [{name: value(a, i) for name, a in attrs.items()} for i in range(count)]


# MuJoCo's enums as Newton stores them: trntype joint / jointinparent; gain fixed; bias none; dynamics none;
# the tri-state *limited (0 false, 1 true, 2 auto: limited when the range is given); Newton's ctrl source
# CTRL_DIRECT (1: driven by ctrl; JOINT_TARGET servos are Newton's joint_target_ke / kd instead)
_TRN_JOINT, _GAIN_FIXED, _BIAS_NONE, _DYN_NONE, _AUTO, _CTRL = (0, 1), 0, 0, 0, 2, 1


def _stated(x: float) -> float:
    """A float32 value as the file wrote it (23.7, not 23.700000762939453); any other float unchanged."""
    x = float(x)
    return float(str(np.float32(x))) if np.isfinite(x) and float(np.float32(x)) == x else x


def _limited(act: dict, kind: str) -> bool:
    """Whether MuJoCo clamps this actuator's ctrl / force: `*limited` true, or auto with the range given."""
    flag = int(act.get(f"{kind}limited", _AUTO))
    return bool(act.get(f"has_{kind}range", 0)) if flag == _AUTO else flag == 1


def _is_servo(act: dict) -> bool:
    """A position servo on a joint (a bias: <position>, or <general> so written); the fitted PD replaces it."""
    return int(act.get("trntype", 0)) in _TRN_JOINT and bool(np.any(np.asarray(act["biasprm"], float)))


def _actuator_effort_limits(actuators: list[dict], servos: bool = False) -> dict[int, float]:
    """DoF index → the most joint torque the model's actuators (the position servos with `servos`, else the
    others) can apply there, by MuJoCo's rules.

    Per actuator (MuJoCo XML reference, actuator / force limits): the control is clamped to ctrlrange, so a force
    gain·ctrl with no bias and no activation dynamics (a <motor>) is bounded by |gain|·|ctrlrange|; the force is
    clamped to forcerange; the joint sees gear × force. Actuators on one joint add up; the joint's own
    actuatorfrcrange (a clamp of that sum) Newton's importer already put in joint_effort_limit. A range is taken
    as its larger magnitude; an actuator bounded by neither range leaves its joint unbounded.
    """
    out: dict[int, float] = {}
    for act in actuators:
        gear = abs(_stated(act.get("gear", [1.0])[0]))
        if int(act.get("trntype", 0)) not in _TRN_JOINT or gear == 0.0:  # a zero gear moves nothing
            continue
        if _is_servo(act) != servos:
            continue
        dof = int(act["trnid"][0])
        bound = np.inf
        plain = (
            int(act.get("gaintype", 0)) == _GAIN_FIXED
            and int(act.get("biastype", 0)) == _BIAS_NONE
            and int(act.get("dyntype", 0)) == _DYN_NONE
        )
        if plain and _limited(act, "ctrl"):
            bound = abs(_stated(act["gainprm"][0])) * max(abs(_stated(v)) for v in act["ctrlrange"])
        if _limited(act, "force"):
            bound = min(bound, max(abs(_stated(v)) for v in act["forcerange"]))
        out[dof] = out.get(dof, 0.0) + gear * bound
    return out


def _zero_own_drives(builder, dofs: np.ndarray, names: list[str], actuators: list[dict]) -> str | None:
    """Zero the drives the model file states on the joints we fit; what was zeroed, for the summary's notes.

    The fitted actuator replaces them, as Isaac Lab zeroes an explicit actuator's drive (docs/consumer-semantics.md
    §D): our rollout never sets drive targets, so a kept drive (a USD DriveAPI, an MJCF position servo, both
    Newton's joint_target_ke / kd) would pull toward 0 while a Newton log's drive follows the command. MJCF
    actuators driven directly by ctrl (left at 0) apply only their bias: one with a bias (a servo written as
    <general>, a filtered one included) has its gain and bias zeroed too, so its activation dynamics drive
    nothing; a <motor> (no bias) applies nothing and is left as it is.
    """
    ke = np.array(builder.joint_target_ke, float)[dofs]
    kd = np.array(builder.joint_target_kd, float)[dofs]
    for d in dofs:
        builder.joint_target_ke[int(d)] = builder.joint_target_kd[int(d)] = 0.0
    fitted, biased, filtered = {int(d): n for d, n in zip(dofs, names, strict=True)}, set(), set()
    gain_attr, bias_attr = (
        builder.custom_attributes.get(f"mujoco:actuator_{k}") for k in ("gainprm", "biasprm")
    )
    for i, act in enumerate(actuators):
        dof = int(act["trnid"][0])
        if _is_servo(act) and dof in fitted and int(act.get("ctrl_source", 1)) == _CTRL:
            for attr in (gain_attr, bias_attr):
                attr.values.extend([None] * (i + 1 - len(attr.values)))
                attr.values[i] = attr.dtype()  # zeros
            biased.add(fitted[dof])
            if int(act.get("dyntype", 0)) != _DYN_NONE:
                filtered.add(fitted[dof])
    parts = []
    if np.any(ke) or np.any(kd):
        on = [n for n, p, v in zip(names, ke, kd, strict=True) if p or v]
        parts.append(
            f"drive gains (joint_target_ke up to {ke.max():.4g} N·m/rad, kd up to {kd.max():.4g} N·m·s/rad) "
            f"on {len(on)} joint(s): {', '.join(on)}"
        )
    if biased:
        parts.append(
            f"MJCF actuators' gain and bias on {len(biased)} joint(s): "
            f"{', '.join(n for n in names if n in biased)}"
        )
    if filtered:  # the fitted PD has no activation state; its command delay is searched instead
        idle = ", ".join(n for n in names if n in filtered)
        parts.append(f"their activation dynamics (dyntype filter / integrator), idle at zero gain, on {idle}")
    if not parts:
        return None
    return (
        "the model's own drives zeroed on the fitted joints — " + "; ".join(parts) + ": the fitted actuators "
        "replace them, as Isaac Lab does for explicit actuators, and the rollout sets no drive targets"
    )


def urdf_for_fit(text: str) -> tuple[str, list[str]]:
    """A checked URDF text with what no in-air fit reads removed, and the links whose mass still comes from their
    collision shapes. Visuals carry no mass (Newton gives them density 0); an <inertial> with a <mass> overrides
    the shapes' mass, centre and inertia (Newton's and MuJoCo's URDF importers alike), so those links' collision
    shapes go too and their meshes are never opened. Links without one keep theirs: their mass is the shapes'."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    shaped = []
    for link in root.iter("link"):
        for visual in link.findall("visual"):
            link.remove(visual)
        inertial = link.find("inertial")
        collisions = link.findall("collision")
        if inertial is not None and inertial.find("mass") is not None:
            for c in collisions:
                link.remove(c)
        elif collisions:
            shaped.append(link.get("name", "?"))
    return ET.tostring(root, encoding="unicode"), shaped


def _import(path: Path, floating: bool, urdf_text: str | None = None):
    """A Newton ModelBuilder holding the model file, visuals, collisions and meshes skipped (a URDF from
    `urdf_text`, its file names checked and resolved, when given)."""
    import newton

    suffix = path.suffix.lower()
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    try:
        if suffix in MJCF_SUFFIXES:
            builder.add_mjcf(
                str(path),
                floating=floating,
                parse_visuals=False,
                parse_meshes=False,
                parse_sites=False,
                ignore_classes=("visual", "collision"),
                hide_visuals=True,
            )
        elif suffix in URDF_SUFFIXES:
            builder.add_urdf(urdf_text or str(path), floating=floating, hide_visuals=True)
        elif suffix in USD_SUFFIXES:
            builder.add_usd(
                str(path),
                floating=floating,
                load_visual_shapes=False,
                load_static_visual_shapes=False,
                hide_collision_shapes=True,
                skip_mesh_approximation=True,
                load_sites=False,
            )
        else:
            raise RobotError(
                f"{path}: unknown robot model type {suffix!r}; give an MJCF (.xml), URDF (.urdf) "
                f"or USD ({', '.join(USD_SUFFIXES)}) file"
            )
    except RobotError:
        raise
    except Exception as e:  # noqa: BLE001 - the importers raise anything from ParseError to KeyError
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RobotError(
            f"{path}: Newton could not import this robot model: {type(e).__name__}: {first}"
        ) from None
    if builder.body_count == 0:
        raise RobotError(f"{path}: the model has no bodies")
    return builder


def _mesh_bodies(path: Path) -> tuple[list[str], list[str], Path]:
    """The MJCF bodies whose mass and inertia MuJoCo computes from mesh geoms (no <inertial>, or the compiler's
    inertiafromgeom="true"), the mesh files the model names, and the folder MuJoCo reads them from."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return [], [], path.parent  # Newton's importer names the problem
    comp = root.find("compiler")
    from_geom = comp is not None and comp.get("inertiafromgeom", "auto") == "true"
    meshdir = path.parent / (comp.get("meshdir", "") if comp is not None else "")
    meshes = {m.get("name") or Path(m.get("file", "")).stem: m.get("file", "") for m in root.iter("mesh")}
    bodies = [
        b.get("name", "?")
        for b in root.iter("body")
        if (from_geom or b.find("inertial") is None)
        and any(g.get("mesh") or g.get("type") == "mesh" for g in b.findall("geom"))
    ]
    return bodies, [f for f in meshes.values() if f], meshdir


def _inertia_from_meshes(path: Path, builder) -> str | None:
    """Bodies whose inertia comes from their meshes get MuJoCo's own (the compiler reads the meshes, as MuJoCo
    loads the model); without the mesh files a RobotError names the bodies and the files. Returns the note."""
    bodies, files, meshdir = _mesh_bodies(path)
    if not bodies:
        return None
    import mujoco

    missing = [f for f in files if not (meshdir / f).is_file()]
    try:
        mm = mujoco.MjModel.from_xml_path(str(path))
    except Exception as e:  # noqa: BLE001 - MuJoCo's compiler raises ValueError with its own text
        where = f"in {meshdir.name}/ beside it" if meshdir != path.parent else "beside it"
        why = (
            f"mesh file(s) {', '.join(missing)} are not {where}"
            if missing
            else f"MuJoCo could not compile it: {(str(e).strip().splitlines() or ['?'])[0]}"
        )
        raise RobotError(
            f"{path.name}: body {', '.join(bodies)} take(s) mass and inertia from mesh geoms, but {why}; "
            "put the meshes beside the model (or in the uploaded zip, as the model names them) or give "
            "those bodies an <inertial>"
        ) from None
    short = [_short(b) for b in builder.body_label]
    for name in bodies:
        bid = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, name)
        if bid < 0 or name not in short:
            continue
        i = short.index(name)
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, mm.body_iquat[bid])
        r = rot.reshape(3, 3)
        inertia = r @ np.diag(mm.body_inertia[bid]) @ r.T
        mass = float(mm.body_mass[bid])
        builder.body_mass[i] = mass
        builder.body_com[i] = type(builder.body_com[i])(*(float(v) for v in mm.body_ipos[bid]))
        builder.body_inertia[i] = type(builder.body_inertia[i])(*inertia.reshape(-1).tolist())
        builder.body_inv_mass[i] = 1.0 / mass if mass > 0 else 0.0
        inv = np.linalg.inv(inertia) if np.linalg.det(inertia) > 0 else np.zeros((3, 3))
        builder.body_inv_inertia[i] = type(builder.body_inv_inertia[i])(*inv.reshape(-1).tolist())
    return (
        f"mass and inertia of {', '.join(bodies)} read from their meshes (MuJoCo's compiler, as MuJoCo loads "
        "the model)"
    )


def _massless_moving_bodies(builder) -> list[str]:
    """Bodies on a revolute or prismatic joint with no mass or inertia of their own nor of anything welded to
    them: MuJoCo refuses such a model (mjMINVAL), so the loader names them first."""
    import newton

    moving = {int(newton.JointType.REVOLUTE), int(newton.JointType.PRISMATIC)}
    welded: dict[int, list[int]] = {}
    for j, jt in enumerate(builder.joint_type):
        if int(jt) == int(newton.JointType.FIXED):
            welded.setdefault(int(builder.joint_parent[j]), []).append(int(builder.joint_child[j]))

    def heavy(b: int) -> bool:
        inertia = np.asarray(builder.body_inertia[b], float).reshape(3, 3)
        return (builder.body_mass[b] > 1e-12 and np.trace(inertia) > 1e-12) or any(
            heavy(c) for c in welded.get(b, [])
        )

    return [
        _short(builder.body_label[int(builder.joint_child[j])])
        for j, jt in enumerate(builder.joint_type)
        if int(jt) in moving and not heavy(int(builder.joint_child[j]))
    ]


def _joint_tree(builder, path: Path) -> tuple[list[str], list[int], list[int], np.ndarray]:
    """The actuated (revolute / prismatic) joints: labels, DoF indices, nearest actuated ancestor, and the
    coupling component (the highest movable joint above each joint; a free base is movable, so with it every
    joint shares one component)."""
    import newton

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
    return labels, dofs, parents_j, comp.astype(int)


def _effort_limits(
    builder, dof: np.ndarray, names: list[str], actuators: list[dict], notes: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Per fitted joint: the model's effort limit (its own and its MuJoCo actuators'), the part a fit holds as a
    box (without the position servos' force range), and that force range (None: no servos); notes said."""
    # actuatorfrcrange, the URDF / USD limit; the importers' "no limit" is 1e6
    own = np.array([_stated(e) for e in builder.joint_effort_limit])[dof]
    own = np.where(own >= 1e5, np.inf, own)
    motors, servos = (_actuator_effort_limits(actuators, servos=s) for s in (False, True))
    if motors or servos:
        notes.append(
            "effort limits include the model's MuJoCo actuators: gear × min(|gain|·|ctrlrange| for a "
            "motor, |forcerange|), summed per joint, within the joint's actuatorfrcrange"
        )
    box = np.array([min(e, motors.get(int(d), np.inf)) for e, d in zip(own, dof, strict=True)])
    servo_limit = np.array([servos.get(int(d), np.inf) for d in dof]) if servos else None
    both = {d: motors.get(d, 0.0) + servos.get(d, 0.0) for d in {*motors, *servos}}
    effort = np.array([min(e, both.get(int(d), np.inf)) for e, d in zip(own, dof, strict=True)])
    if servo_limit is not None and np.isfinite(servo_limit).any():
        on = [n for n, v in zip(names, servo_limit, strict=True) if np.isfinite(v)]
        notes.append(
            f"the force range of the model's position servos on {', '.join(on)} is replaced with them: the fit "
            "starts its effort limit there and fits it (a box), within the joint's own limit"
        )
    return effort, box, servo_limit


def load_robot(
    path: str | Path,
    fixed_base: str | None = None,
    floating: bool = False,
    root: Path | None = None,
    package_roots: tuple[Path, ...] = (),
) -> RobotModel:
    """Import a robot model file with Newton, skipping visuals and collisions; the root link fixed by default.

    `fixed_base` names the link expected to be fixed (it must be the root in this version); `floating=True`
    keeps a free base instead (its joints are then not actuated and are not fitted). Every file the model names
    must lie inside `root` (default: the model's folder) or one of `package_roots` (models/model_files.py).
    """
    import warp as wp

    wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines

    path = Path(path)
    if not path.is_file():
        raise RobotError(f"{path}: robot model not found")
    try:  # before any importer opens a file the model names
        urdf_text = check_model_files(path, root, package_roots)
    except ModelFileError as e:
        raise RobotError(str(e)) from None
    shaped: list[str] = []
    if urdf_text is not None:
        urdf_text, shaped = urdf_for_fit(urdf_text)
    builder = _import(path, floating, urdf_text)
    notes = [
        "visuals, collision shapes and meshes skipped: an in-air fit needs only the joint tree and the "
        "bodies' inertia; contacts are off"
    ]
    if shaped:
        notes[0] += (
            f"; link(s) {', '.join(shaped)} state no <inertial> mass: their collision shapes (meshes "
            "included) are kept for their mass at Newton's default density"
        )
    if path.suffix.lower() in MJCF_SUFFIXES and (meshed := _inertia_from_meshes(path, builder)):
        notes.append(meshed)
    if light := _massless_moving_bodies(builder):
        raise RobotError(
            f"{path}: body {', '.join(light)} move(s) on a joint but has no mass or inertia (MuJoCo needs "
            "both above mjMINVAL); give it an <inertial> (URDF / MJCF) or MassAPI (USD), or ship the meshes "
            "its inertia comes from"
        )
    body_labels = list(builder.body_label)
    base = _short(body_labels[0])
    if fixed_base is not None and fixed_base != base:
        names = [_short(b) for b in body_labels]
        where = "is not the root link" if fixed_base in names else "is not a link of this model"
        raise RobotError(
            f"--fixed-base {fixed_base!r} {where}; this version fixes the root link, {base!r} "
            f"(links: {', '.join(names)})"
        )
    labels, dofs, parents_j, comp = _joint_tree(builder, path)
    dof = np.array(dofs, int)
    names = [_short(x) for x in labels]
    if len(set(names)) != len(names):
        names = list(labels)
        notes.append("joint short names repeat; full labels used as names")
    for name in names:  # a model's joint names reach every export (group names, regexes, comments)
        check_name(name, "joint name", path.name)
    actuators = _mujoco_actuators(builder)
    effort, box, servo_limit = _effort_limits(builder, dof, names, actuators, notes)
    if zeroed := _zero_own_drives(builder, dof, names, actuators):
        notes.append(zeroed)
    return RobotModel(
        path=path,
        builder=builder,
        joint_names=names,
        labels=labels,
        dof=dof,
        parent=parents_j,
        component=comp,
        lower=np.array(builder.joint_limit_lower, float)[dof],
        upper=np.array(builder.joint_limit_upper, float)[dof],
        armature=np.array(builder.joint_armature, float)[dof],
        viscous_friction=np.array(builder.joint_damping, float)[dof],
        friction=np.array(builder.joint_friction, float)[dof],
        effort_limit=effort,
        base=base,
        fixed_base=not floating,
        notes=notes,
        source_text=urdf_text,
        servo_effort_limit=servo_limit,
        box_effort_limit=None if servo_limit is None else box,
    )


def map_joints(
    robot: RobotModel, log_names: list[str] | None, n_log: int | None = None
) -> tuple[list[int], str]:
    """Log joint i → robot joint index, and how the mapping was made (stated in the summary).

    By name: exact, then with the `_joint` suffix added or removed; a log without names (`log_names` None, with
    `n_log` columns) is taken in the model's actuated-joint order. Every actuated joint must be logged.
    """
    model = robot.joint_names
    if log_names is None:
        if n_log != len(model):
            raise RobotError(
                f"the log has {n_log} unnamed joint column(s) but the robot model {robot.path.name} has "
                f"{len(model)} actuated joint(s) ({', '.join(model)}); an unnamed log must list them "
                "all, in this order"
            )
        return list(
            range(len(model))
        ), f"unnamed log taken in the model's actuated-joint order: {', '.join(model)}"
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
        raise RobotError(
            f"log joint(s) {', '.join(missing)} not in the robot model {robot.path.name}; "
            f"the log has {', '.join(log_names)}; the model has {', '.join(model)}"
        )
    if len(set(out)) != len(out):
        raise RobotError(
            f"two log joints map to one model joint; the log has {', '.join(log_names)}; "
            f"the model has {', '.join(model)}"
        )
    unlogged = [model[i] for i in range(len(model)) if i not in set(out)]
    if unlogged:
        raise RobotError(
            f"robot joint(s) {', '.join(unlogged)} are not in the log; this version needs every actuated "
            f"joint logged; the log has {', '.join(log_names)}; the model has {', '.join(model)}"
        )
    how = "by name" + (f" ({suffixed} with the _joint suffix)" if suffixed else "")
    return out, how
