"""Whole-robot exports (issue 16, acceptance 3): Isaac Lab's dict builds with the real classes for every group,
the Newton USD imports with Newton's add_usd and reads back equal, the MJCF loads in MuJoCo, and each replays on
the whole robot by its consumer within 10 % of our coupled rollout.

The result is written by hand from known values (an export is a function of the result); the log it replays is
stepped by Newton alone (tests/robot_sim.py) with other values, so every replay misses the log by a clear,
non-zero RMSE that the consumers must reproduce.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from robot_sim import chirp_targets, robot_recording, simulate_newton_log

from actuator_sysid.cli import main
from actuator_sysid.export.robot import write_robot_exports
from actuator_sysid.export.robot_mjcf import actuator_names, replay_model
from actuator_sysid.export.robot_usd import import_stage, readback_mismatches
from actuator_sysid.export.validate import open_stage, validate_stage
from actuator_sysid.fitting.result import as_robot_result
from actuator_sysid.models.robot import RobotModel, load_robot

GO2_XML = Path(__file__).resolve().parents[2] / "shared" / "data" / "go2-in-air" / "go2.xml"
needs_go2 = pytest.mark.skipif(not GO2_XML.is_file(), reason="shared/data/go2-in-air is not here")
LOG_DT, DEC, DELAY, KP, KD = 0.005, 2, 2, 20.0, 1.5
DT = LOG_DT / DEC
TRUTH = {
    "hip": (0.006, 0.4, 0.12),
    "thigh": (0.015, 0.8, 0.25),
    "calf": (0.03, 0.5, 0.35),
}  # armature, visc, fric
MISFIT = (1.3, 0.8, 1.2)  # the result's values are the truth times these: the replays miss the log clearly
SAMPLES, SPLIT = 300, 200


def robot_result(
    robot: RobotModel,
    groups: dict[str, str],
    values: dict[str, tuple[float, float, float]],
    bias: np.ndarray,
    delay: int,
) -> dict:
    """A whole-robot fit result in fitting/robot/'s layout, from stated values (no fit)."""
    import re

    out = {}
    for g, expr in groups.items():
        joints = [n for n in robot.joint_names if re.fullmatch(expr, n)]
        eff = robot.effort_limit[[robot.joint_names.index(j) for j in joints]]
        a, d, f = values[g]
        out[g] = {
            "joint_names_expr": expr,
            "joints": joints,
            "armature": a,
            "viscous_friction": d,
            "friction": f,
            "stiffness": KP,
            "damping": KD,
            "effort_limit": float(eff.max()) if np.isfinite(eff).all() else None,
        }
    return {
        "kind": "robot",
        "robot": robot.summary(),
        "joint_mapping": "by name",
        "groups": out,
        "gains": "from the log",
        "encoder_bias": {n: float(b) for n, b in zip(robot.joint_names, bias, strict=True)},
        "delay_steps": delay,
        "delay": "fixed",
        "sim": {"dt": DT, "decimation": DEC},
        "validation": {
            "split": "time",
            "split_sample": SPLIT,
            "fraction": 1 - SPLIT / (SAMPLES + 1),
            "rmse": math.nan,
            "model_defaults_rmse": math.nan,
        },
    }


def written(result: dict, rec, robot: RobotModel, out: Path) -> tuple[dict, list[str]]:
    """write_robot_exports on a hand-written result read as a stored one: fit.json's dict and the files."""
    res, files = write_robot_exports(as_robot_result(result), rec, robot, out)
    return res.to_json(), files


@pytest.fixture(scope="module")
def go2() -> RobotModel:
    return load_robot(GO2_XML)


@pytest.fixture(scope="module")
def go2_case(go2: RobotModel, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The Go2 log (Newton alone), the misfit result, and what write_robot_exports wrote and replayed."""
    part = [n.split("_")[1] for n in go2.joint_names]
    arm, damp, fric = (np.array([TRUTH[p][i] for p in part]) for i in range(3))
    bias = np.linspace(-0.02, 0.02, 12)
    cmd = chirp_targets(go2, SAMPLES, amplitude=0.3, seed=1)
    q, qd = simulate_newton_log(
        go2,
        cmd,
        decimation=DEC,
        delay=DELAY,
        armature=arm,
        damping=damp,
        friction=fric,
        kp=KP,
        kd=KD,
        bias=bias,
    )
    rec = robot_recording(go2, cmd, q, qd, kp=KP, kd=KD)
    values = {g: tuple(v * m for v, m in zip(t, MISFIT, strict=True)) for g, t in TRUTH.items()}
    result = robot_result(go2, {g: f".*_{g}_joint" for g in TRUTH}, values, bias, DELAY)
    out = tmp_path_factory.mktemp("go2_exports")
    result, files = written(result, rec, go2, out)
    return {
        "result": result,
        "rec": rec,
        "out": out,
        "files": files,
        "values": values,
        "cmd": cmd,
        "q": q,
        "qd": qd,
    }


@needs_go2
def test_isaaclab_dict_builds_every_group_with_the_real_classes(go2_case: dict) -> None:
    import torch
    from isaaclab import actuators as ila
    from isaaclab.utils.types import ArticulationActions

    out, values = go2_case["out"], go2_case["values"]
    assert set(go2_case["files"]) == {"isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"}
    py = (out / "isaaclab.py").read_text()
    assert py.startswith("# actuator-sysid whole-robot export (Isaac Lab 3.0 actuators)")
    ns: dict = {}
    exec(compile(py, "isaaclab.py", "exec"), ns)
    assert ns["SIM"] == {"dt": DT, "decimation": DEC}
    doc = json.loads((out / "isaaclab.json").read_text())
    assert doc["sim"] == {"dt": DT, "decimation": DEC} and doc["provenance"][0].startswith("actuator-sysid")
    assert set(ns["ACTUATORS"]) == set(doc["actuators"]) == set(TRUTH)
    for g, cfg in ns["ACTUATORS"].items():
        assert type(cfg) is ila.DelayedPDActuatorCfg and cfg.joint_names_expr == [f".*_{g}_joint"]
        cfg.validate()
        spec = doc["actuators"][g]
        built = getattr(ila, spec["class_type"])(**{k: v for k, v in spec.items() if k != "class_type"})
        assert built.to_dict() == cfg.to_dict()
        assert (cfg.armature, cfg.viscous_friction, cfg.friction) == pytest.approx(values[g], rel=1e-12)
        assert (cfg.stiffness, cfg.damping, cfg.min_delay, cfg.max_delay) == (KP, KD, DELAY, DELAY)
        # the real actuator on a group's four joints: kp·(target − q) (under the motor's effort limit)
        act = cfg.class_type(
            cfg,
            joint_names=[f"{leg}_{g}_joint" for leg in ("FL", "FR", "RL", "RR")],
            joint_ids=slice(None),
            num_envs=2,
            device="cpu",
        )
        act.reset(torch.arange(2))
        a = ArticulationActions(
            joint_positions=torch.full((2, 4), 0.5),
            joint_velocities=torch.zeros(2, 4),
            joint_efforts=torch.zeros(2, 4),
        )
        tau = act.compute(a, torch.zeros(2, 4), torch.zeros(2, 4)).joint_efforts
        np.testing.assert_allclose(tau.numpy(), 0.5 * KP)
    assert go2_case["result"]["exports"]["isaaclab"]["json_equals_py"]


@needs_go2
def test_newton_usd_imports_with_add_usd_and_reads_back_equal(go2_case: dict) -> None:
    result = go2_case["result"]
    text = (go2_case["out"] / "newton.usda").read_text()
    assert text.startswith("#usda") and "actuator-sysid whole-robot export (Newton 1.8 USD)" in text
    stage = open_stage(text)
    assert validate_stage(stage) == []  # NEWTON.DJ.001
    model = import_stage(stage)
    assert readback_mismatches(model, as_robot_result(result)) == []
    labels = [lab.rsplit("/", 1)[-1] for lab in model.joint_label]
    d = int(model.joint_qd_start.numpy()[labels.index("RL_calf_joint")])
    arm, visc, fric = go2_case["values"]["calf"]
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    assert float(model.joint_armature.numpy()[d]) == f32(arm) and float(
        model.joint_friction.numpy()[d]
    ) == f32(fric)
    assert float(model.joint_damping.numpy()[d]) == pytest.approx(
        visc, rel=1e-6
    )  # authored per degree (§C.4)
    (act,) = [a for a in model.actuators if d in a.indices.numpy()]
    k = list(act.indices.numpy()).index(d)
    assert act.delay.delay_steps.numpy()[k] == DELAY and float(act.drive.kp.numpy()[k]) == KP
    assert float(act.clamping[0].max_effort.numpy()[k]) == f32(45.43)
    # the robot's own inertia came through the stage: the same joint-space dynamics as the fit's import
    assert model.body_count == len(go2_case["result"]["robot"]["joints"]) + 1
    assert result["exports"]["newton"]["readback_equal"] and result["exports"]["newton"]["dj001"] == []


@needs_go2
def test_mjcf_is_the_users_model_updated_and_loads_in_mujoco(go2_case: dict) -> None:
    import mujoco

    text = (go2_case["out"] / "mjcf.xml").read_text()
    assert '<mesh file="assets/base_0.obj"' in text and "<motor" not in text.split("<actuator>")[1]
    model = mujoco.MjModel.from_xml_string(replay_model(text, GO2_XML.parent))  # its meshes are absent here
    assert model.njnt == 12 and model.nu == 12 and math.isclose(model.opt.timestep, DT)
    names = actuator_names(text)
    for g, (arm, visc, fric) in go2_case["values"].items():
        for leg in ("FL", "FR", "RL", "RR"):
            j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"{leg}_{g}_joint")
            dof = model.jnt_dofadr[j]
            assert (
                model.dof_armature[dof],
                model.dof_damping[dof],
                model.dof_frictionloss[dof],
            ) == pytest.approx((arm, visc, fric), rel=1e-8)
            a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, names[f"{leg}_{g}_joint"])
            assert model.actuator_gainprm[a, 0] == KP and list(model.actuator_biasprm[a, :3]) == [0, -KP, -KD]
            lim = 45.43 if g == "calf" else 23.7
            assert list(model.actuator_forcerange[a]) == pytest.approx([-lim, lim])
            assert model.actuator_delay[a] == pytest.approx(DELAY * DT)
    assert names["FL_hip_joint"] == "FL_hip"  # the user's actuator names are kept


@needs_go2
def test_each_export_replays_on_the_whole_robot_within_10_percent(go2_case: dict) -> None:
    from actuator_sysid.export import robot_replay as rr
    from actuator_sysid.export.robot_common import bias_of, joint_models, replay_log

    rep = go2_case["result"]["replays"]
    assert set(rep["consumers"]) == {"isaaclab", "newton", "mujoco"}
    ours = rep["ours"]["rmse"]
    assert ours > 2e-3, rep  # the misfit values miss the log clearly (measured 6.9e-3 rad)
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["within_tolerance"], (name, c)
        assert abs(c["rmse_replay"] - ours) <= 0.10 * ours
        assert c["rmse_replay_vs_ours"] < 1e-5, (name, c)  # measured 1e-8 … 1.5e-7 rad: the same dynamics
    assert json.loads((go2_case["out"] / "fit.json").read_text())["replays"]["within_tolerance"] is True
    between = rep["rmse_between"]
    assert set(between) == {
        "ours vs isaaclab",
        "ours vs newton",
        "ours vs mujoco",
        "isaaclab vs newton",
        "isaaclab vs mujoco",
        "newton vs mujoco",
    }
    assert max(between.values()) < 1e-5, between
    # the tolerance tells exports apart: the MJCF with the calf armature tripled misses it
    text = (go2_case["out"] / "mjcf.xml").read_text()
    arm = go2_case["values"]["calf"][0]
    bad = text.replace(f'armature="{arm:.9g}"', f'armature="{3 * arm:.9g}"')
    assert bad != text
    result, rec = as_robot_result(go2_case["result"]), go2_case["rec"]
    lg = replay_log(result, rec)
    q = rr.mujoco_run(
        replay_model(bad, GO2_XML.parent),
        lg,
        bias_of(result, lg.joints),
        joint_models(result),
        actuator_names(bad),
    )
    miss = rr.compare(lg, q, q, 0.0)["rmse_replay"]
    assert abs(miss - ours) > 0.10 * ours, (miss, ours)


@needs_go2
def test_every_replay_starts_its_delay_line_with_the_commands_before_the_split(
    go2_case: dict, go2: RobotModel, tmp_path: Path
) -> None:
    """A command jump on the sample just before the split, which the delay (2 physics steps, decimation 2) still
    applies after it: every consumer's replay starts its delay line with it as the fit's validation replay does
    (fitting/robot/ replay_coupled over the whole log), and ours is that replay."""
    result = json.loads(
        json.dumps({k: v for k, v in go2_case["result"].items() if k not in ("replays", "exports")})
    )
    cmd = go2_case["cmd"].copy()
    cmd[SPLIT - 1] += 0.25
    rec = robot_recording(go2, cmd, go2_case["q"], go2_case["qd"], kp=KP, kd=KD)
    result, _ = written(result, rec, go2, tmp_path)
    rep = result["replays"]
    seg = rec.segments[0]
    fit_q = _fit_replay(result, go2, seg, seg.q_des, seg.qd_des)
    meas = seg.q[SPLIT:]
    assert rep["ours"]["rmse"] == pytest.approx(float(np.sqrt(np.mean((fit_q - meas) ** 2))), rel=1e-6)
    empty = seg.q_des.copy()  # the same replay with an empty delay line (the split's command before it)
    empty[:SPLIT] = empty[SPLIT]
    gone = _fit_replay(result, go2, seg, empty, seg.qd_des)
    assert float(np.sqrt(np.mean((gone - fit_q) ** 2))) > 1e-3  # the jump moves the robot after the split
    assert set(rep["consumers"]) == {"isaaclab", "newton", "mujoco"}
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["within_tolerance"], (name, c)
        assert c["rmse_replay_vs_ours"] < 1e-5, (name, c)


@needs_go2
def test_velocity_targets_are_delayed_as_every_consumer_delays_them(
    go2_case: dict, go2: RobotModel, tmp_path: Path
) -> None:
    """Isaac Lab's DelayBuffers and Newton's Delay hold the velocity targets back as long as the position targets
    (docs/consumer-semantics.md §A.5): with velocity targets in the log (jumping just before the split, where the
    delay reaches back), every consumer's replay matches our rollout, which delays them too."""
    result = json.loads(
        json.dumps({k: v for k, v in go2_case["result"].items() if k not in ("replays", "exports")})
    )
    rec = robot_recording(go2, go2_case["cmd"], go2_case["q"], go2_case["qd"], kp=KP, kd=KD)
    seg = rec.segments[0]
    seg.qd_des = np.gradient(seg.q_des, seg.t, axis=0)
    seg.qd_des[SPLIT - 1 :: 7] += 3.0  # rad/s: every 7th sample from the last one before the split
    result, _ = written(result, rec, go2, tmp_path)
    rep = result["replays"]
    assert set(rep["consumers"]) == {"isaaclab", "newton", "mujoco"}
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok", (name, c)
        assert c["rmse_replay_vs_ours"] < 1e-5, (name, c)


def _rollout_has_envelope() -> bool:
    import dataclasses

    from actuator_sysid.models.articulated import JointTerms

    return "saturation_effort" in {f.name for f in dataclasses.fields(JointTerms)}


@needs_go2
@pytest.mark.skipif(not _rollout_has_envelope(), reason="the coupled rollout has no DC-motor envelope yet")
def test_a_dc_envelope_with_a_delay_replays_alike_in_every_consumer(go2_case: dict, tmp_path: Path) -> None:
    """Groups with a DC-motor envelope that cuts the PD effort, and a delay: Isaac Lab's DelayedDCMotorCfg (ours,
    from actuator_sysid.consumers), Newton's ClampingDCMotor, MuJoCo's two actuators and actuatorfrcrange, and our rollout
    move the robot alike, far from the unclipped log."""
    result = json.loads(
        json.dumps({k: v for k, v in go2_case["result"].items() if k not in ("replays", "exports")})
    )
    for e in result["groups"].values():  # the fitted max motor effort 2.5 N·m under the model's box
        e.update(
            saturation_effort=3.0, velocity_limit=6.0, model_effort_limit=e["effort_limit"], effort_limit=2.5
        )
    result, _ = written(result, go2_case["rec"], load_robot(GO2_XML), tmp_path)
    py = (tmp_path / "isaaclab.py").read_text()
    assert "from actuator_sysid.consumers.isaaclab import DelayedDCMotorCfg" in py  # the consumer package's
    assert result["exports"]["newton"]["readback_equal"] and result["exports"]["newton"]["dj001"] == []
    rep = result["replays"]
    # the envelope cuts: the rollout misses the unclipped log by 3.8× the misfit alone (measured 0.026 rad)
    assert rep["ours"]["rmse"] > 2 * go2_case["result"]["replays"]["ours"]["rmse"], rep
    assert set(rep["consumers"]) == {"isaaclab", "newton", "mujoco"}
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["within_tolerance"], (name, c)
        assert c["rmse_replay_vs_ours"] < 1e-5, (name, c)  # measured 1e-8 … 3e-7 rad


def test_a_usd_robot_gets_a_layer_over_its_own_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Newton's example ant.usda as the user's robot: a layer that sublayers it, its joints' actuators authored;
    re-exported from fit.json as written, and no mjcf.xml (MuJoCo reads no USD)."""
    import newton

    usd = Path(newton.__file__).parent / "examples" / "assets" / "ant.usda"
    ant = load_robot(
        usd
    )  # its UsdPhysics drives (kp 0.04 per degree) zeroed by load_robot, as the layer removes them
    n = len(ant.joint_names)
    bias = np.linspace(-0.01, 0.01, n)
    truth = {"leg": (0.01, 0.3, 0.1), "foot": (0.005, 0.2, 0.05)}
    groups = {"leg": ".*_leg", "foot": ".*_foot"}
    kind = ["leg" if nm.endswith("_leg") else "foot" for nm in ant.joint_names]
    arm, damp, fric = (np.array([truth[k][i] for k in kind]) for i in range(3))
    cmd = chirp_targets(ant, SAMPLES, amplitude=0.3, seed=2)
    q, qd = simulate_newton_log(
        ant, cmd, decimation=DEC, delay=1, armature=arm, damping=damp, friction=fric, kp=KP, kd=KD, bias=bias
    )
    values = {g: tuple(v * m for v, m in zip(t, MISFIT, strict=True)) for g, t in truth.items()}
    result = robot_result(ant, groups, values, bias, 1)
    result, files = written(result, robot_recording(ant, cmd, q, qd), ant, tmp_path)
    assert files == ["isaaclab.py", "isaaclab.json", "newton.usda"]
    assert result["exports"]["mujoco"]["status"] == "not written"
    for (
        name
    ) in files:  # `export` of this fit.json writes the fit's own files; mjcf.xml it refuses, saying why
        again = tmp_path / f"again_{name}"
        assert main(["export", str(tmp_path), "--format", name, "--out", str(again)]) == 0
        assert again.read_bytes() == (tmp_path / name).read_bytes(), name
    assert main(["export", str(tmp_path), "--format", "mjcf.xml"]) == 2
    err = capsys.readouterr().err
    assert "mjcf.xml was not written" in err and "ant.usda is a USD model: MuJoCo reads no USD" in err, err
    text = (tmp_path / "newton.usda").read_text()
    assert f"subLayers = [\n        @{usd.resolve()}@" in text or f"@{usd.resolve()}@" in text
    stage = open_stage(text)
    assert [f for f in validate_stage(stage) if f.severity == "error"] == []
    assert readback_mismatches(import_stage(stage), as_robot_result(result)) == []
    rep = result["replays"]
    assert set(rep["consumers"]) == {"isaaclab", "newton"}
    assert rep["ours"]["rmse"] > 1e-3, rep
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["within_tolerance"], (name, c)
        assert c["rmse_replay_vs_ours"] < 1e-4, (name, c)


def test_a_packaged_mjcf_loads_as_written_and_replays_alike(tmp_path: Path) -> None:
    """Newton's example nv_ant.xml (angles in degrees, inertia from its geoms, a free root, geared motors): the
    exported mjcf.xml loads in MuJoCo as written, and all three consumers replay it as our rollout does."""
    import mujoco
    import newton

    ant = load_robot(Path(newton.__file__).parent / "examples" / "assets" / "nv_ant.xml")
    bias = np.linspace(-0.02, 0.02, len(ant.joint_names))
    cmd = chirp_targets(ant, 150, amplitude=0.3, seed=5)
    q, qd = simulate_newton_log(ant, cmd, decimation=DEC, delay=1, kp=5.0, kd=0.2, bias=bias)
    result = robot_result(
        ant,
        {"hip": "hip_.*", "ankle": "ankle_.*"},
        {"hip": (0.02, 0.2, 0.05), "ankle": (0.01, 0.1, 0.05)},
        bias,
        1,
    )
    for e in result["groups"].values():
        e["stiffness"], e["damping"] = 5.0, 0.2
    result["validation"]["split_sample"] = 75
    result, files = written(result, robot_recording(ant, cmd, q, qd), ant, tmp_path)
    assert files == ["isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"]
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "mjcf.xml"))  # as written: no mesh is missing here
    assert model.nu == 8 and math.isclose(model.opt.timestep, DT)
    j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "ankle_3")
    assert model.dof_armature[model.jnt_dofadr[j]] == pytest.approx(0.01)
    rep = result["replays"]
    assert set(rep["consumers"]) == {"isaaclab", "newton", "mujoco"} and rep["ours"]["rmse"] > 2e-3, rep
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["within_tolerance"], (name, c)
        assert c["rmse_replay_vs_ours"] < 1e-5, (name, c)  # measured 2e-8 … 1e-7 rad


def test_a_urdf_robot_gets_a_stage_written_from_its_import(tmp_path: Path) -> None:
    """Newton's example quadruped.urdf (joint frames rotated about their axes): newton.usda is a stage written from
    Newton's import of it; mjcf.xml is written into the MJCF MuJoCo's own URDF importer makes of it; every replay
    within 10 % of ours, 1e-5 rad from it."""
    from robot_sim import QUADRUPED_GROUPS, load_quadruped

    quad = load_quadruped()
    truth = {"haa": (0.01, 0.3, 0.2), "hfe": (0.02, 0.4, 0.3), "kfe": (0.015, 0.2, 0.25)}
    kind = [nm.rsplit("_", 1)[1].lower() for nm in quad.joint_names]
    arm, damp, fric = (np.array([truth[k][i] for k in kind]) for i in range(3))
    bias = np.linspace(-0.02, 0.02, 12)
    cmd = chirp_targets(quad, 150, amplitude=0.3, seed=4)
    q, qd = simulate_newton_log(
        quad, cmd, decimation=DEC, delay=1, armature=arm, damping=damp, friction=fric, kp=KP, kd=KD, bias=bias
    )
    values = {g: tuple(v * m for v, m in zip(t, MISFIT, strict=True)) for g, t in truth.items()}
    result = robot_result(quad, QUADRUPED_GROUPS, values, bias, 1)
    result["validation"]["split_sample"] = 75
    result, files = written(result, robot_recording(quad, cmd, q, qd), quad, tmp_path)
    assert files == ["isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"]
    assert "converted to MJCF by MuJoCo's URDF importer" in result["exports"]["mujoco"]["source"]
    stage = open_stage((tmp_path / "newton.usda").read_text())
    assert validate_stage(stage) == []
    assert readback_mismatches(import_stage(stage), as_robot_result(result)) == []
    rep = result["replays"]
    assert set(rep["consumers"]) == {"isaaclab", "newton", "mujoco"} and rep["ours"]["rmse"] > 2e-3, rep
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["within_tolerance"], (name, c)
        assert c["rmse_replay_vs_ours"] < 1e-5, (name, c)  # measured 9e-9 (isaaclab), 1.6e-8 rad (newton)


@needs_go2
def test_cli_fit_robot_writes_the_exports_with_their_replays(
    go2_case: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`fit LOG --robot go2.xml` on a PACE-style .pt log (no names, no gains) writes every export and replay."""
    import torch

    log = tmp_path / "go2_sim.pt"
    torch.save(
        {
            "time": torch.arange(go2_case["q"].shape[0], dtype=torch.float64) * LOG_DT,
            "dof_pos": torch.tensor(go2_case["q"]),
            "des_dof_pos": torch.tensor(go2_case["cmd"]),
        },
        log,
    )
    out = tmp_path / "fit"
    rc = main(
        [
            "fit",
            str(log),
            "--robot",
            str(GO2_XML),
            "--no-select",
            "--groups",
            ",".join(f"{g}='.*_{g}_joint'" for g in TRUTH),
            "--decimation",
            str(DEC),
            "--kp",
            str(KP),
            "--kd",
            str(KD),
            "--delay",
            str(DELAY),
            "--generations",
            "1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    err = capsys.readouterr().err
    assert "exports replayed on the whole robot" in err
    assert {p.name for p in out.iterdir()} >= {
        "fit.json",
        "isaaclab.py",
        "isaaclab.json",
        "newton.usda",
        "mjcf.xml",
    }
    fit = json.loads((out / "fit.json").read_text())
    rep = fit["replays"]
    # the exports' replays start their delay lines with the log's commands before the split, as the fit's
    # validation does: the export replay's "ours" is the fit's validation replay (measured equal to the last digit)
    assert rep["ours"]["rmse"] == pytest.approx(fit["validation"]["rmse"], rel=1e-3), (
        rep["ours"],
        fit["validation"]["rmse"],
    )
    for name, c in rep["consumers"].items():
        assert c["status"] == "ok" and c["within_tolerance"], (name, c)
    lab = json.loads((out / "isaaclab.json").read_text())
    assert lab["sim"]["decimation"] == DEC and set(lab["actuators"]) == set(TRUTH)
    # `export` of the robot fit re-renders the fit's own files (no empty ACTUATORS, the fit's physics step)
    for name in ("isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"):
        again = tmp_path / f"again_{name}"
        assert main(["export", str(out), "--format", name, "--out", str(again)]) == 0
        assert again.read_text() == (out / name).read_text(), name
    assert main(["export", str(out), "--format", "isaaclab.yaml"]) != 0
    assert "is not a whole-robot export" in capsys.readouterr().err


def _fit_replay(fit: dict, robot: RobotModel, seg, cmd: np.ndarray, cmd_qd: np.ndarray) -> np.ndarray:
    """fit.json's values replayed by the fit's own validation replay (fitting/robot/ replay_coupled) from the
    split under the log's commands `cmd` (the whole log: the delay line reads the commands before the split)."""
    from actuator_sysid.fitting.robot import replay_coupled

    split, j = fit["validation"]["split_sample"], len(robot.joint_names)
    vals = {
        k: np.zeros((1, j))
        for k in ("armature", "viscous_friction", "friction", "stiffness", "damping", "encoder_offset")
    }
    for e in fit["groups"].values():
        for n in e["joints"]:
            k = robot.joint_names.index(n)
            for t in ("armature", "viscous_friction", "friction", "stiffness", "damping"):
                vals[t][0, k] = e[t]
    vals["encoder_offset"][0] = [fit["encoder_bias"][n] for n in robot.joint_names]
    effort = np.where(np.isfinite(robot.effort_limit), robot.effort_limit, 1e6)
    ((q, _),) = replay_coupled(
        robot, [vals], [fit["delay_steps"]], seg.q, seg.qd, cmd, cmd_qd, split, DEC, DT, effort
    )
    return q


def test_export_of_a_cli_robot_fit_is_the_fits_own_file_or_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A short `fit LOG --robot arm2.xml` (a two-link MJCF arm, a PACE-style log made by Newton alone): `export
    fit.json --format F --robot arm2.xml` gives the fit's own F byte for byte for every whole-robot format, its
    date the fit's creation day in fit.json (on any day it is exported); a format the robot fit has not, re-render options, or the model missing fail
    with exit code 2 and the reason, never a traceback."""
    import torch
    from test_robot_torque import ARM_XML, multisine

    from actuator_sysid.export import ROBOT_FORMATS, formats_for

    model = tmp_path / "arm2.xml"
    model.write_text(ARM_XML)
    arm = load_robot(model)
    kp, kd = 150.0, 4.0
    cmd = multisine(200, (0.8, 0.6), seed=7)
    q, _ = simulate_newton_log(
        arm, cmd, decimation=DEC, delay=DELAY, kp=kp, kd=kd, q0=np.zeros(2), armature=0.1, damping=0.5
    )
    log = tmp_path / "arm.pt"
    time = torch.arange(q.shape[0], dtype=torch.float64) * LOG_DT
    torch.save({"time": time, "dof_pos": torch.tensor(q), "des_dof_pos": torch.tensor(cmd)}, log)
    out = tmp_path / "fit"
    fit_args = ["fit", str(log), "--robot", str(model), "--no-select", "--decimation", str(DEC)]
    fit_args += ["--delay", str(DELAY)]
    rc = main([*fit_args, "--kp", str(kp), "--kd", str(kd), "--generations", "1", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    fit = json.loads((out / "fit.json").read_text())
    assert (
        list(formats_for(fit))
        == list(ROBOT_FORMATS)
        == ["isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"]
    )
    assert all(c["status"] == "ok" for c in fit["replays"]["consumers"].values()), fit["replays"]
    day = fit["created_at"][:10]  # the fit's UTC creation date, the one every export states
    assert json.loads((out / "isaaclab.json").read_text())["provenance"][0].endswith(f"fitted {day}")
    for name in ROBOT_FORMATS:
        for robot in ([], ["--robot", str(model)]):  # fit.json's model path, or the one given
            again = tmp_path / f"again_{name}"
            assert main(["export", str(out / "fit.json"), "--format", name, *robot, "--out", str(again)]) == 0
            assert again.read_bytes() == (out / name).read_bytes(), name
    # the date each file states is the fit's, not today's: a fit made on another day re-exports as it was
    (out / "fit.json").write_text(json.dumps({**fit, "created_at": "2001-02-03T04:05:06+00:00"}, indent=2))
    capsys.readouterr()
    for name in ROBOT_FORMATS:
        assert main(["export", str(out), "--format", name]) == 0
        stated = capsys.readouterr().out
        own = (out / name).read_text()
        assert f"fitted {day}" in own and "2001-02-03" not in own, name
        assert stated == own.replace(f"fitted {day}", "fitted 2001-02-03"), name
    # a fit.json from before results recorded the time: the date its exports noted when they were written
    older = {k: v for k, v in fit.items() if k != "created_at"}
    older["exports"] = {c: {**i, "exported": "2001-02-05"} for c, i in fit["exports"].items()}
    (out / "fit.json").write_text(json.dumps(older, indent=2))
    assert main(["export", str(out), "--format", "mjcf.xml"]) == 0
    assert "fitted 2001-02-05" in capsys.readouterr().out
    (out / "fit.json").write_text(json.dumps(fit, indent=2))

    def refused(args: list[str], *reason: str) -> None:
        assert main(["export", str(out), *args]) == 2, args
        err = capsys.readouterr().err
        assert "Traceback" not in err and all(r in err for r in reason), (args, err)

    refused(["--format", "isaaclab.yaml"], "isaaclab.yaml is not a whole-robot export", "mjcf.xml")
    refused(["--format", "newton.onnx"], "newton.onnx is not a whole-robot export")
    refused(
        ["--format", "isaaclab.py", "--set", "stiffness=3"],
        "a robot fit's exports are served as written",
        "set",
    )
    refused(
        ["--format", "mjcf.xml", "--robot", str(tmp_path / "gone.xml")],
        "gone.xml is not here",
        "--robot MODEL",
    )
    model.rename(tmp_path / "moved.xml")
    refused(["--format", "newton.usda"], f"the fit's robot model {model} is not here")


def _comments_after(root) -> dict[str, list[str]]:
    """{name of the element a comment follows: [the comments after it]} of an XML tree read with its comments."""
    import xml.etree.ElementTree as ET

    out: dict[str, list[str]] = {}
    for parent in root.iter():
        last = None
        for child in parent:
            if child.tag is ET.Comment:
                out.setdefault(str(last), []).append(str(child.text))
            else:
                last = child.attrib.get("name")
    return out


def test_every_export_states_the_verdict_and_marks_what_the_fit_did_not_identify(tmp_path: Path) -> None:
    """A robot fit (the two-link arm) whose log left the yaw group's armature, the pitch group's saturation effort
    and pitch's encoder bias unidentified, its yaw stiffness and yaw bias identified: every export states the
    verdict, the held-out RMSE beside the model file's own and the split, and marks each unidentified value NOT
    IDENTIFIED beside it in the format's own syntax (a Python comment, the JSON's `unidentified`, an XML comment
    after its element, the USD attribute's doc), and nothing the fit identified; every file still builds."""
    import re
    import xml.etree.ElementTree as ET

    import mujoco
    from test_robot_torque import load_arm

    from actuator_sysid.export.robot import render_robot_exports
    from actuator_sysid.export.robot_isaaclab import build_cfgs

    arm = load_arm(tmp_path)
    result = robot_result(
        arm,
        {"yaw": "yaw", "pitch": "pitch"},
        {"yaw": (0.1, 0.5, 1.0), "pitch": (0.05, 0.3, 0.5)},
        [0.01, -0.02],
        1,
    )
    result["groups"]["pitch"] |= {"effort_limit": 30.0, "saturation_effort": 40.0, "velocity_limit": 8.0}
    result["validation"] |= {
        "fraction": 0.3,
        "split_time_s": 1.0,
        "rmse": 0.0123,
        "model_defaults_rmse": 0.0456,
    }
    result["intervals"] = {
        "yaw.armature": {"estimate": 0.1, "identified": False, "reason": "its 95 % interval spans 3 decades"},
        "yaw.stiffness": {"value": KP, "estimate": KP, "identified": True},
        "pitch.saturation_effort": {"estimate": 40.0, "identified": False, "reason": "at its upper bound"},
        "pitch.bias": {"estimate": -0.02, "identified": False, "reason": "sloppy with pitch.armature"},
        "yaw.bias": {"estimate": 0.01, "identified": True},
    }
    unmoved = "the yaw group's stiffness is identified"  # an ok check: no reason stated
    result["verdict"] = {
        "verdict": "usable",
        "checks": [
            {"check": "unidentified", "status": "usable", "reason": "3 of 5 fitted terms are not identified"},
            {"check": "validation_error", "status": "ok", "reason": unmoved},
        ],
    }
    texts, _ = render_robot_exports(as_robot_result(result), arm)
    assert set(texts) == {"isaaclab.py", "isaaclab.json", "newton.usda", "mjcf.xml"}
    # the verdict and its headline figure, on the split they were held out by (the JSON's in its provenance)
    for name, text in texts.items():
        if name.endswith(".json"):
            text = "\n".join(json.loads(text)["provenance"])
        assert re.search(
            r"verdict: USABLE · validation position RMSE \(coupled, the last 30% of the log in time, from 1\.00 "
            r"s\): 0\.0123 rad; the model file's own joint terms: 0\.0456 rad",
            text,
        ), name
        assert "verdict reason: 3 of 5 fitted terms are not identified" in text and unmoved not in text, name
        assert "yaw.stiffness" not in text and "yaw.bias" not in text, name  # identified: never marked

    # isaaclab.py: a comment beside each unidentified cfg field and bias, none beside the others
    py = texts["isaaclab.py"]
    group, beside = "", {}
    for line in py.split('"""')[-1].splitlines():
        if m := re.fullmatch(r"    '(\w+)': \w+\(", line):
            group = m[1]
        elif m := re.fullmatch(r"        (\w+)=.*?,(?:  # (.*))?", line):
            beside[(group, m[1])] = m[2]
        elif m := re.fullmatch(r"    '(\w+)': -?[\d.e-]+,(?:  # (.*))?", line):
            beside[("ENCODER_BIAS", m[1])] = m[2]
    assert {k: v for k, v in beside.items() if v} == {
        ("yaw", "armature"): "NOT IDENTIFIED (yaw.armature): its 95 % interval spans 3 decades",
        ("pitch", "saturation_effort"): "NOT IDENTIFIED (pitch.saturation_effort): at its upper bound",
        ("ENCODER_BIAS", "pitch"): "NOT IDENTIFIED (pitch.bias): sloppy with pitch.armature",
    }
    assert ("yaw", "stiffness") in beside and ("ENCODER_BIAS", "yaw") in beside  # read, and unmarked
    cfgs = build_cfgs(py, "isaaclab.py")  # the safe loader reads it as data still
    assert cfgs["yaw"].armature == 0.1 and cfgs["pitch"].saturation_effort == 40.0

    # isaaclab.json: no comments in JSON, so an `unidentified` key beside `actuators`
    doc = json.loads(texts["isaaclab.json"])
    assert doc["unidentified"] == {
        "actuators": {
            "yaw": {"armature": "NOT IDENTIFIED (yaw.armature): its 95 % interval spans 3 decades"},
            "pitch": {"saturation_effort": "NOT IDENTIFIED (pitch.saturation_effort): at its upper bound"},
        },
        "encoder_bias": {"pitch": "NOT IDENTIFIED (pitch.bias): sloppy with pitch.armature"},
    }
    assert sorted(build_cfgs(texts["isaaclab.json"], "isaaclab.json", py)) == ["pitch", "yaw"]

    # mjcf.xml: a comment right after the element holding the value, naming the attribute
    xml = texts["mjcf.xml"]
    after = _comments_after(
        ET.fromstring(xml, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    )
    assert set(after) == {"yaw", "pitch_actuator", "pitch_actuator_emf"}, after
    (yaw,) = after["yaw"]
    assert yaw.strip().startswith("NOT IDENTIFIED (yaw.armature)") and 'armature="0.1"' in yaw
    (act,) = after["pitch_actuator"]
    assert "NOT IDENTIFIED (pitch.saturation_effort)" in act and 'forcerange="-20 20"' in act
    assert "NOT IDENTIFIED (pitch.saturation_effort)" in after["pitch_actuator_emf"][0]
    assert mujoco.MjModel.from_xml_string(xml).nu == 3

    # newton.usda: the doc of each attribute the unidentified value sets, and the layer's not_identified
    stage = open_stage(texts["newton.usda"])
    docs = {
        (p.GetName(), a.GetName()): a.GetDocumentation()
        for p in stage.Traverse()
        for a in p.GetAttributes()
        if a.HasAuthoredDocumentation()
    }
    assert docs == {
        ("yaw", "newton:armature"): "NOT IDENTIFIED (yaw.armature): its 95 % interval spans 3 decades",
        (
            "pitch_actuator",
            "newton:saturationEffort",
        ): "NOT IDENTIFIED (pitch.saturation_effort): at its upper bound",
    }
    noted = dict(stage.GetRootLayer().customLayerData)["actuator_sysid"]["not_identified"]
    assert set(noted) == {"yaw", "pitch", "encoder_bias"} and set(noted["encoder_bias"]) == {"pitch"}
    assert (
        validate_stage(stage) == []
        and readback_mismatches(import_stage(stage), as_robot_result(result)) == []
    )


@needs_go2
def test_the_exports_state_the_verdict_judged_with_their_replays(go2_case: dict) -> None:
    """The replays judge the verdict after the files are first rendered: every written file states the verdict
    fit.json holds (the hand-written result was not judged before), as `export` of that fit.json renders it,
    and a fit whose intervals say nothing is unidentified marks nothing."""
    from actuator_sysid.export.robot import render_robot_format

    fit = go2_case["result"]
    word = fit["verdict"]["verdict"]
    assert word in ("good", "usable", "poor")
    for name in go2_case["files"]:
        text = (go2_case["out"] / name).read_text()
        assert render_robot_format(fit, name) == text, name
        if name.endswith(".json"):
            text = "\n".join(json.loads(text)["provenance"])
        assert f"verdict: {word.upper()} · validation position RMSE" in text, name
        assert "NOT JUDGED" not in text and "NOT IDENTIFIED" not in text, name
