"""Issue 7: every export loads in its real consumer and replays within 10 % of our own rollout.

Isaac Lab 3.0 constructs every cfg (subclasses included) and runs it; Newton 1.8 imports every USD with
`add_usd` and reads the parameters back; MuJoCo loads every MJCF; each replay's RMSE on the log is within
10 % of our rollout's on the same segments.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import yaml
from export_helpers import MISFIT, TEXT_EXPORTS, TRUTH, make_result, model_entry, short_recording
from isaaclab import actuators as ila
from isaaclab.utils.types import ArticulationActions

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.export import render_all, render_format, replay
from actuator_sysid.export.isaaclab import actuator_cfgs, cfg_hazards, render_json, render_python, render_yaml
from actuator_sysid.export.newton_usd import build_stage
from actuator_sysid.export.validate import validate_stage
from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.models.families import FAMILIES, is_mujoco_dcmotor
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params

# implicit, ideal_pd, dcmotor, delayed_pd, dcmotor_delay, remotized_pd, pid; BAM friction families export as
# these with findings in ACTUATORS (tests/test_friction_families.py), and run exactly only through the consumer
# package's classes (tests/test_consumers.py)
ALL = [f for f in FAMILIES if not FAMILIES[f].rich_friction and not is_mujoco_dcmotor(FAMILIES[f])]
MJCF_EXACT = (
    "implicit",
    "ideal_pd",
    "dcmotor",
    "delayed_pd",
    "dcmotor_delay",
    "pid",
)  # what MJCF expresses exactly
OFFSET_TERMS = ("armature", "friction", "viscous_friction", "encoder_offset")
PHYSX_TERMS = ("armature", "friction", "dynamic_friction", "viscous_friction")


def within_10_percent(r: dict) -> None:
    assert r["status"] == "ok", r
    for joint, j in r["joints"].items():
        assert abs(j["rmse_replay"] - j["rmse_ours"]) <= 0.10 * j["rmse_ours"], (r["format"], joint, j)
        assert j["rmse_ours"] > 1e-3, "the model must be off the log for the bound to mean something"


@pytest.fixture(scope="module")
def rec() -> Recording:
    """One log copied under one joint per family, so one consumer run covers every family."""
    return short_recording(joints=[f"j_{f}" for f in ALL])


@pytest.fixture(scope="module")
def result(rec: Recording) -> dict:
    return make_result({f"j_{f}": {f: model_entry(f, MISFIT)} for f in ALL}, rec)


# --- Isaac Lab ---


def _construct(cfg, joint: str = "hinge", num_envs: int = 2):
    act = cfg.class_type(cfg, joint_names=[joint], joint_ids=slice(None), num_envs=num_envs, device="cpu")
    act.reset(torch.arange(num_envs))
    return act


@pytest.mark.parametrize("family", ALL)
def test_every_family_constructs_in_isaaclab_from_python_json_and_yaml(family: str) -> None:
    res = make_result({"hinge": {family: model_entry(family, TRUTH)}})
    ns: dict = {}
    exec(compile(render_python(res, {"hinge": family}), "isaaclab.py", "exec"), ns)
    cfg = ns["ACTUATORS"]["hinge"]
    cfg.validate()
    act = _construct(cfg)
    out = act.compute(
        ArticulationActions(
            joint_positions=torch.full((2, 1), 0.5),
            joint_velocities=torch.zeros(2, 1),
            joint_efforts=torch.zeros(2, 1),
        ),
        torch.zeros(2, 1),
        torch.zeros(2, 1),
    )
    assert torch.isfinite(act.computed_effort).all()
    if family != "implicit":
        assert out.joint_efforts is not None
    doc = json.loads(render_json(res, {"hinge": family}))
    assert yaml.safe_load(render_yaml(res, {"hinge": family})) == doc
    spec = doc["actuators"]["hinge"]
    cls = getattr(ila, spec["class_type"], None) or ns[spec["class_type"]]
    ours = spec.get("defined_in") == "actuator_sysid.consumers.isaaclab"  # the consumer package's class
    assert ours == (family in ("dcmotor_delay", "pid"))
    assert cls(**spec["cfg"]).to_dict() == cfg.to_dict()


def _open_loop_isaaclab(cfg, seq: dict[str, np.ndarray], offset: float) -> np.ndarray:
    act = _construct(cfg, num_envs=1)
    t = lambda x: torch.tensor([[float(x)]])  # noqa: E731
    out = []
    for k in range(seq["q"].size):
        action = ArticulationActions(
            joint_positions=t(seq["q_des"][k]),
            joint_velocities=t(seq["qd_des"][k]),
            joint_efforts=t(seq["tau_ff"][k]),
        )
        out.append(float(act.compute(action, t(seq["q"][k] - offset), t(seq["qd"][k])).joint_efforts[0, 0]))
    return np.array(out)


@pytest.mark.parametrize(
    "family,terms",
    [("dcmotor_delay", None), ("pid", None), ("ideal_pd", OFFSET_TERMS), ("remotized_pd", OFFSET_TERMS)],
)
def test_explicit_subclasses_match_our_kernel_open_loop(family: str, terms: tuple | None) -> None:
    """Our subclasses on the real Isaac Lab base classes give the kernel's efforts on given states."""
    fam = FAMILIES[family] if terms is None else FAMILIES[family].with_terms(terms)
    res = make_result({"hinge": {family: model_entry(family, TRUTH, terms)}})
    src = render_python(res, {"hinge": family})
    assert "from actuator_sysid.consumers.isaaclab import " in src  # our explicit subclass, imported
    ns: dict = {}
    exec(compile(src, "isaaclab.py", "exec"), ns)
    rng = np.random.default_rng(3)
    n = 120
    seq = {
        "q": rng.uniform(-1.5, 1.5, n),
        "qd": rng.uniform(-12, 12, n),
        "q_des": rng.uniform(-1.5, 1.5, n),
        "qd_des": rng.uniform(-2, 2, n),
        "tau_ff": rng.uniform(-0.5, 0.5, n),
    }
    offset = TRUTH["encoder_offset"] if terms else 0.0
    theirs = _open_loop_isaaclab(ns["ACTUATORS"]["hinge"], seq, offset)
    seg = Segment("0", np.arange(n) * 0.005, **{k: v[:, None] for k, v in seq.items()})
    model = res["joints"]["hinge"]["models"][family]
    knots = np.array([model["table_positions"]]) if "table_positions" in model else None
    batch = SegmentBatch.from_recording(
        Recording([JointInfo("hinge", inertia=0.1)], [seg]), ["hinge"], knots=knots
    )
    values = {k: v for k, v in model["params"].items() if k in fam.params}
    ours = RolloutEngine(batch).traces(fam, full_params(fam, values, (1, 1)), open_loop=True)["applied"][0]
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-4)


def test_isaaclab_2x_field_names_resolve_to_the_same_actuator() -> None:
    res = make_result(
        {
            "hinge": {"dcmotor": model_entry("dcmotor", TRUTH)},
            "knee": {"implicit": model_entry("implicit", TRUTH)},
        }
    )
    v3 = json.loads(render_json(res))["actuators"]
    v2 = json.loads(render_json(res, field_names="isaaclab-2"))["actuators"]
    assert v2["hinge"]["cfg"]["effort_limit"] == v3["hinge"]["cfg"]["actuator_effort_limit"]
    assert v2["hinge"]["cfg"]["velocity_limit"] == v3["hinge"]["cfg"]["actuator_velocity_limit"]
    assert v2["knee"]["cfg"]["effort_limit_sim"] == v3["knee"]["cfg"]["joint_effort_limit"]
    assert "actuator_effort_limit" not in v2["hinge"]["cfg"]
    a2 = _construct(ila.DCMotorCfg(**v2["hinge"]["cfg"]))  # Isaac Lab 3.0 still reads the 2.x aliases
    a3 = _construct(ila.DCMotorCfg(**v3["hinge"]["cfg"]))
    assert torch.equal(a2.actuator_effort_limit, a3.actuator_effort_limit)
    assert torch.equal(a2.actuator_velocity_limit, a3.actuator_velocity_limit)
    assert "effort_limit=4.5" in render_python(res, field_names="isaaclab-2")


def test_joints_with_equal_parameters_share_one_regex() -> None:
    res = make_result(
        {
            "leg_hip": {"dcmotor": model_entry("dcmotor", TRUTH)},
            "leg_knee": {"dcmotor": model_entry("dcmotor", TRUTH)},
            "wrist": {"dcmotor": model_entry("dcmotor", {**TRUTH, "stiffness": 9.0})},
        }
    )
    groups = actuator_cfgs(res)
    assert len(groups) == 2 and "wrist" in groups
    (shared,) = [g for name, g in groups.items() if name != "wrist"]
    (expr,) = shared["cfg"]["joint_names_expr"]
    cfg = ila.DCMotorCfg(**shared["cfg"])
    act = ila.DCMotor(
        cfg, joint_names=["leg_hip", "leg_knee"], joint_ids=slice(None), num_envs=1, device="cpu"
    )
    assert act.num_joints == 2 and expr == "(leg_hip|leg_knee)"
    ns: dict = {}
    exec(compile(render_python(res), "isaaclab.py", "exec"), ns)
    assert set(ns["ACTUATORS"]) == set(groups)


def test_backend_units_are_named_and_physx_gets_dynamic_friction() -> None:
    res = make_result({"hinge": {"dcmotor": model_entry("dcmotor", TRUTH)}})
    newton_doc = json.loads(render_json(res))
    physx_doc = json.loads(render_json(res, backend="physx"))
    assert newton_doc["backend"] == "newton" and "joint_friction" in newton_doc["note"]
    assert physx_doc["backend"] == "physx" and "Isaac Sim >= 5.0" in physx_doc["note"]
    cfg = physx_doc["actuators"]["hinge"]["cfg"]
    assert cfg["dynamic_friction"] == cfg["friction"] == TRUTH["friction"]
    assert "dynamic_friction" not in newton_doc["actuators"]["hinge"]["cfg"]
    physx_fit = make_result({"hinge": {"dcmotor": model_entry("dcmotor", TRUTH, PHYSX_TERMS)}})
    hazards = cfg_hazards(actuator_cfgs(physx_fit), ["hinge"])
    assert any(h.code == "EXPORT.ISAACLAB.dynamic_friction_ignored" for h in hazards)


def test_semantic_hazards_of_newton_native_execution_are_reported() -> None:
    """§A.11: each departure of Newton-native execution from Isaac Lab's PyTorch path is a finding."""
    groups = {
        "delayed": {
            "class_type": "DelayedPDActuatorCfg",
            "cfg": {
                "joint_names_expr": ["a"],
                "stiffness": 1.0,
                "damping": 0.1,
                "min_delay": 1,
                "max_delay": 4,
            },
        },
        "dc": {
            "class_type": "DCMotorCfg",
            "cfg": {
                "joint_names_expr": ["b", "c"],
                "stiffness": 1.0,
                "damping": None,
                "saturation_effort": {"b": 3.0},
            },
        },
        "net": {"class_type": "ActuatorNetLSTMCfg", "cfg": {"joint_names_expr": ["d"]}},
        "sub": {
            "class_type": "DelayedDCMotorCfg",
            "cfg": {"joint_names_expr": ["e"], "actuator_velocity_limit": 5.0, "saturation_effort": 3.0},
        },
    }
    codes = {
        (h.where, h.code.removeprefix("EXPORT.ISAACLAB.")): h.severity
        for h in cfg_hazards(groups, ["a", "b", "c", "d", "e"])
    }
    assert codes[("delayed", "delay_fixed")] == "warning"
    assert codes[("dc", "dc_no_velocity_limit")] == "error"
    assert codes[("dc", "damping_none")] == "warning"
    assert codes[("dc", "unmatched_saturation_effort")] == "error"
    assert codes[("net", "lstm_metadata")] == "warning"
    assert codes[("sub", "custom_class")] == "warning"
    assert ("sub", "dc_no_velocity_limit") not in codes


# --- Newton ---


def test_usd_imports_in_newton_and_reads_back_every_parameter(result: dict, rec: Recording) -> None:
    import newton

    stage, _ = build_stage(result, rec)
    text = stage.GetRootLayer().ExportToString()
    assert validate_stage(stage) == []
    builder = newton.ModelBuilder()
    builder.add_usd(stage)
    model = builder.finalize(device="cpu")
    labels = [lab.rsplit("/", 1)[-1] for lab in model.joint_label]
    dof = {
        name: int(model.joint_qd_start.numpy()[labels.index(name)])
        for name in labels
        if name.startswith("j_")
    }
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    for name in ("armature", "friction"):
        assert all(
            float(getattr(model, f"joint_{name}").numpy()[d]) == f32(MISFIT[name]) for d in dof.values()
        )
    # newton:damping is authored per degree; the importer multiplies by 180/π (§C.4)
    np.testing.assert_allclose(
        model.joint_damping.numpy()[list(dof.values())], MISFIT["viscous_friction"], rtol=1e-6
    )
    authored = stage.GetPrimAtPath("/World/j_dcmotor_bench/j_dcmotor")
    assert math.isclose(
        authored.GetAttribute("newton:damping").Get(),
        MISFIT["viscous_friction"] * math.pi / 180,
        rel_tol=1e-6,
    )
    seen = {}
    for act in model.actuators:
        (d,) = act.indices.numpy()
        fam = next(f for f, i in dof.items() if i == d).removeprefix("j_")
        seen[fam] = act
        assert float(act.drive.kp.numpy()[0]) == f32(MISFIT["stiffness"])
        assert float(act.drive.kd.numpy()[0]) == f32(MISFIT["damping"])
        clamps = {type(c).__name__: c for c in act.clamping}
        if "ClampingMaxEffort" in clamps:
            assert float(clamps["ClampingMaxEffort"].max_effort.numpy()[0]) == f32(
                MISFIT["actuator_effort_limit"]
            )
        if "ClampingDCMotor" in clamps:
            c = clamps["ClampingDCMotor"]
            assert (
                float(c.saturation_effort.numpy()[0]),
                float(c.velocity_limit.numpy()[0]),
                float(c.max_motor_effort.numpy()[0]),
            ) == (7.0, 9.0, 4.5)
        if "ClampingPositionBased" in clamps:
            np.testing.assert_allclose(
                clamps["ClampingPositionBased"].lookup_efforts.numpy(),
                [MISFIT[f"lookup_effort_{k}"] for k in range(5)],
                rtol=1e-6,
            )
        delay = act.delay.delay_steps.numpy()[0] if act.delay is not None else 0
        assert delay == (MISFIT["delay"] if FAMILIES[fam].delay else 0)
    assert set(seen) == set(ALL) - {"implicit"}
    assert type(seen["pid"].drive).__name__ == "DrivePID"
    assert float(seen["pid"].drive.ki.numpy()[0]) == f32(MISFIT["ki"])
    assert float(seen["pid"].drive.integral_max.numpy()[0]) == f32(MISFIT["integral_max"])
    # the implicit family is the solver's drive: UsdPhysics gains per degree, converted back per radian
    d = dof["j_implicit"]
    assert math.isclose(float(model.joint_target_ke.numpy()[d]), MISFIT["stiffness"], rel_tol=1e-5)
    assert math.isclose(float(model.joint_target_kd.numpy()[d]), MISFIT["damping"], rel_tol=1e-5)
    assert float(model.joint_effort_limit.numpy()[d]) == f32(MISFIT["actuator_effort_limit"])
    assert "NewtonActuatorDelayAPI" in text and "int newton:delaySteps = 3" in text


def test_no_delay_api_without_a_delay() -> None:
    res = make_result({"hinge": {"delayed_pd": model_entry("delayed_pd", {**TRUTH, "delay": 0})}})
    text = render_format(res, None, "newton.usda", loads={"hinge": {"mass": 1.0, "com_distance": 0.2}})
    assert "NewtonActuatorDelayAPI" not in text and "delaySteps" not in text


def test_usd_targets_the_joints_of_a_robot_by_prim_name() -> None:
    from pxr import Usd, UsdGeom, UsdPhysics

    robot = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(robot, "/Robot")
    UsdPhysics.ArticulationRootAPI.Apply(robot.GetPrimAtPath("/Robot"))
    for name in ("base", "thigh", "shin"):
        UsdPhysics.RigidBodyAPI.Apply(UsdGeom.Xform.Define(robot, f"/Robot/{name}").GetPrim())
    hip = UsdPhysics.RevoluteJoint.Define(robot, "/Robot/joints/hip")
    hip.CreateBody0Rel().SetTargets(["/Robot/base"])
    hip.CreateBody1Rel().SetTargets(["/Robot/thigh"])
    knee = UsdPhysics.RevoluteJoint.Define(robot, "/Robot/joints/knee")
    knee.CreateBody0Rel().SetTargets(["/Robot/thigh"])
    knee.CreateBody1Rel().SetTargets(["/Robot/shin"])
    old = robot.DefinePrim("/Robot/old_hip_actuator", "NewtonActuator")
    old.AddAppliedSchema("NewtonPDControlAPI")
    old.CreateRelationship("newton:targets").SetTargets(["/Robot/joints/hip"])
    res = make_result(
        {
            "hip": {"dcmotor": model_entry("dcmotor", TRUTH)},
            "ankle": {"dcmotor": model_entry("dcmotor", TRUTH)},
        }
    )
    stage, notes = build_stage(res, robot_usd=robot.GetRootLayer().ExportToString())
    act = stage.GetPrimAtPath("/Robot/joints/hip_actuator")
    assert act.GetTypeName() == "NewtonActuator"
    assert list(act.GetRelationship("newton:targets").GetTargets()) == ["/Robot/joints/hip"]
    assert not stage.GetPrimAtPath("/Robot/old_hip_actuator").IsActive()
    codes = {(n.code, n.where) for n in notes}
    assert ("EXPORT.NEWTON.unmatched_joint", "ankle") in codes
    assert ("EXPORT.NEWTON.replaced_actuator", "/Robot/old_hip_actuator") in codes
    found = {(f.code, f.where) for f in validate_stage(stage)}
    assert found == {("NEWTON.DJ.001.undriven", "/Robot/joints/knee")}


# --- replays within 10 % ---


def test_replays_of_every_family_within_10_percent(result: dict, rec: Recording) -> None:
    """Isaac Lab (Python source, JSON, YAML) and Newton: every family; MuJoCo: what it expresses."""
    names = [s.name for s in rec.segments]
    for fmt in ("isaaclab.py", "newton.usda"):
        r = replay(result, rec, fmt, segments=names)
        assert len(r["joints"]) == len(ALL)
        within_10_percent(r)
    for fmt in ("isaaclab.json", "isaaclab.yaml"):
        within_10_percent(replay(result, rec, fmt, segments=names))  # built-in classes of every joint
    exact = make_result({f"j_{f}": {f: model_entry(f, MISFIT)} for f in MJCF_EXACT}, rec)
    within_10_percent(replay(exact, rec, "mjcf.xml", segments=names))


def test_replays_of_a_model_fitted_to_an_isaaclab_log_within_10_percent() -> None:
    rec = short_recording(n_segments=5, noise_q=2e-3)  # encoder noise keeps even a good fit off the log
    res = fit_recording(
        rec, FitRequest(models=["dcmotor", "ideal_pd"], generations=8, population=6, refine_iterations=4)
    )
    for fmt in ("isaaclab.py", "isaaclab.json", "newton.usda"):
        for fam in ("dcmotor", "ideal_pd"):
            r = replay(res, rec, fmt, families=fam)
            assert r["segments"] == res["split"]["validation"]
            within_10_percent(r)
    for fam in ("dcmotor", "ideal_pd"):
        within_10_percent(replay(res, rec, "mjcf.xml", families=fam))


def test_mjcf_loads_and_states_what_it_approximates(result: dict, rec: Recording) -> None:
    import mujoco

    from actuator_sysid.export.mjcf import build_mjcf

    text, findings = build_mjcf(result, rec)
    model = mujoco.MjModel.from_xml_string(text)
    assert model.nu == len(ALL) + 1 and model.njnt == len(ALL)  # a pid's 2 controls
    p = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "j_pid_actuator")
    assert model.actuator_ctrlnum[p] == 2 and model.actuator_dynprm[p][0] == MISFIT["integral_max"]
    j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "j_dcmotor")
    tau_s, v_max, tau_c = (
        MISFIT[k] for k in ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit")
    )
    # the log commands q_des alone: the DC envelope is MuJoCo's own <dcmotor> in position mode
    # (tests/test_mjcf_native_dcmotor.py holds the two-actuator <general> form of a log with tau_ff)
    pd = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "j_dcmotor_actuator")
    assert model.actuator_dyntype[pd] == mujoco.mjtDyn.mjDYN_DCMOTOR and model.actuator_ctrlspec[pd] == 1
    r, k, kp, kd, vmax = (model.actuator_gainprm[pd][i] for i in (0, 1, 4, 6, 7))
    assert math.isclose(k * vmax / r, tau_s, rel_tol=1e-8) and math.isclose(
        k * k / r, tau_s / v_max, rel_tol=1e-8
    )
    assert (kp, kd) == (MISFIT["stiffness"], MISFIT["damping"])
    assert list(model.actuator_forcerange[pd]) == [-tau_c, tau_c] and not model.jnt_actfrclimited[j]
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "j_dcmotor_emf") == -1
    assert math.isclose(model.dof_armature[model.jnt_dofadr[j]], MISFIT["armature"])
    assert math.isclose(model.dof_frictionloss[model.jnt_dofadr[j]], MISFIT["friction"])
    assert math.isclose(model.dof_damping[model.jnt_dofadr[j]], MISFIT["viscous_friction"])
    a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "j_delayed_pd_actuator")
    assert math.isclose(model.actuator_delay[a], 3 * 0.005)
    assert list(model.actuator_forcerange[a]) == [-4.5, 4.5]
    codes = {(f.code, f.where) for f in findings}
    assert {
        ("EXPORT.MJCF.dc_motor", "j_dcmotor"),
        ("EXPORT.MJCF.dc_motor", "j_dcmotor_delay"),
        ("EXPORT.MJCF.position_table", "j_remotized_pd"),
        ("EXPORT.MJCF.pid", "j_pid"),
        ("EXPORT.MJCF.integrator", "option"),
    } <= codes


def test_render_all_offers_every_format_with_its_validation(rec: Recording) -> None:
    res = make_result(
        {
            "j_dcmotor": {
                "dcmotor": model_entry("dcmotor", MISFIT),
                "dcmotor_delay": model_entry("dcmotor_delay", MISFIT),
            }
        },
        rec,
    )
    res["joints"]["j_dcmotor"]["best_model"] = "dcmotor_delay"
    files = render_all(res, rec_one(rec, "j_dcmotor"))
    assert set(files) == {*TEXT_EXPORTS, "validation.json"}
    val = json.loads(files["validation.json"])
    assert val["passed"] and val["errors"] == 0
    assert {r["status"] for r in val["replay"].values()} == {"ok"}
    assert val["replay"]["newton.usda"]["joints"]["j_dcmotor"]["family"] == "dcmotor_delay"
    assert val["bench"]["j_dcmotor"]["mass"] == 1.0
    codes = {f["code"] for f in val["findings"]}
    assert {"EXPORT.ISAACLAB.custom_class", "EXPORT.MJCF.dc_motor"} <= codes
    assert not [f for f in val["findings"] if f["code"] == "EXPORT.REPLAY.out_of_tolerance"]
    assert val["replay"]["mjcf.xml"]["within_tolerance"]  # the DC envelope is exact in MuJoCo too
    ns: dict = {}
    exec(compile(files["isaaclab.py"], "isaaclab.py", "exec"), ns)
    assert type(ns["ACTUATORS"]["j_dcmotor"]).__name__ == "DCMotorCfg"
    assert type(ns["ACTUATORS_BEST"]["j_dcmotor"]).__name__ == "DelayedDCMotorCfg"


def rec_one(rec: Recording, joint: str) -> Recording:
    """The recording reduced to one joint."""
    j = rec.joint_index(joint)
    segs = [
        Segment(
            s.name,
            s.t,
            *(getattr(s, k)[:, j : j + 1] for k in ("q", "qd", "q_des", "qd_des", "tau_ff")),
            tau=s.tau[:, j : j + 1],
            metadata=s.metadata,
        )
        for s in rec.segments
    ]
    return Recording([rec.joints[j]], segs)


def test_replay_without_the_consumer_is_skipped_with_a_note(
    result: dict, rec: Recording, monkeypatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "mujoco", None)
    r = replay(result, rec, "mjcf.xml")
    assert r["status"] == "skipped" and "consumer not installed" in r["note"]


def test_newton_and_mujoco_write_the_best_fit_they_hold_exactly() -> None:
    """A joint whose best model a consumer cannot hold (BAM's friction budget and the position torque table in
    MuJoCo) exports the best-ranked fit the consumer runs exactly, says so, and replays within 10 %; naming the
    family exports the best model approximated. Newton holds the budget (the consumer package's clamp): it writes
    the best model itself."""
    from actuator_sysid.export.mjcf import build_mjcf

    rec = short_recording(joints=["j_rich", "j_table"])
    stribeck = {**MISFIT, "stribeck_friction": 0.25, "stribeck_velocity": 0.3, "stribeck_exponent": 2.0}
    res = make_result(
        {
            "j_rich": {
                "dcmotor_stribeck": model_entry("dcmotor_stribeck", stribeck),
                "dcmotor": model_entry("dcmotor", MISFIT),
            },
            "j_table": {
                "remotized_pd": model_entry("remotized_pd", MISFIT),
                "dcmotor": model_entry("dcmotor", MISFIT),
            },
        },
        rec,
    )
    stage, notes = build_stage(res, rec)
    written = dict(stage.GetRootLayer().customLayerData["actuator_sysid"]["families"])
    assert written == {"j_rich": "dcmotor_stribeck", "j_table": "remotized_pd"}
    assert not {(f.code, f.where) for f in notes if "not_expressible" in f.code}
    _, findings = build_mjcf(res, rec)
    codes = {(f.code, f.where) for f in findings}
    assert {
        ("EXPORT.MJCF.best_model_not_expressible", "j_rich"),
        ("EXPORT.MJCF.best_model_not_expressible", "j_table"),
    } <= codes
    assert not any(c in ("EXPORT.MJCF.position_table", "EXPORT.MJCF.friction_model") for c, _ in codes)
    names = [s.name for s in rec.segments]
    for fmt, family in (("newton.usda", "dcmotor_stribeck"), ("mjcf.xml", "dcmotor")):
        r = replay(res, rec, fmt, segments=names)
        within_10_percent(r)
        assert r["joints"]["j_rich"]["family"] == family
    named = replay(
        res,
        rec,
        "mjcf.xml",
        families={"j_rich": "dcmotor_stribeck", "j_table": "remotized_pd"},
        segments=names,
    )
    assert {j["family"] for j in named["joints"].values()} == {"dcmotor_stribeck", "remotized_pd"}
    _, findings = build_mjcf(res, rec, families={"j_rich": "dcmotor_stribeck", "j_table": "remotized_pd"})
    assert {"EXPORT.MJCF.friction_model", "EXPORT.MJCF.position_table"} <= {f.code for f in findings}


def test_a_remotized_fit_brings_the_delayed_pd_fit_mujoco_runs() -> None:
    """MuJoCo holds no position torque table: a remotized_pd fit asked alone also fits delayed_pd (which it then
    starts from), and the MJCF export writes that, replaying within 10 %."""
    rec = short_recording(n_segments=5, noise_q=2e-3)
    res = fit_recording(
        rec, FitRequest(models=["remotized_pd"], generations=8, population=6, refine_iterations=4)
    )
    models = res["joints"]["hinge"]["models"]
    assert list(models) == ["remotized_pd", "delayed_pd"] and models["delayed_pd"]["added_for"] == [
        "remotized_pd"
    ]
    assert models["remotized_pd"]["search"]["started_from"] == "delayed_pd"
    r = replay(res, rec, "mjcf.xml")
    within_10_percent(r)
    assert r["joints"]["hinge"]["family"] == "delayed_pd"
