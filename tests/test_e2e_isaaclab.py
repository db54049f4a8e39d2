"""Issue 2 end to end over HTTP: the Isaac Lab-made log is uploaded, fitted by a real uvicorn server (the
worker's shared one: no setting of its own is needed), exported, and the JSON export is loaded into the real
Isaac Lab DCMotorCfg and constructed."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import requests
import torch
from conftest import Server, upload_recording
from isaaclab.actuators import DCMotor, DCMotorCfg
from isaaclab.utils.types import ArticulationActions
from isaaclab_logs import TRUTH_DCMOTOR
from isaaclab_logs import make_recording as isaaclab_recording


def test_upload_fit_export_construct_report(server: Server, tmp_path: Path) -> None:
    rec = isaaclab_recording("dcmotor")
    ds = upload_recording(server, rec, tmp_path / "bench.csv")
    assert ds["joints"] == ["hinge"] and ds["segments"] == 6 and abs(ds["rate_hz"] - 200) < 1e-6
    assert abs(ds["duration_s"] - 6 * 5.995) < 1e-6

    r = requests.post(
        server.url + "/api/v1/fits",
        json={"dataset_id": ds["id"], "models": ["dcmotor"], "seed": 1},
        timeout=30,
    )
    assert r.status_code == 202, r.text
    fit_id = r.json()["id"]
    seen_progress = set()
    deadline = time.monotonic() + 240
    while True:
        fit = requests.get(f"{server.url}/api/v1/fits/{fit_id}", timeout=10).json()
        seen_progress.add(round(fit["progress"], 2))
        if fit["status"] in ("succeeded", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert fit["status"] == "succeeded", fit
    assert len(seen_progress) >= 2  # progress moved while we watched
    params = fit["result"]["joints"]["hinge"]["models"]["dcmotor"]["params"]
    assert fit["result"]["joints"]["hinge"]["best_model"] == "dcmotor"
    for k in ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit"):
        assert abs(params[k] / TRUTH_DCMOTOR[k] - 1) < 0.05, (k, params[k])

    py = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/isaaclab.py", timeout=10)
    assert py.status_code == 200 and "DCMotorCfg(" in py.text
    namespace: dict = {}
    exec(compile(py.text, "isaaclab.py", "exec"), namespace)  # the pasted source runs as is
    assert isinstance(namespace["ACTUATORS"]["hinge"], DCMotorCfg)

    doc = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/isaaclab.json", timeout=10).json()
    assert doc["isaaclab_version"] == "3.0.0"
    group = doc["actuators"]["hinge"]
    assert group["class_type"] == "DCMotorCfg"
    cfg = DCMotorCfg(**group["cfg"])
    cfg.validate()
    act = DCMotor(cfg, joint_names=["hinge"], joint_ids=slice(None), num_envs=1, device="cpu")
    assert float(act._saturation_effort[0, 0]) == np.float32(params["saturation_effort"])
    assert float(act.stiffness[0, 0]) == np.float32(params["stiffness"])
    # the constructed actuator saturates exactly where the fitted envelope says
    out = act.compute(
        ArticulationActions(
            joint_positions=torch.tensor([[2.0]]),
            joint_velocities=torch.zeros(1, 1),
            joint_efforts=torch.zeros(1, 1),
        ),
        torch.zeros(1, 1),
        torch.tensor([[5.0]]),
    )
    sat, vlim = params["saturation_effort"], params["actuator_velocity_limit"]
    expected = min(sat * (1 - 5.0 / vlim), params["actuator_effort_limit"])
    assert abs(float(out.joint_efforts[0, 0]) - expected) < 1e-4
    # the same cfg in Python source and JSON
    assert namespace["ACTUATORS"]["hinge"].to_dict() == cfg.to_dict()

    page = requests.get(f"{server.url}/fits/{fit_id}", timeout=10)
    assert page.status_code == 200 and "saturation_effort" in page.text
    assert 'PLOTLY_URL = "/static/plotly.min.js"' in page.text
    assert 'id="plot-0-envelope"' in page.text and 'id="plot-0-seg-5"' in page.text
    # issue 5's report additions: intervals, ranking, convergence, correlation and residuals per segment
    assert "95 % interval" in page.text and "Model ranking" in page.text
    for plot in ("convergence", "correlation", "residuals"):
        assert f'id="plot-0-{plot}"' in page.text, plot
    index = requests.get(server.url + "/", timeout=10)
    assert fit_id in index.text or "bench.csv" in index.text
