"""A whole robot's MJCF export: the user's own MJCF with the fitted joint terms and actuators written in.

Every fitted joint gets `armature`, `damping` (viscous) and `frictionloss` (Coulomb) set on the joint itself
(overriding its default class), and its actuator — whatever the model had driving it (`motor`, `position`,
`general` …) — becomes one `general` position actuator of the same name, as export/mjcf.py writes it: gainprm =
kp, biasprm = [0, −kp, −kd], forcerange = the motor's effort limit, `delay` in seconds of the physics step
(MuJoCo ≥ 3.3's actuator delay); a DC-motor envelope adds the back-EMF actuator and the joint's actuatorfrcrange.
`<option timestep>` becomes the physics step the delay counts. The rest of the file is the user's, unchanged:
mesh and asset paths stay relative to where their model lives (put mjcf.xml beside it).

The control is a virtual target: ctrl = q_des + kd·qd_des/kp gives kp·(q_des − q) + kd·(qd_des − qd); with the
fitted encoder bias b, ctrl = q_des − b + kd·qd_des/kp (MuJoCo's actuator reads the true angle). A torque-driven
joint (kp = kd = 0: the log's feed-forward effort drives it) gets the same actuator with gain 1 instead, so ctrl
is that torque in N·m, delayed and clamped to the fitted effort limit as the fit's rollout clamps it.

A value the log does not identify is marked by an XML comment right after the element that holds it (the joint
or its actuator), naming the attribute: `<!-- NOT IDENTIFIED (hip.armature): … · FL_hip_joint armature … -->`.
"""

from __future__ import annotations

import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..fitting.result import RobotResult
from ..models.robot import MJCF_SUFFIXES, URDF_SUFFIXES
from .mjcf import _actuator_attrs, _joint_attrs, dc_slope
from .robot_common import joint_marks, joint_models, provenance_lines, written_by
from .selection import ChosenModel, ExportError, Finding, comment_line, prepend_comment

if TYPE_CHECKING:
    from .formats import RobotArgs

ACTUATOR_TAGS = ("motor", "position", "velocity", "general", "intvelocity", "damper", "cylinder", "muscle")


def render_robot(a: RobotArgs) -> tuple[dict[str, str], dict[str, Any]]:
    """mjcf.xml written into the robot's MJCF (a URDF's through MuJoCo's importer; a USD has none), and what it
    noted (its findings, and where the MJCF came from when it is not the robot's own)."""
    with as_mjcf(a.robot) as (mjcf, how):
        text, findings = render_robot_mjcf(a.result, mjcf)
    return {"mjcf.xml": text}, {
        "findings": [f.as_dict() for f in findings],
        **({"source": how} if how else {}),
    }


@contextmanager
def as_mjcf(robot) -> Iterator[tuple[SimpleNamespace, str | None]]:
    """The robot's MJCF to write the fitted terms into: its own file, or for a URDF the MJCF MuJoCo's own URDF
    importer makes of the text the fit imported (its meshes skipped where an <inertial> holds the mass; saved
    beside nothing: a temporary file named as the robot); a USD has none."""
    suffix = robot.path.suffix.lower()
    if suffix in MJCF_SUFFIXES:
        yield SimpleNamespace(path=robot.path), None
        return
    if suffix not in URDF_SUFFIXES:
        raise ExportError(f"{robot.path.name} is a USD model: MuJoCo reads no USD, so no mjcf.xml is written")
    import mujoco

    text = getattr(robot, "source_text", None)  # checked file names; visuals and unused collisions removed
    if text is not None and "<mesh" in text:
        raise ExportError(
            f"{robot.path.name}: a link takes its mass from collision meshes (no <inertial> mass); the MJCF "
            "MuJoCo makes of it would hold neither that mass nor portable mesh paths: give those links an "
            "<inertial> to export mjcf.xml"
        )
    try:
        model = (
            mujoco.MjModel.from_xml_path(str(robot.path))
            if text is None
            else mujoco.MjModel.from_xml_string(text)
        )
    except Exception as e:  # noqa: BLE001 - MuJoCo's URDF importer raises ValueError with its own text
        first = (str(e).strip().splitlines() or ["?"])[0]
        raise ExportError(f"MuJoCo could not import {robot.path.name} to write its MJCF: {first}") from None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{robot.path.stem}.xml"
        mujoco.mj_saveLastXML(str(path), model)
        yield SimpleNamespace(path=path), f"{robot.path.name} converted to MJCF by MuJoCo's URDF importer"


def _fmt(x: float) -> str:
    return f"{float(x):.9g}"


def _joints(root: ET.Element) -> dict[str, ET.Element]:
    """Named joints of the kinematic tree (not the <default> classes)."""
    return {
        j.attrib["name"]: j
        for wb in root.findall("worldbody")
        for j in wb.iter("joint")
        if "name" in j.attrib
    }


def _set_option(root: ET.Element, dt: float) -> None:
    opt = root.find("option")
    if opt is None:
        opt = ET.Element("option")
        root.insert(1, opt)
    opt.set("timestep", _fmt(dt))


def render_robot_mjcf(result: RobotResult, robot) -> tuple[str, list[Finding]]:
    """(mjcf.xml text, findings): the user's MJCF with every fitted joint's terms and actuator updated."""
    if robot.path.suffix.lower() not in MJCF_SUFFIXES:
        raise ExportError(
            f"{robot.path.name} is not an MJCF file: mjcf.xml is written for an MJCF robot only"
        )
    tree = ET.parse(robot.path)
    root = tree.getroot()
    models = joint_models(result)
    dt = result.physics_dt
    joints = _joints(root)
    missing = [j for j in models if j not in joints]
    if missing:
        raise ExportError(f"joints {missing} are not named in {robot.path.name}")
    findings: list[Finding] = []
    marks = joint_marks(result)
    parents = {c: p for wb in root.findall("worldbody") for p in wb.iter() for c in p}
    for j, m in models.items():
        for k, v in _joint_attrs(m).items():
            joints[j].set(k, v)
        for k in ("armature", "damping", "frictionloss"):  # a term the fit leaves at 0 is written as 0
            joints[j].attrib.setdefault(k, "0")
        _mark_after(parents[joints[j]], joints[j], marks.get(j, {}), m, _joint_attrs)
    act_root = root.find("actuator")
    if act_root is None:
        act_root = ET.SubElement(root, "actuator")
    for j, m in models.items():
        old = [
            (i, a)
            for i, a in enumerate(list(act_root))
            if a.tag in ACTUATOR_TAGS and a.attrib.get("joint") == j
        ]
        pos = old[0][0] if old else len(act_root)
        name = old[0][1].attrib.get("name", f"{j}_actuator") if old else f"{j}_actuator"
        for _, a in old:
            act_root.remove(a)
        if len(old) > 1:
            findings.append(
                Finding(
                    "EXPORT.MJCF.actuators_merged",
                    "warning",
                    j,
                    f"{len(old)} actuators drove {j}; one fitted actuator {name!r} replaces them",
                )
            )
        attrs = _actuator_attrs(m, dt)
        if torque_driven(m):  # ctrl is the feed-forward torque: gain 1 (÷ the gear _actuator_attrs may set)
            attrs["gainprm"] = _fmt(1.0 / float(attrs.get("gear", 1.0)))
        new = ET.Element("general", {"name": name, "joint": j, **attrs})
        act_root.insert(pos, new)
        _mark_after(act_root, new, marks.get(j, {}), m, lambda c: _actuator_attrs(c, dt))
        # the back-EMF half of the DC envelope (export/mjcf.py), after its actuator and that one's marks
        if dc_slope(m) > 0:
            emf = ET.Element(
                "general",
                {"name": f"{name}_emf", "joint": j, "gainprm": "0", "biastype": "affine", "biasprm": _emf(m)},
            )
            act_root.insert(list(act_root).index(new) + _marked(act_root, new) + 1, emf)
            _mark_after(act_root, emf, marks.get(j, {}), m, lambda c: {"biasprm": _emf(c)})
    _set_option(root, dt)
    ET.indent(tree, space="    ")
    text = ET.tostring(root, encoding="unicode") + "\n"
    lines = provenance_lines(result, "MuJoCo MJCF") + [
        f"the fitted terms and actuators of {len(models)} joints are written into {robot.path.name}; the rest is "
        "the model's own: mesh and asset paths are relative to it (put this file beside it)",
        "each fitted joint's own actuators are replaced whole: gains, bias, activation dynamics (dyntype) and "
        "force range become the fitted PD and its effort limit",
        *ctrl_lines(models),
    ]
    return prepend_comment("mjcf.xml", text, lines), findings


def _emf(m: ChosenModel) -> str:
    """The back-EMF actuator's biasprm: −c·qd, c the envelope's slope."""
    return f"0 0 {_fmt(-dc_slope(m))}"


def _mark_after(
    parent: ET.Element,
    el: ET.Element,
    marks: dict[str, str],
    m: ChosenModel,
    write: Callable[[ChosenModel], Mapping[str, object]],
) -> None:
    """An XML comment after `el` for each value of `marks` that sets one of its attributes (as `write` writes
    them), naming the joint and the attribute: the mark beside the value it concerns."""
    at = list(parent).index(el)
    for param, mark in marks.items():
        keys = [k for k in written_by(m, param, write) if k in el.attrib]
        if keys:
            at += 1
            text = f"{mark} · {m.joint} " + ", ".join(f'{k}="{el.attrib[k]}"' for k in keys)
            parent.insert(at, ET.Comment(f" {comment_line(text, xml=True)} "))


def _marked(parent: ET.Element, el: ET.Element) -> int:
    """How many mark comments follow `el` in `parent`."""
    kids = list(parent)
    n, at = 0, kids.index(el) + 1
    while at + n < len(kids) and kids[at + n].tag is ET.Comment:
        n += 1
    return n


def torque_driven(m: ChosenModel) -> bool:
    """A joint the fit drives by the logged feed-forward effort alone (kp = kd = 0): its actuator passes ctrl
    as torque."""
    return not (m.value("stiffness") or 0.0) and not (m.value("damping") or 0.0)


def ctrl_lines(models: dict[str, ChosenModel]) -> list[str]:
    """The header's ctrl formula for each kind of joint the file drives (never a division by kp = 0)."""
    torque = [j for j, m in models.items() if torque_driven(m)]
    pd = [j for j in models if j not in torque]
    out = []
    if pd:
        out.append(
            "ctrl = q_des - encoder_bias + kd*qd_des/kp (a virtual target: kp*(q_des - q) + kd*(qd_des - qd))"
            + (
                f" for {', '.join(pd)}; a logged feed-forward torque is added as qfrc_applied"
                if torque
                else ""
            )
        )
    if torque:
        out.append(
            f"ctrl = tau_ff, the feed-forward torque in N·m (gain 1, no position or velocity gain: kp = kd = 0) "
            f"for {', '.join(torque)}; forcerange is the fitted effort limit"
        )
    return out


def actuator_names(text: str) -> dict[str, str]:
    """Joint → the name of the position actuator driving it in an exported MJCF (not the back-EMF one)."""
    root = ET.fromstring(text)
    act = root.find("actuator")
    return {
        a.attrib["joint"]: a.attrib["name"]
        for a in (act if act is not None else [])
        if a.tag == "general"
        and "joint" in a.attrib
        # the back-EMF half (named *_emf, no gain); a torque-driven joint's actuator has gain 1 (ctrl = torque)
        and not (a.attrib.get("name", "").endswith("_emf") and a.attrib.get("gainprm") == "0")
    }


def replay_model(text: str, base_dir: Path) -> str:
    """The exported MJCF as the in-air replay runs it: the root welded (its free joint removed), contacts off, and
    what an in-air replay needs neither of — mesh geoms and mesh, height-field and texture files (they may be
    absent, as the fit skipped them), keyframes (sized for the free joint), sensors and contact pairs — dropped.
    Every other element (bodies' inertials, primitive geoms, tendons, equality constraints) stays the model's; a
    body whose mass and inertia MuJoCo computes from its mesh geoms gets them as an <inertial> first."""
    root = ET.fromstring(text)
    wb = root.find("worldbody")
    if wb is None:
        raise ExportError("the MJCF has no worldbody")
    _inertials_from_meshes(root, text, base_dir)
    for body in wb.findall("body"):
        for fj in list(body.findall("freejoint")) + [
            j for j in body.findall("joint") if j.attrib.get("type") == "free"
        ]:
            body.remove(fj)
    for parent in list(root.iter()):
        for child in list(parent):
            if (
                (child.tag == "geom" and ("mesh" in child.attrib or "hfield" in child.attrib))
                or child.tag in ("mesh", "hfield", "skin")
                or (child.tag == "texture" and "file" in child.attrib)
            ):
                parent.remove(child)
            elif child.tag == "material":
                child.attrib.pop("texture", None)
    for tag in ("keyframe", "sensor", "contact"):
        for el in root.findall(tag):
            root.remove(el)
    comp = root.find("compiler")
    if comp is not None:
        comp.set("assetdir", str(base_dir))
    opt = root.find("option")
    if opt is None:
        opt = ET.SubElement(root, "option")
    flag = opt.find("flag")
    if flag is None:
        flag = ET.SubElement(opt, "flag")
    flag.set("contact", "disable")
    return ET.tostring(root, encoding="unicode")


def _inertials_from_meshes(root: ET.Element, text: str, base_dir: Path) -> None:
    """Write MuJoCo's own mass, COM and inertia as an <inertial> into each body whose inertia comes from mesh
    geoms (no <inertial>, or the compiler's inertiafromgeom="true": then every body, and the flag set "auto"),
    compiling `text` with its meshes read beside the robot: dropping the meshes would leave those bodies
    massless (MuJoCo's mjMINVAL). Without the mesh files ExportError names the bodies."""
    import mujoco

    comp = root.find("compiler")
    from_geom = comp is not None and comp.get("inertiafromgeom", "auto") == "true"
    bodies = list(root.find("worldbody").iter("body"))  # type: ignore[union-attr]
    meshed = [
        b
        for b in bodies
        if (from_geom or b.find("inertial") is None)
        and any("mesh" in g.attrib or g.get("type") == "mesh" for g in b.findall("geom"))
    ]
    if not meshed:
        return
    names = ", ".join(b.get("name", "?") for b in meshed)
    try:
        spec = mujoco.MjSpec.from_string(text)
        spec.modelfiledir = str(base_dir)
        model = spec.compile()
    except Exception as e:  # noqa: BLE001 - MuJoCo's compiler raises ValueError with its own text
        first = (str(e).strip().splitlines() or ["?"])[0]
        raise ExportError(
            f"body {names} take(s) mass and inertia from mesh geoms, but MuJoCo could not read the meshes "
            f"beside the robot in {base_dir}: {first}"
        ) from None
    if model.nbody != len(bodies) + 1:
        raise ExportError(f"the MJCF's bodies ({len(bodies)}) are not MuJoCo's ({model.nbody - 1})")
    for i, body in enumerate(bodies, start=1):
        if body not in meshed and not (from_geom and model.body_mass[i] > 0):
            continue  # without mass from any geom, "auto" computes what "true" did: nothing
        for old in body.findall("inertial"):
            body.remove(old)
        inertial = ET.Element(
            "inertial",
            {
                "pos": " ".join(_fmt(v) for v in model.body_ipos[i]),
                "quat": " ".join(_fmt(v) for v in model.body_iquat[i]),
                "mass": _fmt(model.body_mass[i]),
                "diaginertia": " ".join(_fmt(v) for v in model.body_inertia[i]),
            },
        )
        body.insert(0, inertial)
    if from_geom:
        comp.set("inertiafromgeom", "auto")  # type: ignore[union-attr]
