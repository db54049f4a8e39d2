"""A known-truth bench for the whole-robot selection: does the configuration chosen on the training part win at
the far end?

Per seed, a log of one Go2 leg hanging in the air (hip, thigh, calf; the shared Go2 MJCF's bodies) is made by
Newton alone (tests/robot_sim.py: Newton's DrivePD, its delay buffer, MuJoCo's C solver) from a plant that holds
what our candidates only approximate: Coulomb friction that changes along each joint's stroke, a command delay
off the fit's physics-step grid (the log simulated at twice the fit's physics rate, an odd delay there), true PD
gains that differ from the logged ones on odd seeds (the same on even seeds), an encoder bias on some seeds, and
encoder noise. The targets are an exponential chirp whose frequency at the log's end is 3 × its value at the end
of training, so the held-out last 30 % (the far end) is faster and higher in frequency than any training sample.

Every candidate configuration of the selection (the product of its gains and bias axes; with --friction, the
friction axis too) is fitted on the training part and replayed over the far end by an independent judge
(MuJoCo position actuators, bench/robot_peer.py, as bench/robot.py replays ours); then
`select_robot_fit` chooses one on the training part alone (its gains and bias figures on the whole training part,
and each inner candidate's error, are in the row). A seed passes when the chosen configuration's far-end error
is within 5 % of the best candidate's. bench/robot_selection_rules.py records more per candidate to judge rules
offline.

With --sweep N the chosen configuration is also fitted at each delay 0..N held (inner and far end), and each
candidate's row states its refit delay and its scan's training error at each delay, for delay rules offline
(bench/robot_selection_rules.py delays).

With --siblings every candidate is fitted again on a sibling log (the same plant and targets, another draw of
the encoder noise) and judged on the first log's far end: an oracle that picks the sibling's best stands for the
best a choice made from one noisy log can do (its count within 5 % is the bench's noise ceiling), and the row
counts the candidates whose delay scan moved.

With --envelope the plant's motors also have a DC envelope (saturation effort, velocity limit; Newton's
ClampingDCMotor) that binds at the far end and hardly in training: a plant no candidate (and no teacher) holds.

Usage: python bench/robot_selection.py [--quick] [--seeds N] [--first-seed K] [--friction] [--envelope] [--sweep N]
       [--siblings] [--out FILE]
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import robot_peer as peer  # noqa: E402
import robot_sim  # noqa: E402  (tests/robot_sim.py: the robot stepped by Newton alone)

from actuator_sysid.datasets.recording import Recording  # noqa: E402
from actuator_sysid.fitting.result import RobotResult  # noqa: E402
from actuator_sysid.fitting.robot import RobotFitOptions  # noqa: E402
from actuator_sysid.fitting.robot_select import (  # noqa: E402
    Candidate,
    candidate_axes,
    configurations,
    fit_candidate,
    inner_fit,
    inner_share,
    select_robot_fit,
    training_part,
)
from actuator_sysid.models.robot import RobotModel, load_robot  # noqa: E402

# the Go2's front-left leg (bodies, joint classes and motor ranges of the shared MJCF), base fixed, no meshes
LEG_XML = """<mujoco model="go2_leg">
  <compiler angle="radian" autolimits="true"/>
  <default>
    <joint axis="0 1 0" damping="0.6" armature="0.01" frictionloss="0.2"/>
    <motor ctrlrange="-23.7 23.7"/>
  </default>
  <worldbody>
    <body name="base" pos="0 0 0.445">
      <inertial pos="0 0 0" mass="6.9" diaginertia="0.1 0.1 0.02"/>
      <body name="FL_hip" pos="0.1934 0.0465 0">
        <inertial pos="-0.0054 0.00194 -0.000105" quat="0.497014 0.499245 0.505462 0.498237" mass="0.678"
                  diaginertia="0.00088403 0.000596003 0.000479967"/>
        <joint name="FL_hip_joint" axis="1 0 0" range="-1.0472 1.0472"/>
        <body name="FL_thigh" pos="0 0.0955 0">
          <inertial pos="-0.00374 -0.0223 -0.0327" quat="0.829533 0.0847635 -0.0200632 0.551623" mass="1.152"
                    diaginertia="0.00594973 0.00584149 0.000878787"/>
          <joint name="FL_thigh_joint" range="-1.5708 3.4907"/>
          <body name="FL_calf" pos="0 0 -0.213">
            <inertial pos="0.00629595 -0.000622121 -0.141417" quat="0.710672 0.00154099 -0.00450087 0.703508"
                      mass="0.241352" diaginertia="0.0014901 0.00146356 5.31397e-05"/>
            <joint name="FL_calf_joint" range="-2.7227 -0.83776"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="FL_hip" joint="FL_hip_joint"/>
    <motor name="FL_thigh" joint="FL_thigh_joint"/>
    <motor name="FL_calf" joint="FL_calf_joint" ctrlrange="-45.43 45.43"/>
  </actuator>
</mujoco>
"""
KP, KD = 20.0, 1.5  # the logged gains (the Go2 log's)
LOG_DT, DECIMATION, SIM_DECIMATION = 0.005, 2, 4  # the log simulated at twice the fit's physics rate
VALIDATION = 0.3  # the far end: the log's last 30 %
FAR_RATIO = 3.0  # chirp frequency at the log's end over its value at the end of training
F_TRAIN_END = 1.2  # Hz, the chirp's frequency where training ends
POSTURE = np.array([0.1, 0.85, -1.6])  # rad, the hanging posture the chirp moves about
AMPLITUDE = np.array([0.2, 0.3, 0.35])  # rad
NOISE = 1e-4  # rad, encoder noise
FRICTION_POWER = 1.0  # the friction's law along the stroke: linear, or its share to this power (robot_sim)
# with --envelope the plant's motors also have a DC envelope (Newton's ClampingDCMotor) that binds at the far end's
# speeds and efforts and hardly in training: saturation effort and velocity limit per joint, drawn by seed
ENVELOPE = False
WITHIN = 0.05  # a seed passes when the chosen far-end error is within this share of the best candidate's


def load_leg(decimation: int = DECIMATION) -> tuple[RobotModel, str]:
    """The leg as the fit loads it, and the judge's MJCF (MuJoCo position actuators at the logged gains, stepped
    `decimation` times a log sample)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "go2_leg.xml"
        path.write_text(LEG_XML)
        return load_robot(path), peer.in_air_xml(path, KP, KD, LOG_DT / decimation)


def say(msg: str) -> None:
    """Progress on stderr (the JSON goes to stdout)."""
    print(f"[bench/robot_selection] {msg}", file=sys.stderr, flush=True)


def plant(seed: int) -> dict:
    """The seed's true plant: joint terms, friction at each joint's upper limit, delay (in the simulator's
    physics steps, odd: off the fit's grid), gains (off the logged ones on odd seeds), encoder bias (on seeds
    whose index mod 3 is not 0)."""
    rng = np.random.default_rng(1000 + seed)
    friction = rng.uniform(0.1, 0.4, 3)
    off_gains = seed % 2 == 1
    return {
        "armature": rng.uniform(0.005, 0.03, 3),
        "damping": rng.uniform(0.2, 0.9, 3),
        "friction": friction,
        "friction_upper": friction * rng.uniform(0.3, 2.5, 3),
        "delay": int(rng.choice([1, 3, 5])),
        "kp": KP * (rng.uniform(0.75, 1.35, 3) if off_gains else np.ones(3)),
        "kd": KD * (rng.uniform(0.6, 1.6, 3) if off_gains else np.ones(3)),
        "bias": rng.uniform(-0.04, 0.04, 3) if seed % 3 else np.zeros(3),
        **(envelope(seed) if ENVELOPE else {}),
    }


def envelope(seed: int) -> dict:
    """The seed's DC envelope (--envelope): saturation effort 3–5.5 N·m and velocity limit 5–9 rad/s per joint
    (the far end asks up to about 4.5 N·m and 4.5 rad/s, training about half), from a draw of its own so the rest
    of the plant is the seed's as without it."""
    rng = np.random.default_rng(2000 + seed)
    return {"saturation_effort": rng.uniform(3.0, 5.5, 3), "velocity_limit": rng.uniform(5.0, 9.0, 3)}


def chirp(samples: int, seed: int) -> np.ndarray:
    """(samples + 1, 3) targets: an exponential chirp per joint, FAR_RATIO × faster at the end than where
    training ends, a random phase per joint."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples + 1) * LOG_DT
    dur = t[-1]
    rate = math.log(FAR_RATIO) / (VALIDATION * dur)  # f(t) = f_end_train · exp(rate (t − t_end_train))
    f0 = F_TRAIN_END * math.exp(-rate * (1.0 - VALIDATION) * dur) * (1.0 + 0.07 * np.arange(3))
    phase = rng.uniform(0, 2 * math.pi, 3)
    arg = 2 * math.pi * f0[None] * (np.exp(rate * t[:, None]) - 1.0) / rate + phase[None]
    return POSTURE[None] + AMPLITUDE[None] * np.sin(arg)


def make_log(
    robot: RobotModel, seed: int, seconds: float, draw: int = 0
) -> tuple[Recording, peer.PeerLog, dict]:
    """The seed's log made by Newton alone, the logged gains stated; the judge's view of it; its truth. `draw`
    picks the encoder noise: another draw is a sibling log of the same plant and targets."""
    truth = plant(seed)
    cmd = chirp(int(round(seconds / LOG_DT)), seed)
    q = _noiseless(robot, cmd, truth) + np.random.default_rng(seed if draw == 0 else [seed, draw]).normal(
        0.0, NOISE, cmd.shape
    )
    qd = np.gradient(q, LOG_DT, axis=0)  # no velocity is logged: both the fit and the judge see this one
    rec = robot_sim.robot_recording(robot, cmd, q, qd, log_dt=LOG_DT, kp=KP, kd=KD)
    log = peer.PeerLog(q, qd, cmd, LOG_DT, DECIMATION, list(robot.joint_names))
    shown = {k: np.round(v, 4).tolist() if isinstance(v, np.ndarray) else v for k, v in truth.items()}
    shown["delay_fit_steps"] = truth["delay"] * DECIMATION / SIM_DECIMATION
    return rec, log, shown


# the last noiseless log made: a sibling (another noise draw) asks for it again, and Newton's stepping is most of
# a log's cost; keyed by everything the simulation reads, the robot by identity
_LAST: list = []


def _noiseless(robot: RobotModel, cmd: np.ndarray, truth: dict) -> np.ndarray:
    """The seed's true angles plus bias (T, 3) as Newton steps them, before the encoder noise; made once per
    plant and targets."""
    key = (
        cmd.tobytes(),
        tuple((k, np.asarray(v).tobytes()) for k, v in sorted(truth.items())),
        FRICTION_POWER,
        SIM_DECIMATION,
    )
    if _LAST and _LAST[0] is robot and _LAST[1] == key:
        return _LAST[2].copy()
    q, _ = robot_sim.simulate_newton_log(
        robot,
        cmd,
        decimation=SIM_DECIMATION,
        delay=truth["delay"],
        armature=truth["armature"],
        damping=truth["damping"],
        friction=truth["friction"],
        friction_upper=truth["friction_upper"],
        friction_power=FRICTION_POWER,
        saturation_effort=truth.get("saturation_effort"),
        velocity_limit=truth.get("velocity_limit"),
        kp=truth["kp"],
        kd=truth["kd"],
        bias=truth["bias"],
        log_dt=LOG_DT,
    )
    _LAST[:] = [robot, key, q]
    return q.copy()


def judged(xml: str, log: peer.PeerLog, res: RobotResult, split: int) -> float:
    """A fit's far-end RMSE replayed by the judge (MuJoCo C, position actuators) from the measured state at
    the split: its joint terms, gains, encoder bias, delay and, when fitted, friction along the stroke."""
    return float(peer.replay_terms(xml, log, split, *judge_terms(res, log))["rmse"])


def judge_terms(res: RobotResult, log: peer.PeerLog) -> tuple:
    """A fit as the judge's replay takes it (peer.replay_terms' arguments after the start): joint terms, encoder
    bias, delay (s) and the keywords for gains and, when fitted, friction along the stroke."""
    names = log.joints
    terms = {t: np.zeros(len(names)) for t in ("armature", "damping", "frictionloss")}
    kp, kd, upper = (np.zeros(len(names)) for _ in range(3))
    for e in res.groups.values():
        for nm in e.joints:
            k = names.index(nm)
            terms["armature"][k], terms["damping"][k] = e.armature, e.viscous_friction
            terms["frictionloss"][k], kp[k], kd[k] = e.friction, e.stiffness, e.damping
            upper[k] = e.friction if e.friction_upper is None else e.friction_upper
    moving = any(e.friction_upper is not None for e in res.groups.values())
    return (
        terms,
        np.array([res.encoder_bias[n] for n in names]),
        res.delay_steps * log.dt_log / log.decimation,
        (kp, kd),
        upper if moving else None,
    )


def bench_axes(rec: Recording, robot: RobotModel, opts: RobotFitOptions) -> list[list[Candidate]]:
    """The selection's own axes for this log, the training window's left out (a training setting, not a model
    the far end judges; it would double every seed's cost)."""
    return [a for a in candidate_axes(rec, robot, opts) if not a[0].name.startswith("window")]


def delay_sweep(
    rec: Recording,
    robot: RobotModel,
    xml: str,
    log: peer.PeerLog,
    opts: RobotFitOptions,
    c: Candidate,
    sweep: int,
    chosen: tuple[int, float],
) -> dict[int, dict]:
    """The chosen configuration at each delay 0..sweep (none when sweep < 0), held: its inner RMSE (fitted as the
    selection fits a candidate) and its far-end error refitted on the training part (`chosen`: the selection's
    own delay and far-end error, not refitted)."""
    split = int(round(log.q.shape[0] * (1.0 - VALIDATION)))
    fraction = inner_share(rec, opts)
    train = training_part(rec, robot, opts)[0]
    out: dict[int, dict] = {}
    for d in range(sweep + 1):
        inner = inner_fit(train, robot, opts, c, d, fraction)
        row = {"inner": inner.validation.rmse, "inner_training": inner.training.rmse, "far": chosen[1]}
        if d != chosen[0]:
            fit = fit_candidate(rec, robot, opts, dataclasses.replace(c, changes={**c.changes, "delay": d}))
            row["far"], row["training"] = judged(xml, log, fit, split), fit.training.rmse
        out[d] = {k: None if v is None else round(float(v), 6) for k, v in row.items()}
    out.setdefault(chosen[0], {"far": round(chosen[1], 6)})
    return out


def sibling(
    robot: RobotModel,
    xml: str,
    seed: int,
    seconds: float,
    opts: RobotFitOptions,
    configs: dict[str, Candidate],
    log: peer.PeerLog,
    far: dict[str, float],
    far_delay: dict[str, int],
) -> dict:
    """Every candidate fitted again on a sibling log (another encoder-noise draw of the same plant and targets)
    and judged on this log's far end: the pick of an oracle that knows the far end of the sibling, and how many
    candidates' scans land on another delay. The oracle's share within WITHIN is the most a choice made from
    one noisy log can be expected to reach on this bench."""
    rec2, _, _ = make_log(robot, seed, seconds, draw=1)
    split = int(round(log.q.shape[0] * (1.0 - VALIDATION)))
    far2: dict[str, float] = {}
    flips = 0
    for c in configs.values():
        fit = fit_candidate(rec2, robot, opts, c)
        far2[c.name] = judged(xml, log, fit, split)
        flips += int(fit.delay_steps) != far_delay[c.name]
    pick = min(far2, key=far2.__getitem__)  # the sibling's best, as fitted on this log
    best = min(far.values())
    return {
        "sibling_far_end_rmse": {k: round(v, 6) for k, v in far2.items()},
        "sibling_best": pick,
        "sibling_best_over_best": round(far[pick] / best, 4),
        "sibling_within": bool(far[pick] <= (1.0 + WITHIN) * best),
        "sibling_delay_flips": flips,
    }


def run_seed(
    robot: RobotModel,
    xml: str,
    seed: int,
    seconds: float,
    opts: RobotFitOptions,
    sweep: int = -1,
    siblings: bool = False,
) -> dict:
    """One seed: every candidate's far-end error, the selection's choice and its far-end error; with
    `siblings`, the noise ceiling (sibling)."""
    t0 = time.perf_counter()
    rec, log, truth = make_log(robot, seed, seconds)
    split = int(round(log.q.shape[0] * (1.0 - VALIDATION)))
    axes = bench_axes(rec, robot, opts)
    far: dict[str, float] = {}
    far_delay: dict[str, int] = {}
    scans: dict[str, dict] = {}  # each candidate's training RMSE at each delay its scan fitted
    configs = {c.name: c for c in configurations(axes)}
    for c in configs.values():
        fit = fit_candidate(rec, robot, opts, c)
        far[c.name], far_delay[c.name] = judged(xml, log, fit, split), int(fit.delay_steps)
        scans[c.name] = {
            "decoupled": dict(fit.training.delay_decoupled_rmse or {}),
            "coupled": dict(fit.training.delay_coupled_rmse or {}),
        }
        say(f"seed {seed}: {c.name}: far end {far[c.name]:.5f} rad (delay {far_delay[c.name]})")
    res = select_robot_fit(rec, robot, opts, axes=axes)
    sel = res.selection or {}
    chosen = judged(xml, log, res, split)
    c_chosen = configs[str(sel["chosen"])]
    by_delay = delay_sweep(rec, robot, xml, log, opts, c_chosen, sweep, (int(res.delay_steps), chosen))
    best_name = min(far, key=far.__getitem__)
    row = {
        "seed": seed,
        "truth": truth,
        "far_end_rmse": {k: round(v, 6) for k, v in far.items()},
        "far_end_delay": far_delay,
        "training_rmse_by_delay": scans,
        "training_choice": sel.get("training_choice"),
        "inner_rmse": {c["name"]: round(c["inner_validation_rmse"], 6) for c in sel.get("candidates", [])},
        "inner_delay": next((c.get("delay_steps") for c in sel.get("candidates", [])), None),
        "chosen": sel.get("chosen"),
        "chosen_delay": int(res.delay_steps),
        "chosen_by_delay": {str(d): by_delay[d] for d in sorted(by_delay)},
        "chosen_far_end_rmse": round(chosen, 6),
        "chosen_scanned_over_best": round(far[str(sel["chosen"])] / far[best_name], 4),
        "best": best_name,
        "best_far_end_rmse": round(far[best_name], 6),
        "chosen_over_best": round(chosen / far[best_name], 4),
        "within": bool(chosen <= (1.0 + WITHIN) * far[best_name]),
        # a stricter reference: the best of the candidates and of the chosen configuration at each judged delay
        "within_any_delay": bool(
            chosen <= (1.0 + WITHIN) * min(far[best_name], *(v["far"] for v in by_delay.values()))
        ),
    }
    if siblings:
        row |= sibling(robot, xml, seed, seconds, opts, configs, log, far, far_delay)
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    say(f"seed {seed}: chose {row['chosen']} ({row['chosen_over_best']:.3f} × the best, {best_name})")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short logs, small budgets, 2 seeds: a smoke run")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--friction", action="store_true", help="the friction-along-the-stroke axis too")
    ap.add_argument(
        "--envelope",
        action="store_true",
        help="the plant's motors with a DC envelope that binds at the far end",
    )
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument(
        "--sweep",
        type=int,
        default=-1,
        help="also judge the chosen configuration at each delay 0..N (offline rules)",
    )
    ap.add_argument(
        "--siblings",
        action="store_true",
        help="also fit every candidate on a sibling log (another noise draw): the bench's noise ceiling",
    )
    args = ap.parse_args(argv)
    global ENVELOPE
    ENVELOPE = args.envelope
    seeds = list(range(args.first_seed, args.first_seed + (min(args.seeds, 2) if args.quick else args.seeds)))
    seconds = 4.0 if args.quick else 8.0
    opts = RobotFitOptions(
        decimation=DECIMATION,
        validation_fraction=VALIDATION,
        max_iterations=2 if args.quick else RobotFitOptions.max_iterations,  # the fit's own default
        position_friction=args.friction,
    )
    out: dict = {
        "bench": "known-truth robot selection (one Go2 leg, Newton-made logs, MuJoCo judge)",
        "log": {
            "seconds": seconds,
            "rate_hz": 1 / LOG_DT,
            "far_end": f"last {VALIDATION:.0%}, chirp {F_TRAIN_END:g} → {F_TRAIN_END * FAR_RATIO:g} Hz",
        },
        "options": {k: v for k, v in dataclasses.asdict(opts).items() if k != "progress"},
        "within": WITHIN,
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "seeds": [],
    }
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        robot, xml = load_leg()
        for seed in seeds:
            out["seeds"].append(run_seed(robot, xml, seed, seconds, opts, args.sweep, args.siblings))
            if args.out:
                Path(args.out).write_text(json.dumps(out, indent=2))
    rows = out["seeds"]
    out["passed"] = sum(r["within"] for r in rows)
    out["summary"] = (
        f"{out['passed']} of {len(rows)} seeds chose within {WITHIN:.0%} of the best at the far end"
    )
    if args.siblings:
        out["sibling_passed"] = sum(r["sibling_within"] for r in rows)
        out["summary"] += (
            f"; the sibling log's best within {WITHIN:.0%} on {out['sibling_passed']} of {len(rows)}, "
            f"{sum(r['sibling_delay_flips'] for r in rows)} of {sum(len(r['far_end_rmse']) for r in rows)} "
            "candidates' delays moved"
        )
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(out, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
