"""What a whole-robot fit hands on: the Isaac Lab `actuators` dict, fit.json with the rendered exports on disk,
and the CLI's summary lines."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...models.robot import OWN_ACTUATOR_NOTES
from ..result import RobotGroup, RobotResult, Verdict


def has_envelope(group: RobotGroup) -> bool:
    """Whether a result group states a DC-motor envelope (a saturation effort and a finite, positive velocity
    limit): the one test the Isaac Lab dict and the USD/MJCF exports and replays pick their class by."""
    sat, vlim = group.saturation_effort, group.envelope_velocity()
    finite = [isinstance(v, int | float) and math.isfinite(v) for v in (sat, vlim)]
    return all(finite) and isinstance(vlim, int | float) and vlim > 0


def isaaclab_dict(result: RobotResult) -> dict:
    """The whole-robot `actuators={...}` dict of an ArticulationCfg, one entry per group, and `sim`."""
    delay = int(result.delay_steps)
    acts = {}
    for g, e in result.groups.items():
        dc = has_envelope(e)
        cls = (
            ("DelayedDCMotorCfg" if delay else "DCMotorCfg")
            if dc
            else ("DelayedPDActuatorCfg" if delay else "IdealPDActuatorCfg")
        )
        cfg: dict[str, Any] = {
            "class_type": cls,
            "joint_names_expr": [e.joint_names_expr],
            "stiffness": e.stiffness,
            "damping": e.damping,
            "armature": e.armature,
            "friction": e.consumer_friction(),
            "viscous_friction": e.viscous_friction,
        }
        if e.effort_limit is not None:
            cfg["actuator_effort_limit"] = e.effort_limit
        box = e.model_effort_limit  # after the envelope, the model's box clips at the smaller of the two
        if dc and isinstance(box, int | float) and box < cfg.get("actuator_effort_limit", math.inf):
            cfg["actuator_effort_limit"] = float(box)
        if dc:
            cfg["saturation_effort"] = e.saturation_effort
            cfg["actuator_velocity_limit"] = e.envelope_velocity()
        if delay:
            cfg["min_delay"] = cfg["max_delay"] = delay
        acts[g] = cfg
    note = "the encoder bias is not an Isaac Lab actuator field: add it to the measured joint positions"
    if moving := result.stroke_friction_groups:
        note += (
            f"; the friction of {', '.join(moving)} changes along the stroke, which no Isaac Lab field holds: "
            "friction is its mid-stroke value"
        )
    if delay and any(a["class_type"] == "DelayedDCMotorCfg" for a in acts.values()):
        note += (
            "; DelayedDCMotorCfg (DC envelope and delay together) is not an Isaac Lab class: it is the one "
            "the 1-DoF Isaac Lab export defines (DelayedPDActuator clipped by DCMotor's envelope)"
        )
    return {
        "actuators": acts,
        "sim": dict(result.sim),
        "encoder_bias": dict(result.encoder_bias),
        "note": note,
    }


def write_robot_fit(result: RobotResult, exports: Mapping[str, str], out: str | Path) -> list[str]:
    """Write fit.json (the whole result) and the rendered whole-robot exports ({file name: text}, export/robot.py,
    isaaclab.json among them where it was written) into `out`; the names written, fit.json first."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fit.json").write_text(json.dumps(result.to_json(), indent=2))
    for name, text in exports.items():
        (out / name).write_text(text)
    return ["fit.json", *exports]


def result_lines(result: RobotResult) -> list[str]:
    """The CLI's summary of a whole-robot fit: mapping, validation error per joint beside the model's defaults."""
    v, verdict, robot = result.validation, result.verdict or Verdict(), result.robot
    lines = [
        f"verdict: {verdict.verdict.upper()}",
        *(f"  {r}" for r in verdict.reasons),
        f"robot {robot['path']}: {len(robot['joints'])} joints, base "
        f"{robot['base']} fixed; {robot['notes'][0]}",
        *(f"  {n}" for n in robot["notes"] if n.startswith(OWN_ACTUATOR_NOTES)),
        f"joints mapped {result.joint_mapping}",
        (
            f"held-out RMSE (last {v.fraction:.0%} of the log in time, replayed from the measured state at "
            f"{v.split_time_s:.2f} s)"
            if v.split == "time"
            else f"held-out RMSE (recordings {', '.join(v.validated_recordings)}, "
            f"{(v.recordings or {}).get('method')}, each replayed whole)"
        )
        + f": {v.rmse:.4f} rad; the model file's joint terms: {v.model_defaults_rmse:.4f} rad",
    ]
    dec = v.decoupled_fit
    if dec:
        lines.append(
            f"the decoupled fit (each joint's own 1-DoF fit, before the coupled check), replayed coupled: "
            f"{dec.rmse:.4f} rad"
        )
    for nm, e in v.per_joint_rmse.items():
        lines.append(
            f"  {nm}: {e:.4f} rad (model defaults {v.model_defaults_per_joint_rmse[nm]:.4f}"
            + (f", decoupled fit {dec.per_joint_rmse[nm]:.4f})" if dec else ")")
        )
    for nm, m in (v.motion or {}).items():  # a torque-driven log's judged checks (robot/torque_check.py)
        if {"window_rmse", "window_motion", "torque_rmse", "effort_rms", "torque_r2"} <= set(m):
            lines.append(
                f"  {nm}: {m['window_s']:.3g} s windows {m['window_rmse']:.4f} rad (of {m['window_motion']:.3g} "
                f"rad moved); torque RMSE {m['torque_rmse']:.3g} N·m of {m['effort_rms']:.3g}, R² "
                f"{m['torque_r2']:.4f}; the long replay above is shown, not judged"
            )
    for note in result.bounds.notes:
        lines.append(f"  flag: {note}")
    t = result.training
    lines.append(
        f"delay {result.delay_steps} physics steps; sim dt {result.physics_dt:.6g} s, decimation "
        f"{result.decimation}; {t.jacobians} Jacobians, stopped on {t.stopped_on}; "
        f"{result.world_steps_per_s:.0f} world-steps/s; {result.wall_s:.0f} s"
    )
    return lines
