"""The one Warp rollout kernel: every family, every candidate, every segment, in one launch.

One thread simulates one (candidate, segment) pair through the whole segment; families differ only by
flags and parameter values. Formulas follow shared/spec/consumer-semantics.md section by section.
"""

from __future__ import annotations

import contextlib
import sys

import warp as wp

from .parameters import INDEX

# Warp's start-up banner and module-load lines must not pollute CLI output (quiet: Warp < 1.19)
wp.config.quiet = True
wp.config.log_level = getattr(wp, "LOG_WARNING", 30)
with contextlib.redirect_stdout(sys.stderr):
    wp.init()

P_KP = wp.constant(INDEX["stiffness"])
P_KD = wp.constant(INDEX["damping"])
P_SAT = wp.constant(INDEX["saturation_effort"])
P_VLIM = wp.constant(INDEX["actuator_velocity_limit"])
P_ELIM = wp.constant(INDEX["actuator_effort_limit"])
P_ARM = wp.constant(INDEX["armature"])
P_FRIC = wp.constant(INDEX["friction"])
P_VISC = wp.constant(INDEX["viscous_friction"])
P_DELAY = wp.constant(INDEX["delay"])


@wp.func
def dc_motor_clip(effort: float, qd: float, sat: float, vlim: float, elim: float):
    """consumer-semantics §A.4 / §C.2 four-quadrant clip with the corner velocity."""
    corner = vlim * (1.0 + elim / sat)
    v = wp.clamp(qd, -corner, corner)
    top = sat * (1.0 - v / vlim)
    bottom = sat * (-1.0 - v / vlim)
    max_eff = wp.min(top, elim)
    min_eff = wp.max(bottom, -elim)
    return wp.clamp(effort, min_eff, max_eff)


@wp.func
def actuator_effort(
    clamp_mode: int, q: float, qd: float, q_des: float, qd_des: float, tau_ff: float,
    kp: float, kd: float, sat: float, vlim: float, elim: float,
):
    """§A.3 PD law followed by the family's clamp; returns (computed, applied)."""
    computed = kp * (q_des - q) + kd * (qd_des - qd) + tau_ff
    applied = computed
    if clamp_mode == 1:  # §A.3 IdealPD box clip
        applied = wp.clamp(computed, -elim, elim)
    elif clamp_mode == 2:  # §A.4 DCMotor
        applied = dc_motor_clip(computed, qd, sat, vlim, elim)
    return wp.vec2(computed, applied)


@wp.kernel
def rollout_kernel(
    params: wp.array3d(dtype=float),  # (C, J, P) candidate parameters per joint
    seg_joint: wp.array(dtype=int),  # (S,) which joint's parameters a segment uses
    seg_start: wp.array(dtype=int),  # (S,) offset into the sample arrays
    seg_len: wp.array(dtype=int),  # (S,) samples
    seg_substeps: wp.array(dtype=int),  # (S,) physics steps per sample (decimation)
    seg_dt: wp.array(dtype=float),  # (S,) physics dt
    seg_inertia: wp.array(dtype=float),  # (S,) load inertia without armature
    seg_gravity: wp.array(dtype=float),  # (S,) m·g·l: gravity torque −m·g·l·sin q
    seg_ext: wp.array(dtype=float),  # (S,) constant external torque
    q_meas: wp.array(dtype=float),
    qd_meas: wp.array(dtype=float),
    q_des: wp.array(dtype=float),
    qd_des: wp.array(dtype=float),
    tau_ff: wp.array(dtype=float),
    clamp_mode: int,
    store: int,
    sums: wp.array3d(dtype=float),  # (C, S, 3): Σ(q−q̂)², Σ(qd−qd̂)², Σ|q−q̂|
    q_out: wp.array2d(dtype=float),  # (C, N) when store
    qd_out: wp.array2d(dtype=float),
    computed_out: wp.array2d(dtype=float),
    applied_out: wp.array2d(dtype=float),
):
    tid = wp.tid()
    n_seg = seg_start.shape[0]
    c = tid / n_seg
    s = tid - c * n_seg
    j = seg_joint[s]

    kp = params[c, j, P_KP]
    kd = params[c, j, P_KD]
    sat = params[c, j, P_SAT]
    vlim = params[c, j, P_VLIM]
    elim = params[c, j, P_ELIM]
    fric = params[c, j, P_FRIC]
    visc = params[c, j, P_VISC]
    delay = int(params[c, j, P_DELAY] + 0.5)
    inertia = seg_inertia[s] + params[c, j, P_ARM]
    mgl = seg_gravity[s]
    ext = seg_ext[s]
    dt = seg_dt[s]
    sub = seg_substeps[s]
    start = seg_start[s]
    n = seg_len[s]

    q = q_meas[start]
    qd = qd_meas[start]
    sq = float(0.0)  # noqa: UP018 (Warp: a dynamic variable mutated in the loop)
    sqd = float(0.0)  # noqa: UP018 (Warp: a dynamic variable mutated in the loop)
    sabs = float(0.0)  # noqa: UP018 (Warp: a dynamic variable mutated in the loop)
    eff = wp.vec2(0.0, 0.0)
    if store != 0:
        q_out[c, start] = q
        qd_out[c, start] = qd

    for k in range(n - 1):
        for r in range(sub):
            # §A.5 / §C.2 delay: out(p) = cmd(p − min(d, p)), counted in physics steps from segment start
            p = k * sub + r
            kc = wp.max(p - delay, 0) / sub
            i = start + kc
            eff = actuator_effort(clamp_mode, q, qd, q_des[i], qd_des[i], tau_ff[i], kp, kd, sat, vlim, elim)
            # §F plant: pendulum gravity, Coulomb friction as a stopping constraint, implicit damping
            tau = eff[1] - mgl * wp.sin(q) + ext
            tau_stop = (inertia / dt) * qd + tau
            tau_f = -wp.sign(tau_stop) * wp.min(wp.abs(tau_stop), fric)
            qd = (qd + dt * (tau + tau_f) / inertia) / (1.0 + dt * visc / inertia)
            q = q + dt * qd
        m = start + k + 1
        eq = q - q_meas[m]
        eqd = qd - qd_meas[m]
        sq += eq * eq
        sqd += eqd * eqd
        sabs += wp.abs(eq)
        if store != 0:
            q_out[c, m] = q
            qd_out[c, m] = qd
            computed_out[c, m - 1] = eff[0]
            applied_out[c, m - 1] = eff[1]

    if store != 0:
        last = start + n - 1
        kc = wp.max((n - 1) * sub - delay, 0) / sub
        i = start + kc
        eff = actuator_effort(clamp_mode, q, qd, q_des[i], qd_des[i], tau_ff[i], kp, kd, sat, vlim, elim)
        computed_out[c, last] = eff[0]
        applied_out[c, last] = eff[1]
    sums[c, s, 0] = sq
    sums[c, s, 1] = sqd
    sums[c, s, 2] = sabs
