"""The rest of issue 24's list, each with its test: bound messages that name their bound, the MJCF delay
history stated in the file, a warning at a physics step coarse for the fitted gains, the pendulum's zero angle
from the sidecar (and a fit that fails as a wrong frame does says so), the upload's warnings as the page's."""

from __future__ import annotations

import numpy as np
from export_helpers import TRUTH, make_result, model_entry, short_recording

from actuator_sysid.fitting.space import SearchSpace
from actuator_sysid.fitting.uncertainty import analyse
from actuator_sysid.fitting.verdict import fit_verdict


def _analysed(x: list[float]) -> dict:
    """Intervals of two log-scaled parameters in [1e-4, 100] at `x`, from a well-conditioned Jacobian."""
    space = SearchSpace(
        ("friction", "actuator_effort_limit"),
        np.array([1e-4, 1e-4]),
        np.array([100.0, 100.0]),
        np.array([True, True]),
        np.array([False, False]),
    )
    rng = np.random.default_rng(0)
    jac = rng.normal(size=(400, 2))
    r = rng.normal(scale=1e-3, size=400)
    return analyse(space, np.array(x), jac, r, np.arange(400) // 20, np.array([True, True]))["intervals"]


def test_a_bound_message_names_the_bound_it_sits_at() -> None:
    low = _analysed([1e-4, 100.0])
    assert "lower search bound (0.0001)" in low["friction"]["reason"]
    assert "beyond any plausible value" not in low["friction"]["reason"]  # pushed down, not beyond
    assert "upper search bound (100)" in low["actuator_effort_limit"]["reason"]
    assert "beyond any plausible value" in low["actuator_effort_limit"]["reason"]
    inside = _analysed([0.5, 3.0])
    assert all("search bound" not in str(iv.get("reason", "")) for iv in inside.values())


def test_the_mjcf_states_how_to_fill_its_delay_history() -> None:
    """MuJoCo starts a delay's ctrl history at 0 and MJCF cannot fill it: the file says so and how, and the
    recipe it gives runs on the model it describes."""
    import mujoco

    from actuator_sysid.export import render_format

    rec = short_recording(n_segments=2, n_samples=200)
    delayed = make_result({"hinge": {"dcmotor_delay": model_entry("dcmotor_delay", TRUTH)}}, rec)
    text = render_format(delayed, rec, "mjcf.xml")
    assert "DELAY HISTORY" in text and "mj_initCtrlHistory" in text
    model = mujoco.MjModel.from_xml_string(text)
    data = mujoco.MjData(model)
    a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "hinge_actuator")
    n = model.actuator_history[a][0]
    assert n == TRUTH["delay"] + 2
    times = (data.time - model.opt.timestep * np.arange(n)[::-1]).reshape(-1, 1)
    mujoco.mj_initCtrlHistory(model, data, a, times, np.full((n, 1), 0.3))  # the file's recipe
    plain = make_result({"hinge": {"dcmotor": model_entry("dcmotor", TRUTH)}}, rec)
    assert "DELAY HISTORY" not in render_format(plain, rec, "mjcf.xml")


def test_a_coarse_physics_step_for_the_gains_is_said() -> None:
    """kp 25 N·m/rad on 0.0775 kg·m²: √(kp/J)·dt = 0.09 at 5 ms, 0.36 at 20 ms (coarse)."""
    rec = short_recording(n_segments=3, n_samples=300, noise_q=1e-3)

    def checks(dt: float) -> list[dict]:
        entry = model_entry("dcmotor", TRUTH)
        entry["metrics"]["validation"] = {"position_rmse": 1e-3, "segments": 1}
        v = fit_verdict(make_result({"hinge": {"dcmotor": entry}}, rec, dt=dt), rec)
        return [c for c in v["checks"] if c["check"] == "physics_step"]

    assert checks(0.005) == []
    (coarse,) = checks(0.02)
    assert coarse["status"] == "usable" and "depend on the physics step" in coarse["reason"]
    assert "dt = 20 ms (decimation 1)" in coarse["reason"] and "--decimation" in coarse["reason"]


def test_a_plan_is_flagged_in_the_quality_warnings() -> None:
    from actuator_sysid.datasets.quality import PLAN, quality_report

    rec = short_recording(n_segments=2, n_samples=200)
    assert not any(w.startswith(PLAN) for w in quality_report(rec)["warnings"])
    for s in rec.segments:  # q ≡ q_des: a plan, not a recording
        s.q, s.qd = s.q_des.copy(), s.qd_des.copy()
    assert any(w.startswith(PLAN) for w in quality_report(rec)["warnings"])


def test_the_upload_warnings_are_the_dataset_pages(server, tmp_path) -> None:
    """An API client sees what the page says: the upload response's and GET's `warnings` are the page's list,
    the plan flag among them."""
    import html
    import json
    import re

    import requests
    from conftest import make_recording

    from actuator_sysid.datasets.canonical import sidecar_for, write_table
    from actuator_sysid.datasets.quality import PLAN

    rec = make_recording(joints=("hip",), seed=0)
    for s in rec.segments:
        s.q, s.qd = s.q_des.copy(), s.qd_des.copy()
    write_table(rec, tmp_path / "plan.csv")
    with open(tmp_path / "plan.csv", "rb") as f:
        r = requests.post(
            server.url + "/api/v1/datasets",
            files={"file": ("plan.csv", f)},
            data={"metadata": json.dumps(sidecar_for(rec))},
            timeout=60,
        )
    assert r.status_code == 201, r.text
    up = r.json()
    assert any(w.startswith(PLAN) for w in up["warnings"]), up["warnings"]
    assert (
        requests.get(f"{server.url}/api/v1/datasets/{up['id']}", timeout=30).json()["warnings"]
        == up["warnings"]
    )
    page = requests.get(f"{server.url}/datasets/{up['id']}", timeout=30).text
    block = page.split('id="warnings"', 1)[1].split("<h2>", 1)[0]
    shown = [html.unescape(x) for x in re.findall(r'<div class="warn">(.*?)</div>', block, re.S)]
    assert shown == up["warnings"], (shown, up["warnings"])
