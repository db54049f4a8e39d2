"""The position-MAE loss (BAM's objective, FitRequest.loss = "position_mae"): the kernel's sums, the least-squares
residuals and a plain mean |error| agree, and a fit with it recovers an Isaac Lab DCMotor log.

Tolerances as tests/test_recovery.py (issue 2): stiffness, damping, saturation_effort, actuator_velocity_limit
within 5 %; armature and friction within 15 %.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from isaaclab_logs import TRUTH_DCMOTOR, make_recording

from actuator_sysid.datasets.recording import Recording
from actuator_sysid.fitting.fit import FitRequest, FitRequestError, fit_recording
from actuator_sysid.fitting.objective import MAE_SMOOTHING, LossScales, loss_from_sums, residuals
from actuator_sysid.models.families import get_family
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params

TIGHT = ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit")
LOOSE = ("armature", "friction")


@pytest.fixture(scope="module")
def rec() -> Recording:
    rec = make_recording("dcmotor")
    for s in rec.segments:
        s.tau = None  # from motion alone
    return rec


def test_kernel_sums_residuals_and_plain_mae_agree(rec: Recording) -> None:
    """loss = mean |q_sim − q| / std(q) three ways, at the truth and at two detuned candidates."""
    family = get_family("dcmotor")
    batch = SegmentBatch.from_recording(rec, ["hinge"], window=200)
    scales = dataclasses.replace(LossScales.from_batch(batch), position_mae=True)
    cands = [TRUTH_DCMOTOR, {**TRUTH_DCMOTOR, "stiffness": 20.0}, {**TRUTH_DCMOTOR, "friction": 0.5}]
    params = full_params(family, {k: np.array([c[k] for c in cands]) for k in family.params}, (len(cands), 1))
    engine = RolloutEngine(batch)
    tr = engine.traces(family, params)
    from_sums = loss_from_sums(engine.sums(family, params), batch, scales)[:, 0]
    from_residuals = np.sum(residuals(tr, batch, scales, 0) ** 2, axis=1)
    errors = [
        np.abs(tr["q"][:, sl.start + 1 : sl.stop] - batch.q[sl.start + 1 : sl.stop])
        for sl in map(batch.segment_slice, range(batch.n_segments))
    ]
    plain = np.concatenate(errors, axis=1).mean(axis=1) / scales.sigma_q[0]
    assert np.allclose(from_sums, plain, rtol=1e-4)
    # least squares sees √(e² + δ²) − δ (δ = MAE_SMOOTHING·std(q)): between |e| − δ and |e|, per sample
    assert np.all(plain - MAE_SMOOTHING <= from_residuals * (1 + 1e-5)) and np.all(
        from_residuals <= plain * (1 + 1e-5)
    )
    assert plain[0] < 1e-3 * min(plain[1:])  # the truth is the optimum


def test_a_position_mae_fit_recovers_the_dcmotor(rec: Recording) -> None:
    result = fit_recording(rec, FitRequest(models=["dcmotor"], loss="position_mae", generations=30))
    model = result["joints"]["hinge"]["models"]["dcmotor"]
    got = model["params"]
    for k in TIGHT:
        assert abs(got[k] / TRUTH_DCMOTOR[k] - 1) < 0.05, (k, got[k], TRUTH_DCMOTOR[k])
    for k in LOOSE:
        assert abs(got[k] / TRUTH_DCMOTOR[k] - 1) < 0.15, (k, got[k], TRUTH_DCMOTOR[k])
    assert result["assumptions"]["loss"] == "mean |position error| / std(q)"
    # intervals come from the squared-error residuals at the optimum: finite and holding the truth
    iv = model["intervals"]["stiffness"]["interval95"]
    assert iv is not None and iv[0] <= got["stiffness"] <= iv[1]


def test_an_unknown_loss_is_refused_by_name(rec: Recording) -> None:
    with pytest.raises(FitRequestError, match=r"unknown loss 'l1': choose from \['mse', 'position_mae'\]"):
        fit_recording(rec, FitRequest(models=["dcmotor"], loss="l1"))
