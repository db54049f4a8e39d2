"""The MLP's history chosen on the inner split when the request leaves it open.

The log is made here in plain numpy, independently of the package's models: a pendulum driven by a PD drive
whose whole response arrives 60 ms late (the torque at t is the PD law on the state and command at t − 60 ms),
a lag that the 0–20 and 0–40 ms spans cannot see and the 0–90 ms one can. The fit must pick the longer span
and, on the held-out segment, predict torque better than the short span stated outright.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.fitting.training import NetOptions, net_fit

DT = 0.005  # 200 Hz
DELAY = 12  # samples: the drive's 60 ms response
KP, KD = 2.0, 0.2
LOAD = {"mass": 0.6, "com_distance": 0.2, "inertia": 0.004}
OPTS = {"epochs": 80, "patience": 80, "hidden": [16, 16], "lr": 5e-3}
LONG = [0.0, 30.0, 60.0, 90.0]
SHORT = [0.0, 10.0, 20.0]


def delayed_segment(name: str, seconds: float, rng: np.random.Generator) -> Segment:
    """One segment of smooth random steps and sines through the delayed PD drive (semi-implicit Euler)."""
    n = int(seconds / DT)
    t = np.arange(n) * DT
    steps = np.repeat(rng.uniform(-0.6, 0.6, n // 60 + 1), 60)[:n]
    q_des = steps + 0.25 * np.sin(2 * np.pi * rng.uniform(0.3, 1.5) * t + rng.uniform(0, 2 * np.pi))
    inertia = LOAD["inertia"] + LOAD["mass"] * LOAD["com_distance"] ** 2
    mgl = LOAD["mass"] * 9.81 * LOAD["com_distance"]
    q, qd = np.zeros(n), np.zeros(n)
    tau = np.zeros(n)
    for k in range(n):
        j = max(k - DELAY, 0)
        tau[k] = KP * (q_des[j] - q[j]) - KD * qd[j]
        if k + 1 < n:
            qd[k + 1] = qd[k] + DT * (tau[k] - mgl * np.sin(q[k])) / inertia
            q[k + 1] = q[k] + DT * qd[k + 1]
    col = lambda a: a[:, None]  # noqa: E731
    zeros = np.zeros((n, 1))
    return Segment(name, t, q=col(q), qd=col(qd), q_des=col(q_des), qd_des=zeros, tau_ff=zeros, tau=col(tau))


@pytest.fixture(scope="module")
def delayed() -> Recording:
    rng = np.random.default_rng(4)
    return Recording([JointInfo("j", **LOAD)], [delayed_segment(str(s), 3.0, rng) for s in range(3)])


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _fit(rec: Recording, **history):
    return net_fit(rec, "j", "mlp", [0, 1], [2], NetOptions.from_dict({**OPTS, **history}), seed=0)


@pytest.mark.unit
def test_a_drive_that_answers_late_gets_the_longer_history_and_predicts_better(delayed: Recording) -> None:
    assert np.all(np.isfinite(delayed.segments[0].q)) and np.abs(delayed.segments[0].q).max() < 3.0
    chosen = _fit(delayed)
    choice = chosen.training["history_choice"]
    errors = {tuple(c["history_ms"]): c["inner_error"] for c in choice["candidates"]}
    assert set(errors) == {tuple(SHORT), (0.0, 20.0, 40.0), tuple(LONG)}, choice
    assert choice["chosen_ms"] == LONG, choice
    assert errors[tuple(LONG)] <= 0.95 * min(errors[tuple(SHORT)], errors[(0.0, 20.0, 40.0)]), choice
    assert chosen.network["input_idx"] == [0, 6, 12, 18]
    note = next(w for w in chosen.warnings if "chosen on the inner split" in w)
    assert "lags 0, 6, 12, 18 samples" in note and "networks.history_ms" in note, note
    # the chosen span trained as if stated: same weights; a stated span is never second-guessed
    stated = _fit(delayed, history_ms=LONG)
    assert "history_choice" not in stated.training
    assert stated.weights == chosen.weights
    short = _fit(delayed, history_ms=SHORT)
    held_out = chosen.torque_error("validation"), short.torque_error("validation")
    assert held_out[0] < 0.7 * held_out[1], held_out
