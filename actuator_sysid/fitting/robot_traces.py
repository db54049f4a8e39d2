"""A robot fit's validation traces for its report: measured vs simulated per joint on the validation span.

fitting/robot/ reports only the errors of its validation replay; the report draws the positions, so the span
is replayed once more here, with the fit, the model file's own joint terms and, where the result states one, the
decoupled fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..datasets.recording import Recording
from ..models.robot import RobotModel
from .result import RobotResult
from .robot import RobotFitOptions, prepare_fit, replay_validation

TRACE_POINTS = 600  # samples per joint drawn on the robot fit page


def fitted_values(
    groups: Mapping[str, Mapping[str, Any]],
    joints: Mapping[str, list[str]],
    bias: Mapping[str, float],
    names: list[str],
) -> dict[str, np.ndarray]:
    """Per-joint fitted values {registry name: (1, J)} from each group's values (by registry name) and joints,
    and the encoder bias."""
    index = {n: k for k, n in enumerate(names)}
    out: dict[str, np.ndarray] = {}
    for g, entry in groups.items():
        for term, v in entry.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                out.setdefault(term, np.zeros((1, len(names))))[0, [index[j] for j in joints[g]]] = v
    out["encoder_offset"] = np.array([[bias.get(n, 0.0) for n in names]])
    return out


def result_values(result: RobotResult, names: list[str]) -> dict[str, np.ndarray]:
    """A fit's own per-joint values and encoder bias as replay values (fitted_values of its groups)."""
    groups = {g: e.params() for g, e in result.groups.items()}
    joints = {g: e.joints for g, e in result.groups.items()}
    return fitted_values(groups, joints, result.encoder_bias, names)


def decoupled_values(result: RobotResult, names: list[str]) -> tuple[dict[str, np.ndarray], int] | None:
    """The decoupled fit the result states beside the coupled one (validation.decoupled_fit) as replay values and
    its delay, for replay_validation to replay as it did for the fit's errors; None without one, or with a motor
    envelope (the result keeps only the decoupled fit's joint terms, not its envelope)."""
    dec = result.validation.decoupled_fit
    if not dec or result.motor_envelope != "off":
        return None
    joints = {g: result.groups[g].joints for g in dec.groups}
    return fitted_values(dec.groups, joints, dec.encoder_bias, names), int(dec.delay_steps)


def validation_traces(
    rec: Recording, robot: RobotModel, result: RobotResult, opts: RobotFitOptions
) -> dict[str, Any]:
    """Time and, per joint, measured, commanded and simulated positions (the fit, the model file's terms, the
    decoupled fit) on the validation span, at most TRACE_POINTS samples each."""
    data, prob, _known = prepare_fit(rec, robot, opts)
    fitted = result_values(result, prob.names)
    dec = decoupled_values(result, prob.names)
    reps = replay_validation(robot, prob, data, fitted, int(result.delay_steps), opts.decimation, dec)
    (sim_fit, _), (sim_def, _) = reps[:2]
    sim_dec = reps[2][0] if dec is not None else None
    step = max(1, (data.q.shape[0] - data.split) // TRACE_POINTS)
    t = data.t[data.split :: step] - data.t[0]
    return {
        "t": t,
        "joints": {
            n: {
                "measured": data.q[data.split :: step, k],
                "commanded": data.cmd[data.split :: step, k],
                "fit": sim_fit[::step, k],
                "model_defaults": sim_def[::step, k],
                **({} if sim_dec is None else {"decoupled": sim_dec[::step, k]}),
            }
            for k, n in enumerate(prob.names)
        },
    }
