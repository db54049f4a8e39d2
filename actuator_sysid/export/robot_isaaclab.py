"""A whole robot's Isaac Lab export: one `actuators={...}` dict for an ArticulationCfg, grouped by regex.

The groups and their cfg values are the fit result's own (`fitting.robot.isaaclab_dict`: one group per fit
group, `joint_names_expr` its regex, values SI); this module states where they come from (a provenance header),
renders them as ready-to-paste Python (`ACTUATORS`, `SIM`, `ENCODER_BIAS`) and JSON, each value the log does not
identify marked NOT IDENTIFIED (a comment beside it; the JSON's `unidentified`), and builds every group with
the real Isaac Lab 3.0 classes (docs/consumer-semantics.md §A.1, §B). A class Isaac Lab lacks (a DC envelope with
a delay) is our subclass from the consumer package (actuator_sysid.consumers.isaaclab), which the Python source imports.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..fitting.result import RobotResult
from .isaaclab import CFG_FIELDS, CONSUMER_MODULE, code_name, validate_cfgs
from .robot_common import provenance_lines, unidentified_bias, unidentified_groups
from .safe_source import load_source
from .selection import ExportError, comment_line, prepend_comment

if TYPE_CHECKING:
    from .formats import RobotArgs


def render_robot(a: RobotArgs) -> tuple[dict[str, str], dict[str, Any]]:
    """isaaclab.py and isaaclab.json, each built with the real Isaac Lab classes, and what they noted (the
    class per group, and whether the JSON builds the same cfgs as the Python)."""
    texts = {
        "isaaclab.py": render_python(a.result),
        "isaaclab.json": render_json(a.result),
    }
    py = build_cfgs(texts["isaaclab.py"], "isaaclab.py")
    js = build_cfgs(texts["isaaclab.json"], "isaaclab.json", texts["isaaclab.py"])
    return texts, {
        "groups": {g: type(c).__name__ for g, c in py.items()},
        "json_equals_py": all(js[g].to_dict() == c.to_dict() for g, c in py.items()),
    }


def robot_doc(result: RobotResult) -> dict:
    """The whole-robot dict (`actuators`, `sim`, `encoder_bias`) with its provenance, checked as Isaac Lab would,
    and what the log does not identify of it (`unidentified`: per group each cfg field's mark, per joint its
    encoder bias's)."""
    from ..fitting.robot import isaaclab_dict

    doc = isaaclab_dict(result)  # a DC group's effort limit is already the smaller of envelope and model box
    validate_cfgs(
        {g: {"class_type": s["class_type"], "cfg": _cfg_fields(s)} for g, s in doc["actuators"].items()}
    )
    groups = unidentified_groups(result)
    unidentified = {
        "actuators": {
            g: {k: m for k, m in groups[g].items() if k in spec}
            for g, spec in doc["actuators"].items()
            if g in groups
        },
        "encoder_bias": unidentified_bias(result),
    }
    return {
        "provenance": provenance_lines(result, "Isaac Lab 3.0 actuators"),
        **doc,
        "unidentified": unidentified,
    }


def _cfg_fields(spec: dict) -> dict:
    return {k: v for k, v in spec.items() if k != "class_type"}


def render_json(result: RobotResult) -> str:
    """isaaclab.json: `DCMotorCfg(**{k: v for k, v in group.items() if k != "class_type"})` builds each group."""
    return json.dumps(robot_doc(result), indent=2) + "\n"


def _customs(doc: dict) -> list[str]:
    from isaaclab import actuators as ila

    out = []
    for g, spec in doc["actuators"].items():
        cls = spec["class_type"]
        if getattr(ila, cls, None) is None:
            if cls not in CFG_FIELDS:
                raise ExportError(f"group {g}: {cls} is neither an Isaac Lab class nor one of ours")
            out.append(cls)
    return list(dict.fromkeys(out))


def render_python(result: RobotResult) -> str:
    """isaaclab.py: `ArticulationCfg(actuators=ACTUATORS)`, with the physics step the delays count (`SIM`)."""
    doc = robot_doc(result)
    customs = _customs(doc)
    builtin = sorted({s["class_type"] for s in doc["actuators"].values()} - set(customs))
    lines = [
        '"""Whole-robot actuator configs fitted by actuator-sysid for Isaac Lab 3.0 (SI units).',
        "",
        "Use: ArticulationCfg(..., actuators=ACTUATORS) and SimulationCfg(dt=SIM['dt']) with the env's",
        "decimation SIM['decimation']: the delays count physics steps of SIM['dt'].",
        *(
            ["Our explicit subclasses below run with SimulationCfg(use_newton_actuators=False)."]
            if customs
            else []
        ),
        '"""',
        "",
    ]
    if customs:
        lines += [f"from {CONSUMER_MODULE} import {', '.join(customs)}  # pip install actuator-sysid"]
    if builtin:
        lines.append(f"from isaaclab.actuators import {', '.join(builtin)}")
    marks = doc["unidentified"]
    lines += ["", "ACTUATORS = {"]
    for g, spec in doc["actuators"].items():
        lines.append(f"    {str(g)!r}: {code_name(spec['class_type'], 'cfg class')}(")
        lines += [
            f"        {code_name(k, 'cfg field')}={v!r},{_beside(marks['actuators'].get(g, {}).get(k))}"
            for k, v in _cfg_fields(spec).items()
        ]
        lines.append("    ),")
    lines += [
        "}",
        "",
        f"SIM = {doc['sim']!r}",
        "",
        "# encoder bias (rad): add it to the simulated joint positions the actuators and policy read",
    ]
    if doc["encoder_bias"]:  # one joint a line, so that a bias the log does not identify is marked beside it
        lines.append("ENCODER_BIAS = {")
        lines += [
            f"    {str(j)!r}: {b!r},{_beside(marks['encoder_bias'].get(j))}"
            for j, b in doc["encoder_bias"].items()
        ]
        lines.append("}")
    else:
        lines.append("ENCODER_BIAS = {}")
    return prepend_comment("isaaclab.py", "\n".join(lines) + "\n", doc["provenance"])


def _beside(mark: str | None) -> str:
    """A value's NOT IDENTIFIED mark as a one-line comment after it (nothing for an identified value)."""
    return f"  # {comment_line(mark)}" if mark else ""


def build_cfgs(text: str, fmt: str, python_source: str | None = None) -> dict:
    """Every group of an isaaclab.py / .json export built with the real Isaac Lab classes, validated: {group: cfg}."""
    from isaaclab import actuators as ila

    if fmt.endswith(".py"):
        ns = load_source(text, "isaaclab.py")  # read as data, never run
        if not isinstance(ns.get("ACTUATORS"), dict):
            raise ExportError("isaaclab.py assigns no ACTUATORS dict")
        cfgs = dict(ns["ACTUATORS"])
    else:
        doc = json.loads(text)
        source_ns = load_source(python_source, "isaaclab.py") if python_source is not None else {}
        cfgs = {}
        for g, spec in doc["actuators"].items():
            name = str(spec["class_type"])
            cls = (getattr(ila, name, None) if name.endswith("Cfg") else None) or source_ns.get(name)
            if not isinstance(cls, type):
                raise ExportError(
                    f"group {g}: {spec['class_type']} is defined in isaaclab.py; build from that file"
                )
            cfgs[g] = cls(**_cfg_fields(spec))
    for cfg in cfgs.values():
        cfg.validate()
    return cfgs


def group_joints(cfgs: dict, joints: list[str]) -> dict[str, list[int]]:
    """Group → model joint indices, as Isaac Lab resolves joint_names_expr (full match; a joint in one group)."""
    out: dict[str, list[int]] = {}
    owner: dict[int, str] = {}
    for g, cfg in cfgs.items():
        idx = [i for i, n in enumerate(joints) if any(re.fullmatch(e, n) for e in cfg.joint_names_expr)]
        for i in idx:
            if i in owner:
                raise ExportError(f"joint {joints[i]} is matched by groups {owner[i]} and {g}")
            owner[i] = g
        out[g] = idx
    left = [joints[i] for i in range(len(joints)) if i not in owner]
    if left:
        raise ExportError(f"joints {left} are matched by no actuator group")
    return out
