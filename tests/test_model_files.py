"""A robot model reads only files inside its upload (or its folder, or a --package-root on the CLI).

Over real HTTP to a real server: an MJCF <include> (absolute, `../`), a URDF mesh and a USD sublayer that point
outside the upload are each refused with a 422 naming the reference as written, and the answer is the same,
byte for byte, whether the outside file exists or not (nothing outside is parsed or looked up). A nested include
inside a zip and a URDF's package:// inside a zip import (201); the CLI finds a package outside the model's
folder only through --package-root.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import requests
from conftest import Server, make_recording, run_cli

from actuator_sysid.datasets.canonical import write_table

INERTIAL = '<inertial pos="0 0 -0.1" mass="0.5" diaginertia="0.01 0.01 0.01"/>'
BODY = f'<body name="link"><joint name="j1" type="hinge" axis="0 1 0"/>{INERTIAL}</body>'
ARM = (
    '<mujoco model="arm">{head}<worldbody><body name="base"><inertial pos="0 0 0" mass="1" '
    'diaginertia="0.01 0.01 0.01"/>{body}</body></worldbody></mujoco>'
)
URDF_INERTIA = '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
URDF = (
    '<robot name="arm">{material}<link name="base"><inertial><mass value="1"/>' + URDF_INERTIA + "</inertial>"
    '</link><link name="link"><inertial><origin xyz="0 0 -0.1"/><mass value="0.5"/>'
    + URDF_INERTIA
    + "</inertial>"
    "{geometry}</link>"
    '<joint name="j1" type="revolute"><parent link="base"/><child link="link"/><axis xyz="0 1 0"/>'
    '<limit lower="-1" upper="1" effort="5" velocity="10"/></joint></robot>'
)
# a package:// name the importer resolves without reading the file (a texture is kept as a path); a URDF with
# package:// meshes is fitted as shipped in tests/test_urdf_as_shipped.py
PACKAGE_TEXTURE = '<material name="skin"><texture filename="package://arm_pkg/textures/skin.png"/></material>'


def post_robot(server: Server, name: str, data: bytes) -> requests.Response:
    return requests.post(server.url + "/api/v1/robots", files={"file": (name, data)}, timeout=120)


def zipped(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


def refused_alike(server: Server, name: str, model: str, outside: Path, content: str, ref: str) -> str:
    """Upload `model` with `outside` present, then absent: both a 422 naming `ref`, with the same body."""
    outside.write_text(content)
    present = post_robot(server, name, model.encode())
    outside.unlink()
    missing = post_robot(server, name, model.encode())
    assert present.status_code == 422, present.text[:500]
    assert present.content == missing.content and present.status_code == missing.status_code
    detail = present.json()["detail"]
    assert repr(ref) in detail and "points outside the upload" in detail, detail
    return detail


def test_an_include_outside_the_upload_is_refused_alike_whether_it_exists(
    server: Server, tmp_path: Path
) -> None:
    """Absolute and `../` includes of a valid MJCF outside the upload: 422 naming the include (was 201 when the
    file existed, FileNotFoundError when it did not); a compiler meshdir outside is refused too."""
    outside = tmp_path / "outside.xml"
    for ref in (str(outside), "../" * 12 + str(outside).lstrip("/")):
        model = ARM.format(head="", body=f'<include file="{ref}"/>{BODY}')
        detail = refused_alike(server, "arm.xml", model, outside, "<mujoco/>", ref)
        assert detail.startswith("arm.xml: <include file=") and str(tmp_path) not in detail.replace(ref, "")
    meshdir = ARM.format(head=f'<compiler meshdir="{tmp_path}"/>', body=BODY)
    r = post_robot(server, "arm.xml", meshdir.encode())
    assert r.status_code == 422 and f"<compiler meshdir={str(tmp_path)!r}>" in r.json()["detail"]


def test_a_nested_include_inside_a_zip_imports_and_one_leaving_it_is_refused(
    server: Server, tmp_path: Path
) -> None:
    """arm.xml includes parts/world.xml, which includes link.xml beside it: 201 with the joint; a nested
    include that leaves the zip is refused naming it and the file that wrote it; a symlink member is refused."""
    files = {
        "arm/arm.xml": '<mujoco model="arm"><include file="parts/world.xml"/></mujoco>',
        "arm/parts/world.xml": ARM.format(head="", body='<include file="link.xml"/>').replace(
            ' model="arm"', ""
        ),
        "arm/parts/link.xml": f"<mujoco>{BODY}</mujoco>",
    }
    ok = post_robot(server, "arm.zip", zipped(files))
    assert ok.status_code == 201, ok.text
    assert [j["name"] for j in ok.json()["joints"]] == ["j1"]
    requests.delete(server.url + f"/api/v1/robots/{ok.json()['id']}", timeout=30)

    outside = tmp_path / "link.xml"
    outside.write_text(f"<mujoco>{BODY}</mujoco>")
    ref = "../" * 12 + str(outside).lstrip("/")
    files["arm/parts/world.xml"] = files["arm/parts/world.xml"].replace('"link.xml"', f'"{ref}"')
    r = post_robot(server, "arm.zip", zipped(files))
    assert r.status_code == 422, r.text
    assert f"<include file={ref!r}> in arm/parts/world.xml points outside the upload" in r.json()["detail"]

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("arm.xml", ARM.format(head="", body='<include file="link.xml"/>'))
        link = zipfile.ZipInfo("link.xml")
        link.external_attr = 0o120777 << 16  # a symbolic link to a file outside
        z.writestr(link, str(outside))
    r = post_robot(server, "arm.zip", buf.getvalue())
    assert r.status_code == 422 and "'link.xml' is a symbolic link" in r.json()["detail"], r.text


def test_a_urdf_mesh_and_a_usd_layer_outside_are_refused_alike(server: Server, tmp_path: Path) -> None:
    """A URDF collision mesh and a USD sublayer outside the upload: 422 naming each, the same whether it exists
    (the mesh was read before: a trimesh error when present, a skipped mesh and 201 when missing)."""
    mesh = tmp_path / "box.obj"
    geometry = f'<collision><geometry><mesh filename="{mesh}"/></geometry></collision>'
    urdf = URDF.format(material="", geometry=geometry)
    detail = refused_alike(server, "arm.urdf", urdf, mesh, "v 0 0 0\n", str(mesh))
    assert detail.startswith("arm.urdf: <mesh filename=")
    layer = tmp_path / "robot.usda"
    usda = f'#usda 1.0\n(\n    subLayers = [@{layer}@]\n)\n\ndef Xform "World"\n{{\n}}\n'
    detail = refused_alike(
        server, "robot.usda", usda, layer, '#usda 1.0\ndef Xform "Arm"\n{\n}\n', str(layer)
    )
    assert detail.startswith("robot.usda: asset path ")


def test_a_package_urdf_imports_from_its_zip(server: Server) -> None:
    """arm_pkg/urdf/arm.urdf names package://arm_pkg/...: found in the zip, 201; a package the zip does not
    hold is refused naming it."""
    urdf = URDF.format(material=PACKAGE_TEXTURE, geometry="")
    files = {"arm_pkg/urdf/arm.urdf": urdf, "arm_pkg/textures/skin.png": "png"}
    ok = post_robot(server, "arm.zip", zipped(files))
    assert ok.status_code == 201, ok.text
    assert [j["name"] for j in ok.json()["joints"]] == ["j1"]
    requests.delete(server.url + f"/api/v1/robots/{ok.json()['id']}", timeout=30)
    r = post_robot(server, "arm.zip", zipped({"arm/arm.urdf": urdf}))
    assert r.status_code == 422, r.text
    assert "'package://arm_pkg/textures/skin.png'" in r.json()["detail"]
    assert "names package 'arm_pkg', which is not in the upload" in r.json()["detail"]


def test_the_cli_finds_a_package_only_through_package_root(tmp_path: Path) -> None:
    """The model's folder does not hold arm_pkg: refused naming it, with --package-root as the way; with
    --package-root the model loads (the fit then stops on the log's joint, named against the model's)."""
    (tmp_path / "model").mkdir()
    model = tmp_path / "model" / "arm.urdf"
    model.write_text(URDF.format(material=PACKAGE_TEXTURE, geometry=""))
    packages = tmp_path / "packages"
    (packages / "arm_pkg" / "textures").mkdir(parents=True)
    (packages / "arm_pkg" / "textures" / "skin.png").write_text("png")
    log = tmp_path / "log.csv"
    write_table(make_recording(joints=("elbow",), segments=1, n=50), log)
    args = ("fit", str(log), "--robot", str(model), "--no-select", "--out", str(tmp_path / "out"))
    bare = run_cli(*args)
    assert bare.returncode == 2, bare.stderr
    assert "names package 'arm_pkg', which is not in the model's folder" in bare.stderr
    assert "--package-root" in bare.stderr
    found = run_cli(*args, "--package-root", str(packages))
    assert found.returncode == 2, found.stderr
    assert "log joint(s) elbow not in the robot model arm.urdf" in found.stderr
    assert "the model has j1" in found.stderr
    assert not (tmp_path / "out").exists()
    gone = run_cli(*args, "--package-root", str(tmp_path / "nowhere"))
    assert gone.returncode == 2 and "--package-root" in gone.stderr and "not a folder" in gone.stderr


@pytest.mark.parametrize(
    "ref",
    ["file:///etc/hostname", "https://example.com/box.obj", "package://arm_pkg/../../../etc/hostname"],
)
def test_urdf_uris_that_leave_the_upload_are_refused(server: Server, ref: str) -> None:
    """A file:// URI outside, a URL, and a package:// path climbing out of its package: each 422, named."""
    urdf = URDF.format(
        material="", geometry=f'<collision><geometry><mesh filename="{ref}"/></geometry></collision>'
    )
    r = post_robot(server, "arm.zip", zipped({"arm_pkg/arm.urdf": urdf}))
    assert r.status_code == 422, r.text
    assert f"<mesh filename={ref!r}>" in r.json()["detail"]


def test_a_link_in_the_models_folder_is_followed_before_the_check(tmp_path: Path) -> None:
    """On the CLI the model's folder may hold symbolic links: an include through a link to a folder outside,
    or one that climbs out through it (`lnk/../link.xml`), is refused alike whether the target exists."""
    from actuator_sysid.models.robot import RobotError, load_robot

    (tmp_path / "model").mkdir()
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    (tmp_path / "model" / "lnk").symlink_to(tmp_path / "elsewhere" / "deep")
    model = tmp_path / "model" / "arm.xml"
    for ref, target in (("lnk/link.xml", "deep/link.xml"), ("lnk/../link.xml", "link.xml")):
        model.write_text(ARM.format(head="", body=f'<include file="{ref}"/>'))
        answers = []
        outside = tmp_path / "elsewhere" / target
        outside.write_text(f"<mujoco>{BODY}</mujoco>")
        for _ in ("present", "missing"):
            with pytest.raises(RobotError, match="points outside the model's folder") as e:
                load_robot(model)
            answers.append(str(e.value))
            outside.unlink(missing_ok=True)
        assert answers[0] == answers[1] and repr(ref) in answers[0]
