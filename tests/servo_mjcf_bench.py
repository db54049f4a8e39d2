"""A hobby servo bench (1 DoF, 50 Hz, position only) shipped as an MJCF and as a sidecar pendulum.

The MJCF is what a user ships: the horn's mass and inertia come from an .obj mesh (no <inertial>), its actuator
a `<general dyntype="filter">` servo with a force range. The log comes from MuJoCo alone: the same mesh body
stepped by mj_step with a known explicit PD (computed from the step's start state, clamped to the force range)
in qfrc_applied and the true joint terms (armature, viscous damping, frictionloss) set on the model, commands held
for four 5 ms steps and q sampled at 50 Hz. The sidecar states the horn's mass, COM distance and inertia about the
COM as MuJoCo computes them from the same mesh.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

# the user's file: the horn mesh hangs below the joint; its servo is a filtered position actuator
MJCF = """<mujoco model="servo_bench">
  <compiler meshdir="meshes" angle="radian"/>
  <option timestep="0.005"/>
  <asset><mesh name="horn" file="horn.obj"/></asset>
  <worldbody>
    <body name="stand">
      <inertial pos="0 0 0" mass="0.5" diaginertia="0.001 0.001 0.001"/>
      <body name="horn">
        <joint name="servo" type="hinge" axis="0 1 0" armature="0.001" damping="0.01"/>
        <geom type="mesh" mesh="horn" density="{density}"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <general name="servo_act" joint="servo" dyntype="filter" dynprm="0.02" gainprm="{kp}" biastype="affine"
             biasprm="0 -{kp} -{kd}"
             forcerange="-{force} {force}" ctrlrange="-3 3"/>
  </actuator>
</mujoco>
"""
HALF = (0.012, 0.015, 0.06)  # the horn's half extents, m; its centre 0.06 m below the joint
DENSITY = 2500.0  # kg/m³: 2500 · 0.024 · 0.03 · 0.12 = 0.216 kg
# the file's own servo guess (not the truth)
FILE_SERVO = {"kp": 2.5, "kd": 0.05, "force": 1.2}
# the bench's truth: an explicit PD within the force range, and the joint terms
TRUTH = {"stiffness": 4.0, "damping": 0.08, "armature": 0.004, "viscous_friction": 0.03, "friction": 0.04}
FORCE = 1.2  # N·m, the servo's stall torque (as the file states)
LOG_DT, DECIMATION = 0.02, 4
JOINT = "servo"


def write_horn(path: Path) -> None:
    """A closed box mesh as Wavefront .obj: 8 vertices, 12 outward triangles, centred 0.06 m below the joint."""
    hx, hy, hz = HALF
    verts = [(x * hx, y * hy, -hz + z * hz) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    lines = [f"v {x:g} {y:g} {z:g}" for x, y, z in verts]
    for a, b, c, d in quads:
        lines += [f"f {a + 1} {b + 1} {c + 1}", f"f {a + 1} {c + 1} {d + 1}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def write_bench(folder: Path) -> Path:
    """The shipped bench (servo.xml with meshes/horn.obj) in `folder`; returns the model's path."""
    folder.mkdir(parents=True, exist_ok=True)
    write_horn(folder / "meshes" / "horn.obj")
    path = folder / "servo.xml"
    path.write_text(MJCF.format(density=DENSITY, **FILE_SERVO))
    return path


def horn_load(model_path: Path) -> dict:
    """The horn as a pendulum load, from MuJoCo's compile of the mesh: mass, COM distance below the joint and the
    inertia about the COM around the joint axis (the sidecar's keys)."""
    import mujoco

    mm = mujoco.MjModel.from_xml_path(str(model_path))
    b = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, "horn")
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, mm.body_iquat[b])
    r = rot.reshape(3, 3)
    inertia = r @ np.diag(mm.body_inertia[b]) @ r.T
    return {
        "type": "revolute",
        "mass": float(mm.body_mass[b]),
        "com_distance": float(np.linalg.norm(mm.body_ipos[b])),
        "inertia": float(inertia[1, 1]),
        "gravity": 9.81,
    }


def episode_targets(kind: str, samples: int, seed: int) -> np.ndarray:
    """(samples,) position targets at 50 Hz: a chirp, a staircase of steps or a smoothed random walk, rad."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples) * LOG_DT
    if kind == "chirp":
        f0, f1 = 0.3, 2.5
        phase = 2 * math.pi * (f0 * t + 0.5 * (f1 - f0) / t[-1] * t**2)
        return 0.8 * np.sin(phase + rng.uniform(0, 2 * math.pi))
    if kind == "steps":
        levels = rng.uniform(-1.0, 1.0, samples // 40 + 1)
        return np.repeat(levels, 40)[:samples]
    walk = np.cumsum(rng.normal(0.0, 0.15, samples))
    walk = np.convolve(walk, np.ones(8) / 8, mode="same")
    return np.clip(walk - walk.mean(), -1.2, 1.2)


def simulate(model_path: Path, cmd: np.ndarray, truth: dict | None = None) -> np.ndarray:
    """MuJoCo alone: the bench under position targets `cmd` (T,) at 50 Hz, each held for four 5 ms physics steps,
    driven by an explicit PD clamped to ±effort_limit (default FORCE) in qfrc_applied (the file's actuator
    removed), `truth` overriding TRUTH's terms; q at each sample."""
    import mujoco

    p = {**TRUTH, "effort_limit": FORCE, **(truth or {})}
    spec = mujoco.MjSpec.from_file(str(model_path))
    for act in list(spec.actuators):
        spec.delete(act)
    mm = spec.compile()
    mm.opt.timestep = LOG_DT / DECIMATION
    mm.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    mm.dof_armature[0], mm.dof_damping[0], mm.dof_frictionloss[0] = (
        p["armature"],
        p["viscous_friction"],
        p["friction"],
    )
    md = mujoco.MjData(mm)
    md.qpos[0] = cmd[0]
    mujoco.mj_forward(mm, md)
    out = [float(md.qpos[0])]
    for k in range(1, len(cmd)):
        for _ in range(DECIMATION):
            tau = p["stiffness"] * (cmd[k - 1] - md.qpos[0]) - p["damping"] * md.qvel[0]
            md.qfrc_applied[0] = float(np.clip(tau, -p["effort_limit"], p["effort_limit"]))
            mujoco.mj_step(mm, md)
        out.append(float(md.qpos[0]))
    return np.array(out)


EPISODES = (("chirp", 0), ("steps", 1), ("walk", 2), ("chirp", 3), ("steps", 4), ("walk", 5))


def episode(i: int, seconds: float = 8.0) -> np.ndarray:
    """Episode i's position targets (EPISODES[i]), rad at 50 Hz."""
    kind, seed = EPISODES[i]
    return episode_targets(kind, int(round(seconds / LOG_DT)) + 1, seed)


def write_log(folder: Path, model_path: Path, seconds: float = 8.0, noise: float = 0.0) -> Path:
    """A long-form CSV of the episodes (`segment` ep0 … ep5: t, joint, q, q_des, no velocity) with its sidecar
    (the horn as a pendulum load); episodes ep4 and ep5 are marked `held_out` in the sidecar's segments."""
    rng = np.random.default_rng(7)
    rows = ["t,joint,q,q_des,segment"]
    t0 = 0.0
    for i in range(len(EPISODES)):
        cmd = episode(i, seconds)
        samples = len(cmd)
        q = simulate(model_path, cmd) + rng.normal(0.0, noise, samples)
        for k in range(samples):
            rows.append(f"{t0 + k * LOG_DT:.4f},{JOINT},{q[k]:.7f},{cmd[k]:.7f},ep{i}")
        t0 += seconds + 1.0
    path = folder / "servo_log.csv"
    path.write_text("\n".join(rows) + "\n")
    segments = {f"ep{i}": {"episode": "held_out" if i >= 4 else "train"} for i in range(len(EPISODES))}
    side = {"angle_unit": "rad", "joints": {JOINT: horn_load(model_path)}, "segments": segments}
    (folder / "servo_log.json").write_text(json.dumps(side, indent=1))
    return path
