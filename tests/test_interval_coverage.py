"""Honest intervals (issue 5): with measurement noise on an Isaac Lab log, 95 % intervals hold the truth.

The log comes from the real Isaac Lab DCMotor in the test's own pendulum integrator (isaaclab_logs); each
of ten noise seeds adds state noise (position σ, velocity σ) and 14-bit encoder quantization of the
position, as a real bench would. Every true value must lie inside its reported 95 % interval in at least
8 of the 10 seeds, and the intervals must stay tight enough to mean something.
"""

from __future__ import annotations

import copy
import functools
import math

import numpy as np
from isaaclab_logs import TRUTH_DCMOTOR, make_recording

from actuator_sysid.fitting.fit import FitRequest, fit_recording

SIGMA_Q = 0.002  # rad, position noise
SIGMA_QD = 0.05  # rad/s, velocity noise
QUANTUM = 2 * math.pi / 2**14  # rad, one count of a 14-bit encoder
SEEDS = range(10)
# loose bounds on the median relative 95 % half-width: an interval as wide as the search range covers anything
MAX_HALF_WIDTH = {
    "stiffness": 0.03,
    "damping": 0.1,
    "saturation_effort": 0.05,
    "actuator_velocity_limit": 0.1,
    "actuator_effort_limit": 0.05,
    "armature": 0.1,
    "friction": 0.25,
    "viscous_friction": 0.5,
}


def noisy(clean, seed: int):
    """The clean log as a noisy encoder and velocity estimate would have recorded it; no measured torque."""
    rng = np.random.default_rng(seed)
    rec = copy.deepcopy(clean)
    for seg in rec.segments:
        seg.q = np.round((seg.q + rng.normal(0.0, SIGMA_Q, seg.q.shape)) / QUANTUM) * QUANTUM
        seg.qd = seg.qd + rng.normal(0.0, SIGMA_QD, seg.qd.shape)
        seg.tau = None
    return rec


@functools.cache
def clean_log():
    """The Isaac Lab log both tests add noise to (noisy copies it), made once per module: steps and sin_t2
    train, the chirp is held out, and every clamp and friction acts."""
    clean = make_recording("dcmotor", TRUTH_DCMOTOR)
    clean.segments = clean.segments[:3]
    return clean


@functools.cache
def fitted(noise_seed: int, search_seed: int) -> dict:
    """The dcmotor model of one noisy log under one search seed, fitted once per module: the coverage test's
    noise seed 7 with search seed 7 is also one of the optimum test's."""
    result = fit_recording(
        noisy(clean_log(), noise_seed),
        FitRequest(models=["dcmotor"], generations=60, population=8, seed=search_seed),
    )
    return result["joints"]["hinge"]["models"]["dcmotor"]


def test_true_values_lie_inside_95_percent_intervals_in_8_of_10_noise_seeds() -> None:
    covered = dict.fromkeys(MAX_HALF_WIDTH, 0)
    widths: dict[str, list[float]] = {k: [] for k in MAX_HALF_WIDTH}
    for seed in SEEDS:
        intervals = fitted(seed, seed)["intervals"]
        for name in MAX_HALF_WIDTH:
            iv = intervals[name]
            assert iv["interval95"] is not None, (seed, name, iv)
            lo, hi = iv["interval95"]
            covered[name] += lo <= TRUTH_DCMOTOR[name] <= hi
            widths[name].append((hi - lo) / 2 / iv["estimate"])
    assert all(c >= 8 for c in covered.values()), covered
    median = {k: float(np.median(v)) for k, v in widths.items()}
    assert all(median[k] <= MAX_HALF_WIDTH[k] for k in median), median


def test_every_search_seed_ends_in_the_same_optimum() -> None:
    """Noise seed 7 once sent 2 of 10 search seeds into a basin with friction off, viscous friction ×5 and
    50× the loss (CMA-ES plateaus far up the DC-motor valley, and the refine started there). Least squares
    from the warm start before the search finds the optimum every seed then confirms."""
    models = [fitted(7, seed) for seed in (3, 7, 8)]
    losses = np.array([m["loss"] for m in models])
    assert np.ptp(losses) <= 1e-3 * losses.min(), losses
    for m in models:
        assert abs(m["params"]["friction"] / TRUTH_DCMOTOR["friction"] - 1) < 0.25, m["params"]
        # the search started from the least-squares optimum, which was already within 10 % of the final loss
        local = m["search"]["local_solve"]
        assert local["loss_after"] < 1e-2 * local["loss_before"] and local["loss_after"] <= 1.1 * m["loss"]
