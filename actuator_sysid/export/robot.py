"""Whole-robot exports of a coupled fit (fitting/robot.py), each replayed on the whole robot by its consumer.

`write_robot_exports` writes isaaclab.py / isaaclab.json (export/robot_isaaclab.py), newton.usda
(export/robot_usd.py, NEWTON.DJ.001-validated, read back through Newton's `add_usd`) and, for an MJCF robot,
mjcf.xml (export/robot_mjcf.py); then replays each through its consumer on the fit's held-out part of the log
(export/robot_replay.py) and puts the figures into the result as `replays` (and what each export noted as
`exports`), as the 1-DoF fits carry theirs. A consumer that fails is reported as failed with the reason; it
never takes the fit's other outputs down.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..datasets.recording import Recording
from ..fitting.result import RobotResult, RobotResultLike, as_robot_result
from ..fitting.robot_judge import robot_verdict
from ..models.robot import MJCF_SUFFIXES, URDF_SUFFIXES
from .robot_common import bias_of, joint_models, replay_log
from .selection import ExportError, prepend_comment

log = logging.getLogger(__name__)


def render_robot_exports(result: RobotResult, robot) -> tuple[dict[str, str], dict]:
    """{file name: text} of every whole-robot export this robot allows, and per file what it noted."""
    from .robot_common import provenance_lines
    from .robot_isaaclab import build_cfgs, render_json, render_python

    texts: dict[str, str] = {}
    info: dict[str, dict] = {}
    try:
        texts["isaaclab.py"], texts["isaaclab.json"] = render_python(result), render_json(result)
        py = build_cfgs(texts["isaaclab.py"], "isaaclab.py")
        js = build_cfgs(texts["isaaclab.json"], "isaaclab.json", texts["isaaclab.py"])
        info["isaaclab"] = {
            "groups": {g: type(c).__name__ for g, c in py.items()},
            "json_equals_py": all(js[g].to_dict() == c.to_dict() for g, c in py.items()),
        }
    except Exception as e:  # noqa: BLE001 - the other exports stand without it
        texts.pop("isaaclab.py", None), texts.pop("isaaclab.json", None)
        info["isaaclab"] = {"status": "not written", "note": f"{type(e).__name__}: {e}"}
    try:
        from .robot_usd import build_robot_stage, import_stage, readback_mismatches
        from .validate import validate_stage

        stage, findings = build_robot_stage(result, robot)
        dj = validate_stage(stage)
        text = stage.GetRootLayer().ExportToString()
        texts["newton.usda"] = prepend_comment(
            "newton.usda", text, provenance_lines(result, "Newton 1.8 USD")
        )
        mismatches = readback_mismatches(import_stage(stage), result)
        info["newton"] = {
            "findings": [f.as_dict() for f in findings],
            "dj001": [f.as_dict() for f in dj],
            "readback_mismatches": mismatches,
            "readback_equal": not mismatches,
        }
    except Exception as e:  # noqa: BLE001 - the other exports stand without it
        info["newton"] = {"status": "not written", "note": f"{type(e).__name__}: {e}"}
    from .robot_mjcf import render_robot_mjcf

    try:
        with _as_mjcf(robot) as (mjcf, how):
            texts["mjcf.xml"], mj_findings = render_robot_mjcf(result, mjcf)
        info["mujoco"] = {"findings": [f.as_dict() for f in mj_findings], **({"source": how} if how else {})}
    except Exception as e:  # noqa: BLE001 - the other exports stand without it
        info["mujoco"] = {"status": "not written", "note": f"{type(e).__name__}: {e}"}
    return texts, info


@contextmanager
def _as_mjcf(robot) -> Iterator[tuple[SimpleNamespace, str | None]]:
    """The robot's MJCF to write the fitted terms into: its own file, or for a URDF the MJCF MuJoCo's own URDF
    importer makes of it (saved beside nothing: a temporary file named as the robot); a USD has none."""
    suffix = robot.path.suffix.lower()
    if suffix in MJCF_SUFFIXES:
        yield SimpleNamespace(path=robot.path), None
        return
    if suffix not in URDF_SUFFIXES:
        raise ExportError(f"{robot.path.name} is a USD model: MuJoCo reads no USD, so no mjcf.xml is written")
    import mujoco

    try:
        model = mujoco.MjModel.from_xml_path(str(robot.path))
    except Exception as e:  # noqa: BLE001 - MuJoCo's URDF importer raises ValueError with its own text
        first = (str(e).strip().splitlines() or ["?"])[0]
        raise ExportError(f"MuJoCo could not import {robot.path.name} to write its MJCF: {first}") from None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{robot.path.stem}.xml"
        mujoco.mj_saveLastXML(str(path), model)
        yield SimpleNamespace(path=path), f"{robot.path.name} converted to MJCF by MuJoCo's URDF importer"


ROBOT_FILES = ("isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml")


def render_robot_format(stored: RobotResultLike, fmt: str, robot_path: str | Path | None = None) -> str:
    """One whole-robot export of a stored robot fit, rendered from fit.json and the robot model as the fit
    rendered its own files; an ExportError says why a format cannot be written (not a robot export, the model
    not found, or the export's own reason)."""
    from ..models.robot import RobotError, load_robot

    result = as_robot_result(stored)  # fit.json read back

    if fmt not in ROBOT_FILES:
        raise ExportError(f"{fmt} is not a whole-robot export; a robot fit exports {', '.join(ROBOT_FILES)}")
    path = Path(robot_path or result.robot["path"])
    if not path.is_file():
        raise ExportError(
            f"the fit's robot model {path} is not here: pass --robot MODEL (the file the fit used)"
        )
    try:
        robot = load_robot(path)
    except RobotError as e:
        raise ExportError(str(e)) from None
    texts, info = render_robot_exports(result, robot)
    if fmt not in texts:
        key = {"isaaclab.py": "isaaclab", "isaaclab.json": "isaaclab", "newton.usda": "newton"}.get(
            fmt, "mujoco"
        )
        raise ExportError(f"{fmt} was not written: {info.get(key, {}).get('note', 'no reason given')}")
    return texts[fmt]


def _consumer(name: str, fn, say: Callable[[str], None]) -> dict:
    from .robot_replay import timed

    say(f"replaying the exports on the whole robot: {name}")
    try:
        return {"run": timed(fn)}
    except Exception as e:  # noqa: BLE001 - a replay must never take the exports down with it
        log.warning("%s replay failed: %s", name, e)
        return {"status": "failed", "note": f"{type(e).__name__}: {e}"}


def replay_robot_exports(
    result: RobotResult,
    rec: Recording,
    robot,
    texts: dict[str, str],
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Every written export replayed by its consumer on the held-out part, beside our coupled rollout."""
    from . import robot_replay as rr

    say = progress or log.info

    lg = replay_log(result, rec)
    models = joint_models(result)
    bias = bias_of(result, lg.joints)
    delay = int(result.delay_steps or 0)
    mode = str(result.effort_mode or "explicit")
    ours_q, ours_s = rr.timed(lambda: rr.ours(models, robot, lg, bias, delay, mode))
    runs: dict[str, dict] = {}

    def isaaclab():
        from .robot_isaaclab import build_cfgs

        return rr.isaaclab_run(build_cfgs(texts["isaaclab.py"], "isaaclab.py"), robot, lg, bias)

    if "isaaclab.py" in texts:
        runs["isaaclab"] = _consumer("isaaclab", isaaclab, say)
    if "newton.usda" in texts:
        from .robot_usd import import_stage
        from .validate import open_stage

        runs["newton"] = _consumer(
            "newton", lambda: rr.newton_run(import_stage(open_stage(texts["newton.usda"])), lg, bias), say
        )
    if "mjcf.xml" in texts:
        from .robot_mjcf import actuator_names, replay_model

        base = (
            robot.path.parent.resolve()
        )  # a model MuJoCo cannot load fails this replay alone, as the others
        runs["mujoco"] = _consumer(
            "mujoco",
            lambda: rr.mujoco_run(
                replay_model(texts["mjcf.xml"], base), lg, bias, models, actuator_names(texts["mjcf.xml"])
            ),
            say,
        )
    consumers = {k: (rr.compare(lg, ours_q, *v["run"]) if "run" in v else v) for k, v in runs.items()}
    traces = {"ours": ours_q, **{k: v["run"][0] for k, v in runs.items() if "run" in v}}
    names = list(traces)
    between = {
        f"{a} vs {b}": rr.rmse(traces[a], traces[b]) for i, a in enumerate(names) for b in names[i + 1 :]
    }
    assert result.validation.rmse is not None  # every fit states its held-out error
    fit_v = float(result.validation.rmse)
    return {
        "part": {
            "from_sample": lg.start,
            "samples": int(lg.q.shape[0]),
            "duration_s": float((lg.q.shape[0] - 1) * lg.dt * lg.decimation),
            "what": "the fit's held-out part, from the measured state at the split, open loop",
        },
        "tolerance": rr.TOLERANCE,
        "definition": "within tolerance: the replay's position RMSE against the log within 10 % of our "
        "coupled rollout's",
        "ours": {
            "rmse": rr.rmse(ours_q, lg.q),
            "fit_validation_rmse": fit_v,
            "wall_s": ours_s,
            "engine": "models/articulated.py on Newton SolverMuJoCo (MuJoCo C), one world",
            "effort_mode": mode,
        },
        "consumers": consumers,
        "rmse_between": between,  # rad, every pair of replays (ours included) over the same part
        "within_tolerance": bool(consumers)
        and all(c.get("within_tolerance", False) for c in consumers.values()),
        **({"note": IMPLICIT_NOTE} if mode == "implicit" else {}),
    }


# an implicit-mode fit: our rollout replays it so, the consumers as their exports run by default
IMPLICIT_NOTE = (
    "the fit assumed Newton's implicit effort mode: our rollout replays it in that mode; the consumers replay "
    "their exports in explicit mode (Isaac Lab's actuators compute the effort explicitly; NewtonActuator USD "
    "states no effort mode, so set_effort_mode_implicit must be called after import), so their replays differ "
    "by what the mode changes"
)


def replay_lines(replays: Mapping[str, Any]) -> list[str]:
    """The CLI's lines: each consumer's held-out RMSE beside our rollout's."""
    if replays.get("status") == "failed":
        return [f"exports not replayed: {replays['note']}"]
    o = replays["ours"]["rmse"]
    lines = [
        f"exports replayed on the whole robot (held-out part, {replays['part']['duration_s']:.2f} s): our "
        f"coupled rollout {o:.4f} rad"
    ]
    for name, c in replays["consumers"].items():
        if c.get("status") != "ok":
            lines.append(f"  {name}: {c.get('status')} — {c.get('note')}")
            continue
        lines.append(
            f"  {name}: {c['rmse_replay']:.4f} rad ({c['relative_difference']:.1%} from ours' RMSE; "
            f"{c['rmse_replay_vs_ours']:.2g} rad from ours) "
            + ("within 10 %" if c["within_tolerance"] else "NOT within 10 %")
        )
    if replays.get("rmse_between"):
        pair, worst = max(replays["rmse_between"].items(), key=lambda kv: kv[1])
        lines.append(f"  the replays against each other: at most {worst:.2g} rad RMSE ({pair})")
    if replays.get("note"):
        lines.append(f"  note: {replays['note']}")
    return lines


def export_lines(result: RobotResult) -> list[str]:
    """The CLI's lines about the whole-robot exports: what was not written, DJ.001 and read-back, the replays."""
    lines = []
    for name, i in (result.exports or {}).items():
        if i.get("status") == "not written":
            lines.append(f"{name} export not written: {i['note']}")
    nw = (result.exports or {}).get("newton") or {}
    if "dj001" in nw:
        lines.append(
            f"newton.usda: {len(nw['dj001'])} NEWTON.DJ.001 finding(s); Newton's add_usd reads the "
            "actuators back "
            + (
                "equal to the fit"
                if nw["readback_equal"]
                else "DIFFERENT: " + "; ".join(nw["readback_mismatches"][:4])
            )
        )
    if result.replays:
        lines += replay_lines(result.replays)
    return lines


def with_exports(
    result: RobotResult,
    rec: Recording,
    robot,
    replay: bool = True,
    progress: Callable[[str], None] | None = None,
) -> tuple[RobotResult, dict[str, str]]:
    """The whole-robot exports ({file name: text}) and the result with what they noted (`exports`), their
    replays (`replays`) and the verdict judged again with them."""
    texts, info = render_robot_exports(result, robot)
    result = replace(result, exports=info)
    if replay:
        try:
            replays = replay_robot_exports(result, rec, robot, texts, progress)
        except Exception as e:  # noqa: BLE001 - the written exports stand without their replays
            log.warning("whole-robot replays failed: %s", e)
            replays = {"status": "failed", "note": f"{type(e).__name__}: {e}"}
        result = replace(result, replays=replays)
    if result.has("validation"):  # judged again with the replays: one that did not run is not checked
        result = replace(result, verdict=robot_verdict(result))
    return result, texts


def write_robot_exports(
    result: RobotResult,
    rec: Recording,
    robot,
    out: str | Path,
    replay: bool = True,
    progress: Callable[[str], None] | None = None,
) -> tuple[RobotResult, list[str]]:
    """Write the whole-robot exports into `out`, replay them, and rewrite fit.json with `replays` and `exports`;
    returns the result as fit.json now holds it, and the exports' file names."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result, texts = with_exports(result, rec, robot, replay, progress)
    for name, text in texts.items():
        (out / name).write_text(text)
    (out / "fit.json").write_text(json.dumps(result.to_json(), indent=2))
    return result, list(texts)
