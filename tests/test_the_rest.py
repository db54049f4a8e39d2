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


def _horizontal_log(tmp_path):
    """A DC motor on the pendulum bench, dropped with the torque off after 0.5 s, logged from the horizontal
    (q_logged = q − π/2): the positions our rollout of the truth makes; (csv path, sidecar, hanging-frame q)."""
    from actuator_sysid.datasets.canonical import sidecar_for, write_table
    from actuator_sysid.fitting.fit import simulate

    rec = short_recording(n_segments=2, n_samples=800)
    for s in rec.segments:
        s.enable = np.ones((s.n, 1), bool)
        s.enable[100:] = False
    sims = simulate(rec, "hinge", "dcmotor", {**TRUTH, "delay": 0})
    hanging = {}
    for s in rec.segments:
        hanging[s.name] = sims[s.name]["q"].astype(np.float64)
        s.q = hanging[s.name][:, None] - np.pi / 2
        s.qd = sims[s.name]["qd"][:, None].astype(np.float64)
        s.q_des = s.q_des - np.pi / 2
    path = tmp_path / "horizontal.csv"
    write_table(rec, path, sidecar=False)
    return path, sidecar_for(rec), hanging


def test_a_log_in_another_frame_is_said_and_zero_angle_puts_it_right(tmp_path) -> None:
    """The bench plant hangs at q = 0: a log whose drops rest at −π/2 is flagged (quality warning and a
    verdict check naming the sidecar key), and the sidecar's zero_angle reads it in the plant's frame."""
    from actuator_sysid.datasets.canonical import read_table
    from actuator_sysid.datasets.quality import FRAME

    path, side, hanging = _horizontal_log(tmp_path)
    rec = read_table(path, path.name, side)
    (w,) = [x for x in rec.quality()["warnings"] if FRAME in x]
    assert '"zero_angle": {"hinge": 1.57}' in w, w
    entry = model_entry("dcmotor", TRUTH)
    entry["metrics"]["validation"] = {"position_rmse": 0.1, "segments": 1}
    v = fit_verdict(make_result({"hinge": {"dcmotor": entry}}, rec), rec)
    (frame,) = [c for c in v["checks"] if c["check"] == "frame"]
    assert frame["status"] == "usable" and "zero_angle" in frame["reason"]
    fixed = read_table(path, path.name, {**side, "zero_angle": {"hinge": np.pi / 2}})
    for s in fixed.segments:
        assert np.allclose(s.q[:, 0], hanging[s.name], atol=1e-9)
    assert not any(FRAME in x for x in fixed.quality()["warnings"])
    assert any("zero_angle" in x and "+1.571 rad" in x for x in fixed.warnings), fixed.warnings


def test_a_bad_zero_angle_names_the_problem(tmp_path) -> None:
    import pytest

    from actuator_sysid.datasets.canonical import read_table
    from actuator_sysid.datasets.recording import DatasetError

    path, side, _ = _horizontal_log(tmp_path)
    with pytest.raises(DatasetError, match="names joint 'knee', which is not in the table"):
        read_table(path, path.name, {**side, "zero_angle": {"knee": 1.0}})
    with pytest.raises(DatasetError, match="must be a finite angle in rad"):
        read_table(path, path.name, {**side, "zero_angle": {"hinge": "90deg"}})
