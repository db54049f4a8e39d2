"""Recovery on logs BAM's own simulator makes (tests/bam_logs.py): each rich friction family fitted to a log of
the BAM model of its class (M2–M6) gives back the parameters that made it.

A parameter counts as recovered within 10 % of its truth, as in the other recovery tests, or, where the log
constrains it less than that, with its truth inside the fit's own 95 % interval. The motor and the family's
defining terms must meet the 10 % bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bam_logs import our_truth, write_logs

from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.fitting.fit import FitRequest, fit_recording

MOTOR = {
    "kt": 0.366,
    "R": 2.81,
    "armature": 0.0018,
    "q_offset": 0.0,
    "friction_viscous": 0.02,
    "friction_base": 0.03,
}
STRIBECK = {"friction_stribeck": 0.05, "dtheta_stribeck": 0.3, "alpha": 2.0}
DIRECTIONAL = {
    "load_friction_motor": 0.15,
    "load_friction_external": 0.06,
    "load_friction_motor_stribeck": 0.2,
    "load_friction_external_stribeck": 0.1,
}
# physics steps per 5 ms sample: at one, the integration error alone moves the weakest terms out of their
# intervals (BAM's log is near the continuous law); at two the law shows
DECIMATION = 2
# CMA-ES generations per search: the answer is the least-squares refine's, which reaches the optimum the
# default budget reaches from where these leave it
GENERATIONS = 15
CORE = ("stiffness", "damping", "armature", "friction", "viscous_friction")
# family: (BAM model, its parameters, the terms that must come back within 10 %); M6 is asked with M5, the
# nested family its search starts from
CASES = {
    "dcmotor_stribeck": ("m2", STRIBECK, ("stribeck_friction", "stribeck_velocity")),
    "dcmotor_loadfric": ("m3", {"load_friction_base": 0.12}, ("load_friction",)),
    "dcmotor_stribeck_load": (
        "m4",
        {**STRIBECK, "load_friction_base": 0.08, "load_friction_stribeck": 0.1},
        ("stribeck_friction", "stribeck_velocity", "load_friction", "load_friction_stribeck"),
    ),
    "dcmotor_directional_load": (
        "m5",
        {**STRIBECK, **DIRECTIONAL},
        ("stribeck_friction", "load_friction", "load_friction_external", "load_friction_stribeck"),
    ),
    "dcmotor_quadratic_load": (
        "m6",
        {**STRIBECK, **DIRECTIONAL, "load_friction_motor_quad": 0.3, "load_friction_external_quad": 0.2},
        ("stribeck_friction", "load_friction", "load_friction_external"),
    ),
}


@pytest.mark.parametrize("family", list(CASES))
def test_the_family_recovers_the_bam_model_that_made_the_log(family: str, tmp_path: Path) -> None:
    bam_name, terms, defining = CASES[family]
    params = {**MOTOR, **terms}
    rec = read_paths(write_logs(tmp_path, bam_name, params))
    truth = our_truth(rec, params)
    families = ["dcmotor_directional_load", family] if bam_name == "m6" else [family]
    fit = fit_recording(
        rec, FitRequest(families=families, seed=0, decimation=DECIMATION, generations=GENERATIONS)
    )
    model = fit["joints"]["xl330"]["models"][family]
    assert set(truth) <= set(model["params"]), sorted(set(truth) - set(model["params"]))
    missed = {}
    for name, want in truth.items():
        got = model["params"][name]
        lo, hi = model["intervals"][name]["interval95"]
        within = abs(got - want) <= 0.10 * abs(want)
        if not within and (name in CORE or name in defining or not lo <= want <= hi):
            missed[name] = (want, got, (lo, hi))
    assert not missed, missed
