"""A net's scores (closed-loop trajectory rows, open-loop torque rows and baselines), weights as JSON,
and the comparison with the parametric models."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from typing import Any, overload

import numpy as np
import torch

from ...datasets.recording import Recording
from ...models.families import get_family
from ...models.networks import (
    NetSpec,
    build_network,
)
from ...models.rollout import RolloutEngine, SegmentBatch, full_params
from ...numbers import is_real
from ..objective import pool_metrics
from ..request import FitRequest
from ..result import Metrics, ModelFit, NetFit, SegmentMetrics, SplitMetrics
from .data import JointData
from .options import NetFitError

# --- metrics ---


def trajectory_rows(data: JointData, sims: list[dict], val_names: set[str]) -> list[dict]:
    """Per-segment position/velocity errors of closed-loop rollouts, in objective.segment_metrics' shape."""
    rows = []
    for i, sim in enumerate(sims):
        c = data.carried[i]  # simulate_segments returns a segment from its own first sample
        eq = sim["q"][1:] - data.q[i][c + 1 :].numpy()
        eqd = sim["qd"][1:] - data.qd[i][c + 1 :].numpy()
        rows.append(
            {
                "segment": data.names[i],
                "samples": int(eq.size),
                "position_rmse": float(np.sqrt(np.mean(eq**2))),
                "position_mae": float(np.mean(np.abs(eq))),
                "velocity_rmse": float(np.sqrt(np.mean(eqd**2))),
                "split": "validation" if data.names[i] in val_names else "train",
            }
        )
    return rows


def _si_gain(seg: Any, key: str, joint: str) -> float | None:
    """A segment's logged gain for one joint in SI (a number, or a {joint: value} map), None where the log states
    none or states it in device units."""
    units = str(seg.metadata.get("gain_units", "device" if "bam" in seg.metadata else "SI"))
    v = seg.metadata.get(key)
    v = v.get(joint) if isinstance(v, Mapping) else v
    if units.lower() != "si" or not is_real(v):
        return None
    return float(v)


def _command(seg: Any, joint: str, j: int) -> np.ndarray | None:
    """What the drive was commanded, as torque on the log's samples: τ_ff plus, with SI gains in the log,
    kp·(q_des − q) + kd·(qd_des − qd); None where the log states neither (no gains in SI and no τ_ff)."""
    ff = np.asarray(seg.tau_ff[:, j], np.float64)
    kp, kd = _si_gain(seg, "kp", joint), _si_gain(seg, "kd", joint)
    if kp is None and not np.any(ff != 0):
        return None
    pd = (
        0.0
        if kp is None
        else kp * (seg.q_des[:, j] - seg.q[:, j]) + (kd or 0.0) * (seg.qd_des[:, j] - seg.qd[:, j])
    )
    return ff + pd


def recording_commands(rec: Recording, joint: str, names: list[str]) -> list[np.ndarray | None]:
    """The commanded torque (command_torque) of the named segments of one joint, for the torque baselines."""
    j = rec.joint_index(joint)
    by_name = {s.name: s for s in rec.segments}
    return [_command(by_name[n], joint, j) if n in by_name else None for n in names]


def torque_rows(
    names: list[str],
    applied: list[np.ndarray],
    tau: list[np.ndarray],
    val_names: set[str],
    commands: list[np.ndarray | None] | None = None,
) -> list[dict]:
    """Per-segment open-loop torque errors (the model fed the logged states) against the measured torque, and
    the trivial predictors' on the same samples: zero (the measured torque's RMS) and, where the log states
    it, the commanded torque (`commands`, aligned to the segment's end)."""
    rows = []
    for k, (name, a, t) in enumerate(zip(names, applied, tau, strict=True)):
        t = np.asarray(t, np.float64)
        e = np.asarray(a, np.float64) - t
        row = {
            "segment": name,
            "samples": int(e.size),
            "torque_rmse": float(np.sqrt(np.mean(e**2))),
            "torque_mae": float(np.mean(np.abs(e))),
            "torque_mean": float(np.mean(t)),  # of the measured torque: the pooled R² needs them
            "torque_std": float(np.std(t)),
            "zero_rmse": float(np.sqrt(np.mean(t**2))),
            "split": "validation" if name in val_names else "train",
        }
        c = None if commands is None else commands[k]
        if c is not None and len(c) >= t.size:
            row["command_rmse"] = float(
                np.sqrt(np.mean((np.asarray(c[len(c) - t.size :], np.float64) - t) ** 2))
            )
        rows.append(row)
    return rows


def pool_torque(rows: list[dict], torque_range: float) -> dict | None:
    """Sample-weighted torque RMSE of some segments, also as a fraction of the measured torque range."""
    if not rows:
        return None
    n = np.array([r["samples"] for r in rows], float)
    rmse = float(np.sqrt(np.sum(n * np.array([r["torque_rmse"] ** 2 for r in rows])) / n.sum()))
    out: dict[str, float | int | None] = {
        "torque_rmse": rmse,
        "torque_rmse_of_range": rmse / max(torque_range, 1e-12),
        "torque_mae": float(np.sum(n * np.array([r["torque_mae"] for r in rows])) / n.sum()),
        "segments": len(rows),
        "samples": int(n.sum()),
    }
    for base in ("zero_rmse", "command_rmse"):  # the trivial predictors, pooled as the model's error is
        if all(base in r for r in rows):
            out[base] = float(np.sqrt(np.sum(n * np.array([r[base] ** 2 for r in rows])) / n.sum()))
    if all("torque_std" in r for r in rows):  # R² = 1 − SSE / SST over the pooled measured torque
        mean = np.array([r["torque_mean"] for r in rows])
        grand = float(np.sum(n * mean) / n.sum())
        sst = float(np.sum(n * (np.array([r["torque_std"] for r in rows]) ** 2 + (mean - grand) ** 2)))
        out["torque_r2"] = 1.0 - rmse**2 * n.sum() / sst if sst > 0 else None
    return out


def split_metrics(rows: list[dict], pool) -> dict:
    """Pooled train and validation rows and the rows themselves (the torque metrics' JSON shape)."""
    return {
        "train": pool([r for r in rows if r["split"] == "train"]),
        "validation": pool([r for r in rows if r["split"] == "validation"]),
        "segments": rows,
    }


def trajectory_metrics(rows: list[dict]) -> Metrics:
    """A net's closed-loop errors (trajectory_rows) pooled per split, as the parametric fits report them."""

    def pooled(split: str) -> SplitMetrics | None:
        m = pool_metrics([r for r in rows if r["split"] == split])
        return None if m is None else SplitMetrics(**m)

    return Metrics(
        train=pooled("train"),
        validation=pooled("validation"),
        segments=tuple(SegmentMetrics(**r) for r in rows),
    )


# --- weights as JSON ---


def weights_to_json(net: torch.nn.Module) -> dict:
    """state_dict → {name: {"shape", "data"}}: float32 values written exactly (as float64 decimals)."""
    return {
        k: {"shape": list(v.shape), "data": v.detach().to(torch.float32).flatten().tolist()}
        for k, v in net.state_dict().items()
    }


NetEntry = NetFit | Mapping[str, Any]  # a fitted network: typed, or its JSON entry (NetFit.to_json())


@overload
def at_gain(model: NetFit, kp: float) -> NetFit: ...
@overload
def at_gain(model: Mapping[str, Any], kp: float) -> dict: ...
def at_gain(model: NetEntry, kp: float) -> NetFit | dict:
    """A fitted, gain-normalised net entry refolded for controller gain `kp`: the factor kp / kp_ref goes into
    the MLP's pos_scale (Isaac Lab's cfg field) or the LSTM / GRU in_scale on q_des − q (the first layer's
    position input weights, equivalently), and kp_ref becomes kp. A typed entry gives a typed one, the JSON
    entry (NetFit.to_json()) its JSON."""
    net = model if isinstance(model, NetFit) else NetFit.from_json(model)
    spec = net.network
    if spec.get("kp_ref") is None:
        raise NetFitError(
            "this net was not gain-normalised (its log holds one kp or none): it has no kp to change"
        )
    if not (isinstance(kp, int | float) and math.isfinite(kp) and kp > 0):
        raise NetFitError(f"kp must be a positive number, got {kp!r}")
    f = float(kp) / float(spec["kp_ref"])
    network, params, weights = {**spec, "kp_ref": float(kp)}, dict(net.params), dict(net.weights)
    if spec["kind"] == "mlp":
        network["pos_scale"] = params["pos_scale"] = float(np.float32(spec["pos_scale"] * f))
    else:
        scale = list(weights["in_scale"]["data"])
        scale[0] = float(np.float32(scale[0] * f))
        weights["in_scale"] = {**weights["in_scale"], "data": scale}
    out = dataclasses.replace(net, network=network, params=params, weights=weights)
    return out if isinstance(model, NetFit) else copy.deepcopy(out.to_json())


def network_from_result(model: NetEntry) -> tuple[NetSpec, torch.nn.Module]:
    """The spec and the trained module of a fitted mlp/lstm/gru result entry."""
    network, weights = (
        (model.network, model.weights) if isinstance(model, NetFit) else (model["network"], model["weights"])
    )
    spec = NetSpec(**network)
    net = build_network(spec)
    state = {k: torch.tensor(v["data"], dtype=torch.float32).reshape(v["shape"]) for k, v in weights.items()}
    net.load_state_dict(state)
    return spec, net.eval()


def _parametric_torque(
    rec: Recording, req: FitRequest, joint: str, fam_name: str, model: ModelFit, val_names: set[str]
) -> tuple[list[dict], dict]:
    """Open-loop torque rows of a parametric model: the family's effort on the logged states (F_OPEN_LOOP)."""
    family = get_family(fam_name)
    if model.joint_terms is not None:
        family = family.with_terms(tuple(model.joint_terms))
    knots = None if model.table_positions is None else np.asarray([model.table_positions])
    batch = SegmentBatch.from_recording(
        rec, [joint], substeps=req.decimation, knots=knots, logged_gains=req.use_logged_gains
    )
    cols = {n: np.array([[model.params[n]]]) for n in family.params}
    tr = RolloutEngine(batch, req.device, effort_mode=req.effort_mode).traces(
        family, full_params(family, cols, (1, 1)), open_loop=True
    )
    j = rec.joint_index(joint)
    names = [batch.seg_names[s] for s in range(batch.n_segments)]
    applied = [tr["applied"][0, batch.segment_slice(s)] for s in range(batch.n_segments)]
    taus = []
    for n in names:
        seg = rec.segments[[x.name for x in rec.segments].index(n)]
        if seg.tau is None:  # add_networks asks only when every segment logs torque
            raise NetFitError(f"segment {n!r} logs no torque (tau): no open-loop torque comparison")
        taus.append(seg.tau[:, j])
    rows = torque_rows(names, applied, taus, val_names, recording_commands(rec, joint, names))
    rng = float(max(t.max() for t in taus) - min(t.min() for t in taus))
    return rows, split_metrics(rows, lambda r: pool_torque(r, rng))


def _position_error(m: ModelFit, split: str, metric: str) -> float | None:
    """One pooled error of a fit on the train or validation segments, None where it has none."""
    pooled = m.metrics.validation if split == "validation" else m.metrics.train
    return None if pooled is None else getattr(pooled, metric)


def _position_rmse(models: Mapping[str, ModelFit], split: str, family: str) -> float:
    """A family's pooled position RMSE on the train or validation segments (inf where it has none), to rank by."""
    err = _position_error(models[family], split, "position_rmse")
    return math.inf if err is None else err


def _torque_error(m: ModelFit, split: str) -> float | None:
    """A fit's pooled open-loop torque RMSE on the train or validation segments, None where it has none."""
    return ((m.torque_metrics or {}).get(split) or {}).get("torque_rmse")


def _comparison(net: NetFit, parametric: ModelFit, split: str, has_tau: bool) -> dict:
    """A net against the best parametric model on the same segments: closed loop and, with torque, open loop."""
    return {
        "parametric_family": parametric.family,
        "split": split,
        **{
            metric: {
                "network": _position_error(net, split, metric),
                "parametric": _position_error(parametric, split, metric),
            }
            for metric in ("position_rmse", "velocity_rmse")
        },
        **(
            {
                "torque_rmse": {
                    "network": _torque_error(net, split),
                    "parametric": _torque_error(parametric, split),
                }
            }
            if has_tau
            else {}
        ),
    }
