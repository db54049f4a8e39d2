"""Replay each export through its consumer on the validation segments, next to our own rollout.

- Isaac Lab cfgs (isaaclab.py / .json / .yaml): the real Isaac Lab actuator classes, built from the export,
  inside a small numpy pendulum written here from docs/consumer-semantics.md §F, independently of the kernel.
- Newton USD: the exported stage through Newton 1.8 `ModelBuilder.add_usd` and
  `SolverMuJoCo(use_mujoco_cpu=True)`, its NewtonActuators stepped once per physics step (§E); every segment
  in one model, a copy of the stage each.
- MJCF: the exported model through `mujoco`.

Every replay reports the position RMSE against the log, per segment and pooled, next to the RMSE of our
own rollout (`fitting.fit.simulate`) of the same model on the same segments. A consumer that is not
installed gives status "skipped" with a note; a replay that fails gives status "failed" with the reason.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..datasets.recording import JointInfo, Recording, Segment
from ..fitting.result import FitResult, ResultLike, as_result
from ..models.families import NET_FAMILIES
from .formats import CONSUMERS  # each format's consumer, from its registration
from .selection import ChosenModel, ExportError, choose, joint_family

TOLERANCE = 0.10  # replay RMSE within 10 % of our rollout's
RMSE_FLOOR = 2e-3  # of the motion range: MuJoCo's soft frictionloss vs our hard stop (docs/models.md)


def _segments(result: FitResult, rec: Recording, segments: list[str] | None) -> list[Segment]:
    names = segments if segments is not None else (result.split.validation or [s.name for s in rec.segments])
    return [s for s in rec.segments if s.name in set(names)]


Point = dict[str, float] | None  # an operating point to export at (`--at`); None: the fit's reference


def _at_operating_point(
    result: FitResult, rec: Recording, segs: list[Segment]
) -> tuple[list[tuple[Point, list[Segment]]], str | None]:
    """The replayed segments grouped by the operating point each was logged at (kp, kd, vin of a fit of
    device-unit gains or logged supply voltages): each group is replayed through an export at its own point,
    as `--at` writes it, torque-off stretches included. A segment whose joints run at different points, or
    (away from the reference) on another load, is left out with the reason."""
    from ..models.rollout import operating_points

    refs = result.assumptions.operating_point or {}
    if not refs:
        return [(None, segs)], None
    ops = {j: operating_points(rec, j) for j in refs}
    groups: dict[tuple, tuple[Point, list[Segment]]] = {}
    left: list[str] = []
    for s in segs:
        points = [_logged_point(ops[j], s) for j in refs]
        reference = all(ops[j].multipliers(s) == (1.0, 1.0, 1.0, 1.0) for j in refs)
        other_load = any(_seg_load(rec, s, j) != rec.joints[rec.joint_index(j)] for j in refs)
        if any(p != points[0] for p in points) or (other_load and not reference):
            left.append(s.name)
            continue
        key = tuple(sorted(points[0].items()))
        groups.setdefault(key, (None if reference else points[0], []))[1].append(s)
    note = (
        f"segments {left} left out: their joints run at different operating points, or on another load "
        "away from the fit's reference point, which one export cannot state"
        if left
        else None
    )
    return list(groups.values()), note


def _logged_point(op, seg: Segment) -> dict[str, float]:
    """The operating point a segment was logged at, in `--at` keys (export/operating.py)."""
    point = {}
    if op.units == "device":
        point["kp"] = op.kp.get(seg.name)
        if op.kd_reference:
            point["kd"] = op.kd.get(seg.name)
    if op.vin_reference:
        point["vin"] = op.vin.get(seg.name)
    return {k: float(v) for k, v in point.items() if v is not None}


def _rmse(sim: np.ndarray, meas: np.ndarray) -> float:
    return float(np.sqrt(np.mean((sim[1:] - meas[1:]) ** 2))) if sim.size > 1 else 0.0


def _seg_load(rec: Recording, seg: Segment, joint: str) -> JointInfo:
    """The joint's bench load in this segment (segment metadata may override it)."""
    info = rec.joints[rec.joint_index(joint)]
    over = seg.metadata.get("joints", {}).get(joint, {})
    return replace(info, **{k: v for k, v in over.items() if k in info.__dataclass_fields__ and k != "name"})


def _ext(seg: Segment, joint: str) -> float:
    return float(
        seg.metadata.get("joints", {})
        .get(joint, {})
        .get("external_torque", seg.metadata.get("external_torque", 0.0))
    )


def _ours(result: FitResult, rec: Recording, m: ChosenModel, segs: list[Segment]) -> dict[str, np.ndarray]:
    from ..fitting.fit import simulate

    a = result.assumptions
    sims = simulate(
        rec,
        m.joint,
        m.family.name,
        m.params,
        joint_terms=list(m.family.joint_terms),
        decimation=a.decimation,
        table_positions=m.table_positions,
        effort_mode=a.effort_mode,
    )
    return {s.name: sims[s.name]["q"] for s in segs}


# --- Isaac Lab: the real actuator classes in a numpy §F pendulum ---


def isaaclab_actuators(text: str, fmt: str, python_source: str | None = None) -> dict[str, dict]:
    """The export's cfg objects, {"ACTUATORS": {group: cfg}, "ACTUATORS_BEST"?: {...}}, built by Isaac Lab.

    JSON/YAML groups of our subclasses take their classes from the consumer package
    (actuator_sysid.consumers.isaaclab), as the isaaclab.py export imports them; `python_source` is not needed.
    """
    from isaaclab import actuators as ila

    from ..consumers.isaaclab import CFG_CLASSES

    if fmt == "isaaclab.py":
        from .safe_source import load_source

        ns = load_source(text, "isaaclab.py")  # read as data, never run
        return {k: ns[k] for k in ("ACTUATORS", "ACTUATORS_BEST") if k in ns}
    import json

    import yaml

    doc = json.loads(text) if fmt == "isaaclab.json" else yaml.safe_load(text)
    out: dict[str, dict] = {}
    for key, name in (("actuators", "ACTUATORS"), ("actuators_best", "ACTUATORS_BEST")):
        if key not in doc:
            continue
        out[name] = {}
        for g, spec in doc[key].items():
            cls_name = str(spec["class_type"])
            cls = (getattr(ila, cls_name, None) if cls_name.endswith("Cfg") else None) or CFG_CLASSES.get(
                cls_name
            )
            if not isinstance(cls, type):
                raise ExportError(
                    f"{spec['class_type']} is neither an Isaac Lab class nor the consumer package's"
                )
            out[name][g] = cls(**spec["cfg"])
    return out


def _cfg_for(groups: dict, joint: str):
    import re

    for cfg in groups.values():
        if any(re.fullmatch(e, joint) for e in cfg.joint_names_expr):
            return cfg
    raise ExportError(f"no actuator group of the export matches joint {joint!r}")


def _value(cfg, name: str, default: float = 0.0) -> float:
    v = getattr(cfg, name, None)
    return default if v is None else float(v)


def isaaclab_segment(
    cfg,
    info: JointInfo,
    seg: Segment,
    j: int,
    dt: float,
    sub: int,
    offset: float = 0.0,
    ext: float = 0.0,
    joint: str = "joint",
    give_external: bool = True,
) -> np.ndarray:
    """Run one segment: the Isaac Lab actuator once per physics step inside the §F update; measured-frame q.
    A friction budget's actuator gets the external torque each step (`give_external`), else it estimates it."""
    import torch
    from isaaclab.utils.types import ArticulationActions

    act = cfg.class_type(cfg, joint_names=[joint], joint_ids=slice(None), num_envs=1, device="cpu")
    implicit = bool(getattr(act, "is_implicit_model", False))
    given_external = give_external and hasattr(act, "set_external_effort")
    switch = hasattr(act, "set_torque_enabled")  # a friction budget keeps its friction with the torque off
    act.reset(torch.arange(1))
    inertia = info.load_inertia + _value(cfg, "armature")
    mgl = info.gravity_coeff
    fric, visc = _value(cfg, "friction"), _value(cfg, "viscous_friction")
    dfric = getattr(cfg, "dynamic_friction", None)
    kp, kd = _value(cfg, "stiffness"), _value(cfg, "damping")
    lim = _value(cfg, "joint_effort_limit", _value(cfg, "effort_limit_sim", math.inf))
    q, qd = float(seg.q[0, j]) - offset, float(seg.qd[0, j])
    n = seg.n
    out = np.empty(n)
    driven = seg.driven(j)  # torque off: the actuator is stepped (its delay runs on) but applies nothing
    t = lambda x: torch.tensor([[float(x)]], dtype=torch.float32)  # noqa: E731
    for k in range(n):
        out[k] = q + offset
        if k == n - 1:
            break
        if switch:
            act.set_torque_enabled(bool(driven[k]))
        for _ in range(sub):
            q_des, qd_des, ff = seg.q_des[k, j], seg.qd_des[k, j], seg.tau_ff[k, j]
            jt = inertia + dt * visc
            if implicit:  # the solver's own PD, its Kd integrated implicitly (§A.10, docs/models.md)
                tau = min(max(kp * (q_des - q) + kd * (qd_des - qd) + ff, -lim), lim)
                jt += dt * kd if driven[k] else 0.0
            else:
                action = ArticulationActions(
                    joint_positions=t(q_des), joint_velocities=t(qd_des), joint_efforts=t(ff)
                )
                if given_external:  # BAM's friction budget: the bench's external torque, as a user gives it
                    act.set_external_effort(t(ext - mgl * math.sin(q)))
                tau = float(act.compute(action, t(q), t(qd)).joint_efforts[0, 0])
            tau = tau if driven[k] or switch else 0.0
            force = tau - mgl * math.sin(q) + ext - visc * qd
            stop = jt / dt * qd + force
            if dfric is not None and float(dfric) != fric:
                f = -stop if abs(stop) <= fric else -math.copysign(float(dfric), stop)  # stick, then slide
            else:
                f = -math.copysign(min(abs(stop), fric), stop) if stop != 0 else 0.0
            qd = qd + dt * (force + f) / jt
            q = q + dt * qd
    return out


def _replay_isaaclab(result, rec, fmt, text, segs, dt, sub, families) -> dict:
    from .isaaclab import actuator_cfgs

    fam_map = {j: families for j in result.joints} if isinstance(families, str) else families
    built = isaaclab_actuators(text, fmt)
    joints = {}
    for key, groups in built.items():
        specs = (
            actuator_cfgs(result, fam_map, custom=bool(fam_map), rec=rec)
            if key == "ACTUATORS"
            else actuator_cfgs(result, custom=True, rec=rec)
        )
        for joint in result.joints:
            cfg = _cfg_for(groups, joint)
            fam_name = _family_of(specs, joint)
            if fam_name in NET_FAMILIES:  # an ActuatorNetMLP / ActuatorNetLSTM loading the checkpoint
                joints[joint if key == "ACTUATORS" else f"{joint} (best)"] = _replay_net(
                    result, rec, cfg, joint, fam_name, segs, dt, sub
                )
                continue
            family = joint_family(result, joint, fam_name)
            fit = result.model(joint, fam_name)
            m = ChosenModel(joint, family, dict(fit.params), fit.table_positions)
            offset = float(getattr(cfg, "encoder_offset", 0.0) or 0.0)
            j = rec.joint_index(joint)
            runs = {}
            for s in segs:
                load = _seg_load(rec, s, joint)
                seg_cfg = cfg if load == rec.joints[j] else _for_load(cfg, load)
                runs[s.name] = isaaclab_segment(seg_cfg, load, s, j, dt, sub, offset, _ext(s, joint), joint)
            name = joint if key == "ACTUATORS" else f"{joint} (best)"
            joints[name] = _compare(result, rec, m, segs, runs)
            if warned := _warned(specs, joint):  # terms the cfg only approximates, stated in its notes
                joints[name]["approximates"] = warned
    return joints


def _warned(specs: dict[str, dict], joint: str) -> list[str]:
    """The terms a joint's cfg states it does not carry (its notes' warnings: a goal slew Isaac Lab's own classes
    cannot run, say): the replay of such a cfg strays from our rollout by design."""
    return sorted({str(n[0]) for n in _group_of(specs, joint).get("notes") or [] if n[1] == "warning"})


def _replay_net(result: FitResult, rec: Recording, cfg, joint: str, kind: str, segs, dt, sub) -> dict:
    """A net export through Isaac Lab's own ActuatorNetMLP / ActuatorNetLSTM, the checkpoint the cfg names
    written from the fit: a net trained on measured torque is fed the logged states (open loop) and its
    torque compared with ours and the log's; one trained in the loop runs closed loop in the §F pendulum."""
    import tempfile
    from pathlib import Path

    from ..fitting.training import joint_data, network_from_result, simulate_segments
    from .checkpoints import as_net, torchscript_bytes

    net = as_net(result.model(joint, kind))
    j = rec.joint_index(joint)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(str(cfg.network_file)).name
        path.write_bytes(torchscript_bytes(net))
        cfg = cfg.replace(network_file=str(path))
        if not net.torque_supervised:
            runs = {
                s.name: isaaclab_segment(
                    cfg, _seg_load(rec, s, joint), s, j, dt, sub, 0.0, _ext(s, joint), joint
                )
                for s in segs
            }
            return _compare_runs(kind, segs, j, runs, _ours_net(rec, joint, net, segs, sub), "q")
        runs = {s.name: _isaaclab_open_loop(cfg, s, j, sub, joint) for s in segs}
    spec, module = network_from_result(net)
    data = joint_data(rec, joint, sub, "measured", spec.kp_ref).subset(
        [i for i, s in enumerate(rec.segments) if s.name in {x.name for x in segs}]
    )
    ours = {
        n: sim["applied"]
        for n, sim in zip(data.names, simulate_segments(spec, module, data, sub, True), strict=True)
    }
    return _compare_runs(kind, segs, j, runs, ours, "tau")


def _ours_net(rec: Recording, joint: str, net, segs, sub: int) -> dict[str, np.ndarray]:
    from ..fitting.training import simulate_net

    sims = simulate_net(rec, joint, net, decimation=sub)
    return {s.name: sims[s.name]["q"] for s in segs}


def _isaaclab_open_loop(cfg, seg: Segment, j: int, sub: int, joint: str) -> np.ndarray:
    """The Isaac Lab actuator fed one segment's logged states: its applied effort at each sample's first
    physics step (the command and state held over the sample's `sub` steps), from a reset."""
    import torch
    from isaaclab.utils.types import ArticulationActions

    from ..fitting.net_inputs import logged_gain

    if "inputs" in cfg.__dataclass_fields__:  # a net that reads the drive's commands: this segment's gains
        gains = {"stiffness": logged_gain(seg, "kp", joint), "damping": logged_gain(seg, "kd", joint)}
        cfg = cfg.replace(**{k: v or 0.0 for k, v in gains.items()})
    act = cfg.class_type(cfg, joint_names=[joint], joint_ids=slice(None), num_envs=1, device="cpu")
    act.reset(torch.arange(1))
    t = lambda x: torch.tensor([[float(x)]], dtype=torch.float32)  # noqa: E731
    out = np.empty(seg.n)
    for k in range(seg.n):
        action = ArticulationActions(  # the articulation's targets: position, velocity and effort (τ_ff)
            joint_positions=t(seg.q_des[k, j]),
            joint_velocities=t(seg.qd_des[k, j]),
            joint_efforts=t(seg.tau_ff[k, j]),
        )
        for r in range(sub):
            act.compute(action, t(seg.q[k, j]), t(seg.qd[k, j]))
            if r == 0:
                out[k] = float(act.applied_effort[0, 0])
    return out


def _compare_runs(
    family: str,
    segs: list[Segment],
    j: int,
    runs: dict[str, np.ndarray],
    ours: dict[str, np.ndarray],
    what: str,
) -> dict:
    """_compare for a net: the replay's and our model's RMSE against the log's q (closed loop) or tau (open
    loop, metric torque_rmse in N·m), within TOLERANCE of ours or the floor of the logged range."""
    rows, se_r, se_o, n, span = [], 0.0, 0.0, 0.0, 0.0
    for s in segs:
        logged = s.q if what == "q" else s.tau
        assert logged is not None  # a torque replay runs only for a net trained on every segment's torque
        meas = logged[:, j]
        r, o = _rmse(runs[s.name], meas), _rmse(ours[s.name], meas)
        rows.append(
            {
                "segment": s.name,
                "rmse_replay": r,
                "rmse_ours": o,
                "rmse_replay_vs_ours": _rmse(runs[s.name], ours[s.name]),
            }
        )
        se_r, se_o, n = se_r + r * r * (s.n - 1), se_o + o * o * (s.n - 1), n + s.n - 1
        span = max(span, float(np.ptp(meas)))
    rr, ro = math.sqrt(se_r / max(n, 1)), math.sqrt(se_o / max(n, 1))
    return {
        "family": family,
        "metric": "position_rmse" if what == "q" else "torque_rmse",
        "rmse_replay": rr,
        "rmse_ours": ro,
        "relative_difference": abs(rr - ro) / ro if ro > 0 else (0.0 if rr == 0 else math.inf),
        "within_tolerance": bool(abs(rr - ro) <= max(TOLERANCE * ro, RMSE_FLOOR * span)),
        "segments": rows,
    }


def _for_load(cfg, info: JointInfo):
    """The cfg as a user would set it for a segment whose load is not the bench's: our BAM-friction actuator
    stops the joint with joint_inertia, the bench load's (plus armature) in the export."""
    if getattr(cfg, "joint_inertia", None) is None:
        return cfg
    return cfg.replace(joint_inertia=info.load_inertia + _value(cfg, "armature"))


def _group_of(specs: dict[str, dict], joint: str) -> dict:
    """The cfg group whose joint names hold a joint."""
    import re

    for g in specs.values():
        if any(re.fullmatch(e, joint) for e in g["cfg"]["joint_names_expr"]):
            return g
    raise ExportError(f"joint {joint!r} is in no group")


def _family_of(specs: dict[str, dict], joint: str) -> str:
    """Which fitted family the export wrote for a joint (the cfg groups name it)."""
    return _group_of(specs, joint)["family"]


# --- Newton ---


def _joint_q(state) -> np.ndarray:
    """A Newton state's joint coordinates, which a model with joints always allocates."""
    assert state.joint_q is not None
    return state.joint_q.numpy()


def newton_segment(
    stage, seg: Segment, joints: list[str], rec: Recording, dt: float, sub: int, offsets: dict[str, float]
) -> dict[str, np.ndarray]:
    """Run one segment of every joint in the stage through Newton; measured-frame q per joint."""
    return newton_segments([stage], [seg], joints, rec, dt, sub, offsets)[0]


def _parts_model(stages: list):
    """One finalized Newton model holding a copy of each stage (Newton's own `add_usd`), labelled under `p{i}/`."""
    import newton

    from ..consumers import newton as consumers_newton

    consumers_newton.register()
    builder = newton.ModelBuilder()
    for i, stage in enumerate(stages):
        part = newton.ModelBuilder()
        part.add_usd(stage)
        builder.add_builder(part, label_prefix=f"p{i}")
    return builder.finalize(device="cpu")


def _part_indices(model, joints: list[str], parts: int) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """Per part (its labels under `p{i}/`), each joint's DoF and coordinate index in a finalized model, joints
    matched by prim name."""
    from .newton_usd import prim_name

    # a model with joints always allocates these (Newton types them optional)
    assert model.joint_qd_start is not None and model.joint_q_start is not None
    labels = list(model.joint_label)
    qd_start, q_start = model.joint_qd_start.numpy(), model.joint_q_start.numpy()
    dof: list[dict[str, int]] = [{} for _ in range(parts)]
    coord: list[dict[str, int]] = [{} for _ in range(parts)]
    for w in range(parts):
        for joint in joints:
            idx = [
                i
                for i, lab in enumerate(labels)
                if lab.startswith(f"p{w}/") and lab.rsplit("/", 1)[-1] == prim_name(joint)
            ]
            if not idx:
                raise ExportError(f"joint {joint!r} not found in the Newton model")
            dof[w][joint], coord[w][joint] = int(qd_start[idx[0]]), int(q_start[idx[0]])
    return dof, coord


def newton_segments(
    stages: list,
    segs: list[Segment],
    joints: list[str],
    rec: Recording,
    dt: float,
    sub: int,
    offsets: dict[str, float],
) -> list[dict[str, np.ndarray]]:
    """Run segments side by side through Newton, segment i on a copy of stages[i] (labels under `p{i}/`), all
    in one model stepped by one solver: SolverMuJoCo's C backend steps one world, and with contacts off the
    copies exert nothing on each other. Measured-frame q per segment and joint. A copy whose segment has ended
    holds its last targets until the longest ends. A friction budget's clamp (actuator_sysid.consumers) gets the
    joints' external torque every step, as its user gives it."""
    import newton

    from ..consumers import newton as consumers_newton

    model = _parts_model(stages)
    dof, coord = _part_indices(model, joints, len(segs))
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True)
    s0, s1 = model.state(), model.state()
    control = model.control()
    assert s0.joint_q is not None and s0.joint_qd is not None and control.joint_f is not None
    assert (
        control.joint_target_q is not None
        and control.joint_target_qd is not None
        and control.joint_act is not None
    )
    jq, jqd = s0.joint_q.numpy(), s0.joint_qd.numpy()
    cols = {joint: rec.joint_index(joint) for joint in joints}
    ext = np.zeros(model.joint_dof_count, np.float32)
    for w, seg in enumerate(segs):
        for joint, j in cols.items():
            jq[coord[w][joint]] = seg.q[0, j] - offsets.get(joint, 0.0)
            jqd[dof[w][joint]] = seg.qd[0, j]
            ext[dof[w][joint]] = _ext(seg, joint)
    s0.joint_q.assign(jq)
    s0.joint_qd.assign(jqd)
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    acts = list(model.actuators)
    budgets = bool(consumers_newton.budget_clamps(model))
    a_states = [(a.state(), a.state()) for a in acts]
    tq, tqd, ff = (control.joint_target_q.numpy(), control.joint_target_qd.numpy(), control.joint_act.numpy())
    out = [{joint: np.empty(seg.n) for joint in joints} for seg in segs]
    driven = [{jn: seg.driven(j) for jn, j in cols.items()} for seg in segs]
    steps = max(seg.n for seg in segs)
    # torque off, per sample, over every world still running its segment
    off = [
        [dof[w][jn] for w, seg in enumerate(segs) if k < seg.n for jn in cols if not driven[w][jn][k]]
        for k in range(steps)
    ]
    switched = set(consumers_newton.budget_dofs(model))  # a budget clamp zeroes its motor, keeps its friction
    enabled = np.ones(model.joint_dof_count, bool)
    for k in range(steps):
        q_now = _joint_q(s0)
        for w, seg in enumerate(segs):
            if k < seg.n:
                for joint in joints:
                    out[w][joint][k] = q_now[coord[w][joint]] + offsets.get(joint, 0.0)
        if k == steps - 1:
            break
        # the stage's joint is the true one: its target is the log's less the encoder offset
        for w, seg in enumerate(segs):
            if k < seg.n - 1:
                for joint, j in cols.items():
                    tq[dof[w][joint]], tqd[dof[w][joint]], ff[dof[w][joint]] = (
                        seg.q_des[k, j] - offsets.get(joint, 0.0),
                        seg.qd_des[k, j],
                        seg.tau_ff[k, j],
                    )
        control.joint_target_q.assign(tq)
        control.joint_target_qd.assign(tqd)
        control.joint_act.assign(ff)
        if switched:
            enabled[:] = True
            enabled[off[k]] = False
            consumers_newton.set_torque_enabled(model, enabled)
        taken = [d for d in off[k] if d not in switched]
        for _ in range(sub):
            control.joint_f.assign(ext)  # zeroed (plus any constant external torque) before the actuators add
            if budgets:  # τ_e: the constant external torque minus gravity and Coriolis at this state
                ext_now = consumers_newton.external_effort(model, s0, control.joint_f)
                consumers_newton.set_external_effort(model, ext_now)
            for i, a in enumerate(acts):
                cur, nxt = a_states[i]
                a.step(s0, control, cur, nxt, dt=dt)
                a_states[i] = (nxt, cur)
            if taken:  # the actuators stepped (their delays run on), what they added is taken back
                f = control.joint_f.numpy()
                f[taken] = ext[taken]
                control.joint_f.assign(f)
            solver.step(s0, s1, control, None, dt)
            s0, s1 = s1, s0
    return out


def _replay_newton(result, rec, text, segs, dt, sub, families) -> dict:
    from pxr import Sdf, Usd

    from .newton_usd import build_stage, expresses

    models = choose(result, families, expresses)
    joints = [m.joint for m in models]
    offsets = {m.joint: m.value("encoder_offset") or 0.0 for m in models}
    stages, exported = [], None
    for seg in segs:
        loads = {j: _seg_load(rec, seg, j) for j in joints}
        if all(loads[j] == rec.joints[rec.joint_index(j)] for j in joints) and text:
            if exported is None:  # the export itself, opened once: every segment at its load reads it
                layer = Sdf.Layer.CreateAnonymous(".usda")
                layer.ImportFromString(text)
                exported = Usd.Stage.Open(layer)
            stages.append(exported)
        else:  # this segment's bench carries another load: the same export for that load
            stage, _ = build_stage(
                result,
                families=families,
                loads={j: {k: getattr(v, k) for k in v.__dataclass_fields__} for j, v in loads.items()},
            )
            stages.append(stage)
    done = newton_segments(stages, segs, joints, rec, dt, sub, offsets)  # every segment in one model
    runs = {j: {seg.name: q[j] for seg, q in zip(segs, done, strict=True)} for j in joints}
    return {m.joint: _compare(result, rec, m, segs, runs[m.joint]) for m in models}


# --- MuJoCo ---


def mujoco_segment(
    xml: str, seg: Segment, joints: list[str], rec: Recording, models: dict[str, ChosenModel], sub: int
) -> dict[str, np.ndarray]:
    """Run one segment through the MJCF model; ctrl as mjcf.py states it; measured-frame q."""
    import mujoco

    from ..models.families import is_mujoco_dcmotor
    from ..models.mujoco_dcmotor import slots
    from .newton_usd import prim_name

    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    cols = {joint: rec.joint_index(joint) for joint in joints}
    jid = {j: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, prim_name(j)) for j in joints}
    aid = {
        j: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, prim_name(j) + "_actuator") for j in joints
    }
    offsets = {j: models[j].value("encoder_offset") or 0.0 for j in joints}
    for j, c in cols.items():
        data.qpos[model.jnt_qposadr[jid[j]]] = seg.q[0, c] - offsets[j]
        data.qvel[model.jnt_dofadr[jid[j]]] = seg.qd[0, c]
        where = slots(model, aid[j]) if model.actuator_dyntype[aid[j]] == mujoco.mjtDyn.mjDYN_DCMOTOR else {}
        if "slew" in where:  # the file's SLEW STATE: where the fit starts a <dcmotor>'s slewed goal
            first = seg.q_des[0, c] if is_mujoco_dcmotor(models[j].family) else seg.q[0, c]
            data.act[where["slew"]] = first

    ctrladr, ctrlnum = model.actuator_ctrladr, model.actuator_ctrlnum  # a pid actuator takes 2 controls

    def ctrl(j: str, k: int) -> list[float]:
        """The actuator's controls at sample k: the virtual target (mjcf.py), or a pid's [q_des, qd_des']."""
        c, m = cols[j], models[j]
        kp, kd = m.value("stiffness") or 0.0, m.value("damping") or 0.0
        if (
            ctrlnum[aid[j]] == 2
        ):  # kp·(ctrl0 − q) + kd·(ctrl1 − qd) + ki·∫(ctrl0 − q): the feed-forward via ctrl1
            ff = seg.tau_ff[k, c]
            return [
                float(seg.q_des[k, c] + (ff / kp if kd <= 0 < kp else 0.0)),
                float(seg.qd_des[k, c] + (ff / kd if kd > 0 else 0.0)),
            ]
        return [float(seg.q_des[k, c] + ((kd * seg.qd_des[k, c] + seg.tau_ff[k, c]) / kp if kp > 0 else 0.0))]

    def set_ctrl(j: str, k: int) -> list[float]:
        u = ctrl(j, k)
        a = int(ctrladr[aid[j]])
        data.ctrl[a : a + len(u)] = u
        return u

    for j in joints:  # the history starts full of the first command, as Isaac Lab's and Newton's delays do
        u = set_ctrl(j, 0)
        if model.actuator_history[aid[j]][0] > 0:
            n_hist = int(model.actuator_history[aid[j]][0])
            times = (data.time - model.opt.timestep * np.arange(n_hist)[::-1]).reshape(-1, 1)
            mujoco.mj_initCtrlHistory(model, data, aid[j], times, np.tile(np.array(u, float), (n_hist, 1)))
    out = {j: np.empty(seg.n) for j in joints}
    gear = {
        j: {a: float(model.actuator_gear[a, 0]) for a in np.flatnonzero(model.actuator_trnid[:, 0] == jid[j])}
        for j in joints
    }
    driven = {j: seg.driven(c) for j, c in cols.items()}
    for k in range(seg.n):
        for j in joints:
            out[j][k] = data.qpos[model.jnt_qposadr[jid[j]]] + offsets[j]
            data.qfrc_applied[model.jnt_dofadr[jid[j]]] = _ext(seg, j)
        if k == seg.n - 1:
            break
        for j in joints:
            set_ctrl(j, k)
            for a, g in gear[j].items():  # torque off: no actuator of the joint acts (drive, back-EMF)
                model.actuator_gear[a, 0] = g if driven[j][k] else 0.0
        for _ in range(sub):
            mujoco.mj_step(model, data)
    return out


def _replay_mujoco(result, rec, text, segs, sub, families) -> dict:
    from .mjcf import build_mjcf, expresses

    models = {m.joint: m for m in choose(result, families, expresses)}
    joints = list(models)
    runs: dict[str, dict[str, np.ndarray]] = {j: {} for j in joints}
    for seg in segs:
        loads = {j: _seg_load(rec, seg, j) for j in joints}
        xml = text
        if not text or not all(loads[j] == rec.joints[rec.joint_index(j)] for j in joints):
            xml, _ = build_mjcf(
                result,
                families=families,
                loads={j: {k: getattr(v, k) for k in v.__dataclass_fields__} for j, v in loads.items()},
            )
        for joint, q in mujoco_segment(xml, seg, joints, rec, models, sub).items():
            runs[joint][seg.name] = q
    return {j: _compare(result, rec, models[j], segs, runs[j]) for j in joints}


# --- the comparison ---


def _compare(
    result: FitResult, rec: Recording, m: ChosenModel, segs: list[Segment], runs: dict[str, np.ndarray]
) -> dict:
    ours = _ours(result, rec, m, segs)
    out = _compare_runs(m.family.name, segs, rec.joint_index(m.joint), runs, ours, "q")
    del out["metric"]  # a parametric model's replay is judged by position alone
    return out


def _isaaclab_netless(result: FitResult, families: dict[str, str] | str | None) -> list[str]:
    """Joints whose Isaac Lab export is a net Isaac Lab cannot run: a best (or chosen) GRU with no MLP or LSTM."""
    from .checkpoints import isaaclab_checkpoint

    out = []
    for joint, jr in result.joints.items():
        named = families if isinstance(families, str) else (families or {}).get(joint)
        if (jr.nets_only() or (named or jr.best_model) in NET_FAMILIES) and isaaclab_checkpoint(
            result, joint
        ) is None:
            out.append(joint)
    return out


def replay(
    stored: ResultLike,
    rec: Recording,
    fmt: str,
    *,
    text: str,
    families: dict[str, str] | str | None = None,
    segments: list[str] | None = None,
) -> dict:
    """Replay one export format through its consumer; RMSE next to our rollout's, per joint.

    `text` is the rendered export (export.replay renders it when the caller has none). Segments default to
    the validation split.
    """
    result = as_result(stored)
    if fmt not in CONSUMERS:
        return {"format": fmt, "status": "skipped", "note": f"no consumer replay for {fmt}"}
    consumer = CONSUMERS[fmt]
    module = {"isaaclab": "isaaclab.actuators", "newton": "newton", "mujoco": "mujoco"}[consumer]
    try:
        __import__(module)
        if consumer == "newton":
            __import__("newton_usd_schemas")
    except ImportError as e:
        return {
            "format": fmt,
            "consumer": consumer,
            "status": "skipped",
            "note": f"consumer not installed ({e.name or module}): replay skipped",
        }
    gru_only = _isaaclab_netless(result, families) if consumer == "isaaclab" else []
    if gru_only:
        return {
            "format": fmt,
            "consumer": consumer,
            "status": "skipped",
            "note": f"joints {gru_only} are GRU networks with no MLP or LSTM beside them: Isaac Lab has no GRU "
            "actuator class, so the export holds no actuator for them (Newton runs newton.onnx)",
        }
    if consumer == "newton":
        from .newton_usd import NetChoice, choose_models

        try:
            nets = [m.joint for m in choose_models(result, families)[0] if isinstance(m, NetChoice)]
        except ExportError:
            nets = []
        if nets:
            return {
                "format": fmt,
                "consumer": consumer,
                "status": "skipped",
                "note": f"joints {nets} are actuator networks: their NewtonActuator loads the checkpoint from "
                "beside the .usda, and the replay steps parametric actuators only",
            }
    groups, note = _at_operating_point(result, rec, _segments(result, rec, segments))
    segs = [x for _, g in groups for x in g]
    if not segs:
        return {
            "format": fmt,
            "consumer": consumer,
            "status": "skipped",
            "note": note or "no segment to replay",
        }
    a = result.assumptions
    sub = int(a.decimation)
    dt = float(a.physics_dt if a.has("physics_dt") else segs[0].dt / sub)
    base = {"format": fmt, "consumer": consumer, "segments": [s.name for s in segs], "tolerance": TOLERANCE}
    base |= {"note": note} if note else {}
    if any(at is not None for at, _ in groups):
        base["operating_points"] = [
            {"at": at or "reference", "segments": [x.name for x in g]} for at, g in groups
        ]
    try:
        texts = [_text_at(result, rec, fmt, text, at, families) for at, _ in groups]
        parts = [
            _replay_group(result, rec, fmt, consumer, t, g, dt, sub, families)
            for t, (_, g) in zip(texts, groups, strict=True)
        ]
        joints = _apart(_merged(parts, segs))
    except Exception as e:  # a replay must never take the export down with it
        return {**base, "status": "failed", "note": f"{type(e).__name__}: {e}"}
    return {
        **base,
        "status": "ok",
        "joints": joints,
        "within_tolerance": all(v["within_tolerance"] or v.get("shown_apart") for v in joints.values()),
    }


def _apart(joints: dict[str, dict]) -> dict[str, dict]:
    """Mark `shown_apart` a row that strays while its cfg states the terms it does not carry, when the joint's
    ACTUATORS_BEST row runs the model within tolerance: an approximation said on the export, not a failure."""
    for name, row in joints.items():
        best = joints.get(f"{name} (best)")
        if not row["within_tolerance"] and row.get("approximates") and best and best["within_tolerance"]:
            row["shown_apart"] = True
    return joints


def _text_at(result: FitResult, rec: Recording, fmt: str, text: str, at: Point, families) -> str:
    """The export as replayed at one operating point: the given text at the fit's reference, else the same
    format rendered at `at` from the same prepared model (as `export --at` writes it, less its comments)."""
    if at is None:
        return text
    from .formats import RenderArgs, get_format
    from .operating import at_operating_point
    from .selection import prepare

    spec = get_format(fmt)
    assert spec.render is not None  # every replayed format is a text format
    return spec.render(RenderArgs(prepare(at_operating_point(result, at)[0], rec=rec), rec, families))


def _replay_group(result, rec, fmt, consumer, text, segs, dt, sub, families) -> dict:
    """One consumer's replay of segments at one operating point: the consumer steps `text` (the export at
    that point) while our rollout runs the fit as stated (it scales each segment to its own point)."""
    if consumer == "isaaclab":
        return _replay_isaaclab(result, rec, fmt, text, segs, dt, sub, families)
    if consumer == "newton":
        return _replay_newton(result, rec, text, segs, dt, sub, families)
    return _replay_mujoco(result, rec, text, segs, sub, families)


def _merged(parts: list[dict], segs: list[Segment]) -> dict:
    """Per joint, the groups' replays as one: their segment rows together, the RMSEs pooled over them."""
    if len(parts) == 1:
        return parts[0]
    n = {s.name: max(s.n - 1, 0) for s in segs}
    out: dict[str, dict] = {}
    for part in parts:
        for joint, r in part.items():
            if joint not in out:
                out[joint] = {**r, "segments": list(r["segments"])}
                continue
            o = out[joint]
            o["segments"] += r["segments"]
            o["within_tolerance"] = bool(o["within_tolerance"] and r["within_tolerance"])
    for o in out.values():
        w = [n.get(row["segment"], 0) for row in o["segments"]]
        pooled = {
            k: math.sqrt(
                sum(row[k] ** 2 * x for row, x in zip(o["segments"], w, strict=True)) / max(sum(w), 1)
            )
            for k in ("rmse_replay", "rmse_ours")
        }
        o |= pooled
        ro = pooled["rmse_ours"]
        o["relative_difference"] = abs(pooled["rmse_replay"] - ro) / ro if ro > 0 else 0.0
    return out
