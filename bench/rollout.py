"""Rollout throughput: candidate-steps per second of the Warp kernel (loss-only and with traces) and of
the PyTorch oracle, measured in one run, plus the per-candidate cost of the two CMA-ES drivers.

Usage: python bench/rollout.py [--device cpu|cuda] [--candidates N] [--quick]
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import torch

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.fitting.search import _CmaesStrategy, _OptunaStrategy
from actuator_sysid.models.families import FAMILIES
from actuator_sysid.models.oracle import oracle_traces
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params

FAMILY = FAMILIES["dcmotor_delay"]


def recording(segments: int, samples: int) -> Recording:
    t = np.arange(samples) * 0.005
    segs = []
    for i in range(segments):
        q_des = (1.2 * np.sin(2 * np.pi * (0.3 + 0.4 * i) * t))[:, None]
        z = np.zeros_like(q_des)
        segs.append(Segment(str(i), t + 100 * i, q=z, qd=z, q_des=q_des, qd_des=z, tau_ff=z))
    return Recording([JointInfo("j", mass=1.0, com_distance=0.25)], segs)


def candidates(n: int, seed: int = 0) -> np.ndarray:
    """DCMotor + delay + Coulomb + viscous + armature candidates (the issue-3 benchmark family)."""
    rng = np.random.default_rng(seed)
    free = {
        "stiffness": rng.uniform(10, 40, n),
        "damping": rng.uniform(0.1, 1, n),
        "saturation_effort": rng.uniform(5, 9, n),
        "actuator_velocity_limit": rng.uniform(5, 12, n),
        "actuator_effort_limit": rng.uniform(3, 5, n),
        "armature": rng.uniform(0.005, 0.03, n),
        "friction": rng.uniform(0, 0.3, n),
        "viscous_friction": rng.uniform(0, 0.2, n),
        "delay": rng.integers(0, 6, n).astype(float),
    }
    return full_params(FAMILY, free, (n, 1))


def friction_candidates(family, n: int, seed: int = 0) -> np.ndarray:
    """DCMotor + Coulomb/viscous/armature candidates with whatever BAM friction terms `family` fits (M2–M6)."""
    rng = np.random.default_rng(seed)
    values = {
        "stiffness": rng.uniform(10, 40, n),
        "damping": rng.uniform(0.1, 1, n),
        "saturation_effort": rng.uniform(5, 9, n),
        "actuator_velocity_limit": rng.uniform(5, 12, n),
        "actuator_effort_limit": rng.uniform(3, 5, n),
        "armature": rng.uniform(0.005, 0.03, n),
        "friction": rng.uniform(0, 0.3, n),
        "viscous_friction": rng.uniform(0, 0.2, n),
        "stribeck_friction": rng.uniform(0, 0.3, n),
        "stribeck_velocity": rng.uniform(0.1, 1, n),
        "stribeck_exponent": rng.uniform(1, 3, n),
        **{
            k: rng.uniform(0, 0.1, n)
            for k in (
                "load_friction",
                "load_friction_stribeck",
                "load_friction_external",
                "load_friction_external_stribeck",
            )
        },
        **{
            k: rng.uniform(0, 0.01, n)
            for k in ("load_friction_quadratic_motor", "load_friction_quadratic_external")
        },
    }
    return full_params(family, {k: v for k, v in values.items() if k in family.params}, (n, 1))


def timed(fn, repeats: int) -> float:
    """Best wall time of `repeats` calls after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--candidates", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="smaller problem, for a smoke run")
    args = ap.parse_args()
    segments, samples = (2, 300) if args.quick else (6, 1200)
    batch = SegmentBatch.from_recording(recording(segments, samples), ["j"])
    steps = segments * (samples - 1)
    n_c = args.candidates
    params = candidates(n_c)
    one = RolloutEngine(batch, args.device, threads=1)
    every = RolloutEngine(batch, args.device)
    rate = lambda eng, p, reps=5: p.shape[0] * steps / timed(lambda: eng.sums(FAMILY, p), reps)  # noqa: E731
    warp_1 = rate(one, params)
    warp_all = rate(every, params)
    t_traces = timed(lambda: every.traces(FAMILY, params), 3)
    # BAM's friction budget costs an exp and a pow per physics step: loss-only rates against plain dcmotor
    friction = {}
    for name in ("dcmotor", "dcmotor_stribeck", "dcmotor_quadratic_load"):
        fam, p_f = FAMILIES[name], friction_candidates(FAMILIES[name], n_c)
        friction[name] = round(n_c * steps / timed(lambda fam=fam, p_f=p_f: every.sums(fam, p_f), 3))
    n_oracle = min(n_c, 64)
    t_oracle = timed(lambda: oracle_traces(batch, FAMILY, params[:n_oracle]), 1)
    oracle = n_oracle * steps / t_oracle
    # linearity: the same launch at three sizes spanning 100x in candidates x steps
    size_runs = []
    for n in (8, 80, 800) if args.quick else (32, 320, 3200):
        p = candidates(n, seed=n)
        size_runs.append(
            {
                "candidates": n,
                "candidate_steps": n * steps,
                "candidate_steps_per_s": round(rate(every, p, reps=3)),
            }
        )
    rates = [r["candidate_steps_per_s"] for r in size_runs]

    # search-driver overhead per candidate (ask + tell), no rollouts: why `cmaes` is the default driver
    driver = {}
    for name in ("cmaes", "optuna"):
        pop, gens, x0, grid = 24, 20, np.full(8, 0.5), np.zeros(8)
        strat = (
            _CmaesStrategy(x0, pop, 0, 1 / 6, grid)
            if name == "cmaes"
            else _OptunaStrategy(tuple(f"p{i}" for i in range(8)), x0, pop, 0, 1 / 6, grid)
        )
        t0 = time.perf_counter()
        for _ in range(gens):
            u = strat.ask()
            strat.tell(u, np.sum((u - 0.3) ** 2, axis=1))
        driver[name] = (time.perf_counter() - t0) / (pop * gens)

    # a whole fit: the CLI demo log (5 segments x 4 s at 200 Hz, 1 joint), DCMotor family, default budget
    from actuator_sysid.cli import DEMO_TRUTH, make_demo_recording
    from actuator_sysid.fitting.fit import FitRequest, fit_recording

    demo = make_demo_recording(seed=0)
    t0 = time.perf_counter()
    res = fit_recording(
        demo,
        FitRequest(models=["dcmotor"], seed=0, device=args.device, generations=40 if args.quick else 200),
    )
    fit_s = time.perf_counter() - t0
    fitted = res["joints"]["pendulum"]["models"]["dcmotor"]
    worst = max(
        abs(fitted["params"][k] / v - 1) for k, v in DEMO_TRUTH.items() if k in fitted["params"] and v
    )

    print(
        json.dumps(
            {
                "machine": {
                    "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(),
                    "torch": torch.__version__,
                    "device": args.device,
                },
                "problem": {
                    "family": FAMILY.name,
                    "joint_terms": list(FAMILY.joint_terms),
                    "load": "pendulum",
                    "segments": segments,
                    "samples_per_segment": samples,
                    "candidates": n_c,
                    "oracle_candidates": n_oracle,
                    "mode": "loss only",
                },
                "warp_cpu_1core" if args.device == "cpu" else "warp_1launch": round(warp_1),
                "warp_cpu_all_cores" if args.device == "cpu" else "warp_device": round(warp_all),
                "torch_oracle": round(oracle),
                "warp_traces": round(n_c * steps / t_traces),
                "friction_families_candidate_steps_per_s": friction,
                "friction_cost_m6_over_dcmotor": round(
                    friction["dcmotor"] / friction["dcmotor_quadratic_load"], 2
                ),
                "sizes": size_runs,
                "ratios": {
                    "all_cores_over_1core": round(warp_all / warp_1, 2),
                    "warp_all_over_oracle": round(warp_all / oracle, 1),
                    "warp_loss_over_traces": round(warp_all * t_traces / (n_c * steps), 2),
                    "size_rate_max_over_min": round(max(rates) / min(rates), 2),
                },
                "generation_ms_64_candidates": round(64 * steps / warp_all * 1e3, 3),
                "search_driver_s_per_candidate": {k: round(v, 6) for k, v in driver.items()},
                "ratio_optuna_over_cmaes_driver": round(driver["optuna"] / driver["cmaes"], 1),
                "fit_demo_dcmotor": {
                    "seconds": round(fit_s, 2),
                    "evaluations": fitted["search"]["evaluations"],
                    "generations": fitted["search"]["generations"],
                    "worst_relative_param_error": round(worst, 4),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
