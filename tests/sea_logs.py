"""Series-elastic actuator logs made by MuJoCo, independently of the package's models and plant.

A motor body (a hinge with rotor inertia and damping, driven by a torque-limited PD loop on the link's angle)
carries a link through a torsional spring (a child hinge with stiffness and damping): the link's absolute
angle is q = θ_motor + φ and the torque the actuator delivers to it is the spring's, −k·φ − c·φ̇, which is
what is logged (as a joint-torque sensor would). The link is a pendulum (q = 0 hanging down). MuJoCo steps at
2 kHz; the log samples every `rate_hz`-th of a second. The spring hides the motor's state from the joint's
signals, so a net needs a history of them: how long it must be is a time, not a number of samples.
"""

from __future__ import annotations

import numpy as np

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment

SIM_DT = 0.0005
TRUTH = {"kp": 40.0, "kd_motor": 0.6, "tau_max": 12.0, "spring": 80.0, "spring_damping": 0.3}
LOAD = {"mass": 1.0, "com_distance": 0.2, "inertia": 0.01}  # the link: a pendulum about the joint
ROTOR = {"inertia": 0.02, "damping": 0.2}

MJCF = """
<mujoco>
  <option timestep="{dt}" gravity="0 0 -9.81" integrator="implicitfast"/>
  <worldbody>
    <body name="motor">
      <joint name="motor" type="hinge" axis="0 1 0" damping="{rotor_damping}" armature="{rotor_inertia}"/>
      <geom type="cylinder" size="0.01 0.01" mass="1e-6" contype="0" conaffinity="0"/>
      <body name="link">
        <joint name="spring" type="hinge" axis="0 1 0" stiffness="{spring}" damping="{spring_damping}"/>
        <inertial pos="0 0 -{l}" mass="{m}" diaginertia="{i} {i} {i}"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="motor" gear="1" ctrlrange="-{tau_max} {tau_max}" ctrllimited="true"/></actuator>
</mujoco>
"""


def model_xml() -> str:
    return MJCF.format(
        dt=SIM_DT,
        rotor_damping=ROTOR["damping"],
        rotor_inertia=ROTOR["inertia"],
        spring=TRUTH["spring"],
        spring_damping=TRUTH["spring_damping"],
        l=LOAD["com_distance"],
        m=LOAD["mass"],
        i=LOAD["inertia"],
        tau_max=TRUTH["tau_max"],
    )


def commands(kind: str, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """The link's target at 2 kHz: a chirp, steps or a multisine (rad)."""
    t = np.arange(int(round(seconds / SIM_DT))) * SIM_DT
    if kind == "chirp":
        f = 0.2 + 3.0 * t / t[-1]
        return 0.9 * np.sin(2 * np.pi * np.cumsum(f) * SIM_DT)
    if kind == "steps":
        hold = int(0.5 / SIM_DT)
        return np.repeat(rng.uniform(-1.0, 1.0, t.size // hold + 1), hold)[: t.size]
    freqs, phases = rng.uniform(0.2, 2.5, 4), rng.uniform(0, 2 * np.pi, 4)
    return 0.3 * sum(np.sin(2 * np.pi * f * t + p) for f, p in zip(freqs, phases, strict=True))


def simulate(q_des: np.ndarray) -> dict[str, np.ndarray]:
    """MuJoCo at 2 kHz under the PD loop: the link's q, qd and the spring torque on it, per step."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(model_xml())
    data = mujoco.MjData(model)
    spring = model.joint("spring").dofadr[0]
    n = q_des.size
    out = {k: np.zeros(n) for k in ("q", "qd", "tau")}
    for k in range(n):
        q, qd = float(data.qpos[0] + data.qpos[1]), float(data.qvel[0] + data.qvel[1])
        out["q"][k], out["qd"][k] = q, qd
        out["tau"][k] = -TRUTH["spring"] * data.qpos[1] - TRUTH["spring_damping"] * data.qvel[1]
        data.ctrl[0] = TRUTH["kp"] * (q_des[k] - q) - TRUTH["kd_motor"] * data.qvel[0]
        mujoco.mj_step(model, data)
    assert np.all(np.isfinite(out["q"])) and spring == 1
    return out


def sea_recording(
    rate_hz: float = 400.0, seconds: float = 6.0, n_segments: int = 3, seed: int = 0
) -> Recording:
    """Segments of chirps, steps and multisines, sampled at `rate_hz`; one segment: one recording."""
    rng = np.random.default_rng(seed)
    every = int(round(1.0 / (rate_hz * SIM_DT)))
    segs = []
    for s in range(n_segments):
        q_des = commands(("chirp", "steps", "multisine")[s % 3], seconds, rng)
        tr = simulate(q_des)
        pick = lambda a: a[::every][:, None]  # noqa: E731
        n = q_des[::every].size
        segs.append(
            Segment(
                str(s),
                np.arange(n) * every * SIM_DT,
                q=pick(tr["q"]),
                qd=pick(tr["qd"]),
                q_des=pick(q_des),
                qd_des=np.zeros((n, 1)),
                tau_ff=np.zeros((n, 1)),
                tau=pick(tr["tau"]),
            )
        )
    return Recording([JointInfo("knee", **LOAD)], segs)
