"""Plain PyTorch version of the rollout step, written separately from the Warp kernel.

It exists only as the test oracle: when the two disagree, one of them is wrong. Vectorised over
candidates, one segment at a time, float64 so that it is the more accurate of the two.
"""

from __future__ import annotations

import numpy as np
import torch

from . import parameters
from .families import (
    F_DC_MOTOR,
    F_IMPLICIT,
    F_MAX_EFFORT,
    F_OPEN_LOOP,
    F_PHYSX_FRICTION,
    F_PID,
    F_TABLE,
    Family,
)
from .rollout import SegmentBatch


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
    w = torch.where(lb == ub, torch.zeros_like(q), (q - x0) / torch.where(lb == ub, torch.ones_like(x0), x1 - x0))
    return y0 + w * (y1 - y0)


def _actuator(flags: int, p: torch.Tensor, cmd: tuple, q_enc: torch.Tensor, qd: torch.Tensor,
              integral: torch.Tensor, dt: float, knots: torch.Tensor):
    """The consumer's drive and clamps (§A.3–A.6, §C.2); returns (computed, applied, new integral)."""
    q_des, qd_des, ff = cmd
    err = q_des - q_enc
    computed = _col(p, "stiffness") * err + _col(p, "damping") * (qd_des - qd) + ff
    if flags & F_PID:
        imax = _col(p, "integral_max")
        integral = torch.maximum(torch.minimum(integral + err * dt, imax), -imax)
        computed = computed + _col(p, "ki") * integral
    applied = computed
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
    return computed, applied, integral


def oracle_traces(batch: SegmentBatch, family: Family, params: np.ndarray, open_loop: bool = False
                  ) -> dict[str, np.ndarray]:
    """Simulate every candidate on every segment; returns q, qd, computed, applied as (C, N) arrays."""
    flags = family.flags | (F_OPEN_LOOP if open_loop else 0)
    p_all = torch.as_tensor(params, dtype=torch.float64)
    n_c = p_all.shape[0]
    out = {k: np.zeros((n_c, batch.n_samples)) for k in ("q", "qd", "computed", "applied")}
    for s in range(batch.n_segments):
        j = int(batch.seg_joint[s])
        p = p_all[:, j]
        sl = batch.segment_slice(s)
        n = sl.stop - sl.start
        cmd_all = [torch.as_tensor(a[sl], dtype=torch.float64) for a in (batch.q_des, batch.qd_des, batch.tau_ff)]
        q_meas = torch.as_tensor(batch.q[sl], dtype=torch.float64)
        qd_meas = torch.as_tensor(batch.qd[sl], dtype=torch.float64)
        knots = torch.as_tensor(batch.knots[j], dtype=torch.float64)
        dt, sub = float(batch.seg_dt[s]), int(batch.seg_substeps[s])
        inertia = float(batch.seg_inertia[s]) + _col(p, "armature")
        mgl, ext = float(batch.seg_gravity[s]), float(batch.seg_ext[s])
        kd, visc = _col(p, "damping"), _col(p, "viscous_friction")
        fric, dfric = _col(p, "friction"), _col(p, "dynamic_friction")
        offset = _col(p, "encoder_offset")
        delay = torch.round(_col(p, "delay")).long()

        q = q_meas[0] - offset
        qd = qd_meas[0].expand(n_c).clone()
        integral = torch.zeros(n_c, dtype=torch.float64)
        rows = {k: [] for k in out}
        rows["q"].append(q + offset)
        rows["qd"].append(qd)
        for k in range(n):
            if flags & F_OPEN_LOOP:
                q, qd = q_meas[k] - offset, qd_meas[k].expand(n_c).clone()
            for r in range(sub if k < n - 1 else 1):
                idx = torch.clamp(k * sub + r - delay, min=0) // sub  # delayed command (§A.5)
                cmd = tuple(a[idx] for a in cmd_all)
                computed, applied, integral = _actuator(flags, p, cmd, q + offset, qd, integral, dt, knots)
                if k == n - 1:
                    break
                jt = inertia + dt * visc
                if flags & F_IMPLICIT:  # MuJoCo implicitfast keeps the actuator's kd even when clamped
                    jt = jt + dt * kd
                force = applied - mgl * torch.sin(q) + ext - visc * qd
                stop = jt / dt * qd + force
                if flags & F_PHYSX_FRICTION:
                    friction = torch.where(stop.abs() <= fric, -stop, -torch.sign(stop) * dfric)
                else:
                    friction = -torch.sign(stop) * torch.minimum(stop.abs(), fric)
                qd = qd + dt * (force + friction) / jt
                q = q + dt * qd
            rows["computed"].append(computed)
            rows["applied"].append(applied)
            if k < n - 1:
                rows["q"].append(q + offset)
                rows["qd"].append(qd)
        for key, seq in rows.items():
            out[key][:, sl] = torch.stack(seq, dim=1).numpy()
    return out
