"""One plant, one answer: a servo bench fitted through its own MJCF and as a sidecar pendulum agree.

The bench (tests/servo_mjcf_bench.py) is shipped as a user ships it: the horn's inertia from an .obj mesh, a
filtered `<general>` servo with a force range. MuJoCo alone makes the 50 Hz position-only log from a known PD and
joint terms. The MJCF route (fit_robot) replaces the file's actuator whole: gain, bias and filter dynamics zeroed in the
plant, its force range the start of a fitted effort limit, a plain PD exported; the pendulum route fits the joint
with the sidecar's load. Both must come back near the truth, agree on held-out episodes, and every consumer must replay
the MJCF route's export.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import servo_mjcf_bench as bench

from actuator_sysid.datasets import read_log
from actuator_sysid.export.robot_mjcf import replay_model
from actuator_sysid.export.selection import ExportError
from actuator_sysid.fitting.fit import fit_result
from actuator_sysid.fitting.request import FitRequest
from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot, result_lines
from actuator_sysid.models.robot import load_robot
from actuator_sysid.pipeline import compute_robot_fit

HOLDOUT = "episode=held_out"
HELD_OUT = (4, 5)  # the sidecar marks episodes ep4 and ep5 held out
TERMS = ("stiffness", "damping", "armature", "viscous_friction", "friction")
NEAR_TRUTH = 0.05  # relative, every fitted term against the bench's truth
AGREE = 0.05  # relative: the two routes' terms, and their held-out predictions against the motion's RMS
STATE_TOL = 0.005  # rad: each route's held-out position RMSE (the log's motion spans about 2.4 rad)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("servo")
    model = bench.write_bench(folder)
    return model, bench.write_log(folder, model)


@pytest.fixture(scope="module")
def routes(shipped: tuple[Path, Path]) -> dict:
    """Both fits of one log: the MJCF route with its exports replayed, and the sidecar pendulum route."""
    model, log = shipped
    rec = read_log(log)
    robot = load_robot(model)
    out = compute_robot_fit(
        rec, robot, RobotFitOptions(decimation=4, holdout=HOLDOUT, max_iterations=6), traces=False
    )
    # a position-only log: velocity is a 50 Hz difference, so the pendulum route fits positions alone
    req = FitRequest(families=["ideal_pd"], decimation=4, holdout=HOLDOUT, loss="position_mae")
    pend = fit_result(rec, req).joints[bench.JOINT].models["ideal_pd"]
    group = out.typed.groups[bench.JOINT]
    return {
        "robot": out,
        "notes": robot.notes,
        "mjcf": {t: float(getattr(group, t)) for t in TERMS} | {"effort_limit": float(group.effort_limit)},
        "mjcf_rmse": float(out.typed.validation.rmse),
        "pendulum": {t: float(pend.params[t]) for t in TERMS}
        | {"effort_limit": float(pend.params["actuator_effort_limit"])},
        "pendulum_rmse": float(pend.metrics.validation.position_rmse),
    }


@pytest.mark.unit
def test_mesh_bodies_keep_their_inertia_in_the_replayed_mjcf(shipped: tuple[Path, Path]) -> None:
    """The replay drops mesh geoms, so the horn gets MuJoCo's mesh inertia as an <inertial> (0.216 kg, COM 6 cm
    below the joint); without the mesh file the export says which body needs it."""
    import mujoco

    model, _ = shipped
    text = replay_model(model.read_text(), model.parent)
    mm = mujoco.MjModel.from_xml_string(text)
    horn = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, "horn")
    assert mm.body_mass[horn] == pytest.approx(bench.DENSITY * 8 * np.prod(bench.HALF), rel=1e-5)
    np.testing.assert_allclose(mm.body_ipos[horn], [0.0, 0.0, -bench.HALF[2]], atol=1e-6)
    with pytest.raises(ExportError, match=r"body horn take\(s\) mass and inertia from mesh geoms"):
        replay_model(model.read_text(), model.parent / "nowhere")


def test_both_routes_come_back_near_the_truth_and_agree(routes: dict) -> None:
    """Every term within 5 % of the truth by both routes and of each other; both held-out RMSEs within the state
    tolerance; MuJoCo, replaying each route's terms on the held-out episodes, sees them agree within 5 % of the
    motion."""
    for route in ("mjcf", "pendulum"):
        for t in TERMS:
            assert routes[route][t] == pytest.approx(bench.TRUTH[t], rel=NEAR_TRUTH), (
                route,
                t,
                routes[route],
            )
        assert routes[route]["effort_limit"] == pytest.approx(bench.FORCE, rel=NEAR_TRUTH)
        assert routes[f"{route}_rmse"] < STATE_TOL, route
    for t in TERMS:
        assert routes["mjcf"][t] == pytest.approx(routes["pendulum"][t], rel=AGREE), t
    model = Path(routes["robot"].typed.robot["path"])
    for i in HELD_OUT:
        cmd = bench.episode(i)
        qa, qb = (bench.simulate(model, cmd, routes[r]) for r in ("mjcf", "pendulum"))
        motion = np.sqrt(np.mean((qa - qa.mean()) ** 2))
        assert np.sqrt(np.mean((qa - qb) ** 2)) < AGREE * motion, i


def test_every_consumer_replays_the_mjcf_route_and_the_file_actuator_is_replaced(routes: dict) -> None:
    """Isaac Lab, Newton and MuJoCo replay the exports within tolerance; mjcf.xml holds a plain PD with the fitted
    force range (the file's filtered servo replaced whole), and the fit's notes say so."""
    out = routes["robot"]
    replays = out.typed.replays
    assert set(replays["consumers"]) == {"isaaclab", "newton", "mujoco"}
    assert replays["within_tolerance"], replays["consumers"]
    assert out.typed.verdict.verdict != "poor", out.typed.verdict.reasons
    act = ET.fromstring(out.exports["mjcf.xml"].split("-->", 1)[1]).find("actuator/general")
    assert act is not None and "dyntype" not in act.attrib
    assert float(act.attrib["gainprm"]) == pytest.approx(routes["mjcf"]["stiffness"], rel=1e-6)
    lo, hi = (float(v) for v in act.attrib["forcerange"].split())
    assert -lo == hi == pytest.approx(routes["mjcf"]["effort_limit"], rel=1e-6)
    assert any("activation dynamics (dyntype filter" in n for n in routes["notes"])
    replaced = "the force range of the model's position servos on servo is replaced"
    assert any(replaced in line for line in result_lines(out.typed))  # the CLI says it beside the verdict


def test_the_default_route_a_selection_gives_the_same_answer(
    shipped: tuple[Path, Path], routes: dict
) -> None:
    """`fit LOG --robot MODEL` selects its configuration by default: on this bench its choice (the bias and the
    window, on the training episodes alone) comes back with the same terms and held-out error as the plain fit."""
    model, log = shipped
    opts = RobotFitOptions(decimation=4, holdout=HOLDOUT, max_iterations=6)
    out = compute_robot_fit(read_log(log), load_robot(model), opts, select=True, replay=False, traces=False)
    assert out.typed.selection is not None and out.typed.selection["chosen"], out.typed.selection
    group = out.typed.groups[bench.JOINT]
    for t in TERMS:
        assert float(getattr(group, t)) == pytest.approx(routes["mjcf"][t], rel=AGREE), t
    assert out.typed.validation.rmse is not None and out.typed.validation.rmse < STATE_TOL
    assert out.typed.verdict.verdict != "poor", out.typed.verdict.reasons


def test_a_coarse_physics_step_still_finds_the_servos_gains(shipped: tuple[Path, Path]) -> None:
    """One physics step per 50 Hz sample (20 ms) and no gains in the log: the gain scan, scaled to the horn's own
    inertia, starts where explicit PD steps are stable (an absolute kp 5–80 grid on the file's armature starts
    where they diverge), so the MJCF route stays near the pendulum route's figure at that step, about 0.01 rad."""
    model, log = shipped
    res = fit_robot(
        read_log(log), load_robot(model), RobotFitOptions(decimation=1, holdout=HOLDOUT, max_iterations=6)
    )
    assert res.validation.rmse is not None and res.validation.rmse < 0.02
    assert res.groups[bench.JOINT].stiffness == pytest.approx(bench.TRUTH["stiffness"], rel=0.2)
