"""budget.seconds bounds actuator-network training: past the deadline training stops, keeps the best weights so
far and says stopped_on "budget" (issue 6, with FitRequest.budget_s)."""

from __future__ import annotations

import time

import numpy as np
import torch
from net_logs import nonlinear_recording

from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.fitting.training import (
    NetOptions,
    _mlp_table,
    _set_scales,
    joint_data,
    train_supervised,
)
from actuator_sysid.models.networks import NetSpec, build_network

UNBOUNDED = {
    "epochs": 100_000,
    "patience": 100_000,
    "in_loop_epochs": 100_000,
}  # only the budget can stop these


def test_supervised_training_stops_at_the_deadline_with_the_best_weights_so_far() -> None:
    torch.set_num_threads(1)
    rec = nonlinear_recording(n_segments=3, seconds=1.0, seed=5)
    data = joint_data(rec, "j", 1, "measured")
    train, val = data.subset([0, 1]), data.subset([2])
    spec = NetSpec("mlp", input_idx=[0, 1, 2])
    _set_scales(spec, train)
    torch.manual_seed(0)
    net = build_network(spec)
    train_supervised(
        spec, build_network(spec), train, val, NetOptions(epochs=1), 1, lambda e, v: None
    )  # warm-up
    losses: list[float] = []
    t0 = time.perf_counter()
    # lr high enough that the validation loss also rises on some epochs: the last weights are not the best
    rec_ = train_supervised(
        spec,
        net,
        train,
        val,
        NetOptions(**UNBOUNDED, lr=0.05, batch_size=64),
        1,
        lambda epoch, loss: losses.append(loss),
        deadline=t0 + 1.0,
    )
    elapsed = time.perf_counter() - t0
    assert rec_["stopped_on"] == "budget" and 1 <= rec_["epochs"] < 100_000
    assert elapsed < 1.0 + 3.0  # one batch and one validation past the deadline (loaded 2-core machine)
    best = min(losses)
    assert rec_["validation_loss"] <= best * (1 + 1e-4) and rec_["best_epoch"] <= rec_["epochs"]
    xv, yv = _mlp_table(spec, val, 1)
    with torch.no_grad():
        restored = float(torch.mean((net(xv)[:, 0] - yv / spec.torque_scale) ** 2))
    assert np.isclose(
        restored, rec_["validation_loss"], rtol=1e-5
    )  # the module holds the best epoch's weights
    if losses[-1] > best * (1 + 1e-3):
        assert not np.isclose(restored, losses[-1], rtol=1e-5)


def test_fit_budget_bounds_networks_in_the_loop_and_on_torque() -> None:
    """Fits of both nets on torque, and of the LSTM in the loop, under a 3 s budget end near it; each net says it
    stopped on the budget and still has finite metrics (in the loop: pretraining and loop phases both cut)."""
    torch.set_num_threads(1)
    for torque, models in ((True, ["mlp", "lstm"]), (False, ["lstm"])):
        rec = nonlinear_recording(n_segments=3, seconds=1.0, torque=torque, seed=6)
        budget = 3.0
        t0 = time.perf_counter()
        res = fit_recording(rec, FitRequest(models=models, budget_s=budget, networks=UNBOUNDED))
        elapsed = time.perf_counter() - t0
        assert elapsed < budget + 8.0, elapsed  # metrics roll-outs after training; the machine is shared
        assert res["budget"]["stopped_on_budget"] is True
        for kind in models:
            m = res["joints"]["j"]["models"][kind]
            assert m["training"]["stopped_on"] == "budget", m["training"]
            assert any("time budget" in w for w in m["warnings"])
            assert np.isfinite(m["metrics"]["validation"]["position_rmse"])
            if not torque:
                assert (
                    m["training"]["mode"] == "in_the_loop" and m["training"]["in_loop_stopped_on"] == "budget"
                )
                assert 0 < m["training"]["in_loop_epochs"] < 100_000
