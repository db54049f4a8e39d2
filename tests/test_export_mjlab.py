"""The mjlab export: cfg source that parses, carries the fitted values, and refuses what mjlab cannot hold.

mjlab itself runs the exports in bench/mjlab_replay.py (its own environment); here the source is read as data.
"""

from __future__ import annotations

import ast
import re

import pytest
from export_helpers import TRUTH, make_result, model_entry

from actuator_sysid.export import TEXT_FORMATS, render_format
from actuator_sysid.export.mjlab import dcmotor_gains, render_mjlab
from actuator_sysid.export.selection import ExportError

pytestmark = pytest.mark.unit

DCMOTOR = {
    "stiffness": 20.0,
    "damping": 0.02,
    "dcmotor_motor_constant": 0.3,
    "dcmotor_resistance": 2.0,
    "dcmotor_voltage_limit": 6.0,
    "dcmotor_lugre_stiffness": 300.0,
    "dcmotor_lugre_damping": 1.0,
    "dcmotor_lugre_coulomb": 0.05,
    "dcmotor_lugre_static": 0.08,
    "dcmotor_lugre_stribeck_velocity": 0.2,
}


def _cfgs(source: str) -> dict[str, tuple[str, dict]]:
    """{target regex: (class, {field: value})} of the ACTUATORS tuple, read from the AST (never executed)."""
    tree = ast.parse(source)
    node = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "ACTUATORS"
    )
    assert isinstance(node, ast.Tuple)
    out = {}
    for call in node.elts:
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        fields = {
            k.arg: ast.unparse(k.value)
            if isinstance(k.value, ast.Call | ast.Attribute)
            else ast.literal_eval(k.value)
            for k in call.keywords
        }
        out[fields["target_names_expr"][0]] = (call.func.id, fields)
    return out


def test_each_family_becomes_its_mjlab_cfg_with_the_fitted_values() -> None:
    result = make_result(
        {
            "hip": {"dcmotor_delay": model_entry("dcmotor_delay", TRUTH)},
            "knee": {"ideal_pd": model_entry("ideal_pd", TRUTH)},
            "ankle": {"implicit": model_entry("implicit", TRUTH)},
            "wrist": {"mujoco_dcmotor_lugre": model_entry("mujoco_dcmotor_lugre", DCMOTOR)},
        }
    )
    source = render_mjlab(result)
    compile(source, "mjlab_cfg.py", "exec")
    cfgs = _cfgs(source)
    cls, hip = cfgs["hip"]
    assert cls == "DcMotorActuatorCfg"
    assert hip["saturation_effort"] == TRUTH["saturation_effort"]
    assert hip["velocity_limit"] == TRUTH["actuator_velocity_limit"]
    assert hip["effort_limit"] == TRUTH["actuator_effort_limit"]
    assert (hip["armature"], hip["frictionloss"], hip["viscous_damping"]) == (0.015, 0.2, 0.08)
    assert hip["delay_min_lag"] == hip["delay_max_lag"] == TRUTH["delay"]
    cls, knee = cfgs["knee"]
    assert cls == "IdealPdActuatorCfg" and "delay_max_lag" not in knee and "saturation_effort" not in knee
    assert (knee["stiffness"], knee["damping"]) == (TRUTH["stiffness"], TRUTH["damping"])
    assert cfgs["ankle"][0] == "BuiltinPdActuatorCfg"
    cls, wrist = cfgs["wrist"]
    assert cls == "BuiltinDcMotorActuatorCfg" and wrist["mode"] == "DcMotorInputMode.POSITION"
    assert wrist["motor_params"] == "DcMotorPhysicalParams(kt=0.3, ke=0.3, resistance=2.0)"
    # MuJoCo 3.11's voltage gains: R·kp/K, and R·kd/K − K (negative here: the back-EMF damping exceeds kd)
    assert wrist["stiffness"] == pytest.approx(2.0 * 20.0 / 0.3)
    assert wrist["damping"] == pytest.approx(2.0 * 0.02 / 0.3 - 0.3) and wrist["damping"] < 0
    assert wrist["lugre"] == (300.0, 1.0, 0.05, 0.08, 0.2)
    assert "mujoco.__version__.split(\".\")[:2] != ['3', '11']" in source
    assert "PHYSICS_DT = 0.005" in source and "DECIMATION = 1" in source
    # the implicit family's built-in PD needs implicitfast (kd implicit); the <dcmotor> joint was fitted with Euler
    assert "INTEGRATOR = 'implicitfast'" in source and "fitted with Euler" in source


def test_voltage_gains_give_mujoco_317s_voltage() -> None:
    """3.11's V = kp'·e − kd'·ω equals 3.17's R·τ*/K + K·ω with τ* = kp·e − kd·ω, at any error and speed."""
    kp, kd, k, r = 12.0, 0.4, 0.25, 1.7
    kpv, kdv = dcmotor_gains(kp, kd, k, r)
    for e, w in ((0.3, -2.0), (-1.1, 5.0), (0.0, 0.7)):
        assert kpv * e - kdv * w == pytest.approx(r * (kp * e - kd * w) / k + k * w)


@pytest.mark.parametrize(
    ("family", "nearest"),
    [
        ("remotized_pd", "delayed_pd"),
        ("pid", "delayed_pd"),
        ("dcmotor_stribeck", "dcmotor"),
        ("dcmotor_loadfric_delay", "dcmotor_delay"),
    ],
)
def test_a_family_mjlab_cannot_hold_is_refused_naming_the_nearest(family: str, nearest: str) -> None:
    params = {
        **TRUTH,
        "stribeck_friction": 0.1,
        "stribeck_velocity": 0.2,
        "stribeck_exponent": 2.0,
        "load_friction": 0.05,
    }
    result = make_result({"hinge": {family: model_entry(family, params)}})
    with pytest.raises(ExportError, match=rf"'hinge'.*export the {nearest} fit"):
        render_mjlab(result, {"hinge": family})


def test_a_joint_term_without_an_mjlab_field_is_refused() -> None:
    terms = ("armature", "friction", "viscous_friction", "encoder_offset")
    result = make_result({"hinge": {"dcmotor": model_entry("dcmotor", TRUTH, joint_terms=terms)}})
    with pytest.raises(ExportError, match="encoder_offset: mjlab has no encoder offset"):
        render_mjlab(result)


def test_the_best_family_mjlab_holds_is_chosen_and_names_stay_data() -> None:
    """Best-ranked remotized_pd is passed over for ideal_pd; a hostile joint name stays a literal and a comment."""
    name = "knee'\n) ; import os #[0-9]"
    result = make_result(
        {
            name: {
                "remotized_pd": model_entry("remotized_pd", TRUTH),
                "ideal_pd": model_entry("ideal_pd", TRUTH),
            }
        }
    )
    source = render_mjlab(result)
    cfgs = _cfgs(source)
    ((expr, (cls, _)),) = cfgs.items()
    assert cls == "IdealPdActuatorCfg" and re.fullmatch(expr, name)
    assert not any(isinstance(n, ast.Import) and n.names[0].name == "os" for n in ast.walk(ast.parse(source)))


def test_explicit_cfgs_step_with_euler_and_an_implicit_effort_fit_is_refused() -> None:
    result = make_result({"hinge": {"delayed_pd": model_entry("delayed_pd", TRUTH)}})
    assert "INTEGRATOR = 'euler'" in render_mjlab(result)
    result["assumptions"]["effort_mode"] = "implicit"
    with pytest.raises(ExportError, match="effort mode 'implicit'.*fit with effort mode 'explicit'"):
        render_mjlab(result)


def test_registered_as_an_export_format() -> None:
    result = make_result({"hinge": {"dcmotor": model_entry("dcmotor", TRUTH)}})
    assert "mjlab_cfg.py" in TEXT_FORMATS
    text = render_format(result, None, "mjlab_cfg.py", info={"fit_id": "f1"})
    assert text.startswith("# ") and "f1" in text.split('"""')[0]
    assert _cfgs(text)["hinge"][1]["stiffness"] == TRUTH["stiffness"]
