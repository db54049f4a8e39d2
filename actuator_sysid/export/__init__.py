"""Exports of a fit for Isaac Lab, Newton and MuJoCo, validated and replayed before they are offered.

`render_all(result, rec)` gives every export file by name plus `validation.json`: the NEWTON.DJ.001
findings on the Newton stage, the semantic hazards of each export (docs/consumer-semantics.md §A.11), what each
format approximates, and each export replayed through its consumer next to our own rollout.
`render_format(result, rec, fmt)` renders one export of a joint fit or of a whole-robot fit (export/robot.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import cast

from ..datasets.recording import Recording
from ..fitting.result import ResultLike, RobotResultLike, as_result

# every format is one writer module plus one registration in export/formats.py; binary ones are network
# checkpoints (export/checkpoints.py, render_bytes)
from .formats import (
    BINARY_FORMATS,
    FORMATS,
    REGISTRY,
    REPLAYED,
    ROBOT_FORMATS,
    TEXT_FORMATS,
    ExportFormat,
    RenderArgs,
    format_help,
    formats_for,
    get_format,
    media_type,
    whole_robot,
)
from .selection import ExportError, Finding, bench_loads, load_dict

__all__ = [
    "BINARY_FORMATS",
    "FORMATS",
    "REGISTRY",
    "REPLAYED",
    "ROBOT_FORMATS",
    "TEXT_FORMATS",
    "ExportError",
    "ExportFormat",
    "Finding",
    "format_help",
    "formats_for",
    "media_type",
    "render_all",
    "render_bytes",
    "render_format",
    "replay",
    "validate_export",
    "whole_robot",
]


def render_bytes(result: ResultLike, fmt: str, *, families: dict[str, str] | str | None = None) -> bytes:
    """A network checkpoint (torchscript.pt for Isaac Lab, newton.onnx or newton.pt2 for Newton) of the joint
    `families` names (joint=mlp|lstm, or the kind alone when one joint has networks)."""
    from .checkpoints import render_checkpoint

    if whole_robot(result):
        raise ExportError(
            f"{fmt} is not a whole-robot export; a robot fit exports {', '.join(ROBOT_FORMATS)}"
        )
    joint = kind = None
    if isinstance(families, str):
        kind = families
    elif families:
        if len(families) != 1:
            raise ExportError(f"a checkpoint holds one joint's network: name one joint=kind, got {families}")
        joint, kind = next(iter(families.items()))
    if kind is not None and kind not in ("mlp", "lstm", "gru"):
        raise ExportError(
            f"{fmt} exports an actuator network: the family must be mlp or lstm (or gru), got {kind!r}"
        )
    return render_checkpoint(result, fmt, joint, kind)


def render_format(
    result: ResultLike | RobotResultLike,
    rec: Recording | None,
    fmt: str,
    *,
    families: dict[str, str] | str | None = None,
    field_names: str = "isaaclab-3",
    backend: str = "newton",
    loads: dict[str, dict] | None = None,
    robot_usd: str | bytes | None = None,
    robot: str | Path | None = None,
    package_roots: tuple[Path, ...] = (),
    at: dict[str, float] | None = None,
    unidentified: str | None = None,
    given: dict[str, float] | None = None,
    rename: dict[str, str] | None = None,
    info: dict | None = None,
) -> str:
    """One export as text, of a joint fit or a whole-robot fit. Isaac Lab formats take `families` per joint
    (default: best built-in class).

    `robot` is the robot model file: a whole-robot fit's export is written into it by the format's registered
    writer, as the fit wrote its own file (default: the model fit.json names), reading files only inside its
    folder or `package_roots`; a joint fit's newton.usda puts its
    actuators on this USD's joints (as `robot_usd`, its text). The options below re-render a joint fit's exports
    only: a whole-robot fit given one is refused with the reason.

    `at` ({"kp": 400, "vin": 7.4}) is the operating point of a device-unit fit (export/operating.py); the
    export states the point it used whenever the fit has one. An unidentified parameter is left at the
    consumer's default (`unidentified="omit"`, the default) or written flagged (`"comment"`); `given` values
    replace fitted ones; `rename` maps fit joint names to robot joint names (selection.prepare). Every export
    states its provenance (`info`: fit_id, dataset, verdict where the caller knows them) and physics dt
    (selection.stamp)."""
    from .operating import annotate, at_operating_point
    from .selection import prepare, provenance, stamp, unidentified_notes

    if whole_robot(result):
        from .robot import render_robot_format

        options = {
            "at": at,
            "set": given,
            "rename": rename,
            "unidentified": unidentified,
            "family": families,
            "field names": field_names != "isaaclab-3",
            "backend": backend != "newton",
        }
        if any(options.values()):
            raise ExportError(
                "set, rename and unidentified re-render the exports of a joint fit; a robot fit's exports are "
                "served as written (fit again with other options to change them); given: "
                + ", ".join(k for k, v in options.items() if v)
            )
        return render_robot_format(cast(RobotResultLike, result), fmt, robot, package_roots)
    if fmt in BINARY_FORMATS:
        raise ExportError(f"{fmt} is binary: use render_bytes")
    if robot is not None and robot_usd is None:
        robot_usd = _model_bytes(robot)
    result = as_result(cast(ResultLike, result))  # a joint fit's, as stored or typed
    at_point, points = at_operating_point(result, at)
    result = prepare(at_point, unidentified=unidentified or "omit", given=given, rename=rename, rec=rec)
    if rename:
        families = (
            {rename.get(j, j): f for j, f in families.items()} if isinstance(families, dict) else families
        )
        loads = {rename.get(j, j): v for j, v in loads.items()} if loads else loads
        points = {rename.get(j, j): v for j, v in points.items()} if points else points
    text = _render_text(
        result,
        rec,
        fmt,
        families=families,
        field_names=field_names,
        backend=backend,
        loads=loads,
        robot_usd=robot_usd,
    )
    text = stamp(
        fmt,
        text,
        provenance(result, info),
        unidentified_notes(result, families, _expresses(fmt), with_best=fmt.startswith("isaaclab")),
    )
    return annotate(fmt, text, points)  # the operating point first: the values below are stated at it


def _model_bytes(path: str | Path) -> bytes:
    """The robot model file a joint fit's newton.usda is authored on."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ExportError(f"the robot model {path} cannot be read: {e.strerror or e}") from None


def _expresses(fmt: str):
    """The family test of the exporter that writes `fmt` (which fitted family it picks per joint)."""
    return REGISTRY[fmt].expresses if fmt in REGISTRY else None


def _render_text(
    result: ResultLike,
    rec: Recording | None,
    fmt: str,
    *,
    families: dict[str, str] | str | None,
    field_names: str,
    backend: str,
    loads: dict[str, dict] | None,
    robot_usd: str | bytes | None,
) -> str:
    spec = get_format(fmt)
    if spec.render is None:
        raise ExportError(f"{fmt} is binary: use render_bytes")
    return spec.render(RenderArgs(result, rec, families, field_names, backend, loads, robot_usd))


def validate_export(
    result: ResultLike, rec: Recording | None = None, files: dict[str, str] | None = None
) -> list[Finding]:
    """Static findings: each registered format's (NEWTON.DJ.001 on the stage, §A.11 hazards of the Isaac Lab
    cfgs, checkpoints, what MJCF approximates), in registry order."""
    findings: list[Finding] = []
    for spec in REGISTRY.values():
        if spec.findings is not None:
            findings += spec.findings(result, rec, files or {})
    return findings


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _replay_findings(r: dict) -> list[Finding]:
    """A replay that failed, or that strays from our rollout beyond the tolerance, is a warning on the export."""
    if r["status"] == "failed":
        return [Finding("EXPORT.REPLAY.failed", "warning", r["format"], r.get("note", ""))]
    out = []
    for joint, j in r.get("joints", {}).items():
        if not j["within_tolerance"]:
            out.append(
                Finding(
                    "EXPORT.REPLAY.out_of_tolerance",
                    "warning",
                    f"{r['format']}: {joint}",
                    f"{r['consumer']} replays the {j['family']} model with position RMSE "
                    f"{j['rmse_replay']:.4g} rad against our rollout's {j['rmse_ours']:.4g} rad "
                    f"(beyond {r['tolerance']:.0%}); see the approximations stated for this format",
                )
            )
    return out


def render_all(
    result: ResultLike, rec: Recording, *, replay_exports: bool = True, info: dict | None = None
) -> dict[str, str]:
    """Every export by file name, plus validation.json (findings, replays, bench loads and the fit's verdict,
    fitting/verdict.py). A format that cannot be rendered for this result is left out, with the reason in the
    findings. The exports are replayed as rendered, then stamped with the verdict the replays give (`info`:
    fit_id and dataset where the caller knows them)."""
    from ..fitting.verdict import fit_verdict
    from .consumer_replay import replay

    result = as_result(result)

    def texts(extra: dict | None) -> tuple[dict[str, str], list[Finding]]:
        out: dict[str, str] = {}
        problems: list[Finding] = []
        for fmt in TEXT_FORMATS:
            try:
                out[fmt] = render_format(result, rec, fmt, info={**(info or {}), **(extra or {})})
            except ExportError as e:
                problems.append(Finding("EXPORT.unavailable", "warning", fmt, str(e)))
        return out, problems

    files, findings = texts(None)
    from .checkpoints import render_checkpoints

    files |= render_checkpoints(result)  # type: ignore[arg-type]  # bytes: network checkpoints, if any
    findings += validate_export(result, rec, files)
    replays = {}
    if replay_exports:
        for fmt in REPLAYED:
            if fmt in files:
                replays[fmt] = r = replay(result, rec, fmt, text=files[fmt])
                findings += _replay_findings(r)
    try:
        bench = {j: load_dict(v) for j, v in bench_loads(result, rec).items()}
    except ExportError:
        bench = {}
    errors = sum(f.severity == "error" for f in findings)
    doc = {
        "rule": "NEWTON.DJ.001",
        # no error finding and every replay within its tolerance; the verdict judges the whole fit
        "passed": not errors
        and all(r.get("status") != "failed" and r.get("within_tolerance", True) for r in replays.values()),
        "errors": errors,
        "warnings": sum(f.severity == "warning" for f in findings),
        "findings": [f.as_dict() for f in findings],
        "replay": replays,
        "bench": bench,
    }
    doc["verdict"] = fit_verdict(result, rec, doc if replay_exports else None)
    files |= texts({"verdict": doc["verdict"]})[0]  # the same exports, now stating the verdict
    files["validation.json"] = json.dumps(_json_safe(doc), indent=2) + "\n"
    return files


def replay(result: ResultLike, rec: Recording, fmt: str, *, text: str | None = None, **kwargs) -> dict:
    """Replay one export through its consumer (see export.consumer_replay.replay); rendered here unless given."""
    from .consumer_replay import CONSUMERS
    from .consumer_replay import replay as _replay

    if text is None and fmt in CONSUMERS:
        try:
            text = render_format(result, rec, fmt, families=kwargs.get("families"))
        except Exception as e:  # as a failed replay: a replay must never take the export down with it
            return {
                "format": fmt,
                "consumer": CONSUMERS[fmt],
                "status": "failed",
                "note": f"{type(e).__name__}: {e}",
            }
    return _replay(result, rec, fmt, text=text or "", **kwargs)
