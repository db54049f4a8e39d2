"""Network checkpoints of a fit: TorchScript for Isaac Lab; ONNX and a torch.export pt2 archive for Newton 1.8.

Isaac Lab loads `torch.jit.load(network_file)` (consumer-semantics §A.7–A.9); we add the `metadata.json`
extra file Isaac Lab itself writes when it hands a net to Newton (§A.11). Newton 1.8 accepts only
`torch.export.save` archives and reads `metadata.json` from them (docs/consumer-semantics.md §C.2,
DriveNeuralMLP / DriveNeuralLSTM): `model_type`, `input_order`, `input_idx`, `pos_scale`, `vel_scale`, `effort_scale`
(DriveNeuralMLP) and `num_layers`, `hidden_size` (DriveNeuralLSTM, required). The LSTM carries its scales
inside (Isaac Lab feeds it raw inputs), so its metadata scales are 1. The DC-motor envelope is not in the
checkpoint: Isaac Lab's cfg and Newton's NewtonDCMotorClampingAPI hold it.

Newton 1.8 deprecates Torch checkpoints in favour of ONNX, run by Warp-NN (drive_neural_mlp.py,
drive_neural_lstm.py): the same metadata as one JSON `metadata` property in the model's metadata_props
(utils.py `_extract_metadata`); the MLP takes (N, 2K) → (N, 1); the LSTM is sequence-first, (1, N, 2) and h, c
(L, N, H) → effort (N, 1), h, c (L, N, H), with the six tensor names in its metadata. Batch axes are dynamic.

A GRU is for Newton's DriveNeuralGRU alone (§C.2): ONNX only (it refuses any other checkpoint), metadata
`model_type` "gru", `input_columns` ["position_error", "velocity"], `normalization` (our input scales as
std = 1 / scale, mean 0; torque mean 0, std 1) and `sample_dt_s`, the physics step it was trained at, which
Newton requires the simulation to run at. Isaac Lab 3.0 has no GRU actuator class: a GRU has no
torchscript.pt, no ACTUATORS_NET, and a finding says so.

A gain-normalised net (fitting/training.py) is written for the kp it was normalised to, the most logged one;
the metadata's `gain` says which, and `fitting.training.at_gain` refolds it for another kp.

A net that reads the drive's commands (NetSpec.inputs beyond [q_des − q, qd]) takes C input channels: the MLP
(N, C·K), the LSTM / GRU (·, N, C); the metadata's `inputs` and `input_scales` name them. Isaac Lab runs it with
consumers/isaaclab.py ActuatorNetMLPCommands / ActuatorNetLSTMCommands. Newton's DriveNeuralMLP / DriveNeuralLSTM
cannot feed it (NEWTON_NO_COMMANDS): Newton runs its newton.onnx with consumers/newton_nets.py
DriveNeuralMLPCommands / DriveNeuralLSTMCommands, which read ONNX only (no newton.pt2, no USD prim). Newton's
DriveNeuralGRU runs one where the channels beyond its built-in features are one (its one custom input, §C.8).
"""

from __future__ import annotations

import io
import json
import re
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from ..fitting.result import ModelFit, NetFit, ResultLike, as_result
from ..models.families import NET_FAMILIES
from ..models.networks import ActuatorGRU, ActuatorLSTM
from .selection import ExportError, Finding

if TYPE_CHECKING:
    from onnx import ModelProto

NET_FORMATS = ("torchscript.pt", "newton.onnx", "newton.pt2")
KIND_FORMATS = {
    "mlp": NET_FORMATS,
    "lstm": NET_FORMATS,
    "gru": ("newton.onnx",),
}  # the formats a consumer runs
NO_FORMAT = {
    "torchscript.pt": "Isaac Lab 3.0 has no GRU actuator class (ActuatorNetMLP / ActuatorNetLSTM only)",
    "newton.pt2": "Newton 1.8's DriveNeuralGRU runs ONNX checkpoints only",
}
GRU_INPUT_COLUMNS = ["position_error", "velocity"]  # DriveNeuralGRU's names for q_des − q and qd
GRU_COLUMN = {"pos_error": "position_error", "vel": "velocity", "vel_error": "velocity_error"}  # built-in
NEWTON_NO_COMMANDS = (
    "Newton 1.8's DriveNeuralMLP and DriveNeuralLSTM compute their inputs themselves, q_des − q and qd only "
    "(drive_neural_mlp.py / drive_neural_lstm.py _compute_inputs_kernel), and pass neither the feed-forward "
    "effort, the target velocity nor any gain to the net, so no NewtonNeuralControlAPI prim runs it; Newton runs "
    "its newton.onnx with actuator_sysid.consumers.newton_nets DriveNeuralMLPCommands / DriveNeuralLSTMCommands "
    "(builder.add_actuator; docs/consumer-semantics.md §C.8)"
)
# the consumer package's Newton drives (consumers/newton_nets.py) for an MLP or LSTM that reads commands
COMMANDS_DRIVES = {"mlp": "DriveNeuralMLPCommands", "lstm": "DriveNeuralLSTMCommands"}
# tensor names of the ONNX LSTM, which DriveNeuralLSTM reads from the metadata (drive_neural_lstm.py)
ONNX_LSTM_NAMES = {
    "input_name": "input",
    "hidden_in_name": "hidden_in",
    "cell_in_name": "cell_in",
    "output_name": "effort",
    "hidden_out_name": "hidden_out",
    "cell_out_name": "cell_out",
}


NetEntry = ModelFit | Mapping[str, Any]  # a fitted network: typed, or its JSON entry (as fit.json holds it)


def as_net(model: NetEntry) -> NetFit:
    """The typed network fit of a result entry (a typed one passes through)."""
    if isinstance(model, NetFit):
        return model
    return NetFit.from_json(model.to_json() if isinstance(model, ModelFit) else model)


def net_model(
    result: ResultLike, joint: str | None = None, kind: str | None = None
) -> tuple[str, str, NetFit]:
    """(joint, kind, result entry) of a fitted network: the named joint (else the only joint with a net) and
    kind (else the best-ranked net: the joint's ranking metric, torque error on a torque log)."""
    nets = {
        j: {k: as_net(m) for k, m in jr.models.items() if k in NET_FAMILIES}
        for j, jr in as_result(result).joints.items()
    }
    nets = {j: v for j, v in nets.items() if v}
    if not nets:
        raise ExportError(
            "this fit has no network model: fit with --models mlp, lstm or gru to export a checkpoint"
        )
    if joint is None:
        if len(nets) > 1:
            raise ExportError(
                f"several joints have networks {sorted(nets)}: name one (CLI --family joint=mlp)"
            )
        joint = next(iter(nets))
    if joint not in nets:
        raise ExportError(f"joint {joint!r} has no network model; joints with one: {sorted(nets)}")
    if kind is None:  # the best-ranked net (by validation torque error where the log measures torque)
        order = [r.family for r in as_result(result).joints[joint].ranking]
        kind = min(nets[joint], key=lambda k: order.index(k) if k in order else len(order))
    if kind not in nets[joint]:
        raise ExportError(f"joint {joint!r} has no fitted {kind!r} network; fitted: {sorted(nets[joint])}")
    return joint, kind, nets[joint][kind]


def gain_metadata(model: NetEntry) -> dict:
    """The `gain` metadata block of a gain-normalised net: the kp this checkpoint is for, and how to change it."""
    spec = as_net(model).network
    if spec.get("kp_ref") is None:
        return {}
    return {
        "gain": {
            "kp": spec["kp_ref"],
            "gain_units": spec.get("gain_units"),
            "note": "trained with the position error times kp_log / kp; this checkpoint is the actuator at "
            "this kp (the most logged one); for another kp multiply the position input scale "
            "by kp_new / kp (fitting.training.at_gain)",
        }
    }


def input_metadata(model: NetEntry) -> dict:
    """The `inputs` block of a net that reads the drive's commands: channels in order, their meaning and the
    MLP's scales of the further channels (empty for today's [q_des − q, qd])."""
    from ..models.networks import BASE_INPUTS, INPUT_MEANING

    spec = as_net(model).network
    inputs = list(spec.get("inputs") or BASE_INPUTS)
    if inputs == list(BASE_INPUTS):
        return {}
    return {
        "inputs": inputs,
        "input_meaning": {c: INPUT_MEANING[c] for c in inputs},
        "command_scales": dict(spec.get("command_scales") or {}),
        "commands_note": "gains are the drive's kp / kd in SI (Isaac Lab: the actuator's stiffness / damping; Newton: the "
        "Control arrays kp / kd that consumers.newton_nets declares); "
        "the velocity channel is qd_des - qd where inputs name vel_error",
    }


def metadata(model: NetEntry) -> dict:
    """Checkpoint metadata the consumers read (Isaac Lab §A.11 keys plus Newton's required ones)."""
    net = as_net(model)
    spec = net.network
    if spec["kind"] == "mlp":
        return {
            "model_type": "mlp",
            "input_order": spec["input_order"],
            "input_idx": list(spec["input_idx"]),
            "pos_scale": spec["pos_scale"],
            "vel_scale": spec["vel_scale"],
            "torque_scale": spec["torque_scale"],
            "effort_scale": spec["torque_scale"],
            "pos_error": "q_des - q",
            "velocity": "qd (measured)",
            **gain_metadata(model),
            **input_metadata(model),
        }
    if spec["kind"] == "gru":
        return _gru_metadata(model)
    return {
        "model_type": "lstm",
        "num_layers": spec["num_layers"],
        "hidden_size": spec["hidden_size"],
        "pos_scale": 1.0,
        "vel_scale": 1.0,
        "effort_scale": 1.0,
        "pos_error": "q_des - q",
        "velocity": "qd (measured)",
        "note": "input and output scales are inside the module",
        **gain_metadata(model),
        **input_metadata(model),
    }


def gru_columns(model: NetEntry) -> tuple[list[str], list[str]]:
    """(input_columns, custom_inputs) of a GRU for Newton's DriveNeuralGRU: built-in features by Newton's name,
    the further channels (tau_ff, tau_cmd, kp, kd) as custom inputs under their own name."""
    from ..models.networks import BASE_INPUTS

    inputs = list(as_net(model).network.get("inputs") or BASE_INPUTS)
    return [GRU_COLUMN.get(c, c) for c in inputs], [c for c in inputs if c not in GRU_COLUMN]


def _gru_metadata(model: NetEntry) -> dict:
    """DriveNeuralGRU's metadata: input columns, their normalisation (std = 1 / our scale), sample_dt_s."""
    net = as_net(model)
    spec = net.network
    scales = list(net.weights["in_scale"]["data"])
    if not spec.get("sample_dt_s"):
        raise ExportError(
            "this GRU has no sample_dt_s (fitted before it was recorded): Newton's DriveNeuralGRU "
            "needs the physics step it was trained at; refit it"
        )
    columns, custom = gru_columns(model)
    return {
        "model_type": "gru",
        "num_layers": spec["num_layers"],
        "hidden_size": spec["hidden_size"],
        "input_columns": columns,
        **({"custom_inputs": custom} if custom else {}),
        "normalization": {
            "inputs": {
                "mean": dict.fromkeys(columns, 0.0),
                "std": {c: 1.0 / x for c, x in zip(columns, scales, strict=True)},
            },
            "targets": {"mean": {"torque": 0.0}, "std": {"torque": 1.0}},
        },
        "sample_dt_s": float(spec["sample_dt_s"]),
        "pos_error": "q_des - q",
        "velocity": "qd (measured)",
        "note": "the output scale is the graph's final Mul",
        **gain_metadata(model),
        **input_metadata(model),
    }


def commands_drive(model: NetEntry) -> str | None:
    """The consumer package's Newton drive class (consumers/newton_nets.py) that runs this net: an MLP or LSTM
    reading the drive's commands; None for any other net (Newton's own classes run it, or nothing does)."""
    spec = as_net(model).network
    inputs = list(spec.get("inputs") or ["pos_error", "vel"])
    return COMMANDS_DRIVES.get(spec["kind"]) if inputs != ["pos_error", "vel"] else None


def newton_unsupported(model: NetEntry) -> str | None:
    """Why Newton 1.8's own drive classes (and so a NewtonNeuralControlAPI prim) cannot run this net (None when
    they can): a commands-reading MLP or LSTM (NEWTON_NO_COMMANDS; commands_drive runs it), or a GRU whose
    channels beyond Newton's built-in features are more than the one custom input DriveNeuralGRU takes."""
    spec = as_net(model).network
    inputs = list(spec.get("inputs") or ["pos_error", "vel"])
    if inputs == ["pos_error", "vel"]:
        return None
    if spec["kind"] != "gru":
        return f"this {spec['kind']} net reads {inputs}: {NEWTON_NO_COMMANDS}"
    return _gru_unsupported(model)


def _gru_unsupported(model: NetEntry) -> str | None:
    """Why DriveNeuralGRU cannot run this GRU: more than one channel beyond its built-in features."""
    inputs = list(as_net(model).network.get("inputs") or ["pos_error", "vel"])
    custom = gru_columns(model)[1]
    if len(custom) > 1:
        return (
            f"this gru reads {inputs}: Newton 1.8's DriveNeuralGRU takes at most one custom input column "
            f"(drive_neural_gru.py _parse_custom_input_names), and {custom} are {len(custom)}; refit with "
            "networks.inputs 'auto' (tau_cmd carries the gains) for Newton"
        )
    return None


def _n_channels(spec: Mapping[str, Any]) -> int:
    """Input channels of a net's spec (2: [q_des − q, qd], a net fitted before channels were named)."""
    return len(spec.get("inputs") or GRU_INPUT_COLUMNS)


def _consumer_check(model: NetEntry, fmt: str) -> None:
    """Refuse a checkpoint format no consumer runs for this kind of net, saying why."""
    kind = as_net(model).network["kind"]
    if fmt not in KIND_FORMATS[kind]:
        raise ExportError(f"a {kind} net has no {fmt}: {NO_FORMAT[fmt]}; give Newton newton.onnx")
    if fmt == "newton.pt2" and (drive := commands_drive(model)) is not None:
        raise ExportError(
            f"no newton.pt2 for a {kind} net that reads the drive's commands: Newton runs it with "
            f"actuator_sysid.consumers.newton_nets.{drive}, which reads newton.onnx only (Newton 1.8 deprecates "
            "Torch checkpoints); give Newton newton.onnx"
        )


def _module(model: NetEntry) -> tuple[torch.nn.Module, str]:
    from ..fitting.training import network_from_result

    spec, net = network_from_result(as_net(model))
    return net.eval(), spec.kind


def torchscript_bytes(model: NetEntry) -> bytes:
    """The net as TorchScript with metadata.json, for Isaac Lab's ActuatorNetMLP / ActuatorNetLSTM."""
    _consumer_check(model, "torchscript.pt")
    net, _ = _module(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(net)
        buf = io.BytesIO()
        torch.jit.save(scripted, buf, _extra_files={"metadata.json": json.dumps(metadata(model))})
    return buf.getvalue()


def pt2_bytes(model: NetEntry) -> bytes:
    """The net as a torch.export archive with metadata.json, for Newton 1.8's DriveNeuralMLP / DriveNeuralLSTM."""
    _consumer_check(model, "newton.pt2")
    net, kind = _module(model)
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    spec = as_net(model).network
    n_ch = _n_channels(spec)
    if kind == "mlp":
        args: tuple = (torch.zeros(2, n_ch * len(spec["input_idx"])),)
        dynamic: tuple = ({0: batch},)
    else:
        shape = (spec["num_layers"], 2, spec["hidden_size"])
        args = (torch.zeros(2, 1, n_ch), (torch.zeros(shape), torch.zeros(shape)))
        dynamic = ({0: batch}, ({1: batch}, {1: batch}))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The tensor attributes")  # nn.LSTM's flat weights, harmless
        program = torch.export.export(net, args, dynamic_shapes=dynamic)
    buf = io.BytesIO()
    torch.export.save(program, buf, extra_files={"metadata.json": json.dumps(metadata(model))})
    return buf.getvalue()


def _onnx_lstm(net: ActuatorLSTM, meta: dict) -> ModelProto:
    """Newton's ONNX LSTM, written op by op: x (1, N, 2) · in_scale → LSTM → squeeze → linear · out_scale.

    torch.onnx lowers nn.LSTM with Slice, Transpose, Reshape and Gather around the LSTM op, which Warp-NN 0.4
    (Newton's ONNX runtime) does not run; the five ops here it does. ONNX orders the gates i, o, f, c where
    PyTorch stores i, f, g, o.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    lstm, hid, n_ch = net.lstm, net.lstm.hidden_size, net.lstm.input_size
    order = torch.cat([torch.arange(0, hid), torch.arange(3 * hid, 4 * hid), torch.arange(hid, 3 * hid)])

    def p(name: str) -> torch.Tensor:
        return lstm.get_parameter(name).detach()[order]

    w, r = p("weight_ih_l0"), p("weight_hh_l0")
    b = torch.cat([p("bias_ih_l0"), p("bias_hh_l0")])
    consts = {
        "in_scale": net.in_scale,
        "W": w[None],
        "R": r[None],
        "B": b[None],
        "squeeze_axes": torch.tensor([0, 1]),
        "linear_weight": net.linear.weight,
        "linear_bias": net.linear.bias,
        "out_scale": net.out_scale.reshape(1),
    }
    inits = [numpy_helper.from_array(v.detach().numpy(), name=k) for k, v in consts.items()]
    n = ONNX_LSTM_NAMES
    nodes = [
        helper.make_node("Mul", [n["input_name"], "in_scale"], ["x_scaled"]),
        helper.make_node(
            "LSTM",
            ["x_scaled", "W", "R", "B", "", n["hidden_in_name"], n["cell_in_name"]],
            ["y", n["hidden_out_name"], n["cell_out_name"]],
            hidden_size=hid,
        ),
        helper.make_node("Squeeze", ["y", "squeeze_axes"], ["y_last"]),
        helper.make_node("Gemm", ["y_last", "linear_weight", "linear_bias"], ["effort_units"], transB=1),
        helper.make_node("Mul", ["effort_units", "out_scale"], [n["output_name"]]),
    ]
    f32 = TensorProto.FLOAT
    io = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "actuator_lstm",
        [
            io(n["input_name"], f32, [1, "batch", n_ch]),
            io(n["hidden_in_name"], f32, [1, "batch", hid]),
            io(n["cell_in_name"], f32, [1, "batch", hid]),
        ],
        [
            io(n["output_name"], f32, ["batch", 1]),
            io(n["hidden_out_name"], f32, [1, "batch", hid]),
            io(n["cell_out_name"], f32, [1, "batch", hid]),
        ],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="actuator-sysid"
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def _onnx_gru(net: ActuatorGRU) -> ModelProto:
    """Newton's ONNX GRU, written op by op as DriveNeuralGRU parses it: x (1, N, 2) → GRU per layer (Squeeze
    between layers) → Squeeze → Gemm → scalar Mul by the output scale.

    DriveNeuralGRU admits only shape-only ops (Identity, Reshape, Squeeze, identity Transpose) from the input
    to the first GRU, so the input scales travel as its normalisation metadata, not as a Mul. Every layer takes
    its own initial state `hidden_in_<k>` (1, N, H) and gives `hidden_out_<k>`; linear_before_reset=1 is
    PyTorch's GRU, whose gates (r, z, n) ONNX orders z, r, h.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    gru, hid = net.gru, net.gru.hidden_size
    order = torch.cat([torch.arange(hid, 2 * hid), torch.arange(0, hid), torch.arange(2 * hid, 3 * hid)])
    consts: dict[str, torch.Tensor] = {
        "axes_dir": torch.tensor([1]),
        "axes_last": torch.tensor([0, 1]),
        "linear_weight": net.linear.weight,
        "linear_bias": net.linear.bias,
        "out_scale": net.out_scale.reshape(1),
    }
    nodes, f32 = [], TensorProto.FLOAT
    io = helper.make_tensor_value_info
    inputs = [io("input", f32, [1, "batch", gru.input_size])]
    outputs = [io("effort", f32, ["batch", 1])]
    x = "input"
    for k in range(gru.num_layers):
        w = getattr(gru, f"weight_ih_l{k}").detach()[order]
        r = getattr(gru, f"weight_hh_l{k}").detach()[order]
        b = torch.cat(
            [getattr(gru, f"bias_ih_l{k}").detach()[order], getattr(gru, f"bias_hh_l{k}").detach()[order]]
        )
        consts |= {f"W{k}": w[None], f"R{k}": r[None], f"B{k}": b[None]}
        inputs.append(io(f"hidden_in_{k}", f32, [1, "batch", hid]))
        outputs.append(io(f"hidden_out_{k}", f32, [1, "batch", hid]))
        nodes.append(
            helper.make_node(
                "GRU",
                [x, f"W{k}", f"R{k}", f"B{k}", "", f"hidden_in_{k}"],
                [f"y{k}", f"hidden_out_{k}"],
                hidden_size=hid,
                linear_before_reset=1,
            )
        )
        if k < gru.num_layers - 1:
            nodes.append(helper.make_node("Squeeze", [f"y{k}", "axes_dir"], [f"x{k + 1}"]))  # (1, N, H)
            x = f"x{k + 1}"
    last = f"y{gru.num_layers - 1}"
    nodes += [
        helper.make_node("Squeeze", [last, "axes_last"], ["y_last"]),
        helper.make_node("Gemm", ["y_last", "linear_weight", "linear_bias"], ["effort_units"], transB=1),
        helper.make_node("Mul", ["effort_units", "out_scale"], ["effort"]),
    ]
    inits = [numpy_helper.from_array(v.detach().numpy(), name=k) for k, v in consts.items()]
    graph = helper.make_graph(nodes, "actuator_gru", inputs, outputs, initializer=inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="actuator-sysid"
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def _onnx_mlp(net: torch.nn.Module, n_inputs: int) -> ModelProto:
    """The MLP through torch.onnx (dynamo): Gemm and the activation, with a dynamic batch axis."""
    import logging

    quiet = logging.getLogger("torch.onnx")  # "torchvision is not installed" notes, irrelevant here
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.export deprecation notes
            program = torch.onnx.export(
                net,
                (torch.zeros(2, n_inputs),),
                input_names=["input"],
                output_names=["effort"],
                dynamic_shapes={"x": {0: "batch"}},
                dynamo=True,
                verbose=False,
            )
    finally:
        quiet.setLevel(level)
    if program is None:  # dynamo=True always returns a program; None is the legacy exporter's answer
        raise ExportError("torch.onnx.export returned no ONNX program for the MLP")
    return program.model_proto


def onnx_unsupported(model: NetEntry) -> str | None:
    """Why this net has no newton.onnx export (None when it has one): Newton 1.8 runs one-layer ONNX LSTMs, and
    a GRU with at most one custom column."""
    spec = as_net(model).network
    if spec["kind"] == "gru":
        return _gru_unsupported(model)
    if spec["kind"] == "lstm" and spec["num_layers"] != 1:
        drive = commands_drive(model)
        how = f" ({drive} reads newton.onnx only)" if drive else ", or give Newton newton.pt2 (deprecated)"
        return (
            f"newton.onnx holds a one-layer LSTM (Newton 1.8 runs ONNX LSTMs of one layer) and this one has "
            f"{spec['num_layers']}: fit with networks num_layers 1{how}"
        )
    return None


def onnx_bytes(model: NetEntry) -> bytes:
    """The net as ONNX (dynamic batch, one JSON `metadata` property), for Newton 1.8's Warp-NN neural drives."""
    if (why := onnx_unsupported(model)) is not None:
        raise ExportError(why)
    net, _ = _module(model)
    spec = as_net(model).network
    meta = metadata(model)
    if isinstance(net, ActuatorGRU):
        proto = _onnx_gru(net)
    elif isinstance(net, ActuatorLSTM):
        meta |= ONNX_LSTM_NAMES
        proto = _onnx_lstm(net, meta)
    else:
        proto = _onnx_mlp(net, _n_channels(spec) * len(spec["input_idx"]))
    del proto.metadata_props[:]
    prop = proto.metadata_props.add()
    prop.key, prop.value = "metadata", json.dumps(meta)
    return proto.SerializeToString()


def render_checkpoint(
    result: ResultLike, fmt: str, joint: str | None = None, kind: str | None = None
) -> bytes:
    """One checkpoint format of one joint's network, as bytes; a format the net's kind has no consumer for is
    refused naming the joint's fitted nets that have it (and how to pick one)."""
    joint, kind, model = net_model(result, joint, kind)
    if fmt in NO_FORMAT and fmt not in KIND_FORMATS[kind]:
        fitted = [f for f in as_result(result).joints[joint].models if f in NET_FAMILIES]
        others = [f for f in fitted if fmt in KIND_FORMATS[f]]
        how = (
            f"this joint's {' and '.join(others)} net{'s have' if len(others) > 1 else ' has'} it: export it with "
            f"--family {joint}={others[0]}"
            if others
            else f"fit an mlp or lstm beside it (--families {','.join([*fitted, 'mlp'])})"
        )
        raise ExportError(
            f"joint {joint!r}: its {kind} net has no {fmt}: {NO_FORMAT[fmt]}; {how}; Newton runs this {kind} from "
            "newton.onnx"
        )
    if fmt == "torchscript.pt":
        return torchscript_bytes(model)
    if fmt == "newton.pt2":
        return pt2_bytes(model)
    if fmt == "newton.onnx":
        return onnx_bytes(model)
    raise ExportError(f"unknown checkpoint format {fmt!r}: choose from {list(NET_FORMATS)}")


def checkpoint_files(result: ResultLike) -> dict[str, tuple[str, dict[str, str]]]:
    """Per joint with a network: (its best-ranked kind, file name per format).

    One joint with networks: the plain format names (torchscript.pt, newton.onnx, newton.pt2); several:
    <joint>.<format>. newton.onnx is left out for a net it cannot hold (onnx_unsupported).
    """
    typed = as_result(result)
    joints = [j for j, jr in typed.joints.items() if any(k in NET_FAMILIES for k in jr.models)]
    stems = file_stems(joints)
    out = {}
    for joint in joints:
        _, kind, model = net_model(typed, joint)
        formats = [
            f
            for f in KIND_FORMATS[kind]
            if (f != "newton.onnx" or onnx_unsupported(model) is None)
            and (f != "newton.pt2" or newton_unsupported(model) is None)
        ]
        out[joint] = (kind, {fmt: fmt if len(joints) == 1 else f"{stems[joint]}.{fmt}" for fmt in formats})
    return out


def file_stems(joints: list[str]) -> dict[str, str]:
    """Each joint's name as a file name stem: ASCII letters, digits, '_' and '-' only (a name's '/' or '..' never
    becomes a path), distinct per joint."""
    out: dict[str, str] = {}
    for joint in joints:
        stem = re.sub(r"[^A-Za-z0-9_-]", "_", joint) or "joint"
        base, k = stem, 2
        while stem in out.values():
            stem, k = f"{base}_{k}", k + 1
        out[joint] = stem
    return out


def isaaclab_checkpoint(result: ResultLike, joint: str) -> tuple[str, str] | None:
    """(kind, torchscript file) of the net Isaac Lab runs for a joint: the best-ranked one, else, when that is a
    GRU (Isaac Lab has no GRU class), the best-ranked MLP or LSTM, in a file of its own; None without one."""
    typed = as_result(result)
    files = checkpoint_files(typed)
    if joint not in files:
        return None
    kind, names = files[joint]
    if "torchscript.pt" in names:
        return kind, names["torchscript.pt"]
    order = [r.family for r in typed.joints[joint].ranking]
    runnable = [k for k in ("mlp", "lstm") if k in typed.joints[joint].models]
    if not runnable:
        return None
    other = min(runnable, key=lambda k: order.index(k) if k in order else len(order))
    stem = file_stems(list(files))[joint]
    return other, (f"{other}.torchscript.pt" if len(files) == 1 else f"{stem}.{other}.torchscript.pt")


def checkpoint_findings(result: ResultLike) -> list[Finding]:
    """Which checkpoint Newton should load: newton.onnx; newton.pt2 works but Newton 1.8 deprecates Torch
    checkpoints (docs/consumer-semantics.md §C.2), and a deeper LSTM has only that one."""
    findings = []
    typed = as_result(result)
    for joint, (kind, names) in checkpoint_files(typed).items():
        net = as_net(typed.model(joint, kind))
        if (drive := commands_drive(net)) is not None:
            findings.append(_commands_finding(joint, kind, names, drive, onnx_unsupported(net)))
            continue
        if (why := newton_unsupported(net)) is not None:
            findings.append(
                Finding(
                    "EXPORT.NEWTON.net_reads_commands", "warning", joint, f"joint {joint!r} ({kind}): {why}"
                )
            )
            continue
        if kind == "gru":
            isaac = isaaclab_checkpoint(typed, joint)
            findings.append(
                Finding(
                    "EXPORT.ISAACLAB.no_gru_actuator",
                    "warning",
                    joint,
                    f"joint {joint!r} (gru): {NO_FORMAT['torchscript.pt']}: no torchscript.pt of it"
                    + ("" if isaac else " and no ACTUATORS_NET for it")
                    + "; Newton runs it from newton.onnx (DriveNeuralGRU, explicit effort mode, at the physics step it "
                    f"was trained at, sample_dt_s {net.network.get('sample_dt_s') or 0:.6g} s); "
                    + (
                        f"Isaac Lab's ACTUATORS hold the best-ranked net it runs, {isaac[0]} ({isaac[1]})"
                        if isaac
                        else f"for Isaac Lab fit mlp or lstm and export it with --family {joint}=mlp|lstm"
                    ),
                )
            )
            continue
        if "newton.onnx" in names:
            findings.append(
                Finding(
                    "EXPORT.NEWTON.torch_checkpoint_deprecated",
                    "info",
                    names["newton.pt2"],
                    f"joint {joint!r} ({kind}): Newton 1.8 deprecates Torch neural-drive "
                    f"checkpoints (.pt2) and will remove them; give Newton {names['newton.onnx']} "
                    "(NewtonNeuralControlAPI newton:modelPath), which it runs through Warp-NN",
                )
            )
        else:
            why = onnx_unsupported(net) or ""
            findings.append(
                Finding(
                    "EXPORT.NEWTON.onnx_unavailable",
                    "warning",
                    names["newton.pt2"],
                    f"joint {joint!r} ({kind}): only the Torch checkpoint, which Newton 1.8 "
                    f"deprecates, is offered: {why}",
                )
            )
    return findings


def _commands_finding(
    joint: str, kind: str, names: dict[str, str], drive: str, no_onnx: str | None
) -> Finding:
    """Where a commands-reading MLP or LSTM runs: Isaac Lab's and Newton's consumer-package classes."""
    isaac = (
        f"Isaac Lab runs {names.get('torchscript.pt', 'its torchscript.pt')} with actuator_sysid.consumers.isaaclab "
        f"ActuatorNet{kind.upper()}Commands"
    )
    if no_onnx is not None:
        newton = f"no Newton checkpoint: {no_onnx}"
    else:
        newton = (
            f"Newton runs {names['newton.onnx']} with actuator_sysid.consumers.newton_nets.{drive} "
            "(builder.add_actuator(..., model_path=...), explicit effort mode: τ_ff from control.joint_act, "
            "qd_des from joint_target_qd, the gains from control.kp / control.kd), not with a "
            "NewtonNeuralControlAPI prim: Newton's own DriveNeural classes read q_des − q and qd only"
        )
    return Finding(
        "EXPORT.NEWTON.net_reads_commands",
        "warning" if no_onnx else "info",
        joint,
        f"joint {joint!r} ({kind}) reads the drive's commands: {isaac}; {newton}",
    )


def render_checkpoints(result: ResultLike) -> dict[str, bytes]:
    """Every checkpoint file of a fit by name (empty when no network was fitted)."""
    files: dict[str, bytes] = {}
    typed = as_result(result)
    for joint, (kind, names) in checkpoint_files(typed).items():
        for fmt, name in names.items():
            files[name] = render_checkpoint(typed, fmt, joint, kind)
        isaac = isaaclab_checkpoint(typed, joint)
        if isaac is not None and isaac[1] not in files:  # a GRU's joint: Isaac Lab runs its best MLP / LSTM
            files[isaac[1]] = render_checkpoint(typed, "torchscript.pt", joint, isaac[0])
    return files
