"""Logs of a drive commanded in torque or in MIT mode, made by MuJoCo independently of the package's models.

A 1-DoF pendulum (q = 0 hanging down) behind a gearbox with motor inertia (armature), Coulomb friction
(frictionloss) and viscous damping. The drive computes its command every physics step, τ_cmd = kp·(q_des − q) +
kd·(qd_des − qd) + τ_ff (kp = kd = 0: a torque-commanded drive), and its current loop follows it with a first-order
lag of CURRENT_TAU_S and saturates at TAU_MAX: a MuJoCo `general` actuator with dyntype filter and a force range.
The logged torque is what the gearbox delivers: the current loop's torque less its damping and friction (the
rotor's inertia stays the joint's, an armature, as the consumers model it). MuJoCo steps at the log's rate.
"""

from __future__ import annotations

import mujoco
import numpy as np

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment

DT = 0.002
CURRENT_TAU_S = 0.01  # the current loop's time constant (bandwidth 1 / (2π·τ) ≈ 16 Hz)
TAU_MAX = 2.0  # N·m, the current limit at the output
GEARBOX = {"armature": 0.01, "frictionloss": 0.06, "damping": 0.04}
LOAD = {"mass": 0.6, "com_distance": 0.2, "inertia": 0.004}

MJCF = f"""
<mujoco>
  <option timestep="{DT}" gravity="0 0 -9.81" integrator="implicitfast"/>
  <worldbody>
    <body name="link">
      <joint name="j" type="hinge" axis="0 1 0" armature="{GEARBOX["armature"]}"
             frictionloss="{GEARBOX["frictionloss"]}" damping="{GEARBOX["damping"]}"/>
      <inertial pos="0 0 -{LOAD["com_distance"]}" mass="{LOAD["mass"]}"
                diaginertia="{LOAD["inertia"]} {LOAD["inertia"]} {LOAD["inertia"]}"/>
    </body>
  </worldbody>
  <actuator>
    <general name="drive" joint="j" dyntype="filter" dynprm="{CURRENT_TAU_S}" gainprm="1" biasprm="0 0 0"
             forcelimited="true" forcerange="-{TAU_MAX} {TAU_MAX}"/>
  </actuator>
</mujoco>
"""


def multisine(n: int, rng: np.random.Generator, amp: float, f_max: float) -> np.ndarray:
    """A sum of five sines of random frequency (0.2 … f_max Hz) and phase, peak about `amp`."""
    t = np.arange(n) * DT
    freqs, phases = rng.uniform(0.2, f_max, 5), rng.uniform(0, 2 * np.pi, 5)
    x = sum(np.sin(2 * np.pi * f * t + p) for f, p in zip(freqs, phases, strict=True))
    return amp * x / np.max(np.abs(x))


def steps(n: int, rng: np.random.Generator, amp: float, hold_s: float = 0.25) -> np.ndarray:
    """Piecewise-constant levels in [−amp, amp], each held `hold_s`."""
    k = int(hold_s / DT)
    return np.repeat(rng.uniform(-amp, amp, n // k + 1), k)[:n]


def simulate(
    q_des: np.ndarray, qd_des: np.ndarray, tau_ff: np.ndarray, kp: float, kd: float
) -> dict[str, np.ndarray]:
    """Step the drive and the pendulum; q, qd before each step and the output torque of that step."""
    model = mujoco.MjModel.from_xml_string(MJCF)
    data = mujoco.MjData(model)
    n = q_des.size
    out = {k: np.zeros(n) for k in ("q", "qd", "tau", "motor")}
    for k in range(n):
        q, qd = float(data.qpos[0]), float(data.qvel[0])
        out["q"][k], out["qd"][k] = q, qd
        data.ctrl[0] = kp * (q_des[k] - q) + kd * (qd_des[k] - qd) + tau_ff[k]
        mujoco.mj_step(model, data)
        motor = float(data.actuator_force[0])
        out["motor"][k] = motor
        out["tau"][k] = motor + data.qfrc_passive[0] + data.qfrc_constraint[0]
    return out


def _segment(name: str, cmd: dict[str, np.ndarray], kp: float, kd: float) -> Segment:
    tr = simulate(cmd["q_des"], cmd["qd_des"], cmd["tau_ff"], kp, kd)
    n = cmd["q_des"].size
    col = lambda a: np.asarray(a, np.float64)[:, None]  # noqa: E731
    return Segment(
        name,
        np.arange(n) * DT,
        q=col(tr["q"]),
        qd=col(tr["qd"]),
        q_des=col(cmd["q_des"]),
        qd_des=col(cmd["qd_des"]),
        tau_ff=col(cmd["tau_ff"]),
        tau=col(tr["tau"]),
        metadata={"kp": kp, "kd": kd, "gain_units": "si"},
    )


def torque_recording(n_segments: int = 6, seconds: float = 3.0, seed: int = 0) -> Recording:
    """A torque-commanded drive (kp = kd = 0): τ_ff multisines and steps that drive the current loop into its
    limit at times; q_des is the measured position (no position command), qd_des 0."""
    rng = np.random.default_rng(seed)
    n = int(seconds / DT)
    segs = []
    for s in range(n_segments):
        ff = multisine(n, rng, 2.6, 6.0) if s % 2 == 0 else steps(n, rng, 2.4)
        zero = np.zeros(n)
        seg = _segment(str(s), {"q_des": zero, "qd_des": zero, "tau_ff": ff}, 0.0, 0.0)
        seg.q_des = seg.q.copy()  # the drive was commanded in torque: its position target is where it is
        segs.append(seg)
    return Recording([JointInfo("j", **LOAD)], segs)


def mit_recording(
    kps: tuple[float, ...], kds: tuple[float, ...], seconds: float = 3.0, seed: int = 0
) -> Recording:
    """An MIT-mode drive, one run per (kp, kd): q_des a multisine, qd_des its derivative, a small τ_ff
    multisine (gravity compensation of a sort); the gains are logged per run (metadata kp, kd in SI)."""
    rng = np.random.default_rng(seed)
    n = int(seconds / DT)
    segs = []
    for kp, kd in zip(kps, kds, strict=True):
        q_des = multisine(n, rng, 0.5, 2.0)
        qd_des = np.gradient(q_des, DT)
        ff = multisine(n, rng, 0.3, 1.5)
        segs.append(_segment(f"kp{kp:g}", {"q_des": q_des, "qd_des": qd_des, "tau_ff": ff}, kp, kd))
    return Recording([JointInfo("j", **LOAD)], segs)
