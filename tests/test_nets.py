"""Actuator networks fitted through the fit API: torque-supervised and in-the-loop recovery on logs of a known
nonlinear actuator (tests/net_logs.py), determinism, progress, bad options, exports and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import Server, run_cli
from net_logs import TRUTH, nonlinear_recording

from actuator_sysid.datasets.canonical import write_table
from actuator_sysid.export import BINARY_FORMATS, ExportError, render_all, render_bytes
from actuator_sysid.fitting.fit import FitRequest, FitRequestError, fit_recording, report_data
from actuator_sysid.fitting.training import NetOptions, containing_envelope
from actuator_sysid.fitting.training import net_fit as train_one
from actuator_sysid.models.families import NET_FAMILIES

PARAMETRIC = ["dcmotor", "dcmotor_delay"]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _val(model: dict, key: str, metric: str) -> float:
    return model[key]["validation"][metric]


def test_torque_supervised_nets_recover_the_nonlinear_actuator() -> None:
    """Acceptance 2: DC motor + 2-step delay + Stribeck friction + position-dependent limit, torque logged."""
    rec = nonlinear_recording(n_segments=9, seconds=3.0, torque=True)
    # 120 epochs, not the default 1 000 (the parametric search keeps its own): measured MLP 3.1 % and LSTM 3.3 %
    # of the torque range (2.5 % / 2.9 % at the default), against the 5 % bound and the parametric 5.1 %
    res = fit_recording(
        rec,
        FitRequest(
            models=[*PARAMETRIC, "mlp", "lstm"], generations=100, population=16, networks={"epochs": 120}
        ),
    )
    jr = res["joints"]["j"]
    models = jr["models"]
    best_parametric_torque = min(_val(models[f], "torque_metrics", "torque_rmse") for f in PARAMETRIC)
    for kind in ("mlp", "lstm"):
        m = models[kind]
        assert m["training"]["mode"] == "torque"
        assert _val(m, "torque_metrics", "torque_rmse_of_range") <= 0.05, (
            kind,
            m["torque_metrics"]["validation"],
        )
        assert _val(m, "torque_metrics", "torque_rmse") < best_parametric_torque, kind
        assert m["comparison"]["torque_rmse"]["network"] == _val(m, "torque_metrics", "torque_rmse")
        # Isaac Lab clips the net with the envelope: it holds every measured point, at the true effort cap
        env = m["params"]
        assert abs(env["actuator_effort_limit"] - TRUTH["elim"]) / TRUTH["elim"] < 0.15, env
    # one stated metric for all four: the open-loop validation torque RMSE; the lowest is the best model
    assert {r["family"] for r in jr["ranking"]} == {*PARAMETRIC, "mlp", "lstm"}
    assert all(r["metric"] == "torque_rmse" for r in jr["ranking"])
    torque = {f: _val(models[f], "torque_metrics", "torque_rmse") for f in models}
    assert jr["best_model"] == min(torque, key=torque.__getitem__) in ("mlp", "lstm")
    assert [r["torque_rmse"] for r in jr["ranking"]] == [torque[r["family"]] for r in jr["ranking"]]
    plots = report_data(rec, res)
    assert plots["joints"]["j"]["family"] == jr["best_model"]


def test_in_the_loop_nets_track_a_log_without_torque() -> None:
    """Acceptance 3: no torque in the log; a current-loop lag no parametric family expresses."""
    rec = nonlinear_recording(n_segments=9, seconds=3.0, torque=False, position_limited=False, lag_s=0.02)
    # a short net budget (the parametric search keeps its own): the nets still track well inside the bound
    # (measured 0.023 rad MLP, 0.019 rad LSTM against 1.5 × 0.034 rad), the MLP's history chosen on its inner split
    nets = {"epochs": 150, "in_loop_epochs": 60}
    res = fit_recording(
        rec, FitRequest(models=[*PARAMETRIC, "mlp", "lstm"], generations=150, population=16, networks=nets)
    )
    models = res["joints"]["j"]["models"]
    best = min(_val(models[f], "metrics", "position_rmse") for f in PARAMETRIC)
    for kind in ("mlp", "lstm"):
        m = models[kind]
        assert m["training"]["mode"] == "in_the_loop"
        assert "torque_metrics" not in m
        # the in-the-loop phase improved on the inverse-dynamics warm start
        assert m["training"]["in_loop_validation_loss"] < m["training"]["in_loop_initial_loss"], m["training"]
        assert _val(m, "metrics", "position_rmse") <= 1.5 * best, (
            kind,
            _val(m, "metrics", "position_rmse"),
            best,
        )


def test_training_is_deterministic_for_a_seed_and_streams_progress() -> None:
    rec = nonlinear_recording(n_segments=3, seconds=1.0, torque=True)
    seen: list[tuple[float, str]] = []
    opts = NetOptions(epochs=3)
    a = train_one(
        rec, "j", "mlp", [0, 1], [2], opts, seed=5, progress=lambda f, m: seen.append((f, m))
    ).to_json()
    b = train_one(rec, "j", "mlp", [0, 1], [2], opts, seed=5).to_json()
    c = train_one(rec, "j", "mlp", [0, 1], [2], opts, seed=6).to_json()
    assert a["weights"] == b["weights"] and a["weights"] != c["weights"]
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and 0 < fractions[-1] <= 1 and "mlp j" in seen[-1][1]


def test_containing_envelope_is_tight() -> None:
    """Points under a known DC-motor line give back that line (within the 2 % margin)."""
    rng = np.random.default_rng(0)
    v = rng.uniform(-6, 6, 4000)
    sat, vlim, elim = 4.0, 8.0, 2.5
    hi = np.minimum(sat * (1 - v / vlim), elim)
    lo = np.maximum(sat * (-1 - v / vlim), -elim)
    tau = np.where(rng.random(v.size) < 0.5, hi, lo) * rng.uniform(0.7, 1.0, v.size)
    tau[:40] = np.where(v[:40] > 0, hi[:40], lo[:40])  # some points on the boundary
    env = containing_envelope(v, tau)
    assert env["actuator_effort_limit"] == pytest.approx(elim, rel=0.03)
    assert env["saturation_effort"] == pytest.approx(sat, rel=0.15)
    assert env["actuator_velocity_limit"] == pytest.approx(vlim, rel=0.15)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"networks": {"epoch": 3}}, "unknown network option"),
        ({"networks": {"mode": "torque"}}, "needs a measured torque"),
        ({"models": ["lstm"], "decimation": 2}, "decimation 1"),
        ({"networks": {"input_idx": [0, 3]}, "decimation": 2}, "multiple of 2"),
        ({"models": ["mlp", "transformer"]}, "unknown model family 'transformer'"),
    ],
)
def test_bad_network_requests_say_what(change: dict, message: str) -> None:
    rec = nonlinear_recording(n_segments=2, seconds=0.5, torque=False)
    with pytest.raises(FitRequestError, match=message):
        fit_recording(rec, FitRequest(**{"models": ["mlp"], **change}))


@pytest.fixture(scope="module")
def net_fit() -> tuple:
    torch.set_num_threads(1)
    rec = nonlinear_recording(n_segments=3, seconds=1.0, torque=True)
    res = fit_recording(
        rec,
        FitRequest(models=["dcmotor", "mlp", "lstm"], generations=5, population=8, networks={"epochs": 3}),
    )
    return rec, res


def test_exports_hold_checkpoints_and_net_cfgs(net_fit: tuple) -> None:
    rec, res = net_fit
    files = render_all(res, rec, replay_exports=False)
    assert set(BINARY_FORMATS) <= set(files) and all(isinstance(files[f], bytes) for f in BINARY_FORMATS)
    doc = json.loads(files["isaaclab.json"])
    (group,) = doc["actuators_net"].values()
    assert group["class_type"] in ("ActuatorNetMLPCfg", "ActuatorNetLSTMCfg")
    assert group["cfg"]["network_file"] == "torchscript.pt"
    assert "ACTUATORS_NET = {" in files["isaaclab.py"] and "ActuatorNet" in files["isaaclab.py"]
    compile(files["isaaclab.py"], "isaaclab.py", "exec")
    codes = {f["code"] for f in json.loads(files["validation.json"])["findings"]}
    assert "EXPORT.ISAACLAB.net_torchscript_to_newton" in codes
    assert render_bytes(res, "newton.pt2", families="lstm")[:2] == b"PK"  # a zip archive (torch.export)
    with pytest.raises(ExportError, match="must be mlp or lstm"):
        render_bytes(res, "torchscript.pt", families="dcmotor")


def test_newton_usda_points_a_net_joint_at_its_onnx_checkpoint(net_fit: tuple) -> None:
    """--family j=mlp / j=lstm: a neural NewtonActuator whose modelPath is the checkpoint beside the .usda; the
    kind the fit's own newton.onnx does not hold gets its own file name and a finding saying how to write it."""
    from actuator_sysid.export.checkpoints import checkpoint_files
    from actuator_sysid.export.newton_usd import build_stage

    rec, res = net_fit
    ((best_kind, _),) = checkpoint_files(res).values()
    for kind in ("mlp", "lstm"):
        stage, findings = build_stage(res, rec, families={"j": kind})
        (act,) = [p for p in stage.Traverse() if p.GetTypeName() == "NewtonActuator"]
        assert "NewtonNeuralControlAPI" in act.GetAppliedSchemas()
        assert "NewtonPDControlAPI" not in act.GetAppliedSchemas()
        path = act.GetAttribute("newton:modelPath").Get().path
        net = res["joints"]["j"]["models"][kind]["network"]
        assert act.GetAttribute("newton:maxMotorEffort").Get() == pytest.approx(net["actuator_effort_limit"])
        codes = {f.code for f in findings}
        if kind == best_kind:
            assert path == "./newton.onnx" and "EXPORT.NEWTON.checkpoint_file" not in codes
        else:
            assert path == f"./j.{kind}.newton.onnx" and "EXPORT.NEWTON.checkpoint_file" in codes
    default, _ = build_stage(res, rec)  # the best model is parametric: a PD actuator, as before
    (act,) = [p for p in default.Traverse() if p.GetTypeName() == "NewtonActuator"]
    assert "NewtonNeuralControlAPI" not in act.GetAppliedSchemas()


def test_a_fit_of_networks_alone_still_exports_and_reports() -> None:
    rec = nonlinear_recording(n_segments=2, seconds=0.6, torque=False)
    res = fit_recording(rec, FitRequest(models=["mlp"], networks={"epochs": 2, "in_loop_epochs": 2}))
    assert res["joints"]["j"]["best_model"] == "mlp"
    assert report_data(rec, res)["joints"]["j"]["family"] == "mlp"
    files = render_all(res, rec, replay_exports=False)
    assert "torchscript.pt" in files and "ACTUATORS_NET" in files["isaaclab.py"]
    compile(files["isaaclab.py"], "isaaclab.py", "exec")


def test_cli_fits_and_exports_networks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fit` through the CLI's main, its output captured; the exports of its folder through the same main."""
    from actuator_sysid.cli import main

    rec = nonlinear_recording(n_segments=2, seconds=0.6, torque=True)
    log = tmp_path / "log.csv"
    write_table(rec, log)  # with the log.json sidecar: the load the plant steps
    out = tmp_path / "fit"
    r = run_cli("fit", str(log), "--models", "mlp", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert all((out / name).is_file() for name in ("torchscript.pt", "newton.onnx", "newton.pt2"))
    code = main(["export", str(out), "--format", "newton.onnx", "--out", str(tmp_path / "n.onnx")])
    assert code == 0 and (tmp_path / "n.onnx").read_bytes() == (out / "newton.onnx").read_bytes(), (
        capsys.readouterr().err
    )
    target = tmp_path / "x" / "net.pt"
    code = main(["export", str(out), "--format", "torchscript.pt", "--out", str(target)])
    assert code == 0, capsys.readouterr().err
    # the same module, not the same bytes: TorchScript orders a Linear's constants by string hash (per process)
    extra_a, extra_b = {"metadata.json": ""}, {"metadata.json": ""}
    a = torch.jit.load(str(target), _extra_files=extra_a)
    b = torch.jit.load(str(out / "torchscript.pt"), _extra_files=extra_b)
    assert extra_a == extra_b and a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    capsys.readouterr()
    code = main(["export", str(out), "--format", "torchscript.pt", "--family", "j=dcmotor"])
    assert code == 2 and "must be mlp or lstm" in capsys.readouterr().err


def test_report_compares_networks_with_the_best_parametric_model(net_fit: tuple) -> None:
    from actuator_sysid.service.report import render_report

    rec, res = net_fit
    plots = report_data(rec, res)
    seg = plots["joints"]["j"]["segments"][0]
    assert seg["network"] in NET_FAMILIES and len(seg["q_net"]) == len(seg["q"])  # the net's closed loop
    html = render_report({"id": "x", "status": "succeeded"}, res, plots)
    assert "network (" in html
    assert "Actuator networks against dcmotor" in html
    for label in ("closed loop: position RMSE", "open loop: torque RMSE"):
        assert label in html
    assert "early stopping watched inner split" in html  # never the validation the report shows
    mlp = res["joints"]["j"]["models"]["mlp"]["comparison"]
    assert mlp["parametric_family"] == "dcmotor" and mlp["torque_rmse"]["parametric"] > 0


def test_service_fits_networks_and_serves_their_checkpoints(server: Server, tmp_path: Path) -> None:
    """On the worker's shared server (tests/conftest.py): a start-up of its own is seconds of CPU."""
    import requests
    from conftest import upload_recording
    from test_service_flow import wait_status

    rec = nonlinear_recording(n_segments=2, seconds=0.6, torque=True)
    ds = upload_recording(server, rec, tmp_path / "log.csv")
    body = {"dataset_id": ds["id"], "models": ["mlp"], "networks": {"epochs": 3}}
    r = requests.post(server.url + "/api/v1/fits", json={**body, "networks": {"epoch": 3}}, timeout=30)
    assert 400 <= r.status_code < 500 and "unknown network option" in r.text, r.text
    r = requests.post(server.url + "/api/v1/fits", json=body, timeout=30)
    assert r.status_code == 202, r.text
    fit = wait_status(server, r.json()["id"], ("succeeded", "failed"), timeout=120)
    assert fit["status"] == "succeeded", fit
    for name, head in (("torchscript.pt", b"PK"), ("newton.pt2", b"PK"), ("newton.onnx", b"\x08")):
        got = requests.get(f"{server.url}/api/v1/fits/{fit['id']}/export/{name}", timeout=10)
        assert got.status_code == 200 and got.content[: len(head)] == head, (name, got.status_code)
        assert got.headers["content-type"] in ("application/octet-stream", "application/zip")
    import onnx  # the served newton.onnx is a model carrying Newton's metadata

    model = onnx.load_from_string(got.content)
    assert json.loads(model.metadata_props[0].value)["model_type"] == "mlp"


def test_mlp_with_decimation_counts_history_in_physics_steps() -> None:
    """A log at the policy rate with 2 physics steps per sample: a history of 0, 20, 40 ms (at 200 Hz samples
    0, 4, 8) is input_idx [0, 8, 16] physics steps; the closed loop steps the net every physics step with the
    command held."""
    rec = nonlinear_recording(n_segments=3, seconds=1.0, torque=False)
    networks = {"epochs": 3, "in_loop_epochs": 3, "history_ms": [0, 20, 40]}
    res = fit_recording(rec, FitRequest(models=["mlp"], decimation=2, networks=networks))
    m = res["joints"]["j"]["models"]["mlp"]
    assert m["network"]["input_idx"] == [0, 8, 16]
    assert m["training"]["mode"] == "in_the_loop" and np.isfinite(m["metrics"]["train"]["position_rmse"])


@pytest.mark.parametrize("torque", [True, False])
def test_segments_shorter_than_the_training_windows_still_fit(torque: bool) -> None:
    rec = nonlinear_recording(n_segments=3, seconds=0.2, torque=torque)  # 40 samples: under one LSTM sequence
    res = fit_recording(rec, FitRequest(models=["mlp", "lstm"], networks={"epochs": 3, "in_loop_epochs": 3}))
    for m in res["joints"]["j"]["models"].values():
        assert np.isfinite(m["metrics"]["validation"]["position_rmse"])
