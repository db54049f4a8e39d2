"""mjlab replays our mjlab_cfg.py exports: a one-joint mjlab scene per fitted family, next to our own rollout.

1. In our environment: a known-truth 1-DoF log per family (`dcmotor`, `ideal_pd`, `delayed_pd` made by the real
   Isaac Lab 3.0 actuator classes in tests/isaaclab_logs.py's pendulum, `implicit` fitted on the IdealPD log;
   `mujoco_dcmotor` by MuJoCo 3.17's own `set_to_dcmotor`), fitted by our fit, exported with
   `export.mjlab.render_mjlab`, and rolled out by our own `fitting.fit.simulate`. `--friction 0` takes the
   Coulomb friction out of the Isaac Lab logs: MuJoCo's frictionloss is a soft constraint, ours a hard stop.
2. In mjlab's environment (bench/.venv-mjlab, made by bench/mjlab_env.sh on first use; mjlab is never our
   dependency), a subprocess imports each exported file and builds an mjlab `Scene` of the bench pendulum with
   `EntityArticulationInfoCfg(actuators=ACTUATORS)`, one env per segment, and steps mjlab's own `Simulation`
   (MuJoCo Warp on Warp's CPU device, float32) the way an mjlab env's decimation loop does:
   `set_joint_*_target`, then per physics step `scene.write_data_to_sim()`, `sim.step()`, `scene.update(dt)`.
3. The comparison, per family over every segment: rel = RMS(q_mjlab − q_ours) / RMS(q_ours − its segment mean),
   the position difference against the motion. Acceptance: rel ≤ 1 %. Also each run's position RMSE to the log.

Usage: python bench/mjlab_replay.py [--families F,...] [--segments N] [--friction F] [--save FILE]. One JSON
object on stdout.
(`--worker JOB OUT` is the mjlab-side half, run by the first half in bench/.venv-mjlab.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "bench" / ".venv-mjlab"
TOLERANCE = 0.01
FAMILIES = ("dcmotor", "ideal_pd", "delayed_pd", "implicit", "mujoco_dcmotor")
# the mujoco_dcmotor truth: a small servo on a 6 V supply (tests/test_mujoco_dcmotor.py's)
DCMOTOR_TRUTH = {
    "stiffness": 20.0,
    "damping": 0.5,
    "dcmotor_motor_constant": 0.3,
    "dcmotor_resistance": 2.0,
    "dcmotor_voltage_limit": 6.0,
}
DCMOTOR_RATE, DCMOTOR_SUBSTEPS = 200, 5


# --- the mjlab side (bench/.venv-mjlab: mjlab, MuJoCo 3.11, MuJoCo Warp; never our package) ---


def _pendulum_spec(load: dict):
    """The bench pendulum as an MjSpec: a hinge about y (z without gravity), the point mass com_distance below."""
    import mujoco

    spec = mujoco.MjSpec()
    body = spec.worldbody.add_body(name="link")
    axis = [0, 1, 0] if load["gravity"] > 0 else [0, 0, 1]
    body.add_joint(name=load["name"], type=mujoco.mjtJoint.mjJNT_HINGE, axis=axis)
    body.mass = max(load["mass"], 1e-6)
    body.ipos = [0, 0, -load["com_distance"] if load["mass"] > 0 else 0.0]
    body.inertia, body.explicitinertial = [max(load["inertia"], 1e-8)] * 3, True
    return spec


def _import_cfgs(source: str, where: Path):
    """The exported file imported as a module, as a user imports it."""
    import importlib.util

    path = where / "mjlab_cfg.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("mjlab_cfg_export", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mjlab_case(case: dict, where: Path) -> dict:
    """One family's segments through mjlab: positions (S, T), the setup's seconds and the stepping seconds."""
    import torch
    from mjlab.entity import EntityArticulationInfoCfg, EntityCfg
    from mjlab.scene import Scene, SceneCfg
    from mjlab.sim import MujocoCfg, Simulation, SimulationCfg

    module = _import_cfgs(case["source"], where)
    load, dt, sub = case["load"], float(module.PHYSICS_DT), int(module.DECIMATION)
    segs = case["segments"]
    n_env, n = len(segs), max(len(s["q_des"]) for s in segs)

    def padded(key: str) -> torch.Tensor:
        return torch.tensor([s[key] + [s[key][-1]] * (n - len(s[key])) for s in segs], dtype=torch.float32)

    q_des, qd_des, tau_ff = padded("q_des"), padded("qd_des"), padded("tau_ff")
    t0 = time.perf_counter()
    entity = EntityCfg(
        spec_fn=lambda: _pendulum_spec(load),
        articulation=EntityArticulationInfoCfg(actuators=tuple(module.ACTUATORS)),
    )
    scene = Scene(SceneCfg(num_envs=n_env, entities={"bench": entity}), device="cpu")
    mj = MujocoCfg(timestep=dt, integrator=module.INTEGRATOR, gravity=(0.0, 0.0, -float(load["gravity"])))
    sim = Simulation(num_envs=n_env, cfg=SimulationCfg(mujoco=mj), spec=scene.spec, device="cpu")
    scene.initialize(sim.mj_model, sim.model, sim.data)
    robot = scene["bench"]
    scene.reset()
    q0 = torch.tensor([[s["q0"]] for s in segs], dtype=torch.float32)
    qd0 = torch.tensor([[s["qd0"]] for s in segs], dtype=torch.float32)
    robot.write_joint_state_to_sim(q0, qd0)
    sim.forward()
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = np.empty((n_env, n))
    for k in range(n):
        out[:, k] = robot.data.joint_pos[:, 0].cpu().numpy()
        if k == n - 1:
            break
        robot.set_joint_position_target(q_des[:, k : k + 1])
        robot.set_joint_velocity_target(qd_des[:, k : k + 1])
        robot.set_joint_effort_target(tau_ff[:, k : k + 1])
        for _ in range(sub):
            scene.write_data_to_sim()
            sim.step()
            scene.update(dt)
    return {
        "q": [out[i, : len(s["q_des"])].tolist() for i, s in enumerate(segs)],
        "setup_s": setup_s,
        "step_s": time.perf_counter() - t0,
        "physics_steps": (n - 1) * sub,
        "classes": sorted({type(c).__name__ for c in module.ACTUATORS}),
    }


def worker(job_path: str, out_path: str) -> None:
    """The mjlab-side half: every case of the job through mjlab, written to out_path."""
    import mjlab
    import mujoco
    import warp as wp

    job = json.loads(Path(job_path).read_text())
    out: dict = {
        "versions": {
            "mjlab": getattr(mjlab, "__version__", _dist_version("mjlab")),
            "mujoco": mujoco.__version__,
            "mujoco_warp": _dist_version("mujoco-warp"),
            "warp": wp.__version__,
        },
        "device": "cpu (Warp)",
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in job["cases"].items():
            where = Path(tmp) / name
            where.mkdir()
            try:
                out["cases"][name] = mjlab_case(case, where)
            except Exception as e:  # reported per case: one failing cfg must not hide the others
                out["cases"][name] = {"error": f"{type(e).__name__}: {e}"}
    Path(out_path).write_text(json.dumps(out))


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


# --- our side (the main environment) ---


def _dcmotor_recording(n_segments: int):
    """A mujoco_dcmotor log made by MuJoCo 3.17's own set_to_dcmotor (not our MJCF writer), stated vin."""
    import mujoco

    from actuator_sysid.datasets.recording import JointInfo, Recording, Segment

    load = JointInfo("hinge", inertia=0.002, mass=0.3, com_distance=0.1)
    p = DCMOTOR_TRUTH
    spec = mujoco.MjSpec()
    spec.option.timestep = 1.0 / DCMOTOR_RATE / DCMOTOR_SUBSTEPS
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.gravity = [0.0, 0.0, -load.gravity]
    body = spec.worldbody.add_body(name="link")
    body.add_joint(name="hinge", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0])
    body.mass, body.ipos = load.mass, [0, 0, -load.com_distance]
    body.inertia, body.explicitinertial = [load.inertia] * 3, True
    act = spec.add_actuator(target="hinge", trntype=mujoco.mjtTrn.mjTRN_JOINT)
    k = p["dcmotor_motor_constant"]
    act.set_to_dcmotor(
        motorconst=[k, k],
        resistance=p["dcmotor_resistance"],
        controller=[p["stiffness"], 0.0, p["damping"], 0.0, 0.0, p["dcmotor_voltage_limit"]],
        ctrlspec=1,
    )
    model = spec.compile()
    t = np.arange(0.0, 3.0, 1.0 / DCMOTOR_RATE)
    commands = (
        0.9 * np.sign(np.sin(4.4 * t)) + 0.3 * np.sin(14.5 * t),
        0.6 * np.sin(2.3 * t) + 0.2 * np.sin(9.1 * t),
        np.where(t < 1.5, 1.2, -0.4),
    )
    segs = []
    for i, u in enumerate(commands[:n_segments]):
        data = mujoco.MjData(model)
        q, qd = np.zeros(u.size), np.zeros(u.size)
        for j in range(u.size):
            q[j], qd[j] = data.qpos[0], data.qvel[0]
            data.ctrl[0] = u[j]
            for _ in range(DCMOTOR_SUBSTEPS):
                mujoco.mj_step(model, data)
        col = lambda a: a[:, None]  # noqa: E731
        meta = {"vin": p["dcmotor_voltage_limit"]}
        segs.append(
            Segment(str(i), t + 10.0 * i, col(q), col(qd), col(u), col(0 * u), col(0 * u), metadata=meta)
        )
    return Recording([load], segs), DCMOTOR_SUBSTEPS


def _recording(family: str, n_segments: int, friction: float | None = None):
    """The known-truth log of a family and its physics steps per sample (`friction`: another Coulomb value)."""
    if family.startswith("mujoco_dcmotor"):
        return _dcmotor_recording(n_segments)
    sys.path.insert(0, str(ROOT / "tests"))
    from isaaclab_logs import TRUTH_DCMOTOR, make_recording

    truth = {**TRUTH_DCMOTOR, "delay": 3} if family == "delayed_pd" else TRUTH_DCMOTOR
    truth = truth if friction is None else {**truth, "friction": friction}
    rec = make_recording(family, truth)
    rec.segments = rec.segments[:n_segments]
    return rec, 1


def our_case(family: str, n_segments: int, friction: float | None = None) -> tuple[dict, dict]:
    """Fit one family on its log, export it for mjlab, roll it out ourselves: (the mjlab job, our side)."""
    from actuator_sysid.export.mjlab import render_mjlab
    from actuator_sysid.fitting.fit import FitRequest, fit_recording, simulate
    from actuator_sysid.fitting.result import as_result

    rec, sub = _recording(family, n_segments, friction)
    t0 = time.perf_counter()
    result = fit_recording(
        rec,
        FitRequest(families=[family], generations=10, population=8, refine_iterations=6, decimation=sub),
    )
    fit_s = time.perf_counter() - t0
    joint = rec.joints[0].name
    model = as_result(result).joints[joint].models[family]
    source = render_mjlab(result, {joint: family})
    sims = simulate(rec, joint, family, dict(model.params), joint_terms=model.joint_terms, decimation=sub)
    info = rec.joints[0]
    load = {"name": joint, "mass": info.mass, "com_distance": info.com_distance, "inertia": info.inertia}
    segments = [
        {
            "name": s.name,
            "q0": float(s.q[0, 0]),
            "qd0": float(s.qd[0, 0]),
            **{k: getattr(s, k)[:, 0].tolist() for k in ("q_des", "qd_des", "tau_ff")},
        }
        for s in rec.segments
    ]
    ours = {
        "params": {k: float(v) for k, v in model.params.items()},
        "fit_s": fit_s,
        "q_log": {s.name: s.q[:, 0] for s in rec.segments},
        "q_ours": {s.name: np.asarray(sims[s.name]["q"], float) for s in rec.segments},
    }
    return {"source": source, "load": load | {"gravity": info.gravity}, "segments": segments}, ours


def compare(ours: dict, theirs: dict, names: list[str]) -> dict:
    """rel = RMS(q_mjlab − q_ours) / RMS(q_ours − mean) pooled over segments, the max per-sample difference, and
    each run's position RMSE to the log (the first sample left out: both start from it)."""
    diff, motion, err_ours, err_mjlab = [], [], [], []
    for i, name in enumerate(names):
        q_ours, q_log = ours["q_ours"][name], ours["q_log"][name]
        q_mjlab = np.asarray(theirs["q"][i], float)
        diff.append(q_mjlab[1:] - q_ours[1:])
        motion.append(q_ours - q_ours.mean())
        err_ours.append(q_ours[1:] - q_log[1:])
        err_mjlab.append(q_mjlab[1:] - q_log[1:])

    def rms(parts: list[np.ndarray]) -> float:
        return float(math.sqrt(np.mean(np.concatenate(parts) ** 2)))

    rel = rms(diff) / rms(motion)
    return {
        "rel_rms_difference": rel,
        "max_abs_difference_rad": float(max(np.max(np.abs(d)) for d in diff)),
        "rms_difference_rad": rms(diff),
        "rms_motion_rad": rms(motion),
        "rmse_to_log_ours_rad": rms(err_ours),
        "rmse_to_log_mjlab_rad": rms(err_mjlab),
        "within_tolerance": rel <= TOLERANCE,
    }


def _make_env() -> Path:
    python = VENV / "bin" / "python"
    subprocess.run(["bash", str(ROOT / "bench" / "mjlab_env.sh")], check=True, stdout=sys.stderr)
    return python


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--segments", type=int, default=3, help="segments per log (one mjlab env each)")
    ap.add_argument("--friction", type=float, help="the Isaac Lab logs' Coulomb friction [N·m] (default 0.2)")
    ap.add_argument("--save", help="also write the JSON summary here")
    ap.add_argument("--worker", nargs=2, metavar=("JOB", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    sys.path.insert(0, str(ROOT))
    python = _make_env()
    families = [f for f in args.families.split(",") if f]
    job, ours = {"cases": {}}, {}
    for fam in families:
        print(f"fitting {fam} …", file=sys.stderr)
        job["cases"][fam], ours[fam] = our_case(fam, args.segments, args.friction)
    with tempfile.TemporaryDirectory() as tmp:
        job_path, out_path = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_path.write_text(json.dumps(job))
        print("replaying in mjlab …", file=sys.stderr)
        t0 = time.perf_counter()
        env = {**os.environ, "MJLAB_WARP_QUIET": "1"}
        worker_cmd = [str(python), __file__, "--worker", str(job_path), str(out_path)]
        # Warp's kernel-cache lines go to stderr: stdout carries the JSON alone
        subprocess.run(worker_cmd, check=True, env=env, stdout=sys.stderr)
        mjlab_s = time.perf_counter() - t0
        theirs = json.loads(out_path.read_text())
    summary = _summary(families, job, ours, theirs, mjlab_s)
    text = json.dumps(summary, indent=2)
    if args.save:
        Path(args.save).write_text(text + "\n")
    print(text)


def _cpu_name() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


def _summary(families: list[str], job: dict, ours: dict, theirs: dict, mjlab_s: float) -> dict:
    cases = {}
    for fam in families:
        got = theirs["cases"][fam]
        names = [s["name"] for s in job["cases"][fam]["segments"]]
        row: dict = {"fitted": ours[fam]["params"], "fit_s": round(ours[fam]["fit_s"], 2)}
        if "error" in got:
            row |= {"error": got["error"], "within_tolerance": False}
        else:
            row |= {"mjlab_classes": got["classes"], **compare(ours[fam], got, names)}
            row |= {"mjlab_step_s": round(got["step_s"], 2), "physics_steps": got["physics_steps"]}
        cases[fam] = row
    return {
        "machine": {"cpu": _cpu_name(), "cores": os.cpu_count(), "load_average": os.getloadavg()[0]},
        "tolerance": TOLERANCE,
        "metric": "RMS(q_mjlab - q_ours) / RMS(q_ours - segment mean), pooled over segments",
        "mjlab": theirs["versions"],
        "device": theirs["device"],
        "mjlab_subprocess_s": round(mjlab_s, 1),
        "all_within_tolerance": all(c["within_tolerance"] for c in cases.values()),
        "cases": cases,
    }


if __name__ == "__main__":
    main()
