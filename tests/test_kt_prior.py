"""The XL330's tabled motor constant as a soft prior, on logs BAM's own simulator makes (tests/bam_logs.py).

Below the current limit a voltage servo's log pins only the back-EMF damping plus viscous friction; the current
limit (1.75 A · kt) or a torque-off swing (viscous friction alone) tells them apart. A truth whose kt lies 16 %
above the table's: logs with neither get the table's kt and a warning that says so; logs with both give back the
truth's kt.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bam_logs import TRAJECTORIES as RUNS
from bam_logs import VIN, write_logs

from actuator_sysid.datasets.bam import VOLTAGE_SERVOS
from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.datasets.servo_laws import XL330_KT
from actuator_sysid.fitting.fit import FitRequest, fit_recording

TRUTH = {
    "kt": 0.44,
    "R": 2.8,
    "armature": 0.0018,
    "q_offset": 0.0,
    "friction_viscous": 0.02,
    "friction_base": 0.03,
}
LAW = VOLTAGE_SERVOS["xl330"]


def _at_current_limit(rec, kp: int) -> float:
    """The share of samples whose firmware law asks for the current limit (BAM's duty window binds)."""
    hits, n = 0, 0
    for s in rec.segments:
        duty = np.clip((s.q_des[:, 0] - s.q[:, 0]) * LAW["duty_per_kp_rad"] * kp, -1.0, 1.0)
        current = (duty * VIN - TRUTH["kt"] * s.qd[:, 0]) / TRUTH["R"]
        hits += int(np.sum(np.abs(current) >= LAW["current_limit"]))
        n += current.size
    return hits / n


def _fitted_kt(tmp_path: Path, kp: int) -> tuple[float, float, list[str]]:
    """The logs' share at the current limit, the fitted kt (effort limit / current limit) and the warnings."""
    # at kp 100 the runs that keep the torque on: a torque-off drop shows the viscous friction alone, and so kt
    runs = RUNS if kp == 800 else tuple(r for r in RUNS if r != "lift_and_drop")
    rec = read_paths(write_logs(tmp_path, "m1", TRUTH, kps=(kp,), runs=runs))
    fit = fit_recording(rec, FitRequest(families=["dcmotor"], seed=0, decimation=2, generations=15))
    model = fit["joints"]["xl330"]["models"]["dcmotor"]
    kt = model["params"]["actuator_effort_limit"] / LAW["current_limit"]
    return _at_current_limit(rec, kp), kt, model["warnings"]


def test_logs_below_the_current_limit_get_the_tabled_kt_and_are_told(tmp_path: Path) -> None:
    share, kt, warnings = _fitted_kt(tmp_path, 100)
    assert share == 0.0, share
    assert kt == pytest.approx(XL330_KT, rel=0.03), kt  # the table's, not the truth's 0.44
    assert any(w.startswith("kt: ") and f"{XL330_KT:g} N·m/A" in w for w in warnings), warnings


def test_logs_at_the_current_limit_outweigh_the_table(tmp_path: Path) -> None:
    share, kt, warnings = _fitted_kt(tmp_path, 800)
    assert share > 0.01, share
    assert kt == pytest.approx(TRUTH["kt"], rel=0.05), kt
    assert not any(w.startswith("kt: ") for w in warnings), warnings
