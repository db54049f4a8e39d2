"""Servo firmware laws as data (datasets/servo_laws.py) and the velocity-limited goal (models/components/servo_goal.py):
the table against BAM's own actuator classes, recovery on logs BAM's Feetech STS3215 simulator makes (its duty law,
duty clip and slewed goal), and an unlisted servo's law fitted through the generic law.

Tolerances: the motor and the goal rate within 5 % (the fits below land within 2.5 %), the friction terms within
10 %, as the other recovery tests; a held-out MAE within 1.5× (+1 mrad) of the truth's own replay in our kernel.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import bam as bam_package
import numpy as np
import pytest
from bam.actuators import actuators
from bam_logs import write_feetech_logs

from actuator_sysid.datasets.bam import VOLTAGE_SERVOS
from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.datasets.recording import DatasetError, Recording
from actuator_sysid.datasets.servo_laws import GENERIC, SERVO_LAWS, generic_terms, law_for
from actuator_sysid.export.selection import ChosenModel
from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.fitting.objective import pool_metrics, segment_metrics
from actuator_sysid.models.components import get as component
from actuator_sysid.models.components.servo_goal import fits_goal_rate, held_rate
from actuator_sysid.models.families import get_family
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params, operating_points

# BAM's own STS3215 M1 fit (bam/params/feetech_sts3215_7_4V/m1.json), q_offset 0, the goal slewed at 4 rad/s
STS = {"kt": 1.21164, "R": 2.67617, "armature": 0.0284, "friction_base": 0.0524, "friction_viscous": 0.0591}
RATE = 4.0
PENDULUM = {"mass": 0.5, "length": 0.15, "arm_mass": 0.0}
RUNS = ("lift_and_drop", "sin_time_square", "up_and_down")
DECIMATION = 2
TERMS = ("armature", "friction", "viscous_friction", "goal_rate_limit")
FAMILY = get_family("dcmotor").with_terms(TERMS)
TIGHT = ("stiffness", "damping", "goal_rate_limit")  # within 5 %; the friction terms within 10 %
GENERATIONS = 15  # the least-squares refine sets the answer: 15 generations give what 120 do


@pytest.mark.unit
def test_the_table_holds_bams_numbers() -> None:
    """Every voltage row is BAM's class: its error gain, duty limit and current limit; the XL330's is unchanged,
    its kt the mean of BAM's own identified XL330 models."""
    assert VOLTAGE_SERVOS["xl330"] == {
        "duty_per_kp_rad": (4096 / (2 * np.pi)) / (256 * 885),
        "max_duty": 1.0,
        "current_limit": 1.75,
        "resistance": [2.0, 5.0],
        "kt": SERVO_LAWS["xl330"].kt,
    }
    kts = [
        json.loads(f.read_text())["kt"]
        for f in (Path(bam_package.__file__).parent / "params" / "xl330").glob("m*.json")
    ]
    assert len(kts) == 6 and SERVO_LAWS["xl330"].kt == pytest.approx(np.mean(kts), abs=5e-4), kts
    assert set(VOLTAGE_SERVOS) == {"xl330", "xl320", "mx64", "mx106", "sts3215"}
    for name, law in SERVO_LAWS.items():
        bam = actuators[name]()
        assert law.source.startswith("bam/") and type(bam).__name__ in law.source, name
        if law.drive != "voltage":
            assert law.voltage_servo() is None and not hasattr(bam, "max_pwm"), name
            continue
        assert law.duty_per_kp_rad == pytest.approx(bam.error_gain, rel=1e-12), name
        assert law.max_duty == bam.max_pwm and law.current_limit == bam.max_current, name
    sts = actuators["sts3215"]()
    assert SERVO_LAWS["sts3215"].goal_rate_limit == pytest.approx(sts.default_max_velocity)
    assert VOLTAGE_SERVOS["sts3215"]["goal_rate_fitted"] is True


@pytest.mark.unit
def test_every_consumer_is_told_the_goal_rate_it_must_apply() -> None:
    """No consumer actuator slews its target: each gets a finding naming the fitted rate and where to apply it."""
    fitted = ChosenModel("sts3215", FAMILY, {"goal_rate_limit": 4.25})
    plain = ChosenModel("sts3215", get_family("dcmotor"), {"goal_rate_limit": 4.25})
    for consumer in ("isaaclab", "newton", "mjcf"):
        (note,) = component("servo_goal").notes(consumer, fitted)
        assert note[0] == "goal_rate_limit" and "4.25 rad/s" in note[2], note
        assert component("servo_goal").notes(consumer, plain) == []


@pytest.mark.unit
def test_an_unlisted_servo_gets_the_generic_law_and_is_told(tmp_path: Path) -> None:
    law, note = law_for("STS3250")
    assert law is GENERIC and note is not None and "'STS3250'" in note and "generic" in note
    assert law_for("XL330") == (SERVO_LAWS["xl330"], None) and law_for(None) == (None, None)
    log = {**PENDULUM, "kp": 32, "vin": 7.4, "motor": "sts3250", "dt": 0.005}
    log["entries"] = [{"position": 0.0, "goal_position": 0.1, "timestamp": 0.005 * k} for k in range(50)]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(log))
    rec = read_paths([path])
    assert any("'sts3250' is not in the firmware law table" in w for w in rec.warnings)
    meta = rec.segments[0].metadata
    assert meta["servo_law"] == "generic" and "voltage_servo" not in meta
    assert fits_goal_rate(rec, "sts3250")  # its goal rate, if any, is the log's to tell
    stated = dataclasses.replace(
        rec, segments=[dataclasses.replace(rec.segments[0], metadata={**meta, "goal_rate_limit": 3.0})]
    )
    assert not fits_goal_rate(stated, "sts3250")
    assert SegmentBatch.from_recording(stated, ["sts3250"]).seg_goal_rate.tolist() == [3.0]
    bad = dataclasses.replace(
        rec, segments=[dataclasses.replace(rec.segments[0], metadata={**meta, "goal_rate_limit": -1.0})]
    )
    with pytest.raises(DatasetError, match="goal_rate_limit must be a positive rate"):
        SegmentBatch.from_recording(bad, ["sts3250"])


def _truth(rec: Recording, joint: str, error_gain: float, max_pwm: float, rate: float) -> dict[str, float]:
    """BAM's constants as our parameters at the recording's reference kp and vin: K = (kt/R)·vin·duty, D = kt²/R,
    the stall effort (kt/R)·vin·max_pwm and no-load speed stall/D (the untied envelope), no current limit."""
    op = operating_points(rec, joint)
    ktr, vin = STS["kt"] / STS["R"], op.vin_reference
    sat = ktr * vin * max_pwm
    return {
        "stiffness": ktr * vin * error_gain * op.kp_reference,
        "damping": STS["kt"] ** 2 / STS["R"],
        "saturation_effort": sat,
        "actuator_velocity_limit": sat / (STS["kt"] ** 2 / STS["R"]),
        "actuator_effort_limit": 1e3,
        "armature": STS["armature"],
        "friction": STS["friction_base"],
        "viscous_friction": STS["friction_viscous"],
        "goal_rate_limit": rate,
    }


def _replay(
    rec: Recording, joint: str, segs: list[int], truth: dict[str, float], window: int | None = None
) -> tuple[SegmentBatch, dict[str, np.ndarray]]:
    """The truth rolled out in our kernel over some segments: the batch and its traces."""
    batch = SegmentBatch.from_recording(rec, [joint], segs, substeps=DECIMATION, window=window)
    arr = full_params(FAMILY, {k: np.array([truth[k]]) for k in FAMILY.params}, (1, 1))
    return batch, RolloutEngine(batch, threads=1).traces(FAMILY, arr)


@pytest.fixture(scope="module")
def sts_rec(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    folder = tmp_path_factory.mktemp("sts3215")
    return read_paths(write_feetech_logs(folder, {**STS, "max_velocity": RATE}, runs=RUNS, pendulum=PENDULUM))


@pytest.mark.conformance
def test_our_kernel_replays_bams_feetech_law(sts_rec: Recording) -> None:
    """BAM's STS3215 in our kernel: its truth predicts BAM's log within 4 mrad, 3× better than without the slewed
    goal; a windowed rollout on the kernel's own trace replays the goal before each window exactly."""
    assert fits_goal_rate(sts_rec, "sts3215")  # the law slews the goal at a rate BAM fits
    truth = _truth(sts_rec, "sts3215", 0.166, 0.97, RATE)
    every = list(range(len(sts_rec.segments)))
    batch, traces = _replay(sts_rec, "sts3215", every, truth)
    with_rate = pool_metrics(segment_metrics(traces, batch))["position_mae"]
    unlimited = dataclasses.replace(FAMILY, joint_terms=TERMS[:-1])
    arr = full_params(unlimited, {k: np.array([truth[k]]) for k in unlimited.params}, (1, 1))
    no_batch = dataclasses.replace(batch, seg_goal_rate=np.zeros_like(batch.seg_goal_rate))
    without = pool_metrics(segment_metrics(RolloutEngine(no_batch, threads=1).traces(unlimited, arr), batch))
    assert with_rate < 0.004 and without["position_mae"] > 3 * with_rate, (with_rate, without)
    # the kernel's own trace as the log: 40-sample windows restart from it and must follow it
    own = dataclasses.replace(
        sts_rec,
        segments=[
            dataclasses.replace(
                seg,
                q=traces["q"][0, batch.segment_slice(i)][:, None].astype(float),
                qd=traces["qd"][0, batch.segment_slice(i)][:, None].astype(float),
            )
            for i, seg in enumerate(sts_rec.segments)
        ],
    )
    wb, wt = _replay(own, "sts3215", every, truth, window=40)
    assert pool_metrics(segment_metrics(wt, wb))["position_mae"] < 2e-5


def _check_recovery(
    rec: Recording, joint: str, truth: dict[str, float], names: tuple[str, ...]
) -> dict[str, float]:
    """dcmotor with the goal rate fitted on the kp = 16 runs: `names` come back within their tolerances, and the
    kp = 32 runs are predicted about as well as the truth predicts them."""
    req = FitRequest(
        families=["dcmotor"],
        add_terms=["goal_rate_limit"],
        seed=0,
        decimation=DECIMATION,
        holdout="kp=32",
        generations=GENERATIONS,
    )
    model = fit_recording(rec, req)["joints"][joint]["models"]["dcmotor"]
    got = model["params"]
    missed = {
        n: (truth[n], got[n])
        for n in names
        if abs(got[n] - truth[n]) > (0.05 if n in TIGHT else 0.10) * truth[n]
    }
    assert not missed, missed
    val = [i for i, s in enumerate(rec.segments) if s.metadata["kp"] == 32]
    batch, traces = _replay(rec, joint, val, truth)
    truth_mae = pool_metrics(segment_metrics(traces, batch))["position_mae"]
    fit_mae = model["metrics"]["validation"]["position_mae"]
    assert fit_mae <= 1.5 * truth_mae + 1e-3, (fit_mae, truth_mae)
    return got


@pytest.mark.slow
def test_the_sts3215_law_and_its_goal_rate_come_back(sts_rec: Recording) -> None:
    """The table's STS3215 law (duty 0.166 per rad·kp, clip 0.97) ties the envelope; the fit finds the motor, the
    friction and the goal rate BAM slewed its setpoint at."""
    truth = _truth(sts_rec, "sts3215", 0.166, 0.97, RATE)
    assert operating_points(sts_rec, "sts3215").servo is not None  # the table's law: the envelope is tied
    _check_recovery(sts_rec, "sts3215", truth, (*TIGHT, "armature", "friction", "viscous_friction"))


@pytest.mark.slow
def test_an_unlisted_servo_is_fitted_through_the_generic_law(tmp_path: Path) -> None:
    """BAM's Feetech law with constants the table does not hold (duty 0.12 per rad·kp, clip 0.5, goal slewed at
    2.5 rad/s), logged as 'sts3250': the generic law fits its duty scale, duty limit and goal rate."""
    paths = write_feetech_logs(
        tmp_path,
        {**STS, "max_velocity": 2.5},
        motor="sts3250",
        runs=RUNS,
        pendulum=PENDULUM,
        error_gain=0.12,
        max_pwm=0.5,
    )
    rec = read_paths(paths)
    assert operating_points(rec, "sts3250").servo is None  # nothing tied: every term is fitted
    truth = _truth(rec, "sts3250", 0.12, 0.5, 2.5)
    got = _check_recovery(
        rec,
        "sts3250",
        truth,
        (*TIGHT, "saturation_effort", "actuator_velocity_limit", "armature", "friction", "viscous_friction"),
    )
    op = operating_points(rec, "sts3250")
    assert op.kp_reference is not None and op.vin_reference is not None
    law = generic_terms(got, op.kp_reference, op.vin_reference, max_duty=0.5)  # the PWM limit as known
    for name, want in (
        ("duty_per_kp_rad", 0.12),
        ("kt", STS["kt"]),
        ("resistance", STS["R"]),
        ("goal_rate_limit", 2.5),
    ):
        assert law[name] == pytest.approx(want, rel=0.05), (name, law[name], want)


@pytest.mark.conformance
def test_the_default_ladder_fits_the_goal_rate_and_its_mjcf_slews(sts_rec: Recording) -> None:
    """No family named: every rung of the ladder fits the law's goal rate (BAM slewed at 4 rad/s), and the pick's
    MJCF is a <dcmotor> whose slewmax carries it, replayed in MuJoCo within tolerance of our rollout (the
    table's rate alone, run by the kernel but written nowhere, made every export stray 1.3-2.5x)."""
    from actuator_sysid.export import replay
    from actuator_sysid.fitting.fit import fit_result

    req = FitRequest(families=None, holdout="kp=32", generations=6, population=8, refine_iterations=6)
    res = fit_result(sts_rec, req)
    jr = res.joints["sts3215"]
    assert all("goal_rate_limit" in m.joint_terms for m in jr.models.values()), list(jr.models)
    assert jr.models[jr.best_model].params["goal_rate_limit"] == pytest.approx(RATE, rel=0.15)
    r = replay(res, sts_rec, "mjcf.xml")
    assert r["status"] == "ok" and r["within_tolerance"], r


@pytest.mark.conformance
def test_a_goal_rate_the_log_states_is_held_and_every_export_slews(sts_rec: Recording) -> None:
    """BAM's runs with the goal rate stated in their metadata (4 rad/s, as BAM slewed): a named fit of a family
    without the term holds that rate rather than searching it, and every consumer's export slews at it, so each
    replays within tolerance of our rollout (the kernel ran the stated rate while no export wrote it: every
    replay 10.5x off)."""
    from actuator_sysid.export import render_all
    from actuator_sysid.fitting.fit import fit_result

    stated = dataclasses.replace(
        sts_rec,
        segments=[
            dataclasses.replace(s, metadata={**s.metadata, "goal_rate_limit": RATE}) for s in sts_rec.segments
        ],
    )
    assert not fits_goal_rate(stated, "sts3215") and held_rate(stated, "sts3215") == RATE
    req = FitRequest(
        families=["dcmotor_delay"], holdout="kp=32", generations=6, population=8, refine_iterations=6
    )
    res = fit_result(stated, req)
    model = res.joints["sts3215"].models["dcmotor_delay"]
    assert "goal_rate_limit" in model.joint_terms and model.params["goal_rate_limit"] == RATE
    assert "goal_rate_limit" not in (model.warm_start or {}) and "goal_rate_limit" in (model.tied or {})
    doc = json.loads(render_all(res, stated)["validation.json"])
    for fmt in ("mjcf.xml", "newton.usda", "isaaclab.py"):
        r = doc["replay"][fmt]
        assert r["status"] == "ok" and r["within_tolerance"], (fmt, r)
    assert doc["passed"], doc


@pytest.mark.conformance
def test_runs_that_state_several_goal_rates_run_each_their_own(sts_rec: Recording) -> None:
    """Runs stating different goal rates: the term at its neutral value (inf, where a held search puts it) runs
    each segment's own rate, as the family without the term does, and a finite value replaces them; a fit holds
    none and says that no export carries them."""
    rates = [2.0 + i for i in range(len(sts_rec.segments))]
    stated = dataclasses.replace(
        sts_rec,
        segments=[
            dataclasses.replace(s, metadata={**s.metadata, "goal_rate_limit": r})
            for s, r in zip(sts_rec.segments, rates, strict=True)
        ],
    )
    assert held_rate(stated, "sts3215") is None
    truth = _truth(stated, "sts3215", 0.166, 0.97, math.inf)
    every = list(range(len(stated.segments)))
    batch, held = _replay(stated, "sts3215", every, truth)
    assert batch.seg_goal_rate.tolist() == rates
    plain = get_family("dcmotor").with_terms(TERMS[:-1])
    arr = full_params(plain, {k: np.array([truth[k]]) for k in plain.params}, (1, 1))
    own = RolloutEngine(batch, threads=1).traces(plain, arr)
    np.testing.assert_array_equal(held["q"], own["q"])
    _, fixed = _replay(stated, "sts3215", every, {**truth, "goal_rate_limit": 3.0})
    assert np.abs(fixed["q"] - own["q"]).max() > 1e-3
    # a fit says that no export carries them
    req = FitRequest(families=["dcmotor"], generations=2, population=8, refine_iterations=2)
    model = fit_recording(stated, req)["joints"]["sts3215"]["models"]["dcmotor"]
    assert "goal_rate_limit" not in model["params"]
    assert any("state several goal rates (2, 3, 4" in w for w in model["warnings"]), model["warnings"]
