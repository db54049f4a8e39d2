"""The user's own MJCF or URDF with identified link inertials and joint friction written in.

`update_mjcf(text, result)` and `update_urdf(text, result)` rewrite each identified link's inertial (mass, COM,
full inertia about the COM by the parallel-axis theorem) and each joint's friction terms, and keep every other
byte of the file: only the tags they change are rewritten, found by expat's byte offsets. A comment after the
root tag states which values the log identifies alone, which only in combination, which not at all, and the
torque residuals they came from.

    (out / "arm_identified.xml").write_text(update_mjcf(Path("arm.xml").read_text(), result))
"""

from __future__ import annotations

import re
import xml.parsers.expat
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..fitting.robot.inertial import InertialResult
from ..models.robot import RobotError

# MuJoCo joint attribute of each friction term the fit identifies (offset has none; armature is MuJoCo only)
MJCF_JOINT = {"armature": "armature", "viscous": "damping", "coulomb": "frictionloss"}
URDF_DYNAMICS = {"viscous": "damping", "coulomb": "friction"}


@dataclass
class _Tag:
    """One element of the file: its name, attributes, parent and the byte span of its start and end tags."""

    name: str
    attrs: dict[str, str]
    parent: int
    start: int
    start_end: int = 0  # one past the start tag's '>'
    end: int = 0  # one past the end tag's '>' (the start tag's for an empty element)
    end_start: int = 0  # the end tag's '<' (start_end for an empty element)
    children: list[int] = field(default_factory=list)


def _tag_end(data: bytes, at: int) -> int:
    """One past the '>' that closes the tag opening at `at`, quotes respected."""
    quote = 0
    for k in range(at, len(data)):
        c = data[k]
        if quote:
            quote = 0 if c == quote else quote
        elif c in (0x22, 0x27):
            quote = c
        elif c == 0x3E:
            return k + 1
    raise RobotError(f"model file: the tag at byte {at} is not closed")


def _parse(data: bytes) -> list[_Tag]:
    """Every element with its byte spans, in document order; a malformed file names the line."""
    tags: list[_Tag] = []
    stack: list[int] = []
    parser = xml.parsers.expat.ParserCreate()

    def start(name: str, attrs: dict[str, str]) -> None:
        at = parser.CurrentByteIndex
        tags.append(_Tag(name, attrs, stack[-1] if stack else -1, at, _tag_end(data, at)))
        if stack:
            tags[stack[-1]].children.append(len(tags) - 1)
        stack.append(len(tags) - 1)

    def end(_name: str) -> None:
        tag = tags[stack.pop()]
        empty = data[tag.start_end - 2 : tag.start_end] == b"/>"
        tag.end_start = tag.start_end if empty else parser.CurrentByteIndex
        tag.end = tag.start_end if empty else _tag_end(data, tag.end_start)

    parser.StartElementHandler, parser.EndElementHandler = start, end
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as e:
        raise RobotError(f"model file is not well-formed XML: {e}") from e
    return tags


def _fmt(x: float) -> str:
    return f"{float(x):.9g}"


def _set_attrs(tag_text: str, values: dict[str, str]) -> str:
    """The start tag with each attribute set: an existing value replaced in place, a new one added at the end."""
    for key, val in values.items():
        pat = re.compile(rf"(\s{re.escape(key)}\s*=\s*)([\"'])[^\"']*\2")
        if (m := pat.search(tag_text)) is not None:
            tag_text = (
                f"{tag_text[: m.start()]}{m.group(1)}{m.group(2)}{val}{m.group(2)}{tag_text[m.end() :]}"
            )
        else:
            close = len(tag_text) - (2 if tag_text.endswith("/>") else 1)
            tag_text = f'{tag_text[:close].rstrip()} {key}="{val}"{tag_text[close:]}'
    return tag_text


def com_inertia(link: dict) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, COM and the (3, 3) inertia about the COM of a result's link (inertia_origin − m(cᵀc E − c cᵀ))."""
    m, c = float(link["mass"]), np.asarray(link["com"], float)
    xx, yy, zz, xy, xz, yz = link["inertia_origin"]
    i_o = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    return m, c, i_o - m * (float(c @ c) * np.eye(3) - np.outer(c, c))


def written_links(result: InertialResult) -> list[str]:
    """Links with at least one inertial parameter the log touches; the others keep the file's values."""
    return [
        lk
        for lk in result.links
        if any(v != "none" for k, v in result.identifiability.items() if k.rsplit(".", 1)[0] == lk)
    ]


def written_terms(result: InertialResult, joint: str, terms: dict[str, str]) -> dict[str, float]:
    """The joint's terms the log identifies, alone or in combination with the fitted inertials."""
    got = result.friction[joint]
    return {t: got[t] for t in terms if result.identifiability.get(f"{joint}.{t}", "none") != "none"}


def _comment(result: InertialResult, fmt: str) -> str:
    """The header comment: the identifiability split, the residuals and what the format cannot hold."""
    split: dict[str, list[str]] = {"alone": [], "combination": [], "none": []}
    for k, v in result.identifiability.items():
        split.setdefault(v, []).append(k)
    lines = [
        "Link inertials and joint friction identified from torque logs (actuator_sysid fit, inertials):",
        "every inertial is physically consistent; values only identifiable in combination come from the physical",
        "fit, held near this file's values where the data are silent; links the log does not touch are unchanged.",
        f"identified alone: {', '.join(split['alone']) or '-'}",
        f"only in combination: {', '.join(split['combination']) or '-'}",
        f"not identified (kept): {', '.join(split['none']) or '-'}",
    ]
    for side, per in result.rmse.items():
        lines.append(f"torque RMSE {side}: " + ", ".join(f"{j} {v:.4g}" for j, v in per.items()))
    for name, per in result.baselines.items():
        lines.append(f"held-out torque RMSE of {name}: " + ", ".join(f"{j} {v:.4g}" for j, v in per.items()))
    if result.verdict:
        lines.append(f"verdict on the held-out torque: {result.verdict.get('verdict')}")
    lines.append("offset effort (no attribute holds it): " + _terms(result, "offset"))
    if fmt == "urdf":
        lines.append("URDF has no armature; identified armature: " + _terms(result, "armature"))
    body = "\n  ".join(line.replace("--", "- -") for line in lines)
    return f"\n  <!-- {body}\n  -->"


def _terms(result: InertialResult, term: str) -> str:
    return ", ".join(f"{j} {v[term]:.4g}" for j, v in result.friction.items())


def _apply(data: bytes, edits: list[tuple[int, int, str]]) -> str:
    """The file with each (start, end) byte span replaced, the rest byte for byte."""
    out, at = [], 0
    for s, e, new in sorted(edits):
        out += [data[at:s], new.encode()]
        at = e
    out.append(data[at:])
    return b"".join(out).decode()


def _named(tags: list[_Tag], kind: str, names: list[str], what: str) -> dict[str, int]:
    """Each name's element of this kind; one the file lacks is an error naming it."""
    found = {t.attrs.get("name"): k for k, t in enumerate(tags) if t.name == kind}
    missing = [n for n in names if n not in found]
    if missing:
        raise RobotError(
            f"{what}: no <{kind}> named {', '.join(missing)}; pass the model file the identification used"
        )
    return {n: found[n] for n in names}


def _update(text: str, result: InertialResult, fmt: str, link_edit: Callable, joint_edit: Callable) -> str:
    data = text.encode()
    tags = _parse(data)
    what = f"{fmt.upper()} update"
    edits: list[tuple[int, int, str]] = []
    links = written_links(result)
    for lk, k in _named(tags, "body" if fmt == "mjcf" else "link", links, what).items():
        edits.append(link_edit(data, tags, k, result.links[lk]))
    for jn, k in _named(tags, "joint", list(result.friction), what).items():
        edits += joint_edit(data, tags, k, jn, result)
    root = tags[0]
    edits.append((root.start_end, root.start_end, _comment(result, fmt)))
    return _apply(data, [e for e in edits if e is not None])


def _indent(data: bytes, at: int) -> str:
    line = data[data.rfind(b"\n", 0, at) + 1 : at].decode()
    return line if not line.strip() else ""


def _mjcf_link(data: bytes, tags: list[_Tag], k: int, link: dict) -> tuple[int, int, str]:
    m, c, i_c = com_inertia(link)
    full = [i_c[0, 0], i_c[1, 1], i_c[2, 2], i_c[0, 1], i_c[0, 2], i_c[1, 2]]
    new = (
        f'<inertial pos="{" ".join(map(_fmt, c))}" mass="{_fmt(m)}" '
        f'fullinertia="{" ".join(map(_fmt, full))}"/>'
    )
    inertial = [j for j in tags[k].children if tags[j].name == "inertial"]
    if inertial:
        t = tags[inertial[0]]
        return t.start, t.end, new
    body = tags[k]
    pad = _indent(data, tags[body.children[0]].start) if body.children else "  "
    return body.start_end, body.start_end, f"\n{pad}{new}"


def _mjcf_joint(data: bytes, tags: list[_Tag], k: int, jn: str, result: InertialResult) -> list:
    t = tags[k]
    vals = {MJCF_JOINT[n]: _fmt(v) for n, v in written_terms(result, jn, MJCF_JOINT).items()}
    return [(t.start, t.start_end, _set_attrs(data[t.start : t.start_end].decode(), vals))] if vals else []


def update_mjcf(text: str, result: InertialResult) -> str:
    """The MJCF with each identified link's `<inertial>` (pos, mass, fullinertia about the COM) and each joint's
    armature, damping and frictionloss; the rest of the file byte-identical."""
    if re.search(r"<compiler[^>]*\binertiafromgeom\s*=\s*[\"']true", text):
        raise RobotError(
            'MJCF update: <compiler inertiafromgeom="true"> makes MuJoCo ignore every <inertial>; set it to '
            '"auto" so that the identified inertials take effect'
        )
    return _update(text, result, "mjcf", _mjcf_link, _mjcf_joint)


def _urdf_link(data: bytes, tags: list[_Tag], k: int, link: dict) -> tuple[int, int, str]:
    m, c, i_c = com_inertia(link)
    link_tag = tags[k]
    inertial = [j for j in link_tag.children if tags[j].name == "inertial"]
    if inertial:
        t = tags[inertial[0]]
        pad = _indent(data, t.start)
        span = (t.start, t.end)
    else:
        pad = (_indent(data, tags[link_tag.children[0]].start) if link_tag.children else "  ") or "  "
        span = (link_tag.start_end, link_tag.start_end)
    inner = pad + "  "
    ii = {
        "ixx": i_c[0, 0],
        "ixy": i_c[0, 1],
        "ixz": i_c[0, 2],
        "iyy": i_c[1, 1],
        "iyz": i_c[1, 2],
        "izz": i_c[2, 2],
    }
    new = (
        f"<inertial>\n{inner}"
        f'<origin xyz="{" ".join(map(_fmt, c))}" rpy="0 0 0"/>\n{inner}'
        f'<mass value="{_fmt(m)}"/>\n{inner}'
        f"<inertia {' '.join(f'{n}={chr(34)}{_fmt(v)}{chr(34)}' for n, v in ii.items())}/>\n{pad}</inertial>"
    )
    return span[0], span[1], new if inertial else f"\n{pad}{new}"


def _urdf_joint(data: bytes, tags: list[_Tag], k: int, jn: str, result: InertialResult) -> list:
    vals = {URDF_DYNAMICS[n]: _fmt(v) for n, v in written_terms(result, jn, URDF_DYNAMICS).items()}
    if not vals:
        return []
    joint = tags[k]
    dyn = [j for j in joint.children if tags[j].name == "dynamics"]
    if dyn:
        t = tags[dyn[0]]
        return [(t.start, t.start_end, _set_attrs(data[t.start : t.start_end].decode(), vals))]
    new = "<dynamics " + " ".join(f'{n}="{v}"' for n, v in vals.items()) + "/>"
    closing = _indent(data, joint.end_start)
    if not closing:  # the end tag shares its line: the new child goes just before it
        return [(joint.end_start, joint.end_start, new)]
    line = joint.end_start - len(closing.encode())
    return [(line, line, f"{closing}  {new}\n")]


def update_urdf(text: str, result: InertialResult) -> str:
    """The URDF with each identified link's `<inertial>` (origin at the COM, mass, ixx..izz about the COM) and
    each joint's `<dynamics damping friction>`; URDF has no armature (the header comment gives it)."""
    return _update(text, result, "urdf", _urdf_link, _urdf_joint)
