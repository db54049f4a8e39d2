"""Training a net: supervised on torque, in the loop through the plant, early stopping on an inner split."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

from ...models.networks import (
    ActuatorMLP,
    NetSpec,
    NetStepper,
    as_recurrent,
    recurrent_core,
)
from ..objective import VELOCITY_WEIGHT
from .data import JointData
from .options import NetFitError, NetOptions
from .plant import (
    _lanes,
    _masked_mse,
    _mlp_table,
    _rnn_forward,
    _rnn_sequences,
    history_carry,
    raw_inputs,
    rollout,
    seg_channels,
)


class _Stopper:
    """Keeps the best weights by validation loss; says when patience has run out."""

    def __init__(self, net: torch.nn.Module, patience: int) -> None:
        self.net, self.patience = net, patience
        self.best, self.best_epoch = math.inf, -1
        self.state: dict[str, torch.Tensor] | None = None

    def __call__(self, epoch: int, loss: float) -> bool:
        if loss < self.best * (1 - 1e-4):
            self.best, self.best_epoch = loss, epoch
            self.state = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
        return epoch - self.best_epoch >= self.patience

    def restore(self) -> None:
        if self.state is not None:
            self.net.load_state_dict(self.state)


MIN_STEPS = 8  # optimiser steps an epoch of recurrent training aims for, however small the log


def _past(deadline: float | None) -> bool:
    """Whether the fit's wall-clock budget (a time.perf_counter() instant) has run out."""
    return deadline is not None and time.perf_counter() >= deadline


def _stopped_on(out_of_time: bool, patience_ran_out: bool) -> str:
    return "budget" if out_of_time else "early_stopping" if patience_ran_out else "epochs"


def _fold_centre(spec: NetSpec, net: torch.nn.Module, mu_in: torch.Tensor, mu_out: float) -> None:
    """Fold the training's centring into the net, which then takes raw (uncentred) inputs as the consumers feed
    them: the input means (MLP: of its scaled features; LSTM / GRU: of the raw channels) into the first layer's
    bias, the torque mean (network units) into the output bias. Exact: the layers are affine in both."""
    with torch.no_grad():
        if isinstance(net, ActuatorMLP):
            first, last = net.net[0], net.net[-1]
            assert isinstance(first, torch.nn.Linear) and isinstance(last, torch.nn.Linear)
            first.bias.sub_(first.weight @ mu_in)
        else:
            rnn = as_recurrent(net)
            core, last = recurrent_core(rnn), rnn.linear
            w = core.get_parameter("weight_ih_l0")
            core.get_parameter("bias_ih_l0").sub_(w @ (mu_in * rnn.in_scale))
        last.bias.add_(mu_out)


def _rnn_data(spec: NetSpec, train: JointData, val: JointData, opts: NetOptions):
    """The recurrent net's training and inner-validation sequences (x, y, mask) and its burn-in; the training
    sequences watched where the inner split has none long enough."""
    active = [q.shape[0] for q, f in zip(train.q, train.free, strict=True) if not f]
    length = min(opts.lstm_window, max(active, default=0))
    if length < 4:
        raise NetFitError(
            f"the {spec.kind.upper()} needs training segments (not free swing) of at least 4 samples"
        )
    seqs = _rnn_sequences(spec, train, length, max(length // 2, 1))
    b0 = min(opts.burn_in, length // 2)
    vlen = min([length] + [q.shape[0] for q, f in zip(val.q, val.free, strict=True) if not f])
    try:
        if vlen <= b0 + 1:
            raise NetFitError("inner split too short")
        vseqs = _rnn_sequences(spec, val, vlen, vlen)
        if not float(vseqs[2][:, b0:].sum()):
            raise NetFitError("no scored sample in the inner split's windows")
    except NetFitError:
        vseqs = seqs
    return seqs, vseqs, b0


def train_supervised(
    spec: NetSpec,
    net: torch.nn.Module,
    train: JointData,
    val: JointData,
    opts: NetOptions,
    substeps: int,
    report: Callable[[int, float], None],
    deadline: float | None = None,
) -> dict:
    """Fit torque (measured or inverse-dynamics) by Adam with early stopping; returns the training record.

    Past `deadline` (perf_counter) the epoch ends after its current batch, is validated, and training stops
    with the best weights so far (stopped_on "budget")."""
    opt = torch.optim.Adam(net.parameters(), lr=opts.lr)
    stop = _Stopper(net, opts.patience)
    t0, seen, epoch = time.perf_counter(), 0, 0
    late = patient = False
    if spec.kind == "mlp":
        x, y = _mlp_table(spec, train, substeps)
        try:
            xv, yv = _mlp_table(spec, val, substeps)
        except NetFitError:  # no validation segment (or none long enough): watch the training loss
            xv, yv = x, y
        # trained on centred features and torque, folded into the first and last biases after (_fold_centre)
        mu_in, mu_out = x.mean(0), float(y.mean()) / spec.torque_scale
        x, xv = x - mu_in, xv - mu_in
        y_n, yv_n = y / spec.torque_scale - mu_out, yv / spec.torque_scale - mu_out
        gen = torch.Generator().manual_seed(0)
        for epoch in range(opts.epochs):
            perm = torch.randperm(x.shape[0], generator=gen)
            for b in range(0, x.shape[0], opts.batch_size):
                idx = perm[b : b + opts.batch_size]
                loss = torch.mean((net(x[idx])[:, 0] - y_n[idx]) ** 2)
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen += idx.numel()
                if late := _past(deadline):
                    break
            with torch.no_grad():
                vloss = float(torch.mean((net(xv)[:, 0] - yv_n) ** 2))
            report(epoch, vloss)
            if (patient := stop(epoch, vloss)) or late:
                break
    else:
        (x, y, m), (xv, yv, mv), b0 = _rnn_data(spec, train, val, opts)
        # trained on centred raw inputs and torque, folded into the input and output biases after (_fold_centre)
        mu_in = x.reshape(-1, x.shape[-1]).mean(0)
        mu_tau = float((y * m).sum() / m.sum().clamp(min=1.0))
        mu_out = mu_tau / float(as_recurrent(net).out_scale)
        x, xv, y, yv = x - mu_in, xv - mu_in, y - mu_tau, yv - mu_tau
        gen = torch.Generator().manual_seed(0)
        # sequences per step: batch_size / 16, fewer on a small log so that an epoch takes MIN_STEPS steps or so
        batch = max(4, min(opts.batch_size // 16, x.shape[0] // MIN_STEPS))
        for epoch in range(opts.epochs):
            perm = torch.randperm(x.shape[0], generator=gen)
            for b in range(0, x.shape[0], batch):
                idx = perm[b : b + batch]
                pred = _rnn_forward(net, x[idx])
                loss = _masked_mse(((pred - y[idx]) / spec.torque_scale)[:, b0:], m[idx][:, b0:])
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen += idx.numel() * (x.shape[1] - b0)
                if late := _past(deadline):
                    break
            with torch.no_grad():
                vloss = float(
                    _masked_mse(((_rnn_forward(net, xv) - yv) / spec.torque_scale)[:, b0:], mv[:, b0:])
                )
            report(epoch, vloss)
            if (patient := stop(epoch, vloss)) or late:
                break
    stop.restore()
    _fold_centre(spec, net, mu_in, mu_out)
    secs = time.perf_counter() - t0
    return {
        "epochs": epoch + 1,
        "best_epoch": stop.best_epoch + 1,
        "validation_loss": stop.best,
        "samples_seen": seen,
        "seconds": round(secs, 3),
        "samples_per_s": round(seen / max(secs, 1e-9), 1),
        "stopped_on": _stopped_on(late, patient),
    }


def _windows(data: JointData, length: int, substeps: int, spec: NetSpec, ids: list[int] | None = None):
    """In-the-loop rollout windows of one length (the shorter of `length` and the shortest segment), sharing
    boundary samples and covering every segment to its end: start states, commands, targets and the MLP
    history before each start."""
    segs = [i for i in (ids if ids is not None else range(len(data.names))) if not data.free[i]]
    segs = segs or list(ids if ids is not None else range(len(data.names)))
    t = min([length] + [data.q[i].shape[0] for i in segs])
    if t < 3:
        raise NetFitError(f"in-the-loop training needs segments of at least 3 samples; the shortest has {t}")
    rows = []
    for i in segs:
        n = data.q[i].shape[0]
        starts = list(range(0, n - t + 1, t - 1))
        if starts[-1] + t < n:  # the tail: one more window that ends with the segment
            starts.append(n - t)
        rows += [(i, w0, w0 + t) for w0 in starts]
    h = spec.history_length
    pos_h, vel_h = torch.zeros(len(rows), h), torch.zeros(len(rows), h)
    cmd_h = torch.zeros(len(rows), spec.n_channels - 2, h)
    seg = {i: seg_channels(spec, data, i) for i in {i for i, _, _ in rows}}
    for r, (i, w0, _) in enumerate(rows):
        for c in range(h):  # column c: the step c+1 physics steps before the first one pushed
            k = w0 - math.ceil((c + 1) / substeps)
            if k >= 0:
                pos_h[r, c], vel_h[r, c], cmd_h[r, :, c] = seg[i][0][k], seg[i][1][k], seg[i][2][k]
    pick = lambda a: torch.stack([a[i][w0 : w0 + t] for i, w0, _ in rows])  # noqa: E731
    lanes = _lanes(data, [i for i, _, _ in rows])
    return {
        "q": pick(data.q),
        "qd": pick(data.qd),
        "q_des": pick(data.q_des),
        "on": pick(data.on),
        "pos_h": pos_h,
        "vel_h": vel_h,
        "cmd_h": cmd_h,
        "cmd": pick(data.cmd),
        "rows": rows,
        **lanes,
    }


def _window_loss(
    spec: NetSpec,
    net: torch.nn.Module,
    w: dict,
    substeps: int,
    sq: float,
    sqd: float,
    burn: int,
    data: JointData,
) -> torch.Tensor:
    stepper = NetStepper(spec, net, w["q"].shape[0], pos_gain=w["gain"])
    if spec.kind == "mlp":
        stepper.reset(w["pos_h"], w["vel_h"], w["cmd_h"])
    elif burn:
        with torch.no_grad():  # truncated BPTT: the LSTM / GRU state comes from the log before the window
            xs = []
            for i, w0, _ in w["rows"]:
                s = max(0, w0 - burn)
                seq = raw_inputs(spec, data, i)[s:w0]
                xs.append(torch.cat([torch.zeros(burn - (w0 - s), spec.n_channels), seq]))
            _, stepper.state = recurrent_core(net)(
                torch.stack(xs) * as_recurrent(net).in_scale, stepper.state
            )
    tr = rollout(
        stepper,
        w["q"][:, 0],
        w["qd"][:, 0],
        w["q_des"],
        w["inertia"],
        w["mgl"],
        w["ext"],
        w["on"],
        w["dt"],
        substeps,
        cmd=w["cmd"],
    )
    eq = (tr["q"][:, 1:] - w["q"][:, 1:]) / sq
    eqd = (tr["qd"][:, 1:] - w["qd"][:, 1:]) / sqd
    return torch.mean(eq**2) + VELOCITY_WEIGHT * torch.mean(eqd**2)


def _segment_loss(
    spec: NetSpec, net: torch.nn.Module, data: JointData, substeps: int, sq: float, sqd: float
) -> float:
    """The reported metric's loss: whole segments rolled out closed loop from their first state, freshly reset
    net, batched (shorter segments padded with their last command and masked)."""
    n = max(q.shape[0] for q in data.q)
    pad = lambda a: torch.stack([torch.cat([x, x[-1:].expand(n - x.shape[0])]) for x in a])  # noqa: E731
    mask = torch.stack(
        [
            (torch.arange(n) < q.shape[0]) & (torch.arange(n) >= c)
            for q, c in zip(data.q, data.carried, strict=True)
        ]
    )[:, 1:]
    lanes = _lanes(data, list(range(len(data.names))))
    q, qd = pad(data.q), pad(data.qd)
    carried = max(data.carried, default=0)  # lanes with less history run closed loop later than they could
    with torch.no_grad():
        tr = rollout(
            NetStepper(spec, net, q.shape[0], pos_gain=lanes["gain"]),
            q[:, 0],
            qd[:, 0],
            pad(data.q_des),
            lanes["inertia"],
            lanes["mgl"],
            lanes["ext"],
            pad(data.on),
            lanes["dt"],
            substeps,
            (q, qd) if carried else None,
            carried + 1,
            torch.stack([torch.cat([x, x[-1:].expand(n - x.shape[0], -1)]) for x in data.cmd]),
        )
    e = ((tr["q"][:, 1:] - q[:, 1:]) / sq) ** 2 + VELOCITY_WEIGHT * ((tr["qd"][:, 1:] - qd[:, 1:]) / sqd) ** 2
    loss = float(e[mask].mean())
    return loss if math.isfinite(loss) else math.inf


def train_in_loop(
    spec: NetSpec,
    net: torch.nn.Module,
    train: JointData,
    val: JointData,
    opts: NetOptions,
    substeps: int,
    report: Callable[[int, float], None],
    deadline: float | None = None,
) -> dict:
    """Truncated BPTT through batched differentiable plant rollouts over windows; early stopping on the
    validation segments rolled out whole (what the fit reports), checked every EVAL_EVERY epochs and once more
    when `deadline` (perf_counter) passes, which stops training with the best weights so far."""
    sq = max(float(torch.cat(train.q).std()), 1e-3)
    sqd = max(float(torch.cat(train.qd).std()), 1e-3)
    wt = _windows(train, opts.window, substeps, spec)
    burn = opts.burn_in if spec.kind == "lstm" else 0
    lr = opts.in_loop_lr or opts.lr / (3 if spec.kind == "mlp" else 30)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    stop = _Stopper(net, max(opts.patience // EVAL_EVERY, 2) * EVAL_EVERY)
    watched = val if val.names else train
    initial = _segment_loss(spec, net, watched, substeps, sq, sqd)
    stop(-1, initial)
    t0, seen, epoch = time.perf_counter(), 0, 0
    late, patient = _past(deadline), False  # no time left at all: the pretrained weights, unchanged
    for epoch in range(0 if late else opts.in_loop_epochs):
        loss = _window_loss(spec, net, wt, substeps, sq, sqd, burn, train)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        seen += wt["q"].numel() * substeps
        late = _past(deadline)
        if (epoch + 1) % EVAL_EVERY and epoch + 1 < opts.in_loop_epochs and not late:
            continue
        vloss = _segment_loss(spec, net, watched, substeps, sq, sqd)
        report(epoch, vloss)
        if (patient := stop(epoch, vloss)) or late:
            break
    stop.restore()
    secs = time.perf_counter() - t0
    return {
        "in_loop_initial_loss": initial,
        "in_loop_epochs": epoch + 1 if seen else 0,
        "in_loop_best_epoch": stop.best_epoch + 1,
        "in_loop_validation_loss": stop.best,
        "in_loop_steps_seen": seen,
        "in_loop_seconds": round(secs, 3),
        "in_loop_steps_per_s": round(seen / max(secs, 1e-9), 1),
        "window_samples": opts.window,
        "in_loop_stopped_on": _stopped_on(late, patient),
    }


EVAL_EVERY = 10  # in-the-loop epochs between validation rollouts of whole segments

# --- one joint, one kind ---


WHOLE_INNER = 6  # driven training segments from which early stopping watches whole ones (fewer: cut in time)


def inner_split(data: JointData, fraction: float, carry: int) -> tuple[JointData, JointData]:
    """The training data split for early stopping: with WHOLE_INNER or more driven training segments, `fraction` of
    them (rounded up; whole, evenly spaced) watch it, as the fit's own validation segments would; with fewer, each one is cut
    in time, its last `fraction` (starting with `carry` samples of history from before the cut) watching, the
    rest training. Segments too short to cut, and free-swing ones, train whole."""
    driven = [i for i in range(len(data.names)) if not data.free[i]]
    if fraction > 0 and len(driven) >= WHOLE_INNER:
        k = max(1, math.ceil(fraction * len(driven) - 1e-9))  # one of 7 watched alone proved too noisy
        held = {driven[j] for j in np.linspace(0, len(driven) - 1, k + 2)[1:-1].round().astype(int)}
        rest = [i for i in range(len(data.names)) if i not in held]
        return data.subset(rest), data.subset(sorted(held))
    fit, inner = [], []
    for i in range(len(data.names)):
        n = data.q[i].shape[0]
        cut = n - int(round(fraction * n))
        if data.free[i] or cut < 8 or n - cut < 8:
            fit.append(data.subset([i]))
            continue
        fit.append(data.cut(i, 0, cut, min(data.carried[i], cut)))
        c = min(carry, cut)
        inner.append(data.cut(i, cut - c, n, c))
        inner[-1].names[0] = f"{data.names[i]}@inner"
    return JointData.joined(fit), JointData.joined(inner)


def _train(
    spec: NetSpec,
    net: torch.nn.Module,
    train: JointData,
    opts: NetOptions,
    substeps: int,
    mode: str,
    label: str,
    progress: Callable[[float, str], None] | None,
    deadline: float | None,
) -> dict:
    """Torque pretraining, then (in the loop) closed-loop training; the training record of both phases. Early
    stopping watches an inner split of `train` (inner_split), never the fit's reported validation."""
    # the inner part's history: the MLP's, or an LSTM / GRU's burn-in (its windows warm up as in training)
    carry = history_carry(spec, substeps) if spec.kind == "mlp" else opts.burn_in
    train, val = inner_split(train, opts.inner_fraction, carry)

    def report(phase: str, span: tuple[float, float], total: int):
        def f(epoch: int, loss: float) -> None:
            if progress:
                progress(
                    span[0] + (span[1] - span[0]) * min((epoch + 1) / total, 1.0),
                    f"{label}: {phase} epoch {epoch + 1}, validation loss {loss:.4g}",
                )

        return f

    split = (0.0, 1.0) if mode == "torque" else (0.0, 0.3)
    pretrain = deadline
    if deadline is not None and mode == "in_the_loop":
        now = time.perf_counter()
        pretrain = now + 0.3 * max(deadline - now, 0.0)
    training = {
        "mode": mode,
        "torque_source": "measured" if mode == "torque" else "inverse dynamics of the load",
        "early_stopping": (
            "inner split: "
            + (
                f"the last {opts.inner_fraction:.0%} in time of {len(val.names)} training segment(s), history "
                "carried across the cut"
                if any(n.endswith("@inner") for n in val.names)
                else f"training segments {val.names}, held out of training"
            )
            + "; the reported validation is not used in training"
            if val.names
            else "the training loss (no training segment long enough for an inner split)"
        ),
        **train_supervised(
            spec, net, train, val, opts, substeps, report("torque", split, opts.epochs), pretrain
        ),
    }
    if mode == "in_the_loop":
        training |= train_in_loop(
            spec,
            net,
            train,
            val,
            opts,
            substeps,
            report("in the loop", (0.3, 1.0), opts.in_loop_epochs),
            deadline,
        )
        training["stopped_on"] = (
            "budget"
            if "budget" in (training["stopped_on"], training["in_loop_stopped_on"])
            else training["in_loop_stopped_on"]
        )
    return training
