"""Actuator-network training speed on CPU and the wall time of the issue-6 acceptance runs.

1. Training throughput: supervised samples/s (MLP, LSTM) and in-the-loop physics steps/s (batched
   differentiable rollouts with truncated BPTT), from the training records of the runs below.
2. Acceptance 2: torque-labelled log of the nonlinear actuator (tests/net_logs.py: DC motor, 2-step delay,
   Stribeck friction, position-dependent limit), 9 segments x 3 s at 200 Hz, dcmotor + dcmotor_delay + mlp +
   lstm; validation torque RMSE as a fraction of the torque range, against the best parametric model.
3. Acceptance 3: the same actuator with a 20 ms current-loop lag and no torque in the log; in-the-loop
   training; validation position RMSE against the best parametric model.

Usage: python bench/nets.py [--threads N]. Prints one JSON object. Speed lives here, never in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from net_logs import nonlinear_recording  # noqa: E402

from actuator_sysid.fitting.fit import FitRequest, fit_recording  # noqa: E402

PARAMETRIC = ["dcmotor", "dcmotor_delay"]


def _run(rec, generations: int) -> tuple[dict, float]:
    t0 = time.perf_counter()
    res = fit_recording(
        rec, FitRequest(models=[*PARAMETRIC, "mlp", "lstm"], generations=generations, population=16)
    )
    return res["joints"]["j"]["models"], time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out: dict = {
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "torch_threads": args.threads,
            "load_average": os.getloadavg(),
        }
    }

    models, wall = _run(nonlinear_recording(n_segments=9, seconds=3.0, torque=True), 100)
    best_t = min(models[f]["torque_metrics"]["validation"]["torque_rmse"] for f in PARAMETRIC)
    out["acceptance_2_torque"] = {
        "wall_s": round(wall, 2),
        "best_parametric_torque_rmse": best_t,
        **{
            k: {
                "torque_rmse": models[k]["torque_metrics"]["validation"]["torque_rmse"],
                "torque_rmse_of_range": models[k]["torque_metrics"]["validation"]["torque_rmse_of_range"],
                "beats_parametric": models[k]["torque_metrics"]["validation"]["torque_rmse"] < best_t,
                "train_s": models[k]["training"]["seconds"],
                "samples_per_s": models[k]["training"]["samples_per_s"],
            }
            for k in ("mlp", "lstm")
        },
    }

    rec = nonlinear_recording(n_segments=9, seconds=3.0, torque=False, position_limited=False, lag_s=0.02)
    models, wall = _run(rec, 150)
    best_q = min(models[f]["metrics"]["validation"]["position_rmse"] for f in PARAMETRIC)
    out["acceptance_3_in_the_loop"] = {
        "wall_s": round(wall, 2),
        "best_parametric_position_rmse": best_q,
        **{
            k: {
                "position_rmse": models[k]["metrics"]["validation"]["position_rmse"],
                "ratio_to_parametric": models[k]["metrics"]["validation"]["position_rmse"] / best_q,
                "in_loop_s": models[k]["training"]["in_loop_seconds"],
                "in_loop_steps_per_s": models[k]["training"]["in_loop_steps_per_s"],
                "warm_start_samples_per_s": models[k]["training"]["samples_per_s"],
            }
            for k in ("mlp", "lstm")
        },
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
