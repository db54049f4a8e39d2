"""Plain PyTorch version of the rollout step, written separately from the Warp kernel.

It exists only as the test oracle: when the two disagree, one of them is wrong. Vectorised over
candidates, one segment at a time, float64 so that it is the more accurate of the two.
"""

from __future__ import annotations

import numpy as np
import torch

from . import parameters
from .families import CLAMP_DC_MOTOR, CLAMP_MAX_EFFORT, Family
from .rollout import SegmentBatch


def _col(params: torch.Tensor, name: str) -> torch.Tensor:
    return params[:, parameters.INDEX[name]]


def _drive(family: Family, p: torch.Tensor, cmd: tuple, q: torch.Tensor, qd: torch.Tensor):
    """PD law then the family's clamp, from the consumer formulas (§A.3, §A.4); returns (computed, applied)."""
    q_des, qd_des, ff = cmd
    computed = _col(p, "stiffness") * (q_des - q) + _col(p, "damping") * (qd_des - qd) + ff
    elim = _col(p, "actuator_effort_limit")
    if family.clamp_mode == CLAMP_MAX_EFFORT:
        return computed, torch.maximum(torch.minimum(computed, elim), -elim)
    if family.clamp_mode == CLAMP_DC_MOTOR:
        sat, vlim = _col(p, "saturation_effort"), _col(p, "actuator_velocity_limit")
        v_corner = vlim * (1 + elim / sat)
        v = torch.maximum(torch.minimum(qd, v_corner), -v_corner)
        hi = torch.minimum(sat * (1 - v / vlim), elim)
        lo = torch.maximum(sat * (-1 - v / vlim), -elim)
        return computed, torch.maximum(torch.minimum(computed, hi), lo)
    return computed, computed


def oracle_traces(batch: SegmentBatch, family: Family, params: np.ndarray) -> dict[str, np.ndarray]:
    """Simulate every candidate on every segment; returns q, qd, computed, applied as (C, N) arrays."""
    p_all = torch.as_tensor(params, dtype=torch.float64)
    n_c = p_all.shape[0]
    out = {k: np.zeros((n_c, batch.n_samples)) for k in ("q", "qd", "computed", "applied")}
    for s in range(batch.n_segments):
        p = p_all[:, int(batch.seg_joint[s])]
        sl = batch.segment_slice(s)
        q_des = torch.as_tensor(batch.q_des[sl], dtype=torch.float64)
        qd_des = torch.as_tensor(batch.qd_des[sl], dtype=torch.float64)
        ff = torch.as_tensor(batch.tau_ff[sl], dtype=torch.float64)
        dt = float(batch.seg_dt[s])
        sub = int(batch.seg_substeps[s])
        inertia = float(batch.seg_inertia[s]) + _col(p, "armature")
        mgl, ext = float(batch.seg_gravity[s]), float(batch.seg_ext[s])
        fric, visc = _col(p, "friction"), _col(p, "viscous_friction")
        delay = torch.round(_col(p, "delay")).long()

        def command(k_phys: int, q_des=q_des, qd_des=qd_des, ff=ff, delay=delay, sub=sub):
            """Delayed command seen at physics step k_phys: sample index (k_phys − d) // substeps."""
            idx = torch.clamp(k_phys - delay, min=0) // sub
            return q_des[idx], qd_des[idx], ff[idx]

        q = torch.full((n_c,), float(batch.q[sl][0]), dtype=torch.float64)
        qd = torch.full((n_c,), float(batch.qd[sl][0]), dtype=torch.float64)
        qs, qds, comps, apps = [q], [qd], [], []
        n = sl.stop - sl.start
        for k in range(n):
            for r in range(sub if k < n - 1 else 1):
                computed, applied = _drive(family, p, command(k * sub + r), q, qd)
                if k == n - 1:
                    break
                torque = applied - mgl * torch.sin(q) + ext
                stop = inertia / dt * qd + torque
                friction = -torch.sign(stop) * torch.minimum(stop.abs(), fric)
                qd = (qd + dt * (torque + friction) / inertia) / (1 + dt * visc / inertia)
                q = q + dt * qd
            comps.append(computed)
            apps.append(applied)
            if k < n - 1:
                qs.append(q)
                qds.append(qd)
        for key, seq in (("q", qs), ("qd", qds), ("computed", comps), ("applied", apps)):
            out[key][:, sl] = torch.stack(seq, dim=1).numpy()
    return out
