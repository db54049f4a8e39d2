"""Residual diagnostics name what the best model lacks (issue 14).

"Measured" logs come from the real Isaac Lab actuator classes in tests/isaaclab_logs.py's own pendulum
integrator, with one effect injected around the actuator (a dead zone in its position error, a torque ∝
sin 3q, Coulomb friction, a command delay) or from our rollout of a Stribeck plant; the "simulated" traces are
report_data's rollout of the model without that effect, so each test checks that the effect is named and
that measurement noise alone is not.
"""

from __future__ import annotations

import math
from html import unescape
from pathlib import Path

import isaaclab_logs as il
import numpy as np
import pytest
import torch

from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.datasets.sources import ReadOptions
from actuator_sysid.fitting.diagnostics import diagnose
from actuator_sysid.fitting.fit import FitRequest, fit_recording, report_data
from actuator_sysid.service.report import render_report

TRUTH = dict(il.TRUTH_DCMOTOR)
NOISE_Q = 2e-4  # rad, encoder-like measurement noise on every "measured" log


class Injected:
    """A real Isaac Lab actuator with one effect injected: a dead zone on its position error, or an extra
    torque that depends on position."""

    def __init__(self, actuator, dead_zone: float = 0.0, torque=None) -> None:
        self.actuator, self.dead_zone, self.torque = actuator, dead_zone, torque

    def reset(self, ids: torch.Tensor) -> None:
        self.actuator.reset(ids)

    def compute(self, action, q: torch.Tensor, qd: torch.Tensor):
        if self.dead_zone:
            e = action.joint_positions - q
            action.joint_positions = q + torch.sign(e) * torch.clamp(e.abs() - self.dead_zone, min=0.0)
        out = self.actuator.compute(action, q, qd)
        if self.torque is not None:
            out.joint_efforts = out.joint_efforts + self.torque(float(q[0, 0]))
        return out


def measured(
    truth: dict[str, float], family: str = "dcmotor", dead_zone: float = 0.0, torque=None, seed: int = 0
) -> Recording:
    """Six 6 s test-bench segments (tests/isaaclab_logs.KINDS) through the injected Isaac Lab actuator."""
    rng = np.random.default_rng(seed)
    act = Injected(il.make_actuator(family, truth), dead_zone, torque)
    t = np.arange(int(il.SEGMENT_S * il.RATE_HZ)) * il.DT
    segments = []
    for i, kind in enumerate(il.KINDS):
        q_des = il.targets(kind, t)
        sim = il.simulate_segment(act, truth, q_des)
        col = lambda a: a[:, None].astype(np.float64)  # noqa: E731
        segments.append(
            Segment(
                name=str(i),
                t=t + 10.0 * i,
                q=col(sim["q"] + rng.normal(0, NOISE_Q, t.size)),
                qd=col(sim["qd"]),
                q_des=col(q_des),
                qd_des=col(np.zeros_like(t)),
                tau_ff=col(np.zeros_like(t)),
                metadata={"trajectory": kind},
            )
        )
    return Recording([JointInfo("hinge", **il.LOAD)], segments)


def report_traces(rec: Recording, family: str, params: dict[str, float]) -> list[dict]:
    """report_data's traces of one model over the log: what the report hands to the diagnosis."""
    result = {
        "joints": {"hinge": {"best_model": family, "models": {family: {"params": params}}}},
        "split": {"validation": []},
        "assumptions": {"physics_dt": il.DT},
    }
    return report_data(rec, result)["joints"]["hinge"]["segments"]


def kinds(findings: list[dict]) -> list[str]:
    return [f["kind"] for f in findings]


def check_shape(findings: list[dict]) -> None:
    """Every finding is plain data with a sentence and a plot whose traces have matching x and y."""
    for f in findings:
        assert isinstance(f["strength"], float) and math.isfinite(f["strength"]) and len(f["sentence"]) > 40
        assert f["plot"]["traces"] and all(len(t["x"]) == len(t["y"]) > 1 for t in f["plot"]["traces"])


@pytest.mark.parametrize("seed,qd_noise", [(0, 0.0), (5, 0.05)])
def test_noise_alone_says_no_structure(seed: int, qd_noise: float) -> None:
    segs = report_traces(measured(TRUTH, seed=seed), "dcmotor", TRUTH)
    rng = np.random.default_rng(seed + 1)
    for s in segs:  # a differentiated velocity is noisy too
        s["qd"] = (np.asarray(s["qd"]) + rng.normal(0, qd_noise, len(s["qd"]))).tolist()
    findings = diagnose(segs, il.DT)
    check_shape(findings)
    assert kinds(findings) == ["noise"], [f["sentence"] for f in findings]
    assert findings[0]["sentence"].startswith("No structure left")
    assert 0.5 * NOISE_Q < findings[0]["noise_rad"] < 1.5 * NOISE_Q


def test_white_residual_passes_the_whiteness_test() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(2000) * 0.005
    q_sim = np.sin(2 * np.pi * 0.4 * t)
    seg = {
        "t": t.tolist(),
        "q": (q_sim + rng.normal(0, 1e-3, t.size)).tolist(),
        "q_sim": q_sim.tolist(),
        "q_des": q_sim.tolist(),
        "qd": np.gradient(q_sim, t).tolist(),
        "qd_sim": np.gradient(q_sim, t).tolist(),
    }
    (f,) = diagnose([seg], 0.005)
    assert f["kind"] == "noise" and f["p_value"] > 0.01 and "Ljung–Box" in f["sentence"]


def test_a_command_delay_is_named_with_its_shift() -> None:
    truth = {**TRUTH, "delay": 3}
    segs = report_traces(measured(truth, family="delayed_pd"), "delayed_pd", {**truth, "delay": 0})
    findings = diagnose(segs, il.DT)
    check_shape(findings)
    assert kinds(findings) == ["lag"], [f["sentence"] for f in findings]
    lag = findings[0]
    assert abs(lag["shift_samples"] - 3) < 0.5 and abs(lag["shift_ms"] - 15.0) < 2.5 and lag["strength"] > 0.9
    assert "simulation leads the log by 1" in lag["sentence"] and "~3 physics steps" in lag["sentence"]
    # the other way round: a model with a delay the log does not have
    segs = report_traces(measured({**TRUTH, "delay": 0}, family="delayed_pd", seed=1), "delayed_pd", truth)
    (lag,) = [f for f in diagnose(segs, il.DT) if f["kind"] == "lag"]
    assert abs(lag["shift_samples"] + 3) < 0.5 and "log leads the simulation" in lag["sentence"]


def test_stiction_is_a_friction_band_near_zero_velocity() -> None:
    rec = measured(TRUTH)
    stribeck = {**TRUTH, "stribeck_friction": 0.8, "stribeck_velocity": 0.3, "stribeck_exponent": 2.0}
    rng = np.random.default_rng(2)
    for seg, m in zip(rec.segments, report_traces(rec, "dcmotor_stribeck", stribeck), strict=True):
        seg.q[:, 0] = np.asarray(m["q_sim"]) + rng.normal(
            0, NOISE_Q, seg.n
        )  # our rollout of a Stribeck plant
        seg.qd[:, 0] = np.asarray(m["qd_sim"])
    findings = diagnose(report_traces(rec, "dcmotor", TRUTH), il.DT)
    check_shape(findings)
    assert "friction_band" in kinds(findings) and "lag" not in kinds(findings), [
        f["sentence"] for f in findings
    ]
    band = next(f for f in findings if f["kind"] == "friction_band")
    assert band["rms_still"] > band["rms_moving"] and "Stribeck" in band["sentence"]


def test_missing_coulomb_friction_is_named() -> None:
    segs = report_traces(measured({**TRUTH, "friction": 0.5}), "dcmotor", {**TRUTH, "friction": 0.0})
    findings = diagnose(segs, il.DT, TRUTH["stiffness"])
    check_shape(findings)
    assert "friction" in kinds(findings), [f["sentence"] for f in findings]
    assert not {"lag", "position", "friction_band"} & set(kinds(findings))
    assert next(f for f in findings if f["kind"] == "friction")["energy_ratio"] < 0.95
    # under the PD loop the friction also holds the joint short, like a dead zone of F / kp (0.02 rad)
    hold = next(f for f in findings if f["kind"] == "dead_zone")
    assert 0.3 < hold["width_rad"] * TRUTH["stiffness"] < 1.0 and "N·m" in hold["sentence"]


def test_a_dead_zone_is_named_with_its_width() -> None:
    segs = report_traces(measured(TRUTH, dead_zone=0.04), "dcmotor", TRUTH)
    findings = diagnose(segs, il.DT)
    check_shape(findings)
    assert "dead_zone" in kinds(findings), [f["sentence"] for f in findings]
    assert not {"lag", "friction", "friction_band"} & set(kinds(findings))
    assert 0.02 < next(f for f in findings if f["kind"] == "dead_zone")["width_rad"] < 0.06


def test_a_position_dependent_torque_is_named() -> None:
    segs = report_traces(measured(TRUTH, torque=lambda q: 0.4 * math.sin(3.0 * q)), "dcmotor", TRUTH)
    findings = diagnose(segs, il.DT)
    check_shape(findings)
    assert "position" in kinds(findings), [f["sentence"] for f in findings]
    assert not {"lag", "dead_zone", "friction_band"} & set(kinds(findings))
    pos = next(f for f in findings if f["kind"] == "position")
    assert pos["strength"] > 0.8 and 0.008 < pos["amplitude_rad"] < 0.03  # 0.4 N·m / 25 N·m/rad = 0.016 rad


def test_report_shows_what_the_residual_shows() -> None:
    """A real (small) fit of a delayed log with a family that has no delay: the report says what is left.

    The fit mimics the delay with damping and friction, so what is left is excess dissipation, not a shift.
    """
    rec = measured({**TRUTH, "delay": 4}, family="delayed_pd")
    rec.segments = rec.segments[:3]
    result = fit_recording(rec, FitRequest(models=["ideal_pd"], generations=15, population=8, seed=0))
    plots = report_data(rec, result)
    html = render_report({"id": "x", "status": "succeeded"}, result, plots)
    assert "What the residual shows" in html
    assert 'id="plot-0-diag-0"' in html and html.index("What the residual shows") < html.index(
        'id="plot-0-residuals"'
    )
    findings = diagnose(plots["joints"]["hinge"]["segments"], result["assumptions"]["physics_dt"])
    assert findings and not {"noise", "unexplained"} & set(kinds(findings)), [f["sentence"] for f in findings]
    check_shape(findings)
    for k, f in enumerate(findings):
        assert f["sentence"] in unescape(html) and f'id="plot-0-diag-{k}"' in html
    # the noise-only log gets its one "no structure" line in the report too
    rec = measured(TRUTH)
    params = {
        k: TRUTH[k]
        for k in (
            "stiffness",
            "damping",
            "saturation_effort",
            "actuator_velocity_limit",
            "actuator_effort_limit",
            "armature",
            "friction",
            "viscous_friction",
        )
    }
    result = {
        "joints": {"hinge": {"best_model": "dcmotor", "models": {"dcmotor": {"params": params}}}},
        "split": {"validation": []},
        "assumptions": {"physics_dt": il.DT},
    }
    html = render_report({"id": "y", "status": "succeeded"}, result, report_data(rec, result))
    assert "No structure left: the residual" in html and 'id="plot-0-diag-0"' in html


GO2 = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "go2-in-air" / "go2_chirp_train.pt"
GO2_JOINTS = [f"{leg}_{part}_joint" for leg in ("FL", "FR", "RL", "RR") for part in ("hip", "thigh", "calf")]


@pytest.mark.parametrize("joint", ["FL_calf_joint", "RL_calf_joint"])
def test_real_go2_knee_shows_its_stiction_band(joint: str) -> None:
    """The real Go2 in-air chirp: its data README reports a stiction plateau after each reversal of the knees
    (found by a peer's fits, not ours); a fit without stiction leaves exactly that band near zero velocity."""
    if not GO2.is_file():
        pytest.skip(f"the Go2 log is not here ({GO2})")
    rec = read_paths([GO2], options=ReadOptions(joint_names=GO2_JOINTS))
    result = fit_recording(
        rec, FitRequest(joints=[joint], models=["ideal_pd"], generations=20, population=8, seed=0)
    )
    plots = report_data(rec, result)
    findings = diagnose(plots["joints"][joint]["segments"], result["assumptions"]["physics_dt"])
    check_shape(findings)
    assert kinds(findings) == ["friction_band"], [f["sentence"] for f in findings]
    band = findings[0]
    assert band["rms_still"] > 1.3 * band["rms_moving"]
