"""Exported actuator networks in the real consumers: Isaac Lab 3.0's ActuatorNetMLP / ActuatorNetLSTM load the
TorchScript export, Newton 1.8's DriveNeuralMLP / DriveNeuralLSTM the ONNX export (through Warp-NN) and the
torch.export pt2 archive; on the same
input sequence both give our model's efforts (NetStepper: history or LSTM state, scales, the DC-motor clip)
within 1e-5 relative, over many steps with a reset in the middle (docs/consumer-semantics.md §A.7–A.9, §C.2).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from isaaclab.actuators import ActuatorNetLSTM, ActuatorNetLSTMCfg, ActuatorNetMLP, ActuatorNetMLPCfg
from isaaclab.utils.types import ArticulationActions
from net_logs import nonlinear_recording

from actuator_sysid.export.checkpoints import (
    ONNX_LSTM_NAMES,
    checkpoint_findings,
    metadata,
    onnx_bytes,
    pt2_bytes,
    torchscript_bytes,
)
from actuator_sysid.export.selection import ExportError
from actuator_sysid.fitting.training import NetOptions, net_fit, network_from_result
from actuator_sysid.models.networks import NetStepper

RTOL = 1e-5
N_STEPS = 240
RESET_AT = 150
# an envelope tighter than the net's outputs, so that the DC-motor clip binds on many steps
ENVELOPE = {"saturation_effort": 0.9, "actuator_velocity_limit": 4.0, "actuator_effort_limit": 0.6}


@pytest.fixture(scope="module")
def entries() -> dict[str, dict]:
    """A briefly trained MLP (history [0, 2, 5]), a two-layer LSTM and a one-layer LSTM (lstm1: the depth Newton
    runs from ONNX), as fit results (weights via JSON)."""
    torch.set_num_threads(1)
    rec = nonlinear_recording(n_segments=3, seconds=1.0, seed=3)
    out = {}
    for name, opts in (
        ("mlp", NetOptions(epochs=4, input_idx=[0, 2, 5], input_order="vel_pos")),
        ("lstm", NetOptions(epochs=4, hidden_size=8, num_layers=2)),
        ("lstm1", NetOptions(epochs=4, hidden_size=8, num_layers=1)),
    ):
        entry = net_fit(rec, "j", name.rstrip("1"), [0, 1], [2], opts).to_json()
        entry["network"].update(ENVELOPE)
        out[name] = entry
    return out


def sequence(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"q": rng.uniform(-1.5, 1.5, n), "qd": rng.uniform(-8, 8, n), "q_des": rng.uniform(-1.5, 1.5, n)}


def ours(entry: dict, seq: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Our model: the entry's network through NetStepper, reset at RESET_AT."""
    spec, net = network_from_result(entry)
    stepper = NetStepper(spec, net, 1)
    computed, applied = np.zeros(N_STEPS), np.zeros(N_STEPS)
    t = lambda a, k: torch.tensor([a[k]], dtype=torch.float32)  # noqa: E731
    with torch.no_grad():
        for k in range(N_STEPS):
            if k == RESET_AT:
                stepper.reset()
            c, a = stepper.step(t(seq["q_des"], k), t(seq["q"], k), t(seq["qd"], k))
            computed[k], applied[k] = float(c[0]), float(a[0])
    return computed, applied


def assert_close(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * max(1.0, float(np.abs(b).max())))


def isaaclab_actuator(kind: str, entry: dict, path: Path):
    spec = entry["network"]
    common = {"joint_names_expr": ["j"], "network_file": str(path), **ENVELOPE}
    if kind == "mlp":
        cfg = ActuatorNetMLPCfg(
            **common,
            pos_scale=spec["pos_scale"],
            vel_scale=spec["vel_scale"],
            torque_scale=spec["torque_scale"],
            input_order=spec["input_order"],
            input_idx=spec["input_idx"],
        )
        cls = ActuatorNetMLP
    else:
        cfg, cls = ActuatorNetLSTMCfg(**common), ActuatorNetLSTM
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cls(cfg, joint_names=["j"], joint_ids=slice(None), num_envs=1, device="cpu")


def assert_reset_mattered(entry: dict, seq: dict, computed) -> None:
    """Without the reset at RESET_AT our effort there differs: the history or recurrent state was carried over."""
    spec, net = network_from_result(entry)
    stepper = NetStepper(spec, net, 1)
    with torch.no_grad():
        no_reset = [
            float(
                stepper.step(*(torch.tensor([seq[c][k]], dtype=torch.float32) for c in ("q_des", "q", "qd")))[
                    0
                ][0]
            )
            for k in range(RESET_AT + 1)
        ]
    assert abs(no_reset[RESET_AT] - computed[RESET_AT]) > 1e-6


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_isaaclab_runs_the_torchscript_export_as_our_model(kind: str, entries: dict, tmp_path: Path) -> None:
    entry = entries[kind]
    path = tmp_path / "net.pt"
    path.write_bytes(torchscript_bytes(entry))
    act = isaaclab_actuator(kind, entry, path)
    seq = sequence(N_STEPS, 11)
    col = lambda a, k: torch.tensor([[a[k]]], dtype=torch.float32)  # noqa: E731
    computed, applied = np.zeros(N_STEPS), np.zeros(N_STEPS)
    for k in range(N_STEPS):
        if k == RESET_AT:
            act.reset(torch.arange(1))
        action = ArticulationActions(
            joint_positions=col(seq["q_des"], k),
            joint_velocities=col(seq["q"], k) * 0,
            joint_efforts=col(seq["q"], k) * 0,
        )
        act.compute(action, col(seq["q"], k), col(seq["qd"], k))
        computed[k], applied[k] = float(act.computed_effort[0, 0]), float(act.applied_effort[0, 0])
    mine = ours(entry, seq)
    assert_close(mine[0], computed)
    assert_close(mine[1], applied)
    assert np.mean(applied != computed) > 0.2  # the DC-motor clip was active on many steps
    # the reset mattered: without it our efforts after RESET_AT differ (history / LSTM state carried over)
    assert_reset_mattered(entry, seq, computed)


def newton_efforts(kind: str, entry: dict, path: Path, seq: dict[str, np.ndarray]) -> np.ndarray:
    from newton.actuators import DriveNeuralLSTM, DriveNeuralMLP

    model, _, dof = newton_pendulum(DriveNeuralMLP if kind == "mlp" else DriveNeuralLSTM, ENVELOPE, path)
    return newton_open_loop(model, dof, seq)


def newton_pendulum(drive: type, spec: dict, path: Path):
    """A Newton pendulum whose one joint's actuator is `drive` on the checkpoint, clipped by ClampingDCMotor with
    the net's envelope: (model, its actuator, the joint's DOF)."""
    import newton
    import warp as wp
    from newton.actuators import ClampingDCMotor

    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    link = builder.add_link(com=wp.vec3(0.0, 0.0, -0.2), mass=0.5, inertia=wp.mat33(np.eye(3) * 1e-3))
    j = builder.add_joint_revolute(parent=-1, child=link, axis=newton.Axis.Y)
    builder.add_articulation([j])
    dof = builder.joint_qd_start[j]
    dc = {
        "saturation_effort": spec["saturation_effort"],
        "velocity_limit": spec["actuator_velocity_limit"],
        "max_motor_effort": spec["actuator_effort_limit"],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Newton marks its neural drives experimental
        builder.add_actuator(drive, index=dof, clamping=[(ClampingDCMotor, dc)], model_path=str(path))
        model = builder.finalize(device="cpu")
    return model, model.actuators[0], dof


def newton_open_loop(model, dof: int, seq: dict[str, np.ndarray]) -> np.ndarray:
    """The efforts of the model's one actuator fed the sequence, reset at RESET_AT."""
    from newton_sim import open_loop

    act = model.actuators[0]
    full = {**seq, "qd_des": np.zeros_like(seq["q"]), "tau_ff": np.zeros_like(seq["q"])}
    first = open_loop(model, act, dof, {k: v[:RESET_AT] for k, v in full.items()}, 0.005)
    # a reset: open_loop starts from fresh actuator states (zero history / LSTM state), as Isaac Lab's reset
    second = open_loop(model, act, dof, {k: v[RESET_AT:N_STEPS] for k, v in full.items()}, 0.005)
    return np.concatenate([first, second])


def newton_matches_ours(kind: str, entry: dict, path: Path, seed: int) -> None:
    """Newton's neural drive running the checkpoint at `path` gives our efforts on one input sequence, with the
    DC clip binding often and efforts that are not constant."""
    seq = sequence(N_STEPS, seed)
    theirs = newton_efforts(kind, entry, path, seq)
    computed, applied = ours(entry, seq)
    assert_close(applied, theirs)
    assert np.mean(applied != computed) > 0.2 and np.std(theirs) > 0.1  # clipped often, and not constant


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_newton_runs_the_pt2_export_as_our_model(kind: str, entries: dict, tmp_path: Path) -> None:
    entry = entries[kind]
    path = tmp_path / "net.pt2"
    path.write_bytes(pt2_bytes(entry))
    meta = metadata(entry)
    assert meta["model_type"] == kind
    if kind == "lstm":
        assert (meta["num_layers"], meta["hidden_size"]) == (2, 8)
    newton_matches_ours(kind, entry, path, seed=12)


@pytest.mark.parametrize("name", ["mlp", "lstm1"])
def test_newton_runs_the_onnx_export_as_our_model(name: str, entries: dict, tmp_path: Path) -> None:
    """Newton 1.8's recommended checkpoint: the .onnx runs in DriveNeuralMLP / DriveNeuralLSTM (Warp-NN) with the
    metadata read from the model's single JSON `metadata` property, a dynamic batch and the LSTM state carried."""
    import onnx
    from newton._src.actuators.utils import load_metadata

    entry, kind = entries[name], name.rstrip("1")
    path = tmp_path / "net.onnx"
    path.write_bytes(onnx_bytes(entry))
    model = onnx.load(str(path))
    assert [p.key for p in model.metadata_props] == ["metadata"]
    meta = load_metadata(str(path))  # Newton's own reader
    assert meta["model_type"] == kind
    if kind == "lstm":
        assert {k: meta[k] for k in ONNX_LSTM_NAMES} == ONNX_LSTM_NAMES and meta["num_layers"] == 1
    else:
        assert meta["input_idx"] == [0, 2, 5] and meta["effort_scale"] == entry["network"]["torque_scale"]
    batch = [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert batch[0 if kind == "mlp" else 1] == "batch"  # dynamic: Newton needs no rewrite of the graph
    newton_matches_ours(kind, entry, path, seed=14)


@pytest.mark.parametrize("name", ["mlp", "lstm1"])
def test_newton_usda_neural_prim_runs_the_onnx_beside_it(name: str, entries: dict, tmp_path: Path) -> None:
    """newton.usda for a net-family joint: a NewtonActuator with NewtonNeuralControlAPI (modelPath ./newton.onnx)
    and the DC-motor clamp, which Newton's add_usd loads from the folder of exports and runs as our model."""
    import newton
    from newton.actuators import ClampingDCMotor, DriveNeuralLSTM, DriveNeuralMLP

    from actuator_sysid.export import render_all

    kind = name.rstrip("1")
    entry = entries[name]
    rec = nonlinear_recording(n_segments=2, seconds=0.2, seed=3)
    result = {
        "joints": {"j": {"models": {kind: entry}, "best_model": kind}},
        "assumptions": {"physics_dt": 0.005},
    }
    files = render_all(result, rec, replay_exports=True)  # a net-only fit: newton.usda is the neural prim
    for fname in ("newton.usda", "newton.onnx"):
        data = files[fname]
        (tmp_path / fname).write_bytes(data if isinstance(data, bytes) else data.encode())
    text = files["newton.usda"]
    assert (
        "NewtonNeuralControlAPI" in text and "@./newton.onnx@" in text and "NewtonDCMotorClampingAPI" in text
    )
    replay = json.loads(files["validation.json"])["replay"]["newton.usda"]
    assert replay["status"] == "skipped" and "actuator networks" in replay["note"]
    builder = newton.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        builder.add_usd(str(tmp_path / "newton.usda"))
        model = builder.finalize(device="cpu")
    assert model.joint_dof_count == 1 and len(model.actuators) == 1
    act = model.actuators[0]
    assert isinstance(act.drive, DriveNeuralMLP if kind == "mlp" else DriveNeuralLSTM)
    assert any(isinstance(c, ClampingDCMotor) for c in act.clamping)
    seq = sequence(N_STEPS, 15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = newton_open_loop(model, 0, seq)
    computed, applied = ours(entry, seq)
    assert_close(applied, theirs)
    assert np.mean(applied != computed) > 0.2 and np.std(theirs) > 0.1


def test_newton_deprecates_the_pt2_and_validation_recommends_the_onnx(entries: dict, tmp_path: Path) -> None:
    """Newton 1.8 warns that Torch checkpoints are deprecated (and not ONNX ones); the export validation says so
    and names newton.onnx, or, for an LSTM deeper than Newton's ONNX drive runs, why there is no ONNX file."""
    from newton.actuators import DriveNeuralMLP

    entry = entries["mlp"]
    (tmp_path / "net.pt2").write_bytes(pt2_bytes(entry))
    (tmp_path / "net.onnx").write_bytes(onnx_bytes(entry))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DriveNeuralMLP(model_path=str(tmp_path / "net.pt2"))
        n_pt2 = len(caught)
        DriveNeuralMLP(model_path=str(tmp_path / "net.onnx"))
    assert any("deprecated" in str(w.message) and "ONNX" in str(w.message) for w in caught[:n_pt2])
    assert not any("deprecated" in str(w.message) for w in caught[n_pt2:])
    result = {"joints": {"j": {"models": {"mlp": entry}}}}
    (finding,) = checkpoint_findings(result)
    assert (finding.code, finding.severity, finding.where) == (
        "EXPORT.NEWTON.torch_checkpoint_deprecated",
        "info",
        "newton.pt2",
    )
    assert "newton.onnx" in finding.message
    deep = {"joints": {"j": {"models": {"lstm": entries["lstm"]}}}}
    (finding,) = checkpoint_findings(deep)
    assert finding.code == "EXPORT.NEWTON.onnx_unavailable" and "one-layer" in finding.message
    with pytest.raises(ExportError, match="one-layer LSTM"):
        onnx_bytes(entries["lstm"])


def test_exported_isaaclab_cfgs_load_and_run_the_checkpoint(tmp_path: Path, monkeypatch) -> None:
    """isaaclab.py's ACTUATORS_NET and isaaclab.json's actuators_net, as written, build Isaac Lab's classes
    that load torchscript.pt from beside them and compute our model's efforts."""

    from actuator_sysid.export import render_all
    from actuator_sysid.fitting.fit import FitRequest, fit_recording

    torch.set_num_threads(1)
    rec = nonlinear_recording(n_segments=3, seconds=1.0, seed=4)
    res = fit_recording(rec, FitRequest(models=["mlp"], networks={"epochs": 4, "input_idx": [0, 1, 3]}))
    files = render_all(res, rec, replay_exports=False)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    monkeypatch.chdir(tmp_path)  # network_file is relative: the exports sit side by side
    namespace: dict = {}
    exec(compile(files["isaaclab.py"], "isaaclab.py", "exec"), namespace)
    (cfg_py,) = namespace["ACTUATORS_NET"].values()
    (group,) = json.loads(files["isaaclab.json"])["actuators_net"].values()
    cfg_json = ActuatorNetMLPCfg(**group["cfg"])
    entry = res["joints"]["j"]["models"]["mlp"]
    seq = sequence(N_STEPS, 13)
    mine = ours(entry, seq)
    col = lambda a, k: torch.tensor([[a[k]]], dtype=torch.float32)  # noqa: E731
    for cfg in (cfg_py, cfg_json):
        assert cfg.input_idx == [0, 1, 3] and cfg.network_file == "torchscript.pt"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            act = ActuatorNetMLP(cfg, joint_names=["j"], joint_ids=slice(None), num_envs=1, device="cpu")
        applied = np.zeros(N_STEPS)
        for k in range(N_STEPS):
            if k == RESET_AT:
                act.reset(torch.arange(1))
            act.compute(
                ArticulationActions(joint_positions=col(seq["q_des"], k)), col(seq["q"], k), col(seq["qd"], k)
            )
            applied[k] = float(act.applied_effort[0, 0])
        assert_close(mine[1], applied)
