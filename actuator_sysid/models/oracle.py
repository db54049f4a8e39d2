"""Plain PyTorch version of the rollout step, written separately from the Warp kernel.

It exists only as the test oracle: when the two disagree, one of them is wrong. Vectorised over
candidates, one segment at a time, float64 so that it is the more accurate of the two.
"""

from __future__ import annotations

import numpy as np
import torch

from . import parameters
from .components import get as component
from .components.friction_viscous_directional import STILL_VELOCITY  # the shared threshold, not maths
from .families import (
    F_DC_MOTOR,
    F_IMPLICIT,
    F_IMPLICIT_EFFORT,
    F_LOAD_DIRECTIONAL,
    F_LOAD_FRICTION,
    F_LOAD_QUADRATIC,
    F_MAX_EFFORT,
    F_OPEN_LOOP,
    F_PHYSX_FRICTION,
    F_PID,
    F_STRIBECK,
    F_TABLE,
    Family,
)
from .rollout import SegmentBatch, filled

F_VISC_DIRECTIONAL = component(
    "friction_viscous_directional"
).flag  # the flag only: the maths is written below


def _col(params: torch.Tensor, name: str) -> torch.Tensor:
    return params[:, parameters.INDEX[name]]


def _interp(q: torch.Tensor, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """Isaac Lab's LinearInterpolation (§A.6), per candidate row: ys is (C, K), xs is (K,)."""
    below = (xs[None, :] < q[:, None]).sum(dim=1)
    lb = torch.clamp(below - 1, min=0)
    ub = torch.clamp(below, max=xs.numel() - 1)
    x0, x1 = xs[lb], xs[ub]
    y0 = ys.gather(1, lb[:, None])[:, 0]
    y1 = ys.gather(1, ub[:, None])[:, 0]
    w = torch.where(
        lb == ub, torch.zeros_like(q), (q - x0) / torch.where(lb == ub, torch.ones_like(x0), x1 - x0)
    )
    return y0 + w * (y1 - y0)


def _actuator(
    flags: int,
    p: torch.Tensor,
    cmd: tuple,
    q_enc: torch.Tensor,
    qd: torch.Tensor,
    integral: torch.Tensor,
    dt: float,
    knots: torch.Tensor,
    inv_mass: torch.Tensor,
):
    """The consumer's drive and clamps (§A.3–A.6, §C.2); returns (computed, applied, new integral)."""
    q_des, qd_des, ff = cmd
    err = q_des - q_enc
    bias = ff
    if flags & F_PID:
        imax = _col(p, "integral_max")
        integral = torch.maximum(torch.minimum(integral + err * dt, imax), -imax)
        bias = bias + _col(p, "ki") * integral

    def law(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return _col(p, "stiffness") * (q_des - q) + _col(p, "damping") * (qd_des - v) + bias

    if flags & F_IMPLICIT_EFFORT:
        computed, applied = _implicit(flags, p, law, q_enc, qd, dt, inv_mass, knots)
        return computed, applied, integral
    computed = law(q_enc, qd)
    return computed, _clamps(flags, p, computed, q_enc, qd, knots), integral


def _implicit(
    flags: int,
    p: torch.Tensor,
    law,
    q: torch.Tensor,
    qd: torch.Tensor,
    h: float,
    inv_mass: torch.Tensor,
    knots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Newton's implicit effort mode (§C.2), candidate by candidate: Newton iterations on
    r(p) = p − h·g(q + h·qd(p), qd(p)), qd(p) = qd + A·p, with a backtracking line search."""

    def g(imp: torch.Tensor, rows: torch.Tensor, dq: float = 0.0, dv: float = 0.0) -> torch.Tensor:
        v = qd + inv_mass * imp + dv
        x = q + h * (qd + inv_mass * imp) + dq
        return _clamps(flags, p, law(x, v), x, v, knots)[rows]

    n = q.shape[0]
    imp = h * _clamps(flags, p, law(q, qd), q, qd, knots)
    for c in range(n):
        row = torch.tensor([c])
        pc = imp[c : c + 1].clone()

        def at(val: torch.Tensor, dq: float = 0.0, dv: float = 0.0, c: int = c, row=row) -> torch.Tensor:
            full = imp.clone()
            full[c] = val[0]
            return g(full, row, dq, dv)

        for it in range(8):
            f = at(pc)
            r = pc - h * f
            rn = float(r[0] ** 2)
            v_pred = float(qd[c] + inv_mass[c] * pc[0])
            eps = 1e-4 * (1 + abs(v_pred))
            slope = (at(pc, h * eps, eps) - f) / eps
            if it > 0 and rn < 1e-10:
                break
            jac = 1 - h * slope * inv_mass[c]
            if abs(float(jac[0])) < 1e-8:
                jac = torch.where(jac < 0, -1e-8, 1e-8)
            dp = -r / jac
            alpha, trial, accepted = 1.0, pc, False
            for _ in range(8):
                trial = pc + alpha * dp
                r_t = trial - h * at(trial)
                if it == 0 or float(r_t[0] ** 2) <= (1 - 1e-4 * alpha) * rn:
                    accepted = True
                    break
                alpha *= 0.5
            if not accepted:
                break
            pc = trial
            if float(dp[0] ** 2) < 1e-10:
                break
        imp[c] = pc[0]
    v = qd + inv_mass * imp
    x = q + h * v
    return law(x, v), _clamps(flags, p, imp / h, x, v, knots)


def _clamps(
    flags: int,
    p: torch.Tensor,
    effort: torch.Tensor,
    q_enc: torch.Tensor,
    qd: torch.Tensor,
    knots: torch.Tensor,
) -> torch.Tensor:
    """Box, DC-motor and position-table clamps in kernel order."""
    applied = effort
    elim = _col(p, "actuator_effort_limit")
    if flags & F_MAX_EFFORT:
        applied = torch.maximum(torch.minimum(applied, elim), -elim)
    if flags & F_DC_MOTOR:
        sat, vlim = _col(p, "saturation_effort"), _col(p, "actuator_velocity_limit")
        v_corner = vlim * (1 + elim / sat)
        v = torch.maximum(torch.minimum(qd, v_corner), -v_corner)
        hi = torch.minimum(sat * (1 - v / vlim), elim)
        lo = torch.maximum(sat * (-1 - v / vlim), -elim)
        applied = torch.maximum(torch.minimum(applied, hi), lo)
    if flags & F_TABLE:
        ys = torch.stack([_col(p, f"lookup_effort_{k}") for k in range(parameters.TABLE_KNOTS)], dim=1)
        lim = _interp(q_enc, knots, ys)
        applied = torch.maximum(torch.minimum(applied, lim), -lim)
    return applied


def _friction_bound(
    flags: int, p: torch.Tensor, fric: torch.Tensor, qd: torch.Tensor, motor: torch.Tensor, external
) -> torch.Tensor:
    """BAM's friction budget (docs/prior-art.md M1–M6): Coulomb + Stribeck peak + load-dependent terms."""
    s = torch.zeros_like(qd)
    bound = fric
    if flags & F_STRIBECK:
        s = torch.exp(-(torch.abs(qd / _col(p, "stribeck_velocity")) ** _col(p, "stribeck_exponent")))
        bound = bound + _col(p, "stribeck_friction") * s
    if flags & F_LOAD_FRICTION:
        if flags & F_LOAD_DIRECTIONAL:  # M5: motor-side and external-side gains apart
            gearbox = torch.abs(
                _col(p, "load_friction_external") * external - _col(p, "load_friction") * motor
            )
            gearbox_s = torch.abs(
                _col(p, "load_friction_external_stribeck") * external
                - _col(p, "load_friction_stribeck") * motor
            )
        else:  # M3/M4: one gain on the gearbox torque
            gearbox = _col(p, "load_friction") * torch.abs(external - motor)
            gearbox_s = _col(p, "load_friction_stribeck") * torch.abs(external - motor)
        bound = bound + gearbox + gearbox_s * s
        if flags & F_LOAD_QUADRATIC:  # M6, only while motor and load oppose
            motor_t = torch.as_tensor(motor, dtype=torch.float64)
            ext_t = torch.as_tensor(external, dtype=torch.float64)
            oppose = torch.sign(motor_t) != torch.sign(ext_t)
            quad = torch.where(
                ext_t.abs() < motor_t.abs(),
                _col(p, "load_friction_quadratic_external") * ext_t**2,
                torch.where(
                    ext_t.abs() > motor_t.abs(), _col(p, "load_friction_quadratic_motor") * motor_t**2, 0.0
                ),
            )
            bound = bound + torch.where(oppose, s * quad, 0.0)
    return bound


def oracle_traces(
    batch: SegmentBatch,
    family: Family,
    params: np.ndarray,
    open_loop: bool = False,
    effort_mode: str = "explicit",
) -> dict[str, np.ndarray]:
    """Simulate every candidate on every segment; returns q, qd, computed, applied as (C, N) arrays."""
    flags = (
        family.flags
        | (F_OPEN_LOOP if open_loop else 0)
        | (F_IMPLICIT_EFFORT if effort_mode == "implicit" else 0)
    )
    p_all = torch.as_tensor(params, dtype=torch.float64)
    n_c = p_all.shape[0]
    out = {k: np.zeros((n_c, batch.n_samples)) for k in ("q", "qd", "computed", "applied")}
    for s in range(batch.n_segments):
        sl = batch.segment_slice(s)
        rows = _segment_rows(
            batch, s, flags, _segment_params(batch, s, p_all[:, int(batch.seg_joint[s])], flags)
        )
        skip = (
            0 if sl.start == int(batch.seg_cmd0[s]) else 1
        )  # a later window's first sample: the window before's
        for key, seq in rows.items():
            out[key][:, sl.start + skip : sl.stop] = torch.stack(seq, dim=1).numpy()[:, skip:]
    return out


def _segment_params(batch: SegmentBatch, s: int, p: torch.Tensor, flags: int) -> torch.Tensor:
    """One segment's parameters per candidate: device gains and supply voltage scaled in, logged gains in place
    of fitted ones, and a voltage servo's envelope from kt/R = K/(vin·duty), kt²/R = D."""
    p = p.clone()
    for name, mult in (
        ("stiffness", filled(batch.seg_kp_mult)[s]),
        ("damping", filled(batch.seg_kd_mult)[s]),
        ("saturation_effort", filled(batch.seg_sat_mult)[s]),
        ("actuator_velocity_limit", filled(batch.seg_vlim_mult)[s]),
    ):
        p[:, parameters.INDEX[name]] *= float(mult)  # device gains and supply voltage of this segment
    for name, known in (("stiffness", batch.seg_kp[s]), ("damping", batch.seg_kd[s])):
        if known >= 0:  # gains the segment was recorded with replace the fitted ones
            p[:, parameters.INDEX[name]] = float(known)
    duty, max_duty, vin, imax, rmin, rmax = (
        float(filled(a)[s])
        for a in (
            batch.seg_duty,
            batch.seg_max_duty,
            batch.seg_vin,
            batch.seg_imax,
            batch.seg_rmin,
            batch.seg_rmax,
        )
    )
    if flags & F_DC_MOTOR and duty > 0:  # voltage servo
        k_s, d_s = _col(p, "stiffness").clone(), _col(p, "damping").clone()
        if rmax > 0:  # the damping within the winding's resistance range: kt²/R = R·(kt/R)²
            ktr2 = (k_s / (vin * duty)) ** 2
            d_s = torch.minimum(torch.maximum(d_s, rmin * ktr2), rmax * ktr2)
            p[:, parameters.INDEX["damping"]] = d_s
        sat = max_duty * k_s / duty
        p[:, parameters.INDEX["saturation_effort"]] = sat
        p[:, parameters.INDEX["actuator_velocity_limit"]] = sat / d_s
        if imax > 0:
            p[:, parameters.INDEX["actuator_effort_limit"]] = imax * d_s * vin * duty / k_s
    return p


def _segment_rows(batch: SegmentBatch, s: int, flags: int, p: torch.Tensor) -> dict[str, list]:
    """Segment s rolled out from its first state for every candidate: per sample q, qd, computed, applied."""
    sl = batch.segment_slice(s)
    n, n_c = sl.stop - sl.start, p.shape[0]
    seg_off = bool(batch.seg_free[s])
    enable = filled(batch.enable)[sl]
    c0 = int(batch.seg_cmd0[s])  # commands exist from c0 on, possibly before this rollout's start
    lead = sl.start - c0
    cmd_all = [
        torch.as_tensor(a[c0 : sl.stop], dtype=torch.float64)
        for a in (batch.q_des, batch.qd_des, batch.tau_ff)
    ]
    q_meas = torch.as_tensor(batch.q[sl], dtype=torch.float64)
    qd_meas = torch.as_tensor(batch.qd[sl], dtype=torch.float64)
    knots = torch.as_tensor(batch.knots[int(batch.seg_joint[s])], dtype=torch.float64)
    dt, sub = float(batch.seg_dt[s]), int(batch.seg_substeps[s])
    inertia = float(batch.seg_inertia[s]) + _col(p, "armature")
    offset = _col(p, "encoder_offset")
    delay = torch.round(_col(p, "delay")).long()

    q = float(batch.seg_q0[s]) - offset
    qd = torch.full((n_c,), float(batch.seg_qd0[s]), dtype=torch.float64)
    integral = torch.zeros(n_c, dtype=torch.float64)
    rows: dict[str, list] = {"q": [q + offset], "qd": [qd], "computed": [], "applied": []}
    for k in range(n):
        free = seg_off or not enable[k]  # this sample's torque enable governs the step to the next
        if flags & F_OPEN_LOOP:
            q, qd = q_meas[k] - offset, qd_meas[k].expand(n_c).clone()
        for r in range(sub if k < n - 1 else 1):
            idx = torch.clamp((lead + k) * sub + r - delay, min=0) // sub  # delayed command (§A.5)
            cmd = tuple(a[idx] for a in cmd_all)
            computed, applied, integral = _actuator(
                flags, p, cmd, q + offset, qd, integral, dt, knots, 1.0 / inertia
            )
            if free:  # torque disabled
                computed, applied = torch.zeros_like(computed), torch.zeros_like(applied)
            if k == n - 1:
                break
            q, qd = _joint_step(
                flags,
                p,
                q,
                qd,
                applied,
                free,
                dt,
                inertia,
                float(batch.seg_gravity[s]),
                float(batch.seg_ext[s]),
            )
        rows["computed"].append(computed)
        rows["applied"].append(applied)
        if k < n - 1:
            rows["q"].append(q + offset)
            rows["qd"].append(qd)
    return rows


def _joint_step(
    flags: int,
    p: torch.Tensor,
    q: torch.Tensor,
    qd: torch.Tensor,
    applied: torch.Tensor,
    free: bool,
    dt: float,
    inertia: torch.Tensor,
    mgl: float,
    ext: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One physics step of the joint: viscous damping (and the implicit drive's kd) implicit, Coulomb friction as
    a stopping constraint, then q += dt·qd (docs/models.md, "The plant and the solver it matches")."""
    visc, kd = _col(p, "viscous_friction"), _col(p, "damping")
    # a direction-dependent viscous coefficient: the backward one while the joint turns backwards at the step's
    # start (faster than STILL_VELOCITY: a joint the friction holds counts as forward)
    c_visc = (
        torch.where(qd < -STILL_VELOCITY, visc * _col(p, "viscous_friction_negative_ratio"), visc)
        if flags & F_VISC_DIRECTIONAL
        else visc
    )
    jt = inertia + dt * c_visc
    if flags & F_IMPLICIT and not free:  # MuJoCo implicitfast keeps the actuator's kd even when clamped
        jt = jt + dt * kd
    external = ext - mgl * torch.sin(q)
    force = applied + external - c_visc * qd
    stop = jt / dt * qd + force
    bound = _friction_bound(flags, p, _col(p, "friction"), qd, applied, external)
    if flags & F_PHYSX_FRICTION:
        friction = torch.where(stop.abs() <= bound, -stop, -torch.sign(stop) * _col(p, "dynamic_friction"))
    else:
        friction = -torch.sign(stop) * torch.minimum(stop.abs(), bound)
    qd = qd + dt * (force + friction) / jt
    return q + dt * qd, qd
