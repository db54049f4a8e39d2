"""The robot importer (issue 16): the model's own drives are zeroed on the fitted joints, and effort limits follow
MuJoCo's rules (gear, ctrlrange, forcerange, actuatorfrcrange), each checked against the real Newton / MuJoCo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import newton
import numpy as np
import pytest
import warp as wp

from actuator_sysid.models.robot import RobotModel, load_robot

wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines
ASSETS = Path(newton.__file__).parent / "examples" / "assets"
GO2_XML = Path(__file__).resolve().parents[2] / "shared" / "data" / "go2-in-air" / "go2.xml"

# one body per joint off a fixed base; every joint a different rule
LIMITS_MJCF = """<mujoco model="limits">
  <compiler angle="radian" autolimits="true"/>
  <option gravity="0 0 0"/>
  <default><default class="servo"><position kp="50" ctrlrange="-1 1" forcerange="-8 8"/></default></default>
  <worldbody>
    <body name="base"><inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
{bodies}
    </body>
  </worldbody>
  <actuator>
    <motor joint="geared" gear="3" ctrlrange="-10 10" forcerange="-2 2"/>
    <motor joint="capped" gear="2" ctrlrange="-5 5"/>
    <position class="servo" joint="servo"/>
    <general joint="biased" gainprm="30" biastype="affine" biasprm="0 -30 -1"/>
    <motor joint="unlimited" ctrllimited="false" ctrlrange="-1 1"/>
    <motor joint="pair" gear="2" ctrlrange="-1 1"/>
    <motor joint="pair" gear="4" ctrlrange="-0.5 0.5"/>
  </actuator>
</mujoco>
"""
JOINTS = {"geared": 6.0, "capped": 4.0, "servo": 8.0, "biased": np.inf, "unlimited": np.inf, "pair": 4.0}
BODY = (
    '      <body name="b_{n}" pos="{x} 0 0"><inertial pos="0 0 -0.1" mass="0.5" diaginertia="0.01 0.01 0.01"/>'
    '<joint name="{n}" axis="0 1 0"{extra}/></body>'
)


@pytest.fixture(scope="module")
def limits_xml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bodies = "\n".join(
        BODY.format(n=n, x=0.2 * i, extra=' actuatorfrcrange="-4 4"' if n == "capped" else "")
        for i, n in enumerate(JOINTS)
    )
    path = tmp_path_factory.mktemp("robot_import") / "limits.xml"
    path.write_text(LIMITS_MJCF.format(bodies=bodies))
    return path


def mujoco_saturated_torque(xml: Path, names: list[str]) -> np.ndarray:
    """Per joint, the largest |qfrc_actuator| real MuJoCo produces at q = 0 with every ctrl at ±1e4."""
    model = mujoco.MjModel.from_xml_path(str(xml))
    data = mujoco.MjData(model)
    out = np.zeros(len(names))
    for sign in (1.0, -1.0):
        data.ctrl[:] = sign * 1e4
        mujoco.mj_forward(model, data)
        for k, n in enumerate(names):
            adr = model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)]
            out[k] = max(out[k], abs(data.qfrc_actuator[adr]))
    return out


def drift(builder: Any, robot: RobotModel, steps: int = 40) -> np.ndarray:
    """|q − q0| per fitted joint after `steps` of Newton's SolverMuJoCo (MuJoCo C) at rest off 0, no
    gravity, no control set: whatever moves a joint here is a drive the model file states."""
    world = newton.ModelBuilder()
    world.add_builder(builder)
    model = world.finalize(device="cpu")
    model.set_gravity((0.0, 0.0, 0.0))
    limited = (robot.lower > -1e5) & (robot.upper < 1e5)  # the importers' "no limit" is ±1e10
    dofs, q0 = (
        robot.dof,
        np.where(limited, robot.lower + 0.3 * (robot.upper - robot.lower), 0.3),
    )  # off 0, in range
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True)
    s0: Any = model.state()
    s1: Any = model.state()
    control = model.control()
    q = s0.joint_q.numpy()
    q[dofs] = q0
    s0.joint_q.assign(q)
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    for _ in range(steps):
        solver.step(s0, s1, control, None, 1e-3)
        s0, s1 = s1, s0
    return np.abs(s0.joint_q.numpy()[dofs] - q0)


def raw_import(path: Path) -> newton.ModelBuilder:
    """Newton's own import, as load_robot calls it but with nothing changed after."""
    b = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    if path.suffix == ".usda":
        b.add_usd(
            str(path),
            floating=False,
            load_visual_shapes=False,
            hide_collision_shapes=True,
            skip_mesh_approximation=True,
            load_sites=False,
        )
    else:
        b.add_mjcf(str(path), floating=False, parse_visuals=False, parse_meshes=False, parse_sites=False)
    return b


def test_a_usd_robots_own_drives_are_zeroed_and_said() -> None:
    """ant.usda's UsdPhysics drives (2.29 N·m/rad) pull a resting joint toward 0 in Newton; imported, they do not."""
    usd = ASSETS / "ant.usda"
    ant = load_robot(usd)
    raw = raw_import(usd)
    np.testing.assert_allclose(np.array(raw.joint_target_ke)[ant.dof], 2.2918, rtol=1e-4)  # the file's drives
    ours: Any = ant.builder
    assert not np.any(np.array(ours.joint_target_ke)[ant.dof]) and not np.any(
        np.array(ours.joint_target_kd)[ant.dof]
    )
    note = next(n for n in ant.summary()["notes"] if "own drives zeroed" in n)
    assert "joint_target_ke up to 2.292" in note and "on 8 joint(s)" in note
    assert drift(raw, ant).min() > 1e-3
    assert drift(ant.builder, ant).max() < 1e-6


def test_mjcf_effort_limits_follow_mujoco(limits_xml: Path) -> None:
    """gear × min(ctrl, force) ranges, summed per joint, capped by actuatorfrcrange — as real MuJoCo saturates;
    a servo's ctrlrange (a target, not a force) and an unlimited ctrl bound nothing."""
    robot = load_robot(limits_xml)
    assert robot.joint_names == list(JOINTS)
    np.testing.assert_array_equal(robot.effort_limit, list(JOINTS.values()))
    sat = mujoco_saturated_torque(limits_xml, robot.joint_names)
    finite = np.isfinite(robot.effort_limit)
    np.testing.assert_allclose(sat[finite], robot.effort_limit[finite], rtol=1e-9)
    assert np.all(sat[~finite] > 1e3)  # MuJoCo's force grows with ctrl there
    assert any("MuJoCo actuators" in n for n in robot.notes)


def test_nv_ant_motor_gear_is_the_limit() -> None:
    """nv_ant.xml's motors: ctrlrange ±1, gear 15 → 15 N·m at each joint, as MuJoCo saturates it (was 1)."""
    xml = ASSETS / "nv_ant.xml"
    ant = load_robot(xml)
    np.testing.assert_array_equal(ant.effort_limit, 15.0)
    np.testing.assert_allclose(mujoco_saturated_torque(xml, ant.joint_names), 15.0, rtol=1e-9)
    assert not any("own drives zeroed" in n for n in ant.notes)  # a bare <motor> drives nothing at ctrl 0


def test_mjcf_servos_own_drives_are_zeroed(limits_xml: Path) -> None:
    """A <position> servo (Newton's joint_target_ke) and a <general> servo with a bias (a MuJoCo actuator driven
    by ctrl, left at 0) both pull toward 0 as imported; after load_robot neither moves a resting joint."""
    robot = load_robot(limits_xml)
    raw = raw_import(limits_xml)
    servo, biased = robot.joint_names.index("servo"), robot.joint_names.index("biased")
    assert raw.joint_target_ke[robot.dof[servo]] == 50.0
    ours: Any = robot.builder
    assert ours.joint_target_ke[robot.dof[servo]] == 0.0
    moved = drift(raw, robot)
    assert moved[servo] > 1e-3 and moved[biased] > 1e-3, moved
    assert drift(robot.builder, robot).max() < 1e-6
    note = next(n for n in robot.notes if "own drives zeroed" in n)
    assert "on 1 joint(s): servo" in note and "gain and bias on 1 joint(s): biased" in note


@pytest.mark.skipif(not GO2_XML.is_file(), reason="shared/data/go2-in-air is not here")
def test_go2_and_a_urdf_keep_their_limits() -> None:
    """Go2's motors (ctrlrange by class, gear 1) and quadruped.urdf's <limit effort> as written; no drive to zero."""
    robots: list[RobotModel] = [load_robot(GO2_XML), load_robot(ASSETS / "quadruped.urdf")]
    assert robots[0].effort_limit.tolist() == [23.7, 23.7, 45.43] * 4
    assert robots[1].effort_limit.tolist() == [80.0] * 12
    for r in robots:
        assert not any("own drives zeroed" in n for n in r.notes)
