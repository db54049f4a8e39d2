"""Whole-robot exports of a coupled fit (fitting/robot/), each replayed on the whole robot by its consumer.

`write_robot_exports` writes every format the export registry (export/formats.py) gives a `RobotWriter`:
isaaclab.py / isaaclab.json (export/robot_isaaclab.py), newton.usda (export/robot_usd.py, NEWTON.DJ.001-validated,
read back through Newton's `add_usd`) and, for an MJCF or URDF robot, mjcf.xml (export/robot_mjcf.py); then
replays each through its consumer on the fit's held-out part of the log (export/robot_replay.py) and puts the
figures into the result as `replays` (and what each export noted as `exports`), as the 1-DoF fits carry theirs. A consumer that fails is reported as failed with the reason; it
never takes the fit's other outputs down. Every file's header states the verdict judged with those replays, the
one fit.json holds (export/robot_common.py `verdict_lines`), and marks what the log did not identify.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from ..datasets.recording import Recording
from ..fitting.result import RobotResult, RobotResultLike, as_robot_result
from ..fitting.robot_judge import robot_verdict
from .formats import REGISTRY, ROBOT_FORMATS, ROBOT_WRITERS, RobotArgs
from .robot_common import bias_of, joint_models, replay_log, verdict_lines
from .selection import ExportError

log = logging.getLogger(__name__)


def render_robot_exports(result: RobotResult, robot) -> tuple[dict[str, str], dict]:
    """{file name: text} of every whole-robot export this robot allows, each written by its registered
    `RobotWriter` (export/formats.py), and per consumer what it noted; every file states the fit's date."""
    texts: dict[str, str] = {}
    info: dict[str, dict] = {}
    for consumer, writer in ROBOT_WRITERS.items():
        try:
            files, notes = writer.render(RobotArgs(result, robot))
        except Exception as e:  # noqa: BLE001 - the other exports stand without it
            info[consumer] = {"status": "not written", "note": _note(e)}
            continue
        texts |= files
        info[consumer] = notes
    return texts, info


def _note(e: Exception) -> str:
    """An exception as a note in fit.json: its type and message."""
    return f"{type(e).__name__}: {e}"


def render_robot_format(
    stored: RobotResultLike,
    fmt: str,
    robot_path: str | Path | None = None,
    package_roots: tuple[Path, ...] = (),
) -> str:
    """One whole-robot export of a stored robot fit, rendered by the format's registered writer from fit.json and
    the robot model as the fit rendered its own files; an ExportError says why a format cannot be written (not a
    robot export, the model not found, or the export's own reason)."""
    from ..models.robot import RobotError, load_robot

    result = as_robot_result(stored)  # fit.json read back
    writer = REGISTRY[fmt].robot if fmt in REGISTRY else None
    if writer is None:
        raise ExportError(
            f"{fmt} is not a whole-robot export; a robot fit exports {', '.join(ROBOT_FORMATS)}"
        )
    path = Path(robot_path or str(result.robot.get("path") or "?"))
    if not path.is_file():
        raise ExportError(
            f"the fit's robot model {path} is not here: pass --robot MODEL (the file the fit used)"
        )
    try:
        robot = load_robot(path, package_roots=package_roots)  # the folders the fit read it from
    except RobotError as e:
        raise ExportError(str(e)) from None
    try:
        files, _ = writer.render(RobotArgs(result, robot))
    except Exception as e:  # noqa: BLE001 - said as the fit notes a file it did not write
        raise ExportError(f"{fmt} was not written: {_note(e)}") from None
    return files[fmt]


def _consumer(name: str, fn, say: Callable[[str], None]) -> dict:
    from .robot_replay import timed

    say(f"replaying the exports on the whole robot: {name}")
    try:
        return {"run": timed(fn)}
    except Exception as e:  # noqa: BLE001 - a replay must never take the exports down with it
        log.warning("%s replay failed: %s", name, e)
        return {"status": "failed", "note": _note(e)}


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
    for consumer, writer in ROBOT_WRITERS.items():  # each consumer replays the file it reads, if written
        if writer.replays in texts:
            run = partial(writer.replay, texts[writer.replays], robot, lg, bias, models)
            runs[consumer] = _consumer(consumer, run, say)
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
    replays (`replays`) and the verdict judged again with them. The replays judge the verdict, so the files are
    rendered once more when it changed what their headers state: every file states the verdict fit.json holds
    (as `export` of that fit.json renders it), and the replayed files differ from them in comments alone."""
    texts, info = render_robot_exports(result, robot)
    result = replace(result, exports=info)
    if replay:
        try:
            replays = replay_robot_exports(result, rec, robot, texts, progress)
        except Exception as e:  # noqa: BLE001 - the written exports stand without their replays
            log.warning("whole-robot replays failed: %s", e)
            replays = {"status": "failed", "note": _note(e)}
        result = replace(result, replays=replays)
    if result.has("validation"):  # judged again with the replays: one that did not run is not checked
        before = verdict_lines(result)
        result = replace(result, verdict=robot_verdict(result))
        if verdict_lines(result) != before:
            texts, _ = render_robot_exports(result, robot)
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
