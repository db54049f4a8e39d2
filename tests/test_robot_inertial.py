"""Link inertials, friction and armature from torque logs (fitting/robot/inertial.py).

The log is made by MuJoCo alone: mj_step (RK4, 1 ms) on a cylindrical arm written here (yaw hinge, vertical lift
slide, radial reach slide) with MuJoCo's own joint armature, viscous damping and frictionloss and a constant
offset effort, PD-tracking multisine targets; the logged torque is the PD effort held over each step, averaged
over the two steps either side of the reading (as a current sensor's averaging), plus white noise. The fit gets
the same arm 20 % off in masses, COMs and inertias and no friction.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.fitting.robot.inertial import (
    FRICTION_NAMES,
    PI_NAMES,
    InertialOptions,
    InertialResult,
    body_pi,
    identify_inertials,
    log_cholesky_from_pi,
    pi_from_log_cholesky,
    pseudo_inertia,
)
from actuator_sysid.fitting.robot.inertial_check import inertial_verdict
from actuator_sysid.models.robot import RobotError, RobotModel, load_robot

JOINTS = ("yaw", "lift", "reach")
TRUTH = {  # per joint: Coulomb (frictionloss), viscous (damping), offset, armature; N·m or N, kg·m² or kg
    "coulomb": np.array([1.0, 6.0, 3.0]),
    "viscous": np.array([0.8, 12.0, 6.0]),
    "offset": np.array([0.4, -3.0, 1.5]),
    "armature": np.array([0.3, 2.0, 1.0]),
}
LINKS = {  # link: (mass kg, COM m, principal inertia kg·m²)
    "column": (8.0, (0.02, 0.01, 0.2), (0.3, 0.3, 0.05)),
    "carriage": (4.0, (0.05, 0.0, 0.01), (0.02, 0.03, 0.03)),
    "forearm": (2.5, (0.2, 0.01, -0.02), (0.005, 0.04, 0.04)),
}
NOISE = np.array([0.1, 1.0, 0.5])  # torque noise per joint, N·m / N
DT = 0.001


def arm_xml(scale: float = 1.0, friction: bool = True) -> str:
    """The cylindrical arm, link masses, COMs and inertias times `scale` (the COMs inversely), joint terms on."""

    def inertial(name: str) -> str:
        m, c, i = LINKS[name]
        com = " ".join(f"{x / scale:g}" for x in c)
        return f'<inertial pos="{com}" mass="{m * scale:g}" diaginertia="{" ".join(f"{x * scale:g}" for x in i)}"/>'

    def joint(k: int, kind: str, axis: str, rng: str = "") -> str:
        terms = ""
        if friction:
            terms = (
                f' armature="{TRUTH["armature"][k]:g}" damping="{TRUTH["viscous"][k]:g}"'
                f' frictionloss="{TRUTH["coulomb"][k]:g}" solreffriction="0.002 1"'
                ' solimpfriction="0.99 0.999 0.001"'
            )
        return f'<joint name="{JOINTS[k]}" type="{kind}" axis="{axis}"{rng}{terms}/>'

    return f"""<mujoco model="cyl3">
  <option timestep="{DT}" integrator="RK4"/>
  <worldbody>
    <body name="base">
      <inertial pos="0 0 0" mass="20" diaginertia="0.1 0.1 0.1"/>
      <body name="column">
        {joint(0, "hinge", "0 0 1")}
        {inertial("column")}
        <body name="carriage" pos="0 0 0.3">
          {joint(1, "slide", "0 0 1", ' range="-0.5 0.5"')}
          {inertial("carriage")}
          <body name="forearm" pos="0.1 0 0">
            {joint(2, "slide", "1 0 0", ' range="-0.5 0.5"')}
            {inertial("forearm")}
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def targets(n: int, seed: int, amp: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, J) multisine position targets and their velocities: five sines a joint, 0.2–2.3 Hz, random phases."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * DT
    q, qd = np.tile(centre, (n, 1)), np.zeros((n, len(amp)))
    for j in range(len(amp)):
        for f in (0.2, 0.55, 0.9, 1.6, 2.3):
            w, ph = 2 * math.pi * f, rng.uniform(0, 2 * math.pi)
            q[:, j] += amp[j] / 5 * np.sin(w * t + ph)
            qd[:, j] += amp[j] / 5 * w * np.cos(w * t + ph)
    return q, qd


CYL_DRIVE = {  # multisine amplitude and centre, PD gains
    "amp": np.array([1.2, 0.15, 0.15]),
    "centre": np.array([0.0, 0.0, 0.2]),
    "kp": np.array([300.0, 6000.0, 3000.0]),
    "kd": np.array([30.0, 300.0, 150.0]),
}


def simulate(
    seconds: float,
    seed: int,
    xml: str | None = None,
    drive: dict | None = None,
    truth: dict | None = None,
    noise: np.ndarray = NOISE,
    joints: tuple[str, ...] = JOINTS,
) -> Recording:
    """A MuJoCo log of the true arm tracking multisines by PD: q, and the PD torque plus noise as measured tau."""
    model = mujoco.MjModel.from_xml_string(xml or arm_xml())
    data = mujoco.MjData(model)
    drive, truth = drive or CYL_DRIVE, truth or TRUTH
    n = int(round(seconds / DT))
    q_ref, qd_ref = targets(n, seed, drive["amp"], drive["centre"])
    data.qpos[:] = q_ref[0]
    q, tau = np.zeros((n, len(joints))), np.zeros((n, len(joints)))
    for k in range(n):
        q[k] = data.qpos
        tau[k] = drive["kp"] * (q_ref[k] - data.qpos) + drive["kd"] * (qd_ref[k] - data.qvel)
        data.qfrc_applied[:] = (
            tau[k] - truth["offset"]
        )  # the offset effort the motor spends and the log shows
        mujoco.mj_step(model, data)
    # a current sensor averages over the sample: the held effort of the steps either side of each reading
    tau[1:] = 0.5 * (tau[1:] + tau[:-1])
    noisy = tau + np.random.default_rng(seed + 100).normal(0.0, noise, tau.shape)
    z = np.zeros_like(q)
    seg = Segment(f"s{seed}", np.arange(n) * DT, q=q, qd=z, q_des=q_ref, qd_des=z, tau_ff=z, tau=noisy)
    return Recording([JointInfo(j) for j in joints], [seg])


@pytest.fixture(scope="module")
def off_model(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    path = Path(tmp_path_factory.mktemp("inertial")) / "cyl3.xml"
    path.write_text(arm_xml(scale=1.2, friction=False))
    return load_robot(path)


@pytest.mark.unit
def test_log_cholesky_round_trip() -> None:
    """π → log-Cholesky → π is the identity on a physical inertial, and any log-Cholesky vector is physical."""
    rng = np.random.default_rng(1)
    m, c = 2.0, np.array([0.1, -0.05, 0.3])
    i_c = np.diag([0.02, 0.03, 0.04])
    i_o = i_c + m * (c @ c * np.eye(3) - np.outer(c, c))
    pi = np.array([m, *(m * c), i_o[0, 0], i_o[1, 1], i_o[2, 2], i_o[0, 1], i_o[0, 2], i_o[1, 2]])
    np.testing.assert_allclose(pi_from_log_cholesky(log_cholesky_from_pi(pi)), pi, rtol=1e-10, atol=1e-12)
    for _ in range(20):
        assert np.linalg.eigvalsh(pseudo_inertia(pi_from_log_cholesky(rng.normal(0, 1.5, 10)))).min() > 0
    with pytest.raises(RobotError, match="not physically consistent"):
        log_cholesky_from_pi(np.array([1.0, 0, 0, 0, -1.0, 1.0, 1.0, 0, 0, 0]))


OPTIONS = InertialOptions(filter_window_s=0.011, filter_order=5, min_speed=0.05, stride=2)


def truth_values() -> dict[str, float]:
    """Every parameter's true value by the fit's names: π of each link from the true MJCF, the joint terms."""
    model = mujoco.MjModel.from_xml_string(arm_xml(friction=False))
    out = {}
    for lk in LINKS:
        pi = body_pi(model, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, lk))
        out.update({f"{lk}.{n}": float(v) for n, v in zip(PI_NAMES, pi, strict=True)})
    for k, j in enumerate(JOINTS):
        out.update({f"{j}.{t}": float(TRUTH[t][k]) for t in FRICTION_NAMES})
    return out


@pytest.fixture(scope="module")
def cyl_result(off_model: RobotModel) -> InertialResult:
    """The cylindrical arm identified from a 3 s log, a 2 s log held out."""
    return identify_inertials(
        off_model, [simulate(3.0, seed=0)], validation=[simulate(2.0, seed=7)], options=OPTIONS
    )


@pytest.mark.unit
def test_inertials_from_mujoco_log(cyl_result: InertialResult) -> None:
    """Friction within 5 %, identifiable armature within 10 %, identifiable masses and every identifiable
    combination within 5 %, every inertia physical, held-out torque RMSE near the noise."""
    result = cyl_result
    truth = truth_values()
    status = result.identifiability
    for k, j in enumerate(JOINTS):
        got = result.friction[j]
        for term in ("coulomb", "viscous"):
            assert status[f"{j}.{term}"] == "alone"
            assert got[term] == pytest.approx(TRUTH[term][k], rel=0.05), (j, term, got)
            lo, hi = result.intervals[f"{j}.{term}"] or (math.nan, math.nan)
            assert lo < got[term] < hi and hi - lo < 0.1 * got[term]
        if status[f"{j}.armature"] == "alone":
            assert got["armature"] == pytest.approx(TRUTH["armature"][k], rel=0.10), (j, got)
    # a vertical slide's armature moves with the carriage's mass; a vertical yaw's with every link's Izz
    assert status["reach.armature"] == "alone"
    assert status["lift.armature"] == status["yaw.armature"] == "combination"
    assert status["column.m"] == "none" and status["carriage.m"] == "combination"
    assert status["forearm.m"] == "alone" and result.intervals["forearm.m"] is not None
    assert result.links["forearm"]["mass"] == pytest.approx(LINKS["forearm"][0], rel=0.05)
    assert all(v["pseudo_inertia_min_eig"] > 0 for v in result.links.values())
    fitted = {f"{lk}.{n}": v for lk in LINKS for n, v in zip(PI_NAMES, _pi(result.links[lk]), strict=True)}
    fitted.update({f"{j}.{t}": result.friction[j][t] for j in JOINTS for t in FRICTION_NAMES})
    combos = [c for c in result.base_parameters if len(c) > 1]
    assert {"lift.armature", "carriage.m"} in [set(c) for c in combos], combos
    check_combinations(result.base_parameters, truth, fitted)
    assert result.rank == len(result.base_parameters) < len(status)
    for k, j in enumerate(JOINTS):
        assert result.rmse["held_out"][j] < 1.15 * NOISE[k], result.rmse
        assert result.rmse["model_file"][j] > 5 * result.rmse["train"][j]


@pytest.mark.unit
def test_held_out_verdict_reads_trivial_predictors(cyl_result: InertialResult) -> None:
    """The verdict is good where the held-out torque RMSE is small against the logged effort and beats zero
    torque, the model file and rigid-body least squares without friction; a residual no better than ignoring
    friction is poor, and without a held-out log nothing is judged."""
    result = cyl_result
    assert result.verdict["verdict"] == "good", result.verdict["reasons"]
    assert set(result.baselines) == {"zero", "nominal", "rigid_body"}
    for j in JOINTS:
        assert result.rmse["held_out"][j] < 0.8 * min(b[j] for b in result.baselines.values())
        assert (
            result.baselines["zero"][j] > result.baselines["rigid_body"][j] > 3 * result.rmse["held_out"][j]
        )
    frictionless = {j: 0.9 * result.baselines["rigid_body"][j] for j in JOINTS}
    verdict = inertial_verdict(frictionless, result.baselines)
    assert verdict.verdict == "poor"
    assert all("does not beat" in r for r in verdict.reasons), verdict.reasons
    assert inertial_verdict({}, {}).verdict == "not judged"


def check_combinations(combos: list[dict[str, float]], truth: dict, fitted: dict) -> None:
    """Each identifiable combination within 5 % of its true value, or of its largest term's scale where the
    truth is near zero (a link's m·|c| for a first moment, tr(I)/3 for an inertia, 0.2 N·m for an offset)."""

    def scale(n: str) -> float:
        link, kind = n.rsplit(".", 1)
        if kind.startswith("mc"):
            return float(np.linalg.norm([truth[f"{link}.mc{a}"] for a in "xyz"]))
        if kind.startswith("I"):
            return sum(truth[f"{link}.I{a}"] for a in ("xx", "yy", "zz")) / 3
        return max(abs(truth[n]), 0.2 if kind == "offset" else 0.0)

    for combo in combos:
        want = sum(c * truth[n] for n, c in combo.items())
        got = sum(c * fitted[n] for n, c in combo.items())
        tol = 0.05 * max(abs(want), max(abs(c) * scale(n) for n, c in combo.items()))
        assert abs(got - want) < tol, (combo, got, want)


def _pi(link: dict) -> np.ndarray:
    """π of a result's link entry."""
    m = link["mass"]
    return np.array([m, *(m * np.asarray(link["com"])), *link["inertia_origin"]])


@pytest.mark.unit
def test_clear_errors(off_model: RobotModel) -> None:
    """A log too short for the filter and a torque choice that the log lacks name the problem."""
    short = simulate(0.05, seed=3)
    with pytest.raises(RobotError, match="Savitzky–Golay window"):
        identify_inertials(off_model, [short])
    with pytest.raises(RobotError, match="tau_ff"):
        identify_inertials(off_model, [simulate(0.5, seed=3)], options=InertialOptions(torque="commanded"))
    with pytest.raises(RobotError, match="faster than min_speed"):
        identify_inertials(off_model, [simulate(0.5, seed=3)], options=InertialOptions(min_speed=50.0))
    with pytest.raises(RobotError, match="option stride 0"):
        identify_inertials(off_model, [simulate(0.5, seed=3)], options=InertialOptions(stride=0))


@pytest.mark.unit
def test_regressor_is_mujoco_inverse_dynamics(off_model: RobotModel) -> None:
    """The regressor built about the off model, times the true arm's π, is MuJoCo's own inverse dynamics of the
    true arm (loaded straight from its MJCF) at random states: the columns are exact, not linearised."""
    from actuator_sysid.fitting.robot.inertial import _Rows, moving_bodies, rigid_regressor
    from actuator_sysid.models.articulated import id_model

    rng = np.random.default_rng(5)
    rows = _Rows(rng.uniform(-0.3, 0.3, (20, 3)), rng.normal(0, 1, (20, 3)), rng.normal(0, 3, (20, 3)), None)  # type: ignore[arg-type]
    mm, md, cols = id_model(off_model)
    bodies = moving_bodies(mm)
    y, rest = rigid_regressor(mm, md, cols, bodies, rows)
    truth = truth_values()
    pi = np.array([truth[f"{lk}.{n}"] for lk in ("column", "carriage", "forearm") for n in PI_NAMES])
    model = mujoco.MjModel.from_xml_string(arm_xml(friction=False))
    data = mujoco.MjData(model)
    for k in range(20):
        data.qpos[:], data.qvel[:], data.qacc[:] = rows.q[k], rows.qd[k], rows.qdd[k]
        mujoco.mj_inverse(model, data)
        np.testing.assert_allclose(y[k] @ pi + rest[k], data.qfrc_inverse, rtol=1e-5, atol=1e-5)


ARM3_TRUTH = {
    "coulomb": np.array([0.8, 1.5, 0.6]),
    "viscous": np.array([0.5, 0.8, 0.3]),
    "offset": np.array([0.2, -0.4, 0.1]),
    "armature": np.array([0.15, 0.2, 0.08]),
}
ARM3_NOISE = np.array([0.1, 0.2, 0.1])


def arm3_xml(scale: float = 1.0, friction: bool = True) -> str:
    """A revolute yaw–pitch–pitch arm, link inertials times `scale` (COMs inversely)."""

    def joint(k: int, name: str, axis: str) -> str:
        t = ARM3_TRUTH
        terms = (
            f' armature="{t["armature"][k]:g}" damping="{t["viscous"][k]:g}" frictionloss="{t["coulomb"][k]:g}"'
            ' solreffriction="0.002 1" solimpfriction="0.99 0.999 0.001"'
            if friction
            else ""
        )
        return f'<joint name="{name}" type="hinge" axis="{axis}"{terms}/>'

    def inertial(m: float, c: tuple, i: tuple) -> str:
        com = " ".join(f"{x / scale:g}" for x in c)
        return f'<inertial pos="{com}" mass="{m * scale:g}" diaginertia="{" ".join(f"{x * scale:g}" for x in i)}"/>'

    return f"""<mujoco model="arm3">
  <option timestep="{DT}" integrator="RK4"/>
  <worldbody>
    <body name="base">
      <inertial pos="0 0 0" mass="10" diaginertia="0.1 0.1 0.1"/>
      <body name="turret" pos="0 0 0.1">
        {joint(0, "shoulder_yaw", "0 0 1")}
        {inertial(3.0, (0.01, 0.02, 0.05), (0.02, 0.02, 0.01))}
        <body name="upper" pos="0 0 0.1">
          {joint(1, "shoulder_pitch", "0 1 0")}
          {inertial(2.0, (0.15, 0.01, 0.0), (0.002, 0.02, 0.02))}
          <body name="fore" pos="0.3 0 0">
            {joint(2, "elbow", "0 1 0")}
            {inertial(1.0, (0.12, 0.0, 0.01), (0.001, 0.01, 0.01))}
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


@pytest.mark.unit
def test_revolute_arm(tmp_path: Path) -> None:
    """A yaw–pitch–pitch arm: friction within 5 %, every identifiable combination within 5 %, link masses only in
    combination (a revolute chain's are), inertias physical, held-out RMSE near the noise."""
    path = tmp_path / "arm3.xml"
    path.write_text(arm3_xml(scale=1.2, friction=False))
    robot = load_robot(path)
    joints = ("shoulder_yaw", "shoulder_pitch", "elbow")
    drive = {
        "amp": np.array([1.5, 0.8, 1.0]),
        "centre": np.array([0.0, 0.3, 0.5]),
        "kp": np.array([200.0, 300.0, 150.0]),
        "kd": np.array([10.0, 15.0, 6.0]),
    }
    kw = {"xml": arm3_xml(), "drive": drive, "truth": ARM3_TRUTH, "noise": ARM3_NOISE, "joints": joints}
    result = identify_inertials(
        robot, [simulate(6.0, seed=1, **kw)], validation=[simulate(3.0, seed=2, **kw)], options=OPTIONS
    )
    for k, j in enumerate(joints):
        for term in ("coulomb", "viscous"):
            assert result.friction[j][term] == pytest.approx(ARM3_TRUTH[term][k], rel=0.05), (
                j,
                result.friction,
            )
        assert result.rmse["held_out"][j] < 1.2 * ARM3_NOISE[k], result.rmse
    assert all(result.identifiability[f"{lk}.m"] != "alone" for lk in ("turret", "upper", "fore"))
    assert all(v["pseudo_inertia_min_eig"] > 0 for v in result.links.values())
    model = mujoco.MjModel.from_xml_string(arm3_xml(friction=False))
    truth = {}
    for lk in ("turret", "upper", "fore"):
        pi = body_pi(model, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, lk))
        truth.update({f"{lk}.{n}": float(v) for n, v in zip(PI_NAMES, pi, strict=True)})
    for k, j in enumerate(joints):
        truth.update({f"{j}.{t}": float(ARM3_TRUTH[t][k]) for t in FRICTION_NAMES})
    fitted = {
        f"{lk}.{n}": v for lk in result.links for n, v in zip(PI_NAMES, _pi(result.links[lk]), strict=True)
    }
    fitted.update({f"{j}.{t}": result.friction[j][t] for j in joints for t in FRICTION_NAMES})
    check_combinations(result.base_parameters, truth, fitted)


@pytest.mark.unit
def test_the_cli_identifies_from_log_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fit LOG --robot MODEL --inertials --validation-log HELD`: inertials.json with friction near the truth and
    a held-out torque residual per joint, from files alone."""
    from actuator_sysid.cli import main as cli_main
    from actuator_sysid.datasets.canonical import write_table

    model = tmp_path / "cyl3.xml"
    model.write_text(arm_xml(scale=1.2, friction=False))
    write_table(simulate(3.0, seed=0), tmp_path / "train.csv")
    write_table(simulate(2.0, seed=7), tmp_path / "held.csv")
    args = ["fit", str(tmp_path / "train.csv"), "--robot", str(model), "--inertials"]
    args += ["--validation-log", str(tmp_path / "held.csv"), "--out", str(tmp_path / "out")]
    args += ["--filter-window", "0.011", "--filter-order", "5", "--min-speed", "0.05"]
    assert cli_main(args) == 0
    out = json.loads((tmp_path / "out" / "inertials.json").read_text())
    for k, j in enumerate(JOINTS):
        assert out["friction"][j]["viscous"] == pytest.approx(TRUTH["viscous"][k], rel=0.10), out["friction"]
        assert j in out["rmse"]["held_out"] and j in out["baselines"]["nominal"]
    assert out["verdict"]["verdict"] == "good", out["verdict"]
    assert "held-out torque RMSE" in capsys.readouterr().err
    identified = (tmp_path / "out" / "cyl3_identified.xml").read_text()  # the model file, values written in
    assert "verdict on the held-out torque: good" in identified
