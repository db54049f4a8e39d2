"""One network per joint and kind, fitted and scored; the fit API's hooks (check_request, add_networks)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from ...datasets.recording import Recording
from ...models.networks import (
    NET_FAMILIES,
    POS_ERROR,
    RECURRENT,
    NetSpec,
    build_network,
    count_parameters,
)
from ..net_inputs import command_inputs, inputs_note
from ..request import FitRequest
from ..result import ModelFit, NetFit
from .data import JointData, containing_envelope, gain_reference, joint_data, segment_kp
from .history import _state_history, choose_history, history_steps
from .metrics import (
    NetEntry,
    _comparison,
    _parametric_torque,
    _position_rmse,
    _torque_error,
    network_from_result,
    pool_torque,
    recording_commands,
    split_metrics,
    torque_rows,
    trajectory_metrics,
    trajectory_rows,
    weights_to_json,
)
from .options import ISAACLAB_CFG, NetFitError, NetOptions, ProgressFn
from .plant import _lags, _set_scales, history_carry, simulate_segments
from .trainers import _train

STILL_FALLING = 0.9  # best epoch at or past this share of all epochs, run to their end: still improving


def _training_warnings(
    rec: Recording,
    training: dict,
    mode: str,
    has_validation: bool,
    kp_ref: float | None,
    gain_units: str | None,
) -> list[str]:
    """What the user should know about a net's training: budget stops, no validation, gain normalisation."""
    warnings: list[str] = []
    if training["stopped_on"] == "budget":
        warnings.append(
            f"training stopped on the fit's time budget after {training['epochs']} epochs"
            + (f" and {training['in_loop_epochs']} in the loop" if mode == "in_the_loop" else "")
            + ": the best weights so far; give budget.seconds more time or fewer epochs"
        )
    if training["stopped_on"] == "epochs" and training["best_epoch"] >= STILL_FALLING * training["epochs"]:
        warnings.append(
            f"training ran all {training['epochs']} epochs with its watched loss still falling (best at epoch "
            f"{training['best_epoch']}): early stopping never said stop; give more epochs (networks.epochs)"
        )
    if not has_validation:
        warnings.append(
            "no validation segment: every error is on training data (early stopping watched "
            + ("an inner split of it)" if training["early_stopping"].startswith("inner") else "its loss)")
        )
    if kp_ref is not None:
        kps = sorted({kp for seg in rec.segments if (kp := segment_kp(seg)) is not None})
        warnings.append(
            f"gain-normalised: the segments log kp {kps} ({gain_units} units); the net saw the "
            f"position error times kp / {kp_ref:g} and, as exported, is the actuator at kp = "
            f"{kp_ref:g} (the most logged); another kp folds into its position scale"
        )
    return warnings


def net_fit(
    rec: Recording,
    joint: str,
    kind: str,
    train_ids: list[int],
    val_ids: list[int],
    opts: NetOptions,
    substeps: int = 1,
    seed: int = 0,
    progress: Callable[[float, str], None] | None = None,
    deadline: float | None = None,
) -> NetFit:
    """Train one network for one joint; returns its typed result entry (params, network, weights, metrics, ...).

    An MLP whose history the options leave open trains on the span chosen on the inner split (choose_history).
    `deadline` (a time.perf_counter() instant) bounds the training: past it, training stops with the best
    weights so far and the entry's training record says stopped_on "budget" (in the loop, the torque
    pretraining gets 30 % of the time left)."""
    mode, has_tau = _net_mode(rec, kind, opts, substeps)
    torch.manual_seed(seed)
    sample_dt = float(np.median([seg.dt for seg in rec.segments]))
    idx = history_steps(opts, sample_dt, substeps)
    inputs = command_inputs(rec, joint, opts.inputs, opts.gain_normalise)
    # a kp the net reads (itself or in the drive's law) is not folded into the position error as well
    normalise = opts.gain_normalise and not {"kp", "tau_cmd"} & set(inputs)
    kp_ref, gain_units = gain_reference(rec) if normalise else (None, None)
    label = f"{kind} {joint}"

    def prepare(lags: list[int]) -> tuple[NetSpec, JointData, JointData]:
        spec = NetSpec(
            kind,
            input_idx=list(lags),
            input_order=opts.input_order,
            hidden=list(opts.hidden),
            activation=opts.activation,
            hidden_size=opts.hidden_size,
            num_layers=opts.num_layers,
            kp_ref=kp_ref,
            gain_units=gain_units,
            inputs=inputs,
        )
        if kind == "mlp":
            _lags(spec, substeps)
        tau = "measured" if mode == "torque" else "inverse_dynamics"
        data = joint_data(rec, joint, substeps, tau, kp_ref, carry=history_carry(spec, substeps))
        spec.sample_dt_s = float(np.median(data.dt))
        train = data.subset(train_ids)  # the validation segments are scored, never trained or stopped on
        _set_scales(spec, train)
        _set_envelope(spec, data, train_ids, mode)
        return spec, data, train

    choice = None
    if kind == "mlp" and opts.input_idx is None and opts.history_ms is None:
        choice = choose_history(prepare, opts, substeps, sample_dt, mode, seed, label, progress, deadline)
        if choice is not None:
            torch.manual_seed(seed)  # the chosen span trains as if the options had stated it
            idx = history_steps(
                dataclasses.replace(opts, history_ms=choice["chosen_ms"]), sample_dt, substeps
            )
    spec, data, train = prepare(idx)
    net = build_network(spec)
    training = _train(spec, net, train, opts, substeps, mode, label, progress, deadline)
    warnings = _training_warnings(rec, training, mode, bool(val_ids), kp_ref, gain_units)
    warnings += _state_history(rec, spec, opts, substeps, training, choice)
    if (note := inputs_note(inputs, opts.inputs)) is not None:
        training["inputs"] = list(inputs)
        warnings.append(note)
    net.eval()
    val_names = {data.names[i] for i in val_ids}
    entry = _entry(spec, net, data, training, warnings, val_names, substeps)
    if has_tau:
        torque_metrics, rng = _open_loop_torque(rec, joint, spec, net, substeps, val_names)
        entry = dataclasses.replace(entry, torque_metrics=torque_metrics, torque_range=rng)
    return entry


def _net_mode(rec: Recording, kind: str, opts: NetOptions, substeps: int) -> tuple[str, bool]:
    """(training mode, whether every segment logs torque); NetFitError for a mode or decimation the net
    cannot use on this log."""
    has_tau = all(s.tau is not None for s in rec.segments)
    mode = opts.mode if opts.mode != "auto" else ("torque" if has_tau else "in_the_loop")
    if mode == "torque" and not has_tau:
        raise NetFitError(
            "network mode 'torque' needs a measured torque (tau) in every segment; "
            "use mode in_the_loop for logs without torque"
        )
    if kind in RECURRENT and substeps != 1:
        raise NetFitError(
            f"the {kind.upper()} steps once per physics step on the log's samples: fit it with decimation 1"
        )
    return mode, has_tau


def _entry(
    spec: NetSpec,
    net: torch.nn.Module,
    data: JointData,
    training: dict,
    warnings: list[str],
    val_names: set[str],
    substeps: int,
) -> NetFit:
    """A trained net's result entry, scored closed loop on every segment."""
    kind = spec.kind
    sims = simulate_segments(spec, net, data, substeps)
    return NetFit(
        family=kind,
        isaaclab_cfg=ISAACLAB_CFG[kind],
        joint_terms=[],
        params={
            **spec.envelope(),
            **(
                {"pos_scale": spec.pos_scale, "vel_scale": spec.vel_scale, "torque_scale": spec.torque_scale}
                if kind == "mlp"
                else {}
            ),
        },
        network=spec.as_dict(),
        weights=weights_to_json(net),
        pos_error=POS_ERROR,
        training=training,
        metrics=trajectory_metrics(trajectory_rows(data, sims, val_names)),
        loss=float(training.get("in_loop_validation_loss", training["validation_loss"])),
        intervals={},
        correlation={},
        warnings=warnings,
        n_params=count_parameters(net),
        assumptions="closed loop: the load alone (no joint armature or friction; the net holds the actuator "
        "and whatever it learned of the joint's losses)",
    )


def _set_envelope(spec: NetSpec, data: JointData, train_ids: list[int], mode: str) -> None:
    """The DC-motor envelope the consumers clip the net with, just containing the training segments' driven
    samples (every segment's only where none trains driven)."""
    active = [i for i in train_ids if not data.free[i]] or [
        i for i in range(len(data.names)) if not data.free[i]
    ]
    driven = [data.on[i] > 0 for i in active]
    env = containing_envelope(
        torch.cat([data.qd[i][d] for i, d in zip(active, driven, strict=True)]).numpy(),
        torch.cat([data.torques()[i][d] for i, d in zip(active, driven, strict=True)]).numpy(),
        margin=0.02 if mode == "torque" else 0.05,
    )
    for k, v in env.items():
        setattr(spec, k, v)


def _open_loop_torque(
    rec: Recording, joint: str, spec: NetSpec, net: torch.nn.Module, substeps: int, val_names: set[str]
) -> tuple[dict, float]:
    """A net's open-loop torque errors (fed the logged states) against the measured torque, and its range."""
    meas = joint_data(rec, joint, substeps, "measured", spec.kp_ref, carry=history_carry(spec, substeps))
    open_loop = simulate_segments(spec, net, meas, substeps, open_loop=True)  # from each segment's own start
    taus = [t[c:].numpy() for t, c in zip(meas.torques(), meas.carried, strict=True)]
    rng = float(max(t.max() for t in taus) - min(t.min() for t in taus))
    commands = recording_commands(rec, joint, meas.names)
    rows = torque_rows(meas.names, [s["applied"] for s in open_loop], taus, val_names, commands)
    return split_metrics(rows, lambda r: pool_torque(r, rng)), rng


def simulate_net(rec: Recording, joint: str, model: NetEntry | ModelFit, decimation: int = 1) -> dict:
    """Closed-loop traces of a fitted network on every segment of one joint, like fit.simulate."""
    if isinstance(model, ModelFit) and not isinstance(model, NetFit):
        raise NetFitError(f"{model.family} is not a network")
    spec, net = network_from_result(model)
    data = joint_data(rec, joint, decimation, "none", spec.kp_ref, carry=history_carry(spec, decimation))
    sims = simulate_segments(spec, net, data, decimation)
    return {
        name: {"q": s["q"], "qd": s["qd"], "computed": s["applied"], "applied": s["applied"]}
        for name, s in zip(data.names, sims, strict=True)
    }


def fit_networks(
    rec: Recording,
    joints: list[str],
    kinds: list[str],
    train_ids: list[int],
    val_ids: list[int],
    options: dict | None,
    substeps: int,
    seed: int,
    progress: ProgressFn | None,
    span: tuple[float, float] = (0.0, 1.0),
    deadline: float | None = None,
) -> dict[str, dict[str, NetFit]]:
    """Every requested network kind for every joint: {joint: {kind: entry}}; progress within `span`; each net
    trains for 85 % of an equal share of the time left before `deadline` (perf_counter; the rest rolls it out
    for the metrics)."""
    opts = NetOptions.from_dict(options)
    for kind in kinds:
        assert kind in NET_FAMILIES, kind
    out: dict[str, dict[str, NetFit]] = {j: {} for j in joints}
    jobs = [(j, k) for j in joints for k in kinds]
    for n, (joint, kind) in enumerate(jobs):
        lo = span[0] + (span[1] - span[0]) * n / len(jobs)
        hi = span[0] + (span[1] - span[0]) * (n + 1) / len(jobs)

        def sub(frac: float, msg: str, lo=lo, hi=hi) -> None:
            if progress:
                progress(lo + (hi - lo) * frac, msg)

        share = None
        if deadline is not None:
            now = time.perf_counter()
            share = now + 0.85 * max(deadline - now, 0.0) / (len(jobs) - n)
        out[joint][kind] = net_fit(rec, joint, kind, train_ids, val_ids, opts, substeps, seed, sub, share)
    return out


# --- the fit API's hook ---


def check_request(rec: Recording, req: FitRequest) -> None:
    """Reject network options or logs the requested nets cannot use, before anything runs."""
    opts = NetOptions.from_dict(req.networks)  # every size bounded, even when no net is requested
    kinds = [m for m in req.families or [] if m in NET_FAMILIES]
    if not kinds:
        return
    if opts.mode == "torque" and not all(s.tau is not None for s in rec.segments):
        raise NetFitError(
            "network mode 'torque' needs a measured torque (tau) in every segment; "
            "use mode in_the_loop (or auto) for logs without torque"
        )
    for kind in [k for k in kinds if k in RECURRENT]:
        if req.decimation != 1:
            raise NetFitError(
                f"the {kind.upper()} steps once per physics step on the log's samples: fit it with "
                "decimation 1"
            )
    if "mlp" in kinds and rec.segments:
        idx = history_steps(opts, float(np.median([s.dt for s in rec.segments])), req.decimation)
        _lags(
            NetSpec("mlp", input_idx=list(idx), input_order=opts.input_order, activation=opts.activation),
            req.decimation,
        )


def add_networks(
    rec: Recording,
    req: FitRequest,
    joints: list[str],
    train_ids: list[int],
    val_ids: list[int],
    fits: dict[str, dict[str, ModelFit]],
    progress: ProgressFn | None,
    deadline: float | None = None,
) -> bool:
    """Fit the requested nets into fits[joint] (family → fit), each compared with the best parametric model on
    the same validation segments: closed loop (position) and, with measured torque, open loop (torque), which
    the parametric fits then carry too. Training ends by `deadline` (perf_counter; the fit's budget.seconds);
    returns whether that cut any net short."""
    kinds = [m for m in req.families or [] if m in NET_FAMILIES]
    start = 1 - len(kinds) / len(req.families or kinds)
    fitted = fit_networks(
        rec,
        joints,
        kinds,
        train_ids,
        val_ids,
        req.networks,
        req.decimation,
        req.seed,
        progress,
        (start, 0.99),
        deadline,
    )
    val_names = {rec.segments[i].name for i in val_ids}
    has_tau = all(s.tau is not None for s in rec.segments)
    split = "validation" if val_ids else "train"
    for joint in joints:
        models = fits[joint]
        parametric = [f for f in models if f not in NET_FAMILIES]
        if has_tau:
            for f in parametric:
                models[f] = dataclasses.replace(
                    models[f], torque_metrics=_parametric_torque(rec, req, joint, f, models[f], val_names)[1]
                )
        # the parametric model a net is set against: the best by the error the joint is ranked by
        by_torque = lambda f, m=models: _torque_error(m[f], split) or math.inf  # noqa: E731
        best = min(
            parametric, key=by_torque if has_tau else partial(_position_rmse, models, split), default=None
        )
        for kind, entry in fitted[joint].items():
            models[kind] = (
                entry
                if best is None
                else dataclasses.replace(entry, comparison=_comparison(entry, models[best], split, has_tau))
            )
    return any(e.training["stopped_on"] == "budget" for kinds_ in fitted.values() for e in kinds_.values())
