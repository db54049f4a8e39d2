"""Test logs made by the real Isaac Lab 3.0 actuator classes inside a pendulum integrator written here.

The integrator is this file's own transcription of docs/consumer-semantics.md §F (semi-implicit Euler, implicit
joint damping, Coulomb friction as a stopping constraint), independent of actuator_sysid's kernel.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from isaaclab.actuators import (
    DCMotor,
    DCMotorCfg,
    DelayedPDActuator,
    DelayedPDActuatorCfg,
    IdealPDActuator,
    IdealPDActuatorCfg,
)
from isaaclab.utils.types import ArticulationActions

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment

DT = 0.005
RATE_HZ = 200
SEGMENT_S = 6.0

TRUTH_DCMOTOR = {
    "stiffness": 25.0,
    "damping": 0.6,
    "saturation_effort": 7.0,
    "actuator_velocity_limit": 9.0,
    "actuator_effort_limit": 4.5,
    "armature": 0.015,
    "friction": 0.2,
    "viscous_friction": 0.08,
}
LOAD = {"mass": 1.0, "com_distance": 0.25, "gravity": 9.81}


def targets(kind: str, t: np.ndarray) -> np.ndarray:
    """Commanded positions for the test-bench trajectories (rad)."""
    if kind == "steps":
        levels = np.array([0.0, 1.2, -1.0, 0.4, -1.4, 1.5, 0.0, -0.6, 1.0, -1.2, 0.3, 0.0])
        return levels[np.minimum((t / 0.5).astype(int), len(levels) - 1)]
    if kind == "chirp":
        f0, f1 = 0.2, 3.0
        phase = 2 * math.pi * (f0 * t + (f1 - f0) * t**2 / (2 * t[-1]))
        return 1.0 * np.sin(phase)
    if kind == "sin_t2":
        return 1.3 * np.sin(0.8 * t**2)
    if kind == "fast":
        return 1.6 * np.sign(np.sin(2 * math.pi * 0.9 * t))
    if kind == "slow":
        return 0.3 * np.sin(2 * math.pi * 0.25 * t) + 0.1 * np.sin(2 * math.pi * 1.1 * t)
    if kind == "multisine":
        return sum(0.35 * np.sin(2 * math.pi * f * t + p) for f, p in ((0.3, 0.0), (0.9, 1.0), (2.1, 2.0)))
    raise ValueError(kind)


KINDS = ("steps", "chirp", "sin_t2", "fast", "slow", "multisine")


def make_actuator(family: str, truth: dict[str, float]):
    """Construct the real Isaac Lab actuator for one joint and one env."""
    common = dict(
        joint_names_expr=["hinge"],
        stiffness=truth["stiffness"],
        damping=truth["damping"],
        actuator_effort_limit=truth["actuator_effort_limit"],
    )
    if family == "dcmotor":
        cfg = DCMotorCfg(
            **common,
            saturation_effort=truth["saturation_effort"],
            actuator_velocity_limit=truth["actuator_velocity_limit"],
        )
        return DCMotor(cfg, joint_names=["hinge"], joint_ids=slice(None), num_envs=1, device="cpu")
    if family == "delayed_pd":
        lag = int(truth["delay"])
        cfg = DelayedPDActuatorCfg(**common, min_delay=lag, max_delay=lag)
        return DelayedPDActuator(cfg, joint_names=["hinge"], joint_ids=slice(None), num_envs=1, device="cpu")
    cfg = IdealPDActuatorCfg(**common)
    return IdealPDActuator(cfg, joint_names=["hinge"], joint_ids=slice(None), num_envs=1, device="cpu")


def simulate_segment(
    actuator, truth: dict[str, float], q_des: np.ndarray, q0: float = 0.0, qd_des: np.ndarray | None = None
) -> dict:
    """Step the Isaac Lab actuator once per physics step inside the §F pendulum update (qd_des: 0 unless given)."""
    m, arm_l, g = LOAD["mass"], LOAD["com_distance"], LOAD["gravity"]
    inertia = m * arm_l * arm_l + truth["armature"]
    fric, visc = truth["friction"], truth["viscous_friction"]
    n = q_des.size
    q_log, qd_log, tau_log = np.zeros(n), np.zeros(n), np.zeros(n)
    q, qd = q0, 0.0
    actuator.reset(torch.arange(1))
    for k in range(n):
        action = ArticulationActions(
            joint_positions=torch.tensor([[q_des[k]]], dtype=torch.float32),
            joint_velocities=torch.tensor([[0.0 if qd_des is None else qd_des[k]]], dtype=torch.float32),
            joint_efforts=torch.zeros(1, 1),
        )
        out = actuator.compute(
            action, torch.tensor([[q]], dtype=torch.float32), torch.tensor([[qd]], dtype=torch.float32)
        )
        tau = float(out.joint_efforts[0, 0])
        q_log[k], qd_log[k], tau_log[k] = q, qd, tau
        torque = tau - m * g * arm_l * math.sin(q)
        stop = inertia / DT * qd + torque
        friction = -math.copysign(min(abs(stop), fric), stop) if stop != 0 else 0.0
        qd = (qd + DT * (torque + friction) / inertia) / (1.0 + DT * visc / inertia)
        q = q + DT * qd
    return {"q": q_log, "qd": qd_log, "tau": tau_log}


def make_recording(
    family: str = "dcmotor", truth: dict[str, float] | None = None, noise_q: float = 0.0, seed: int = 0
) -> Recording:
    """Six 6 s segments at 200 Hz of one joint, made by the real Isaac Lab actuator class."""
    truth = truth or TRUTH_DCMOTOR
    rng = np.random.default_rng(seed)
    act = make_actuator(family, truth)
    t = np.arange(int(SEGMENT_S * RATE_HZ)) * DT
    segments = []
    for i, kind in enumerate(KINDS):
        q_des = targets(kind, t)
        sim = simulate_segment(act, truth, q_des)
        q = sim["q"] + rng.normal(0.0, noise_q, t.size) if noise_q else sim["q"]
        col = lambda a: a[:, None].astype(np.float64)  # noqa: E731
        segments.append(
            Segment(
                name=str(i),
                t=t + i * 10.0,
                q=col(q),
                qd=col(sim["qd"]),
                q_des=col(q_des),
                qd_des=col(np.zeros_like(t)),
                tau_ff=col(np.zeros_like(t)),
                tau=col(sim["tau"]),
                metadata={"trajectory": kind},
            )
        )
    joint = JointInfo("hinge", mass=LOAD["mass"], com_distance=LOAD["com_distance"], gravity=LOAD["gravity"])
    return Recording([joint], segments, source_format="isaaclab-test-bench")
