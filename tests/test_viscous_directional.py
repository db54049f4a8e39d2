"""The component added as issue 13's proof (docs/architecture.md, "Add a component"): viscous friction that
differs by direction. Kernel against the oracle, recovery from a log the oracle makes, and each consumer's
export (the mean coefficient, with a finding)."""

from __future__ import annotations

import numpy as np
import pytest
from export_helpers import TRUTH, make_result, model_entry
from test_rollout import random_params, two_joint_recording

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.export.isaaclab import actuator_cfgs, cfg_hazards
from actuator_sysid.export.mjcf import _joint_attrs, mjcf_warnings
from actuator_sysid.export.newton_usd import RAD_PER_DEG, joint_attributes, newton_warnings
from actuator_sysid.export.selection import ChosenModel
from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.models.families import FAMILIES, JOINT_TERMS
from actuator_sysid.models.oracle import oracle_traces
from actuator_sysid.models.parameters import INDEX
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params

TERM = "viscous_friction_negative_ratio"
TERMS = ("armature", "friction", "viscous_friction", TERM)


def test_the_term_is_a_joint_term_that_brings_its_symmetric_part() -> None:
    fam = FAMILIES["dcmotor"].with_terms((TERM,))
    assert TERM in JOINT_TERMS and "viscous_friction" in fam.joint_terms  # its companion comes along
    assert fam.flags != FAMILIES["dcmotor"].with_terms(("viscous_friction",)).flags


@pytest.mark.parametrize("family", ["dcmotor", "pid", "implicit"])
@pytest.mark.parametrize("open_loop", [False, True])
def test_kernel_matches_torch_oracle(family: str, open_loop: bool) -> None:
    fam = FAMILIES[family].with_terms(TERMS)
    batch = SegmentBatch.from_recording(two_joint_recording(), ["a", "b"], window=None if open_loop else 70)
    params = random_params(FAMILIES[family].with_terms(TERMS[:-1]), 6, 2, seed=3)
    params[:, :, INDEX[TERM]] = np.random.default_rng(4).uniform(0.2, 5.0, (6, 2))
    params[:, :, INDEX["viscous_friction"]] += 0.2  # large enough that the direction matters
    warp_tr = RolloutEngine(batch).traces(fam, params, open_loop=open_loop)
    ref = oracle_traces(batch, fam, params, open_loop=open_loop)
    for key in ("q", "qd", "computed", "applied"):
        scale = max(1.0, float(np.abs(ref[key]).max()))
        assert np.abs(warp_tr[key] - ref[key]).max() <= 2e-4 * scale, key
    if not open_loop:  # and the term acts: the same parameters without it roll out elsewhere
        sym = RolloutEngine(batch).traces(FAMILIES[family].with_terms(TERMS[:-1]), params)
        assert np.abs(sym["q"] - warp_tr["q"]).max() > 1e-3


def test_ratio_one_is_the_symmetric_term() -> None:
    fam = FAMILIES["dcmotor"].with_terms(TERMS)
    batch = SegmentBatch.from_recording(two_joint_recording(), ["a", "b"], window=70)
    params = random_params(FAMILIES["dcmotor"], 3, 2, seed=1)
    params[:, :, INDEX[TERM]] = 1.0
    a = RolloutEngine(batch).traces(fam, params)["q"]
    b = RolloutEngine(batch).traces(FAMILIES["dcmotor"], params)["q"]
    np.testing.assert_array_equal(a, b)


TRUE = {
    "stiffness": 12.0,
    "damping": 0.15,
    "saturation_effort": 6.0,
    "actuator_velocity_limit": 12.0,
    "actuator_effort_limit": 4.0,
    "armature": 0.01,
    "friction": 0.02,
    "viscous_friction": 0.15,
    TERM: 3.0,
}


@pytest.fixture(scope="module")
def oracle_log() -> Recording:
    """A pendulum log the PyTorch oracle makes from TRUE (not the kernel that fits it), chirp commands."""
    rate, n = 200.0, 800
    t = np.arange(n) / rate
    segs = [
        Segment(
            str(i),
            t + 10 * i,
            q=np.zeros((n, 1)),
            qd=np.zeros((n, 1)),
            q_des=(a * np.sin(2 * np.pi * (0.3 + 0.6 * t / t[-1] * f) * t))[:, None],
            qd_des=np.zeros((n, 1)),
            tau_ff=np.zeros((n, 1)),
        )
        for i, (a, f) in enumerate(((1.2, 3.0), (0.8, 5.0), (1.5, 2.0), (1.0, 4.0)))
    ]
    rec = Recording([JointInfo("j", inertia=0.02, mass=0.4, com_distance=0.12)], segs)
    fam = FAMILIES["dcmotor"].with_terms(TERMS)
    batch = SegmentBatch.from_recording(rec, ["j"])
    tr = oracle_traces(batch, fam, full_params(fam, {k: np.array([[v]]) for k, v in TRUE.items()}, (1, 1)))
    for s, seg in enumerate(rec.segments):
        sl = batch.segment_slice(s)
        seg.q, seg.qd = tr["q"][0, sl][:, None], tr["qd"][0, sl][:, None]
    return rec


def test_recovers_the_backward_coefficient(oracle_log: Recording) -> None:
    req = FitRequest(models=["dcmotor"], joint_terms=list(TERMS), generations=60, population=12, seed=0)
    res = fit_recording(oracle_log, req)
    got = res["joints"]["j"]["models"]["dcmotor"]["params"]
    # noise-free log: measured 3.0000 and 0.1500 (a fit without the term: 0.29 rad validation RMSE, viscous 0.008)
    assert got[TERM] == pytest.approx(TRUE[TERM], rel=0.02)
    assert got["viscous_friction"] == pytest.approx(TRUE["viscous_friction"], rel=0.02)


def _model() -> ChosenModel:
    fam = FAMILIES["dcmotor"].with_terms(TERMS)
    return ChosenModel("j", fam, {**{k: float(TRUTH[k]) for k in fam.params if k in TRUTH}, TERM: 3.0})


def test_consumers_get_the_mean_coefficient_and_a_finding() -> None:
    m, mean = _model(), TRUTH["viscous_friction"] * (1 + 3.0) / 2
    assert joint_attributes(m)["damping"] == pytest.approx(mean * RAD_PER_DEG)
    assert float(_joint_attrs(m)["damping"]) == pytest.approx(mean)
    assert any(f.code == "EXPORT.NEWTON.viscous_direction" for f in newton_warnings(m))
    assert any(f.code == "EXPORT.MJCF.viscous_direction" for f in mjcf_warnings(m))
    res = make_result({"j": {"dcmotor": model_entry("dcmotor", {**TRUTH, TERM: 3.0}, TERMS)}})
    groups = actuator_cfgs(res)
    (spec,) = groups.values()
    assert spec["cfg"]["viscous_friction"] == pytest.approx(mean)
    assert any(f.code == "EXPORT.ISAACLAB.viscous_direction" for f in cfg_hazards(groups))
