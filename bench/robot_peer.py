"""mujoco.sysid (the peer) on a whole robot hanging in the air: the same MJCF, log, windows and time split as ours.

The robot's MJCF is made simulable without its meshes (mesh assets and geoms dropped, contacts off, the free
joint removed so the base is fixed), its torque motors become MuJoCo position actuators with the log's PD gains
(kp, kv = kd, force clipped at the motor's ctrlrange), and the physics step is log dt / decimation with each
logged command held for `decimation` steps (zero-order hold). Joint terms (armature, damping, frictionloss) are
mujoco.sysid Parameters shared by group or per joint; the per-joint encoder offset is the joint's `ref` (the
joint then reads true angle + offset and the PD acts on that reading, as ours does); the command delay, when
fitted, shifts the commands in a custom rollout. Training: the same windows ours uses, each started from the
measured state; mujoco.sysid's own optimizer (mujoco.minimize least squares) and residual. Held-out error: one
replay from the measured state at the split through MuJoCo, position RMSE at the log samples.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import mujoco.rollout as mj_rollout
import numpy as np
from absl import logging as absl_logging
from mujoco import sysid  # noqa: I001  (needs mujoco[sysid]: colorama, tabulate, matplotlib, imageio)

absl_logging.set_verbosity(absl_logging.ERROR)  # one "sensor data dimension" warning per window otherwise

TERMS = {"armature": (0.0, 0.2), "damping": (0.0, 5.0), "frictionloss": (0.0, 3.0)}
OFFSET_BOUND = 0.3  # rad, as ours (fitting/robot/ BIAS_BOUND)
DELAY_BOUND = 0.02  # s


def in_air_xml(path: Path, kp: float, kd: float, dt: float) -> str:
    """The MJCF as MuJoCo simulates it hanging: no meshes or geoms, no free joint, PD position actuators."""
    root = ET.parse(path).getroot()
    for parent in root.iter():
        for child in list(parent):
            if child.tag in ("mesh", "geom", "freejoint", "keyframe", "sensor") or (
                child.tag == "joint" and child.get("type") == "free"
            ):
                parent.remove(child)
    opt = root.find("option")
    if opt is None:
        opt = ET.Element("option")
        root.insert(0, opt)
    opt.set("timestep", repr(dt))
    flag = opt.find("flag")
    if flag is None:
        flag = ET.SubElement(opt, "flag")
    flag.set("contact", "disable")
    limits = _ctrl_ranges(root)
    act = root.find("actuator")
    if act is None:
        raise ValueError(f"{path.name}: no <actuator> block to turn into PD position actuators")
    for m in list(act):
        name = m.get("name") or m.get("joint") or ""
        lim = limits[name]
        act.remove(m)
        ET.SubElement(
            act,
            "position",
            {
                "name": name,
                "joint": m.get("joint", ""),
                "kp": repr(kp),
                "kv": repr(kd),
                "ctrllimited": "false",
                "forcelimited": "true",
                "forcerange": f"{-lim!r} {lim!r}",
            },
        )
    return ET.tostring(root, encoding="unicode")


def set_term(joint: mujoco.MjsJoint, term: str, value: float) -> None:
    """Set a joint term on the spec; damping is a polynomial in MuJoCo 3.17 (its first coefficient is viscous)."""
    current = getattr(joint, term)
    if np.ndim(current):
        arr = np.array(current, float).reshape(-1)
        arr[0] = value
        arr[1:] = 0.0
        setattr(joint, term, arr.reshape(np.shape(current)))
    else:
        setattr(joint, term, value)


def _ctrl_ranges(root: ET.Element) -> dict[str, float]:
    """Each motor's torque bound from its own or its default class's ctrlrange (the model's motor limit)."""
    spec = mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
    model = spec.compile()
    return {model.actuator(i).name: float(np.abs(model.actuator_ctrlrange[i]).max()) for i in range(model.nu)}


@dataclass
class PeerLog:
    """The log in the model's joint order: measured q, differentiated qd, commands (T, J), log dt, decimation."""

    q: np.ndarray
    qd: np.ndarray
    cmd: np.ndarray
    dt_log: float
    decimation: int
    joints: list[str]


def _controls(log: PeerLog, start: int, samples: int, model: mujoco.MjModel) -> sysid.TimeSeries:
    """Commands at physics rate, each held for `decimation` steps, times from 0 at the window's start."""
    k = np.arange(samples * log.decimation + 1)
    data = log.cmd[np.clip(start + k // log.decimation, 0, log.cmd.shape[0] - 1)]
    return sysid.TimeSeries.from_control_names(k * log.dt_log / log.decimation, data, model)


def sequences(
    log: PeerLog, spec: mujoco.MjSpec, starts: Sequence[int] | np.ndarray, length: int
) -> sysid.ModelSequences:
    """One measured sequence per training window: initial state from the log, positions as qpos observations."""
    model = spec.compile()
    names = [f"{j}_qpos" for j in log.joints]
    init, ctrl, meas = [], [], []
    for s in starts:
        init.append(sysid.create_initial_state(model, log.q[s], log.qd[s]))
        ctrl.append(_controls(log, s, length, model))
        meas.append(
            sysid.TimeSeries.from_names(
                np.arange(length + 1) * log.dt_log, log.q[s : s + length + 1], model, names=names
            )
        )
    return sysid.ModelSequences(
        "robot", spec, [f"w{s}" for s in starts], init, ctrl, meas, allow_missing_sensors=True
    )


def parameters(
    joints: list[str],
    groups: dict[str, list[int]] | None,
    offset: bool,
    delay: bool,
    nominal: dict[str, np.ndarray],
) -> sysid.ParameterDict:
    """Armature, damping and frictionloss per group (or per joint), a `ref` offset per joint, and a delay."""
    params = sysid.ParameterDict()
    sets = groups or {j: [i] for i, j in enumerate(joints)}
    for g, idx in sets.items():
        for term, (lo, hi) in TERMS.items():
            names = [joints[i] for i in idx]

            def modify(
                spec: mujoco.MjSpec, p: sysid.Parameter, names: list[str] = names, term: str = term
            ) -> None:
                for n in names:
                    set_term(spec.joint(n), term, float(p.value[0]))

            params.add(
                sysid.Parameter(
                    f"{g}.{term}",
                    nominal=float(nominal[term][idx].mean()),
                    min_value=lo,
                    max_value=hi,
                    modifier=modify,
                )
            )
    if offset:
        for j in joints:

            def shift(spec: mujoco.MjSpec, p: sysid.Parameter, j: str = j) -> None:
                spec.joint(j).ref = float(p.value[0])

            params.add(
                sysid.Parameter(
                    f"{j}.offset",
                    nominal=0.0,
                    min_value=-OFFSET_BOUND,
                    max_value=OFFSET_BOUND,
                    modifier=shift,
                )
            )
    if delay:
        params.add(
            sysid.Parameter(
                "delay", nominal=0.0, min_value=0.0, max_value=DELAY_BOUND, modifier=lambda spec, p: None
            )
        )
    return params


def _delayed_rollout(
    *,
    models,
    datas,
    control_signal,
    initial_states,
    param_dicts,
    rollout_signal_mapping,
    rollout_state_mapping,
    ctrl_mapping,
):
    """sysid's rollout with each candidate's commands shifted by its `delay` (linear interpolation, held at 0)."""
    per = len(control_signal) // len(param_dicts)
    shifted = []
    for i, c in enumerate(control_signal):
        d = float(param_dicts[i // per]["delay"].value[0])
        shifted.append(sysid.TimeSeries(c.times, c.interpolate(c.times - d), c.signal_mapping))
    return sysid.sysid_rollout(
        models=models,
        datas=datas,
        control_signal=shifted,
        initial_states=initial_states,
        rollout_signal_mapping=rollout_signal_mapping,
        rollout_state_mapping=rollout_state_mapping,
        ctrl_mapping=ctrl_mapping,
    )


def fit(
    xml: str,
    log: PeerLog,
    starts: Sequence[int] | np.ndarray,
    length: int,
    groups: dict[str, list[int]] | None,
    offset: bool,
    delay: bool,
    threads: int,
    max_iters: int = 200,
) -> dict:
    """One mujoco.sysid fit on the training windows; its parameters, wall time and held-out replay inputs."""
    t0 = time.perf_counter()
    spec = mujoco.MjSpec.from_string(xml)
    model = spec.compile()
    nominal = {
        "armature": np.array([float(model.dof_armature[model.joint(j).dofadr[0]]) for j in log.joints]),
        "damping": np.array([float(model.dof_damping[model.joint(j).dofadr[0]]) for j in log.joints]),
        "frictionloss": np.array(
            [float(model.dof_frictionloss[model.joint(j).dofadr[0]]) for j in log.joints]
        ),
    }
    params = parameters(log.joints, groups, offset, delay, nominal)
    ms = sequences(log, spec, starts, length)
    kw = {"custom_rollout": _delayed_rollout} if delay else {}
    residual_fn = sysid.build_residual_fn(models_sequences=[ms], n_threads=threads, **kw)
    opt, _ = sysid.optimize(
        initial_params=params, residual_fn=residual_fn, optimizer="mujoco", verbose=False, max_iters=max_iters
    )
    wall = time.perf_counter() - t0
    values = {k: float(opt[k].value[0]) for k in opt.keys()}
    return {"params": values, "wall_s": wall, "parameters": len(values), "windows": len(starts), "_opt": opt}


def replay_rmse(xml: str, log: PeerLog, opt: sysid.ParameterDict | None, start: int) -> dict:
    """A mujoco.sysid result (or the model's own terms, opt None) replayed from the measured state at `start`."""
    spec = mujoco.MjSpec.from_string(xml)
    if opt is not None:
        for k in opt.keys():
            opt[k].apply_modifier(spec)
    delay = float(opt["delay"].value[0]) if opt is not None and "delay" in opt else 0.0
    return _replay(spec, log, start, delay)


def replay_terms(
    xml: str,
    log: PeerLog,
    start: int,
    terms: dict[str, np.ndarray],
    offsets: np.ndarray,
    delay: float,
    gains: tuple[np.ndarray, np.ndarray] | None = None,
    friction_upper: np.ndarray | None = None,
) -> dict:
    """Per-joint armature / damping / frictionloss, offsets (rad), a delay (s) and, when given, per-joint PD
    gains (kp, kd) and the frictionloss at each joint's upper limit (linear from `frictionloss` at the lower)
    replayed by the same judge."""
    return _errors(log, start, simulate_terms(xml, log, start, terms, offsets, delay, gains, friction_upper))


def simulate_terms(
    xml: str,
    log: PeerLog,
    start: int,
    terms: dict[str, np.ndarray],
    offsets: np.ndarray,
    delay: float,
    gains: tuple[np.ndarray, np.ndarray] | None = None,
    friction_upper: np.ndarray | None = None,
) -> np.ndarray:
    """replay_terms' positions (one row per log sample after `start`) rather than their errors."""
    spec = mujoco.MjSpec.from_string(xml)
    for k, j in enumerate(log.joints):
        for t, v in terms.items():
            set_term(spec.joint(j), t, float(v[k]))
        spec.joint(j).ref = float(offsets[k])
    if gains is not None:
        for act in spec.actuators:  # position actuators, one per joint (in_air_xml)
            k = log.joints.index(act.target)
            act.gainprm[0], act.biasprm[1], act.biasprm[2] = gains[0][k], -gains[0][k], -gains[1][k]
    stroke = None if friction_upper is None else (terms["frictionloss"], friction_upper)
    return _simulate(spec, log, start, delay, stroke)


def _stepped(model: mujoco.MjModel, x0: np.ndarray, u: np.ndarray, log: PeerLog, stroke: tuple) -> np.ndarray:
    """mj_rollout.rollout's states (1, steps, state) stepped one at a time, each step's frictionloss set from
    the joints' true angles (the reading less the bias, which replay_terms writes as the joint's ref) first: `stroke` = (friction at the lower limit, at the upper limit) per joint (J,)."""
    lo_f, hi_f = (np.asarray(x, float) for x in stroke)
    jid = [model.joint(j).id for j in log.joints]
    qadr = np.array([model.jnt_qposadr[i] for i in jid])
    dadr = np.array([model.jnt_dofadr[i] for i in jid])
    lo, hi = model.jnt_range[jid, 0], model.jnt_range[jid, 1]
    ref = model.qpos0[qadr]  # the encoder bias as the joint's ref: the true angle is qpos − ref
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    mujoco.mj_setState(model, data, x0, spec)
    out = np.zeros((u.shape[0], mujoco.mj_stateSize(model, spec)))
    for k in range(u.shape[0]):
        at = np.clip((data.qpos[qadr] - ref - lo) / (hi - lo), 0.0, 1.0)
        model.dof_frictionloss[dadr] = lo_f + (hi_f - lo_f) * at
        data.ctrl[:] = u[k]
        mujoco.mj_step(model, data)
        mujoco.mj_getState(model, data, out[k], spec)
    return out[None]


def _replay(spec: mujoco.MjSpec, log: PeerLog, start: int, delay: float, stroke: tuple | None = None) -> dict:
    """Roll out from the measured state at `start` to the log's end through MuJoCo: RMSE overall and per joint;
    with `stroke`, a friction linear along each joint's range (_stepped)."""
    return _errors(log, start, _simulate(spec, log, start, delay, stroke))


def _simulate(
    spec: mujoco.MjSpec, log: PeerLog, start: int, delay: float, stroke: tuple | None = None
) -> np.ndarray:
    """_replay's positions, one row per log sample after `start`."""
    model = spec.compile()
    length = log.q.shape[0] - 1 - start
    ctrl = _controls(log, start, length, model)
    u = ctrl.interpolate(ctrl.times - delay)[:-1]
    x0 = sysid.create_initial_state(model, log.q[start], log.qd[start])
    if stroke is None:
        state, _ = mj_rollout.rollout(model, mujoco.MjData(model), x0, u)
    else:
        state = _stepped(model, x0, u, log, stroke)
    qadr = np.array([model.joint(j).qposadr[0] for j in log.joints])
    return np.squeeze(state, 0)[
        log.decimation - 1 :: log.decimation, 1 + qadr
    ]  # after each sample's last step


def _errors(log: PeerLog, start: int, sim: np.ndarray) -> dict:
    """A replay's position RMSE against the log, overall and per joint."""
    e = sim - log.q[start + 1 : start + 1 + sim.shape[0]]
    return {
        "rmse": float(np.sqrt(np.mean(e**2))),
        "per_joint_rmse": {j: float(np.sqrt(np.mean(e[:, k] ** 2))) for k, j in enumerate(log.joints)},
    }


def rollout_rate(xml: str, log_q0: np.ndarray, worlds: int, steps: int, threads: int) -> float:
    """World-steps per second of mujoco.rollout (MuJoCo C, `threads` MjData) on this model: the peer's engine."""
    model = mujoco.MjModel.from_xml_string(xml)
    datas = [mujoco.MjData(model) for _ in range(threads)]
    x0 = np.stack([sysid.create_initial_state(model, log_q0)] * worlds)
    u = np.broadcast_to(log_q0, (worlds, steps, model.nu)).copy()
    mj_rollout.rollout([model] * worlds, datas, x0, u[:, :2])  # warm-up
    t0 = time.perf_counter()
    mj_rollout.rollout([model] * worlds, datas, x0, u)
    return worlds * steps / (time.perf_counter() - t0)
