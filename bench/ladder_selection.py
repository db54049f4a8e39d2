"""The default fit's ladder on logs whose held-out part lies past what it chose on: is its pick as good far out as
the best rung?

Per seed a truth is drawn: BAM's XL330 (its firmware law) with one of BAM's friction models (M1, Stribeck M2,
load-dependent M4, directional M5) at drawn values, a goal delay that is not a multiple of the 5 ms log step,
and a pendulum load. BAM's own simulator (the peer's package, never our code) makes the logs: slow sines and
chirps train (bands of 0.3 to 1.2 Hz), and the far end, held out, is faster (2.2 Hz, a larger swing) on a
pendulum 1.6 times heavier. The ladder (no families named) chooses on its inner split of the training part (the
fastest training band) and refits its pick; every rung is also fitted on the whole training part, along its path
as the ladder refits a pick. The pick's far-end position MAE is compared with the best rung's: within 5 % counts
as a success.

Beside it, the rule judged on the far end itself (the ladder before it chose on training data: a pick that saw
the figure it reports) and the inner-split picks at other margins, from the ladder's own inner errors.

    .venv/bin/python bench/ladder_selection.py [--quick] [--seeds N] [--out FILE]

prints JSON: the machine, the settings, per seed the truth, each rung's inner and far-end MAE, the pick, its
far-end MAE over the best rung's, and the count of seeds within 5 %.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bam.actuators import actuators
from bam.model import models
from bam.simulate import Simulator

from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.datasets.recording import Recording
from actuator_sysid.fitting.fit import FitRequest, fit_result
from actuator_sysid.fitting.ladder import (
    DELAY,
    MIN_GAIN,
    NATIVE,
    friction_rungs,
    mujoco_rungs,
    walk_errors,
)

LOG_DT = 0.005
SUBSTEPS = 20  # BAM steps at 0.25 ms: a delay in substeps is rarely a whole number of log steps
VIN = 7.4
KP = 400
TRAIN_BANDS = (0.3, 0.6, 1.2)  # Hz: each band one sine and one chirp up to it
FAR = 2.2  # Hz: the held-out band
FAR_AMPLITUDE, TRAIN_AMPLITUDE = 1.1, 0.9  # rad
FAR_LOAD = 1.6  # the held-out pendulum's mass over the training one's
TOLERANCE = 0.05  # the pick's far-end MAE within this of the best rung's counts as a success
MARGINS = (0.0, 0.02, 0.05, 0.1, 0.2)
RICHEST = friction_rungs(DELAY)[-1].family  # the baseline that always takes the richest nested rung
SEARCH = {"generations": 30, "population": 8, "refine_iterations": 40}
QUICK = {"generations": 20, "population": 8, "refine_iterations": 25}


def truth(seed: int) -> dict[str, Any]:
    """One drawn truth: BAM's model and its parameters (BAM's names), the goal delay and the pendulum."""
    rng = np.random.default_rng(seed)
    model = ("m1", "m2", "m4", "m5")[seed % 4]
    u = lambda lo, hi: float(rng.uniform(lo, hi))  # noqa: E731
    params = {
        "kt": u(0.3, 0.45),
        "R": u(2.2, 3.4),
        "armature": u(0.001, 0.003),
        "friction_base": u(0.01, 0.06),
        "friction_viscous": u(0.005, 0.04),
    }
    if model != "m1":
        params |= {"friction_stribeck": u(0.02, 0.08), "dtheta_stribeck": u(0.15, 0.5), "alpha": u(1.2, 2.5)}
    if model == "m4":
        params |= {"load_friction_base": u(0.04, 0.15), "load_friction_stribeck": u(0.03, 0.15)}
    if model == "m5":
        params |= {
            "load_friction_motor": u(0.05, 0.2),
            "load_friction_external": u(0.02, 0.1),
            "load_friction_motor_stribeck": u(0.05, 0.2),
            "load_friction_external_stribeck": u(0.02, 0.1),
        }
    return {
        "model": model,
        "params": params,
        "delay_ms": round(u(1.0, 12.0) / (LOG_DT * 1000 / SUBSTEPS)) * LOG_DT * 1000 / SUBSTEPS,
        "mass": u(0.3, 0.6),
        "length": 0.1,
    }


def goal(kind: str, f: float, amplitude: float, t: np.ndarray) -> np.ndarray:
    """A commanded position: a sine at f, or a chirp from f/4 to f, after a 0.3 s rest at zero."""
    s = np.clip(t - 0.3, 0.0, None)
    if kind == "sine":
        return amplitude * np.sin(2 * math.pi * f * s)
    span = t[-1] - 0.3
    return amplitude * np.sin(2 * math.pi * (f / 4 * s + (f - f / 4) * s**2 / (2 * span)))


def write_logs(folder: Path, t: dict[str, Any], seconds: float, chirp_load: float = 1.0) -> list[Path]:
    """Every run of one truth stepped side by side by BAM's Simulator (its firmware law closing the loop on the
    simulated state, the goal held between log samples and delayed), written as BAM's JSON files. `chirp_load`:
    the training chirps' pendulum mass over the sines' (1: one load trains)."""
    runs = [
        (kind, f, TRAIN_AMPLITUDE, chirp_load if kind == "chirp" else 1.0)
        for f in TRAIN_BANDS
        for kind in ("sine", "chirp")
    ]
    runs += [(kind, FAR, FAR_AMPLITUDE, FAR_LOAD) for kind in ("sine", "chirp")]
    model = models[t["model"]]()
    model.set_actuator(actuators["xl330"]())
    for key, value in t["params"].items():
        getattr(model, key).value = value
    n = round(seconds / LOG_DT)
    ts = np.arange(n + 1) * LOG_DT
    goals = np.stack([goal(kind, f, a, ts) for kind, f, a, _ in runs], axis=1)
    lag = round(t["delay_ms"] / 1000 / (LOG_DT / SUBSTEPS))
    dt = LOG_DT / SUBSTEPS
    mass = np.array([t["mass"] * load for *_, load in runs])
    sim = Simulator(model)
    sim.reset(np.zeros(len(runs)), np.zeros(len(runs)))
    model.actuator.load_log({"mass": mass, "length": t["length"], "arm_mass": 0.0, "kp": KP, "vin": VIN})
    q, qd = np.zeros((n + 1, len(runs))), np.zeros((n + 1, len(runs)))
    for k in range((n + 1) * SUBSTEPS):
        if k % SUBSTEPS == 0:
            q[k // SUBSTEPS], qd[k // SUBSTEPS] = sim.q, sim.dq
        sent = goals[max(0, k - lag) // SUBSTEPS]  # held at the log's rate, then delayed
        sim.step(model.actuator.compute_control(sent, sim.q, sim.dq, dt), np.ones(len(runs), bool), dt)
    paths = []
    for i, (kind, f, *_) in enumerate(runs):
        entries = [
            {
                "timestamp": round(k * LOG_DT, 9),
                "position": float(q[k, i]),
                "speed": float(qd[k, i]),
                "goal_position": float(goals[k, i]),
                "torque_enable": True,
            }
            for k in range(n + 1)
        ]
        log = {"mass": float(mass[i]), "length": t["length"], "arm_mass": 0.0, "kp": KP, "vin": VIN}
        log |= {"motor": "xl330", "trajectory": f"{kind}_{f:g}hz", "dt": LOG_DT}
        path = folder / f"{kind}_{f:g}hz.json"
        path.write_text(json.dumps({**log, "entries": entries}))
        paths.append(path)
    return paths


def tagged(rec: Recording) -> Recording:
    """Each recording tagged with its band (metadata `band_hz`, from its trajectory's name): the key the far end
    is held out by."""
    segs = []
    for s in rec.segments:
        band = float(str(s.metadata["bam"]["trajectory"]).split("_")[1].removesuffix("hz"))
        segs.append(dataclasses.replace(s, metadata={**s.metadata, "band_hz": band}))
    return dataclasses.replace(rec, segments=segs)


def _far(res: Any, joint: str = "xl330") -> dict[str, float]:
    """Each fitted family's held-out (far-end) position MAE."""
    return {
        f: float(m.metrics.validation.position_mae)
        for f, m in res.joints[joint].models.items()
        if m.metrics.validation is not None and m.metrics.validation.position_mae is not None
    }


def rung_paths() -> list[list[str]]:
    """The ladder's paths, each fitted as one named fit (nested in order, as the ladder's refit nests a pick):
    the native envelope and its friction rungs, the same with the delay, and MuJoCo's plant alone."""
    native = [NATIVE, *(r.family for r in friction_rungs(NATIVE))]
    delay = [NATIVE, DELAY, *(r.family for r in friction_rungs(DELAY))]
    return [native, delay, *([[r.family] for r in mujoco_rungs()])]


def _walk_pick(errors: dict[str, float], margin: float) -> tuple[str | None, bool]:
    """The ladder's rule alone on given errors: its pick, and whether every rung it climbed had one."""
    walk = walk_errors(dict(errors), margin)
    return walk.kept, all(o.rung.family in errors for o in walk.outcomes)


def one_seed(seed: int, seconds: float, search: dict[str, int], chirp_load: float = 1.0) -> dict[str, Any]:
    """One truth: its logs, the ladder's fit, every rung fitted alone, and the comparison."""
    t = truth(seed)
    with tempfile.TemporaryDirectory() as tmp:
        rec: Recording = read_paths(write_logs(Path(tmp), t, seconds, chirp_load))
    rec = tagged(rec)
    holdout = f"band_hz={FAR:g}"
    wall = time.perf_counter()
    ladder = fit_result(
        rec, FitRequest(families=None, ladder_judge="training", holdout=holdout, seed=seed, **search)
    )
    ladder_s = time.perf_counter() - wall
    far: dict[str, float] = {}
    for path in rung_paths():  # every rung fitted on the whole training part as the ladder refits it
        far |= _far(fit_result(rec, FitRequest(families=path, holdout=holdout, seed=seed, **search)))
    record = ladder.extra["ladder"]
    pick = ladder.joints["xl330"].best_model
    inner = {s["family"]: s["position_mae"] for s in record["joints"]["xl330"]["steps"] if s["position_mae"]}
    refit = _far(ladder)
    best_family = min(far, key=far.__getitem__)
    best = far[best_family]
    picked = refit[pick]
    on_far, _ = _walk_pick(far, MIN_GAIN)  # the rule judged on the far end itself (selection-biased)
    margins = {}
    for margin in MARGINS:
        p, complete = _walk_pick(inner, margin)
        margins[f"{margin:g}"] = {
            "pick": p,
            "far_mae": far.get(p or ""),
            "within": None if p not in far else far[p] <= (1 + TOLERANCE) * best,
            **({} if complete else {"note": "climbs rungs the ladder did not fit at 5 %"}),
        }
    return {
        "seed": seed,
        "truth": t,
        "inner_split": record["inner_split"],
        "held_out": record["held_out"],
        "inner_mae": inner,
        "far_mae_every_rung": far,
        "far_mae_ladder_refit": refit,
        "pick": pick,
        "pick_far_mae": picked,
        "best_rung": best_family,
        "best_far_mae": best,
        "pick_over_best": picked / best,
        "refit_minus_path_fit": picked - far[pick] if pick in far else None,  # 0: the refit is the rung's fit
        "within": picked <= (1 + TOLERANCE) * best,
        "pick_rank": 1 + sum(v < picked for v in far.values()),  # among every rung's far-end MAE
        "judged_on_far_end": {"pick": on_far, "far_mae": far.get(on_far or "")},
        "richest_rung": {"pick": RICHEST, "far_mae": far.get(RICHEST)},
        "first_rung_far_mae": far.get(NATIVE),
        "margins": margins,
        "ladder_wall_s": round(ladder_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 seeds, shorter logs, a smaller search")
    ap.add_argument("--seeds", type=int, help="number of seeds (default 10, quick 3)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--default-search", action="store_true", help="the fit's default search, not the bench's")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument(
        "--chirp-load",
        type=float,
        default=1.0,
        help="the training chirps' load over the sines' (1: one load)",
    )
    args = ap.parse_args(argv)
    n = args.seeds or (3 if args.quick else 10)
    seconds, search = (3.0, QUICK) if args.quick else (3.0, SEARCH)
    if args.default_search:
        search = {}
    load = os.getloadavg()[0]
    wall = time.perf_counter()
    rows = []
    for seed in range(args.first_seed, args.first_seed + n):
        rows.append(one_seed(seed, seconds, search, args.chirp_load))
        print(f"seed {seed}: {rows[-1]['pick']} {rows[-1]['pick_over_best']:.3f}", file=sys.stderr)
    within = sum(r["within"] for r in rows)
    out = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "load": load},
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "settings": {
            "seconds": seconds,
            "search": search,
            "kp": KP,
            "train_bands_hz": TRAIN_BANDS,
            "far_hz": FAR,
            "training_chirp_load": args.chirp_load,
        },
        "min_gain": MIN_GAIN,
        "tolerance": TOLERANCE,
        "seeds": rows,
        "within": within,
        "of": n,
        "within_if_judged_on_far_end": sum(
            (r["judged_on_far_end"]["far_mae"] or math.inf) <= (1 + TOLERANCE) * r["best_far_mae"]
            for r in rows
        ),
        "within_if_richest": sum(
            (r["richest_rung"]["far_mae"] or math.inf) <= (1 + TOLERANCE) * r["best_far_mae"] for r in rows
        ),
        "beats_first_rung": sum(r["pick_far_mae"] < (r["first_rung_far_mae"] or math.inf) for r in rows),
        "margins_within": {
            m: sum(bool(r["margins"][m]["within"]) for r in rows) for m in (f"{x:g}" for x in MARGINS)
        },
        "wall_s": round(time.perf_counter() - wall, 1),
    }
    text = json.dumps(out, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
