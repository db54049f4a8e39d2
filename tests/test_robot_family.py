"""The whole-robot fit is a fit of registry families: its terms are a family's registry parameters, its bounds
the registry's plant rules scaled to the model and the log, its solvers fitting/search.py's, and it says when
its validation asks for more than training did (fitting/coverage.py's rule, as a joint fit's).

The logs are made by Newton alone (tests/robot_sim.py) on the two-link arm of tests/test_robot_torque.py.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from robot_sim import robot_recording, simulate_newton_log
from test_robot_torque import DEC, TRUTH, load_arm, multisine

from actuator_sysid.fitting.coverage import robot_beyond_training
from actuator_sysid.fitting.result import GROUP_KEYS, RobotGroup
from actuator_sysid.fitting.robot import RobotFitOptions, family_terms, fit_robot
from actuator_sysid.fitting.robot_judge import robot_verdict
from actuator_sysid.fitting.search import Tolerances, batched_lm, trust_region
from actuator_sysid.fitting.space import SearchSpace, plant_range
from actuator_sysid.models import parameters
from actuator_sysid.models.families import get_family
from actuator_sysid.models.robot import RobotError, RobotModel

KP, KD = 150.0, 4.0


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    return load_arm(tmp_path_factory.mktemp("arm"))


def test_robot_terms_are_a_registry_familys_parameters() -> None:
    """Gains given: the joint terms (and the envelope with dcmotor); gains unknown: the PD gains too; a family
    whose terms no robot rollout holds is refused by name."""
    assert family_terms(get_family("ideal_pd"), gains_known=True) == [
        "armature",
        "viscous_friction",
        "friction",
    ]
    assert family_terms(get_family("ideal_pd"), gains_known=False) == [
        "armature",
        "viscous_friction",
        "friction",
        "stiffness",
        "damping",
    ]
    dc = family_terms(get_family("dcmotor"), gains_known=True)
    assert dc[3:] == ["saturation_effort", "actuator_velocity_limit", "actuator_effort_limit"]
    assert all(parameters.get(t).plant is not None for t in dc)
    with pytest.raises(RobotError, match="stribeck_friction"):
        family_terms(get_family("dcmotor_stribeck"), gains_known=True)


def test_plant_bounds_scale_with_the_plant_and_are_the_registrys() -> None:
    """A heavier plant (ten times the effort) moves every effort-scaled range up a decade; a parameter without a
    plant rule has none."""
    light = {"effort": 1.0, "speed": 2.0, "max_speed": 3.0, "acceleration": 10.0, "inertia": 0.01}
    heavy = dict(light, effort=10.0)
    for name in ("friction", "viscous_friction", "stiffness", "damping", "saturation_effort"):
        lo, hi = plant_range(name, light)
        lo10, hi10 = plant_range(name, heavy)
        assert hi10 == pytest.approx(10 * hi) and lo10 == pytest.approx(10 * lo) and 0 < lo < hi
    rule = parameters.get("friction").plant
    assert rule is not None and plant_range("friction", light)[1] == pytest.approx(rule.multiple * 1.0)
    assert plant_range("actuator_velocity_limit", light) == pytest.approx((0.05 * 3.0, 100 * 3.0))
    assert plant_range("armature", light)[1] == pytest.approx(10 * max(1.0 / 10.0, 0.01))
    with pytest.raises(KeyError, match="delay"):
        plant_range("delay", light)


def test_group_keys_translate_once_between_fit_json_and_the_registry() -> None:
    """A group's fit.json keys come back as registry names, infinite and unset values left out."""
    g = RobotGroup(
        stiffness=20.0,
        damping=1.5,
        armature=0.01,
        friction=0.2,
        viscous_friction=0.1,
        effort_limit=5.0,
        saturation_effort=8.0,
        velocity_limit=math.inf,
    )
    p = g.params()
    assert p["actuator_effort_limit"] == 5.0 and "actuator_velocity_limit" not in p
    assert set(GROUP_KEYS.values()) <= {f.name for f in dataclasses.fields(RobotGroup)}
    assert set(p) <= set(parameters.BY_NAME)


def test_batched_lm_solves_many_problems_in_lockstep() -> None:
    """Three bounded exponential fits at once, each to its own truth; one stops at its bound."""
    t = np.linspace(0, 1, 40)
    truth = np.array([[1.0, -2.0], [0.5, -0.5], [3.0, -4.0]])
    y = truth[:, :1] * np.exp(truth[:, 1:] * t[None])
    lo, hi = np.array([0.0, -3.0]), np.array([5.0, 0.0])

    def residuals(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return x[:, :1] * np.exp(x[:, 1:] * t[None]) - y[rows]

    def jacobian(x: np.ndarray, rows: np.ndarray, r: np.ndarray) -> np.ndarray:
        e = np.exp(x[:, 1:] * t[None])
        return np.stack([e, x[:, :1] * t[None] * e], axis=2)

    x, loss, jacobians = batched_lm(residuals, jacobian, np.tile([1.0, -1.0], (3, 1)), lo, hi, 50)
    np.testing.assert_allclose(x[:2], truth[:2], rtol=1e-4)
    assert x[2, 1] == pytest.approx(-3.0) and loss[:2].max() < 1e-6 and 1 < jacobians <= 50


@pytest.mark.parametrize("unit_cube", [True, False])
def test_trust_region_with_the_callers_jacobian_in_either_coordinates(unit_cube: bool) -> None:
    """The caller's Jacobian in natural units is carried into the unit cube by the chain rule (log and linear
    dimensions alike) or used as it is; both reach the truth."""
    t = np.linspace(0, 1, 30)
    truth = np.array([0.3, 2.0])
    y = truth[0] * np.exp(-truth[1] * t)
    log = np.array([True, False]) if unit_cube else np.zeros(2, bool)
    space = SearchSpace(("a", "b"), np.array([0.01, 0.1]), np.array([10.0, 5.0]), log, np.zeros(2, bool))

    def run(xs: np.ndarray) -> np.ndarray:
        return xs[:, :1] * np.exp(-xs[:, 1:] * t[None]) - y

    def jac(x: np.ndarray) -> np.ndarray:
        e = np.exp(-x[1] * t)
        return np.stack([e, -x[0] * t * e], axis=1)

    sol = trust_region(
        run, space, np.array([1.0, 1.0]), 100, 1e-3, jac=jac, tol=Tolerances(unit_cube=unit_cube)
    )
    np.testing.assert_allclose(sol.x, truth, rtol=1e-6)
    assert sol.loss < 1e-12 and sol.converged


def _arm_log(arm: RobotModel, amplitude: tuple[float, float], split_amplitude: tuple[float, float]):
    """A Newton-made arm log whose last third is driven at `split_amplitude` instead of `amplitude`."""
    first = multisine(400, amplitude, seed=3)
    last = multisine(200, split_amplitude, seed=4)
    cmd = np.concatenate([first, last + (first[-1] - last[0])])
    q, qd = simulate_newton_log(arm, cmd, decimation=DEC, delay=0, kp=KP, kd=KD, q0=np.zeros(2), **TRUTH)
    return robot_recording(arm, cmd, q, qd, kp=KP, kd=KD)


def test_a_robot_fit_says_when_validation_asks_beyond_training(arm: RobotModel) -> None:
    """Validation driven three times harder than training: the result names the joints beyond training and the
    verdict carries the check (ok only when the extrapolation held); the same amplitude throughout: no warning."""
    opts = RobotFitOptions(decimation=DEC, delay=0, max_iterations=3, validation_fraction=1 / 3)
    harder = fit_robot(_arm_log(arm, (0.3, 0.2), (0.9, 0.6)), arm, opts)
    warning = harder.validation.beyond_training
    assert warning is not None and ("yaw effort" in warning or "pitch effort" in warning), warning
    checks = {c.check: c for c in robot_verdict(harder).checks}
    assert "beyond_training" in checks and checks["beyond_training"].status in ("ok", "usable")
    same = fit_robot(_arm_log(arm, (0.6, 0.4), (0.6, 0.4)), arm, opts)
    assert same.validation.beyond_training is None
    assert "beyond_training" not in {c.check for c in robot_verdict(same).checks}
    assert "beyond_training" not in same.to_json()["validation"]


def test_the_coverage_rule_on_its_own() -> None:
    """Five percent of validation samples above the training top flags a joint; fewer does not."""
    rng = np.random.default_rng(0)
    train = rng.uniform(-1, 1, (1000, 2))
    val = rng.uniform(-1, 1, (1000, 2))
    val[:100, 1] *= 3.0  # joint b: 10 % of its validation samples can exceed the training top
    w = robot_beyond_training(["a", "b"], np.vstack([train, val]), np.zeros((2000, 2)), 1000)
    assert w is not None and "b effort" in w and "a effort" not in w
    assert robot_beyond_training(["a", "b"], np.vstack([train, train]), np.zeros((2000, 2)), 1000) is None
