"""Actuator networks as Isaac Lab and Newton run them: the nn modules, their inputs and the DC-motor clip.

`ActuatorMLP` follows Isaac Lab's `ActuatorNetMLP` contract (consumer-semantics §A.7, §A.9): forward(x) with
x = [pos_err history · pos_scale, vel history · vel_scale] (or vel first), output in network units times
`torque_scale`. `ActuatorLSTM` follows `ActuatorNetLSTM` (§A.8): an `.lstm` submodule, batch first,
forward(x, (h, c)) → (torque, (h, c)) on raw [q_des − q, qd] — Isaac Lab scales nothing, so the scales are
buffers inside the module and Newton's metadata scales are 1. `ActuatorGRU` is the same with a `.gru` and
forward(x, h) → (torque, h), for Newton's DriveNeuralGRU (§C.2; Isaac Lab 3.0 has no GRU actuator). Position
error is q_des − q (Isaac Lab and Newton); velocity is the measured joint velocity. `NetStepper` is the pure
per-physics-step effort law (history, network, §A.4 clip) that the consumers compute; the exporters and tests
compare against it. Its optional per-lane `pos_gain` multiplies the position error before the net sees it:
the gain normalisation of logs recorded at several controller gains (fitting/training.py).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import nn

from .components.dc_motor import window
from .families import NET_FAMILIES

ACTIVATIONS = {"softsign": nn.Softsign, "tanh": nn.Tanh, "elu": nn.ELU, "relu": nn.ReLU}
ENVELOPE = ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit")
RECURRENT = ("lstm", "gru")  # the kinds that carry a hidden state instead of input histories
POS_ERROR = "q_des - q"  # the sign convention of every exported net (walk-these-ways uses q - q_des)


@dataclass
class NetSpec:
    """Everything but the weights: architecture, input layout, scales and the DC-motor envelope (SI)."""

    kind: str  # "mlp", "lstm" or "gru"
    input_idx: list[int] = field(default_factory=lambda: [0, 1, 2])  # physics steps back (MLP)
    input_order: str = "pos_vel"
    hidden: list[int] = field(default_factory=lambda: [32, 32])  # MLP widths
    activation: str = "softsign"
    hidden_size: int = 16  # LSTM / GRU
    num_layers: int = 1  # LSTM / GRU
    pos_scale: float = 1.0  # 1 / rad
    vel_scale: float = 1.0  # s / rad
    torque_scale: float = 1.0  # N·m per network unit
    saturation_effort: float = math.inf
    actuator_velocity_limit: float = math.inf
    actuator_effort_limit: float = math.inf
    sample_dt_s: float | None = None  # the physics step the net was trained at (Newton's GRU checks it)
    kp_ref: float | None = (
        None  # the controller gain the position input is normalised to (None: not normalised)
    )
    gain_units: str | None = None  # units of kp_ref as logged ("device": firmware units)

    def __post_init__(self) -> None:
        if self.kind not in NET_FAMILIES:
            raise ValueError(f"unknown network kind {self.kind!r}: choose from {list(NET_FAMILIES)}")
        if not self.input_idx or any(int(i) < 0 for i in self.input_idx):
            raise ValueError(
                f"input_idx must be a non-empty list of non-negative steps, got {self.input_idx}"
            )
        if self.input_order not in ("pos_vel", "vel_pos"):
            raise ValueError(f"input_order must be 'pos_vel' or 'vel_pos', got {self.input_order!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}: choose from {list(ACTIVATIONS)}")
        self.input_idx = [int(i) for i in self.input_idx]

    @property
    def history_length(self) -> int:
        return max(self.input_idx) + 1

    def envelope(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in ENVELOPE}

    def as_dict(self) -> dict:
        return asdict(self)


class ActuatorMLP(nn.Module):
    """Isaac Lab ActuatorNetMLP network: scaled [pos_err, vel] histories → torque in network units."""

    def __init__(self, n_inputs: int, hidden: list[int], activation: str = "softsign") -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = n_inputs
        for h in hidden:
            layers += [nn.Linear(width, h), ACTIVATIONS[activation]()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ActuatorLSTM(nn.Module):
    """Isaac Lab ActuatorNetLSTM network: raw [q_des − q, qd] (N, 1, 2) and (h, c) → (torque N·m, (h, c))."""

    if (
        TYPE_CHECKING
    ):  # buffers (register_buffer), typed for the checker only: TorchScript reads class annotations
        in_scale: torch.Tensor
        out_scale: torch.Tensor

    def __init__(
        self,
        hidden_size: int,
        num_layers: int,
        pos_scale: float = 1.0,
        vel_scale: float = 1.0,
        torque_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.lstm = nn.LSTM(2, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, 1)
        self.register_buffer("in_scale", torch.tensor([pos_scale, vel_scale], dtype=torch.float32))
        self.register_buffer("out_scale", torch.tensor(torque_scale, dtype=torch.float32))

    def forward(
        self, x: torch.Tensor, hc: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        y, (h, c) = self.lstm(x * self.in_scale, hc)
        return self.linear(y[:, -1, :]) * self.out_scale, (h, c)


class ActuatorGRU(nn.Module):
    """A GRU actuator net for Newton's DriveNeuralGRU: raw [q_des − q, qd] (N, 1, 2) and h → (torque N·m, h)."""

    if (
        TYPE_CHECKING
    ):  # buffers (register_buffer), typed for the checker only: TorchScript reads class annotations
        in_scale: torch.Tensor
        out_scale: torch.Tensor

    def __init__(
        self,
        hidden_size: int,
        num_layers: int,
        pos_scale: float = 1.0,
        vel_scale: float = 1.0,
        torque_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.gru = nn.GRU(2, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, 1)
        self.register_buffer("in_scale", torch.tensor([pos_scale, vel_scale], dtype=torch.float32))
        self.register_buffer("out_scale", torch.tensor(torque_scale, dtype=torch.float32))

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, h = self.gru(x * self.in_scale, h)
        return self.linear(y[:, -1, :]) * self.out_scale, h


def as_recurrent(net: nn.Module) -> ActuatorLSTM | ActuatorGRU:
    """The net as the recurrent actuator net it is (TypeError otherwise), so its scales and layers are typed."""
    if isinstance(net, ActuatorLSTM | ActuatorGRU):
        return net
    raise TypeError(f"{type(net).__name__} is not a recurrent actuator net (ActuatorLSTM / ActuatorGRU)")


def recurrent_core(net: nn.Module) -> nn.LSTM | nn.GRU:
    """The nn.LSTM / nn.GRU inside a recurrent actuator net."""
    rnn = as_recurrent(net)
    return rnn.lstm if isinstance(rnn, ActuatorLSTM) else rnn.gru


def build_network(spec: NetSpec) -> nn.Module:
    """A fresh (untrained) float32 module for the spec."""
    if spec.kind == "mlp":
        return ActuatorMLP(2 * len(spec.input_idx), spec.hidden, spec.activation)
    cls = ActuatorLSTM if spec.kind == "lstm" else ActuatorGRU
    return cls(spec.hidden_size, spec.num_layers, spec.pos_scale, spec.vel_scale, spec.torque_scale)


def dc_clip(
    effort: torch.Tensor,
    qd: torch.Tensor,
    sat: torch.Tensor | float,
    vlim: torch.Tensor | float,
    elim: torch.Tensor | float,
) -> torch.Tensor:
    """Isaac Lab DCMotor four-quadrant clip (§A.4), differentiable in the envelope where it binds."""
    sat, vlim, elim = (torch.as_tensor(v, dtype=effort.dtype) for v in (sat, vlim, elim))
    lo, hi = window(qd, sat, vlim, elim, torch)  # the clamp component's envelope, in torch
    return torch.maximum(torch.minimum(effort, hi), lo)


def mlp_input(spec: NetSpec, pos_hist: torch.Tensor, vel_hist: torch.Tensor) -> torch.Tensor:
    """§A.7.2–3: histories (B, H) with column 0 the current step → the scaled (B, 2K) network input."""
    idx = torch.as_tensor(spec.input_idx, dtype=torch.long)
    pos, vel = pos_hist[:, idx] * spec.pos_scale, vel_hist[:, idx] * spec.vel_scale
    return torch.cat([pos, vel] if spec.input_order == "pos_vel" else [vel, pos], dim=1)


class NetStepper:
    """The effort law per physics step for B actuators, as the consumers compute it: push history or run the
    LSTM / GRU, scale, clip with the DC-motor envelope. Differentiable unless used under no_grad. `pos_gain`
    (B,) scales each lane's position error (gain normalisation; None: 1, what an exported net computes)."""

    def __init__(
        self,
        spec: NetSpec,
        net: nn.Module,
        batch: int,
        envelope: dict | None = None,
        pos_gain: torch.Tensor | None = None,
    ) -> None:
        self.spec, self.net, self.batch, self.pos_gain = spec, net, batch, pos_gain
        env = envelope or spec.envelope()
        self.sat, self.vlim, self.elim = (env[k] for k in ENVELOPE)
        self.reset()

    def reset(self, pos_hist: torch.Tensor | None = None, vel_hist: torch.Tensor | None = None) -> None:
        """Zero state (Isaac Lab reset), or MLP histories (B, H) taken from a log."""
        h = self.spec.history_length
        self.pos_hist = torch.zeros(self.batch, h) if pos_hist is None else pos_hist
        self.vel_hist = torch.zeros(self.batch, h) if vel_hist is None else vel_hist
        shape = (self.spec.num_layers, self.batch, self.spec.hidden_size)
        if self.spec.kind == "lstm":
            self.state: tuple[torch.Tensor, torch.Tensor] | torch.Tensor | None = (
                torch.zeros(shape),
                torch.zeros(shape),
            )
        else:
            self.state = torch.zeros(shape) if self.spec.kind == "gru" else None

    def step(
        self, q_des: torch.Tensor, q: torch.Tensor, qd: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(computed, applied) effort [N·m] of this physics step, (B,) each."""
        err = q_des - q if self.pos_gain is None else (q_des - q) * self.pos_gain
        if self.spec.kind == "mlp":
            self.pos_hist = torch.cat([err[:, None], self.pos_hist[:, :-1]], dim=1)
            self.vel_hist = torch.cat([qd[:, None], self.vel_hist[:, :-1]], dim=1)
            computed = (
                self.net(mlp_input(self.spec, self.pos_hist, self.vel_hist))[:, 0] * self.spec.torque_scale
            )
        else:
            x = torch.stack([err, qd], dim=1)[:, None, :]
            out, self.state = self.net(x, self.state)
            computed = out[:, 0]
        return computed, dc_clip(computed, qd, self.sat, self.vlim, self.elim)


def count_parameters(net: nn.Module) -> int:
    """Trainable weights of a network."""
    return int(sum(p.numel() for p in net.parameters() if p.requires_grad))
