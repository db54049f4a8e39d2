"""The teacher that decides a robot fit's gains and bias: a richer fit no consumer runs stands for the plant.

Each configuration the selection allows, and the teacher, replay the training commands played faster from the
first measured state; robot_select keeps the configuration nearest the teacher's replay.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..datasets.recording import Recording
from ..models.robot import RobotModel
from .result import RobotResult
from .robot import RobotFitOptions, prepare_fit
from .robot.plant import replay_coupled
from .robot_traces import result_values

# the gains and the bias by a teacher (one training recording): a richer fit no consumer runs (the bias within
# its bound, friction along the stroke, physics TEACHER_FINE × finer, a finer delay grid; fitted with the log's
# gains and with fitted gains, the fitted followed where it lowers the training RMSE by robot_select's
# GAINS_MARGIN) stands for the plant; the configuration whose replay of the training commands played
# TEACHER_SPEED × faster lies nearest the teacher's replay is kept. Faster playback asks what use asks beyond the
# training band: higher speed and frequency, where a gain, a bias or a delay that only fit the training band's
# lag part ways with the plant
TEACHER_SPEED = 3
TEACHER_FINE = 2


def teacher_changes(opts: RobotFitOptions, bias_limit: float) -> dict:
    """The teacher's options beside its gains: the bias within `bias_limit`, friction along the stroke, physics
    TEACHER_FINE × finer than the fit's (a delay between two of the fit's steps lands on its grid)."""
    return {
        "fit_bias": True,
        "bias_limit": bias_limit,
        "position_friction": True,
        "decimation": opts.decimation * TEACHER_FINE,
    }


def teacher_distance(
    train: Recording,
    robot: RobotModel,
    opts: RobotFitOptions,
    fits: dict[str, RobotResult],
    teacher: RobotResult,
    speed: int = TEACHER_SPEED,
) -> dict[str, float]:
    """Each fit's position RMSE from the teacher's, each replayed from the training part's first measured state
    on its commands played `speed` × faster (every `speed`-th sample at the log's rate; the velocity targets
    scaled to match), the teacher at its own physics rate (teacher_candidate)."""
    data, prob, _ = prepare_fit(train, robot, dataclasses.replace(opts, holdout=None, progress=None))
    cmd, cmd_qd, tau_ff = data.cmd[::speed], data.cmd_qd[::speed] * speed, data.tau_ff[::speed]
    q, qd = (np.repeat(x[:1], cmd.shape[0], axis=0) for x in (data.q, data.qd))
    dt_log = data.dt * opts.decimation

    def replay(res: RobotResult, decimation: int) -> np.ndarray:
        ((pos, _),) = replay_coupled(
            robot,
            [result_values(res, prob.names)],
            [int(res.delay_steps)],
            q,
            qd,
            cmd,
            cmd_qd,
            0,
            decimation,
            dt_log / decimation,
            prob.effort_limit,
            prob.effort_mode,
            tau_ff,
            bodies=prob.body_index,
        )
        return pos

    ref = replay(teacher, opts.decimation * TEACHER_FINE)
    return {
        name: float(np.sqrt(np.mean(np.nan_to_num(replay(f, opts.decimation) - ref, nan=1.0) ** 2)))
        for name, f in fits.items()
    }
