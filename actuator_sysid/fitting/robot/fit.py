"""fit_robot: a whole-robot fit from the log and the robot's model to its RobotResult (the package's docstring
says what it does); the pieces are this package's modules."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from ...datasets.recording import Recording
from ...models.robot import RobotError, RobotModel
from .. import robot_judge
from ..result import RobotResult
from .data import prepare_fit
from .jacobian import jacobian_and_initial_state_effect
from .options import RobotFitOptions
from .plant import CoupledEvaluator, DecoupledEvaluator, rms
from .problem import BIAS_UNIT
from .result import build_result
from .search import DELAY_NOTE, search_coupled, search_decoupled
from .start import equation_error_start, scan_envelope, start_point
from .validate import validate, with_held_out_checks

log = logging.getLogger(__name__)
SCAN_WINDOWS = 4  # the coupled path's gain and delay scans see at most this many training windows


def fit_robot(rec: Recording, robot: RobotModel, opts: RobotFitOptions | None = None) -> RobotResult:
    """Fit the robot's actuators to the log through coupled rollouts; returns the fit result."""
    opts = opts or RobotFitOptions()
    t_start = time.perf_counter()
    say = opts.progress or (lambda m: log.info(m))
    data, prob, gains_known = prepare_fit(rec, robot, opts)

    def evaluator(starts: np.ndarray) -> CoupledEvaluator:
        return CoupledEvaluator(
            robot,
            prob,
            data.q,
            data.qd,
            data.cmd,
            data.cmd_qd,
            starts,
            data.length,
            opts.decimation,
            data.dt,
            opts.device,
            data.tau_ff,
            data.first,
        )

    ev = evaluator(data.starts)
    if opts.search not in ("decoupled", "coupled"):
        raise RobotError(f"search {opts.search!r}: 'decoupled' or 'coupled'")
    # a payload changes the rigid-body efforts the decoupled plants are built on: its fit searches coupled
    coupled = opts.search == "coupled" or bool(prob.bodies)
    if coupled:  # the gain and delay scans see at most SCAN_WINDOWS windows spread over the training part
        pick = np.linspace(0, data.starts.size - 1, min(SCAN_WINDOWS, data.starts.size)).round().astype(int)
        ev_scan: CoupledEvaluator | DecoupledEvaluator = evaluator(data.starts[np.unique(pick)])
    else:  # every scan on the decoupled path, over every training window
        ev_scan = DecoupledEvaluator(
            robot, prob, data, data.starts, opts.decimation, np.zeros(len(prob.names)), opts.device
        )

    def spent() -> bool:
        return opts.budget_s is not None and time.perf_counter() - t_start > opts.budget_s

    delay = int(opts.delay) if opts.delay is not None else 0
    x0 = start_point(robot, prob, ev_scan, gains_known, delay, say)
    delays = np.array([delay]) if opts.delay is not None else np.arange(opts.max_delay + 1)
    ee = equation_error_start(robot, prob, data, x0, delays, opts.decimation, say) if gains_known else None
    envelope_found, start_note, starts = False, "the model file's joint terms", None
    if ee is not None:
        sc = rms(ev_scan.residuals(np.stack([x0, ee[0]]), np.array([delay, ee[1]])))
        say(
            f"start: the model file's terms {sc[0]:.4f} rad, the equation-error start {sc[1]:.4f} rad (training)"
        )
        if sc[1] < sc[0]:
            x0, delay, envelope_found, starts = ee
            start_note = "equation error along the measured motion (Newton's inverse dynamics)"
    if prob.dc_motor and not envelope_found and not spent():
        x0 = scan_envelope(prob, data, ev_scan, x0, delay, opts.decimation, say)
    delay_note = "fixed" if opts.delay is not None else "scanned"
    if isinstance(ev_scan, DecoupledEvaluator):
        x_best, delay, stats = search_decoupled(
            ev, ev_scan, x0 if starts is None else starts, delay, opts, spent, say
        )
        if opts.delay is None:
            delay_note = DELAY_NOTE
    else:
        x_best, delay, delay_note, stats = search_coupled(prob, ev, ev_scan, x0, delay, opts, spent, say)
    stats["search_s"] = time.perf_counter() - t_start
    stats["start"] = start_note
    fitted = prob.joint_values(x_best[None])
    decoupled_x = stats.pop("_decoupled_x", None)
    validation = validate(robot, prob, data, fitted, delay, gains_known, opts, decoupled_x)
    validation = replace(validation, motion=robot_judge.motion_stats(data.q[data.split :], prob.names))
    validation = with_held_out_checks(robot, prob, data, fitted, delay, opts, validation)
    if opts.judge:  # the intervals' Jacobian at the optimum and the effect of the measured initial states
        jm, r_opt, effect0 = jacobian_and_initial_state_effect(prob, ev, x_best, delay)
    world_steps = ev.world_steps + (ev_scan.world_steps if isinstance(ev_scan, CoupledEvaluator) else 0)
    coupled_s = ev.seconds + (ev_scan.seconds if isinstance(ev_scan, CoupledEvaluator) else 0.0)
    res = build_result(
        robot,
        prob,
        data,
        fitted,
        delay,
        delay_note,
        validation,
        stats,
        opts,
        {
            "wall_s": float(time.perf_counter() - t_start),
            "world_steps": int(world_steps),
            "world_steps_per_s": float(world_steps / max(coupled_s, 1e-9)),
        },
    )
    if not opts.judge:
        return res
    res = res.with_uncertainty(
        robot_judge.uncertainty(
            prob.var_names, x_best, prob.bounds(), jm, r_opt, BIAS_UNIT, (effect0, data.q[: data.split])
        )
    )
    return replace(res, verdict=robot_judge.robot_verdict(res))
