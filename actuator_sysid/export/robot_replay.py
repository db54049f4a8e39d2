"""Each whole-robot export replayed on the whole robot by its consumer, beside our own coupled rollout.

All run the fit's held-out part of the log from the measured state at the split, open loop on the logged
commands, each delay line starting with the log's commands from before the split (as the fit's validation
replay, fitting/robot/ replay_coupled, reads them), and report the position RMSE against the log (per joint and
pooled) and against our rollout:
- ours: models/articulated.py's rollout (our PD, delay and bias) on MuJoCo's C model inside Newton's
  SolverMuJoCo (`mujoco_cpu`, one world), exactly as the fit's validation replay runs;
- isaaclab: the real Isaac Lab 3.0 actuator classes built from the export compute every group's torque once per
  physics step from the encoder reading (true angle + bias) into Newton's SolverMuJoCo, the joint terms being
  the cfgs' armature, friction and viscous_friction (Isaac Lab writes them to the joints, §A.11, §D);
- newton: the exported stage through Newton's `add_usd`, its NewtonActuators stepped once per physics step
  (§C.1), SolverMuJoCo; the encoder bias as the target shifted by −bias (a PD law sees q + b − q_des);
- mujoco: `mj_step` on the exported MJCF with its ctrl as robot_mjcf.py states it (a torque-driven joint's ctrl
  the logged feed-forward torque), the base welded and contacts off as in the fit.
"Within 10 %" means the replay's RMSE against the log is within 10 % of our rollout's (TOLERANCE).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .robot_common import ReplayLog
from .selection import ChosenModel, ExportError

TOLERANCE = 0.10


def _joint_terms(models: dict[str, ChosenModel], bias: np.ndarray):
    """models/articulated.py's JointTerms for one world from the exported models: its fields are registry names,
    the joint's box is the exported effort limit (none: no box) and an unstated envelope is no clamp."""
    from ..models.articulated import JointTerms

    def row(name: str, default: float | None = None) -> np.ndarray | None:
        if not all(name in m.params for m in models.values()) and default is None:
            return None
        return np.array([[m.params.get(name, default) for m in models.values()]])

    values: dict[str, Any] = {
        "encoder_offset": bias[None],
        "joint_effort_limit": row("actuator_effort_limit", 1e6),
    }
    for f in dataclasses.fields(JointTerms):
        if f.name in values or f.name.startswith("body") or f.name == "bodies":
            continue
        optional = f.default is not dataclasses.MISSING
        if (v := row(f.name)) is None and not optional:
            raise ExportError(f"our rollout needs {f.name!r}, which the export does not state")
        values[f.name] = v
    return JointTerms(**values)


def ours(
    models: dict[str, ChosenModel],
    robot,
    log: ReplayLog,
    bias: np.ndarray,
    delay: int,
    effort_mode: str = "explicit",
) -> np.ndarray:
    """Our coupled rollout of the exported values over the replayed part, as the fit's validation replay runs it
    (fitting/robot/ replay_coupled: MuJoCo's C backend, the delay line holding the commands before the split,
    the fit's effort mode): measured positions (T, J)."""
    from ..models.articulated import ArticulatedRollout, physics_targets

    eng = ArticulatedRollout(robot, 1, device="cpu", mujoco_cpu=True, effort_mode=effort_mode)
    h = log.q_des_before.shape[0]
    s = np.array([h])
    n = log.q.shape[0] - 1
    q, _ = eng.run(
        log.q[:1],
        log.qd[:1],
        physics_targets(np.concatenate([log.q_des_before, log.q_des]), s, n, log.decimation, delay),
        physics_targets(np.concatenate([log.qd_des_before, log.qd_des]), s, n, log.decimation, delay),
        _joint_terms(models, bias),
        log.decimation,
        log.dt,
        physics_targets(log.ff_all(), s, n, log.decimation, delay),
    )
    return q[:, 0]


def _newton_run(
    model,
    joints: list[str],
    log: ReplayLog,
    bias: np.ndarray,
    control_fn: Callable[[np.ndarray, np.ndarray, object, object, np.ndarray, np.ndarray, np.ndarray], None],
    delay: int,
) -> np.ndarray:
    """Step a Newton model on SolverMuJoCo (MuJoCo C) from the measured state; `control_fn(q_des, qd_des, state,
    control, q_measured, qd)` sets the control from a log sample's commands each physics step. The consumer's
    delay line (`delay` physics steps) is first fed the commands before the split at the measured state, without
    stepping, as the fit's validation starts it. Measured positions (T, J)."""
    import newton

    labels = [lab.rsplit("/", 1)[-1] for lab in model.joint_label]
    missing = [j for j in joints if j not in labels]
    if missing:
        raise ExportError(f"joints {missing} are not in the imported Newton model")
    ji = [labels.index(j) for j in joints]
    dof = model.joint_qd_start.numpy()[ji]
    coord = model.joint_q_start.numpy()[ji]
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True)
    s0, s1, control = model.state(), model.state(), model.control()
    jq, jqd = s0.joint_q.numpy(), s0.joint_qd.numpy()
    jq[coord], jqd[dof] = log.q[0] - bias, log.qd[0]
    s0.joint_q.assign(jq)
    s0.joint_qd.assign(jqd)
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    for (q_des, qd_des), ff in zip(log.history(delay), log.ff_history(delay), strict=True):
        control_fn(q_des, qd_des, s0, control, log.q[0], log.qd[0], ff)
    out = np.empty_like(log.q)
    out[0] = log.q[0]
    for i in range(log.q.shape[0] - 1):
        for _ in range(log.decimation):
            q_meas, qd = s0.joint_q.numpy()[coord] + bias, s0.joint_qd.numpy()[dof]
            control_fn(log.q_des[i], log.qd_des[i], s0, control, q_meas, qd, log.ff(i))
            solver.step(s0, s1, control, None, log.dt)
            s0, s1 = s1, s0
        out[i + 1] = s0.joint_q.numpy()[coord] + bias
    return out


def isaaclab_run(cfgs: dict, robot, log: ReplayLog, bias: np.ndarray) -> np.ndarray:
    """The Isaac Lab actuator classes of the export computing every joint's torque into Newton (T, J)."""
    import newton
    import torch
    from isaaclab.utils.types import ArticulationActions

    from .robot_isaaclab import group_joints

    joints = log.joints
    groups = group_joints(cfgs, joints)
    b = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_builder(robot.builder)
    acts = {}
    for g, cfg in cfgs.items():
        idx = groups[g]
        for k in idx:  # the cfg's joint terms go on the joints (None: the model file's own, §A.1)
            d = int(robot.dof[k])
            for attr, name, own in (
                ("joint_armature", "armature", robot.armature),
                ("joint_friction", "friction", robot.friction),
                ("joint_damping", "viscous_friction", robot.viscous_friction),
            ):
                v = getattr(cfg, name, None)
                getattr(b, attr)[d] = float(own[k] if v is None else v)
        act = cfg.class_type(
            cfg, joint_names=[joints[k] for k in idx], joint_ids=slice(None), num_envs=1, device="cpu"
        )
        act.reset(torch.arange(1))
        acts[g] = (act, idx)
    model = b.finalize(device="cpu")
    dof_all = _dofs(model, joints)
    f = np.zeros(model.joint_dof_count, np.float32)

    def t(x: np.ndarray) -> torch.Tensor:
        return torch.tensor(np.asarray(x, np.float32)[None])

    def control_fn(
        q_des: np.ndarray,
        qd_des: np.ndarray,
        state,
        control,
        q: np.ndarray,
        qd: np.ndarray,
        ff: np.ndarray,
    ) -> None:
        for act, idx in acts.values():  # the logged feed-forward effort as Isaac Lab's joint_efforts
            a = ArticulationActions(
                joint_positions=t(q_des[idx]),
                joint_velocities=t(qd_des[idx]),
                joint_efforts=t(ff[idx]),
            )
            f[dof_all[idx]] = act.compute(a, t(q[idx]), t(qd[idx])).joint_efforts[0].numpy()
        control.joint_f.assign(f)

    delay = max(int(getattr(cfg, "max_delay", 0) or 0) for cfg in cfgs.values())
    return _newton_run(model, joints, log, bias, control_fn, delay)


def _dofs(model, joints: list[str]) -> np.ndarray:
    """Each joint's DoF index in a finalized Newton model, by the last element of its label."""
    labels = [lab.rsplit("/", 1)[-1] for lab in model.joint_label]
    return model.joint_qd_start.numpy()[[labels.index(j) for j in joints]]


def newton_run(model, log: ReplayLog, bias: np.ndarray) -> np.ndarray:
    """The imported stage's NewtonActuators on Newton's SolverMuJoCo (T, J)."""
    dof = _dofs(model, log.joints)
    acts = [(a, a.state(), a.state()) for a in model.actuators]
    tq = np.zeros(model.joint_dof_count, np.float32)
    tqd = np.zeros(model.joint_dof_count, np.float32)
    act = np.zeros(model.joint_dof_count, np.float32)

    def control_fn(
        q_des: np.ndarray,
        qd_des: np.ndarray,
        state,
        control,
        q: np.ndarray,
        qd: np.ndarray,
        ff: np.ndarray,
    ) -> None:
        tq[dof], tqd[dof], act[dof] = q_des - bias, qd_des, ff
        control.joint_target_q.assign(tq)
        control.joint_target_qd.assign(tqd)
        control.joint_act.assign(act)  # the NewtonActuator's feed-forward input
        control.joint_f.zero_()
        for k, (a, cur, nxt) in enumerate(acts):
            a.step(state, control, cur, nxt, dt=log.dt)
            acts[k] = (a, nxt, cur)

    delay = max((int(a.delay.delay_steps.numpy().max()) for a in model.actuators if a.delay), default=0)
    return _newton_run(model, log.joints, log, bias, control_fn, delay)


def mujoco_run(
    xml: str, log: ReplayLog, bias: np.ndarray, models: dict[str, ChosenModel], actuators: dict[str, str]
) -> np.ndarray:
    """mj_step on the exported MJCF (as robot_mjcf.replay_model prepares it): measured positions (T, J)."""
    import mujoco

    from .robot_mjcf import torque_driven

    model = mujoco.MjModel.from_xml_string(xml)
    if not math.isclose(model.opt.timestep, log.dt, rel_tol=1e-6):
        raise ExportError(f"the MJCF timestep {model.opt.timestep} is not the fit's physics step {log.dt}")
    data = mujoco.MjData(model)
    obj = mujoco.mjtObj
    jid = [mujoco.mj_name2id(model, obj.mjOBJ_JOINT, j) for j in log.joints]
    aid = [mujoco.mj_name2id(model, obj.mjOBJ_ACTUATOR, actuators[j]) for j in log.joints]
    if min(jid + aid) < 0:
        raise ExportError("a fitted joint or its actuator is not in the MJCF")
    qadr, vadr = model.jnt_qposadr[jid], model.jnt_dofadr[jid]
    kp = np.array([models[j].value("stiffness") or 0.0 for j in log.joints])
    kd = np.array([models[j].value("damping") or 0.0 for j in log.joints])
    torque = np.array([torque_driven(models[j]) for j in log.joints])  # ctrl = tau_ff (robot_mjcf.py)
    data.qpos[qadr], data.qvel[vadr] = log.q[0] - bias, log.qd[0]
    cadr = model.actuator_ctrladr[aid] if hasattr(model, "actuator_ctrladr") else np.array(aid)

    def ctrl_of(q_des: np.ndarray, qd_des: np.ndarray, ff: np.ndarray) -> np.ndarray:
        target = q_des - bias + np.where(kp > 0, kd * qd_des / np.where(kp > 0, kp, 1.0), 0.0)
        return np.where(torque, ff, target)

    def ctrl(i: int) -> np.ndarray:
        return ctrl_of(log.q_des[i], log.qd_des[i], log.ff(i))

    data.ctrl[cadr] = ctrl(0)
    # the delay history holds the commands before the split, as the fit's validation feeds them
    for k, a in enumerate(aid):
        n_hist = int(model.actuator_history[a][0]) if hasattr(model, "actuator_history") else 0
        if n_hist > 0:
            d = int(round(float(model.actuator_delay[a]) / model.opt.timestep))
            before = zip(log.history(d), log.ff_history(d), strict=True)
            steps = [ctrl_of(c[0], c[1], f)[k] for c, f in before] + [ctrl(0)[k]]  # physics steps −d … 0
            values = [steps[0]] * max(0, n_hist - len(steps)) + steps[-n_hist:]  # older ones are never read
            times = (data.time - model.opt.timestep * np.arange(n_hist)[::-1]).reshape(-1, 1)
            mujoco.mj_initCtrlHistory(model, data, a, times, np.array(values, float).reshape(-1, 1))
    out = np.empty_like(log.q)
    out[0] = log.q[0]
    # a position-PD joint's feed-forward effort as qfrc_applied, held back by the actuators' delay as the fit's
    # delay line holds it (a torque-driven joint's goes through its actuator's ctrl)
    ff_all, h = log.ff_all() * ~torque, log.q_des_before.shape[0]
    lag = (
        int(round(float(model.actuator_delay[aid[0]]) / model.opt.timestep))
        if hasattr(model, "actuator_delay")
        else 0
    )
    for i in range(log.q.shape[0] - 1):
        data.ctrl[cadr] = ctrl(i)
        for s in range(log.decimation):
            if log.tau_ff is not None:
                data.qfrc_applied[vadr] = ff_all[max(0, h + (i * log.decimation + s - lag) // log.decimation)]
            mujoco.mj_step(model, data)
        out[i + 1] = data.qpos[qadr] + bias
    return out


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    """Position RMSE between two traces [rad]."""
    return float(np.sqrt(np.mean((a - b) ** 2)))


def compare(log: ReplayLog, ours_q: np.ndarray, run: np.ndarray, seconds: float) -> dict:
    """The replay's RMSE against the log and against our rollout, per joint and pooled; within 10 % or not."""
    r, o = rmse(run, log.q), rmse(ours_q, log.q)
    rel = abs(r - o) / o if o > 0 else (0.0 if r == 0 else math.inf)
    return {
        "status": "ok",
        "rmse_replay": r,
        "rmse_ours": o,
        "relative_difference": rel,
        "rmse_replay_vs_ours": rmse(run, ours_q),
        "within_tolerance": bool(np.isfinite(r) and rel <= TOLERANCE),
        "per_joint_rmse_replay": {j: rmse(run[:, k], log.q[:, k]) for k, j in enumerate(log.joints)},
        "wall_s": float(seconds),
    }


def timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# --- each consumer's replay of its file, as the export registry names them (formats.RobotWriter.replay) ---


def replay_isaaclab(
    text: str, robot, lg: ReplayLog, bias: np.ndarray, models: dict[str, ChosenModel]
) -> np.ndarray:
    """isaaclab.py's actuators built with the real classes and stepped on the whole robot."""
    from .robot_isaaclab import build_cfgs

    return isaaclab_run(build_cfgs(text, "isaaclab.py"), robot, lg, bias)


def replay_newton(
    text: str, robot, lg: ReplayLog, bias: np.ndarray, models: dict[str, ChosenModel]
) -> np.ndarray:
    """newton.usda imported by Newton's add_usd, its NewtonActuators stepped."""
    from .robot_usd import import_stage
    from .validate import open_stage

    return newton_run(import_stage(open_stage(text)), lg, bias)


def replay_mujoco(
    text: str, robot, lg: ReplayLog, bias: np.ndarray, models: dict[str, ChosenModel]
) -> np.ndarray:
    """mjcf.xml stepped by MuJoCo, its meshes read beside the robot's file; a model MuJoCo cannot load fails
    this replay alone."""
    from .robot_mjcf import actuator_names, replay_model

    return mujoco_run(replay_model(text, robot.path.parent.resolve()), lg, bias, models, actuator_names(text))
