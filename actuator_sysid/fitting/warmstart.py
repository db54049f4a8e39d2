"""Equation-error warm start: a least-squares estimate from measured motion, before any rollout.

With accelerations from smoothed velocities and the known load, the joint's equation of motion is
linear in Kp, Kd, armature, viscous and Coulomb friction; solving it gives CMA-ES a mean to start
from. Effort limits start from the largest effort the motion implies.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares, lsq_linear
from scipy.signal import savgol_filter

from ..models import parameters
from ..models.rollout import SegmentBatch


def _smooth(x: np.ndarray, dt: float, deriv: int = 0) -> np.ndarray:
    """Savitzky–Golay smoothing (~50 ms window), or its derivative.

    Every signal of the regression goes through the same linear filter, so the equation of motion
    still holds between the filtered signals while acceleration noise is suppressed.
    """
    win = max(5, int(round(0.05 / dt)) | 1)
    if x.shape[0] <= win:
        return np.gradient(x, dt, axis=0) if deriv else x
    # along the first axis: columns filter independently, and exactly as each would alone
    return savgol_filter(x, win, 2, deriv=deriv, delta=dt, axis=0)


def _segments(batch: SegmentBatch, joint: int) -> list[dict]:
    """Per segment of the joint: raw and smoothed motion, the effort the load needs, measured effort and the
    PD columns' on/gain masks. Driven segments only, unless the joint has nothing but free swings."""
    segs: list[dict] = []
    enable, kp_mult, kd_mult = batch.enable, batch.seg_kp_mult, batch.seg_kd_mult
    # SegmentBatch.__post_init__ fills them (all driven, multipliers 1) when they are not given
    assert enable is not None and kp_mult is not None and kd_mult is not None
    driven = [s for s in range(batch.n_segments) if batch.seg_joint[s] == joint and not batch.seg_free[s]]
    for s in driven or [s for s in range(batch.n_segments) if batch.seg_joint[s] == joint]:
        # free swings carry no actuator effort; they only enter when nothing else is there
        sl = batch.segment_slice(s)
        dt = float(batch.seg_dt[s] * batch.seg_substeps[s])
        q, qd = batch.q[sl].astype(float), batch.qd[sl].astype(float)
        acc = _smooth(qd, dt, deriv=1)
        f = lambda x, dt=dt: _smooth(np.asarray(x, float), dt)  # noqa: E731
        # effort the load needs: J_load·acc + m·g·l·sin q (minus feed-forward, which the PD law adds)
        load = batch.seg_inertia[s] * acc + batch.seg_gravity[s] * f(np.sin(q)) - f(batch.tau_ff[sl])
        tau = None if batch.tau is None else batch.tau[sl] - batch.tau_ff[sl]
        segs.append(
            {
                "q": q,
                "qd": qd,
                "q_des": batch.q_des[sl].astype(float),
                "qd_des": batch.qd_des[sl].astype(float),
                "acc": acc,
                "load": load,
                "tau": tau,
                "f": f,
                "sub": int(batch.seg_substeps[s]),
                # the PD columns act only where the actuator was on, scaled by the segment's device gain
                # and supply multipliers (SegmentBatch.seg_kp_mult), so kp is the reference SI stiffness
                "on_kp": enable[sl].astype(float) * float(kp_mult[s]),
                "on_kd": enable[sl].astype(float) * float(kd_mult[s]),
            }
        )
    return segs


def _regressors(segs: list[dict], measured: bool) -> dict[str, np.ndarray]:
    """The segments' signals concatenated: smoothed acc, qd and sign(qd), load effort, raw qd, the friction
    columns (armature, viscous, Coulomb: all ≥ 0) and, when measured, the effort."""
    cat = lambda key, fn=lambda x: x: np.concatenate([fn(sg[key]) for sg in segs])  # noqa: E731
    acc, qd_f = cat("acc"), np.concatenate([sg["f"](sg["qd"]) for sg in segs])
    sgn = np.concatenate([sg["f"](np.sign(sg["qd"])) for sg in segs])
    reg = {
        "acc": acc,
        "qd_f": qd_f,
        "sgn": sgn,
        "load": cat("load"),
        "qd_raw": cat("qd"),
        "friction": np.stack([-acc, -qd_f, -sgn], axis=1),
    }
    if measured:
        reg["tau"] = cat("tau")
    return reg


def _shifted(x: np.ndarray, d: int) -> np.ndarray:
    """x delayed by d samples, its first value held."""
    return x if d == 0 else np.concatenate([np.full(min(d, x.size), x[0]), x[:-d]])[: x.size]


# one block of lagged PD columns holds at most this many values (32 MB of float64 per signal)
LAGGED_VALUES = 1 << 22


def _lagged(segs: list[dict], lags: range, filtered: bool) -> tuple[np.ndarray, np.ndarray]:
    """The PD columns' errors for commands delayed by each of `lags` samples, filtered as the motion is where
    asked: (samples × lags) each, one filter call per segment and signal rather than one per lag."""

    def columns(des: str, act: str, on: str) -> np.ndarray:
        blocks = [np.stack([(_shifted(sg[des], d) - sg[act]) * sg[on] for d in lags], 1) for sg in segs]
        return np.concatenate(
            [sg["f"](m) for sg, m in zip(segs, blocks, strict=True)] if filtered else blocks
        )

    return columns("q_des", "q", "on_kp"), columns("qd_des", "qd", "on_kd")


def _pd_fit(reg: dict[str, np.ndarray], e: np.ndarray, ed: np.ndarray) -> tuple[float, tuple[float, ...]]:
    """Least-squares PD law on one delay's PD columns (`e`, `ed`: raw with measured effort, else filtered);
    returns (residual, coefficients): (kp, kd) on measured effort, else (kp, kd, armature, viscous, Coulomb) on
    the load's effort."""
    qd_raw, load, qd_f = reg["qd_raw"], reg["load"], reg["qd_f"]
    if "tau" in reg:
        # sample by sample on raw signals, leaving out clipped samples (large effort, or high speed
        # where the DC envelope bites); armature and friction follow from the filtered motion
        tau = reg["tau"]
        keep = (np.abs(tau) < 0.7 * np.percentile(np.abs(tau), 99)) & (
            np.abs(qd_raw) < 0.3 * np.abs(qd_raw).max()
        )
        keep = keep if keep.sum() >= 50 else np.ones_like(keep)
        sol = lsq_linear(np.stack([e, ed], 1)[keep], tau[keep], bounds=(0, np.inf))
        return float(sol.cost), tuple(sol.x)
    keep = (np.abs(load) < 0.7 * np.percentile(np.abs(load), 99)) & (np.abs(qd_f) < 0.3 * np.abs(qd_f).max())
    keep = keep if keep.sum() >= 50 else np.ones_like(keep)
    a_mat = np.concatenate([np.stack([e, ed], 1), reg["friction"]], axis=1)
    sol = lsq_linear(a_mat[keep], load[keep], bounds=(0, np.inf))
    return float(sol.cost), tuple(sol.x)


def _pd_and_friction(segs: list[dict], reg: dict[str, np.ndarray]) -> tuple[int, list[float], np.ndarray]:
    """(command delay in samples, [kp, kd, armature, viscous, Coulomb] with non-positive ones replaced by
    defaults, motor effort): the delay is the shift of the commands that best explains the effort (or the
    motion); with measured effort, armature and friction follow from the load minus it."""
    max_lag = int(
        min(parameters.get("delay").upper // max(segs[0]["sub"], 1), min(sg["q"].size for sg in segs) // 4)
    )
    measured = "tau" in reg
    block = max(1, LAGGED_VALUES // sum(sg["q"].size for sg in segs))
    fits: list[tuple[float, tuple[float, ...]]] = []
    for first in range(0, max_lag + 1, block):
        e, ed = _lagged(segs, range(first, min(first + block, max_lag + 1)), filtered=not measured)
        fits += [_pd_fit(reg, e[:, i], ed[:, i]) for i in range(e.shape[1])]
    lag = int(np.argmin([c for c, _ in fits]))
    if measured:
        kp, kd = fits[lag][1]
        effort = np.concatenate([sg["f"](sg["tau"]) for sg in segs])
        arm, visc, fric = (
            float(v) for v in lsq_linear(reg["friction"], reg["load"] - effort, bounds=(0, np.inf)).x
        )
    else:
        kp, kd, arm, visc, fric = fits[lag][1]
    kp = kp if kp > 0 else 10.0
    kd = kd if kd > 0 else 0.1 * np.sqrt(kp)
    arm = arm if arm > 0 else 1e-3
    visc = visc if visc > 0 else 1e-3
    fric = fric if fric > 0 else 1e-3
    motor = effort if measured else reg["load"] + arm * reg["acc"] + visc * reg["qd_f"] + fric * reg["sgn"]
    return lag, [kp, kd, arm, visc, fric], motor


def warm_start(batch: SegmentBatch, joint: int) -> dict[str, float]:
    """Initial values for every registry parameter of one joint (families take what they use).

    With measured effort: the PD law from effort on unclipped samples, then armature and friction from
    the equation of motion. Without it, the effort is inferred from the motion and the known load.
    """
    segs = _segments(batch, joint)
    reg = _regressors(segs, batch.tau is not None)
    lag, (kp, kd, arm, visc, fric), motor = _pd_and_friction(segs, reg)
    e_peak = float(np.percentile(np.abs(motor), 99)) or 1.0
    v_peak = float(np.abs(reg["qd_raw"]).max()) or 1.0
    guess = {
        "stiffness": kp,
        "damping": kd,
        "armature": arm,
        "viscous_friction": visc,
        "friction": fric,
        "actuator_effort_limit": 1.1 * e_peak,
        "saturation_effort": 2.0 * e_peak,
        "actuator_velocity_limit": 2.0 * v_peak,
        "goal_rate_limit": 2.0 * v_peak,
        "delay": float(lag * segs[0]["sub"]),
        "dynamic_friction": 0.8 * fric,
        "ki": 0.1 * kp,
        "integral_max": 1.0,
        "encoder_offset": 0.0,
        # BAM friction budget: a modest Stribeck peak at a tenth of the top speed, a few % of the load
        "stribeck_friction": 0.5 * fric,
        "stribeck_velocity": 0.1 * v_peak,
        "stribeck_exponent": 2.0,
        "load_friction": 0.05,
        "load_friction_stribeck": 0.05,
        "load_friction_external": 0.05,
        "load_friction_external_stribeck": 0.05,
        "load_friction_quadratic_motor": 1e-3,
        "load_friction_quadratic_external": 1e-3,
        **{f"lookup_effort_{k}": 1.1 * e_peak for k in range(parameters.TABLE_KNOTS)},
    }
    # a registry parameter with no guess above (a component's new term) starts at its neutral value, clipped
    guess |= {p.name: p.neutral for p in parameters.PARAMS if p.name not in guess}
    return {k: parameters.get(k).clip(v) for k, v in guess.items()}


def fit_dc_envelope(
    u: np.ndarray, y: np.ndarray, y_all: np.ndarray, u_all: np.ndarray
) -> tuple[float, float, float]:
    """(saturation effort, velocity limit, max motor effort) of the DC envelope through clipped samples: the effort
    y the motor gave against the speed u, both signed along the demand (Newton's ClampingDCMotor, upper branch);
    a robust fit (soft L1), the whole-robot fit's start for a group's envelope.
    With few clipped samples, a flat envelope just above every effort the motor gave (y_all, at speeds u_all)."""
    if y.size < 20:
        top = float(np.quantile(np.abs(y_all), 0.995))
        return 2.0 * top, 3.0 * float(np.abs(u_all).max()), top
    elim = float(np.quantile(y, 0.9))
    fast = y < 0.9 * elim
    if fast.sum() >= 5 and np.ptp(u[fast]) > 0:
        slope, sat = np.polyfit(u[fast], y[fast], 1)
        vlim = sat / -slope if slope < 0 and sat > 0 else 3.0 * float(np.abs(u).max())
    else:
        sat, vlim = 1.5 * elim, 3.0 * float(np.abs(u).max())
    sat = max(float(sat), 1.05 * elim)

    def model(p: np.ndarray) -> np.ndarray:
        s_, v_, e_ = 10.0**p
        c = v_ * (1.0 + e_ / s_)
        return np.minimum(s_ * (1.0 - np.clip(u, -c, c) / v_), e_) - y

    sol = least_squares(
        model,
        np.log10([sat, max(vlim, 1e-2), max(elim, 1e-3)]),
        loss="soft_l1",
        f_scale=max(0.02 * elim, 1e-6),
    )
    s_, v_, e_ = (float(v) for v in 10.0**sol.x)
    return s_, v_, e_
