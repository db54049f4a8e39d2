"""The MLP's history: the default span in time, its lags at the log's rate, how it is stated, and, when the
request leaves it open, the span chosen on the inner split from a few candidates trained briefly."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...datasets.recording import Recording
from ...models.networks import NetSpec, build_network
from .data import JointData
from .options import LIMITS, NetFitError, NetOptions, ProgressFn
from .trainers import _train

HISTORY_MS = [0.0, 20.0, 40.0]  # the MLP's default history: now, 20 ms and 40 ms back (BENCHMARKS.md)


def history_steps(opts: NetOptions, sample_dt: float, substeps: int) -> list[int]:
    """The MLP's input_idx in physics steps: given as such, else history_ms (default HISTORY_MS) at the log's
    sample interval, each lag the nearest whole sample (repeats dropped), times the decimation."""
    if opts.input_idx is not None:
        return list(opts.input_idx)
    ms = opts.history_ms if opts.history_ms is not None else HISTORY_MS
    samples = dict.fromkeys(int(round(t / 1000.0 / sample_dt)) for t in ms)
    if max(samples) > LIMITS["input_idx_value"] // substeps:
        raise NetFitError(
            f"network history_ms {ms} reaches {max(samples)} samples back at this log's "
            f"{1 / sample_dt:g} Hz; the limit is {LIMITS['input_idx_value']} physics steps"
        )
    return [k * substeps for k in samples]


COARSE_HISTORY_SAMPLES = 4  # a default history reaching fewer log samples back than this is said to be coarse


def history_text(input_idx: list[int], substeps: int, sample_dt: float) -> str:
    """The MLP's history as the user reads it: lags in log samples and in ms at the log's rate."""
    lags = [i // substeps for i in input_idx]
    ms = ", ".join(f"{k * sample_dt * 1000:.3g}" for k in lags)
    return f"lags {', '.join(map(str, lags))} samples ({ms} ms at {1 / sample_dt:.4g} Hz)"


def _history_warnings(
    opts: NetOptions, input_idx: list[int], substeps: int, sample_dt: float, chosen: bool
) -> list[str]:
    """A history the options left open that reaches a few samples back only (a slow log), said with how to
    ask for a longer span."""
    if opts.input_idx is not None or opts.history_ms is not None:
        return []
    reach = max(input_idx) // substeps
    if reach >= COARSE_HISTORY_SAMPLES:
        return []
    what = (
        "history chosen on the inner split"
        if chosen
        else f"default history ({', '.join(f'{t:g}' for t in HISTORY_MS)} ms)"
    )
    return [
        f"the MLP's {what} is {history_text(input_idx, substeps, sample_dt)}: {reach} sample(s) back at this "
        "rate; a drive with slower dynamics may need a longer span (networks.history_ms, e.g. [0, 30, 60, 90]); "
        "compare them on the validation error"
    ]


def _state_history(
    rec: Recording, spec: NetSpec, opts: NetOptions, substeps: int, training: dict, choice: dict | None = None
) -> list[str]:
    """An MLP's history stated in its training record (lags in samples and ms) and, when short, a warning;
    a history chosen on the inner split, its candidates and their inner errors too."""
    if spec.kind != "mlp":
        return []
    sample_dt = float(np.median([seg.dt for seg in rec.segments]))
    training["history"] = history_text(spec.input_idx, substeps, sample_dt)
    notes = []
    if choice is not None:
        training["history_choice"] = choice
        tried = "; ".join(f"{c['history']}: {c['inner_error']:.4g}" for c in choice["candidates"])
        notes.append(
            f"the MLP's history was chosen on the inner split of the training segments: "
            f"{training['history']}, from {tried} ({choice['metric']}; the shortest span is kept unless a "
            f"longer one is at least {CHOICE_MARGIN:.0%} better); give networks.history_ms to set it"
        )
    return notes + _history_warnings(opts, spec.input_idx, substeps, sample_dt, choice is not None)


HISTORY_CANDIDATES_MS = ([0.0, 10.0, 20.0], HISTORY_MS, [0.0, 30.0, 60.0, 90.0])  # shortest span first
CHOICE_BUDGET = 0.25  # share of the epochs and patience (both phases) a candidate history trains for
CHOICE_MIN_EPOCHS = 10  # fewest epochs (each phase) a candidate trains for, unless the options give fewer
CHOICE_TIME = 0.3  # share of the time left before a deadline that the candidates may take together
CHOICE_MARGIN = 0.05  # a longer span is chosen only when its inner error is at least this much lower

Prepare = Callable[[list[int]], tuple[NetSpec, JointData, JointData]]


def _candidates(opts: NetOptions, sample_dt: float, substeps: int) -> dict[tuple[int, ...], list[float]]:
    """The candidate spans as lags at the log's rate, shortest first; spans that come out the same (a slow
    log) or past the limits are tried once or not at all."""
    out: dict[tuple[int, ...], list[float]] = {}
    for ms in HISTORY_CANDIDATES_MS:
        try:
            idx = history_steps(dataclasses.replace(opts, history_ms=list(ms)), sample_dt, substeps)
        except NetFitError:
            continue
        out.setdefault(tuple(idx), list(ms))
    return out


def _quick(opts: NetOptions) -> NetOptions:
    """The options a candidate history trains with: CHOICE_BUDGET of the epochs and patience, at least
    CHOICE_MIN_EPOCHS (all of them when fewer: a candidate barely trained says nothing of its span)."""
    cut = lambda n: min(n, max(CHOICE_MIN_EPOCHS, math.ceil(n * CHOICE_BUDGET)))  # noqa: E731
    return dataclasses.replace(
        opts, epochs=cut(opts.epochs), patience=cut(opts.patience), in_loop_epochs=cut(opts.in_loop_epochs)
    )


def choose_history(
    prepare: Prepare,
    opts: NetOptions,
    substeps: int,
    sample_dt: float,
    mode: str,
    seed: int,
    label: str,
    progress: ProgressFn | None,
    deadline: float | None,
) -> dict | None:
    """The MLP's history chosen on the inner split: each candidate span (HISTORY_CANDIDATES_MS) trains briefly
    (_quick) as the net would, its inner-split error read (torque RMSE; in the loop, the closed-loop loss);
    the shortest span wins unless a longer one is CHOICE_MARGIN better. None when fewer than two spans differ
    at this rate or none could train (the default history then trains as it is)."""
    candidates = _candidates(opts, sample_dt, substeps)
    if len(candidates) < 2:
        return None
    quick = _quick(opts)
    rows: list[dict[str, Any]] = []
    end = (
        None
        if deadline is None
        else time.perf_counter() + CHOICE_TIME * max(deadline - time.perf_counter(), 0)
    )
    for k, (idx, ms) in enumerate(candidates.items()):
        text = history_text(list(idx), substeps, sample_dt)
        if progress:
            progress(0.0, f"{label}: trying the history {text} on the inner split")
        share = (
            None
            if end is None
            else time.perf_counter() + max(end - time.perf_counter(), 0) / (len(candidates) - k)
        )
        torch.manual_seed(seed)
        try:
            spec, _, train = prepare(list(idx))
            net = build_network(spec)
            record = _train(spec, net, train, quick, substeps, mode, label, None, share)
        except NetFitError:  # too long for these segments: not a candidate
            continue
        if not record["early_stopping"].startswith("inner split"):
            return None  # no inner split to compare on: the training loss would favour the longest span
        err = (
            math.sqrt(record["validation_loss"]) * spec.torque_scale
            if mode == "torque"
            else record["in_loop_validation_loss"]
        )
        if math.isfinite(err):
            rows.append({"history_ms": ms, "history": text, "inner_error": float(err)})
    if not rows:
        return None
    best = rows[0]
    for row in rows[1:]:  # longer spans: only a clear gain is worth their inputs
        if row["inner_error"] <= (1 - CHOICE_MARGIN) * best["inner_error"]:
            best = row
    return {
        "candidates": rows,
        "metric": "inner-split torque RMSE, N·m" if mode == "torque" else "inner-split closed-loop loss",
        "candidate_epochs": {
            "torque": quick.epochs,
            **({"in_the_loop": quick.in_loop_epochs} if mode != "torque" else {}),
        },
        "chosen_ms": best["history_ms"],
    }
