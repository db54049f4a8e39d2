"""The default fit on a Feetech bench shaped like a user's: BAM's own STS3215 simulator, 60 runs (five
trajectories, firmware kp 4 to 32, two loads), every kp 16 run held out, no families named.

Per seed a truth is drawn near BAM's own STS3215 fit (bam/params/feetech_sts3215_7_4V/m1.json): BAM's friction
model M1, M2 (Stribeck), M4 (load-dependent) or M6 (quadratic load), its firmware law with the velocity-limited
goal, an encoder offset (BAM's q_offset) and two pendulums. BAM's Simulator (the peer's package, never our code)
makes the logs. Measured, in one process: the default ladder's pick, its held-out MAE and its wall and CPU time
(the kept-aside bench's budget is 300 s on 2 cores); every rung fitted as a named fit on the same split (the best
named family); and the pick's exports as the consumers run them (`export.render_all`: the MJCF's actuator,
whether it is MuJoCo's `<dcmotor>`, and each replay's status and agreement with our rollout).

    .venv/bin/python bench/feetech_ladder.py [--seeds N] [--first-seed K] [--no-named] [--bam-trials N]
        [--bam-models m1,m6] [--out FILE]

With `--bam-trials`, BAM's own fit (`bam.fit` in bench/.venv-bam, made by bench/bam_env.sh) runs beside ours on the
same files and split, scored by BAM's simulator: the like-for-like peer figure.

prints one JSON object: the machine, per seed the truth, the pick, the times, each rung's held-out MAE, the
replays.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bam.feetech.actuator import STS3215Actuator
from bam.model import models
from bam.simulate import Simulator
from bam.testbench import Pendulum
from bam.trajectory import trajectories

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench")]

from ladder_selection import rung_paths  # noqa: E402
from real_bam import bam_env, bam_fit  # noqa: E402

from actuator_sysid.datasets.readers import read_paths  # noqa: E402
from actuator_sysid.export import render_all  # noqa: E402
from actuator_sysid.fitting.fit import FitRequest, fit_result  # noqa: E402

LOG_DT = 0.005
SUBSTEPS = 20
VIN = 7.4
KPS = (4, 8, 12, 16, 24, 32)
HELD_KP = 16
LOADS = ({"mass": 0.5, "length": 0.15, "arm_mass": 0.0}, {"mass": 1.0, "length": 0.15, "arm_mass": 0.0})
RUNS = ("lift_and_drop", "sin_time_square", "up_and_down", "sin_sin", "chirp")
SECONDS = 6.0
JOINT = "sts3215"
BUDGET_S = 300.0  # the kept-aside Feetech check's time on 2 cores


def truth(seed: int) -> dict[str, Any]:
    """One drawn truth in BAM's names, near BAM's STS3215 M1 fit (kt 1.21, R 2.68, armature 0.028)."""
    rng = np.random.default_rng(seed)
    model = ("m1", "m2", "m4", "m6")[seed % 4]
    u = lambda lo, hi: float(rng.uniform(lo, hi))  # noqa: E731
    p = {
        "kt": u(1.0, 1.4),
        "R": u(2.2, 3.2),
        "armature": u(0.02, 0.035),
        "friction_base": u(0.03, 0.08),
        "friction_viscous": u(0.03, 0.08),
        "q_offset": u(-0.05, 0.05),
        "max_velocity": u(3.5, 6.0),
    }
    if model != "m1":
        p |= {"friction_stribeck": u(0.03, 0.1), "dtheta_stribeck": u(0.15, 0.5), "alpha": u(1.2, 2.5)}
    if model == "m4":
        p |= {"load_friction_base": u(0.04, 0.15), "load_friction_stribeck": u(0.03, 0.15)}
    if model == "m6":
        p |= {
            "load_friction_motor": u(0.02, 0.1),
            "load_friction_external": u(0.02, 0.1),
            "load_friction_motor_stribeck": u(0.02, 0.1),
            "load_friction_external_stribeck": u(0.02, 0.1),
            "load_friction_motor_quad": u(0.002, 0.01),
            "load_friction_external_quad": u(0.002, 0.01),
        }
    return {"model": model, "params": p}


def goal(run: str, t: float) -> tuple[float, bool]:
    """A run's goal and torque enable at time t: BAM's trajectories, and a chirp 0.2 → 2 Hz of 1 rad."""
    if run != "chirp":
        g, on = trajectories[run](t)
        return float(g), bool(on)
    s = max(t - 0.3, 0.0)
    return math.sin(2 * math.pi * (0.2 * s + (2.0 - 0.2) * s * s / (2 * (SECONDS - 0.3)))), True


def write_logs(folder: Path, t: dict[str, Any]) -> list[Path]:
    """Every (load, kp, run) stepped side by side by BAM's Simulator with its STS3215 law (the goal sent once a
    log sample and held), written as BAM's JSON files."""
    runs = [(li, kp, r) for li in range(len(LOADS)) for kp in KPS for r in RUNS]
    model = models[t["model"]]()
    actuator = STS3215Actuator(Pendulum)
    model.set_actuator(actuator)
    for key, value in t["params"].items():
        getattr(model, key).value = value
    dt = LOG_DT / SUBSTEPS
    steps = round(SECONDS / dt)
    sim = Simulator(model)
    sim.reset(np.zeros(len(runs)), np.zeros(len(runs)))
    load = {k: np.array([LOADS[li][k] for li, _, _ in runs]) for k in LOADS[0]}
    actuator.load_log({**load, "kp": np.array([kp for _, kp, _ in runs], float), "vin": VIN})
    n = steps // SUBSTEPS + 1
    goals = np.zeros((n, len(runs)))
    enable = np.zeros((n, len(runs)), bool)
    for i, (_, _, r) in enumerate(runs):
        for k in range(n):
            goals[k, i], enable[k, i] = goal(r, k * LOG_DT)
    q, qd = np.zeros((n, len(runs))), np.zeros((n, len(runs)))
    for k in range(steps + 1):
        if k % SUBSTEPS == 0:
            q[k // SUBSTEPS], qd[k // SUBSTEPS] = sim.q, sim.dq
        j = min(k // SUBSTEPS, n - 1)
        sim.step(actuator.compute_control(goals[j], sim.q, sim.dq, dt), enable[j], dt)
    paths = []
    for i, (li, kp, r) in enumerate(runs):
        entries = [
            {
                "timestamp": round(k * LOG_DT, 9),
                "position": float(q[k, i]),
                "speed": float(qd[k, i]),
                "goal_position": float(goals[k, i]),
                "torque_enable": bool(enable[k, i]),
            }
            for k in range(n)
        ]
        log = {**LOADS[li], "kp": kp, "vin": VIN, "motor": JOINT, "trajectory": r, "dt": LOG_DT}
        path = folder / f"load{li}_kp{kp}_{r}.json"
        path.write_text(json.dumps({**log, "entries": entries}))
        paths.append(path)
    return paths


def _held_out(res: Any) -> dict[str, float]:
    return {
        f: float(m.metrics.validation.position_mae)
        for f, m in res.joints[JOINT].models.items()
        if m.metrics.validation is not None and m.metrics.validation.position_mae is not None
    }


def exports(res: Any, rec: Any) -> dict[str, Any]:
    """The pick's exports as the consumers run them: the MJCF's actuator element and every replay's status."""
    files = render_all(res, rec)
    doc = json.loads(files["validation.json"])
    mjcf = files.get("mujoco.xml") or next((v for k, v in files.items() if k.endswith(".xml")), "")
    elements = sorted(set(re.findall(r"<(dcmotor|general|position|motor)\b", mjcf)))
    replays = {
        fmt: {
            "status": r.get("status"),
            "within_tolerance": r.get("within_tolerance"),
            "joints": {
                j: {k: v[k] for k in ("rmse_replay", "rmse_ours", "relative_difference") if k in v}
                for j, v in (r.get("joints") or {}).items()
            },
        }
        for fmt, r in doc["replay"].items()
    }
    verdict = doc.get("verdict") or {}
    return {
        "mjcf_actuators": elements,
        "passed": doc["passed"],
        "replays": replays,
        "verdict": verdict.get("verdict") or verdict.get("level") or verdict,
    }


def bam_beside(folder: Path, models: list[str], trials: int) -> dict[str, Any]:
    """BAM itself on the same split (its `bam.fit`, Optuna CMA-ES, every kp 16 file held out, scored by its own
    simulator): per model the held-out position MAE, the trials and the wall time."""
    py = bam_env()
    out = {}
    for m in models:
        r = bam_fit(py, folder, m, trials, actuator=JOINT, validation_kp=HELD_KP)
        out[m] = {k: r[k] for k in ("validation_position_mae", "trials", "wall_s", "train_position_mae")}
    return out


def one_seed(
    seed: int, named: bool, bam_models: list[str] | None = None, bam_trials: int = 0
) -> dict[str, Any]:
    t = truth(seed)
    with tempfile.TemporaryDirectory() as tmp:
        rec = read_paths(write_logs(Path(tmp), t))
        bam = bam_beside(Path(tmp), bam_models, bam_trials) if bam_models and bam_trials > 0 else None
    holdout = f"kp={HELD_KP}"
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    res = fit_result(rec, FitRequest(families=None, holdout=holdout, seed=seed))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    pick = res.joints[JOINT].best_model
    row: dict[str, Any] = {
        "seed": seed,
        "truth": t,
        "pick": pick,
        "pick_held_out_mae": _held_out(res)[pick],
        "ladder_wall_s": round(wall, 1),
        "ladder_cpu_s": round(cpu, 1),
        "load_before": round(load, 2),
        "within_budget": wall <= BUDGET_S,
        "ladder": [
            {k: s.get(k) for k in ("step", "family", "position_mae", "kept")}
            for s in res.extra["ladder"]["joints"][JOINT]["steps"]
        ],
    }
    if bam is not None:
        best = min(bam, key=lambda m: bam[m]["validation_position_mae"])
        row |= {
            "bam": bam,
            "pick_over_bam_best": row["pick_held_out_mae"] / bam[best]["validation_position_mae"],
        }
    print(f"seed {seed}: the ladder picks {pick} in {row['ladder_wall_s']} s", file=sys.stderr, flush=True)
    t_exp = time.perf_counter()
    row["exports"] = exports(res, rec)
    row["exports_s"] = round(time.perf_counter() - t_exp, 1)
    if named:
        every: dict[str, float] = {}
        for path in rung_paths():
            every |= _held_out(fit_result(rec, FitRequest(families=path, holdout=holdout, seed=seed)))
        best = min(every, key=every.__getitem__)
        row |= {
            "every_rung_held_out_mae": every,
            "best_named": best,
            "best_named_mae": every[best],
            "pick_over_best_named": row["pick_held_out_mae"] / every[best],
        }
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--no-named", action="store_true", help="skip the named fit of every rung")
    ap.add_argument(
        "--bam-trials", type=int, default=0, help="BAM's own fit beside ours (0: none; BAM uses 2000)"
    )
    ap.add_argument("--bam-models", default="m1,m6", help="BAM's friction models to fit beside ours")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        rows.append(one_seed(seed, not args.no_named, args.bam_models.split(","), args.bam_trials))
        r = rows[-1]
        print(
            f"seed {seed}: {r['pick']} {r['pick_held_out_mae']:.4f} in {r['ladder_wall_s']} s",
            file=sys.stderr,
        )
    out = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "settings": {"kps": KPS, "held_out_kp": HELD_KP, "loads": LOADS, "runs": RUNS, "seconds": SECONDS},
        "seeds": rows,
    }
    text = json.dumps(out, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
