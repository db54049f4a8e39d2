"""A 6-DoF torque-driven industrial arm, its URDF and Newton-made torque logs, for the inertial recovery test
and bench/arm_inertials.py.

The arm is a generic yaw–pitch–pitch–roll–pitch–roll chain (no meshes). `urdf(off=0.2)` is the same arm with
every link's mass, COM and inertia 20 % off, as a CAD model is. `torque_log` steps the true arm in Newton 1.8
alone (SolverMuJoCo on MuJoCo's C solver, RK4, 2 ms) under the effort of a 500 Hz PD controller tracking
multisine references, the pitch joints also swept wide; the joints carry Newton's own armature, viscous damping
and Coulomb frictionloss, and a constant offset effort per joint is spent before the joint. The log (100 Hz) holds the measured effort, the
controller's effort averaged over the sample as a current sensor does, plus white noise, and encoder-noisy q.
Shared with the fit: nothing but the URDF file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines
import newton  # noqa: E402

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment  # noqa: E402


@dataclass(frozen=True)
class Link:
    """A link: its joint (name, origin in the parent link, axis) and its inertial (COM frame rpy, diag inertia)."""

    name: str
    joint: str
    origin: tuple[float, float, float]
    axis: tuple[float, float, float]
    mass: float
    com: tuple[float, float, float]
    inertia: tuple[float, float, float]  # principal, about the COM, kg·m²
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


LINKS = (
    Link("shoulder", "base_yaw", (0, 0, 0.3), (0, 0, 1), 10.0, (0.02, 0.01, 0.08), (0.15, 0.12, 0.10)),
    Link(
        "upper_arm",
        "shoulder_pitch",
        (0.1, 0, 0.15),
        (0, 1, 0),
        8.0,
        (0.25, 0.02, 0.03),
        (0.03, 0.25, 0.24),
        (0.05, 0.0, 0.1),
    ),
    Link(
        "forearm",
        "elbow",
        (0.5, 0, 0),
        (0, 1, 0),
        4.0,
        (0.2, -0.01, 0.02),
        (0.012, 0.07, 0.068),
        (0.0, 0.08, 0.0),
    ),
    Link("wrist1", "wrist_roll", (0.4, 0, 0), (1, 0, 0), 2.0, (0.05, 0.015, 0.01), (0.004, 0.006, 0.005)),
    Link("wrist2", "wrist_pitch", (0.1, 0, 0), (0, 1, 0), 1.2, (0.03, 0.0, 0.02), (0.0015, 0.002, 0.0022)),
    Link(
        "flange",
        "flange_roll",
        (0.06, 0, 0),
        (1, 0, 0),
        0.6,
        (0.02, 0.01, -0.015),
        (0.0009, 0.0006, 0.0007),
        (0.1, 0.0, 0.0),
    ),
)
JOINTS = tuple(lk.joint for lk in LINKS)
TRUTH = {  # per joint: Coulomb N·m, viscous N·m·s/rad, offset N·m (spent before the joint), armature kg·m²
    "coulomb": np.array([6.0, 8.0, 4.0, 1.5, 1.0, 0.5]),
    "viscous": np.array([3.0, 4.0, 2.0, 0.6, 0.4, 0.2]),
    "offset": np.array([0.5, -1.0, 0.6, 0.2, -0.15, 0.1]),
    "armature": np.array([0.6, 0.8, 0.3, 0.05, 0.04, 0.02]),
}
NOISE_TAU = np.array([0.3, 0.5, 0.25, 0.05, 0.04, 0.02])  # N·m, white, on the logged effort
NOISE_Q = 2e-5  # rad, white, on the logged angle (a 19-bit encoder)
OFF = (1.2, 0.8, 1.2, 0.8, 1.2, 0.8)  # the nominal model's mass factor per link: 20 % off either way
# multisine references: amplitude and centre per joint, rad; PD gains per joint
AMP = np.array([1.4, 1.4, 1.4, 1.5, 1.2, 1.8])
CENTRE = np.array([0.0, -0.3, 0.6, 0.0, 0.2, 0.0])
KP = np.array([900.0, 1500.0, 600.0, 60.0, 40.0, 15.0])
KD = np.array([60.0, 90.0, 35.0, 3.0, 2.0, 0.6])
FREQS = (0.12, 0.27, 0.43, 0.61, 0.83, 1.07)  # Hz, shifted a little per joint
# a slow wide sine on the gravity-loaded pitch joints, rad, so that cos(q) changes sign over the log: a constant
# offset torque beside the gravity torque m·g·l·cos(q) is told apart only where cos(q) sweeps wide
SWEEP = np.array([0.0, 1.8, 1.6, 0.0, 1.5, 0.0])
SWEEP_FREQ = 0.15  # Hz, shifted per joint


def urdf(off: float = 0.0) -> str:
    """The arm's URDF; off > 0: each link's mass times (1 ± off) (OFF's signs), its COM times (1 ∓ off) and its
    inertia times (1 ± off)."""

    def fmt(v: tuple[float, ...] | np.ndarray) -> str:
        return " ".join(f"{x:.9g}" for x in v)

    parts = [
        '<robot name="arm6">',
        '  <link name="base"><inertial><mass value="20"/>'
        '<inertia ixx="0.2" iyy="0.2" izz="0.2" ixy="0" ixz="0" iyz="0"/></inertial></link>',
    ]
    parent = "base"
    for k, lk in enumerate(LINKS):
        f = 1.0 + off * (1 if OFF[k] > 1 else -1)
        com, ine = np.asarray(lk.com) * (2.0 - f), np.asarray(lk.inertia) * f
        parts += [
            f'  <link name="{lk.name}"><inertial><origin xyz="{fmt(com)}" rpy="{fmt(lk.rpy)}"/>'
            f'<mass value="{lk.mass * f:.9g}"/><inertia ixx="{ine[0]:.9g}" iyy="{ine[1]:.9g}" izz="{ine[2]:.9g}"'
            ' ixy="0" ixz="0" iyz="0"/></inertial></link>',
            f'  <joint name="{lk.joint}" type="revolute"><parent link="{parent}"/><child link="{lk.name}"/>'
            f'<origin xyz="{fmt(lk.origin)}"/><axis xyz="{fmt(lk.axis)}"/>'
            '<limit lower="-6.2" upper="6.2" effort="1000" velocity="20"/></joint>',
        ]
        parent = lk.name
    return "\n".join([*parts, "</robot>", ""])


def true_pi(link: Link) -> np.ndarray:
    """(10,) the link's true π = (m, m·c, inertia about the link frame's origin xx yy zz xy xz yz), from the
    table alone: the URDF's rpy (fixed X, Y, Z) turns the principal inertia, the parallel-axis theorem moves it."""
    from scipy.spatial.transform import Rotation

    r = Rotation.from_euler("xyz", link.rpy).as_matrix()
    c = np.asarray(link.com, float)
    i_o = r @ np.diag(link.inertia) @ r.T + link.mass * (float(c @ c) * np.eye(3) - np.outer(c, c))
    return np.array([link.mass, *(link.mass * c), *np.diag(i_o), i_o[0, 1], i_o[0, 2], i_o[1, 2]])


def write_urdf(folder: Path, name: str, off: float = 0.0) -> Path:
    """Write urdf(off) to folder/name.urdf and return the path."""
    path = Path(folder) / f"{name}.urdf"
    path.write_text(urdf(off))
    return path


def references(n: int, dt: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 6) multisine position references and their velocities: six sines a joint, random phases, the
    frequencies shifted per joint so that no two joints move in lockstep; the pitch joints add SWEEP's slow sine."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * dt
    q, qd = np.tile(CENTRE, (n, 1)), np.zeros((n, len(JOINTS)))
    for j in range(len(JOINTS)):
        for f in FREQS:
            w, ph = 2 * math.pi * f * (1 + 0.04 * j), rng.uniform(0, 2 * math.pi)
            q[:, j] += AMP[j] / len(FREQS) * np.sin(w * t + ph)
            qd[:, j] += AMP[j] / len(FREQS) * w * np.cos(w * t + ph)
    for j in np.flatnonzero(SWEEP):
        w, ph = 2 * math.pi * SWEEP_FREQ * (1 + 0.13 * j), rng.uniform(0, 2 * math.pi)
        q[:, j] += SWEEP[j] * np.sin(w * t + ph)
        qd[:, j] += SWEEP[j] * w * np.cos(w * t + ph)
    return q, qd


def _model(path: Path) -> tuple[newton.Model, np.ndarray]:
    """The true arm in Newton with its joint terms; returns the model and the DoF of each joint in JOINTS."""
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    builder.add_urdf(str(path), floating=False)
    labels = [lab.rsplit("/", 1)[-1] for lab in builder.joint_label]
    dofs = np.array([builder.joint_qd_start[labels.index(j)] for j in JOINTS], int)
    for k, d in enumerate(dofs):
        builder.joint_armature[d] = float(TRUTH["armature"][k])
        builder.joint_damping[d] = float(TRUTH["viscous"][k])
        builder.joint_friction[d] = float(TRUTH["coulomb"][k])
    return builder.finalize(device="cpu"), dofs


def _sensor_average(effort: np.ndarray, n: int, dec: int) -> np.ndarray:
    """(n, J) the effort held over each physics step averaged over ± half a log sample about each sample time,
    each step weighted by its overlap: what a current sensor's averaging reads, centred on the sample."""
    lo = np.arange(n)[:, None] - 0.5  # the window in physics steps, sample k at step k·dec
    start = np.arange(-(dec // 2) - 1, dec // 2 + 2)
    steps = np.arange(n)[:, None] * dec + start[None]
    weight = np.clip(np.minimum(steps + 1, (lo + 1) * dec) - np.maximum(steps, lo * dec), 0.0, None) / dec
    return np.einsum("nk,nkj->nj", weight, effort[np.clip(steps, 0, effort.shape[0] - 1)])


def torque_log(path: Path, seconds: float, seed: int, log_dt: float = 0.01, dt: float = 0.002) -> Recording:
    """A Newton-made log of the true arm at `path`, `seconds` long at 1 / log_dt Hz (see the module)."""
    model, dofs = _model(path)
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True, integrator="rk4")
    mm = solver.mj_model  # a stiff Coulomb: the frictionloss reaches its level within a few mrad/s
    mm.dof_solref[:] = (0.002, 1.0)
    mm.dof_solimp[:, :3] = (0.99, 0.999, 0.001)
    dec = int(round(log_dt / dt))
    n = int(round(seconds / log_dt)) + 1
    steps = (n - 1) * dec + dec // 2
    q_ref, qd_ref = references(steps + 1, dt, seed)
    s0, s1, control = model.state(), model.state(), model.control()
    q = s0.joint_q.numpy()
    q[dofs] = q_ref[0]
    s0.joint_q.assign(q)
    qd0 = s0.joint_qd.numpy()
    qd0[dofs] = qd_ref[0]
    s0.joint_qd.assign(qd0)
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    effort = np.zeros((steps, len(JOINTS)))
    q_log = np.zeros((n, len(JOINTS)))
    f = control.joint_f.numpy()
    for k in range(steps):
        qk, qdk = s0.joint_q.numpy()[dofs], s0.joint_qd.numpy()[dofs]
        if k % dec == 0:
            q_log[k // dec] = qk
        effort[k] = KP * (q_ref[k] - qk) + KD * (qd_ref[k] - qdk)
        f[dofs] = effort[k] - TRUTH["offset"]  # the offset the drive spends before the joint
        control.joint_f.assign(f)
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
    tau = _sensor_average(effort, n, dec)
    rng = np.random.default_rng(seed + 1000)
    tau_meas = tau + rng.normal(0.0, NOISE_TAU, tau.shape)
    q_meas = q_log + rng.normal(0.0, NOISE_Q, q_log.shape)
    t = np.arange(n) * log_dt
    qd = np.gradient(q_meas, log_dt, axis=0)
    z = np.zeros_like(q_meas)
    meta = {"kp": 0.0, "kd": 0.0}  # the drive is torque-driven: the logged effort is all it applies
    seg = Segment(
        f"arm6_{seed}",
        t,
        q=q_meas,
        qd=qd,
        q_des=q_meas.copy(),
        qd_des=z,
        tau_ff=tau,
        tau=tau_meas,
        metadata=meta,
    )
    return Recording([JointInfo(j) for j in JOINTS], [seg])
