"""The walk-these-ways deployment log (docs/log-formats.md §5): log.pkl written here the way that project writes it.

walk-these-ways' LCMAgent returns per-step ``infos`` with (1, 12) numpy arrays (joint_pos, joint_vel,
joint_pos_target, tau_est, ...), the deployment runner adds torch tensors and images, its EpisodeLogger
turns tensors into numpy with ``.detach().cpu().numpy()`` and MultiLogger.save pickles
``{agent: [class_to_dict(cfg), infos]}``. The same steps are written below and read back to the numbers.
"""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import raises_dataset_error as _raises

from actuator_sysid.cli import main
from actuator_sysid.datasets.readers import detect_format, read_paths, read_upload
from actuator_sysid.datasets.sources import ReadOptions, Source

J = 12


class _Cfg:
    """A walk-these-ways style nested config class (control.decimation × sim.dt = the policy period)."""

    class control:
        decimation = 4
        control_type = "P"

    class sim:
        dt = 0.005


def _class_to_dict(obj: object) -> dict:
    """walk-these-ways' class_to_dict: public attributes, recursively."""
    if not hasattr(obj, "__dict__"):
        return obj  # type: ignore[return-value]
    return {k: _class_to_dict(getattr(obj, k)) for k in dir(obj) if not k.startswith("_")}


def _steps(n: int = 150, time_key: bool = False, nan_at: int | None = None) -> list[dict]:
    """EpisodeLogger.log of n LCMAgent steps at 50 Hz: tensors become numpy, dicts are skipped."""
    infos = []
    for i in range(n):
        t = i / 50.0
        q = np.array([0.3 * np.sin(2 * t + j) for j in range(J)], np.float32)
        info = {
            "joint_pos": q[np.newaxis, :],
            "joint_vel": np.array([0.6 * np.cos(2 * t + j) for j in range(J)], np.float32)[np.newaxis, :],
            "joint_pos_target": (1.1 * q)[np.newaxis, :],
            "joint_vel_target": np.zeros((1, J), np.float32),
            "tau_est": np.array([0.1 * j + 0.01 * i for j in range(J)], np.float32)[np.newaxis, :],
            "torques": torch.full((1, J), 9.0),  # the runner's tensor, converted below
            "contact_state": np.ones((1, 4)),
            "camera_image_front": None,
            "privileged_obs": None,
            "latent": torch.zeros(1, 6),
            "action": torch.zeros(1, J),
            "timestep": i,
        }
        if time_key:
            info["time"] = t
        if nan_at == i:
            info["joint_vel"] = info["joint_vel"].copy()
            info["joint_vel"][0, 3] = np.nan
        for key in info:  # walk-these-ways EpisodeLogger.log
            if isinstance(info[key], torch.Tensor):
                info[key] = info[key].detach().cpu().numpy()
            if isinstance(info[key], dict):
                continue
            elif "image" not in key:
                info[key] = copy.deepcopy(info[key])
        infos.append(dict(info))
    return infos


def _save(path: Path, infos: list, agent: str = "hardware_closed_loop", cfg: object = _Cfg) -> Path:
    """walk-these-ways MultiLogger.save."""
    with open(path, "wb") as f:
        pickle.dump({agent: [_class_to_dict(cfg), infos]}, f)
    return path


def _read(path: Path, **opts) -> object:
    return read_paths([path], options=ReadOptions(**opts))


def test_wtw_log_reads_back_the_numbers(tmp_path: Path) -> None:
    path = _save(tmp_path / "log.pkl", _steps())
    assert detect_format(Source(path.name, path=path)) == "actuator-net-pickle"
    rec = _read(path)
    assert rec.source_format == "actuator-net-pickle"
    assert rec.joint_names == [f"joint_{j}" for j in range(J)]
    s = rec.segments[0]
    assert s.n == 150 and rec.rate_hz == pytest.approx(50.0)  # from cfg control.decimation × sim.dt
    t = np.arange(150) / 50.0
    np.testing.assert_allclose(s.q[:, 5], 0.3 * np.sin(2 * t + 5), atol=1e-6)
    np.testing.assert_allclose(s.q_des[:, 5], 1.1 * 0.3 * np.sin(2 * t + 5), atol=1e-6)
    np.testing.assert_allclose(s.qd[:, 2], 0.6 * np.cos(2 * t + 2), atol=1e-6)
    np.testing.assert_allclose(s.tau[:, 7], 0.7 + 0.01 * np.arange(150), atol=1e-5)  # tau_est, not torques
    assert "cfg control.decimation" in " ".join(rec.summary()["warnings"])
    # the step's own time wins; joint names and a rate from the user
    rec = _read(_save(tmp_path / "timed.pkl", _steps(time_key=True)), joint_names=[f"m{j}" for j in range(J)])
    assert rec.joint_names[0] == "m0" and rec.rate_hz == pytest.approx(50.0)
    rec = _read(_save(tmp_path / "nocfg.pkl", _steps(), cfg=None), rate_hz=100)
    assert rec.rate_hz == pytest.approx(100.0)


def test_wtw_upload_cli_and_format_names(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _save(tmp_path / "log.pkl", _steps())
    rec = read_upload(path.read_bytes(), "deploy.pkl")
    assert rec.source_format == "actuator-net-pickle" and rec.segments[0].n == 150
    assert _read(path, fmt="walk-these-ways").segments[0].n == 150
    assert main(["inspect", str(path)]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert summary["source_format"] == "actuator-net-pickle" and summary["joints"][0] == "joint_0"
    assert summary["rate_hz"] == pytest.approx(50.0) and "rate: 50 Hz" in cap.err and "quality: " in cap.err
    assert main(["inspect", str(tmp_path / "log.pkl"), "--joint-names", "a,b"]) == 2
    assert "log.pkl: the log has 12 joints but 2 joint name(s)" in capsys.readouterr().err


class _Evil:
    """Would run a shell command if unpickled by a plain pickle.load."""

    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


def test_wtw_malformed_logs_name_file_field_and_step(tmp_path: Path) -> None:
    steps = _steps()
    _raises(
        "nan.pkl, joint_vel, step 40, column 3|NaN", _read, _save(tmp_path / "nan.pkl", _steps(nan_at=40))
    )
    bad = [dict(s) for s in steps]
    bad[17] = {k: v for k, v in bad[17].items() if k != "joint_pos_target"}
    _raises(
        "gone.pkl|hardware_closed_loop step 17 has no 'joint_pos_target'",
        _read,
        _save(tmp_path / "gone.pkl", bad),
    )
    bad = [dict(s) for s in steps]
    bad[9]["tau_est"] = np.zeros((1, 11))
    _raises("short.pkl|step 9, tau_est: 11 values but 12 joints", _read, _save(tmp_path / "short.pkl", bad))
    bad = [dict(s) for s in steps]
    bad[3]["joint_pos"] = "up"
    _raises("text.pkl|step 3, joint_pos: not numeric", _read, _save(tmp_path / "text.pkl", bad))
    bad = [dict(s, time=0.5 if i == 60 else i / 50) for i, s in enumerate(steps)]
    _raises("back.pkl, hardware_closed_loop time|step 60", _read, _save(tmp_path / "back.pkl", bad))
    _raises("empty.pkl|no steps", _read, _save(tmp_path / "empty.pkl", []))
    _raises(
        "keys.pkl|step 0 has no joint_pos_target|found:",
        _read,
        _save(tmp_path / "keys.pkl", [{"joint_pos": np.zeros(J)}] * 30),
    )
    with open(tmp_path / "two.pkl", "wb") as f:
        pickle.dump({"sim_a": [{}, steps], "sim_b": [{}, steps]}, f)
    _raises("two.pkl|no 'hardware_closed_loop' agent", _read, tmp_path / "two.pkl")
    with open(tmp_path / "list.pkl", "wb") as f:
        pickle.dump([1, 2, 3], f)
    _raises("list.pkl|a walk-these-ways log is a dict", _read, tmp_path / "list.pkl")
    (tmp_path / "cut.pkl").write_bytes((tmp_path / "nan.pkl").read_bytes()[:500])
    _raises("cut.pkl|cannot read as a walk-these-ways log pickle", _read, tmp_path / "cut.pkl")
    _raises(
        "names.pkl|12 joints but 2 joint name",
        _read,
        _save(tmp_path / "names.pkl", steps),
        joint_names=["a", "b"],
    )
    # any class other than numpy's is never run: it stays an inert placeholder, and a needed field that is
    # one is refused by name
    bad = [dict(s) for s in steps]
    bad[5]["joint_vel"] = _Evil()
    _raises(
        "evil.pkl|step 5, joint_vel: a |system object, not a numeric array",
        _read,
        _save(tmp_path / "evil.pkl", bad),
    )
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    bad = [dict(s) for s in steps]
    bad[5]["camera_image_front"] = _Evil()  # a field the reader does not need: read, never executed
    assert _read(_save(tmp_path / "evil2.pkl", bad)).segments[0].n == 150
    assert not Path("pwned").exists()
    # a legacy torch.save file is still PACE, not this format
    torch.save({"time": torch.zeros(3)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert detect_format(Source("legacy.pt", path=tmp_path / "legacy.pt")) == "pace"
