"""Options of the actuator networks: NetOptions, its bounds (LIMITS) and their validation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...models.networks import (
    check_inputs,
)
from ..net_inputs import INPUT_CHOICES
from ..request import FitRequestError

ProgressFn = Callable[[float, str], None]
ISAACLAB_CFG = {
    "mlp": "ActuatorNetMLPCfg",
    "lstm": "ActuatorNetLSTMCfg",
    "gru": "",
}  # "": Isaac Lab 3.0 has none
# bounds on every option that sizes work (issue 15): a request past one is refused, naming the limit
LIMITS = {
    "hidden_width": 1024,
    "hidden_layers": 8,
    "hidden_size": 1024,
    "num_layers": 4,
    "epochs": 100_000,
    "in_loop_epochs": 100_000,
    "patience": 100_000,
    "window": 10_000,
    "lstm_window": 10_000,
    "burn_in": 10_000,
    "batch_size": 65_536,
    "input_idx_length": 64,
    "input_idx_value": 1_000,
}


class NetFitError(FitRequestError):
    """A network fit that cannot run as asked (bad options, a log the mode cannot use)."""


@dataclass
class NetOptions:
    """Architecture and training budget of the actuator networks (small by default: CPU, seconds)."""

    input_idx: list[int] | None = None  # physics steps back (Isaac Lab's count); exclusive with history_ms
    history_ms: list[float] | None = None  # the MLP's history in ms, at the log's rate (unset: chosen)
    inner_fraction: float = 0.2  # watched by early stopping: whole segments (WHOLE_INNER+), else their ends
    input_order: str = "pos_vel"
    hidden: list[int] = field(default_factory=lambda: [32, 32])
    activation: str = "softsign"
    hidden_size: int = 16
    num_layers: int = 1
    epochs: int = 1000  # a cap: patience (or the fit's time budget) ends training first
    patience: int = 60  # epochs without a better validation loss before stopping
    lr: float = 3e-3
    batch_size: int = 512  # supervised MLP
    window: int = 50  # samples per in-the-loop rollout window (truncated BPTT length)
    lstm_window: int = 50  # samples per supervised LSTM / GRU sequence (truncated BPTT length)
    burn_in: int = 10  # LSTM / GRU samples run on the log before the loss counts
    in_loop_epochs: int = 150
    in_loop_lr: float | None = None  # default: lr / 3 (MLP), lr / 30 (LSTM, whose state makes BPTT touchier)
    mode: str = "auto"  # "auto": torque when the log has it; "torque"; "in_the_loop"
    gain_normalise: bool = True  # position error × kp_s / kp_ref per segment when segments log their kp
    inputs: str | list[str] = "auto"  # "auto": the drive's commands too when the log has them; "error";
    # "commands"; or the channels themselves (models/networks.py INPUT_MEANING)

    @classmethod
    def from_dict(cls, d: dict | None) -> NetOptions:
        """Options from a request's `networks` object, every size bounded (LIMITS) and every type checked."""
        d = dict(d or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise NetFitError(f"unknown network option(s) {unknown}: choose from {sorted(known)}")
        for name in (
            "epochs",
            "patience",
            "batch_size",
            "window",
            "lstm_window",
            "burn_in",
            "in_loop_epochs",
            "hidden_size",
            "num_layers",
        ):
            if name in d:
                _bounded_int(
                    name, d[name], 0 if name == "burn_in" else 3 if name == "window" else 1, LIMITS[name]
                )
        if "hidden" in d:
            _bounded_list(
                "hidden",
                d["hidden"],
                LIMITS["hidden_layers"],
                "layer widths",
                "layers",
                "hidden width",
                1,
                LIMITS["hidden_width"],
            )
        if d.get("input_idx") is not None:
            _bounded_list(
                "input_idx",
                d["input_idx"],
                LIMITS["input_idx_length"],
                "physics-step lags",
                "entries",
                "input_idx entry",
                0,
                LIMITS["input_idx_value"],
            )
        if d.get("history_ms") is not None:
            if d.get("input_idx") is not None:
                raise NetFitError("give the network history as history_ms or input_idx, not both")
            v = d["history_ms"]
            if (
                not isinstance(v, list)
                or not 1 <= len(v) <= LIMITS["input_idx_length"]
                or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x <= 10_000 for x in v
                )
            ):
                raise NetFitError(
                    f"network history_ms must be a list of 1 to {LIMITS['input_idx_length']} times in ms "
                    f"between 0 and 10000, got {v!r}"
                )
        if "inner_fraction" in d:
            v = d["inner_fraction"]
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 0.5:
                raise NetFitError(f"network inner_fraction must be a number in [0, 0.5], got {v!r}")
        for name in ("lr", "in_loop_lr"):
            v = d.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1):
                raise NetFitError(f"network {name} must be a number in (0, 1], got {v!r}")
        for name in ("input_order", "activation", "mode"):
            if name in d and not isinstance(d[name], str):
                raise NetFitError(f"network {name} must be a string, got {d[name]!r}")
        if "gain_normalise" in d and not isinstance(d["gain_normalise"], bool):
            raise NetFitError(f"network gain_normalise must be true or false, got {d['gain_normalise']!r}")
        opts = cls(**d)
        if opts.mode not in ("auto", "torque", "in_the_loop"):
            raise NetFitError(f"network mode must be auto, torque or in_the_loop, got {opts.mode!r}")
        _check_inputs(opts.inputs)
        return opts


def _check_inputs(v: object) -> None:
    """Refuse a `networks.inputs` that is neither a layout choice nor a valid list of channels."""
    if isinstance(v, str) and v in INPUT_CHOICES:
        return
    try:
        if not isinstance(v, list) or not all(isinstance(c, str) for c in v):
            raise ValueError("not a list of channel names")
        check_inputs(v)
    except ValueError as e:
        raise NetFitError(
            f"network inputs must be one of {list(INPUT_CHOICES)} or a list of channels ({e}), got {v!r}"
        ) from None


def _bounded_int(name: str, v: object, lo: int, hi: int) -> None:
    """Refuse a network size that is not an integer in [lo, hi], naming the limit."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise NetFitError(f"network {name} must be an integer, got {v!r}")
    if not lo <= v <= hi:
        raise NetFitError(f"network {name} must be between {lo} and {hi} (limit {hi}), got {v}")


def _bounded_list(
    name: str, v: object, max_len: int, what: str, unit: str, item: str, lo: int, hi: int
) -> None:
    """Refuse a list option (layer widths, lags) that is empty, too long, or holds an integer outside [lo, hi]."""
    if not isinstance(v, list) or not 1 <= len(v) <= max_len:
        raise NetFitError(
            f"network {name} must be a list of 1 to {max_len} {what} (limit {max_len} {unit}), got {v!r}"
        )
    for x in v:
        _bounded_int(item, x, lo, hi)
