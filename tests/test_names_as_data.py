"""Names are data: a joint, segment, group, payload-body or rename name never runs, nor becomes syntax in an export.

Two walls, each tested on its own. The edge: every name a user gives follows the name rule (datasets/names.py)
or is refused with a clear message (DatasetError in the readers, the CLI's message, the service's 4xx), and a
name made from a file name is made safe instead. The writers: a name that reaches an export anyway (a result
written by hand, past the rule) appears only inside string literals and one-line comments of isaaclab.py, as
attribute values or comment text of mjcf.xml, as quoted strings of newton.usda and as values of the YAML / JSON;
and no code path executes a generated isaaclab.py (export/safe_source.py reads it as data).
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
import time
import tokenize
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
import requests
import yaml
from conftest import Server, make_recording, run_cli, upload_recording
from export_helpers import TRUTH, make_result, model_entry, short_recording

from actuator_sysid.datasets.names import name_problem
from actuator_sysid.datasets.readers import read_table, read_upload
from actuator_sysid.datasets.recording import DatasetError
from actuator_sysid.export import ExportError, render_format
from actuator_sysid.export.safe_source import load_source
from actuator_sysid.export.selection import comment_line, parse_rename, prepend_comment

PY = 'j\nimport os;os.system("touch {marker}")\n#'  # the issue's joint cell, the marker filled in per test
USD = 'a" ( custom string x = "'
XML = 'a"/><include file="/etc/passwd"/><x a="'
PAYLOADS = (PY.format(marker="M"), USD, XML)
TEXT = ("isaaclab.py", "isaaclab.json", "isaaclab.yaml", "newton.usda", "mjcf.xml", "randomization.json")
# what our writers put in isaaclab.py besides literals and comments: imports, the cfg classes and fields, names
PY_NAMES = {"from", "import", "ACTUATORS", "ACTUATORS_BEST", "ACTUATORS_NET", "SIM", "ENCODER_BIAS"}


def _cell(text: str) -> str:
    """A CSV cell holding `text` whatever it holds (RFC 4180 quoting)."""
    return '"' + text.replace('"', '""') + '"'


def _csv(joint: str = "j1", segment: str = "a", n: int = 30) -> bytes:
    rows = [f"{i * 0.01:.2f},{_cell(joint)},{0.01 * i},1.0,{0.012 * i},{_cell(segment)}" for i in range(n)]
    return ("t,joint,q,qd,q_des,segment\n" + "\n".join(rows) + "\n").encode()


# --------------------------------------------------------------------------------------------- the edge


@pytest.mark.parametrize("payload", PAYLOADS)
def test_readers_refuse_hostile_joint_and_segment_names(payload: str) -> None:
    for kind, data in (("joint name", _csv(joint=payload)), ("segment name", _csv(segment=payload))):
        for read in (lambda d: read_table(d, "log.csv"), lambda d: read_upload(d, "log.csv")):
            with pytest.raises(DatasetError) as info:
                read(data)
            msg = str(info.value)
            assert kind in msg and "log.csv" in msg and "not allowed" in msg, msg
            assert "\n" not in msg  # the name is shown quoted, never raw
    assert read_table(_csv(joint="robot/knee_joint", segment="run 1"), "log.csv").joint_names == [
        "robot/knee_joint"
    ]


def test_file_named_segments_are_made_names_not_refused() -> None:
    """Two files of one zip with the same segment name: the merged names carry each file's name, made safe."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr('a"<b>;$x.csv', _csv(segment="s"))
        z.writestr("c\u2028d.csv", _csv(segment="s"))
    rec = read_upload(buf.getvalue(), "logs.zip")
    names = [s.name for s in rec.segments]
    assert len(names) == 2 and all(n.endswith("/s") for n in names), names
    assert all(name_problem(n) is None for n in names), names


def test_cli_fit_refuses_the_issue_csv_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    log = tmp_path / "log.csv"
    log.write_bytes(_csv(joint=PY.format(marker=marker)))
    r = run_cli("fit", str(log), "--out", str(tmp_path / "out"), "--generations", "2", "--population", "8")
    assert r.returncode != 0 and "joint name" in r.stderr and "not allowed" in r.stderr, (
        r.returncode,
        r.stderr,
    )
    assert "Traceback" not in r.stderr
    assert not marker.exists() and not (tmp_path / "out" / "isaaclab.py").exists()


def test_http_upload_refuses_the_issue_csv(server: Server, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    for name, data in (
        ("log.csv", _csv(joint=PY.format(marker=marker))),
        ("log.csv", _csv(segment=PY.format(marker=marker))),
        ("log.csv", _csv(joint=XML)),
    ):
        r = requests.post(server.url + "/api/v1/datasets", files={"file": (name, data)}, timeout=60)
        assert r.status_code in (400, 422), (r.status_code, r.text[:300])
        assert "name" in r.json()["detail"], r.text[:300]
    assert not marker.exists()


def test_rename_targets_follow_the_rule(tmp_path: Path) -> None:
    for payload in PAYLOADS:
        with pytest.raises(ExportError, match="rename target"):
            parse_rename(f"pendulum={payload}")
    assert parse_rename("pendulum=robot/elbow_joint") == {"pendulum": "robot/elbow_joint"}
    rec = short_recording(n_segments=2, n_samples=100, joints=["pendulum"])
    (tmp_path / "fit.json").write_text(
        json.dumps(make_result({"pendulum": {"ideal_pd": model_entry("ideal_pd", TRUTH)}}, rec))
    )
    out = tmp_path / "isaaclab.py"
    args = ("export", str(tmp_path / "fit.json"), "--format", "isaaclab.py", "--out", str(out), "--rename")
    r = run_cli(*args, "pendulum=" + PY.format(marker=tmp_path / "marker"))
    assert r.returncode == 2 and "rename target" in r.stderr and not out.exists(), (r.returncode, r.stderr)
    with pytest.raises(ExportError, match="rename target"):  # the API's own entry, past the CLI's parsing
        render_format(
            make_result({"pendulum": {"ideal_pd": model_entry("ideal_pd", TRUTH)}}, rec),
            rec,
            "isaaclab.py",
            rename={"pendulum": XML},
        )
    r = run_cli(*args, "pendulum=robot/elbow_joint")
    assert r.returncode == 0 and "'robot/elbow_joint'" in out.read_text(), r.stderr


@pytest.fixture(scope="module")
def stored_fit(server: Server, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A small real fit on the module's server."""
    ds = upload_recording(
        server, make_recording(("j1",), segments=3, n=150), tmp_path_factory.mktemp("nd") / "log.csv"
    )
    body = {"dataset_id": ds["id"], "models": ["ideal_pd"], "budget": {"generations": 2, "population": 8}}
    fid = requests.post(server.url + "/api/v1/fits", json=body, timeout=30).json()["id"]
    fit: dict = {}
    for _ in range(600):
        fit = requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=10).json()
        if fit["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.2)
    assert fit["status"] == "succeeded", fit
    return fit


def test_rename_query_with_code_is_4xx(server: Server, stored_fit: dict, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    url = f"{server.url}/api/v1/fits/{stored_fit['id']}/export/isaaclab.py"
    ok = requests.get(url, params={"rename": "j1=robot/elbow"}, timeout=60)
    assert ok.status_code == 200 and "'robot/elbow'" in ok.text, ok.text[:300]
    for payload in (PY.format(marker=marker), XML, USD):
        r = requests.get(url, params={"rename": f"j1={payload}"}, timeout=60)
        assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
        assert "rename target" in r.json()["detail"]
    assert not marker.exists()


def test_group_and_payload_names_follow_the_rule() -> None:
    from types import SimpleNamespace

    from actuator_sysid.fitting.robot import RobotFitOptions, resolve_groups
    from actuator_sysid.fitting.robot.data import _payload

    names = ["hip_joint", "knee_joint"]
    no_builder = SimpleNamespace(builder=None)  # the service's pre-check: the model's summary alone
    for payload in PAYLOADS:
        with pytest.raises(DatasetError, match="group name"):
            resolve_groups(names, {payload: ".*_joint"})
        with pytest.raises(DatasetError, match="payload body name"):
            _payload(no_builder, RobotFitOptions(payload=["trunk", payload]))  # type: ignore[arg-type]
    assert _payload(no_builder, RobotFitOptions(payload=["trunk"])) == {}  # type: ignore[arg-type]
    groups, exprs = resolve_groups(names, {"legs": 'hip_joint|knee_joint|a"b'})
    assert groups == {"legs": [0, 1]} and exprs == {"legs": 'hip_joint|knee_joint|a"b'}  # a regex is data


def test_robot_model_joint_names_follow_the_rule(tmp_path: Path) -> None:
    from xml.sax.saxutils import quoteattr

    from actuator_sysid.models.robot import load_robot

    def model(joint: str) -> Path:
        path = tmp_path / "bot.xml"
        inertial = '<inertial pos="0 0 -0.1" mass="0.5" diaginertia="1e-3 1e-3 1e-3"/>'
        path.write_text(
            f'<mujoco><worldbody><body name="base">{inertial}<body name="link">'
            f'<joint name={quoteattr(joint)} type="hinge" axis="0 1 0"/>{inertial}</body></body></worldbody></mujoco>'
        )
        return path

    assert load_robot(model("elbow_joint")).joint_names == ["elbow_joint"]
    with pytest.raises(DatasetError, match="joint name"):
        load_robot(model(XML))


# --------------------------------------------------------------------------------------------- the writers


def _python_is_data(text: str, payloads: tuple[str, ...]) -> None:
    """Every payload is in the file, inside a STRING token (as itself or as its escaped regex); every NAME token is
    our code's own (no `os`, `system`, `eval` ...): no character of a payload became code."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    names = {t.string for t in tokens if t.type == tokenize.NAME}
    ours = PY_NAMES | {"True", "False", "None", "actuator_sysid", "consumers", "isaaclab", "actuators"}
    strange = {n for n in names - ours if not n.endswith("Cfg") and not re.fullmatch(r"[a-z_0-9]+", n)}
    assert not strange, strange
    assert (
        not {"os", "system", "eval", "exec", "open", "touch", "custom", "string", "include", "passwd"} & names
    )
    literals = {ast.literal_eval(t.string) for t in tokens if t.type == tokenize.STRING}
    for p in payloads:
        assert p in literals or re.escape(p) in literals, p


def _xml_is_data(text: str) -> ET.Element:
    root = ET.fromstring(text)
    tags = {el.tag for el in root.iter()}
    assert not tags & {"include", "x"}, tags
    for el in root.iter():
        assert all(re.fullmatch(r"[a-z_]+", k) for k in el.attrib), el.attrib
    return root


def _usd_is_data(text: str, joints: list[str]) -> None:
    from pxr import Sdf

    layer = Sdf.Layer.CreateAnonymous(".usda")
    assert layer.ImportFromString(text)
    paths: list[Sdf.Path] = []
    layer.Traverse(Sdf.Path.absoluteRootPath, paths.append)
    for p in paths:
        if p.IsPrimPath():
            assert re.fullmatch(r"[A-Za-z0-9_]+", p.name), p
        if p.IsPrimPropertyPath():
            assert re.fullmatch(r"[A-Za-z0-9_:]+", p.name), p  # no attribute of a name ("custom string x")
    assert sorted(dict(layer.customLayerData)["actuator_sysid"]["families"]) == sorted(joints)


@pytest.fixture(scope="module")
def hostile() -> tuple[dict, object, list[str]]:
    """A result and recording whose joints carry the payloads: past the rule, as a stored one could be."""
    joints = list(PAYLOADS)
    rec = short_recording(n_segments=2, n_samples=120, joints=joints)
    fams = ("dcmotor_delay", "ideal_pd", "dcmotor")
    res = make_result({j: {f: model_entry(f, TRUTH)} for j, f in zip(joints, fams, strict=True)}, rec)
    return res, rec, joints


def test_every_writer_quotes_hostile_joint_names(hostile: tuple, tmp_path: Path) -> None:
    import mujoco

    res, rec, joints = hostile
    info = {"fit_id": "f\n1", "dataset": XML + "\n" + PY.format(marker="M") + "--> <x/>"}
    files = {fmt: render_format(res, rec, fmt, info=info) for fmt in TEXT}
    _python_is_data(files["isaaclab.py"], PAYLOADS)
    ns = load_source(files["isaaclab.py"])
    for j in joints:  # each joint's group matches it, as Isaac Lab resolves joint_names_expr
        assert sum(any(re.fullmatch(e, j) for e in c.joint_names_expr) for c in ns["ACTUATORS"].values()) == 1
    doc = yaml.safe_load(files["isaaclab.yaml"])
    assert doc["provenance"]["dataset"] == info["dataset"]
    assert json.loads(files["isaaclab.json"])["provenance"]["dataset"] == info["dataset"]
    exprs = [e for g in doc["actuators"].values() for e in g["cfg"]["joint_names_expr"]]
    assert sorted(exprs) == sorted(re.escape(j) for j in joints)
    _xml_is_data(files["mjcf.xml"])
    mujoco.MjModel.from_xml_string(files["mjcf.xml"])
    _usd_is_data(files["newton.usda"], joints)
    assert set(json.loads(files["randomization.json"])["provenance"]) >= {"fit_id", "dataset"}


def test_comments_stay_one_line_whatever_they_hold() -> None:
    lines = ["a\nimport os", "b\r\u2028c\x85d", "e -- f --->", "g-"]
    py = prepend_comment("isaaclab.py", "X = 1\n", lines)
    assert load_source(py)["X"] == 1 and py.count("\n") == len(lines) + 1
    xml = prepend_comment("mjcf.xml", "<mujoco/>\n", lines)
    root = ET.fromstring(xml)
    assert root.tag == "mujoco" and len(list(root)) == 0
    assert comment_line("a\nb") == "a\\nb" and "--" not in comment_line("x --- y", xml=True)


def test_robot_isaaclab_quotes_hostile_group_names() -> None:
    from actuator_sysid.export.robot_isaaclab import build_cfgs, render_json, render_python
    from actuator_sysid.fitting.result import as_robot_result

    groups = {
        g: {
            "joint_names_expr": expr,
            "joints": ["j1"],
            "armature": 0.01,
            "viscous_friction": 0.1,
            "friction": 0.1,
            "stiffness": 20.0,
            "damping": 1.0,
            "effort_limit": 5.0,
        }
        for g, expr in zip(PAYLOADS, ("j1", 'a" ( x', XML), strict=True)
    }
    result = as_robot_result(
        {
            "kind": "robot",
            "robot": {"path": XML + ".xml"},
            "joint_mapping": "by name",
            "groups": groups,
            "gains": "from the log",
            "encoder_bias": {PAYLOADS[0]: 0.01},
            "delay_steps": 2,
            "delay": "fixed",
            "sim": {"dt": 0.0025, "decimation": 2},
            "validation": {
                "split": "time",
                "split_sample": 200,
                "fraction": 0.3,
                "rmse": math.nan,
                "model_defaults_rmse": math.nan,
            },
        }
    )
    py = render_python(result)
    _python_is_data(py, PAYLOADS)
    cfgs = build_cfgs(py, "isaaclab.py")
    assert sorted(cfgs) == sorted(PAYLOADS) and cfgs[XML].joint_names_expr == [XML]
    assert sorted(build_cfgs(render_json(result), "isaaclab.json", py)) == sorted(PAYLOADS)


# --------------------------------------------------------------------------------------------- the safe loader


def test_safe_loader_refuses_anything_but_data(hostile: tuple, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    res, rec, _ = hostile
    text = render_format(res, rec, "isaaclab.py")
    assert set(load_source(text)) >= {"ACTUATORS", "DCMotorCfg"}
    tampered = {
        f"import os\nos.system('touch {marker}')\n": "Import",
        f"X = __import__('os').system('touch {marker}')\n": "__import__",
        "X = print(1)\n": "print",
        "X = DCMotorCfg.__init__\n": "Attribute",
        "X = [c for c in ()]\n": "ListComp",
        "from os import system\n": "os",
        "from isaaclab.actuators import DCMotor\n": "DCMotor",
        "from actuator_sysid.consumers.isaaclab import torch\n": "torch",
        "class A:\n    pass\n": "ClassDef",
        "def f():\n    pass\n": "FunctionDef",
        "ACTUATORS = {**{}}\n": "**",
        "X = (lambda: 0)()\n": "call",
    }
    for extra, named in tampered.items():
        with pytest.raises(ExportError) as info:
            load_source(text + extra)
        msg = str(info.value)
        assert named in msg and "never run" in msg and f"line {text.count(chr(10)) + 1}" in msg, msg
    with pytest.raises(ExportError, match="not valid Python"):
        load_source(text + "X = (\n")
    assert not marker.exists()
