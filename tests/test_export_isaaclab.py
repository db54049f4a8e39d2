"""Every family Isaac Lab has a class for exports a cfg that the real Isaac Lab 3.0 constructs and runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from isaaclab import actuators as ila
from isaaclab.utils.types import ArticulationActions
from isaaclab_logs import make_recording

from actuator_sysid.export.isaaclab import ExportError, actuator_cfgs, render_json, render_python
from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.models.families import FAMILIES

ISAACLAB_FAMILIES = [f.name for f in FAMILIES.values() if f.isaaclab_cfg]
ACTUATOR_CLASS = {
    "ImplicitActuatorCfg": "ImplicitActuator",
    "IdealPDActuatorCfg": "IdealPDActuator",
    "DCMotorCfg": "DCMotor",
    "DelayedPDActuatorCfg": "DelayedPDActuator",
    "RemotizedPDActuatorCfg": "RemotizedPDActuator",
}


@pytest.fixture(scope="module")
def result() -> dict:
    rec = make_recording("dcmotor")
    rec.segments = rec.segments[:3]
    return fit_recording(
        rec,
        FitRequest(
            models=[*ISAACLAB_FAMILIES, "pid", "dcmotor_delay"],
            generations=8,
            population=6,
            refine_iterations=4,
        ),
    )


@pytest.mark.parametrize("family", ISAACLAB_FAMILIES)
def test_export_constructs_the_real_cfg_and_actuator(result: dict, family: str) -> None:
    doc = json.loads(render_json(result, {"hinge": family}))
    group = doc["actuators"]["hinge"]
    assert group["class_type"] == FAMILIES[family].isaaclab_cfg
    cfg = getattr(ila, group["class_type"])(**group["cfg"])
    cfg.validate()
    act = getattr(ila, ACTUATOR_CLASS[group["class_type"]])(
        cfg, joint_names=["hinge"], joint_ids=slice(None), num_envs=2, device="cpu"
    )
    act.reset(torch.arange(2))
    out = act.compute(
        ArticulationActions(
            joint_positions=torch.full((2, 1), 0.5),
            joint_velocities=torch.zeros(2, 1),
            joint_efforts=torch.zeros(2, 1),
        ),
        torch.zeros(2, 1),
        torch.zeros(2, 1),
    )
    params = result["joints"]["hinge"]["models"][family]["params"]
    assert torch.isfinite(act.computed_effort).all()
    np.testing.assert_allclose(float(act.computed_effort[0, 0]), 0.5 * params["stiffness"], rtol=1e-5)
    if family != "implicit":
        assert out.joint_efforts is not None
    # the Python source defines the same cfg
    namespace: dict = {}
    exec(compile(render_python(result, {"hinge": family}), "isaaclab.py", "exec"), namespace)
    assert namespace["ACTUATORS"]["hinge"].to_dict() == cfg.to_dict()


def test_newton_only_families_are_refused_with_a_reason(result: dict) -> None:
    with pytest.raises(ExportError, match="Newton"):
        actuator_cfgs(result, {"hinge": "pid"})
    # the default export falls back to the best family Isaac Lab can express
    groups = actuator_cfgs(result)
    assert FAMILIES[groups["hinge"]["family"]].isaaclab_cfg
