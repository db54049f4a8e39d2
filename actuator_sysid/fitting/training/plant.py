"""The differentiable plant the nets step in the loop, batched rollouts, and the nets' inputs on the log."""

from __future__ import annotations

import numpy as np
import torch

from ...models.networks import (
    RECURRENT,
    NetSpec,
    NetStepper,
    as_recurrent,
    channels,
    mlp_input,
    recurrent_core,
)
from .data import JointData
from .options import NetFitError

# --- plant and rollouts ---


def rollout(
    stepper: NetStepper,
    q0: torch.Tensor,
    qd0: torch.Tensor,
    q_des: torch.Tensor,
    inertia: torch.Tensor,
    mgl: torch.Tensor,
    ext: torch.Tensor,
    on: torch.Tensor,
    dt: torch.Tensor,
    substeps: int,
    measured: tuple[torch.Tensor, torch.Tensor] | None = None,
    forced: int | None = None,
    cmd: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Step B lanes through T samples: the net's effort, then the §F plant (no joint terms), `substeps`
    physics steps per sample with the command held. `on` (B, T) is 1 where the actuator's torque is enabled
    (0: it applies none, the net still runs). With `measured` (q, qd) the net sees the log (open loop): at
    every sample, or at the first `forced` ones (a carried history), closed loop after them. `cmd` (B, T, 4):
    the drive's COMMANDS per sample, for a net that reads them.

    Returns q, qd, applied of shape (B, T); q[:, 0] is the initial state.
    """
    q, qd = q0, qd0
    qs, qds, taus = [], [], []
    n = q_des.shape[1]
    for k in range(n):
        if measured is not None and (forced is None or k < forced):
            q, qd = measured[0][:, k], measured[1][:, k]
        qs.append(q)
        qds.append(qd)
        for r in range(substeps if k < n - 1 else 1):
            _, applied = stepper.step(q_des[:, k], q, qd, None if cmd is None else cmd[:, k])
            applied = applied * on[:, k]
            if r == 0:
                taus.append(applied)
            if k == n - 1:
                break
            qd = qd + dt * (applied - mgl * torch.sin(q) + ext) / inertia
            q = q + dt * qd
    return {"q": torch.stack(qs, 1), "qd": torch.stack(qds, 1), "applied": torch.stack(taus, 1)}


def _lanes(data: JointData, ids: list[int]) -> dict[str, torch.Tensor]:
    col = lambda name: torch.tensor([getattr(data, name)[i] for i in ids], dtype=torch.float32)  # noqa: E731
    return {
        "inertia": col("inertia"),
        "mgl": col("mgl"),
        "ext": col("ext"),
        "dt": col("dt"),
        "gain": col("gain"),
    }


def simulate_segments(
    spec: NetSpec, net: torch.nn.Module, data: JointData, substeps: int, open_loop: bool = False
) -> list[dict[str, np.ndarray]]:
    """Each segment rolled out from its first logged state with a freshly reset net (Isaac Lab reset); a segment
    with a carried history runs it on the log first and is returned from the sample after it (its own first).
    Segments of one length and one carried history step together as lanes of one rollout (the per-sample loop
    is the cost), each lane its own segment's."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i in range(len(data.names)):
        groups.setdefault((int(data.q[i].shape[0]), data.carried[i]), []).append(i)
    out: dict[int, dict[str, np.ndarray]] = {}
    with torch.no_grad():
        for (_n, carried), ids in groups.items():
            lanes = _lanes(data, ids)
            stepper = NetStepper(spec, net, len(ids), pos_gain=lanes["gain"])
            q = torch.stack([data.q[i] for i in ids])
            qd = torch.stack([data.qd[i] for i in ids])
            meas = (q, qd) if open_loop or carried else None
            tr = rollout(
                stepper,
                q[:, 0],
                qd[:, 0],
                torch.stack([data.q_des[i] for i in ids]),
                lanes["inertia"],
                lanes["mgl"],
                lanes["ext"],
                torch.stack([data.on[i] for i in ids]),
                lanes["dt"],
                substeps,
                meas,
                None if open_loop else carried + 1,
                torch.stack([data.cmd[i] for i in ids]),
            )
            for lane, i in enumerate(ids):
                out[i] = {k: v[lane, carried:].numpy().astype(np.float64) for k, v in tr.items()}
    return [out[i] for i in range(len(data.names))]


RECURRENT_CARRY = 200  # samples of a time split's training part an LSTM / GRU runs before the validation part


def history_carry(spec: NetSpec, substeps: int) -> int:
    """Samples of history a net takes across a time split: its MLP history, or RECURRENT_CARRY to warm its
    state up."""
    return RECURRENT_CARRY if spec.kind in RECURRENT else max(spec.input_idx) // substeps


def _lags(spec: NetSpec, substeps: int) -> list[int]:
    bad = [i for i in spec.input_idx if i % substeps]
    if bad:
        raise NetFitError(
            f"input_idx {spec.input_idx} counts physics steps; with decimation {substeps} the log "
            f"has a sample every {substeps} steps, so every index must be a multiple of {substeps}"
        )
    return [i // substeps for i in spec.input_idx]


def seg_channels(spec: NetSpec, data: JointData, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Segment i's unscaled input channels on the log: position error (times its gain), the velocity channel
    (T,) and the further channels (T, C − 2), as NetStepper computes them."""
    return channels(spec, data.q_des[i] - data.q[i], data.qd[i], data.cmd[i], data.gain[i])


def _mlp_table(spec: NetSpec, data: JointData, substeps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(features, torque) of every sample with a full history, scaled as the network sees them."""
    lags = _lags(spec, substeps)
    h = max(lags)
    xs, ys = [], []
    for i, (q, tau, free, on, carried) in enumerate(
        zip(data.q, data.torques(), data.free, data.on, data.carried, strict=True)
    ):
        if free or q.shape[0] <= h:
            continue
        err, vel, extra = seg_channels(spec, data, i)
        n = q.shape[0]
        # (B, H) histories whose columns are the lags themselves (commands: (B, C − 2, H))
        full_pos = torch.zeros(n - h, spec.history_length)
        full_vel = torch.zeros(n - h, spec.history_length)
        full_cmd = torch.zeros(n - h, extra.shape[1], spec.history_length)
        for lag, col in zip(lags, spec.input_idx, strict=True):
            full_pos[:, col] = err[h - lag : n - lag]
            full_vel[:, col] = vel[h - lag : n - lag]
            full_cmd[:, :, col] = extra[h - lag : n - lag]
        driven = on[h:] > 0  # where the torque was off the actuator applied none: nothing to learn there
        driven &= torch.arange(h, n) >= carried  # a carried history is input only
        xs.append(mlp_input(spec, full_pos, full_vel, full_cmd)[driven])
        ys.append(tau[h:][driven])
    if not xs:
        raise NetFitError("no segment is long enough for the network's input history (or all are free swing)")
    return torch.cat(xs), torch.cat(ys)


def _set_scales(spec: NetSpec, data: JointData) -> None:
    """Input scales 1 / std of each channel (a gain: 1 / its RMS, its spread across runs may be small), torque
    scale its std."""
    parts = [seg_channels(spec, data, i) for i in range(len(data.names))]
    err, vel = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    tau = torch.cat(data.tau) if data.tau else torch.ones(1)
    spec.pos_scale = float(1.0 / max(float(err.std()), 1e-4))
    spec.vel_scale = float(1.0 / max(float(vel.std()), 1e-4))
    spec.torque_scale = float(max(float(tau.std()), 1e-4))
    extra = torch.cat([p[2] for p in parts])
    for c, name in enumerate(spec.inputs[2:]):
        col = extra[:, c]
        spread = float(torch.sqrt(torch.mean(col**2))) if name in ("kp", "kd") else float(col.std())
        spec.command_scales[name] = float(1.0 / max(spread, 1e-4))


def raw_inputs(spec: NetSpec, data: JointData, i: int) -> torch.Tensor:
    """(T, C) raw input channels of segment i, as an LSTM / GRU takes them (its scales are inside)."""
    err, vel, extra = seg_channels(spec, data, i)
    return torch.cat([err[:, None], vel[:, None], extra], 1)


def _rnn_sequences(
    spec: NetSpec, data: JointData, length: int, stride: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x (B, T, C) raw [gain·(q_des − q), qd, commands…], tau (B, T), torque-enabled mask (B, T)) windows over
    the segments."""
    xs, ts, ms = [], [], []
    for i, (q, tau, free, on, carried) in enumerate(
        zip(data.q, data.torques(), data.free, data.on, data.carried, strict=True)
    ):
        if free:
            continue
        on = on * (torch.arange(q.shape[0]) >= carried)  # a carried history is input only
        n = q.shape[0]
        starts = list(range(0, max(n - length, 0) + 1, stride)) if n >= length else []
        x = raw_inputs(spec, data, i)
        for s in starts:
            xs.append(x[s : s + length])
            ts.append(tau[s : s + length])
            ms.append(on[s : s + length])
    if not xs:
        raise NetFitError(f"no segment holds {length} samples for the recurrent net's training sequences")
    return torch.stack(xs), torch.stack(ts), torch.stack(ms)


def _rnn_forward(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Torque of every step of (B, T, C) sequences from a zero state: the same maths as stepping one at a time."""
    rnn = as_recurrent(net)
    y, _ = recurrent_core(rnn)(x * rnn.in_scale)
    return rnn.linear(y)[..., 0] * rnn.out_scale


def _masked_mse(err: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of err² where mask is 1 (the torque-enabled samples); 0 when none is."""
    return torch.sum(err**2 * mask) / torch.clamp(mask.sum(), min=1.0)
