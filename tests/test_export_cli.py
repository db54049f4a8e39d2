"""`actuator-sysid export` from a stored fit, and the randomization ranges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from export_helpers import MISFIT, TRUTH, make_result, model_entry

from actuator_sysid.cli import main
from actuator_sysid.export.randomization import randomization
from actuator_sysid.export.validate import validate_usd

LOAD = {"mass": 1.0, "com_distance": 0.25, "inertia": 0.0, "gravity": 9.81, "joint_type": "revolute"}


@pytest.fixture()
def fit_dir(tmp_path: Path) -> Path:
    """A fit folder as the CLI and the service write it: fit.json plus validation.json with the bench load."""
    res = make_result({"hinge": {"dcmotor": model_entry("dcmotor", TRUTH), "pid": model_entry("pid", TRUTH)}})
    (tmp_path / "fit.json").write_text(json.dumps(res))
    (tmp_path / "validation.json").write_text(json.dumps({"bench": {"hinge": LOAD}}))
    return tmp_path


def test_export_every_format_from_a_fit_folder(fit_dir: Path, capsys) -> None:
    import mujoco
    import yaml

    for fmt in (
        "isaaclab.py",
        "isaaclab.json",
        "isaaclab.yaml",
        "newton.usda",
        "mjcf.xml",
        "randomization.json",
    ):
        out = fit_dir / "out" / fmt
        assert main(["export", str(fit_dir), "--format", fmt, "--out", str(out)]) == 0
        assert out.stat().st_size > 0
    assert validate_usd(fit_dir / "out" / "newton.usda") == []
    mujoco.MjModel.from_xml_path(str(fit_dir / "out" / "mjcf.xml"))
    assert yaml.safe_load((fit_dir / "out" / "isaaclab.yaml").read_text()) == json.loads(
        (fit_dir / "out" / "isaaclab.json").read_text()
    )
    # options: a Newton-only family through our subclass, Isaac Lab 2.x names, the PhysX backend, stdout
    assert (
        main(["export", str(fit_dir / "fit.json"), "--format", "isaaclab.py", "--family", "hinge=pid"]) == 0
    )
    assert "DelayedPIDActuatorCfg(" in capsys.readouterr().out
    assert (
        main(
            [
                "export",
                str(fit_dir),
                "--format",
                "isaaclab.json",
                "--field-names",
                "isaaclab-2",
                "--backend",
                "physx",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "physx" and "effort_limit" in doc["actuators"]["hinge"]["cfg"]


def test_export_errors_say_what_to_do(fit_dir: Path, tmp_path: Path, capsys) -> None:
    assert main(["export", str(tmp_path / "nope"), "--format", "isaaclab.py"]) == 2
    assert "fit.json" in capsys.readouterr().err
    (fit_dir / "validation.json").unlink()
    assert main(["export", str(fit_dir), "--format", "newton.usda"]) == 2
    assert "--log" in capsys.readouterr().err
    assert main(["export", str(fit_dir), "--format", "isaaclab.py", "--family", "hinge=ideal_pd"]) == 2
    assert "ideal_pd" in capsys.readouterr().err


def test_randomization_from_intervals_spread_or_default() -> None:
    entry = model_entry("delayed_pd", TRUTH)
    entry["intervals"] = {
        "stiffness": {"interval95": [22.0, 28.0], "identified": True},
        "damping": {"interval95": [-0.1, 0.9], "identified": False},
        "friction": {"interval95": [-0.1, 0.9], "identified": True},
        "delay": {"interval95": [2.4, 3.6], "identified": True},
    }
    res = make_result(
        {
            "hip": {"delayed_pd": entry},
            "knee": {"dcmotor": model_entry("dcmotor", TRUTH)},
            "ankle": {"dcmotor": model_entry("dcmotor", MISFIT)},
        }
    )
    doc = randomization(res)
    hip = doc["joints"]["hip"]
    assert hip["ranges"]["stiffness"] == [22.0, 28.0] and hip["sources"]["stiffness"] == "interval95"
    # a parameter the fit did not identify gets no range (issue 15): its interval would be a guess
    assert "damping" not in hip["ranges"] and "not identified" in hip["sources"]["damping"]
    assert hip["ranges"]["friction"] == [0.0, 0.9]  # an identified interval is clipped to non-negative values
    assert hip["ranges"]["delay"] == [2, 4]
    assert (
        hip["ranges"]["armature"] == pytest.approx([0.0135, 0.0165])
        and hip["sources"]["armature"] == "default ±10%"
    )
    knee = doc["joints"]["knee"]
    assert (
        knee["ranges"]["stiffness"] == [20.0, 25.0] and knee["sources"]["stiffness"] == "spread across joints"
    )
    events = doc["isaaclab"]["events"]
    gains = events["actuator_gains_hip"]["params"]
    assert gains["stiffness_distribution_params"] == [22.0, 28.0] and gains["operation"] == "abs"
    assert gains["asset_cfg"] == {"name": "robot", "joint_names": ["hip"]}
    assert events["joint_parameters_knee"]["params"]["friction_distribution_params"] == pytest.approx(
        [0.18, 0.22]
    )
    assert doc["isaaclab"]["actuator_cfg"] == {"hip": {"min_delay": 2, "max_delay": 4}}
