"""MuJoCo's own `<dcmotor>` on the test bench: the MJCF, its compiled fields, and batched rollouts.

The plant of the `mujoco_dcmotor*` families is MuJoCo itself: the bench pendulum (q = 0 hanging down, the
load of datasets.recording.JointInfo) driven by a `<dcmotor>` in position mode, stepped by `mujoco.rollout`
for every candidate and segment at once. The MJCF written here is the one the export writes
(docs/consumer-semantics.md "MuJoCo `<dcmotor>`").
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from ..datasets.recording import JointInfo

# MuJoCo refuses a massless body: the export's floor (export/newton_usd.py)
MIN_MASS, MIN_INERTIA = 1e-6, 1e-8


def _num(x: float) -> str:
    return repr(float(x))


def _on(params: Mapping[str, float], name: str) -> float:
    """A parameter as MuJoCo writes it: 0 switches the feature off (absent, infinite or zero)."""
    v = float(params.get(name, 0.0))
    return v if math.isfinite(v) and v > 0 else 0.0


def dcmotor_attrs(params: Mapping[str, float]) -> dict[str, str]:
    """The `<dcmotor>` attributes of fitted values (position input; an absent extension is left out)."""
    kp, kd = float(params["stiffness"]), float(params["damping"])
    out = {
        "motorconst": _num(params["dcmotor_motor_constant"]),
        "resistance": _num(params["dcmotor_resistance"]),
        "input": "pos",
        # [kp, ki, kd, slewmax, imax, vmax]: 0 switches a term off
        "controller": " ".join(
            _num(v)
            for v in (
                kp,
                0.0,
                kd,
                _on(params, "dcmotor_slew_rate"),
                0.0,
                _on(params, "dcmotor_voltage_limit"),
            )
        ),
    }
    if te := _on(params, "dcmotor_time_constant"):
        out["inductance"] = f"0 {_num(te)}"  # [L, te]: the time constant stated directly
    if sigma0 := _on(params, "dcmotor_lugre_stiffness"):
        names = ("damping", "coulomb", "static", "stribeck_velocity")
        out["lugre"] = " ".join(
            [_num(sigma0), *(_num(float(params.get(f"dcmotor_lugre_{n}", 0.0))) for n in names)]
        )
    if amp := float(params.get("dcmotor_cogging_amplitude", 0.0)):
        np_ = float(params.get("dcmotor_cogging_periods", 0.0))
        out["cogging"] = f"{_num(amp)} {_num(np_)} {_num(params.get('dcmotor_cogging_phase', 0.0))}"
    return out


def attrs_text(attrs: Mapping[str, str]) -> str:
    return " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items())


def bench_body(load: JointInfo, name: str = "joint", pos: str = "0 0 0") -> list[str]:
    """The bench pendulum: a hinge about y (z without gravity), the point mass com_distance below it."""
    prismatic = load.joint_type == "prismatic"
    mass = max(load.load_inertia if prismatic else load.mass, MIN_MASS)
    com = 0.0 if prismatic or load.mass <= 0 else load.com_distance
    inertia = _num(max(load.inertia, MIN_INERTIA))
    axis = "1 0 0" if prismatic else ("0 1 0" if load.gravity_coeff > 0 else "0 0 1")
    return [
        f'    <body name="{name}_link" pos="{pos}">',
        f'      <joint name="{name}" type="{"slide" if prismatic else "hinge"}" axis="{axis}" limited="false"/>',
        f'      <inertial pos="0 0 {_num(-com)}" mass="{_num(mass)}" diaginertia="{inertia} {inertia} {inertia}"/>',
        "    </body>",
    ]


def bench_xml(load: JointInfo, params: Mapping[str, float], dt: float) -> str:
    """The whole bench as MJCF: Euler steps of dt, the pendulum, its `<dcmotor>` actuator."""
    lines = [
        '<mujoco model="actuator_sysid_dcmotor_bench">',
        '  <compiler angle="radian" autolimits="true"/>',
        f'  <option timestep="{_num(dt)}" gravity="0 0 {_num(-load.gravity)}" integrator="Euler"/>',
        "  <worldbody>",
        *bench_body(load),
        "  </worldbody>",
        "  <actuator>",
        f'    <dcmotor name="motor" joint="joint" {attrs_text(dcmotor_attrs(params))}/>',
        "  </actuator>",
        '  <sensor><actuatorfrc actuator="motor"/></sensor>',
        "</mujoco>",
    ]
    return "\n".join(lines) + "\n"


def set_fields(model: mujoco.MjModel, params: Mapping[str, float], a: int = 0) -> None:
    """Write fitted values into a compiled model's actuator `a`, as the compiler does from dcmotor_attrs (the
    same features must be on: they fix the activation layout)."""
    g, d, b = model.actuator_gainprm[a], model.actuator_dynprm[a], model.actuator_biasprm[a]
    g[0], g[1] = params["dcmotor_resistance"], params["dcmotor_motor_constant"]
    g[4], g[6], g[7] = params["stiffness"], params["damping"], _on(params, "dcmotor_voltage_limit")
    d[0], d[7] = _on(params, "dcmotor_time_constant"), _on(params, "dcmotor_slew_rate")
    if d[5] > 0:
        d[5], d[6] = params["dcmotor_lugre_stiffness"], params["dcmotor_lugre_damping"]
        b[3], b[4] = params["dcmotor_lugre_coulomb"], params["dcmotor_lugre_static"]
        b[5] = params["dcmotor_lugre_stribeck_velocity"]
    if b[0] != 0:
        b[0], b[2] = params["dcmotor_cogging_amplitude"], params.get("dcmotor_cogging_phase", 0.0)
        b[1] = params["dcmotor_cogging_periods"]


@dataclass(frozen=True)
class Trial:
    """One segment on the bench: the setpoint per sample and the state the rollout starts from."""

    q_des: np.ndarray  # (T,) position setpoint, held for the `substeps` physics steps of each sample
    q0: float
    qd0: float


def slots(model: mujoco.MjModel, a: int = 0) -> dict[str, int]:
    """Where each `<dcmotor>` state lies in act: slew, integral, temperature, bristle, current, in that order."""
    d, g = model.actuator_dynprm[a], model.actuator_gainprm[a]
    on = {
        "slew": d[7] > 0,
        "integral": g[5] > 0,
        "temperature": d[2] > 0,
        "bristle": d[5] > 0,
        "current": d[0] > 0,
    }
    out, k = {}, int(model.actuator_actadr[a])
    for name, present in on.items():
        if present:
            out[name] = k
            k += 1
    return out


def initial_act(model: mujoco.MjModel, trial: Trial, a: int = 0) -> np.ndarray:
    """The actuator state a segment starts from: the slew state at the first setpoint, the current settled at
    the first sample's voltage, no integral, no bristle deflection."""
    act = np.zeros(model.na)
    where = slots(model, a)
    if "slew" in where:
        act[where["slew"]] = trial.q_des[0]
    if "current" in where:
        g = model.actuator_gainprm[a]
        r, k, kp, kd, vmax = g[0], g[1], g[4], g[6], g[7]
        volts = r * (kp * (trial.q_des[0] - trial.q0) - kd * trial.qd0) / k + k * trial.qd0
        volts = float(np.clip(volts, -vmax, vmax)) if vmax > 0 else volts
        act[where["current"]] = (volts - k * trial.qd0) / r
    return act


def initial_state(model: mujoco.MjModel, trial: Trial) -> np.ndarray:
    """MuJoCo's full physics state at a segment's start (mj_getState, mjSTATE_FULLPHYSICS)."""
    data = mujoco.MjData(model)
    data.qpos[0], data.qvel[0] = trial.q0, trial.qd0
    data.act[:] = initial_act(model, trial)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    return state


class Traces(NamedTuple):
    """Per trial, (candidates, samples) arrays of position, velocity and actuator torque."""

    q: list[np.ndarray]
    qd: list[np.ndarray]
    tau: list[np.ndarray]


class Bench:
    """A compiled bench for one family layout; `rollout` runs candidate parameter sets over segments."""

    def __init__(
        self,
        load: JointInfo,
        template: Mapping[str, float],
        dt: float,
        substeps: int = 1,
        threads: int | None = None,
    ) -> None:
        self.load, self.dt, self.substeps = load, float(dt), int(substeps)
        self.model = mujoco.MjModel.from_xml_string(bench_xml(load, template, dt))
        n = threads or min(2, os.cpu_count() or 1)
        self.datas = [mujoco.MjData(self.model) for _ in range(n)]

    def candidate(self, params: Mapping[str, float]) -> mujoco.MjModel:
        model = copy.copy(self.model)
        set_fields(model, params)
        return model

    def rollout(self, candidates: Sequence[Mapping[str, float]], trials: Sequence[Trial]) -> Traces:
        """q, qd and the actuator torque at every sample of every trial for every candidate, as lists [trial] of
        (C, T) arrays: sample 0 is the start, sample k the state after k · substeps physics steps (the torque:
        the one applied during the step to sample k + 1, the last one repeated)."""
        models = [self.candidate(p) for p in candidates]
        nc, sub = len(models), self.substeps
        nstep = (max(len(t.q_des) for t in trials) - 1) * sub
        batch_models, states, controls = [], [], []
        for tr in trials:
            u = np.repeat(np.asarray(tr.q_des[:-1], float), sub)
            u = np.concatenate([u, np.full(nstep - u.size, u[-1] if u.size else tr.q_des[0])])
            for m in models:
                batch_models.append(m)
                states.append(initial_state(m, tr))
                controls.append(u[:, None])
        state, sensor = mj_rollout.rollout(batch_models, self.datas, np.stack(states), np.stack(controls))
        out = Traces([], [], [])
        for i, tr in enumerate(trials):
            n = len(tr.q_des) - 1
            block = state[i * nc : (i + 1) * nc, sub - 1 :: sub][
                :, :n
            ]  # full physics state: time, qpos, qvel, …
            tau = sensor[i * nc : (i + 1) * nc, ::sub, 0][:, :n]
            out.q.append(np.concatenate([np.full((nc, 1), tr.q0), block[:, :, 1]], axis=1))
            out.qd.append(np.concatenate([np.full((nc, 1), tr.qd0), block[:, :, 2]], axis=1))
            out.tau.append(np.concatenate([tau, tau[:, -1:] if n else np.zeros((nc, 1))], axis=1))
        return out
