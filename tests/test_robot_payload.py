"""Link inertial corrections in the whole-robot fit (issue 23, acceptance 5): a payload's mass fitted.

The two-link arm of tests/test_robot_torque.py carries a payload on its hanging link: the log is made by Newton
alone (tests/robot_sim.py, Newton's DrivePD at the logged gains, its delay buffer, MuJoCo's C solver) with that
link 6 kg where the model says 5 (20 % off). The fit frees the link's mass (payload=["link2"]; the inertia about
its COM scales with it) beside every joint's armature, friction and damping, through coupled rollouts.
"""

from __future__ import annotations

import numpy as np
import pytest
from robot_sim import robot_recording, simulate_newton_log
from test_robot_torque import DEC, TERMS, TRUTH, load_arm, multisine

from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot, prepare_fit
from actuator_sysid.models.robot import RobotError, RobotModel

KP, KD, DELAY, MODEL_MASS, TRUE_MASS = 150.0, 4.0, 2, 5.0, 6.0


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    return load_arm(tmp_path_factory.mktemp("arm"))


def test_a_payload_20_percent_off_comes_back_within_5_percent(arm: RobotModel) -> None:
    """The link's mass within 5 % (measured 6.00004 kg), the joint terms within 10 %, the delay exact; the
    result states the model's mass beside the fitted one. 6 coupled Jacobians, 20 s on the 2 shared cores."""
    cmd = multisine(600, (0.8, 0.6), seed=5)
    q, qd = simulate_newton_log(
        arm,
        cmd,
        decimation=DEC,
        delay=DELAY,
        kp=KP,
        kd=KD,
        q0=np.zeros(2),
        body_mass={"link2": TRUE_MASS},
        **TRUTH,
    )
    res = fit_robot(
        robot_recording(arm, cmd, q, qd, kp=KP, kd=KD),
        arm,
        RobotFitOptions(decimation=DEC, payload=["link2"], max_iterations=6, fit_bias=False),
    )
    body = res.bodies["link2"]
    assert body["model_mass"] == MODEL_MASS
    assert body["mass"] == pytest.approx(TRUE_MASS, rel=0.05), body
    assert res.delay_steps == DELAY and res.training.search == "coupled"
    for k, nm in enumerate(arm.joint_names):
        for sim_name, term in TERMS.items():
            assert getattr(res.groups[nm], term) == pytest.approx(TRUTH[sim_name][k], rel=0.1), (nm, term)
    v = res.validation
    assert v.rmse < 1e-3 and v.model_defaults_rmse > 10 * v.rmse, v
    assert res.bounds.bounds["link2.mass"] == pytest.approx([0.5, 50.0])


def test_payload_bodies_must_be_links_with_mass(arm: RobotModel) -> None:
    """A payload that is not a link of the model, or a link without mass, is refused by name."""
    cmd = np.zeros((40, 2))
    rec = robot_recording(arm, cmd, cmd, cmd, kp=KP, kd=KD)
    with pytest.raises(RobotError, match=r"payload body battery is not a link of arm2.xml; its links: base"):
        prepare_fit(rec, arm, RobotFitOptions(decimation=DEC, payload=["battery"], window_s=0.05))
    _, prob, _ = prepare_fit(
        rec, arm, RobotFitOptions(decimation=DEC, payload=["link2"], payload_com=True, window_s=0.05)
    )
    assert prob.var_names[6:10] == ["link2.mass", "link2.com_x", "link2.com_y", "link2.com_z"]
