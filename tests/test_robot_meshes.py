"""An MJCF whose inertia comes from its meshes, fitted as shipped (issue 23, acceptance 6).

A one-link arm whose moving body has no <inertial>: MuJoCo computes its mass and inertia from a box mesh
(0.1 × 0.1 × 0.4 m, density 1000, so 4 kg) written here as an .obj beside the model. The loader reads that
inertia through MuJoCo's compiler; without the mesh file, or for a moving body with no mass at all, it refuses
with the body named instead of MuJoCo's "mass and inertia of moving bodies must be larger than mjMINVAL".
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from robot_sim import chirp_targets, robot_recording, simulate_newton_log

from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot
from actuator_sysid.models.robot import RobotError, load_robot

MJCF = """<mujoco model="meshy">
  <compiler meshdir="assets"/>
  <asset><mesh name="box" file="box.obj"/></asset>
  <worldbody>
    <body name="base">
      <inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
      <body name="link">
        <joint name="j1" type="hinge" axis="0 1 0"/>
        <geom type="mesh" mesh="box" density="1000"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""
HALF = (0.05, 0.05, 0.2)  # the box's half extents, m; its centre 0.2 m below the joint


def write_box(path: Path) -> None:
    """A closed box mesh as Wavefront .obj: 8 vertices, 12 outward triangles."""
    hx, hy, hz = HALF
    verts = [(x * hx, y * hy, -0.2 + z * hz) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    lines = [f"v {x:g} {y:g} {z:g}" for x, y, z in verts]
    for a, b, c, d in quads:
        lines += [f"f {a + 1} {b + 1} {c + 1}", f"f {a + 1} {c + 1} {d + 1}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture()
def shipped(tmp_path: Path) -> Path:
    (tmp_path / "arm.xml").write_text(MJCF)
    write_box(tmp_path / "assets" / "box.obj")
    return tmp_path / "arm.xml"


def test_mesh_inertia_is_read_and_the_arm_is_fitted(shipped: Path) -> None:
    """The link's mass (4 kg), COM (0.2 m below the joint) and inertia (a box's, m/12·(b² + c²)) come from the
    mesh; a Newton-made PD log of it is fitted and its armature, friction and damping come back within 10 %."""
    arm = load_robot(shipped)
    short = [b.rsplit("/", 1)[-1] for b in arm.builder.body_label]
    i = short.index("link")
    m = 1000 * 8 * HALF[0] * HALF[1] * HALF[2]
    assert arm.builder.body_mass[i] == pytest.approx(m, rel=1e-5)
    np.testing.assert_allclose(np.asarray(arm.builder.body_com[i], float), [0.0, 0.0, -0.2], atol=1e-6)
    b2, c2 = (2 * HALF[1]) ** 2, (2 * HALF[2]) ** 2
    inertia = np.asarray(arm.builder.body_inertia[i], float).reshape(3, 3)
    np.testing.assert_allclose(
        np.diag(inertia), [m / 12 * (b2 + c2), m / 12 * (b2 + c2), m / 12 * 2 * b2], rtol=1e-4
    )
    assert any("read from their meshes" in n for n in arm.notes)
    truth = {"armature": 0.02, "damping": 0.3, "friction": 0.4}
    cmd = chirp_targets(arm, 400, amplitude=0.6, f0=0.3, f1=2.0)
    q, qd = simulate_newton_log(arm, cmd, decimation=2, kp=60.0, kd=2.0, **truth)
    res = fit_robot(
        robot_recording(arm, cmd, q, qd, kp=60.0, kd=2.0),
        arm,
        RobotFitOptions(decimation=2, delay=0, max_iterations=2, fit_bias=False),
    )
    g = res.groups["j1"]
    for sim_name, term in (
        ("armature", "armature"),
        ("damping", "viscous_friction"),
        ("friction", "friction"),
    ):
        assert getattr(g, term) == pytest.approx(truth[sim_name], rel=0.1), (term, g)


def test_missing_meshes_and_massless_bodies_are_refused_by_name(shipped: Path, tmp_path: Path) -> None:
    """Without its mesh file the model is refused naming the body and the file; a moving body with neither mass
    nor meshes is refused naming the body (MuJoCo's mjMINVAL would otherwise stop the fit with a traceback)."""
    shutil.rmtree(shipped.parent / "assets")
    with pytest.raises(
        RobotError, match=r"body link take\(s\) mass and inertia from mesh geoms.*box.obj are not in assets/"
    ):
        load_robot(shipped)
    bare = tmp_path / "bare.xml"
    bare.write_text(
        "<mujoco><worldbody><body name='base'><inertial pos='0 0 0' mass='1' diaginertia='1 1 1'/>"
        "<body name='ghost'><joint name='j' type='hinge' axis='0 1 0'/></body></body></worldbody></mujoco>"
    )
    with pytest.raises(RobotError, match=r"body ghost move\(s\) on a joint but has no mass or inertia"):
        load_robot(bare)
