"""A URDF as shipped (package:// meshes in visuals and collisions) fitted torque-driven, and its MJCF replayed.

A two-joint arm in the ROS layout (arm_pkg/urdf/arm.urdf, arm_pkg/meshes/link.stl written here by trimesh),
every link's mass in its <inertial>: the loader never opens the meshes, so the fit runs from the folder through
the CLI (the package found through --package-root) and the model imports from an uploaded zip. The log is made
by Newton with kp = kd = 0 and a multi-sine feed-forward torque, as an arm logged in current; the MJCF export's
actuators take that torque as ctrl and a MuJoCo replay through them matches our rollout.
"""

from __future__ import annotations

import io
import json
import math
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pytest
import requests
from conftest import Server, run_cli
from robot_sim import torque_driven_log

from actuator_sysid.datasets.canonical import write_table
from actuator_sysid.export.robot_common import bias_of, joint_models, provenance_lines, replay_log
from actuator_sysid.export.robot_mjcf import actuator_names, as_mjcf, replay_model
from actuator_sysid.export.robot_replay import mujoco_run, rmse
from actuator_sysid.export.selection import ExportError
from actuator_sysid.fitting.result import RobotResult, RobotValidation
from actuator_sysid.models.robot import load_robot

INERTIA = '<inertia ixx="0.02" iyy="0.02" izz="0.003" ixy="0" ixz="0" iyz="0"/>'
MESH = '<geometry><mesh filename="package://arm_pkg/meshes/link.stl"/></geometry>'


def link(name: str, mass: float) -> str:
    shape = f'<origin xyz="0 0 -0.15"/>{MESH}'
    return (
        f'<link name="{name}"><inertial><origin xyz="0 0 -0.15"/><mass value="{mass}"/>{INERTIA}</inertial>'
        f"<visual>{shape}</visual><collision>{shape}</collision></link>"
    )


def joint(name: str, parent: str, child: str, xyz: str, axis: str) -> str:
    return (
        f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}"/><axis xyz="{axis}"/><limit lower="-3" upper="3" effort="40" velocity="20"/>'
        "</joint>"
    )


URDF = (
    '<robot name="arm"><link name="base"><inertial><mass value="5"/>'
    + INERTIA
    + "</inertial></link>"
    + link("link1", 3.0)
    + link("link2", 1.5)
    + joint("yaw", "base", "link1", "0 0 0", "0 0 1")
    + joint("pitch", "link1", "link2", "0 0 -0.3", "0 1 0")
    + "</robot>"
)
LOG_DT, DEC, DELAY, SAMPLES = 0.005, 2, 2, 500
TRUTH = {
    "armature": np.array([0.05, 0.03]),
    "damping": np.array([0.5, 0.3]),
    "friction": np.array([1.0, 0.5]),
}


def write_package(ws: Path) -> Path:
    """arm_pkg/urdf/arm.urdf and the STL box its visuals and collisions name by package://; the URDF's path."""
    import trimesh

    (ws / "arm_pkg" / "urdf").mkdir(parents=True)
    (ws / "arm_pkg" / "meshes").mkdir()
    trimesh.creation.box(extents=(0.05, 0.05, 0.3)).export(ws / "arm_pkg" / "meshes" / "link.stl")
    (ws / "arm_pkg" / "urdf" / "arm.urdf").write_text(URDF)
    return ws / "arm_pkg" / "urdf" / "arm.urdf"


def multisine(samples: int, amplitude: tuple[float, ...]) -> np.ndarray:
    rng = np.random.default_rng(1)
    t = np.arange(samples + 1) * LOG_DT
    out = np.zeros((samples + 1, len(amplitude)))
    for j, amp in enumerate(amplitude):
        for f in (0.9, 1.7, 3.1):
            out[:, j] += amp / 2 * np.sin(2 * math.pi * f * t + rng.uniform(0, 2 * math.pi))
    return out


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The package, and a torque-driven Newton log of it written as a canonical CSV beside it."""
    ws = tmp_path_factory.mktemp("ws")
    urdf = write_package(ws)
    arm = load_robot(urdf, package_roots=(ws,))
    rec = torque_driven_log(
        arm, multisine(SAMPLES, (8.0, 4.0)), TRUTH, log_dt=LOG_DT, decimation=DEC, delay=DELAY
    )["rec"]
    write_table(rec, ws / "log.csv")
    return {"ws": ws, "urdf": urdf, "arm": arm, "rec": rec}


def test_the_meshes_are_skipped_where_the_inertial_holds_the_mass(shipped: dict) -> None:
    """Newton imports the URDF with no shape at all (visuals and collisions dropped: each link's <inertial>
    states its mass), the masses are the URDF's, and without --package-root the package is refused by name."""
    arm = shipped["arm"]
    assert arm.builder.shape_count == 0
    assert sorted(round(float(m), 6) for m in arm.builder.body_mass) == [1.5, 3.0, 5.0]
    assert arm.source_text is not None and "<mesh" not in arm.source_text
    r = run_cli(
        "fit", str(shipped["ws"] / "log.csv"), "--robot", str(shipped["urdf"]), "--kp", "0", "--kd", "0"
    )
    assert r.returncode == 2 and "names package 'arm_pkg'" in r.stderr and "--package-root" in r.stderr, (
        r.stderr
    )


def test_fitted_from_the_folder_and_the_mjcf_passes_the_feed_forward_torque(
    shipped: dict, tmp_path: Path
) -> None:
    """`fit LOG --robot URDF --kp 0 --kd 0 --package-root WS` writes every export; mjcf.xml's actuators have
    gain 1 (ctrl = tau_ff, within the fitted effort limit) and no kp division in its comment, every header names
    the time split used, and MuJoCo replaying the file with ctrl = tau_ff matches our rollout. With the
    actuators' gain zeroed the same replay is far off, so the torque does pass through them."""
    ws, out = shipped["ws"], tmp_path / "out"
    r = run_cli(
        "fit", str(ws / "log.csv"), "--robot", str(shipped["urdf"]), "--no-select", "--package-root", str(ws),
        "--kp", "0", "--kd", "0", "--decimation", str(DEC), "--budget", "1", "--out", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert {"isaaclab.py", "newton.usda", "mjcf.xml"} <= {p.name for p in out.iterdir()}
    text = (out / "mjcf.xml").read_text()
    fit = json.loads((out / "fit.json").read_text())
    split = f"the last 30% of the log in time, from {fit['validation']['split_time_s']:.2f} s"
    for name in ("mjcf.xml", "isaaclab.py", "newton.usda"):
        assert split in (out / name).read_text(), name
    assert "/kp" not in text and "ctrl = tau_ff" in text and "package:" not in text
    acts = {a.get("joint"): a for a in ET.fromstring(text).iter("general")}
    for j in ("yaw", "pitch"):
        gear = float(acts[j].get("gear", "1"))
        assert float(acts[j].get("gainprm", "0").split()[0]) * gear == pytest.approx(1.0)
        assert float(acts[j].get("forcerange").split()[1]) * gear == pytest.approx(40.0)
    mj = fit["replays"]["consumers"]["mujoco"]
    assert mj["status"] == "ok" and mj["rmse_replay_vs_ours"] < 1e-4, mj
    # the same replay by hand: through the file's actuators, then with their gain zeroed
    result = RobotResult.from_json(fit)
    lg, models = replay_log(result, shipped["rec"]), joint_models(result)
    bias = bias_of(result, lg.joints)
    q = mujoco_run(replay_model(text, ws), lg, bias, models, actuator_names(text))
    assert rmse(q, lg.q) == pytest.approx(mj["rmse_replay"], rel=1e-6, abs=1e-9)
    dead = text
    for a in acts.values():
        dead = dead.replace(f'gainprm="{a.get("gainprm")}"', 'gainprm="0"')
    q_dead = mujoco_run(replay_model(dead, ws), lg, bias, models, actuator_names(text))
    assert rmse(q_dead, lg.q) > 100 * max(rmse(q, lg.q), 1e-4)


# link2 without its <inertial>: its mass is its collision mesh's (a 0.05 × 0.05 × 0.3 m box at 1000 kg/m³)
MESH_MASS = URDF.replace(f'<inertial><origin xyz="0 0 -0.15"/><mass value="1.5"/>{INERTIA}</inertial>', "", 1)


def zipped_package(ws: Path, urdf: str) -> bytes:
    """arm_pkg zipped as shipped, its URDF's text `urdf`."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("arm_pkg/urdf/arm.urdf", urdf)
        z.write(ws / "arm_pkg" / "meshes" / "link.stl", "arm_pkg/meshes/link.stl")
    return buf.getvalue()


def test_the_urdf_with_its_package_imports_from_an_uploaded_zip(shipped: dict, server: Server) -> None:
    """The package zipped as shipped (arm_pkg/urdf/arm.urdf, arm_pkg/meshes/link.stl) uploads with 201; so does
    the arm whose link2 takes its mass from its collision mesh (read through trimesh), the note naming link2."""
    for urdf, kept in ((URDF, None), (MESH_MASS, "link2")):
        r = requests.post(
            server.url + "/api/v1/robots",
            files={"file": ("arm_pkg.zip", zipped_package(shipped["ws"], urdf))},
            timeout=120,
        )
        assert r.status_code == 201, r.text[:1000]
        body = r.json()
        assert [j["name"] for j in body["joints"]] == ["yaw", "pitch"]
        assert (kept is not None and f"link(s) {kept} state no <inertial> mass" in body["notes"][0]) or (
            kept is None and "no <inertial> mass" not in body["notes"][0]
        ), body["notes"]


def test_a_link_massed_by_its_collision_mesh(shipped: dict, tmp_path: Path) -> None:
    """A link with no <inertial> keeps its collision mesh, which Newton reads through trimesh for its mass
    (0.75 kg); the MJCF export, which would lose that mass and carry server paths, is refused by name."""
    ws = tmp_path / "ws"
    urdf = write_package(ws)
    urdf.write_text(MESH_MASS)
    arm = load_robot(urdf, package_roots=(ws,))
    short = [b.rsplit("/", 1)[-1] for b in arm.builder.body_label]
    assert arm.builder.body_mass[short.index("link2")] == pytest.approx(0.75, rel=1e-4)
    assert arm.builder.body_mass[short.index("link1")] == pytest.approx(3.0)
    with pytest.raises(ExportError, match="give those links an <inertial>"), as_mjcf(arm):
        pass


def test_the_header_names_held_out_recordings(shipped: dict) -> None:
    """A fit validated on whole held-out recordings says so in every export's header, by their names."""
    v = RobotValidation(
        split="recordings",
        fraction=0.25,
        recordings={"method": "last", "training": ["a.csv"], "validation": ["b.csv"]},
        rmse=0.01,
    )
    result = RobotResult(validation=v, robot={"path": "arm.urdf"}, sim={"dt": 0.0025, "decimation": 2})
    header = " ".join(provenance_lines(result, "MuJoCo MJCF"))
    assert "held-out recording b.csv, each replayed whole (last)" in header and "in time" not in header
