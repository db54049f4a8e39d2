"""Every log reader on files written by the producer's own library (docs/log-formats.md §2–§7), in tmp_path.

Each format: a good file read back to the numbers written, the awkward cases its producers make, and
malformed files whose errors name the file, the field and the row / entry / message index.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import raises_dataset_error as _raises

from actuator_sysid.datasets import read_table
from actuator_sysid.datasets.readers import detect_format, read_paths, read_upload
from actuator_sysid.datasets.sources import ReadOptions, Source

# --------------------------------------------------------------------------------------------- helpers


def _read(path: Path, **opts) -> object:
    return read_paths([path], options=ReadOptions(**opts))


# --------------------------------------------------------------------------------------------- BAM


def _bam(
    n: int = 600,
    dt: float = 0.005,
    jitter: float = 0.0,
    seed: int = 0,
    off: tuple[int, int] | None = None,
    **top,
) -> dict:
    """A BAM run as Rhoban's recorder writes it; `off` = (start, stop) entries with the torque off."""
    rng = np.random.default_rng(seed)
    steps = dt * (1 + jitter * rng.uniform(-1, 1, n))
    t = np.concatenate([[0.0035], 0.0035 + np.cumsum(steps[1:])])
    entries = []
    for k, tk in enumerate(t):
        on = not (off and off[0] <= k < off[1])
        entries.append(
            {
                "position": 0.5 * math.sin(tk * tk),
                "speed": tk * math.cos(tk * tk),
                "load": 12,
                "input_volts": 7.3,
                "temp": 28,
                "timestamp": float(tk),
                "goal_position": 0.55 * math.sin(tk * tk),
                "torque_enable": on,
            }
        )
    return {
        "mass": 0.49,
        "length": 0.1,
        "kp": 400,
        "vin": 7.4,
        "motor": "xl330",
        "trajectory": "sin_time_square",
        **top,
        "entries": entries,
    }


def test_bam_raw_irregular_log_is_resampled_and_keeps_its_load(tmp_path: Path) -> None:
    path = tmp_path / "2026-01-15_10h28m10.json"
    path.write_text(json.dumps(_bam(n=1150, dt=1 / 190, jitter=0.08)))
    rec = _read(path)
    assert rec.source_format == "bam" and rec.joint_names == ["xl330"]
    assert len(rec.segments) == 1 and rec.segments[0].name == "2026-01-15_10h28m10"
    seg = rec.segments[0]
    assert np.allclose(np.diff(seg.t), seg.dt) and abs(rec.rate_hz - 190) < 5
    res = rec.summary()["resampling"]
    assert res["rate_hz"] == pytest.approx(rec.rate_hz) and "linear interpolation" in res["method"]
    inertia, mgl = rec.load_for(seg, 0)
    assert inertia == pytest.approx(0.49 * 0.1**2) and mgl == pytest.approx(0.49 * 9.81 * 0.1)
    assert seg.metadata["bam"]["kp"] == 400 and seg.metadata["bam"]["vin"] == 7.4
    assert seg.tau is None  # `load` is a register, never effort
    assert any("load" in w and "not a torque" in w for w in rec.warnings)


@pytest.mark.parametrize("key", ["arm_mass", "arm-mass"])
def test_bam_arm_mass_gives_the_pendulum_with_its_arm(tmp_path: Path, key: str) -> None:
    """J = m·l² + m_arm·l²/3 and gravity coefficient (m + m_arm/2)·g·l, through Recording.load_for."""
    extra = {key: 0.2}
    if key == "arm_mass":  # the eRob recorder's extra fields
        extra.update(damping=0.3)
    d = _bam(**extra)
    if key == "arm_mass":
        for e in d["entries"]:
            e.update(torque_demand=0.1, control=0.4)
            del e["load"], e["input_volts"]
    (tmp_path / "run.json").write_text(json.dumps(d))
    rec = _read(tmp_path / "run.json")
    m, length, ma = 0.49, 0.1, 0.2
    inertia, mgl = rec.load_for(rec.segments[0], 0)
    assert inertia == pytest.approx(m * length**2 + ma * length**2 / 3)
    assert mgl == pytest.approx((m + ma / 2) * 9.81 * length)
    assert rec.segments[0].metadata["bam"]["arm_mass"] == 0.2


def test_bam_torque_off_stretch_is_a_free_swing_segment(tmp_path: Path) -> None:
    """One segment per file; the torque enable is a per-sample channel (the stretch swings freely)."""
    (tmp_path / "lift.json").write_text(json.dumps(_bam(n=600, off=(400, 600), trajectory="lift_and_drop")))
    rec = _read(tmp_path / "lift.json")
    assert [s.name for s in rec.segments] == ["lift"] and rec.segments[0].n == 600
    seg = rec.segments[0]
    assert "free_swing" not in seg.metadata and seg.enable.shape == (600, 1)
    assert seg.enable[:400].all() and not seg.enable[400:].any()
    assert seg.metadata["gain_units"] == "device" and seg.metadata["kp"] == 400 and seg.metadata["vin"] == 7.4
    assert rec.summary()["quality"]["free_swing_segments"] == ["lift"]
    assert "no free-swing" not in " ".join(rec.summary()["quality"]["warnings"])


def test_bam_several_files_one_recording_from_paths_and_zip(tmp_path: Path) -> None:
    runs = {f"run{k}.json": _bam(n=300, seed=k, mass=0.2 * (k + 1), dt=0.005) for k in range(3)}
    for k, d in enumerate(runs.values()):
        d["dt"] = 0.005
        d["mass"] = 0.2 * (k + 1)
    paths = []
    for name, d in runs.items():
        (tmp_path / name).write_text(json.dumps(d))
        paths.append(tmp_path / name)
    rec = read_paths(paths)
    assert [s.name for s in rec.segments] == ["run0", "run1", "run2"]
    assert [rec.load_for(s, 0)[1] for s in rec.segments] == pytest.approx(
        [0.2 * k * 9.81 * 0.1 for k in (1, 2, 3)]
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, d in runs.items():
            z.writestr(f"bench/{name}", json.dumps(d))
        z.writestr("__MACOSX/._run0.json", b"junk")
    up = read_table(buf.getvalue(), "bench.zip", any_format=True)
    assert [s.name for s in up.segments] == ["run0", "run1", "run2"] and up.source_format == "bam"


def test_bam_malformed_entries_name_file_entry_and_field(tmp_path: Path) -> None:
    d = _bam(n=50)
    del d["entries"][7]["position"]
    _raises("bad.json|entries[7]|'position'", read_upload, json.dumps(d).encode(), "bad.json")
    d = _bam(n=50)
    d["entries"][9]["goal_position"] = "x"
    _raises("bad.json|entries[9].goal_position|number", read_upload, json.dumps(d).encode(), "bad.json")
    d = _bam(n=50)
    d["entries"][11]["speed"] = float("nan")
    _raises("bad.json|speed|entry 11|NaN", read_upload, json.dumps(d).encode(), "bad.json")
    d = _bam(n=50)
    d["entries"][20]["timestamp"] = d["entries"][18]["timestamp"]
    _raises("bad.json|not increasing at entry 20", read_upload, json.dumps(d).encode(), "bad.json")
    d = _bam(n=50)
    del d["mass"]
    _raises("bad.json|missing field 'mass'", read_upload, json.dumps(d).encode(), "bad.json")
    _raises("side.json|not a BAM log", read_upload, b'{"joints": {}}', "side.json")


# --------------------------------------------------------------------------------------------- PACE


def _pace(tmp_path: Path, T: int = 400, J: int = 3, name: str = "chirp.pt", **over) -> Path:
    import torch

    t = torch.arange(T, dtype=torch.float64) / 400.0
    des = 0.3 * torch.sin(2 * math.pi * (0.5 + 2 * t)[:, None] * t[:, None] + torch.arange(J))
    d = {"time": t, "dof_pos": (0.95 * des).float(), "des_dof_pos": des.float(), **over}
    torch.save(d, tmp_path / name)
    return tmp_path / name


def test_pace_reads_with_user_joint_names(tmp_path: Path) -> None:
    path = _pace(tmp_path)
    assert detect_format(Source(path.name, path=path)) == "pace"
    rec = _read(path, joint_names=["hip", "knee", "ankle"])
    assert rec.source_format == "pace" and rec.joint_names == ["hip", "knee", "ankle"]
    assert rec.rate_hz == pytest.approx(400) and rec.segments[0].n == 400
    assert "differentiated" in rec.velocity_source and rec.segments[0].tau is None


def test_pace_names_missing_or_wrong_count(tmp_path: Path) -> None:
    path = _pace(tmp_path)
    _raises("chirp.pt|3 joint column(s) but no joint names|--joint-names", _read, path)
    _raises("chirp.pt|3 joint column(s) but 2 joint name(s)", _read, path, joint_names=["a", "b"])


def test_pace_gap_splits_and_degrees_from_sidecar(tmp_path: Path) -> None:
    import torch

    t = torch.cat([torch.arange(100) / 200.0, 2.0 + torch.arange(100) / 200.0]).double()
    pos = torch.linspace(0, 90, 200)[:, None]
    torch.save({"time": t, "dof_pos": pos, "des_dof_pos": pos}, tmp_path / "gap.pt")
    (tmp_path / "gap.json").write_text(json.dumps({"angle_unit": "deg"}))
    rec = _read(tmp_path / "gap.pt", joint_names=["j"])
    assert [s.name for s in rec.segments] == ["0", "1"]
    assert rec.segments[1].q[-1, 0] == pytest.approx(math.pi / 2)
    assert rec.summary()["quality"]["gaps"]["count"] == 1


def test_pace_malformed(tmp_path: Path) -> None:
    import torch

    path = _save(tmp_path, "x.pt", {"time": torch.zeros(3), "dof_pos": torch.zeros(3, 1)})
    _raises("x.pt|missing key(s) ['des_dof_pos']", _read, path, joint_names=["a"])
    bad = torch.zeros(50, 1)
    bad[17, 0] = float("nan")
    path = _save(
        tmp_path, "nan.pt", {"time": torch.arange(50) / 100.0, "dof_pos": bad, "des_dof_pos": bad * 0}
    )
    _raises("nan.pt, dof_pos, index 17|NaN", _read, path, joint_names=["a"])
    path = _save(
        tmp_path,
        "shape.pt",
        {"time": torch.arange(50) / 100.0, "dof_pos": torch.zeros(40, 2), "des_dof_pos": torch.zeros(40, 2)},
    )
    _raises("shape.pt|'dof_pos' must have shape [T, J] with T = 50", _read, path, joint_names=["a", "b"])
    _raises("list.pt|a PACE log is a dict", _read, _save(tmp_path, "list.pt", [1, 2]), joint_names=["a"])


class _NotAllowed:
    """A class torch.load(weights_only=True) must refuse to unpickle."""


def test_pace_refuses_arbitrary_pickles(tmp_path: Path) -> None:
    import torch

    torch.save({"time": _NotAllowed()}, tmp_path / "evil.pt")
    _raises("evil.pt|weights_only=True", _read, tmp_path / "evil.pt", joint_names=["a"], fmt="pace")


def _save(tmp_path: Path, name: str, obj: object) -> Path:
    import torch

    torch.save(obj, tmp_path / name)
    return tmp_path / name


# --------------------------------------------------------------------------------------------- ROS

HEADER = """================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
"""
JOINT_STATE = (
    "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n"
    + HEADER
)
TRAJECTORY = (
    "std_msgs/Header header\nstring[] joint_names\ntrajectory_msgs/JointTrajectoryPoint[] points\n"
    + HEADER
    + """================================================================================
MSG: trajectory_msgs/JointTrajectoryPoint
float64[] positions
float64[] velocities
float64[] accelerations
float64[] effort
builtin_interfaces/Duration time_from_start
================================================================================
MSG: builtin_interfaces/Duration
int32 sec
uint32 nanosec
"""
)
MULTI_ARRAY = """std_msgs/MultiArrayLayout layout
float64[] data
================================================================================
MSG: std_msgs/MultiArrayLayout
std_msgs/MultiArrayDimension[] dim
uint32 data_offset
================================================================================
MSG: std_msgs/MultiArrayDimension
string label
uint32 size
uint32 stride
"""
T0 = 1_700_000_000


def _stamp(t: float) -> dict:
    ns = T0 * 10**9 + round(t * 1e9)
    return {"sec": ns // 10**9, "nanosec": ns % 10**9}


def _js(
    t: float,
    names: list[str],
    pos: list[float],
    vel: list[float] | None = None,
    eff: list[float] | None = None,
) -> dict:
    return {
        "header": {"stamp": _stamp(t), "frame_id": ""},
        "name": names,
        "position": pos,
        "velocity": vel or [],
        "effort": eff or [],
    }


def _write_mcap(path: Path, messages: list[tuple[str, str, dict, float]]) -> Path:
    """(topic, schema name, message dict, log time s) in the given order, with mcap-ros2-support's writer."""
    from mcap_ros2.writer import Writer

    defs = {
        "sensor_msgs/msg/JointState": JOINT_STATE,
        "trajectory_msgs/msg/JointTrajectory": TRAJECTORY,
        "std_msgs/msg/Float64MultiArray": MULTI_ARRAY,
    }
    with open(path, "wb") as f:
        w = Writer(f)
        schemas = {name: w.register_msgdef(name, text) for name, text in defs.items()}
        for topic, schema, msg, log_t in messages:
            w.write_message(topic, schemas[schema], msg, log_time=T0 * 10**9 + round(log_t * 1e9))
        w.finish()
    return path


def _state_and_command(n: int = 400, rate: float = 200.0, joints: tuple[str, ...] = ("hip", "knee")) -> list:
    msgs = []
    for k in range(n):
        t = k / rate
        q = [math.sin(t + j) for j in range(len(joints))]
        msgs.append(
            (
                "/joint_states",
                "sensor_msgs/msg/JointState",
                _js(
                    t,
                    list(joints),
                    q,
                    [math.cos(t + j) for j in range(len(joints))],
                    [0.1 * j for j in range(len(joints))],
                ),
                t,
            )
        )
        msgs.append(
            ("/joint_commands", "sensor_msgs/msg/JointState", _js(t, list(joints), [1.1 * v for v in q]), t)
        )
    return msgs


def test_mcap_state_and_command_joint_states(tmp_path: Path) -> None:
    path = _write_mcap(tmp_path / "run.mcap", _state_and_command())
    rec = _read(path)
    assert rec.source_format == "mcap" and rec.joint_names == ["hip", "knee"]
    s = rec.segments[0]
    assert s.n == 400 and rec.rate_hz == pytest.approx(200)
    assert np.allclose(s.q[:, 1], np.sin(s.t + 1), atol=1e-9)
    assert np.allclose(s.q_des, 1.1 * s.q, atol=1e-9) and np.allclose(s.qd[:, 0], np.cos(s.t), atol=1e-9)
    assert s.tau is not None and np.allclose(s.tau[:, 1], 0.1)
    assert (
        rec.metadata["state_topic"] == "/joint_states" and rec.metadata["command_topic"] == "/joint_commands"
    )


def test_mcap_awkward_messages(tmp_path: Path) -> None:
    """Empty effort arrays, a late joint, joints in any order, out-of-order logging, and a gap."""
    msgs = []
    for k in range(600):
        if 300 <= k < 340:
            continue  # a 0.2 s gap: two segments
        t = k / 200.0
        names = ["knee", "hip"] if k % 2 else ["hip", "knee"]
        vals = {"hip": math.sin(t), "knee": math.cos(t)}
        if k < 20:  # the knee joins late
            names = ["hip"]
        msgs.append(
            (
                "/joint_states",
                "sensor_msgs/msg/JointState",
                _js(t, names, [vals[n] for n in names], [0.0] * len(names)),
                t,
            )
        )
        msgs.append(
            (
                "/joint_commands",
                "sensor_msgs/msg/JointState",
                _js(t, ["hip", "knee"], [2 * vals["hip"], 2 * vals["knee"]]),
                t,
            )
        )
    msgs[100], msgs[102] = msgs[102], msgs[100]  # logged out of order
    rec = _read(_write_mcap(tmp_path / "awk.mcap", msgs))
    assert rec.joint_names == ["hip", "knee"]
    assert len(rec.segments) == 2
    for s in rec.segments:
        assert s.tau is None  # effort arrays were empty
        np.testing.assert_allclose(s.q_des, 2 * s.q, atol=1e-9)
    t0 = rec.segments[0].t[0]
    assert t0 == 0.0 and rec.segments[0].n == 280  # messages 20..299 once the knee is there
    q = rec.summary()["quality"]
    assert q["gaps"]["count"] == 1 and q["samples_dropped"] == 20
    text = " ".join(rec.warnings)
    assert "first appear" in text and "not in stamp order" in text


def test_mcap_trajectory_and_multiarray_commands(tmp_path: Path) -> None:
    msgs = []
    for k in range(200):
        t = k / 100.0
        msgs.append(("/joint_states", "sensor_msgs/msg/JointState", _js(t, ["a", "b"], [t, -t]), t))
        point = {
            "positions": [t + 0.5, -t],
            "velocities": [],
            "accelerations": [],
            "effort": [],
            "time_from_start": {"sec": 0, "nanosec": 0},
        }
        msgs.append(
            (
                "/arm_controller/joint_trajectory",
                "trajectory_msgs/msg/JointTrajectory",
                {
                    "header": {"stamp": _stamp(t), "frame_id": ""},
                    "joint_names": ["b", "a"] if k % 2 else ["a", "b"],
                    "points": [point if k % 2 == 0 else {**point, "positions": [-t, t + 0.5]}],
                },
                t,
            )
        )
    rec = _read(_write_mcap(tmp_path / "traj.mcap", msgs))
    np.testing.assert_allclose(rec.segments[0].q_des[:, 0], rec.segments[0].q[:, 0] + 0.5, atol=1e-9)
    msgs = []
    for k in range(200):
        t = k / 100.0
        msgs.append(("/joint_states", "sensor_msgs/msg/JointState", _js(t, ["a", "b"], [t, -t]), t))
        msgs.append(
            (
                "/forward_position_controller/commands",
                "std_msgs/msg/Float64MultiArray",
                {"layout": {"dim": [], "data_offset": 0}, "data": [-t, t]},
                t,
            )
        )
    path = _write_mcap(tmp_path / "multi.mcap", msgs)
    _raises("multi.mcap|Float64MultiArray|--joint-names", _read, path)
    rec = _read(path, joint_names=["b", "a"])
    assert rec.joint_names == ["b", "a"]
    np.testing.assert_allclose(rec.segments[0].q_des, rec.segments[0].q, atol=1e-9)


def test_mcap_malformed_and_ambiguous(tmp_path: Path) -> None:
    msgs = _state_and_command(n=50)
    msgs[2 * 13] = (
        "/joint_states",
        "sensor_msgs/msg/JointState",
        _js(0.065, ["hip", "knee"], [1.0, 2.0, 3.0]),
        0.065,
    )
    _raises(
        "bad.mcap, topic /joint_states, message 13|2 joint names but 3 position",
        _read,
        _write_mcap(tmp_path / "bad.mcap", msgs),
    )
    only_state = [m for m in _state_and_command(n=50) if m[0] == "/joint_states"]
    _raises(
        "nocmd.mcap|no candidate command topics|--command-topic|/joint_states",
        _read,
        _write_mcap(tmp_path / "nocmd.mcap", only_state),
    )
    _raises("nocmd.mcap|no topic '/cmd'", _read, tmp_path / "nocmd.mcap", command_topic="/cmd")
    data = (tmp_path / "bad.mcap").read_bytes()
    _raises("cut.mcap", read_upload, data[: len(data) // 2], "cut.mcap")


def _rosbags_write(path: Path, version: int, n: int = 300) -> Path:
    """A ROS 1 bag or a ROS 2 sqlite3 bag written with rosbags, JointState state + command topics."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC if version == 1 else Stores.ROS2_HUMBLE)
    JS = store.types["sensor_msgs/msg/JointState"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]

    def msg(t: float, pos: list[float]) -> object:
        ns = T0 * 10**9 + round(t * 1e9)
        hdr = (
            Header(seq=0, stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id="")
            if version == 1
            else Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id="")
        )
        return JS(
            header=hdr,
            name=["j1"],
            position=np.array(pos),
            velocity=np.array([], dtype=np.float64),
            effort=np.array([], dtype=np.float64),
        )

    if version == 1:
        from rosbags.rosbag1 import Writer

        open_writer, serialize = (lambda: Writer(path)), store.serialize_ros1
    else:
        from rosbags.rosbag2 import Writer

        open_writer, serialize = (lambda: Writer(path, version=8)), store.serialize_cdr
    with open_writer() as w:
        conns = {
            tp: w.add_connection(tp, "sensor_msgs/msg/JointState", typestore=store)
            for tp in ("/joint_states", "/joint_command")
        }
        for k in range(n):
            t = k / 100.0
            for tp, v in (("/joint_states", math.sin(t)), ("/joint_command", 1.5 * math.sin(t))):
                w.write(conns[tp], T0 * 10**9 + round(t * 1e9), serialize(msg(t, [v]), JS.__msgtype__))
    return path


@pytest.mark.parametrize("version", [1, 2])
def test_rosbags_ros1_and_ros2_sqlite(tmp_path: Path, version: int) -> None:
    bag = _rosbags_write(tmp_path / ("run.bag" if version == 1 else "bag2"), version)
    if version == 2:  # the .db3 inside the bag folder, also alone and as a zipped folder
        db3 = next(bag.glob("*.db3"))
        rec = _read(db3)
        assert rec.source_format == "rosbag"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for p in bag.iterdir():
                z.write(p, f"bag2/{p.name}")
        assert read_upload(buf.getvalue(), "bag2.zip").segments[0].n == 300
    rec = _read(bag)
    assert rec.joint_names == ["j1"] and rec.segments[0].n == 300
    np.testing.assert_allclose(rec.segments[0].q_des, 1.5 * rec.segments[0].q, atol=1e-9)


# --------------------------------------------------------------------------------------------- actuator-net


def _rl_sar(n: int = 100, J: int = 2) -> str:
    cols = [
        f"{k}_{i}"
        for k in ("tau_cal", "tau_est", "joint_pos", "joint_pos_target", "joint_vel")
        for i in range(J)
    ]
    lines = [",".join(cols) + ","]  # rl_sar ends every line with a comma
    for r in range(n):
        vals = (
            [0.2 * i for i in range(J)]
            + [1.0 + i + 0.01 * r for i in range(J)]
            + [math.sin(r / 50 + i) for i in range(J)]
            + [1.1 * math.sin(r / 50 + i) for i in range(J)]
            + [math.cos(r / 50 + i) / 50 for i in range(J)]
        )
        lines.append(",".join(f"{v:.6f}" for v in vals) + ",")
    return "\n".join(lines) + "\n"


def test_actuator_net_csv(tmp_path: Path) -> None:
    (tmp_path / "motor_data.csv").write_text(_rl_sar())
    rec = _read(tmp_path / "motor_data.csv")
    assert rec.source_format == "actuator-net" and rec.joint_names == ["joint_0", "joint_1"]
    s = rec.segments[0]
    assert rec.rate_hz == pytest.approx(50) and s.n == 100
    np.testing.assert_allclose(s.tau[:, 1], 2.0 + 0.01 * np.arange(100), atol=1e-6)  # tau_est, not tau_cal
    rec = _read(tmp_path / "motor_data.csv", joint_names=["FL_hip", "FL_thigh"], rate_hz=100)
    assert rec.joint_names == ["FL_hip", "FL_thigh"] and rec.rate_hz == pytest.approx(100)


def test_many_files_saying_the_same_thing_give_one_warning_naming_them(tmp_path: Path) -> None:
    """Five actuator-net logs without a time column, uploaded as one zip: one warning naming how many files
    (a few of them), not five that differ only in the file name."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k in range(5):
            z.writestr(f"motors/motor_{k}.csv", _rl_sar())
    rec = read_upload(buf.getvalue(), "motors.zip")
    assert len(rec.segments) == 5
    timing = [w for w in rec.warnings if "no time column" in w]
    assert timing == [
        "5 files (motors.zip:motor_0.csv, motors.zip:motor_1.csv, motors.zip:motor_2.csv and 2 more): no time "
        "column; rows are taken as 50 Hz samples (the policy rate; set rate_hz if yours differs)"
    ], rec.warnings
    (tmp_path / "one.csv").write_text(_rl_sar())
    assert any(w.startswith("one.csv: no time column") for w in _read(tmp_path / "one.csv").warnings)


def test_actuator_net_malformed(tmp_path: Path) -> None:
    text = _rl_sar().splitlines()
    row = text[6].split(",")
    row[5] = "abc"
    text[6] = ",".join(row)
    (tmp_path / "bad.csv").write_text("\n".join(text))
    _raises("bad.csv, line 7, column 'joint_pos_1'|'abc' is not a number", _read, tmp_path / "bad.csv")
    (tmp_path / "few.csv").write_text(_rl_sar().replace("joint_pos_target_1", "foo"))
    _raises("few.csv|joint_pos_target columns are numbered [0]", _read, tmp_path / "few.csv")


# --------------------------------------------------------------------------------------------- LeRobot


def _lerobot_table(episodes: int = 2, n: int = 120, fps: float = 30.0, dims: int = 3):
    import pyarrow as pa

    rows = {
        "observation.state": [],
        "action": [],
        "timestamp": [],
        "frame_index": [],
        "episode_index": [],
        "index": [],
    }
    for e in range(episodes):
        for k in range(n):
            t = k / fps
            rows["observation.state"].append([10.0 * math.sin(t + i) for i in range(dims)])
            rows["action"].append([11.0 * math.sin(t + i) for i in range(dims)])
            rows["timestamp"].append(t)
            rows["frame_index"].append(k)
            rows["episode_index"].append(e)
            rows["index"].append(len(rows["index"]))
    return pa.table(
        {
            k: pa.array(v, type=pa.list_(pa.float32()))
            if k in ("observation.state", "action")
            else pa.array(v, type=pa.float32() if k == "timestamp" else pa.int64())
            for k, v in rows.items()
        }
    )


def test_lerobot_parquet_and_dataset_folder(tmp_path: Path) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pq.write_table(_lerobot_table(), tmp_path / "episodes.parquet")
    _raises(
        "episodes.parquet|observation.state has 3 joint column(s) but no joint names",
        _read,
        tmp_path / "episodes.parquet",
    )
    rec = _read(tmp_path / "episodes.parquet", joint_names=["pan", "lift", "elbow"])
    assert rec.source_format == "lerobot" and [s.name for s in rec.segments] == ["episode_0", "episode_1"]
    assert rec.rate_hz == pytest.approx(30, rel=1e-3)
    # the dataset folder with meta/info.json (names, fps), zipped, and degrees declared in the metadata
    root = tmp_path / "so100"
    (root / "meta").mkdir(parents=True)
    (root / "data" / "chunk-000").mkdir(parents=True)
    names = ["shoulder_pan", "shoulder_lift", "elbow_flex"]
    (root / "meta" / "info.json").write_text(
        json.dumps(
            {
                "fps": 30,
                "features": {
                    "observation.state": {"dtype": "float32", "shape": [3], "names": {"motors": names}},
                    "action": {"dtype": "float32", "shape": [3], "names": list(reversed(names))},
                },
            }
        )
    )
    table = _lerobot_table()
    for e in (0, 1):
        part = table.filter(pc.equal(table["episode_index"], e))
        pq.write_table(part, root / "data" / "chunk-000" / f"episode_{e:06d}.parquet")
    rec = read_paths([root], sidecar=None)
    assert rec.joint_names == names and len(rec.segments) == 2
    # actions are matched by name: info.json lists them reversed
    np.testing.assert_allclose(
        rec.segments[0].q_des[:, 0], 1.1 * rec.segments[0].q[:, 2], rtol=1e-5, atol=1e-5
    )
    assert any("look like degrees" in w for w in rec.summary()["quality"]["warnings"]) is False  # ±10 "deg"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in root.rglob("*"):
            if p.is_file():
                z.write(p, p.relative_to(tmp_path).as_posix())
    up = read_upload(buf.getvalue(), "so100.zip", {"angle_unit": "deg"})
    assert up.metadata["angle_unit"] == "deg"
    np.testing.assert_allclose(up.segments[0].q, np.radians(rec.segments[0].q), atol=1e-9)


def test_lerobot_malformed(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = _lerobot_table(episodes=1, n=20)
    state = table["observation.state"].to_pylist()
    state[4] = [1.0, 2.0]
    bad = table.set_column(0, "observation.state", pa.array(state, type=pa.list_(pa.float32())))
    pq.write_table(bad, tmp_path / "ragged.parquet")
    _raises(
        "ragged.parquet, data row 5 (0-based 4), column 'observation.state'|2 values where data row 1 (0-based 0) has 3",
        _read,
        tmp_path / "ragged.parquet",
        joint_names=["a", "b", "c"],
    )
    state = table["observation.state"].to_pylist()
    state[8] = [1.0, float("nan"), 2.0]
    bad = table.set_column(0, "observation.state", pa.array(state, type=pa.list_(pa.float32())))
    pq.write_table(bad, tmp_path / "nan.parquet")
    _raises(
        "nan.parquet|'observation.state', data row 9 (0-based 8), column 1|NaN",
        _read,
        tmp_path / "nan.parquet",
        joint_names=["a", "b", "c"],
    )


# --------------------------------------------------------------------------------------------- Isaac Lab HDF5


def _hdf5(path: Path, demos: int = 2, n: int = 100, J: int = 4, obs: bool = True) -> Path:
    import h5py

    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["total"] = demos * n
        data.attrs["env_args"] = json.dumps({"env_name": "Isaac-Reach-v0", "type": 2})
        for d in range(demos):
            g = data.create_group(f"demo_{d}")
            g.attrs.update(num_samples=n, seed=d, success=True)
            t = np.arange(n) / 50.0
            q = np.stack([np.sin(t + j) for j in range(J)], axis=1)
            if obs:
                g.create_dataset("obs/joint_pos", data=q, compression="gzip")
                g.create_dataset("obs/joint_vel", data=np.gradient(q, t, axis=0), compression="gzip")
            g.create_dataset("states/articulation/robot/joint_position", data=q, compression="gzip")
            g.create_dataset("actions", data=1.2 * q, compression="gzip")
    return path


def test_isaaclab_hdf5(tmp_path: Path) -> None:
    path = _hdf5(tmp_path / "dataset.hdf5")
    names = ["j1", "j2", "j3", "j4"]
    _raises("dataset.hdf5|no time stamps|--rate", _read, path, joint_names=names)
    _raises("dataset.hdf5|4 joint column(s) but no joint names", _read, path, rate_hz=50)
    rec = _read(path, joint_names=names, rate_hz=50)
    assert rec.source_format == "isaaclab-hdf5" and [s.name for s in rec.segments] == ["demo_0", "demo_1"]
    assert rec.rate_hz == pytest.approx(50) and rec.segments[0].metadata["success"] is True
    np.testing.assert_allclose(rec.segments[0].q_des, 1.2 * rec.segments[0].q)
    assert any("'obs/joint_pos'" in w for w in rec.warnings) and "measured" in rec.velocity_source
    rec = _read(path, joint_names=names, rate_hz=50, positions="states/articulation/robot/joint_position")
    assert not any("relative to the default" in w for w in rec.warnings)


def test_isaaclab_hdf5_malformed(tmp_path: Path) -> None:
    import h5py

    path = _hdf5(tmp_path / "d.hdf5")
    _raises(
        "d.hdf5, /data/demo_0|no dataset 'obs/qpos'|obs/joint_pos",
        _read,
        path,
        joint_names=list("abcd"),
        rate_hz=50,
        positions="obs/qpos",
    )
    with h5py.File(path, "a") as f:
        a = f["data/demo_1/actions"][()]
        a[33, 2] = np.nan
        del f["data/demo_1/actions"]
        f["data/demo_1/actions"] = a
    _raises("d.hdf5, /data/demo_1, actions, step 33|NaN", _read, path, joint_names=list("abcd"), rate_hz=50)
    with h5py.File(tmp_path / "empty.hdf5", "w") as f:
        f.create_group("mask")
    _raises("empty.hdf5|no /data group", _read, tmp_path / "empty.hdf5", rate_hz=50)


# --------------------------------------------------------------------------------------------- dispatch


def test_declared_format_must_match_content(tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_text(_rl_sar())
    _raises("log.csv|declared format mcap|looks like actuator-net", _read, tmp_path / "log.csv", fmt="mcap")
    _raises("unknown format 'xlsx'", _read, tmp_path / "log.csv", fmt="xlsx")


def test_canonical_still_reads_through_the_dispatcher(tmp_path: Path) -> None:
    from conftest import make_recording

    from actuator_sysid.datasets import write_table

    write_table(make_recording(joints=("a", "b")), tmp_path / "log.parquet")
    rec = read_paths([tmp_path / "log.parquet"])
    assert rec.source_format == "canonical-parquet-long" and len(rec.segments) == 3
    assert rec.segments[0].metadata == {"kp": 5.0, "kd": 0.1}  # the sidecar beside it was found
