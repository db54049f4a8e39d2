"""The one Warp rollout kernel: every family, every candidate, every segment, in one launch.

One thread simulates one (candidate, segment) pair through the whole segment; families differ only by
flag bits and parameter values. Formulas follow docs/consumer-semantics.md section by section.
"""

from __future__ import annotations

import contextlib
import sys

import warp as wp

from . import families as fam
from .components import get as component
from .components.friction_viscous_directional import STILL_VELOCITY
from .parameters import INDEX, TABLE_KNOTS

# Warp's start-up banner and module-load lines must not pollute CLI output (quiet: Warp < 1.19 only)
if hasattr(wp.config, "quiet"):
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
P_DFRIC = wp.constant(INDEX["dynamic_friction"])
P_VISC = wp.constant(INDEX["viscous_friction"])
P_STRIBECK = wp.constant(INDEX["stribeck_friction"])
P_STRIBECK_V = wp.constant(INDEX["stribeck_velocity"])
P_STRIBECK_A = wp.constant(INDEX["stribeck_exponent"])
P_LOAD_FRIC = wp.constant(INDEX["load_friction"])
P_LOAD_FRIC_S = wp.constant(INDEX["load_friction_stribeck"])
P_LOAD_FRIC_E = wp.constant(INDEX["load_friction_external"])
P_LOAD_FRIC_ES = wp.constant(INDEX["load_friction_external_stribeck"])
P_LOAD_QUAD_M = wp.constant(INDEX["load_friction_quadratic_motor"])
P_LOAD_QUAD_E = wp.constant(INDEX["load_friction_quadratic_external"])
P_DELAY = wp.constant(INDEX["delay"])
P_KI = wp.constant(INDEX["ki"])
P_IMAX = wp.constant(INDEX["integral_max"])
P_OFFSET = wp.constant(INDEX["encoder_offset"])
P_TABLE = wp.constant(INDEX["lookup_effort_0"])
P_VISC_NEG_RATIO = wp.constant(INDEX["viscous_friction_negative_ratio"])
P_GOAL_RATE = wp.constant(INDEX["goal_rate_limit"])
RATE_OF_THE_LOG = wp.constant(1.0e30)  # a goal_rate_limit at or over this (its neutral inf) is the log's own
N_KNOTS = wp.constant(TABLE_KNOTS)

F_MAX_EFFORT = wp.constant(fam.F_MAX_EFFORT)
F_DC_MOTOR = wp.constant(fam.F_DC_MOTOR)
F_TABLE = wp.constant(fam.F_TABLE)
F_PID = wp.constant(fam.F_PID)
F_PHYSX_FRICTION = wp.constant(fam.F_PHYSX_FRICTION)
F_IMPLICIT = wp.constant(fam.F_IMPLICIT)
F_OPEN_LOOP = wp.constant(fam.F_OPEN_LOOP)
F_IMPLICIT_EFFORT = wp.constant(fam.F_IMPLICIT_EFFORT)
F_STRIBECK = wp.constant(fam.F_STRIBECK)
F_LOAD_FRICTION = wp.constant(fam.F_LOAD_FRICTION)
F_LOAD_DIRECTIONAL = wp.constant(fam.F_LOAD_DIRECTIONAL)
F_LOAD_QUADRATIC = wp.constant(fam.F_LOAD_QUADRATIC)
F_VISC_DIRECTIONAL = wp.constant(component("friction_viscous_directional").flag)
F_GOAL_RATE = wp.constant(component("servo_goal").flag)
QD_STILL = wp.constant(STILL_VELOCITY)  # rad/s: a joint the friction holds counts as turning forwards

# Newton ImplicitOptions defaults (effort_mode_implicit.py)
IMPLICIT_MAX_ITERS = wp.constant(8)
IMPLICIT_LS_ITERS = wp.constant(8)
IMPLICIT_TOL = wp.constant(1.0e-5)
IMPLICIT_FD_EPS = wp.constant(1.0e-4)
IMPLICIT_FLOOR = wp.constant(1.0e-8)
IMPLICIT_DECREASE = wp.constant(1.0e-4)


@wp.func
def dc_motor_clip(effort: float, qd: float, sat: float, vlim: float, elim: float):
    """§A.4 / §C.2 four-quadrant clip with the corner velocity."""
    corner = vlim * (1.0 + elim / sat)
    v = wp.clamp(qd, -corner, corner)
    max_eff = wp.min(sat * (1.0 - v / vlim), elim)
    min_eff = wp.max(sat * (-1.0 - v / vlim), -elim)
    return wp.clamp(effort, min_eff, max_eff)


@wp.func
def table_limit(q: float, knots: wp.array2d(dtype=float), params: wp.array3d(dtype=float), c: int, j: int):
    """§A.6 LinearInterpolation: lb = clamp(#(x < q) − 1, 0), ub = clamp(#(x < q), K − 1), ends held."""
    below = int(0)
    for k in range(N_KNOTS):
        if knots[j, k] < q:
            below += 1
    lb = wp.max(below - 1, 0)
    ub = wp.min(below, N_KNOTS - 1)
    y0 = params[c, j, P_TABLE + lb]
    y1 = params[c, j, P_TABLE + ub]
    w = float(0.0)
    if lb != ub:
        w = (q - knots[j, lb]) / (knots[j, ub] - knots[j, lb])
    return y0 + w * (y1 - y0)


@wp.func
def clamp_chain(
    flags: int,
    effort: float,
    q: float,
    qd: float,
    sat: float,
    vlim: float,
    elim: float,
    knots: wp.array2d(dtype=float),
    params: wp.array3d(dtype=float),
    c: int,
    j: int,
):
    """The family's clamps in kernel order: box (§A.3, §A.10), DC motor (§A.4), position table (§A.6)."""
    applied = effort
    if (flags & F_MAX_EFFORT) != 0:
        applied = wp.clamp(applied, -elim, elim)
    if (flags & F_DC_MOTOR) != 0:
        applied = dc_motor_clip(applied, qd, sat, vlim, elim)
    if (flags & F_TABLE) != 0:
        lim = table_limit(q, knots, params, c, j)
        applied = wp.clamp(applied, -lim, lim)
    return applied


@wp.func
def implicit_effort(
    flags: int,
    q: float,
    qd: float,
    inv_mass: float,
    h: float,
    q_des: float,
    qd_des: float,
    bias: float,
    kp: float,
    kd: float,
    sat: float,
    vlim: float,
    elim: float,
    knots: wp.array2d(dtype=float),
    params: wp.array3d(dtype=float),
    c: int,
    j: int,
):
    """Newton's implicit effort mode for one DoF (§C.2, effort_mode_implicit.py): solve for the impulse p with
    r(p) = p − h·g(q(p), qd(p)) = 0, qd(p) = qd + A·p, q(p) = q + h·qd(p), by Newton iterations with a
    forward-difference slope and a backtracking line search, warm-started at the explicit impulse.
    `bias` is the feed-forward plus any integral term. Returns (computed at the final state, applied)."""
    p = h * clamp_chain(
        flags, kp * (q_des - q) + kd * (qd_des - qd) + bias, q, qd, sat, vlim, elim, knots, params, c, j
    )
    for it in range(IMPLICIT_MAX_ITERS):
        qd_p = qd + inv_mass * p
        q_p = q + h * qd_p
        f = clamp_chain(
            flags,
            kp * (q_des - q_p) + kd * (qd_des - qd_p) + bias,
            q_p,
            qd_p,
            sat,
            vlim,
            elim,
            knots,
            params,
            c,
            j,
        )
        r = p - h * f
        rn = r * r
        eps = IMPLICIT_FD_EPS * (1.0 + wp.abs(qd_p))
        f_eps = clamp_chain(
            flags,
            kp * (q_des - q_p - h * eps) + kd * (qd_des - qd_p - eps) + bias,
            q_p + h * eps,
            qd_p + eps,
            sat,
            vlim,
            elim,
            knots,
            params,
            c,
            j,
        )
        slope = (f_eps - f) / eps
        if it > 0 and rn < IMPLICIT_TOL * IMPLICIT_TOL:
            break
        jac = 1.0 - h * slope * inv_mass
        if wp.abs(jac) < IMPLICIT_FLOOR:
            jac = wp.where(jac < 0.0, -IMPLICIT_FLOOR, IMPLICIT_FLOOR)
        dp = -r / jac
        alpha = float(1.0)
        accepted = int(0)
        trial = p
        for _ls in range(IMPLICIT_LS_ITERS):
            trial = p + alpha * dp
            qd_t = qd + inv_mass * trial
            q_t = q + h * qd_t
            f_t = clamp_chain(
                flags,
                kp * (q_des - q_t) + kd * (qd_des - qd_t) + bias,
                q_t,
                qd_t,
                sat,
                vlim,
                elim,
                knots,
                params,
                c,
                j,
            )
            r_t = trial - h * f_t
            if it == 0 or r_t * r_t <= (1.0 - IMPLICIT_DECREASE * alpha) * rn:
                accepted = 1
                break
            alpha = alpha * 0.5
        if accepted == 0:
            break
        p = trial
        if dp * dp < IMPLICIT_TOL * IMPLICIT_TOL:
            break
    qd_p = qd + inv_mass * p
    q_p = q + h * qd_p
    computed = kp * (q_des - q_p) + kd * (qd_des - qd_p) + bias
    return wp.vec2(computed, clamp_chain(flags, p / h, q_p, qd_p, sat, vlim, elim, knots, params, c, j))


@wp.func
def friction_budget(
    flags: int,
    fric: float,
    qd: float,
    motor: float,
    external: float,
    params: wp.array3d(dtype=float),
    c: int,
    j: int,
):
    """docs/prior-art.md BAM M1–M6 friction budget τ_fm: Coulomb, + Stribeck peak Kcs·s (M2),
    + Kl·|τ_m − τ_e| (M3), + Kls·s·|τ_m − τ_e| (M4), s = exp(−|qd/q̇_s|^α); M5 splits each load gain
    into motor and external sides, |Kle·τ_e − Kl·τ_m|; M6 adds s·Kq·(the smaller torque)² while they oppose."""
    budget = fric
    s = float(0.0)
    if (flags & F_STRIBECK) != 0:
        s = wp.exp(-wp.pow(wp.abs(qd / params[c, j, P_STRIBECK_V]), params[c, j, P_STRIBECK_A]))
        budget = budget + params[c, j, P_STRIBECK] * s
    if (flags & F_LOAD_FRICTION) != 0:
        kl = params[c, j, P_LOAD_FRIC]
        kls = params[c, j, P_LOAD_FRIC_S]
        kle = kl
        kles = kls
        if (flags & F_LOAD_DIRECTIONAL) != 0:
            kle = params[c, j, P_LOAD_FRIC_E]
            kles = params[c, j, P_LOAD_FRIC_ES]
        budget = budget + wp.abs(kle * external - kl * motor) + s * wp.abs(kles * external - kls * motor)
        if (flags & F_LOAD_QUADRATIC) != 0 and motor * external < 0.0:
            if wp.abs(external) < wp.abs(motor):  # the motor drives: the external torque's square
                budget = budget + s * params[c, j, P_LOAD_QUAD_E] * external * external
            elif wp.abs(external) > wp.abs(motor):  # the load drives: the motor torque's square
                budget = budget + s * params[c, j, P_LOAD_QUAD_M] * motor * motor
    return budget


@wp.func
def viscous_coefficient(flags: int, visc: float, qd: float, params: wp.array3d(dtype=float), c: int, j: int):
    """The joint's viscous coefficient this step: viscous_friction, times viscous_friction_negative_ratio while the
    joint turns backwards (qd < −QD_STILL at the step's start; models/components/friction_viscous_directional.py)."""
    if (flags & F_VISC_DIRECTIONAL) != 0 and qd < -QD_STILL:
        return visc * params[c, j, P_VISC_NEG_RATIO]
    return visc


@wp.kernel
def rollout_kernel(
    params: wp.array3d(dtype=float),  # (C, J, P) candidate parameters per joint
    knots: wp.array2d(dtype=float),  # (J, K) table positions per joint
    seg_joint: wp.array(dtype=int),  # (S,) which joint's parameters a segment uses
    seg_start: wp.array(dtype=int),  # (S,) offset into the sample arrays
    seg_len: wp.array(dtype=int),  # (S,) samples
    seg_substeps: wp.array(dtype=int),  # (S,) physics steps per sample (decimation)
    seg_dt: wp.array(dtype=float),  # (S,) physics dt
    seg_inertia: wp.array(dtype=float),  # (S,) load inertia without armature
    seg_gravity: wp.array(dtype=float),  # (S,) m·g·l: gravity torque −m·g·l·sin q
    seg_ext: wp.array(dtype=float),  # (S,) constant external torque
    seg_cmd0: wp.array(dtype=int),  # (S,) first sample with a command: a window sees commands before it
    seg_free: wp.array(dtype=int),  # (S,) 1 where the actuator was off (torque disabled): free swing
    seg_kp: wp.array(dtype=float),  # (S,) gains the segment was recorded with, or −1: use the fitted ones
    seg_kd: wp.array(dtype=float),
    seg_q0: wp.array(dtype=float),  # (S,) initial measured position
    seg_qd0: wp.array(dtype=float),  # (S,) initial velocity
    q_meas: wp.array(dtype=float),
    qd_meas: wp.array(dtype=float),
    q_des: wp.array(dtype=float),
    qd_des: wp.array(dtype=float),
    tau_ff: wp.array(dtype=float),
    enable: wp.array(
        dtype=int
    ),  # (N,) 1 where the actuator was driven at that sample, 0 where torque was off
    seg_kp_mult: wp.array(
        dtype=float
    ),  # (S,) stiffness multiplier: device kp_s / kp_ref, supply vin_s / vin_ref
    seg_kd_mult: wp.array(dtype=float),
    seg_sat_mult: wp.array(
        dtype=float
    ),  # (S,) saturation effort and velocity limit multipliers: vin_s / vin_ref
    seg_vlim_mult: wp.array(dtype=float),
    seg_duty: wp.array(
        dtype=float
    ),  # (S,) voltage servo: duty per rad of error at this kp (0: envelope not tied)
    seg_max_duty: wp.array(dtype=float),
    seg_vin: wp.array(dtype=float),  # (S,) supply [V]
    seg_imax: wp.array(dtype=float),  # (S,) firmware current limit [A], 0: none
    seg_rmin: wp.array(dtype=float),  # (S,) winding resistance range [Ω] of the voltage servo, 0: none
    seg_rmax: wp.array(dtype=float),
    seg_goal_rate: wp.array(dtype=float),  # (S,) the servo law's setpoint slew-rate limit [rad/s], 0: none
    flags: int,
    store: int,
    sums: wp.array3d(dtype=float),  # (C, S, 3): Σ(q−q̂)², Σ(qd−qd̂)², Σ|q−q̂|
    q_out: wp.array2d(dtype=float),  # (C, N) when store: measured-frame q (true q + encoder offset)
    qd_out: wp.array2d(dtype=float),
    computed_out: wp.array2d(dtype=float),
    applied_out: wp.array2d(dtype=float),
):
    tid = wp.tid()
    n_seg = seg_start.shape[0]
    c = tid / n_seg
    s = tid - c * n_seg
    j = seg_joint[s]

    kp = params[c, j, P_KP] * seg_kp_mult[s]  # the fitted SI gain at the reference operating point, scaled
    kd = params[c, j, P_KD] * seg_kd_mult[s]
    if seg_kp[s] >= 0.0:  # a known quantity of this segment sits beside the fitted ones
        kp = seg_kp[s]
    if seg_kd[s] >= 0.0:
        kd = seg_kd[s]
    ki = params[c, j, P_KI]
    imax = params[c, j, P_IMAX]
    sat = params[c, j, P_SAT] * seg_sat_mult[s]
    vlim = params[c, j, P_VLIM] * seg_vlim_mult[s]
    elim = params[c, j, P_ELIM]
    if (flags & F_DC_MOTOR) != 0 and seg_duty[s] > 0.0:
        # voltage servo: τ = (kt/R)·vin·clip(duty) − (kt²/R)·qd, |I| ≤ I_max, with kt/R = kp / (vin·duty) and
        # kt²/R the damping: the envelope follows from the gains (VoltageServo in models/rollout.py); the damping
        # stays within the winding's resistance range, kt²/R = R·(kt/R)²
        if seg_rmax[s] > 0.0:
            ktr = kp / (seg_vin[s] * seg_duty[s])
            kd = wp.clamp(kd, seg_rmin[s] * ktr * ktr, seg_rmax[s] * ktr * ktr)
        sat = seg_max_duty[s] * kp / seg_duty[s]
        vlim = sat / kd
        if seg_imax[s] > 0.0:
            elim = seg_imax[s] * kd * seg_vin[s] * seg_duty[s] / kp
    fric = params[c, j, P_FRIC]
    dfric = params[c, j, P_DFRIC]
    visc = params[c, j, P_VISC]
    offset = params[c, j, P_OFFSET]
    delay = int(params[c, j, P_DELAY] + 0.5)
    inertia = seg_inertia[s] + params[c, j, P_ARM]
    mgl = seg_gravity[s]
    ext = seg_ext[s]
    dt = seg_dt[s]
    sub = seg_substeps[s]
    start = seg_start[s]
    cmd0 = seg_cmd0[s]
    seg_off = seg_free[s] != 0
    n = seg_len[s]
    open_loop = (flags & F_OPEN_LOOP) != 0
    # models/components/servo_goal.py: the firmware's goal moves toward the command at most `rate`; a fitted rate
    # replaces the law's. It starts at the segment's first measured position and runs on the delayed command, so a
    # window replays the commands before it to know its goal
    rate = seg_goal_rate[s]
    if (flags & F_GOAL_RATE) != 0:
        fitted_rate = params[c, j, P_GOAL_RATE]
        if fitted_rate < RATE_OF_THE_LOG:  # the term's neutral value (inf) runs the segment's own rate
            rate = fitted_rate
    slewing = rate > 0.0
    goal = q_meas[cmd0]
    if slewing:
        for step in range((start - cmd0) * sub):
            i_goal = cmd0 + wp.max(step - delay, 0) / sub
            goal = wp.clamp(q_des[i_goal], goal - rate * dt, goal + rate * dt)

    q = seg_q0[s] - offset  # true joint position; the encoder reads q + offset
    qd = seg_qd0[s]
    integral = float(0.0)
    sq = float(0.0)
    sqd = float(0.0)
    sabs = float(0.0)
    computed = float(0.0)
    applied = float(0.0)
    eff = wp.vec2(0.0, 0.0)
    # a window's first sample is the previous window's last one: only a segment's first window writes it,
    # so every trace sample has exactly one writer
    first = start == cmd0
    if store != 0 and first:
        q_out[c, start] = q + offset
        qd_out[c, start] = qd

    for k in range(n):
        # torque disabled for the whole segment, or at this sample (its enable governs the step to the next)
        free = seg_off or enable[start + k] == 0
        if open_loop:
            q = q_meas[start + k] - offset
            qd = qd_meas[start + k]
        n_sub = sub
        if k == n - 1:
            n_sub = 1  # the last sample only reports the effort at the final state
        for r in range(n_sub):
            # §A.5 / §C.2 delay of targets and feed-forward: out(p) = cmd(p − min(d, p)) in physics steps
            i = cmd0 + wp.max((start - cmd0 + k) * sub + r - delay, 0) / sub
            q_ctrl = q + offset
            q_goal = q_des[i]
            if slewing:
                goal = wp.clamp(q_des[i], goal - rate * dt, goal + rate * dt)
                q_goal = goal
            err = q_goal - q_ctrl
            # §A.3 PD law; §C.2 PID with the integral updated before use and clamped
            bias = tau_ff[i]
            if (flags & F_PID) != 0:
                integral = wp.clamp(integral + err * dt, -imax, imax)
                bias = bias + ki * integral
            computed = kp * err + kd * (qd_des[i] - qd) + bias
            if (flags & F_IMPLICIT_EFFORT) != 0:  # §C.2 effort at the predicted end-of-step state
                eff = implicit_effort(
                    flags,
                    q_ctrl,
                    qd,
                    1.0 / inertia,
                    dt,
                    q_goal,
                    qd_des[i],
                    bias,
                    kp,
                    kd,
                    sat,
                    vlim,
                    elim,
                    knots,
                    params,
                    c,
                    j,
                )
                computed = eff[0]
                applied = eff[1]
            else:  # explicit: the clamps at the current (measured) state
                applied = clamp_chain(flags, computed, q_ctrl, qd, sat, vlim, elim, knots, params, c, j)
            if free:  # torque disabled: only the joint terms and the load act
                computed = 0.0
                applied = 0.0
            if k == n - 1:
                break
            # §F plant. Forces at the current state; velocity-proportional terms (joint damping, and the
            # solver's own PD damping for the implicit drive, as MuJoCo's implicitfast does, even while the
            # force is clamped) are integrated implicitly through the effective inertia jt. Friction is a
            # stopping constraint.
            visc_q = viscous_coefficient(
                flags, visc, qd, params, c, j
            )  # by direction, when the family says so
            jt = inertia + dt * visc_q
            if (flags & F_IMPLICIT) != 0 and not free:
                jt = jt + dt * kd
            external = ext - mgl * wp.sin(q)
            force = applied + external - visc_q * qd
            tau_stop = (jt / dt) * qd + force
            # the friction bound: Coulomb `friction`, or BAM's budget with Stribeck / load terms
            budget = friction_budget(flags, fric, qd, applied, external, params, c, j)
            tau_f = float(0.0)
            if (flags & F_PHYSX_FRICTION) != 0:  # stick below the static threshold, slide at dynamic
                if wp.abs(tau_stop) <= budget:
                    tau_f = -tau_stop
                else:
                    tau_f = -wp.sign(tau_stop) * dfric
            else:  # MuJoCo frictionloss as Newton applies joint_friction
                tau_f = -wp.sign(tau_stop) * wp.min(wp.abs(tau_stop), budget)
            qd = qd + dt * (force + tau_f) / jt
            q = q + dt * qd
        if store != 0 and (k > 0 or first):
            computed_out[c, start + k] = computed
            applied_out[c, start + k] = applied
        if k < n - 1:
            m = start + k + 1
            eq = q + offset - q_meas[m]
            eqd = qd - qd_meas[m]
            sq += eq * eq
            sqd += eqd * eqd
            sabs += wp.abs(eq)
            if store != 0:
                q_out[c, m] = q + offset
                qd_out[c, m] = qd
    sums[c, s, 0] = sq
    sums[c, s, 1] = sqd
    sums[c, s, 2] = sabs
