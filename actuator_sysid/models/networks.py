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

Input channels (`NetSpec.inputs`): today's layout is ("pos_error", "vel"), what Isaac Lab's and Newton's net
classes feed. A drive commanded in torque or in MIT mode (τ = kp·(q_des − q) + kd·(qd_des − qd) + τ_ff) needs its
commands too: "vel_error" (qd_des − qd) in place of "vel", then any of "tau_ff", "tau_cmd" (the drive's law at
the command's gains), "kp", "kd" in that order, each scaled by `command_scales`. `NetStepper.step` takes them as
a (B, 4) `cmd` of COMMANDS columns (qd_des, tau_ff, kp, kd).
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
BASE_INPUTS = ("pos_error", "vel")  # the layout Isaac Lab's ActuatorNet classes and Newton's MLP / LSTM feed
COMMAND_INPUTS = ("tau_ff", "tau_cmd", "kp", "kd")  # channels after the first two, in this order
COMMANDS = ("qd_des", "tau_ff", "kp", "kd")  # columns of the (B, 4) command NetStepper.step takes
INPUT_MEANING = {
    "pos_error": "q_des - q [rad]",
    "vel": "qd, measured [rad/s]",
    "vel_error": "qd_des - qd [rad/s]",
    "tau_ff": "feed-forward torque command [N·m]",
    "tau_cmd": "the drive's command kp·(q_des - q) + kd·(qd_des - qd) + tau_ff [N·m at SI gains]",
    "kp": "position gain of the command, as logged",
    "kd": "velocity gain of the command, as logged",
}


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
    inputs: list[str] = field(default_factory=lambda: list(BASE_INPUTS))  # input channels, in order
    command_scales: dict[str, float] = field(default_factory=dict)  # scale of each COMMAND_INPUTS channel

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
        self.inputs = list(self.inputs)
        check_inputs(self.inputs)
        self.command_scales = {c: float(self.command_scales.get(c, 1.0)) for c in self.inputs[2:]}

    @property
    def history_length(self) -> int:
        return max(self.input_idx) + 1

    @property
    def n_channels(self) -> int:
        return len(self.inputs)

    @property
    def reads_commands(self) -> bool:
        """Whether the net reads more than today's [q_des − q, qd]: then Isaac Lab's and Newton's own net
        classes cannot feed it."""
        return list(self.inputs) != list(BASE_INPUTS)

    def channel_scales(self) -> list[float]:
        """The scale of every input channel, in order (vel_error shares vel_scale)."""
        return [self.pos_scale, self.vel_scale] + [self.command_scales[c] for c in self.inputs[2:]]

    def envelope(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in ENVELOPE}

    def as_dict(self) -> dict:
        return asdict(self)


def check_inputs(inputs: list[str]) -> None:
    """A valid channel layout: pos_error, vel or vel_error, then COMMAND_INPUTS in order, none twice."""
    head_ok = len(inputs) >= 2 and inputs[0] == "pos_error" and inputs[1] in ("vel", "vel_error")
    rest = list(inputs[2:])
    if not head_ok or rest != [c for c in COMMAND_INPUTS if c in rest]:
        raise ValueError(
            f"network inputs must be 'pos_error', then 'vel' or 'vel_error', then any of {list(COMMAND_INPUTS)} "
            f"in that order, got {inputs!r}"
        )


class ActuatorMLP(nn.Module):
    """Isaac Lab ActuatorNetMLP network: scaled [pos_err, vel] histories (then any command channels' histories)
    → torque in network units."""

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
    """Isaac Lab ActuatorNetLSTM network: raw [q_des − q, qd] (N, 1, 2) and (h, c) → (torque N·m, (h, c));
    a commands net takes (N, 1, C), the further channels after those two (NetSpec.inputs)."""

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
        command_scales: list[float] | None = None,
    ) -> None:
        super().__init__()
        scales = [pos_scale, vel_scale, *(command_scales or [])]
        self.lstm = nn.LSTM(len(scales), hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, 1)
        self.register_buffer("in_scale", torch.tensor(scales, dtype=torch.float32))
        self.register_buffer("out_scale", torch.tensor(torque_scale, dtype=torch.float32))

    def forward(
        self, x: torch.Tensor, hc: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        y, (h, c) = self.lstm(x * self.in_scale, hc)
        return self.linear(y[:, -1, :]) * self.out_scale, (h, c)


class ActuatorGRU(nn.Module):
    """A GRU actuator net for Newton's DriveNeuralGRU: raw [q_des − q, qd] (N, 1, 2) and h → (torque N·m, h);
    a commands net takes (N, 1, C) (NetSpec.inputs)."""

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
        command_scales: list[float] | None = None,
    ) -> None:
        super().__init__()
        scales = [pos_scale, vel_scale, *(command_scales or [])]
        self.gru = nn.GRU(len(scales), hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, 1)
        self.register_buffer("in_scale", torch.tensor(scales, dtype=torch.float32))
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
        return ActuatorMLP(spec.n_channels * len(spec.input_idx), spec.hidden, spec.activation)
    cls = ActuatorLSTM if spec.kind == "lstm" else ActuatorGRU
    extra = spec.channel_scales()[2:]
    return cls(spec.hidden_size, spec.num_layers, spec.pos_scale, spec.vel_scale, spec.torque_scale, extra)


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


def mlp_input(
    spec: NetSpec, pos_hist: torch.Tensor, vel_hist: torch.Tensor, cmd_hist: torch.Tensor | None = None
) -> torch.Tensor:
    """§A.7.2–3: histories (B, H) with column 0 the current step → the scaled (B, C·K) network input; a
    commands net's further channels (B, C − 2, H) follow, each scaled, after the [pos, vel] blocks."""
    idx = torch.as_tensor(spec.input_idx, dtype=torch.long)
    pos, vel = pos_hist[:, idx] * spec.pos_scale, vel_hist[:, idx] * spec.vel_scale
    blocks = [pos, vel] if spec.input_order == "pos_vel" else [vel, pos]
    for c, name in enumerate(spec.inputs[2:]):
        assert cmd_hist is not None  # NetStepper and the training tables always give it for such a spec
        blocks.append(cmd_hist[:, c][:, idx] * spec.command_scales[name])
    return torch.cat(blocks, dim=1)


def channels(
    spec: NetSpec,
    err: torch.Tensor,
    qd: torch.Tensor,
    cmd: torch.Tensor | None,
    gain: torch.Tensor | float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(position error × gain, velocity channel, further channels (B, C − 2)) of one step, unscaled, from the
    position error q_des − q: the velocity channel is qd or qd_des − qd; `cmd` (B, 4) holds COMMANDS (qd_des,
    tau_ff, kp, kd); tau_cmd is the drive's own law on them."""
    if spec.reads_commands and cmd is None:
        raise ValueError(
            f"this net reads {spec.inputs}: give NetStepper.step the commands (B, 4) as {list(COMMANDS)}"
        )
    if cmd is None:
        return err * gain, qd, err.new_zeros(err.shape[0], 0)
    qd_des, tau_ff, kp, kd = cmd.unbind(-1)
    named = {"tau_ff": tau_ff, "tau_cmd": kp * err + kd * (qd_des - qd) + tau_ff, "kp": kp, "kd": kd}
    vel = qd if spec.inputs[1] == "vel" else qd_des - qd
    extra = [named[c] for c in spec.inputs[2:]]
    return err * gain, vel, torch.stack(extra, -1) if extra else err.new_zeros(err.shape[0], 0)


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

    def reset(
        self,
        pos_hist: torch.Tensor | None = None,
        vel_hist: torch.Tensor | None = None,
        cmd_hist: torch.Tensor | None = None,
    ) -> None:
        """Zero state (Isaac Lab reset), or MLP histories (B, H) (commands: (B, C − 2, H)) taken from a log."""
        h, extra = self.spec.history_length, self.spec.n_channels - 2
        self.pos_hist = torch.zeros(self.batch, h) if pos_hist is None else pos_hist
        self.vel_hist = torch.zeros(self.batch, h) if vel_hist is None else vel_hist
        self.cmd_hist = torch.zeros(self.batch, extra, h) if cmd_hist is None else cmd_hist
        shape = (self.spec.num_layers, self.batch, self.spec.hidden_size)
        if self.spec.kind == "lstm":
            self.state: tuple[torch.Tensor, torch.Tensor] | torch.Tensor | None = (
                torch.zeros(shape),
                torch.zeros(shape),
            )
        else:
            self.state = torch.zeros(shape) if self.spec.kind == "gru" else None

    def step(
        self, q_des: torch.Tensor, q: torch.Tensor, qd: torch.Tensor, cmd: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(computed, applied) effort [N·m] of this physics step, (B,) each; `cmd` (B, 4): COMMANDS, needed
        by a net that reads them (spec.reads_commands)."""
        gain = 1.0 if self.pos_gain is None else self.pos_gain
        err, vel, extra = channels(self.spec, q_des - q, qd, cmd, gain)
        if self.spec.kind == "mlp":
            self.pos_hist = torch.cat([err[:, None], self.pos_hist[:, :-1]], dim=1)
            self.vel_hist = torch.cat([vel[:, None], self.vel_hist[:, :-1]], dim=1)
            self.cmd_hist = torch.cat([extra[:, :, None], self.cmd_hist[:, :, :-1]], dim=2)
            x = mlp_input(self.spec, self.pos_hist, self.vel_hist, self.cmd_hist)
            computed = self.net(x)[:, 0] * self.spec.torque_scale
        else:
            x = torch.cat([err[:, None], vel[:, None], extra], dim=1)[:, None, :]
            out, self.state = self.net(x, self.state)
            computed = out[:, 0]
        return computed, dc_clip(computed, qd, self.sat, self.vlim, self.elim)


def count_parameters(net: nn.Module) -> int:
    """Trainable weights of a network."""
    return int(sum(p.numel() for p in net.parameters() if p.requires_grad))
