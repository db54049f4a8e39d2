"""Equation-error warm start: a least-squares estimate from measured motion, before any rollout.

With accelerations from smoothed velocities and the known load, the joint's equation of motion is
linear in Kp, Kd, armature, viscous and Coulomb friction; solving it gives CMA-ES a mean to start
from. Effort limits start from the largest effort the motion implies.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import lsq_linear
from scipy.signal import savgol_filter

from ..models import parameters
from ..models.rollout import SegmentBatch


def _smooth(x: np.ndarray, dt: float, deriv: int = 0) -> np.ndarray:
    """Savitzky–Golay smoothing (~50 ms window), or its derivative.

    Every signal of the regression goes through the same linear filter, so the equation of motion
    still holds between the filtered signals while acceleration noise is suppressed.
    """
    win = max(5, int(round(0.05 / dt)) | 1)
    if x.size <= win:
        return np.gradient(x, dt) if deriv else x
    return savgol_filter(x, win, 2, deriv=deriv, delta=dt)


def warm_start(batch: SegmentBatch, joint: int) -> dict[str, float]:
    """Initial values for every registry parameter of one joint (families take what they use).

    With measured effort: the PD law from effort on unclipped samples, then armature and friction from
    the equation of motion. Without it, the effort is inferred from the motion and the known load.
    """
    e_l, ed_l, acc_l, qd_l, sgn_l, load_l, tau_l, raw_l = [], [], [], [], [], [], [], []
    for s in range(batch.n_segments):
        if batch.seg_joint[s] != joint:
            continue
        sl = batch.segment_slice(s)
        dt = float(batch.seg_dt[s] * batch.seg_substeps[s])
        q, qd = batch.q[sl].astype(float), batch.qd[sl].astype(float)
        acc = _smooth(qd, dt, deriv=1)
        f = lambda x, dt=dt: _smooth(np.asarray(x, float), dt)  # noqa: E731
        e_l.append(f(batch.q_des[sl] - q))
        ed_l.append(f(batch.qd_des[sl] - qd))
        acc_l.append(acc)
        qd_l.append(f(qd))
        sgn_l.append(f(np.sign(qd)))
        # effort the load needs: J_load·acc + m·g·l·sin q (minus feed-forward, which the PD law adds)
        load_l.append(batch.seg_inertia[s] * acc + batch.seg_gravity[s] * f(np.sin(q)) - f(batch.tau_ff[sl]))
        if batch.tau is not None:
            raw_l.append((batch.q_des[sl] - q, batch.qd_des[sl] - qd, batch.tau[sl] - batch.tau_ff[sl], qd))
            tau_l.append(f(batch.tau[sl] - batch.tau_ff[sl]))
    e, ed, acc, qd, sgn, load = (np.concatenate(x) for x in (e_l, ed_l, acc_l, qd_l, sgn_l, load_l))
    measured = batch.tau is not None
    effort = np.concatenate(tau_l) if measured else load
    friction_cols = np.stack([-acc, -qd, -sgn], axis=1)  # armature, viscous, Coulomb: all ≥ 0
    if measured:
        # the PD law sample by sample on raw signals, leaving out clipped samples (large effort, or
        # high speed where the DC envelope bites); then armature and friction from filtered motion
        e_r, ed_r, tau_r, qd_r = (np.concatenate(x) for x in zip(*raw_l, strict=True))
        keep = (np.abs(tau_r) < 0.7 * np.percentile(np.abs(tau_r), 99)) & (np.abs(qd_r) < 0.3 * np.abs(qd_r).max())
        keep = keep if keep.sum() >= 50 else np.ones_like(keep)
        kp, kd = (float(v) for v in lsq_linear(np.stack([e_r, ed_r], 1)[keep], tau_r[keep], bounds=(0, np.inf)).x)
        arm, visc, fric = (float(v) for v in lsq_linear(friction_cols, load - effort, bounds=(0, np.inf)).x)
    else:
        keep = (np.abs(load) < 0.7 * np.percentile(np.abs(load), 99)) & (np.abs(qd) < 0.3 * np.abs(qd).max())
        keep = keep if keep.sum() >= 50 else np.ones_like(keep)
        a_mat = np.concatenate([np.stack([e, ed], 1), friction_cols], axis=1)
        kp, kd, arm, visc, fric = (float(v) for v in lsq_linear(a_mat[keep], load[keep], bounds=(0, np.inf)).x)
    kp = kp if kp > 0 else 10.0
    kd = kd if kd > 0 else 0.1 * np.sqrt(kp)
    arm = arm if arm > 0 else 1e-3
    visc = visc if visc > 0 else 1e-3
    fric = fric if fric > 0 else 1e-3
    motor = effort if measured else load + arm * acc + visc * qd + fric * sgn
    e_peak = float(np.percentile(np.abs(motor), 99)) or 1.0
    v_peak = float(np.abs(qd).max()) or 1.0
    guess = {
        "stiffness": kp, "damping": kd, "armature": arm, "viscous_friction": visc, "friction": fric,
        "actuator_effort_limit": 1.1 * e_peak, "saturation_effort": 2.0 * e_peak,
        "actuator_velocity_limit": 2.0 * v_peak, "delay": 0.0,
        "dynamic_friction": 0.8 * fric, "ki": 0.1 * kp, "integral_max": 1.0, "encoder_offset": 0.0,
        **{f"lookup_effort_{k}": 1.1 * e_peak for k in range(parameters.TABLE_KNOTS)},
    }
    return {k: parameters.get(k).clip(v) for k, v in guess.items()}
