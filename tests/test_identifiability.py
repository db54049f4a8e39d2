"""Fits say what the data cannot tell, and integer delays come back exactly (issue 5)."""

from __future__ import annotations

from isaaclab_logs import TRUTH_DCMOTOR, make_recording

from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.models import parameters

BUDGET = {"generations": 60, "population": 8}


def test_limits_never_reached_are_reported_not_identified() -> None:
    """With limits far above any effort the log needs, the envelope cannot be identified: say so."""
    truth = {
        **TRUTH_DCMOTOR,
        "saturation_effort": 400.0,
        "actuator_effort_limit": 300.0,
        "actuator_velocity_limit": 500.0,
    }
    rec = make_recording("dcmotor", truth)
    rec.segments = rec.segments[:3]
    model = fit_recording(rec, FitRequest(models=["dcmotor"], **BUDGET))["joints"]["hinge"]["models"][
        "dcmotor"
    ]
    iv = model["intervals"]
    assert iv["stiffness"]["identified"] and abs(iv["stiffness"]["value"] / truth["stiffness"] - 1) < 0.02
    lo, hi = iv["stiffness"]["interval95"]
    assert lo < iv["stiffness"]["value"] < hi
    unidentified = [
        n
        for n in ("saturation_effort", "actuator_effort_limit", "actuator_velocity_limit")
        if not iv[n]["identified"]
    ]
    assert unidentified, iv
    for n in unidentified:
        assert iv[n]["value"] is None and iv[n]["reason"]
        assert any(w.startswith(n) for w in model["warnings"])
    # a limit the log never presses is set where it does not bind, not left wherever the search wandered
    released = [n for n in unidentified if "never presses" in iv[n]["reason"]]
    assert released, iv
    for n in released:
        assert model["params"][n] == parameters.get(n).upper


def test_delay_is_recovered_exactly_from_isaaclab_delayed_pd() -> None:
    truth = {**TRUTH_DCMOTOR, "delay": 3}
    rec = make_recording("delayed_pd", truth)
    rec.segments = rec.segments[:4]
    model = fit_recording(rec, FitRequest(models=["delayed_pd"], **BUDGET))["joints"]["hinge"]["models"][
        "delayed_pd"
    ]
    assert model["params"]["delay"] == 3
    d = model["intervals"]["delay"]
    assert d["identified"] and d["value"] == 3
    assert d["loss_at"]["2"] > d["loss_at"]["3"] < d["loss_at"]["4"]
    for k in ("stiffness", "damping", "actuator_effort_limit"):
        assert abs(model["params"][k] / truth[k] - 1) < 0.02, (k, model["params"][k])


def test_logged_gains_sit_beside_fitted_parameters() -> None:
    """Segments recorded at different known gains: with use_logged_gains the kernel runs each segment at
    its own kp/kd and fits the rest; without them one stiffness cannot explain every segment."""
    segments = []
    for kp in (15.0, 25.0, 40.0):
        rec_k = make_recording("dcmotor", {**TRUTH_DCMOTOR, "stiffness": kp})
        for seg in rec_k.segments[:2]:
            seg.name = f"kp{kp:g}-{seg.name}"
            seg.metadata["kp"], seg.metadata["kd"] = kp, TRUTH_DCMOTOR["damping"]
            segments.append(seg)
    rec_k.segments = segments
    fitted = fit_recording(rec_k, FitRequest(models=["dcmotor"], use_logged_gains=True, **BUDGET))
    model = fitted["joints"]["hinge"]["models"]["dcmotor"]
    assert fitted["assumptions"]["logged_gains"] is True
    for k in ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit"):
        assert abs(model["params"][k] / TRUTH_DCMOTOR[k] - 1) < 0.02, (k, model["params"][k])
    for k in ("armature", "friction"):
        assert abs(model["params"][k] / TRUTH_DCMOTOR[k] - 1) < 0.10, (k, model["params"][k])
    assert not model["intervals"]["stiffness"]["identified"]  # every segment's kp is known: nothing to fit
    single = fit_recording(rec_k, FitRequest(models=["dcmotor"], **BUDGET))["joints"]["hinge"]["models"][
        "dcmotor"
    ]
    assert model["metrics"]["train"]["position_rmse"] < 0.2 * single["metrics"]["train"]["position_rmse"]
