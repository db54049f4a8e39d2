"""A whole-robot fit's validation: the held-out span replayed coupled from the measured state with the fit, the
model file's own joint terms and the decoupled fit beside it, and their errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...models.robot import RobotModel
from ..coverage import robot_beyond_training
from ..result import DecoupledFit, RobotValidation
from .data import FitData, pd_effort
from .options import RobotFitOptions
from .plant import replay_coupled
from .problem import OFFSET, Problem
from .torque_check import WINDOW_S, held_out_checks, torque_driven


def replay_validation(
    robot: RobotModel,
    prob: Problem,
    data: FitData,
    fitted: dict[str, np.ndarray],
    delay: int,
    decimation: int,
    decoupled: tuple[dict[str, np.ndarray], int] | None = None,
    beside: bool = True,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The validation span replayed from the measured state at the split with the fit, with the model file's own
    joint terms (the fit's gains, no bias, no delay; unless not `beside`) and, given its (values, delay), the
    decoupled fit: each (positions, envelope-cut share per joint), in that order."""
    defaults = {
        "armature": robot.armature[None],
        "viscous_friction": robot.viscous_friction[None],
        "friction": robot.friction[None],
        "stiffness": fitted["stiffness"],
        "damping": fitted["damping"],
        OFFSET: np.zeros((1, len(prob.names))),
    }
    vals, delays = ([fitted, defaults], [delay, 0]) if beside else ([fitted], [delay])
    if decoupled is not None:
        vals.append(decoupled[0])
        delays.append(decoupled[1])
    return replay_coupled(
        robot,
        vals,
        delays,
        data.q,
        data.qd,
        data.cmd,
        data.cmd_qd,
        data.split,
        decimation,
        data.dt,
        prob.effort_limit,
        prob.effort_mode,
        data.tau_ff,
        [(a, b, int(data.first_of(np.array([a]))[0])) for a, b in data.val_pieces] or None,
        prob.body_index,
    )


def _rmse(sim: np.ndarray, meas: np.ndarray, names: list[str]) -> tuple[float, dict[str, float]]:
    """Position RMSE of a replay against the log, overall and per joint."""
    e = sim - meas
    return float(np.sqrt(np.mean(e**2))), {
        nm: float(np.sqrt(np.mean(e[:, k] ** 2))) for k, nm in enumerate(names)
    }


def validate(
    robot: RobotModel,
    prob: Problem,
    data: FitData,
    fitted: dict[str, np.ndarray],
    delay: int,
    gains_known: bool,
    opts: RobotFitOptions,
    decoupled_x: np.ndarray | None = None,
) -> RobotValidation:
    """Replay from the measured state at the split: the fit, and the model file's joint terms, per joint RMSE;
    with the decoupled search's point, that too (`decoupled_fit`), in the same replay."""
    names = prob.names
    dec = None if decoupled_x is None or not opts.judge else (prob.joint_values(decoupled_x[None]), delay)
    reps = replay_validation(robot, prob, data, fitted, delay, opts.decimation, dec, opts.judge)
    rep_fit, cut = reps[0]
    meas = data.q[data.split :]
    val, val_j = _rmse(rep_fit, meas, names)
    dval, dval_j = _rmse(reps[1][0], meas, names) if opts.judge else (None, {})
    by_time = data.recordings.get("method", "time") == "time"
    return RobotValidation(
        split="time" if by_time else "recordings",
        split_sample=int(data.split),
        split_time_s=float(data.t[data.split] - data.t[0]),
        fraction=(
            float(opts.validation_fraction)
            if by_time
            else float(data.q.shape[0] - data.split) / data.q.shape[0]
        ),
        recordings=None if by_time else data.recordings,
        rmse=val,
        per_joint_rmse=val_j,
        model_defaults_rmse=dval,
        model_defaults_per_joint_rmse=dval_j,
        model_defaults=(
            "the model file's armature, damping and frictionloss; gains "
            + ("from the log" if gains_known else "as fitted")
            + "; no delay, no encoder bias"
        )
        if opts.judge
        else "",
        replay=(
            "from the measured state at the split"
            if by_time
            else "each held-out recording whole, from its own first measured state"
        )
        + ", coupled, Newton SolverMuJoCo",
        envelope_active_per_joint={nm: float(cut[k]) for k, nm in enumerate(names)},
        beyond_training=robot_beyond_training(
            names, pd_effort(data, fitted["stiffness"][0], fitted["damping"][0]), data.qd, int(data.split)
        ),
        decoupled_fit=(
            None if dec is None else _decoupled_beside(prob, dec[0], _rmse(reps[-1][0], meas, names), delay)
        ),
    )


def _decoupled_beside(
    prob: Problem, v: dict[str, np.ndarray], errors: tuple[float, dict[str, float]], delay: int
) -> DecoupledFit:
    """The decoupled fit (each joint's own 1-DoF fit along the measured motion, at the chosen delay) and its
    errors replayed coupled over the validation span like the fit, so the report shows what coupling changed."""
    return DecoupledFit(
        rmse=errors[0],
        per_joint_rmse=errors[1],
        groups={
            g: {
                t: float(v[t][0, idx[0]])
                for t in ("armature", "viscous_friction", "friction", "stiffness", "damping")
            }
            for g, idx in prob.groups.items()
        },
        encoder_bias={nm: float(v[OFFSET][0, k]) for k, nm in enumerate(prob.names)},
        delay_steps=int(delay),
        note="each joint's own 1-DoF fit along the measured motion (Newton's joint-space inertia and "
        "coupling efforts), before any coupled refinement; replayed coupled from the split",
    )


def with_held_out_checks(
    robot: RobotModel,
    prob: Problem,
    data: FitData,
    fitted: dict[str, np.ndarray],
    delay: int,
    opts: RobotFitOptions,
    validation: RobotValidation,
) -> RobotValidation:
    """A torque-driven log's validation with its short forward windows and torque prediction in each joint's
    `motion` entry (robot/torque_check.py), the long replay kept as shown; any other log's unchanged."""
    if not torque_driven(prob, data):
        return validation
    motion = {k: dict(v) for k, v in (validation.motion or {}).items()}
    return replace(
        validation,
        motion=held_out_checks(robot, prob, data, fitted, delay, opts.decimation, motion),
        replay=validation.replay
        + f"; torque-driven (kp = kd = 0): this long replay is shown, not judged; judged are {WINDOW_S:g} s "
        "forward windows from the measured state and the torque prediction along the measured motion",
    )
