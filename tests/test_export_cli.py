"""`actuator-sysid export` from a stored fit, and the randomization ranges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from export_helpers import MISFIT, TEXT_EXPORTS, TRUTH, make_result, model_entry

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

    for fmt in TEXT_EXPORTS:
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


EARLIER = "2001-02-03"


def test_exports_state_the_fits_date_and_re_export_is_the_fits_own_file(tmp_path: Path, capsys) -> None:
    """A real `fit` of a small log records its UTC creation time in fit.json and every export states that day;
    `export` of the folder gives the fit's own files byte for byte, and after fit.json's time is set to an
    earlier day the re-export states that day (nothing else changes). A fit.json without it states today."""
    from datetime import UTC, datetime

    from conftest import make_recording

    from actuator_sysid.datasets.canonical import write_table

    write_table(make_recording(segments=2, n=150, seed=0), tmp_path / "log.csv")
    out = tmp_path / "fit"
    fit_args = ["--families", "dcmotor,ideal_pd", "--generations", "2", "--population", "6", "--seed", "0"]
    assert main(["fit", str(tmp_path / "log.csv"), *fit_args, "--out", str(out)]) == 0
    fit = json.loads((out / "fit.json").read_text())
    created = datetime.fromisoformat(fit["created_at"])
    assert created.utcoffset() is not None and created.utcoffset().total_seconds() == 0
    day = fit["created_at"][:10]
    assert json.loads((out / "isaaclab.json").read_text())["provenance"]["fitted"] == day
    own = {name: (out / name).read_text() for name in TEXT_EXPORTS}
    for name in ("isaaclab.py", "isaaclab.yaml", "newton.usda", "mjcf.xml"):
        assert f"fitted {day}" in own[name], name

    def exported(name: str) -> str:
        target = tmp_path / "again" / name
        assert main(["export", str(out), "--format", name, "--out", str(target)]) == 0
        return target.read_text()

    for name in TEXT_EXPORTS:
        assert exported(name).encode() == (out / name).read_bytes(), name

    (out / "fit.json").write_text(json.dumps({**fit, "created_at": f"{EARLIER}T04:05:06+00:00"}, indent=1))
    for name in TEXT_EXPORTS:
        assert exported(name) == own[name].replace(day, EARLIER), name
    assert json.loads(exported("isaaclab.json"))["provenance"]["fitted"] == EARLIER

    del fit["created_at"]  # a fit.json from before results recorded it
    (out / "fit.json").write_text(json.dumps(fit, indent=1))
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert f"fitted {today}" in exported("isaaclab.py")
    capsys.readouterr()


def test_the_compute_path_stores_the_creation_time_it_is_given_in_utc() -> None:
    """pipeline.compute_fit (the CLI's and the service worker's path) keeps the creation time it is given (the
    service's fit row's) as UTC to the second, and the exports it renders state that day, not today."""
    from conftest import make_recording

    from actuator_sysid.fitting.fit import FitRequest
    from actuator_sysid.fitting.result import as_result
    from actuator_sysid.pipeline import compute_fit

    req = FitRequest(families=["ideal_pd"], generations=2, population=6, seed=0)
    out = compute_fit(make_recording(segments=2, n=150), req, created_at="2001-02-04T01:05:06.789+02:00")
    assert out.result["created_at"] == "2001-02-03T23:05:06+00:00"
    assert as_result(out.result).fitted_on == EARLIER
    assert f"fitted {EARLIER}" in out.exports["isaaclab.py"]
    assert json.loads(out.exports["isaaclab.json"])["provenance"]["fitted"] == EARLIER
