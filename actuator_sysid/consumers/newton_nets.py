# mypy: disable-error-code="index, misc"
# (Warp's kernel DSL: arrays indexed by thread ids, wp.tid() unpacked; mypy reads them as Python)
"""Newton 1.8 neural drives for nets that read the drive's commands (τ_ff, qd_des, kp, kd).

Newton's DriveNeuralMLP and DriveNeuralLSTM build their input from q_des − q and qd alone. These subclasses
run the same ONNX checkpoints (our newton.onnx) on the channels named in its metadata `inputs`
(models/networks.py NetSpec.inputs): q_des − q, qd or qd_des − qd (target_vel), τ_ff (the actuator's
feed-forward, `control.joint_act`), and the command's gains from the per-DOF Control arrays `kp` and `kd`,
which the actuator registers and the application writes each step; tau_cmd = kp·(q_des − q) +
kd·(qd_des − qd) + τ_ff. Explicit effort mode only. Importing this module imports Newton and Warp.

    builder.add_actuator(DriveNeuralMLPCommands, index=dof, model_path="newton.onnx",
                         clamping=[(ClampingDCMotor, envelope)])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import warp as wp

# Newton's own checkpoint readers (the public drives use them; Newton exports no public name for them)
from newton._src.actuators.utils import _looks_like_torch_checkpoint, load_checkpoint, load_metadata
from newton.actuators import DriveNeuralLSTM, DriveNeuralMLP

if TYPE_CHECKING:  # Newton's drives annotate their buffers with Warp's DSL types, which mypy cannot check
    _MLPBase: Any = object
    _LSTMBase: Any = object
else:
    _MLPBase, _LSTMBase = DriveNeuralMLP, DriveNeuralLSTM

__all__ = ["COMMAND_CODES", "DriveNeuralLSTMCommands", "DriveNeuralMLPCommands"]

COMMAND_CODES = {"tau_ff": 0, "tau_cmd": 1, "kp": 2, "kd": 3}  # channels after the first two, as kernel codes
GAIN_INPUTS = {"kp": ("tau_cmd", "kp"), "kd": ("tau_cmd", "kd")}  # Control array → channels that read it


@wp.kernel
def _channels_kernel(
    target_pos: wp.array[float],
    positions: wp.array[float],
    velocities: wp.array[float],
    target_vel: wp.array[float],
    feedforward: wp.array[float],
    kp: wp.array[float],
    kd: wp.array[float],
    pos_indices: wp.array[wp.uint32],
    vel_indices: wp.array[wp.uint32],
    target_pos_indices: wp.array[wp.uint32],
    target_vel_indices: wp.array[wp.uint32],
    vel_error: int,
    has_ff: int,
    has_kp: int,
    has_kd: int,
    codes: wp.array[int],
    out: wp.array2d[float],
):
    """One step's raw channels (N, C): q_des − q, qd or qd_des − qd, then tau_ff, tau_cmd, kp, kd by code."""
    i = wp.tid()
    dof = vel_indices[i]
    ti = target_vel_indices[i]
    err = target_pos[target_pos_indices[i]] - positions[pos_indices[i]]
    qd = velocities[dof]
    vel_err = target_vel[ti] - qd
    tau_ff = 0.0
    if has_ff != 0:
        tau_ff = feedforward[ti]
    g_p = 0.0
    if has_kp != 0:
        g_p = kp[dof]
    g_d = 0.0
    if has_kd != 0:
        g_d = kd[dof]
    out[i, 0] = err
    out[i, 1] = qd
    if vel_error != 0:
        out[i, 1] = vel_err
    for c in range(codes.shape[0]):
        code = codes[c]
        v = tau_ff
        if code == 1:
            v = g_p * err + g_d * vel_err + tau_ff  # the drive's law, models/networks.py channels()
        elif code == 2:
            v = g_p
        elif code == 3:
            v = g_d
        out[i, 2 + c] = v


@wp.kernel
def _mlp_input_kernel(
    current: wp.array2d[float],
    history: wp.array3d[float],
    input_idx: wp.array[int],
    scales: wp.array[float],
    k_per_block: int,
    pos_first: int,
    out: wp.array2d[float],
):
    """(N, C·K) MLP input: per channel block, the values at input_idx steps back times the channel's scale;
    the first two blocks [pos, vel] or [vel, pos] (input_order), the command channels after them."""
    i, k = wp.tid()
    ch = k // k_per_block
    if ch < 2 and pos_first == 0:
        ch = 1 - ch
    idx = input_idx[k % k_per_block]
    v = current[i, ch]
    if idx > 0:
        v = history[idx - 1, i, ch]
    out[i, k] = v * scales[ch]


@wp.kernel
def _roll_kernel(current: wp.array2d[float], src: wp.array3d[float], dst: wp.array3d[float]):
    """dst = [current, src[0], …, src[H − 2]]: the newest step first."""
    t, i, c = wp.tid()
    if t == 0:
        dst[0, i, c] = current[i, c]
    else:
        dst[t, i, c] = src[t - 1, i, c]


@wp.kernel
def _zero_masked_kernel(buf: wp.array3d[float], mask: wp.array[wp.bool]):
    t, i, c = wp.tid()
    if mask[i]:
        buf[t, i, c] = 0.0


@wp.kernel
def _sequence_kernel(current: wp.array2d[float], out: wp.array3d[float]):
    """The LSTM's (1, N, C) input: the raw channels (the graph scales them)."""
    i, c = wp.tid()
    out[0, i, c] = current[i, c]


@wp.kernel
def _effort_kernel(src: wp.array2d[float], scale: float, dst: wp.array[float]):
    i = wp.tid()
    dst[i] = src[i, 0] * scale


def _command_layout(model_path: str, cls: str) -> tuple[list[str], dict[str, Any]]:
    """(inputs, metadata) of an ONNX commands checkpoint, refused where another class should run it."""
    if _looks_like_torch_checkpoint(model_path):
        raise ValueError(f"{cls} runs ONNX checkpoints only (newton.onnx); got {model_path!r}")
    meta = load_metadata(model_path)
    inputs = list(meta.get("inputs") or ["pos_error", "vel"])
    rest = inputs[2:]
    if (
        inputs[:1] != ["pos_error"]
        or inputs[1:2] not in (["vel"], ["vel_error"])
        or not set(rest) <= set(COMMAND_CODES)
    ):
        raise ValueError(f"{cls}: checkpoint {model_path!r} has inputs {inputs}, not a net's channel layout")
    if inputs == ["pos_error", "vel"]:
        raise ValueError(
            f"{cls}: checkpoint {model_path!r} reads q_des − q and qd only: run it with Newton's own class"
        )
    return inputs, meta


class _CommandChannels:
    """What both drives share: the channel layout, the Control arrays it reads and one step's channels."""

    inputs: list[str]
    custom_inputs: tuple[str, ...]
    _current: wp.array
    _codes: wp.array
    _num_actuators: int
    _device: wp.Device | None

    def _setup_channels(self, inputs: list[str]) -> None:
        self.inputs = inputs
        self.custom_inputs = tuple(g for g, reads in GAIN_INPUTS.items() if set(reads) & set(inputs[2:]))

    def _finalize_channels(self, device: wp.Device, n: int) -> None:
        self._current = wp.zeros((n, len(self.inputs)), dtype=wp.float32, device=device)
        self._codes = wp.array([COMMAND_CODES[c] for c in self.inputs[2:]], dtype=int, device=device)

    def _compute_channels(self, args: tuple, custom_inputs: dict[str, Any] | None, device: Any) -> None:
        """Fill self._current from compute()'s standard arguments and the gains' Control arrays."""
        positions, velocities, target_pos, target_vel, feedforward, pi, vi, tpi, tvi = args
        gains = {}
        for name in self.custom_inputs:
            arr = (custom_inputs or {}).get(name)
            if arr is None:
                raise ValueError(
                    f"{type(self).__name__} reads the command's {name} from sim_control.{name} (per DOF, SI): "
                    "assign it before stepping the actuator"
                )
            gains[name] = arr
        wp.launch(
            _channels_kernel,
            dim=self._num_actuators,
            inputs=[
                target_pos,
                positions,
                velocities,
                target_vel,
                feedforward,
                gains.get("kp"),
                gains.get("kd"),
                pi,
                vi,
                tpi,
                tvi,
                int(self.inputs[1] == "vel_error"),
                int(feedforward is not None),
                int("kp" in gains),
                int("kd" in gains),
                self._codes,
            ],
            outputs=[self._current],
            device=device,
        )

    def _implicit_supported(self) -> bool:
        return False  # the implicit solve linearises in q and qd and would drop the commands

    def prepare_implicit(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} runs in explicit effort mode only (its commands have no linearisation)"
        )


class DriveNeuralMLPCommands(_CommandChannels, _MLPBase):
    """DriveNeuralMLP for a net that also reads the drive's commands (module docstring)."""

    SHARED_PARAMS: ClassVar[set[str]] = {"model_path"}

    @dataclass
    class State(DriveNeuralMLP.State):
        """Every channel's history, (history_length, N, C), newest first."""

        history: wp.array | None = None

        def reset(self, mask: wp.array[wp.bool] | None = None) -> None:
            assert self.history is not None  # state() always sets it
            if mask is None:
                self.history.zero_()
            else:
                h = self.history
                wp.launch(_zero_masked_kernel, dim=h.shape, inputs=[h, mask], device=h.device)

    def __init__(self, model_path: str):
        inputs, meta = _command_layout(model_path, "DriveNeuralMLPCommands")
        super().__init__(model_path)
        self._setup_channels(inputs)
        scales = meta.get("command_scales") or {}
        missing = [c for c in inputs[2:] if c not in scales]
        if missing:
            raise ValueError(
                f"DriveNeuralMLPCommands: checkpoint {model_path!r} has no command_scales {missing}"
            )
        self.channel_scales = [
            float(self.pos_scale),
            float(self.vel_scale),
            *(float(scales[c]) for c in inputs[2:]),
        ]

    def finalize(self, device: wp.Device, num_actuators: int) -> None:
        self._device, self._num_actuators = device, num_actuators
        runtime, _ = load_checkpoint(self.model_path, device=device, input_batch_axes=0)
        self._network = self.network = runtime
        self._net_input_name, self._net_output_name = runtime.inputs[0].name, runtime.outputs[0].name
        self._finalize_channels(device, num_actuators)
        self._net_input = wp.zeros(
            (num_actuators, len(self.inputs) * len(self.input_idx)), dtype=wp.float32, device=device
        )
        self._input_idx_wp: wp.array = wp.array(self.input_idx, dtype=wp.int32, device=device)
        self._scales: wp.array = wp.array(self.channel_scales, dtype=wp.float32, device=device)
        out_shape = runtime({self._net_input_name: self._net_input})[self._net_output_name].shape
        if out_shape != (num_actuators, 1):
            raise ValueError(
                f"DriveNeuralMLPCommands: {self.model_path!r} gives {out_shape} for an input of "
                f"{len(self.inputs)} channels × {len(self.input_idx)} steps, expected {(num_actuators, 1)}"
            )

    def state(self, num_actuators: int, device: wp.Device) -> DriveNeuralMLPCommands.State:
        shape = (self.history_length, num_actuators, len(self.inputs))
        return DriveNeuralMLPCommands.State(history=wp.zeros(shape, dtype=wp.float32, device=device))

    def compute(
        self,
        positions: wp.array[float],
        velocities: wp.array[float],
        target_pos: wp.array[float],
        target_vel: wp.array[float],
        feedforward: wp.array[float] | None,
        pos_indices: wp.array[wp.uint32],
        vel_indices: wp.array[wp.uint32],
        target_pos_indices: wp.array[wp.uint32],
        target_vel_indices: wp.array[wp.uint32],
        forces: wp.array[float],
        state: DriveNeuralMLP.State,
        dt: float,
        device: wp.Device | None = None,
        *,
        custom_inputs: dict[str, Any] | None = None,
    ) -> None:
        device = device or self._device
        assert isinstance(state, DriveNeuralMLPCommands.State) and state.history is not None
        args: tuple = (positions, velocities, target_pos, target_vel, feedforward)
        args += (pos_indices, vel_indices, target_pos_indices, target_vel_indices)
        self._compute_channels(args, custom_inputs, device)
        k = len(self.input_idx)
        wp.launch(
            _mlp_input_kernel,
            dim=(self._num_actuators, len(self.inputs) * k),
            inputs=[
                self._current,
                state.history,
                self._input_idx_wp,
                self._scales,
                k,
                int(self.input_order == "pos_vel"),
            ],
            outputs=[self._net_input],
            device=device,
        )
        effort = self._network({self._net_input_name: self._net_input})[self._net_output_name]
        wp.launch(
            _effort_kernel,
            dim=len(forces),
            inputs=[effort, float(self.effort_scale)],
            outputs=[forces],
            device=device,
        )

    def update_state(self, current_state: DriveNeuralMLP.State, next_state: DriveNeuralMLP.State) -> None:
        if next_state is None:
            return
        assert isinstance(current_state, DriveNeuralMLPCommands.State) and current_state.history is not None
        assert isinstance(next_state, DriveNeuralMLPCommands.State) and next_state.history is not None
        dst = next_state.history
        wp.launch(
            _roll_kernel,
            dim=dst.shape,
            inputs=[self._current, current_state.history],
            outputs=[dst],
            device=self._device,
        )


class DriveNeuralLSTMCommands(_CommandChannels, _LSTMBase):
    """DriveNeuralLSTM for a net that also reads the drive's commands: its (1, N, C) input is the raw channels,
    which the graph scales itself (module docstring)."""

    SHARED_PARAMS: ClassVar[set[str]] = {"model_path"}

    def __init__(self, model_path: str):
        inputs, _ = _command_layout(model_path, "DriveNeuralLSTMCommands")
        super().__init__(model_path)
        self._setup_channels(inputs)

    def finalize(self, device: wp.Device, num_actuators: int) -> None:
        self._device, self._num_actuators = device, num_actuators
        names = (self._input_name, self._hidden_in_name, self._cell_in_name)
        runtime, _ = load_checkpoint(self.model_path, device=device, input_batch_axes=dict.fromkeys(names, 1))
        self._network = self.network = runtime
        self._finalize_channels(device, num_actuators)
        self._net_input = wp.zeros((1, num_actuators, len(self.inputs)), dtype=wp.float32, device=device)
        shape = (self._num_layers, num_actuators, self._hidden_size)
        self._next_hidden = wp.zeros(shape, dtype=wp.float32, device=device)
        self._next_cell = wp.zeros(shape, dtype=wp.float32, device=device)
        out = runtime(
            {
                self._input_name: self._net_input,
                self._hidden_in_name: self._next_hidden,
                self._cell_in_name: self._next_cell,
            }
        )
        if out[self._output_name].shape != (num_actuators, 1):
            raise ValueError(
                f"DriveNeuralLSTMCommands: {self.model_path!r} gives {out[self._output_name].shape} for an input "
                f"of {len(self.inputs)} channels, expected {(num_actuators, 1)}"
            )

    def compute(
        self,
        positions: wp.array[float],
        velocities: wp.array[float],
        target_pos: wp.array[float],
        target_vel: wp.array[float],
        feedforward: wp.array[float] | None,
        pos_indices: wp.array[wp.uint32],
        vel_indices: wp.array[wp.uint32],
        target_pos_indices: wp.array[wp.uint32],
        target_vel_indices: wp.array[wp.uint32],
        forces: wp.array[float],
        state: DriveNeuralLSTM.State,
        dt: float,
        device: wp.Device | None = None,
        *,
        custom_inputs: dict[str, Any] | None = None,
    ) -> None:
        device = device or self._device
        n = self._num_actuators
        args: tuple = (positions, velocities, target_pos, target_vel, feedforward)
        args += (pos_indices, vel_indices, target_pos_indices, target_vel_indices)
        self._compute_channels(args, custom_inputs, device)
        wp.launch(
            _sequence_kernel,
            dim=(n, len(self.inputs)),
            inputs=[self._current],
            outputs=[self._net_input],
            device=device,
        )
        out = self._network(
            {
                self._input_name: self._net_input,
                self._hidden_in_name: state.hidden,
                self._cell_in_name: state.cell,
            }
        )
        shape = (self._num_layers, n, self._hidden_size)
        wp.copy(self._next_hidden, out[self._hidden_out_name].reshape(shape))
        wp.copy(self._next_cell, out[self._cell_out_name].reshape(shape))
        wp.launch(
            _effort_kernel,
            dim=len(forces),
            inputs=[out[self._output_name], float(self.effort_scale)],
            outputs=[forces],
            device=device,
        )
