"""The GRU actuator net (issue 14): Newton 1.8's DriveNeuralGRU runs our newton.onnx as our model; newton.usda
points a gru joint at it; Isaac Lab has no GRU class and the exports say so; the GRU learns a nonlinear
actuator. Also, for every net kind: gain-normalised position error on logs recorded at several controller
gains, no actuator torque where the torque-enable flag is off, and network option bounds through the API."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import Server
from net_logs import nonlinear_recording
from test_conformance_nets import (
    ENVELOPE,
    N_STEPS,
    assert_close,
    assert_reset_mattered,
    newton_open_loop,
    ours,
    sequence,
)

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.export import ExportError, render_all, render_bytes
from actuator_sysid.export.checkpoints import (
    checkpoint_findings,
    metadata,
    onnx_bytes,
    pt2_bytes,
    render_checkpoint,
    torchscript_bytes,
)
from actuator_sysid.fitting.fit import FitRequest, FitRequestError, fit_recording
from actuator_sysid.fitting.training import (
    LIMITS,
    NetOptions,
    at_gain,
    joint_data,
    net_fit,
    network_from_result,
    simulate_segments,
)
from actuator_sysid.models.networks import NetStepper


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def grus() -> dict[int, dict]:
    """Briefly trained GRUs of one and two layers (Newton stacks GRU layers of one hidden size)."""
    torch.set_num_threads(1)
    rec = nonlinear_recording(n_segments=3, seconds=1.0, seed=3)
    out = {}
    for layers in (1, 2):
        entry = net_fit(
            rec, "j", "gru", [0, 1], [2], NetOptions(epochs=4, hidden_size=8, num_layers=layers)
        ).to_json()
        entry["network"].update(ENVELOPE)  # a clip tighter than the net's outputs: it binds on many steps
        out[layers] = entry
    return out


def newton_gru(path: Path):
    """A one-joint Newton model whose actuator is DriveNeuralGRU on the checkpoint, clipped by ENVELOPE."""
    import newton
    import warp as wp
    from newton.actuators import ClampingDCMotor, DriveNeuralGRU

    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    link = builder.add_link(com=wp.vec3(0.0, 0.0, -0.2), mass=0.5, inertia=wp.mat33(np.eye(3) * 1e-3))
    j = builder.add_joint_revolute(parent=-1, child=link, axis=newton.Axis.Y)
    builder.add_articulation([j])
    dc = {
        "saturation_effort": ENVELOPE["saturation_effort"],
        "velocity_limit": ENVELOPE["actuator_velocity_limit"],
        "max_motor_effort": ENVELOPE["actuator_effort_limit"],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DriveNeuralGRU is marked experimental
        builder.add_actuator(
            DriveNeuralGRU,
            index=builder.joint_qd_start[j],
            clamping=[(ClampingDCMotor, dc)],
            model_path=str(path),
        )
        return builder.finalize(device="cpu"), builder.joint_qd_start[j]


@pytest.mark.parametrize("layers", [1, 2])
def test_newton_gru_runs_the_onnx_export_as_our_model(layers: int, grus: dict, tmp_path: Path) -> None:
    """DriveNeuralGRU (Warp-NN) on our newton.onnx: our efforts within 1e-5 over 240 steps with a reset, the
    DC clip binding often; the metadata is Newton's GRU contract (input columns, normalisation, sample_dt_s)."""
    import onnx
    from newton._src.actuators.utils import load_metadata

    entry = grus[layers]
    path = tmp_path / "net.onnx"
    path.write_bytes(onnx_bytes(entry))
    meta = load_metadata(str(path))
    assert meta["model_type"] == "gru" and meta["input_columns"] == ["position_error", "velocity"]
    assert meta["sample_dt_s"] == pytest.approx(0.005) and meta["num_layers"] == layers
    proto = onnx.load(str(path))
    assert [n.op_type for n in proto.graph.node].count("GRU") == layers
    assert proto.graph.node[0].op_type == "GRU"  # the input scales are normalisation metadata, not a Mul
    model, dof = newton_gru(path)
    seq = sequence(N_STEPS, 12 + layers)
    theirs = newton_open_loop(model, dof, seq)
    computed, applied = ours(entry, seq)
    assert_close(applied, theirs)
    assert np.mean(applied != computed) > 0.2 and np.std(theirs) > 0.1
    # the hidden state mattered: without the reset our efforts after RESET_AT differ (the GRU state carried)
    assert_reset_mattered(entry, seq, computed)


def test_a_gru_has_no_isaaclab_or_torch_checkpoint(grus: dict) -> None:
    entry = grus[1]
    for render in (torchscript_bytes, pt2_bytes):
        with pytest.raises(ExportError, match="no GRU actuator class|ONNX checkpoints only"):
            render(entry)
    (finding,) = checkpoint_findings({"joints": {"j": {"models": {"gru": entry}}}})
    assert finding.code == "EXPORT.ISAACLAB.no_gru_actuator" and "ACTUATORS_NET" in finding.message
    # the export of a GRU pick names the alternative: the joint's MLP beside it, or fitting one
    mlp = {**entry, "family": "mlp"}
    ranked = {"models": {"gru": entry, "mlp": mlp}, "ranking": [{"family": "gru"}, {"family": "mlp"}]}
    with pytest.raises(ExportError, match=r"mlp net has it: export it with --family j=mlp"):
        render_checkpoint({"joints": {"j": ranked}}, "torchscript.pt")
    with pytest.raises(ExportError, match=r"fit an mlp or lstm beside it \(--families gru,mlp\)"):
        render_checkpoint({"joints": {"j": {"models": {"gru": entry}}}}, "newton.pt2")


def test_newton_usda_gru_joint_loads_and_runs_the_onnx(grus: dict, tmp_path: Path) -> None:
    """A fit of a GRU alone: newton.usda is a neural NewtonActuator pointing at newton.onnx beside it, Newton's
    add_usd picks DriveNeuralGRU from the metadata and runs our model; Isaac Lab's exports hold no net for it,
    and validation.json says why."""
    import newton
    from newton.actuators import ClampingDCMotor, DriveNeuralGRU

    entry = grus[1]
    rec = nonlinear_recording(n_segments=2, seconds=0.2, seed=3)
    result = {
        "joints": {"j": {"models": {"gru": entry}, "best_model": "gru"}},
        "assumptions": {"physics_dt": 0.005},
    }
    files = render_all(result, rec, replay_exports=False)
    assert "newton.onnx" in files and "torchscript.pt" not in files and "newton.pt2" not in files
    assert "ActuatorNet" not in files["isaaclab.py"]
    compile(files["isaaclab.py"], "isaaclab.py", "exec")
    codes = {f["code"] for f in json.loads(files["validation.json"])["findings"]}
    assert "EXPORT.ISAACLAB.no_gru_actuator" in codes
    assert render_bytes(result, "newton.onnx", families="gru") == files["newton.onnx"]
    for name in ("newton.usda", "newton.onnx"):
        data = files[name]
        (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    assert "NewtonNeuralControlAPI" in files["newton.usda"] and "@./newton.onnx@" in files["newton.usda"]
    builder = newton.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        builder.add_usd(str(tmp_path / "newton.usda"))
        model = builder.finalize(device="cpu")
    (act,) = model.actuators
    assert isinstance(act.drive, DriveNeuralGRU) and any(isinstance(c, ClampingDCMotor) for c in act.clamping)
    seq = sequence(N_STEPS, 15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = newton_open_loop(model, 0, seq)
    computed, applied = ours(entry, seq)
    assert_close(applied, theirs)
    assert np.mean(applied != computed) > 0.2


def test_newton_usda_family_gru_in_a_mixed_fit() -> None:
    """--family j=gru beside an mlp: the neural prim points at the GRU's own ONNX file name."""
    from actuator_sysid.export.newton_usd import build_stage

    rec = nonlinear_recording(n_segments=3, seconds=0.6, torque=True)
    res = fit_recording(rec, FitRequest(models=["mlp", "gru"], networks={"epochs": 2, "hidden_size": 4}))
    stage, findings = build_stage(res, rec, families={"j": "gru"})
    (act,) = [p for p in stage.Traverse() if p.GetTypeName() == "NewtonActuator"]
    assert "NewtonNeuralControlAPI" in act.GetAppliedSchemas()
    path = act.GetAttribute("newton:modelPath").Get().path
    assert path.endswith(".onnx")
    gru = res["joints"]["j"]["models"]["gru"]
    assert act.GetAttribute("newton:maxMotorEffort").Get() == pytest.approx(
        gru["network"]["actuator_effort_limit"]
    )
    assert gru["isaaclab_cfg"] == "" and gru["training"]["mode"] == "torque"


def test_gru_learns_the_nonlinear_actuator_from_torque() -> None:
    """Torque-supervised on the nonlinear actuator (delay, Stribeck, DC envelope): validation torque RMSE within
    6 % of the torque range (5.2 % measured, its best epoch 67 of 80), well under a net
    that predicts the mean torque (0.26 N·m against half the torque's spread, 0.47 N·m)."""
    rec = nonlinear_recording(n_segments=5, seconds=2.0, torque=True, position_limited=False)
    entry = net_fit(rec, "j", "gru", [0, 1, 2, 3], [4], NetOptions(epochs=80, patience=30, lr=1e-2)).to_json()
    tm = entry["torque_metrics"]["validation"]
    tau = rec.segments[4].tau[:, 0]
    assert tm["torque_rmse_of_range"] <= 0.06, tm
    assert tm["torque_rmse"] < 0.5 * float(np.std(tau)), (tm, float(np.std(tau)))


# --- gain normalisation: logs at several controller gains ---


def servo_recording(kps: list[float], seconds: float = 2.0, seed: int = 0) -> Recording:
    """A position servo whose torque is clip(c·kp·(q_des − q) − b·qd) on a pendulum, one segment per kp, the kp
    in each segment's metadata (firmware units): plain numpy, semi-implicit Euler at 200 Hz."""
    rng = np.random.default_rng(seed)
    dt, c, b, tau_max = 0.005, 0.02, 0.05, 0.8
    mass, com, inertia = 0.4, 0.1, 0.0
    J, mgl = inertia + mass * com**2, mass * 9.81 * com
    n = int(seconds / dt)
    t = np.arange(n) * dt
    segs = []
    for s, kp in enumerate(kps):
        f = rng.uniform(0.3, 1.5, 3)
        q_des = 0.5 * sum(
            np.sin(2 * np.pi * fk * t + p) for fk, p in zip(f, rng.uniform(0, 6, 3), strict=True)
        )
        q, qd = np.zeros(n), np.zeros(n)
        for k in range(n - 1):
            tau = np.clip(c * kp * (q_des[k] - q[k]) - b * qd[k], -tau_max, tau_max)
            qd[k + 1] = qd[k] + dt * (tau - mgl * np.sin(q[k])) / J
            q[k + 1] = q[k] + dt * qd[k + 1]
        col = lambda a: a[:, None]  # noqa: E731
        segs.append(
            Segment(
                f"kp{kp:g}.{s}",
                t,
                q=col(q),
                qd=col(qd),
                q_des=col(q_des),
                qd_des=np.zeros((n, 1)),
                tau_ff=np.zeros((n, 1)),
                metadata={"kp": float(kp), "gain_units": "device"},
            )
        )
    return Recording([JointInfo("j", mass=mass, com_distance=com, inertia=inertia)], segs)


def test_gain_normalised_input_lets_a_net_generalise_to_a_held_out_gain() -> None:
    """In the loop on a servo logged at kp 10, 20 and 40 with kp 40 held out: the MLP that sees kp/kp_ref·(q_des
    − q) tracks the held-out gain better than the one that sees q_des − q alone, and as exported it is the
    actuator at the most logged kp."""
    rec = servo_recording([10, 20, 10, 20, 40, 40], seconds=1.5)
    opts = {"epochs": 100, "in_loop_epochs": 30, "hidden": [16, 16]}
    train, val = [0, 1, 2, 3], [4, 5]
    norm = net_fit(rec, "j", "mlp", train, val, NetOptions.from_dict(opts)).to_json()
    raw = net_fit(
        rec, "j", "mlp", train, val, NetOptions.from_dict({**opts, "gain_normalise": False})
    ).to_json()
    assert norm["network"]["kp_ref"] in (10.0, 20.0, 40.0) and raw["network"]["kp_ref"] is None
    assert any("gain-normalised" in w for w in norm["warnings"])
    v_norm = norm["metrics"]["validation"]["position_mae"]
    v_raw = raw["metrics"]["validation"]["position_mae"]
    assert v_norm < 0.3 * v_raw, (v_norm, v_raw)  # measured 0.018 rad against 0.118 rad
    assert metadata(norm)["gain"]["kp"] == norm["network"]["kp_ref"]


@pytest.mark.parametrize("kind", ["mlp", "lstm", "gru"])
def test_at_gain_folds_the_gain_into_the_exported_scales(kind: str) -> None:
    """The net refolded for kp = 2·kp_ref, fed raw q_des − q, gives the efforts of the original net fed the
    position error times 2 (what it saw in training for a segment at that kp)."""
    rec = servo_recording([10, 20], seconds=0.5)
    entry = net_fit(rec, "j", kind, [0], [1], NetOptions(epochs=2, in_loop_epochs=2, hidden_size=8)).to_json()
    kp_ref = entry["network"]["kp_ref"]
    folded = at_gain(entry, 2 * kp_ref)
    assert folded["network"]["kp_ref"] == 2 * kp_ref and entry["network"]["kp_ref"] == kp_ref
    seq = sequence(60, 3)
    efforts = []
    for model, gain in ((entry, torch.tensor([2.0])), (folded, None)):
        spec, net = network_from_result(model)
        stepper = NetStepper(spec, net, 1, pos_gain=gain)
        with torch.no_grad():
            efforts.append(
                [
                    float(
                        stepper.step(
                            *(torch.tensor([seq[c][k]], dtype=torch.float32) for c in ("q_des", "q", "qd"))
                        )[0][0]
                    )
                    for k in range(60)
                ]
            )
    np.testing.assert_allclose(efforts[1], efforts[0], rtol=1e-5, atol=1e-6)
    assert np.std(efforts[0]) > 0


# --- torque enable ---


@pytest.mark.parametrize("kind", ["mlp", "gru"])
def test_no_actuator_torque_where_torque_is_disabled(kind: str) -> None:
    """A segment whose per-sample enable flag is off over its middle third (BAM's torque_enable): the closed
    loop applies zero there and the pendulum swings freely (semi-implicit Euler of the load alone); a free_swing
    segment applies none at all."""
    rec = servo_recording([10, 20], seconds=1.0)
    seg = rec.segments[0]
    enable = np.ones((seg.n, 1), bool)
    enable[seg.n // 3 : 2 * seg.n // 3] = False
    seg.enable = enable
    rec.segments[1].metadata["free_swing"] = True
    entry = net_fit(rec, "j", kind, [0], [1], NetOptions(epochs=2, in_loop_epochs=2, hidden_size=8)).to_json()
    spec, net = network_from_result(entry)
    data = joint_data(rec, "j", 1, "none", spec.kp_ref)
    sims = simulate_segments(spec, net, data, 1)
    applied = sims[0]["applied"]
    off = ~enable[:, 0]
    assert np.all(applied[off] == 0) and np.mean(np.abs(applied[~off]) > 0) > 0.9
    assert np.all(sims[1]["applied"] == 0)
    # in the off stretch the motion is the load's alone: qd[k+1] = qd[k] − dt·m·g·l·sin(q[k]) / J
    info = rec.joints[0]
    k = np.flatnonzero(off)[5:-5]
    q, qd = sims[0]["q"], sims[0]["qd"]
    expect = qd[k] - 0.005 * info.gravity_coeff * np.sin(q[k]) / info.load_inertia
    np.testing.assert_allclose(qd[k + 1], expect, rtol=1e-4, atol=1e-5)


# --- bounds (issue 15) ---

BAD_OPTIONS = [
    ({"hidden": [100_000_000]}, "limit 1024"),
    ({"hidden": [8] * 9}, "limit 8 layers"),
    ({"hidden_size": 5000}, "limit 1024"),
    ({"num_layers": 5}, "limit 4"),
    ({"epochs": 10**9}, "limit 100000"),
    ({"in_loop_epochs": 10**6}, "limit 100000"),
    ({"patience": 10**6}, "limit 100000"),
    ({"window": 10**6}, "limit 10000"),
    ({"lstm_window": 10**6}, "limit 10000"),
    ({"burn_in": 10**6}, "limit 10000"),
    ({"batch_size": 10**8}, "limit 65536"),
    ({"input_idx": list(range(65))}, "limit 64 entries"),
    ({"input_idx": [0, 10**7]}, "limit 1000"),
    ({"input_idx": [-1]}, "between 0 and 1000"),
    ({"hidden": "32"}, "list of 1 to 8"),
    ({"epochs": 2.5}, "must be an integer"),
    ({"lr": 1e9}, "in \\(0, 1\\]"),
]


@pytest.mark.parametrize("options, message", BAD_OPTIONS)
def test_network_options_are_bounded(options: dict, message: str) -> None:
    with pytest.raises(FitRequestError, match=message):
        NetOptions.from_dict(options)


def test_limits_cover_every_sizing_option() -> None:
    sizing = {
        "epochs",
        "patience",
        "batch_size",
        "window",
        "lstm_window",
        "burn_in",
        "in_loop_epochs",
        "hidden_size",
        "num_layers",
    }
    assert sizing <= set(LIMITS) and {"hidden_width", "hidden_layers", "input_idx_length"} <= set(LIMITS)
    assert (
        NetOptions.from_dict({"hidden": [1024] * 8, "epochs": 100_000}).epochs == 100_000
    )  # the limits pass


def test_the_api_refuses_oversized_networks_with_a_4xx_naming_the_limit(
    server: Server, tmp_path: Path
) -> None:
    """POST /api/v1/fits with an oversized network is a 422 naming the limit, refused before it is queued (on the
    worker's shared server: its fits listed before and after are the same)."""
    import requests
    from conftest import upload_recording

    rec = nonlinear_recording(n_segments=2, seconds=0.3, torque=True)
    ds = upload_recording(server, rec, tmp_path / "log.csv")
    before = requests.get(server.url + "/api/v1/fits", timeout=30).json()
    for n, (options, message) in enumerate(BAD_OPTIONS):
        models = (["mlp"], ["gru"], None)[n % 3]  # None: the default models, no net asked for
        body = {"dataset_id": ds["id"], "networks": options, **({"models": models} if models else {})}
        r = requests.post(server.url + "/api/v1/fits", json=body, timeout=30)
        assert r.status_code == 422, (options, r.status_code, r.text)
        assert message.replace("\\", "") in r.text, (options, r.text)
    after = requests.get(server.url + "/api/v1/fits", timeout=30).json()
    assert [f["id"] for f in after] == [f["id"] for f in before]
