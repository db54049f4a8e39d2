"""Our plant against BAM's on the real XL330 logs: the firmware's P law against the PWM the servo logged, BAM's own
M1 fit replayed in our kernel, and the voltage servo's winding-resistance range (the back-EMF damping kt²/R keeps R
within 2–5 Ω)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from bam_logs import our_truth

from actuator_sysid.datasets.bam import VOLTAGE_SERVOS
from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.datasets.recording import Recording
from actuator_sysid.fitting.objective import pool_metrics, segment_metrics
from actuator_sysid.models.families import get_family
from actuator_sysid.models.oracle import oracle_traces
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params, operating_points

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "bam-xl330" / "processed"
RAW = (
    DATA.parent / "raw"
)  # as recorded: the XL330's `load` is its Present PWM register (counts of 885, 16-bit signed)
# measured 2026-12-01: rms |logged PWM − P law| per file 0.0008–0.0052 at kp 100 and 200 (every sample torque on),
# 0.0027–0.0240 at kp 800; bound 1.25× the largest
PWM_LAW_RMS = 0.03
# BAM 1.0.2's M1 fit (bam.fit, CMA-ES, 2000 trials, kp = 800 held out), measured 2026-12-01 with
# bench/real_bam.py, and its own simulator's validation position MAE per kp = 800 file
BAM_M1 = {
    "kt": 0.34784869,
    "R": 4.25220940,
    "armature": 0.00191521,
    "q_offset": 0.03768990,
    "friction_base": 0.01502485,
    "friction_viscous": 0.00755700,
}
BAM_M1_VALIDATION = {"10h30m10": 0.0383, "10h29m54": 0.0640, "10h30m02": 0.1592, "10h29m47": 0.0997}
BAM_M1_VALIDATION_MAE = 0.0903
FAMILY = get_family("dcmotor").with_terms(("armature", "friction", "viscous_friction", "encoder_offset"))


@pytest.fixture(scope="module")
def rec() -> Recording:
    files = sorted(DATA.glob("*.json"))
    if not files:
        pytest.skip(f"the BAM XL330 logs are not here ({DATA.resolve()} has no *.json)")
    return read_paths(files)


def bam_params(rec: Recording, bam: dict[str, float]) -> dict[str, float]:
    """BAM's kt, R, … as our parameters: K = (kt/R)·vin·duty at the reference kp, D = kt²/R; BAM adds q_offset
    to the angle the load sees, we subtract the encoder offset from the measured one."""
    ours = our_truth(rec, bam)
    return {
        **ours,
        "encoder_offset": -bam["q_offset"],
        **operating_points(rec, "xl330").tied_envelope(ours["stiffness"], ours["damping"]),
    }


def _array(params: list[dict[str, float]]) -> np.ndarray:
    return full_params(FAMILY, {k: np.array([p[k] for p in params]) for k in FAMILY.params}, (len(params), 1))


def test_the_firmware_p_law_is_the_pwm_the_servo_logged() -> None:
    """duty = duty_per_kp_rad·kp·(q_des − q), clipped to ±max_duty, is what the XL330 put out: the gain conversion
    (4096 counts per turn, kp / 256, PWM limit 885) is exact, and no current limiter pulled the PWM below the law."""
    files = sorted(RAW.glob("*.json"))
    if not files:
        pytest.skip(f"the raw BAM XL330 logs are not here ({RAW.resolve()} has no *.json)")
    servo = VOLTAGE_SERVOS["xl330"]
    worst = 0.0
    for f in files:
        d = json.loads(f.read_text())
        on = [e for e in d["entries"] if e["torque_enable"]]
        pwm = np.array([e["load"] for e in on], float)
        pwm = np.where(pwm > 2**15 - 1, pwm - 2**16, pwm) / 885
        err = np.array([e["goal_position"] - e["position"] for e in on])
        law = np.clip(servo["duty_per_kp_rad"] * d["kp"] * err, -servo["max_duty"], servo["max_duty"])
        worst = max(worst, float(np.sqrt(np.mean((pwm - law) ** 2))))
        # half the gain (the manual's kp / 128) would miss by far more than the bound
        assert (
            np.sqrt(np.mean((pwm - np.clip(2 * law, -1, 1)) ** 2)) > 3 * PWM_LAW_RMS
            or np.abs(law).max() < 0.02
        )
    assert worst <= PWM_LAW_RMS


def test_bam_m1_replayed_in_our_kernel_predicts_as_bam_does(rec: Recording) -> None:
    """Our plant holds BAM's M1 model: its fitted parameters give BAM's validation MAE within 3 % (ours is
    Newton's semi-implicit step, BAM's q += q̇·dt + ½·q̈·dt², with the viscous term inside the friction budget)."""
    val = [i for i, s in enumerate(rec.segments) if s.metadata["kp"] == 800]
    batch = SegmentBatch.from_recording(rec, ["xl330"], val)
    rows = segment_metrics(RolloutEngine(batch).traces(FAMILY, _array([bam_params(rec, BAM_M1)])), batch)
    for r in rows:
        assert r["position_mae"] == pytest.approx(
            BAM_M1_VALIDATION[r["segment"][-8:]], rel=0.08, abs=0.003
        ), r
    assert pool_metrics(rows)["position_mae"] == pytest.approx(BAM_M1_VALIDATION_MAE, rel=0.03)


def test_damping_keeps_the_winding_resistance_in_range(rec: Recording) -> None:
    """A damping below R_min·(kt/R)² runs as that bound (and one above R_max·(kt/R)² as that one), in the kernel
    and in the oracle alike; inside the range it runs as given."""
    op = operating_points(rec, "xl330")
    r_min, r_max = op.resistance_range
    assert (r_min, r_max) == (2.0, 5.0)
    base = bam_params(rec, BAM_M1)
    ktr = base["stiffness"] / (op.vin_reference * op.servo["duty_per_kp_rad"] * op.kp_reference)
    lo, hi = r_min * ktr**2, r_max * ktr**2
    cands = [dict(base, damping=d) for d in (0.5 * lo, lo, base["damping"], hi, 2 * hi)]
    for c in cands:  # the envelope as the kernel computes it from the damping it runs
        c.update(op.tied_envelope(c["stiffness"], op.tied_damping(c["stiffness"], c["damping"])))
    assert op.tied_damping(base["stiffness"], 0.5 * lo) == pytest.approx(lo)
    assert op.tied_damping(base["stiffness"], base["damping"]) == base["damping"]
    n = 600  # the lift and its drop (torque off from sample 400), and a kp = 800 file
    short = dataclasses.replace(
        rec,
        segments=[
            dataclasses.replace(
                s, **{k: getattr(s, k)[:n] for k in ("t", "q", "qd", "q_des", "qd_des", "tau_ff", "enable")}
            )
            for s in rec.segments
            if s.name.endswith(("10h28m17", "10h29m47"))
        ],
    )
    batch = SegmentBatch.from_recording(short, ["xl330"])
    params = _array(cands)
    ours = RolloutEngine(batch).traces(FAMILY, params)
    ref = oracle_traces(batch, FAMILY, params)
    assert np.abs(ours["q"] - ref["q"]).max() < 1e-4
    assert np.allclose(ours["q"][0], ours["q"][1], atol=1e-5) and np.allclose(
        ours["q"][3], ours["q"][4], atol=1e-5
    )
    assert np.abs(ours["q"][1] - ours["q"][2]).max() > 1e-3
