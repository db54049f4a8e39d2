"""A whole-robot fit's RobotResult (fitting/result.py) from the search's point: the groups' values, the bounds
and the terms at one, the training record and the assumptions."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import numpy as np

from ...models.robot import RobotModel
from ..result import (
    GROUP_KEYS,
    BoundHit,
    RobotBounds,
    RobotGroup,
    RobotResult,
    RobotTraining,
    RobotValidation,
    WideBias,
)
from .data import FitData
from .options import RobotFitOptions
from .problem import DC_TERMS, OFFSET, POSITION_FRICTION, Problem

BIAS_PLAUSIBLE = 0.05  # rad; a fitted bias beyond this is flagged as absorbing model error, not a calibration
AT_BOUND = 1e-3  # a search variable within this share of its range from a bound is reported at that bound
_EFFORT_TEXT = {
    "explicit": "explicit effort (from the step's start state)",
    "implicit": "Newton's implicit effort mode (Newton's own DrivePD and clamps, solved at the predicted "
    "end-of-step state through newton.actuators.JointSpaceResponse.refresh_from_solve, the solver's inertia)",
}


def _training(data: FitData, opts: RobotFitOptions, stats: dict[str, Any]) -> RobotTraining:
    """The search's record: the training windows and the search statistics (a stat this version does not name
    is kept in `extra`)."""
    named = {f.name for f in fields(RobotTraining)}
    values: dict[str, Any] = {k: (float(v) if isinstance(v, float) else v) for k, v in stats.items()}
    return RobotTraining(
        windows=int(data.starts.size),
        window_s=float(data.length * data.dt * opts.decimation),
        **{k: v for k, v in values.items() if k in named and k not in ("extra", "key_order")},
        extra={k: v for k, v in values.items() if k not in named},
    )


def build_result(
    robot: RobotModel,
    prob: Problem,
    data: FitData,
    fitted: dict[str, np.ndarray],
    delay: int,
    delay_note: str,
    validation: RobotValidation,
    stats: dict,
    opts: RobotFitOptions,
    timing: dict[str, Any],
) -> RobotResult:
    """The fit result: groups with their values, bias, delay, sim step, validation, assumptions."""
    names, effort = prob.names, prob.effort_limit
    group_out = {}
    cut = validation.envelope_active_per_joint
    boxed = "actuator_effort_limit" in prob.terms  # a DC envelope's, or the replaced servos' force range
    for g, idx in prob.groups.items():
        at = idx[0]
        model_limit = float(effort[idx].max()) if np.all(effort[idx] < 1e6) else None
        envelope = {
            GROUP_KEYS.get(t, t): float(fitted[t][0, at]) if prob.dc_motor else None for t in DC_TERMS
        }
        group_out[g] = RobotGroup(
            joint_names_expr=prob.exprs[g],
            joints=[names[i] for i in idx],
            armature=float(fitted["armature"][0, at]),
            viscous_friction=float(fitted["viscous_friction"][0, at]),
            friction=float(fitted["friction"][0, at]),
            friction_upper=float(fitted[POSITION_FRICTION][0, at])
            if POSITION_FRICTION in prob.terms
            else None,
            stiffness=float(fitted["stiffness"][0, at]),
            damping=float(fitted["damping"][0, at]),
            effort_limit=float(fitted["actuator_effort_limit"][0, at]) if boxed else model_limit,
            saturation_effort=envelope["saturation_effort"],
            velocity_limit=envelope["velocity_limit"],
            model_effort_limit=model_limit,
            envelope_active=float(np.mean([cut[names[i]] for i in idx])),
        )
    return RobotResult(
        robot=robot.summary(),
        joint_mapping=data.how,
        groups=group_out,
        motor_envelope="dc_motor" if prob.dc_motor else "off",
        gains=prob.gains,
        bounds=bound_report(prob, fitted),
        encoder_bias={nm: float(fitted[OFFSET][0, k]) for k, nm in enumerate(names)},
        delay_steps=int(delay),
        delay=delay_note,
        sim={"dt": float(data.dt), "decimation": int(opts.decimation)},
        validation=validation,
        training=_training(data, opts, stats),
        **timing,
        effort_mode=prob.effort_mode,  # explicit or implicit (Newton's), as the 1-DoF fit's assumptions state
        bodies=_bodies_out(prob, fitted) if prob.bodies else None,
        assumptions=[
            "coupled rigid-body dynamics: Newton 1.8 SolverMuJoCo (Warp backend for batched candidates, MuJoCo C "
            "for single replays), contacts off, base fixed",
            "visuals, collision shapes and meshes skipped",
            f"PD actuator, {_EFFORT_TEXT[prob.effort_mode]} once per physics step of {data.dt:.6g} s "
            f"(log dt / {opts.decimation}), "
            + (
                "clipped by a DC-motor envelope per group (Newton's ClampingDCMotor: saturation effort, velocity "
                "limit, max motor effort), then "
                if prob.dc_motor
                else "no motor envelope (dc_motor off), "
                + (
                    "clipped at a fitted effort limit (the model's position servos' force range, replaced), "
                    if "actuator_effort_limit" in prob.terms
                    else ""
                )
            )
            + "clipped at the model's joint effort limits",
            "armature, viscous damping and frictionloss are MuJoCo's joint terms (Isaac Lab armature, "
            "viscous_friction, friction on its Newton backend)",
            "encoder bias: the encoder reads the true angle plus the bias; the PD acts on that reading",
        ],
    )


def _bodies_out(prob: Problem, fitted: dict[str, np.ndarray]) -> dict:
    """The payload bodies' fitted mass and COM beside the model's (link inertial corrections)."""
    assert prob.body_mass0 is not None and prob.body_com0 is not None
    return {
        b: {
            "mass": float(fitted["body_mass"][0, k]),
            "model_mass": float(prob.body_mass0[k]),
            "com": [float(v) for v in fitted["body_com"][0, k]],
            "model_com": [float(v) for v in prob.body_com0[k]],
            "com_fitted": prob.fit_com,
            "note": "mass (and COM) fitted, the inertia about the COM scaled with the mass; the exports do not "
            "write it: set it in the robot model",
        }
        for k, b in enumerate(prob.bodies)
    }


def bound_report(prob: Problem, fitted: dict[str, np.ndarray]) -> RobotBounds:
    """The searched terms' bounds (natural units), the terms that ended at one, and the encoder biases beyond a
    plausible calibration (BIAS_PLAUSIBLE): those absorb model error and are named, never exported silently."""
    bounds: dict[str, list[float]] = {}
    at: list[BoundHit] = []
    for g, idx in prob.groups.items():
        for t in prob.terms:
            lo, hi = prob.bound(g, t)
            key = prob.var_name(g, t)
            bounds[key] = [10**lo, 10**hi]
            x = math.log10(max(float(fitted[t][0, idx[0]]), 1e-300))
            for side, b in (("lower", lo), ("upper", hi)):
                if abs(x - b) <= AT_BOUND * (hi - lo):
                    at.append(BoundHit(term=key, value=10**x, bound=side, limit=10**b))
    if prob.bodies:
        lo_b, hi_b = prob.body_bounds()
        for k, body in enumerate(prob.bodies):
            lo, hi = lo_b[k * prob.per_body], hi_b[k * prob.per_body]
            bounds[f"{body}.mass"] = [10**lo, 10**hi]
            x = math.log10(float(fitted["body_mass"][0, k]))
            for side, lim in (("lower", lo), ("upper", hi)):
                if abs(x - lim) <= AT_BOUND * (hi - lo):
                    at.append(BoundHit(term=f"{body}.mass", value=10**x, bound=side, limit=10**lim))
    wide: list[WideBias] = []
    if prob.fit_bias:
        bb = prob.bias_bound if prob.bias_bound is not None else np.full(len(prob.names), 0.3)
        for k, nm in enumerate(prob.names):
            b, v = float(bb[k]), float(fitted[OFFSET][0, k])
            bounds[f"{nm}.bias"] = [-b, b]
            if abs(abs(v) - b) <= AT_BOUND * 2 * b:
                at.append(BoundHit(term=f"{nm}.bias", value=v, bound="upper" if v > 0 else "lower", limit=b))
            if abs(v) > BIAS_PLAUSIBLE:
                wide.append(WideBias(joint=nm, bias=v))
    notes = [
        f"{e.term} ended at its {e.bound} bound ({e.limit:.4g}): the data push it beyond the range "
        "the model and the log make plausible; treat the value as unidentified"
        for e in at
    ] + [
        f"{w.joint}: encoder bias {w.bias:+.4f} rad is beyond a plausible calibration "
        f"({BIAS_PLAUSIBLE} rad): it absorbs model error (gravity, friction or transmission the model lacks)"
        for w in wide
    ]
    return RobotBounds(
        bounds=bounds, at_bound=tuple(at), implausible_bias=tuple(wide), notes=notes, scales=prob.scales
    )
