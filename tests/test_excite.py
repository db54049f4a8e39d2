"""Excitation design: every kind inside the user's bounds, written as a canonical log, over CLI and HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from actuator_sysid.cli import main
from actuator_sysid.datasets import read_log
from actuator_sysid.datasets.excitation import (
    KINDS,
    ExcitationError,
    ExcitationSpec,
    crest_factor,
    design,
    excitation_files,
    schroeder_phases,
    torque,
)

LOAD = {"mass": 0.5, "com_distance": 0.2, "inertia": 0.002}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_stays_within_the_bounds(kind: str) -> None:
    spec = ExcitationSpec(kind=kind, duration=12, rate=200, q_min=-0.8, q_max=1.2, qd_max=3.0, tau_max=1.5,
                          f_min=0.2, f_max=4.0, **LOAD)
    rec = design(spec)
    for s in rec.segments:
        assert s.q_des.min() >= -0.8 - 1e-9 and s.q_des.max() <= 1.2 + 1e-9
        if s.metadata.get("free_swing"):
            continue
        assert np.abs(np.gradient(s.q_des[:, 0], s.t)).max() <= 3.0
        assert np.abs(torque(spec, s.q_des[:, 0], s.t)).max() <= 1.5 * 1.01
        assert np.ptp(s.q_des) > 0.05  # it does move
    if kind in ("lift_and_drop", "bam"):
        assert any(s.metadata.get("free_swing") for s in rec.segments)


def test_multisine_has_schroeder_phases_and_a_low_crest_factor() -> None:
    assert schroeder_phases(4) == pytest.approx([0.0, -np.pi / 2, -3 * np.pi / 2, -3 * np.pi])
    rec = design(ExcitationSpec(kind="multisine", duration=20, f_min=0.1, f_max=3.0))
    assert rec.metadata["excitation"]["crest_factor"] < 2.0
    rng = np.random.default_rng(0)  # random phases do worse
    t = np.arange(4000) / 200
    x = sum(np.cos(2 * np.pi * 0.1 * k * t + rng.uniform(0, 2 * np.pi)) for k in range(1, 31))
    assert crest_factor(x) > rec.metadata["excitation"]["crest_factor"]


def test_impossible_requests_are_refused() -> None:
    with pytest.raises(ExcitationError, match="q_max"):
        design(ExcitationSpec(q_min=1.0, q_max=0.5))
    with pytest.raises(ExcitationError, match="unknown excitation kind"):
        design(ExcitationSpec(kind="noise"))
    with pytest.raises(ExcitationError, match="gravity torque"):
        design(ExcitationSpec(kind="chirp", q_min=1.0, q_max=2.0, tau_max=0.1, **LOAD))


def test_cli_excite_writes_a_canonical_log(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "ex" / "lift.csv"
    assert main(["excite", "--kind", "bam", "--duration", "6", "--rate", "100", "--q-min", "-0.5", "--q-max",
                 "1.5", "--qd-max", "4", "--mass", "0.5", "--com-distance", "0.1", "--kp", "8", "--out",
                 str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    rec = read_log(out)
    assert [s.name for s in rec.segments] == ["sin_time_square", "lift", "drop", "up_and_down"]
    assert rec.segments[2].metadata["free_swing"] is True and rec.segments[0].metadata["kp"] == 8.0
    assert rec.joints[0].mass == 0.5
    assert "no free-swing" not in " ".join(rec.summary()["quality"]["warnings"])
    assert main(["excite", "--kind", "chirp", "--duration", "2", "--rate", "50", "--f-max", "2"]) == 0
    assert capsys.readouterr().out.startswith("t,joint,q,qd,q_des")
    assert main(["excite", "--q-min", "1", "--q-max", "0"]) == 2
    assert "q_max" in capsys.readouterr().err


def test_http_excitations_route(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from actuator_sysid.service.app import create_app
    from actuator_sysid.service.settings import Settings

    client = TestClient(create_app(Settings(data_dir=tmp_path / "data")))
    r = client.post("/api/v1/excitations", json={"kind": "multisine", "duration": 5, "rate": 100, "q_min": -0.5,
                                                  "q_max": 0.5, "qd_max": 2.0, "f_max": 3.0})
    assert r.status_code == 200, r.text
    body = r.json()
    text, side = excitation_files(ExcitationSpec(kind="multisine", duration=5, rate=100, q_min=-0.5, q_max=0.5,
                                                 qd_max=2.0, f_max=3.0))
    assert body["csv"] == text and body["sidecar"] == json.loads(json.dumps(side))
    r = client.post("/api/v1/excitations", json={"kind": "chirp", "q_min": 1, "q_max": 0})
    assert r.status_code == 422 and "q_max" in r.json()["detail"]


def test_designed_excitation_identifies_a_dcmotor() -> None:
    """Issue 4 acceptance 4 (uses the lead's rollout and fit): chirp + multisine + steps designed for the demo
    pendulum, simulated with stated DCMotor parameters plus sensor noise, fitted back within 5 %."""
    from actuator_sysid.cli import DEMO_FAMILY, DEMO_LOAD, DEMO_TRUTH
    from actuator_sysid.fitting.api import FitRequest, simulate
    from actuator_sysid.service.jobs import compute_fit

    rec = None
    for kind in ("chirp", "multisine", "steps"):
        spec = ExcitationSpec(kind=kind, duration=8, rate=200, q_min=-1.5, q_max=1.5, qd_max=8.0, f_min=0.2,
                              f_max=4.0, joint="pendulum", kp=DEMO_TRUTH["stiffness"], kd=DEMO_TRUTH["damping"],
                              seed=1, **DEMO_LOAD)
        part = design(spec)
        rec = part if rec is None else rec
        if part is not rec:
            rec.segments += part.segments
    assert rec is not None
    sim = simulate(rec, "pendulum", DEMO_FAMILY, DEMO_TRUTH)
    rng = np.random.default_rng(0)
    for seg in rec.segments:
        s = sim[seg.name]
        seg.q = (s["q"] + rng.normal(0, 1e-3, seg.n))[:, None]
        seg.qd = (s["qd"] + rng.normal(0, 2e-2, seg.n))[:, None]
        seg.tau = (s["applied"] + rng.normal(0, 1e-2, seg.n))[:, None]
    fit = compute_fit(rec, FitRequest(models=[DEMO_FAMILY], seed=0), lambda fraction, message: None)
    got = fit.result["joints"]["pendulum"]["models"][DEMO_FAMILY]["params"]
    for name, truth in DEMO_TRUTH.items():
        assert got[name] == pytest.approx(truth, rel=0.05), name
