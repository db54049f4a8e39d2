"""Exports never carry a guess silently (issue 15): unidentified parameters left at the consumer's default or set
from a given value, provenance and the physics dt in every file, values rounded to their intervals, joint renames;
Isaac Lab, Newton and MuJoCo still load every file."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from export_helpers import TRUTH, make_result, model_entry, short_recording

from actuator_sysid.cli import main
from actuator_sysid.datasets.recording import Recording
from actuator_sysid.export import ExportError, render_format
from actuator_sysid.export.consumer_replay import isaaclab_actuators
from actuator_sysid.export.randomization import randomization
from actuator_sysid.export.selection import RAD_PER_DEG, prepare, round_to_interval
from actuator_sysid.models import parameters

CHECKED = ("isaaclab.py", "isaaclab.json", "isaaclab.yaml", "newton.usda", "mjcf.xml")
# what fit_recording writes for a limit the log never pressed (search.release_limits) and a term pushed to its
# lower search bound (uncertainty.analyse): both unidentified, their values the search bounds
RELEASED = {
    "identified": False,
    "value": None,
    "estimate": 1000.0,
    "interval95": [1.2, 1000.0],
    "reason": "the log never presses this limit: it is set to the search bound, where it does not bind "
    "(the fit is the same); use the datasheet value",
}
AT_BOUND = {
    "identified": False,
    "value": None,
    "estimate": 1e-5,
    "interval95": [1e-5, 3.3e-3],
    "reason": "it sits at the search bound: the data push it beyond any plausible value",
}
GUESSES = (1000.0, 1e-5, 1e-5 * RAD_PER_DEG)  # the unidentified values, and viscous friction per degree (USD)


def _ident(value: float, rel: float = 0.02) -> dict:
    return {
        "identified": True,
        "value": value,
        "estimate": value,
        "interval95": [value * (1 - rel), value * (1 + rel)],
    }


@pytest.fixture(scope="module")
def rec() -> Recording:
    return short_recording(n_segments=2, n_samples=200, joints=["pendulum", "knee"])


@pytest.fixture(scope="module")
def result(rec: Recording) -> dict:
    """A DC motor (pendulum) and an ideal PD (knee) whose effort limit the log never pressed and whose viscous
    friction sits at its lower search bound; the rest identified."""
    params = {**TRUTH, "actuator_effort_limit": 1000.0, "viscous_friction": 1e-5, "stiffness": 25.0314159}
    models = {}
    for joint, fam in (("pendulum", "dcmotor"), ("knee", "ideal_pd")):
        entry = model_entry(fam, params)
        entry["intervals"] = {n: _ident(float(v)) for n, v in entry["params"].items()}
        entry["intervals"] |= {"actuator_effort_limit": RELEASED, "viscous_friction": AT_BOUND}
        entry["metrics"]["validation"] = {"position_rmse": 0.0123}
        models[joint] = {fam: entry}
    res = make_result(models, rec)
    res["verdict"] = {
        "verdict": "usable",
        "checks": [
            {"check": "budget", "status": "usable", "reason": "the search stopped on its time budget"}
        ],
    }
    return res


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]


def _carries(text: str, value: float) -> bool:
    return any(math.isclose(x, value, rel_tol=1e-4) for x in _numbers(text))


def _load_all(files: dict[str, str], tmp_path: Path) -> dict:
    """Every file through its real consumer: Isaac Lab cfg classes, Newton's add_usd, MuJoCo."""
    import mujoco
    import newton

    cfgs = {
        fmt: isaaclab_actuators(files[fmt], fmt, files["isaaclab.py"])["ACTUATORS"]
        for fmt in ("isaaclab.py", "isaaclab.json", "isaaclab.yaml")
    }
    usd = tmp_path / "newton.usda"
    usd.write_text(files["newton.usda"])
    builder = newton.ModelBuilder()
    builder.add_usd(str(usd))
    model = builder.finalize(device="cpu")
    return {"cfgs": cfgs, "newton": model, "mujoco": mujoco.MjModel.from_xml_string(files["mjcf.xml"])}


def test_unidentified_values_are_left_to_the_consumer_by_default(
    result: dict, rec: Recording, tmp_path: Path
) -> None:
    files = {
        fmt: render_format(result, rec, fmt, info={"fit_id": "fit-123", "dataset": "ds-9"}) for fmt in CHECKED
    }
    for fmt, text in files.items():
        for guess in GUESSES:
            assert not _carries(text, guess), (fmt, guess)
        assert "fit-123" in text and "ds-9" in text and "USABLE" in text.upper(), (
            fmt
        )  # provenance and verdict
        assert "0.005" in text and "decimation" in text, fmt  # the physics dt the delays count in
        assert "NOT IDENTIFIED" in text and "actuator_effort_limit" in text, fmt  # said, not silently dropped
    loaded = _load_all(files, tmp_path)
    for fmt, cfgs in loaded["cfgs"].items():  # Isaac Lab's default (None: the USD/joint limit) applies
        assert (
            cfgs["pendulum"].actuator_effort_limit is None and cfgs["knee"].actuator_effort_limit is None
        ), fmt
        assert cfgs["pendulum"].viscous_friction is None, fmt
        assert cfgs["pendulum"].stiffness == 25.03, fmt  # rounded to a tenth of its interval's half-width
    import mujoco

    m = loaded[
        "mujoco"
    ]  # the ideal PD has no forcerange; the DC motor's is its (identified) saturation effort
    assert not m.actuator_forcelimited[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, "knee_actuator")]
    assert not m.jnt_actfrclimited.any()  # no effort limit on the DC motor's joint either
    assert float(m.dof_damping.max()) == 0.0
    assert float(loaded["newton"].joint_damping.numpy().max()) == 0.0
    doc = json.loads(files["isaaclab.json"])
    assert doc["provenance"]["physics_dt_s"] == 0.005 and doc["provenance"]["fit_id"] == "fit-123"
    assert any("actuator_effort_limit" in line and "omitted" in line for line in doc["unidentified"])


def test_given_values_appear_and_comment_mode_flags_the_estimate(
    result: dict, rec: Recording, tmp_path: Path
) -> None:
    given = {"actuator_effort_limit": 0.6, "knee/viscous_friction": 0.0042}
    files = {fmt: render_format(result, rec, fmt, given=given) for fmt in CHECKED}
    for fmt, text in files.items():
        assert _carries(text, 0.6) and "GIVEN" in text, fmt
        assert not _carries(text, 1000.0), fmt
    loaded = _load_all(files, tmp_path)
    for cfgs in loaded["cfgs"].values():
        assert cfgs["pendulum"].actuator_effort_limit == 0.6 and cfgs["knee"].viscous_friction == 0.0042
        assert cfgs["pendulum"].viscous_friction is None  # only the knee's was given
    import mujoco

    m = loaded["mujoco"]  # the DC motor is MuJoCo's <dcmotor>: its saturation holds the effort limit
    a = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, "pendulum_actuator")
    assert m.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_DCMOTOR
    assert list(m.actuator_forcerange[a]) == pytest.approx([-0.6, 0.6])
    flagged = render_format(result, rec, "isaaclab.py", unidentified="comment")
    line = next(x for x in flagged.splitlines() if x.strip().startswith("actuator_effort_limit="))
    assert "1000.0" in line and "NOT IDENTIFIED" in line  # the estimate, loudly
    doc = randomization(prepare(result, given=given))  # ranges only from identified intervals
    assert "actuator_effort_limit" not in doc["joints"]["pendulum"]["ranges"]
    assert "viscous_friction" not in doc["joints"]["pendulum"]["ranges"]
    assert "no range" in doc["joints"]["pendulum"]["sources"]["viscous_friction"]
    with pytest.raises(ExportError, match="registry parameter"):
        render_format(result, rec, "isaaclab.py", given={"effort": 1.0})
    with pytest.raises(ExportError, match="unknown joint"):
        render_format(result, rec, "isaaclab.py", given={"elbow/actuator_effort_limit": 1.0})


def test_cli_export_set_and_rename(result: dict, rec: Recording, tmp_path: Path, capsys) -> None:
    import mujoco

    fit = tmp_path / "fit"
    fit.mkdir()
    (fit / "fit.json").write_text(json.dumps(result))
    load = {
        "mass": rec.joints[0].mass,
        "com_distance": rec.joints[0].com_distance,
        "inertia": rec.joints[0].inertia,
        "gravity": rec.joints[0].gravity,
        "joint_type": "revolute",
    }
    (fit / "validation.json").write_text(json.dumps({"bench": {"pendulum": load, "knee": load}}))
    assert (
        main(
            [
                "export",
                str(fit),
                "--format",
                "isaaclab.py",
                "--set",
                "actuator_effort_limit=0.6",
                "--rename",
                "pendulum=elbow_joint",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert (
        "actuator_effort_limit=0.6," in text and "'elbow_joint'" in text and "pendulum" in text
    )  # renamed, said
    assert (
        main(
            [
                "export",
                str(fit),
                "--format",
                "mjcf.xml",
                "--rename",
                "pendulum=elbow_joint",
                "--out",
                str(tmp_path / "m.xml"),
            ]
        )
        == 0
    )
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "m.xml"))
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "elbow_joint") >= 0
    assert main(["export", str(fit), "--format", "isaaclab.py", "--set", "nonsense=1"]) == 2
    assert "registry parameter" in capsys.readouterr().err


def test_rounding_keeps_what_the_interval_supports() -> None:
    assert round_to_interval(25.0314159, 25.0314159, [24.9, 25.1]) == 25.03
    assert round_to_interval(0.0123456, 0.0123456, [0.012, 0.0127]) == 0.01235
    assert round_to_interval(7.5, 7.5, None) == 7.5
    # a value scaled to another operating point keeps its relative precision
    assert round_to_interval(50.0628318, 25.0314159, [24.9, 25.1]) == 50.06


def test_an_unidentified_term_inside_its_range_keeps_its_fitted_value(rec: Recording) -> None:
    """An export is the model that was validated: a friction whose 95 % interval reaches the consumer's default
    (0) while its estimate does not is written, flagged NOT IDENTIFIED, not left to the default while its
    sloppy partners keep their fitted values; one at its lower search bound is still left out."""
    entry = model_entry("dcmotor", TRUTH)
    entry["intervals"] = {n: _ident(float(v)) for n, v in entry["params"].items()}
    entry["intervals"]["friction"] = {
        "identified": False,
        "value": None,
        "estimate": TRUTH["friction"],
        "interval95": [1e-5, 0.9],
        "reason": "the data barely constrain it (its 95 % interval spans more than a factor of 2)",
    }
    entry["intervals"]["viscous_friction"] = AT_BOUND
    entry["params"]["viscous_friction"] = 1e-5
    res = make_result({"pendulum": {"dcmotor": entry}}, rec)
    model = prepare(res).joints["pendulum"].models["dcmotor"]
    assert model.params["friction"] == TRUTH["friction"] and "viscous_friction" not in model.params
    assert model.unidentified is not None
    assert model.unidentified["friction"]["action"].startswith("written: NOT IDENTIFIED")
    text = render_format(res, rec, "isaaclab.py")
    (cfg,) = isaaclab_actuators(text, "isaaclab.py")["ACTUATORS"].values()
    assert cfg.friction == TRUTH["friction"] and cfg.viscous_friction is None
    line = next(x for x in text.splitlines() if x.strip().startswith("friction="))
    assert "NOT IDENTIFIED" in line or "NOT IDENTIFIED" in text


def test_randomisation_follows_the_joint_interval(rec: Recording) -> None:
    """Two sloppy partners (correlation 0.99) drawn each over its own 95 % interval would leave what the data
    allow together: each range is its interval with the partner held, √(1 − ρ²) of its own; an uncorrelated
    one keeps its marginal interval."""
    entry = model_entry("dcmotor", TRUTH)
    entry["intervals"] = {n: _ident(float(v), 0.1) for n, v in entry["params"].items()}
    names = ["stiffness", "damping", "armature"]
    entry["correlation"] = {"names": names, "matrix": [[1, 0.99, 0], [0.99, 1, 0], [0, 0, 1]]}
    doc = randomization(make_result({"pendulum": {"dcmotor": entry}}, rec))["joints"]["pendulum"]
    f = math.sqrt(1 - 0.99**2)
    for name in ("stiffness", "damping"):
        lo, hi = doc["ranges"][name]
        v = TRUTH[name]
        if parameters.get(name).scale == "log":  # narrowed in ln(value), where the interval is symmetric
            assert math.log(v / lo) == pytest.approx(f * math.log(1 / 0.9), rel=1e-6)
            assert math.log(hi / v) == pytest.approx(f * math.log(1.1), rel=1e-6)
        else:
            assert (v - lo, hi - v) == pytest.approx((f * 0.1 * v, f * 0.1 * v), rel=1e-6)
        assert hi - lo < 0.2 * f * v * 1.01  # far inside the marginal interval's 0.2·v
        assert doc["sources"][name].startswith("joint interval95")
    lo, hi = doc["ranges"]["armature"]
    assert (lo, hi) == pytest.approx((0.9 * TRUTH["armature"], 1.1 * TRUTH["armature"]))
    assert doc["sources"]["armature"] == "interval95"
