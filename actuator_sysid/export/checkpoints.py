"""Network checkpoints of a fit: TorchScript for Isaac Lab, a torch.export pt2 archive for Newton 1.8.

Isaac Lab loads `torch.jit.load(network_file)` (consumer-semantics §A.7–A.9); we add the `metadata.json`
extra file Isaac Lab itself writes when it hands a net to Newton (§A.11). Newton 1.8 accepts only
`torch.export.save` archives and reads `metadata.json` from them (newton/_src/actuators/utils.py
`_load_torch_raw`): `model_type`, `input_order`, `input_idx`, `pos_scale`, `vel_scale`, `effort_scale`
(DriveNeuralMLP) and `num_layers`, `hidden_size` (DriveNeuralLSTM, required). The LSTM carries its scales
inside (Isaac Lab feeds it raw inputs), so its metadata scales are 1. The DC-motor envelope is not in the
checkpoint: Isaac Lab's cfg and Newton's NewtonDCMotorClampingAPI hold it.
"""

from __future__ import annotations

import io
import json
import warnings

import torch

from .common import ExportError

NET_FORMATS = ("torchscript.pt", "newton.pt2")


def net_model(result: dict, joint: str | None = None, kind: str | None = None) -> tuple[str, str, dict]:
    """(joint, kind, result entry) of a fitted network: the named joint (else the only joint with a net) and
    kind (else the net with the lower validation position error)."""
    nets = {j: {k: m for k, m in jr["models"].items() if k in ("mlp", "lstm")} for j, jr in result["joints"].items()}
    nets = {j: v for j, v in nets.items() if v}
    if not nets:
        raise ExportError("this fit has no network model: fit with --models mlp or lstm to export a checkpoint")
    if joint is None:
        if len(nets) > 1:
            raise ExportError(f"several joints have networks {sorted(nets)}: name one (CLI --family joint=mlp)")
        joint = next(iter(nets))
    if joint not in nets:
        raise ExportError(f"joint {joint!r} has no network model; joints with one: {sorted(nets)}")
    if kind is None:
        def score(m: dict) -> float:
            v = m["metrics"].get("validation") or m["metrics"].get("train") or {}
            return float(v.get("position_rmse", float("inf")))
        kind = min(nets[joint], key=lambda k: score(nets[joint][k]))
    if kind not in nets[joint]:
        raise ExportError(f"joint {joint!r} has no fitted {kind!r} network; fitted: {sorted(nets[joint])}")
    return joint, kind, nets[joint][kind]


def metadata(model: dict) -> dict:
    """Checkpoint metadata both consumers read (Isaac Lab §A.11 keys plus Newton's required ones)."""
    spec = model["network"]
    if spec["kind"] == "mlp":
        return {"model_type": "mlp", "input_order": spec["input_order"], "input_idx": list(spec["input_idx"]),
                "pos_scale": spec["pos_scale"], "vel_scale": spec["vel_scale"], "torque_scale": spec["torque_scale"],
                "effort_scale": spec["torque_scale"], "pos_error": "q_des - q", "velocity": "qd (measured)"}
    return {"model_type": "lstm", "num_layers": spec["num_layers"], "hidden_size": spec["hidden_size"],
            "pos_scale": 1.0, "vel_scale": 1.0, "effort_scale": 1.0, "pos_error": "q_des - q",
            "velocity": "qd (measured)", "note": "input and output scales are inside the module"}


def _module(model: dict) -> tuple[torch.nn.Module, str]:
    from ..fitting.nets import network_from_result

    spec, net = network_from_result(model)
    return net.eval(), spec.kind


def torchscript_bytes(model: dict) -> bytes:
    """The net as TorchScript with metadata.json, for Isaac Lab's ActuatorNetMLP / ActuatorNetLSTM."""
    net, _ = _module(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(net)
        buf = io.BytesIO()
        torch.jit.save(scripted, buf, _extra_files={"metadata.json": json.dumps(metadata(model))})
    return buf.getvalue()


def pt2_bytes(model: dict) -> bytes:
    """The net as a torch.export archive with metadata.json, for Newton 1.8's DriveNeuralMLP / DriveNeuralLSTM."""
    net, kind = _module(model)
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    spec = model["network"]
    if kind == "mlp":
        args: tuple = (torch.zeros(2, 2 * len(spec["input_idx"])),)
        dynamic: tuple = ({0: batch},)
    else:
        shape = (spec["num_layers"], 2, spec["hidden_size"])
        args = (torch.zeros(2, 1, 2), (torch.zeros(shape), torch.zeros(shape)))
        dynamic = ({0: batch}, ({1: batch}, {1: batch}))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The tensor attributes")  # nn.LSTM's flat weights, harmless
        program = torch.export.export(net, args, dynamic_shapes=dynamic)
    buf = io.BytesIO()
    torch.export.save(program, buf, extra_files={"metadata.json": json.dumps(metadata(model))})
    return buf.getvalue()


def render_checkpoint(result: dict, fmt: str, joint: str | None = None, kind: str | None = None) -> bytes:
    """One checkpoint format of one joint's network, as bytes."""
    _, _, model = net_model(result, joint, kind)
    if fmt == "torchscript.pt":
        return torchscript_bytes(model)
    if fmt == "newton.pt2":
        return pt2_bytes(model)
    raise ExportError(f"unknown checkpoint format {fmt!r}: choose from {list(NET_FORMATS)}")


def checkpoint_files(result: dict) -> dict[str, tuple[str, dict[str, str]]]:
    """Per joint with a network: (its kind with the lower validation position error, file name per format).

    One joint with networks: the plain format names (torchscript.pt, newton.pt2); several: <joint>.<format>.
    """
    joints = [j for j, jr in result["joints"].items() if any(k in ("mlp", "lstm") for k in jr["models"])]
    out = {}
    for joint in joints:
        _, kind, _ = net_model(result, joint)
        out[joint] = (kind, {fmt: fmt if len(joints) == 1 else f"{joint}.{fmt}" for fmt in NET_FORMATS})
    return out


def render_checkpoints(result: dict) -> dict[str, bytes]:
    """Every checkpoint file of a fit by name (empty when no network was fitted)."""
    files: dict[str, bytes] = {}
    for joint, (kind, names) in checkpoint_files(result).items():
        for fmt, name in names.items():
            files[name] = render_checkpoint(result, fmt, joint, kind)
    return files
