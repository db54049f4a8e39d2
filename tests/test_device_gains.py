"""Gains in device units and the supply voltage: one SI conversion per actuator shared by every segment.

Logs come from the real Isaac Lab DCMotor (tests/isaaclab_logs.py) with stiffness = c·kp_s per segment (a
servo whose firmware kp is not in N·m/rad), at two loads; the fit must recover c (gain_scale) within 2 % and
the other parameters within the tolerances of tests/test_recovery.py. A voltage-driven servo's stall torque,
no-load speed and SI stiffness scale with the supply: a two-voltage log must be fitted by one model.
"""

from __future__ import annotations

import json

import isaaclab_logs as il
import numpy as np
import pytest

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.export import ExportError, render_format
from actuator_sysid.fitting.fit import FitRequest, FitRequestError, fit_recording
from actuator_sysid.models.families import FAMILIES
from actuator_sysid.models.oracle import oracle_traces
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params, operating_points

TIGHT = ("stiffness", "damping", "saturation_effort", "actuator_velocity_limit")
LOOSE = ("armature", "friction", "viscous_friction")
C = 0.0625  # N·m/rad per firmware kp unit: stiffness 25 N·m/rad at kp 400
VIN_REF = 6.0


def _segment(name: str, truth: dict[str, float], kind: str, mass: float, meta: dict) -> Segment:
    """One 6 s segment of the real Isaac Lab DCMotor on a pendulum of `mass` (the generator's integrator)."""
    t = np.arange(int(il.SEGMENT_S * il.RATE_HZ)) * il.DT
    q_des = il.targets(kind, t)
    saved = dict(il.LOAD)
    il.LOAD["mass"] = mass  # the generator reads its load from this dict
    try:
        sim = il.simulate_segment(il.make_actuator("dcmotor", truth), truth, q_des)
    finally:
        il.LOAD.update(saved)
    col = lambda a: np.asarray(a, np.float64)[:, None]  # noqa: E731
    z = np.zeros_like(t)
    return Segment(
        name,
        t,
        q=col(sim["q"]),
        qd=col(sim["qd"]),
        q_des=col(q_des),
        qd_des=col(z),
        tau_ff=col(z),
        metadata={"trajectory": kind, "joints": {"hinge": {"mass": mass}}, **meta},
    )


def _recording(segments: list[Segment]) -> Recording:
    joint = JointInfo(
        "hinge", mass=il.LOAD["mass"], com_distance=il.LOAD["com_distance"], gravity=il.LOAD["gravity"]
    )
    return Recording(
        [joint], segments, source_format="isaaclab-test-bench", metadata={"gain_units": "device"}
    )


@pytest.fixture(scope="module")
def device_log() -> Recording:
    """kp 100, 200, 400 (firmware units) at two loads; stiffness = C·kp, the rest of TRUTH_DCMOTOR."""
    segs = []
    for kp in (100.0, 200.0, 400.0):
        for mass, kind in ((1.0, "chirp"), (0.6, "fast"), (1.0, "steps")):
            truth = {**il.TRUTH_DCMOTOR, "stiffness": C * kp}
            segs.append(_segment(f"kp{kp:g}-{kind}-{mass:g}", truth, kind, mass, {"kp": kp}))
    return _recording(segs)


def test_device_gains_are_recovered(device_log: Recording) -> None:
    """gain_scale within 2 % of C; the SI stiffness at each kp follows; the other parameters as test_recovery."""
    result = fit_recording(device_log, FitRequest(models=["dcmotor"], holdout="kp=200", seed=0))
    joint = result["joints"]["hinge"]
    gains = joint["device_gains"]
    assert gains["units"] == "device" and gains["kp_reference"] == 100.0  # tie between counts: the lowest
    assert abs(gains["gain_scale"] / C - 1) < 0.02, gains
    lo, hi = gains["gain_scale_interval"]
    assert lo <= gains["gain_scale"] <= hi
    assert gains["stiffness_at"].keys() == {"100", "200", "400"}
    assert abs(gains["stiffness_at"]["400"] / (400 * C) - 1) < 0.02
    fitted = joint["models"]["dcmotor"]["params"]
    truth = {**il.TRUTH_DCMOTOR, "stiffness": C * 100}  # the fitted stiffness is the SI value at kp_ref
    for k in TIGHT:
        assert abs(fitted[k] / truth[k] - 1) < 0.05, (k, fitted[k], truth[k])
    for k in LOOSE:
        assert abs(fitted[k] / truth[k] - 1) < 0.15, (k, fitted[k], truth[k])
    # the held-out kp is predicted by the same conversion
    assert joint["models"]["dcmotor"]["metrics"]["validation"]["position_rmse"] < 5e-3
    assert result["assumptions"]["gain_units"] == {"hinge": "device"}
    # exports: the default is the reference kp (the values as fitted); --at kp=400 writes 4x the stiffness
    default = json.loads(render_format(result, device_log, "isaaclab.json"))
    at400 = json.loads(render_format(result, device_log, "isaaclab.json", at={"kp": 400.0}))
    assert (
        default["operating_point"]["hinge"]["kp"] == 100.0 and default["operating_point"]["hinge"]["default"]
    )
    assert at400["operating_point"]["hinge"]["kp"] == 400.0
    k_def, k_400 = (_json_values(d, "stiffness") for d in (default, at400))
    assert k_def == pytest.approx([fitted["stiffness"]] * len(k_def)) and k_400 == pytest.approx(
        [4 * k for k in k_def]
    )
    assert render_format(result, device_log, "isaaclab.py", at={"kp": 400.0}).startswith(
        "# operating point: hinge: kp=400"
    )
    with pytest.raises(ExportError, match="kd"):
        render_format(result, device_log, "isaaclab.json", at={"kd": 2.0})


def _json_values(doc: object, key: str) -> list[float]:
    """Every number under `key` anywhere in a JSON document."""
    if isinstance(doc, dict):
        return [
            v
            for k, x in doc.items()
            for v in ([x] if k == key and isinstance(x, int | float) else _json_values(x, key))
        ]
    if isinstance(doc, list):
        return [v for x in doc for v in _json_values(x, key)]
    return []


def test_supply_voltage_scales_envelope_and_stiffness() -> None:
    """A voltage-driven servo at 6 V and 8 V: stall torque, no-load speed and SI stiffness ∝ vin, one fit."""
    segs = []
    for vin in (VIN_REF, 8.0):
        r = vin / VIN_REF
        truth = {
            **il.TRUTH_DCMOTOR,
            "stiffness": C * 400 * r,
            "saturation_effort": 7.0 * r,
            "actuator_velocity_limit": 9.0 * r,
        }
        for kind in ("chirp", "fast"):
            segs.append(_segment(f"v{vin:g}-{kind}", truth, kind, 1.0, {"kp": 400.0, "vin": vin}))
    rec = _recording(segs)
    op = operating_points(rec, "hinge")
    assert op.vin_reference == VIN_REF and op.varies
    batch = SegmentBatch.from_recording(rec, ["hinge"])
    assert np.allclose(batch.seg_sat_mult, [1, 1, 8 / 6, 8 / 6]) and np.allclose(
        batch.seg_kp_mult, batch.seg_sat_mult
    )
    result = fit_recording(rec, FitRequest(models=["dcmotor"], seed=0))
    fitted = result["joints"]["hinge"]["models"]["dcmotor"]["params"]
    truth = {**il.TRUTH_DCMOTOR, "stiffness": C * 400}
    for k in TIGHT:
        assert abs(fitted[k] / truth[k] - 1) < 0.05, (k, fitted[k], truth[k])
    gains = result["joints"]["hinge"]["device_gains"]
    assert gains["vin_reference"] == VIN_REF
    assert abs(gains["saturation_effort_at"]["8"] / (7.0 * 8 / 6) - 1) < 0.05


SERVO = {"duty_per_kp_rad": 0.004, "max_duty": 0.95, "current_limit": 1.5}


@pytest.mark.parametrize("servo", [False, True])
def test_kernel_matches_oracle_with_enable_and_multipliers(servo: bool) -> None:
    """Per-sample torque enable, per-segment gain / envelope multipliers and the voltage-servo envelope tie:
    the kernel and the oracle agree."""
    truth = {**il.TRUTH_DCMOTOR, "stiffness": 20.0}
    extra = {"voltage_servo": SERVO} if servo else {}
    segs = [
        _segment(f"s{i}", truth, kind, 1.0, {"kp": kp, "vin": vin, **extra})
        for i, (kind, kp, vin) in enumerate((("chirp", 100.0, 6.0), ("fast", 300.0, 7.5)))
    ]
    for s in segs:
        s.q, s.qd, s.q_des = s.q[:300], s.qd[:300], s.q_des[:300]
        s.t, s.qd_des, s.tau_ff = s.t[:300], s.qd_des[:300], s.tau_ff[:300]
    segs[1].enable = np.ones((300, 1), bool)
    segs[1].enable[120:220] = False  # a torque-off stretch inside the segment
    rec = _recording(segs)
    fam = FAMILIES["dcmotor_delay"]
    batch = SegmentBatch.from_recording(rec, ["hinge"], window=80)
    assert batch.enable.sum() == batch.n_samples - 100
    rng = np.random.default_rng(3)
    free = {
        "stiffness": rng.uniform(5, 30, 3),
        "damping": rng.uniform(0.1, 1, 3),
        "saturation_effort": rng.uniform(3, 8, 3),
        "actuator_velocity_limit": rng.uniform(5, 12, 3),
        "actuator_effort_limit": rng.uniform(2, 5, 3),
        "armature": rng.uniform(0.005, 0.03, 3),
        "friction": rng.uniform(0, 0.3, 3),
        "viscous_friction": rng.uniform(0, 0.1, 3),
        "delay": [0, 2, 4],
    }
    params = full_params(fam, free, (3, 1))
    ours = RolloutEngine(batch).traces(fam, params)
    ref = oracle_traces(batch, fam, params)
    for key in ("q", "qd", "applied"):
        assert np.abs(ours[key] - ref[key]).max() <= 2e-4 * max(1.0, float(np.abs(ref[key]).max())), key
    off = np.flatnonzero(batch.enable == 0)
    assert off.size and np.all(ours["applied"][:, off] == 0)
    # the second segment (kp 300, 7.5 V) runs with 3·1.25 the stiffness of the reference (kp 100, 6 V)
    s1 = batch.seg_names.index("s1")
    assert batch.seg_kp_mult[s1] == pytest.approx(3 * 7.5 / 6) and batch.seg_sat_mult[s1] == pytest.approx(
        1.25
    )
    if (
        servo
    ):  # the tie: kt/R = K_s/(vin_s·duty_s) → saturation effort = max_duty·K_s/duty_s, velocity limit = sat/D
        assert batch.seg_duty[s1] == pytest.approx(0.004 * 300) and batch.seg_vin[s1] == pytest.approx(7.5)
        op = operating_points(rec, "hinge")
        env = op.tied_envelope(10.0, 0.5)
        assert env["saturation_effort"] == pytest.approx(0.95 * 10.0 / 0.4)
        assert env["actuator_velocity_limit"] == pytest.approx(env["saturation_effort"] / 0.5)
        assert env["actuator_effort_limit"] == pytest.approx(1.5 * 0.5 * 6.0 * 0.4 / 10.0)
    else:
        assert not batch.seg_duty.any()


def test_device_units_need_a_logged_kp() -> None:
    rec = _recording([_segment("a", il.TRUTH_DCMOTOR, "chirp", 1.0, {})])
    with pytest.raises(FitRequestError, match="log no kp"):
        fit_recording(rec, FitRequest(models=["dcmotor"], generations=2))


def test_enable_and_device_metadata_survive_save_and_load(tmp_path) -> None:
    """The stored dataset (Recording.save / load) keeps the per-sample torque enable."""
    seg = _segment("a", il.TRUTH_DCMOTOR, "chirp", 1.0, {"kp": 100.0})
    seg.enable = np.arange(seg.n)[:, None] % 7 != 0
    _recording([seg]).save(tmp_path / "rec")
    back = Recording.load(tmp_path / "rec")
    assert np.array_equal(back.segments[0].enable, seg.enable) and back.metadata["gain_units"] == "device"
    assert np.array_equal(back.segments[0].driven(0), seg.enable[:, 0])
