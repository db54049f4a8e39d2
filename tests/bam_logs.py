"""Logs made by BAM's own simulator (the peer's package, `better-actuator-models`): an XL330 on a pendulum,
its firmware P law and one of BAM's friction models M1–M6, written as BAM's processed JSON files; and a Feetech
STS3215 (its velocity-limited goal included) by `write_feetech_logs`.

BAM's `Simulator.step` broadcasts over numpy arrays, so every log of a run is stepped side by side. It steps
at a finer dt than it logs (the bench logs at 5 ms), so what a fit meets is the law, not BAM's integrator; the
goal is sent at the log's rate and held between samples, as the bench sends it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from bam.actuators import actuators
from bam.feetech.actuator import STS3215Actuator
from bam.model import models
from bam.simulate import Simulator
from bam.testbench import Pendulum
from bam.trajectory import trajectories

from actuator_sysid.datasets.bam import VOLTAGE_SERVOS
from actuator_sysid.datasets.recording import Recording
from actuator_sysid.models.rollout import operating_points

LOG_DT = 0.005
SUBSTEPS = 20
VIN = 7.4
TRAJECTORIES = ("lift_and_drop", "sin_time_square", "up_and_down", "sin_sin")
KPS = (100, 800)
PENDULUM = {"mass": 0.49, "length": 0.1, "arm_mass": 0.0}
# BAM's parameter names as ours (docs/prior-art.md): M5/M6 name the motor-side load gains "motor"
OURS = {
    "friction_base": "friction",
    "friction_viscous": "viscous_friction",
    "armature": "armature",
    "friction_stribeck": "stribeck_friction",
    "dtheta_stribeck": "stribeck_velocity",
    "alpha": "stribeck_exponent",
    "load_friction_base": "load_friction",
    "load_friction_stribeck": "load_friction_stribeck",
    "load_friction_motor": "load_friction",
    "load_friction_motor_stribeck": "load_friction_stribeck",
    "load_friction_external": "load_friction_external",
    "load_friction_external_stribeck": "load_friction_external_stribeck",
    "load_friction_motor_quad": "load_friction_quadratic_motor",
    "load_friction_external_quad": "load_friction_quadratic_external",
}


def bam_model(name: str, params: dict[str, float]):
    """BAM's model `name` (m1…m6) on its XL330 actuator, with `params` (BAM's names) set."""
    model = models[name]()
    model.set_actuator(actuators["xl330"]())
    for key, value in params.items():
        getattr(model, key).value = value
    return model


def write_logs(
    folder: Path,
    name: str,
    params: dict[str, float],
    kps: tuple[int, ...] = KPS,
    runs: tuple[str, ...] = TRAJECTORIES,
) -> list[Path]:
    """One file per (kp, trajectory), each stepped by BAM's Simulator with the firmware law closing the loop
    on the simulated state (`rollout_log(simulate_control=True)`), sampled every LOG_DT."""
    return _simulate(folder, bam_model(name, params), name, "xl330", kps, runs, PENDULUM)


def write_feetech_logs(
    folder: Path,
    params: dict[str, float],
    motor: str = "sts3215",
    kps: tuple[int, ...] = (16, 32),
    runs: tuple[str, ...] = TRAJECTORIES,
    pendulum: dict[str, float] | None = None,
    error_gain: float | None = None,
    max_pwm: float | None = None,
) -> list[Path]:
    """BAM's STS3215Actuator (M1 friction) through BAM's Simulator: its duty law, duty clip and velocity-limited
    goal (`max_velocity` in `params`). `error_gain` / `max_pwm` other than BAM's make a servo of another law,
    logged under the name `motor`."""
    model = models["m1"]()
    actuator = STS3215Actuator(Pendulum)
    model.set_actuator(actuator)
    if error_gain is not None:
        actuator.error_gain = error_gain
    if max_pwm is not None:
        actuator.max_pwm = max_pwm
    for key, value in params.items():
        getattr(model, key).value = value
    return _simulate(folder, model, "m1", motor, kps, runs, pendulum or PENDULUM)


def _simulate(
    folder: Path,
    model,
    name: str,
    motor: str,
    kps: tuple[int, ...],
    runs_of: tuple[str, ...],
    pendulum: dict[str, float],
) -> list[Path]:
    """Every (kp, trajectory) run stepped side by side by BAM's Simulator, written as BAM's JSON files."""
    runs = [(kp, traj) for kp in kps for traj in runs_of]
    dt = LOG_DT / SUBSTEPS
    steps = round(max(trajectories[t].duration for t in runs_of) / dt)
    actuator = model.actuator
    sim = Simulator(model)
    sim.reset(np.zeros(len(runs)), np.zeros(len(runs)))
    actuator.load_log({**pendulum, "kp": np.array([kp for kp, _ in runs], float), "vin": VIN})
    goal = np.zeros((steps + 1, len(runs)))
    enable = np.zeros((steps + 1, len(runs)), bool)
    for i, (_, traj) in enumerate(runs):  # the goal is sent once a sample and held over its physics steps
        for k in range(0, steps + 1, SUBSTEPS):
            goal[k : k + SUBSTEPS, i], enable[k : k + SUBSTEPS, i] = trajectories[traj](
                (k // SUBSTEPS) * LOG_DT
            )
    q = np.zeros((steps + 1, len(runs)))
    qd = np.zeros((steps + 1, len(runs)))
    for k in range(steps + 1):
        q[k], qd[k] = sim.q, sim.dq
        sim.step(actuator.compute_control(goal[k], sim.q, sim.dq, dt), enable[k], dt)
    paths = []
    for i, (kp, traj) in enumerate(runs):
        rows = range(0, steps + 1, SUBSTEPS)
        entries = [
            {
                "timestamp": round(k * dt, 9),
                "position": float(q[k, i]),
                "speed": float(qd[k, i]),
                "goal_position": float(goal[k, i]),
                "torque_enable": bool(enable[k, i]),
            }
            for k in rows
        ]
        log = {**pendulum, "kp": kp, "vin": VIN, "motor": motor, "trajectory": traj, "dt": LOG_DT}
        path = folder / f"{name}_kp{kp}_{traj}.json"
        path.write_text(json.dumps({**log, "entries": entries}))
        paths.append(path)
    return paths


def our_truth(rec: Recording, params: dict[str, float]) -> dict[str, float]:
    """BAM's kt, R and friction terms as our parameters: stiffness (kt/R)·vin·duty at the recording's reference
    kp, damping kt²/R (the back-EMF), the friction terms renamed."""
    op = operating_points(rec, "xl330")
    duty = VOLTAGE_SERVOS["xl330"]["duty_per_kp_rad"] * op.kp_reference
    out = {
        "stiffness": params["kt"] / params["R"] * op.vin_reference * duty,
        "damping": params["kt"] ** 2 / params["R"],
    }
    out.update({OURS[k]: v for k, v in params.items() if k in OURS})
    return out
