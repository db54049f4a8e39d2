"""The default fit's ladder on Rhoban's XL330 logs, every kp = 800 file held out, no families named: its pick,
the pick's held-out error, and the time it takes against the 60 s target on 2 cores.

The fit runs in this process as `tests/test_family_ladder.py` runs it (`FitRequest(families=None,
holdout="kp=800")`). The target is wall time with the machine's 2 cores to itself (the fit uses both: its CPU
seconds exceed its wall), so the load average is given before and after; CPU seconds and a plain CPython loop's
time are given too (the loop is a machine-speed reference).

Usage: python bench/family_ladder.py [--repeats 1] [--out FILE]
Prints one JSON object (and writes it to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.fitting.fit import FitRequest, fit_result

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "bam-xl330" / "processed"
TARGET_S = 60.0


def cpython_loop_s() -> float:
    """Seconds for `for i in range(10**7): s += i`: the reference the suite's timings are read against."""
    t, s = time.perf_counter(), 0
    for i in range(10**7):
        s += i
    return time.perf_counter() - t


def one_fit() -> dict:
    """One default ladder fit on the XL330 split: pick, held-out MAE per family fitted, wall and CPU seconds."""
    rec = read_paths(sorted(DATA.glob("*.json")))
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    res = fit_result(rec, FitRequest(families=None, holdout="kp=800"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    jr = res.joints["xl330"]
    errors = {f: m.metrics.validation.position_mae for f, m in jr.models.items()}
    return {
        "pick": jr.best_model,
        "held_out_mae_rad": errors[jr.best_model],
        "fitted": errors,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "wall_within_target": wall <= TARGET_S,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    out = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(),
            "cpython_loop_s": round(cpython_loop_s(), 3),
        },
        "target_s": TARGET_S,
        "runs": [one_fit() for _ in range(args.repeats)],
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
