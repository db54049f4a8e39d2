"""A 6-DoF arm's inertials from three torque logs: the wall time of `fit --inertials` on 2 cores.

Three 25 s files at 100 Hz (and a 10 s held-out file) of the arm in tests/arm6_sim.py, made by Newton alone,
are fitted by the CLI as a user runs it: `actuator-sysid fit A B C --robot arm6_nominal.urdf --inertials
--validation-log D`, the URDF 20 % off in every link's mass, COM and inertia. The CLI runs in a fresh process
pinned to `--cores` cores (sched_setaffinity, as taskset), once with as many BLAS threads as cores and once with
one (on a loaded machine OpenBLAS threads spin against each other); its wall time includes Python's start and
imports.
The same fit is also timed in this process (`identify_inertials` alone). The recovered friction and armature
are compared with the truth. The machine is shared: the load average is recorded before and after.

Usage: python bench/arm_inertials.py [--seconds 25] [--cores 2] [--folder DIR] [--out FILE]
Prints one JSON object (and writes it to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

import arm6_sim  # noqa: E402  (tests/arm6_sim.py: the arm stepped by Newton alone)

from actuator_sysid.datasets.canonical import write_table  # noqa: E402
from actuator_sysid.datasets.readers import read_paths  # noqa: E402
from actuator_sysid.fitting.robot.inertial import InertialOptions, identify_inertials  # noqa: E402
from actuator_sysid.models.robot import load_robot  # noqa: E402

SEEDS, HELD_SEED = (10, 11, 12), 13
FILTER = ("0.09", "4", "0.05")  # the Savitzky–Golay window s, its order, min_speed rad/s (100 Hz logs)


def make_logs(folder: Path, seconds: float) -> dict:
    """Write the true and nominal URDFs and the logs into `folder` (kept where they exist); their paths and the
    seconds the simulation took."""
    true = arm6_sim.write_urdf(folder, "arm6")
    nominal = arm6_sim.write_urdf(folder, "arm6_nominal", off=0.2)
    made, t0, simulated = [], time.perf_counter(), False
    for seed, length in [*((s, seconds) for s in SEEDS), (HELD_SEED, 10.0)]:
        path = folder / f"arm6_{seed}_{length:g}s.csv"
        if not path.exists():
            write_table(arm6_sim.torque_log(true, length, seed=seed), path)
            simulated = True
        made.append(path)
    sim_s = time.perf_counter() - t0 if simulated else None  # None: every log was already in the folder
    return {"nominal": nominal, "train": made[:3], "held": made[3], "sim_s": sim_s}


def run_cli(logs: dict, out: Path, cores: int, threads: int) -> tuple[float, dict]:
    """The CLI's wall time on `cores` cores with `threads` BLAS threads, and its inertials.json."""
    args = [sys.executable, "-c", "import sys; from actuator_sysid.cli import main; sys.exit(main())", "fit"]
    args += [*map(str, logs["train"]), "--robot", str(logs["nominal"]), "--inertials"]
    args += ["--validation-log", str(logs["held"]), "--out", str(out)]
    args += ["--filter-window", FILTER[0], "--filter-order", FILTER[1], "--min-speed", FILTER[2]]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    t0 = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, preexec_fn=_pin(cores), check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the CLI failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, json.loads((out / "inertials.json").read_text())


def _pin(cores: int):
    def pin() -> None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])

    return pin


def in_process(logs: dict) -> float:
    """identify_inertials alone on the same files (read and model loaded beforehand), seconds."""
    robot = load_robot(logs["nominal"])
    train, held = read_paths(logs["train"]), read_paths([logs["held"]])
    opts = InertialOptions(
        filter_window_s=float(FILTER[0]), filter_order=int(FILTER[1]), min_speed=float(FILTER[2])
    )
    t0 = time.perf_counter()
    identify_inertials(robot, [train], validation=[held], options=opts)
    return time.perf_counter() - t0


def errors(res: dict) -> dict:
    """Each joint's friction and armature relative error against the truth, and its identifiability."""
    out = {}
    for k, j in enumerate(arm6_sim.JOINTS):
        out[j] = {
            t: {
                "rel_error": res["friction"][j][t] / float(arm6_sim.TRUTH[t][k]) - 1.0,
                "identified": res["identifiability"][f"{j}.{t}"],
            }
            for t in ("coulomb", "viscous", "offset", "armature")
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=25.0, help="length of each training file, s")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--folder", help="keep the URDFs and logs here (reused when present)")
    ap.add_argument("--out", help="also write the JSON here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.folder or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        load = os.getloadavg()
        logs = make_logs(folder, a.seconds)
        walls = {}
        for threads in sorted({a.cores, 1}, reverse=True):
            walls[f"blas_threads_{threads}"], res = run_cli(logs, folder / "out", a.cores, threads)
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.cores])
        fit_s = in_process(logs)
        report = {
            "bench": "arm_inertials",
            "files": [f"{a.seconds:g} s at 100 Hz"] * 3 + ["10 s held out"],
            "cores": a.cores,
            "cli_wall_s": {k: round(v, 2) for k, v in walls.items()},
            "identify_inertials_s": round(fit_s, 2),
            "goal_s": 60.0,
            "simulate_s": logs["sim_s"] and round(logs["sim_s"], 2),
            "rows": res["samples"],
            "rank": res["rank"],
            "verdict": res["verdict"]["verdict"],
            "held_out_rmse": res["rmse"]["held_out"],
            "errors": errors(res),
            "load_before_after": [load[0], os.getloadavg()[0]],
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        }
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
