"""Recurrent nets that learn a stiff position servo, and training that ends when the inner-split loss stops falling.

The log (net_logs.bench_recording, plain numpy) is a position-controlled actuator on a heavy pendulum held near
horizontal at 66.7 Hz: position errors of about 1e-2 rad around a steady offset, velocities of several rad/s,
torques of tens of N·m around a gravity load. Uncentred, those inputs and that torque sit several of their
standard deviations from zero, where the LSTM's and GRU's gates saturate; training centred (folded into the
biases after, the exported module unchanged) with enough optimiser steps per epoch learns them.
"""

from __future__ import annotations

import pytest
import torch
from net_logs import bench_recording

from actuator_sysid.fitting.training import NetOptions, net_fit

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def bench():
    return bench_recording(n_segments=4, seconds=6.0, centre=1.2)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_nets_learn_the_position_servo(bench, kind: str) -> None:
    """Held-out torque R² ≥ 0.9 after 100 epochs (measured 0.976 LSTM, 0.972 GRU). The trainer without centring,
    with 100-sample sequences, burn-in 20 and 32 sequences a step reached 0.005 and 0.30 in 100 epochs, 0.68 and
    0.85 at its 300-epoch cap (the LSTM's and GRU's best epochs the last, still learning)."""
    fit = net_fit(bench, "j", kind, [0, 1, 2], [3], NetOptions(epochs=100))
    val = fit.torque_metrics["validation"]
    assert val["torque_r2"] >= 0.9, val


def test_mlp_stops_on_patience_not_the_cap(bench) -> None:
    """With the default epoch cap, the MLP's training ends because the inner-split loss stopped improving (with
    the history left to choose, measured: best epoch 604, stopped at 664, R² 0.969; the old 300-epoch cap ended it
    at its best epoch, R² 0.949)."""
    opts = NetOptions(history_ms=[0.0, 15.0, 30.0])
    fit = net_fit(bench, "j", "mlp", [0, 1, 2], [3], opts)
    tr = fit.training
    assert tr["stopped_on"] == "early_stopping", tr
    assert tr["epochs"] < opts.epochs and tr["epochs"] - tr["best_epoch"] == opts.patience, tr
    assert fit.torque_metrics["validation"]["torque_r2"] >= 0.9, fit.torque_metrics["validation"]


def test_an_epoch_cap_reached_says_so(bench) -> None:
    """A cap that ends training while the loss still falls is reported as such."""
    fit = net_fit(bench, "j", "mlp", [0, 1, 2], [3], NetOptions(epochs=3, history_ms=[0.0, 15.0]))
    assert fit.training["stopped_on"] == "epochs" and fit.training["epochs"] == 3, fit.training
