"""Data checks of bench logs: frozen channels, repeated and skipped stamps, a lagging effort label, and the
degrees check under a declared unit. Tiny CSVs written to tmp_path and read by the real readers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import good_rows, long_csv, raises_dataset_error, run_cli

from actuator_sysid.cli import make_demo_recording
from actuator_sysid.datasets import read_log
from actuator_sysid.datasets.quality import quality_report

RATE = 100.0


def _csv(path: Path, t: np.ndarray, cols: dict[str, np.ndarray], side: dict | None = None) -> Path:
    """Write a wide CSV (columns `t` then `cols`) and, when given, its JSON sidecar."""
    names = list(cols)
    lines = [",".join(["t", *names])]
    lines += [",".join(repr(float(v)) for v in (t[k], *(cols[c][k] for c in names))) for k in range(t.size)]
    path.write_text("\n".join(lines) + "\n")
    if side is not None:
        path.with_suffix(".json").write_text(json.dumps(side))
    return path


def _bench(n: int = 600, seed: int = 0, lag: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One PD-driven joint: a two-tone command, a noisy measured response and tau = 5·(q_des − q) − 0.1·qd,
    written `lag` samples late (the label of sample k is the effort of sample k − lag)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / RATE
    q_des = 0.5 * np.sin(2 * np.pi * 0.7 * t) + 0.2 * np.sin(2 * np.pi * 3.1 * t)
    q = 0.8 * np.sin(2 * np.pi * 0.7 * t - 0.2) + 0.1 * np.sin(2 * np.pi * 3.1 * t - 0.6)
    q = q + rng.normal(0.0, 1e-3, n)
    qd = np.gradient(q, t) + rng.normal(0.0, 0.02, n)
    tau = 5.0 * (q_des - q) - 0.1 * qd
    if lag:
        tau = np.concatenate([np.full(lag, tau[0]), tau[:-lag]])
    return t, {"j1/q": q, "j1/qd": qd, "j1/q_des": q_des, "j1/tau": tau}


def _quality(rec) -> str:  # type: ignore[no-untyped-def]
    return " | ".join(rec.summary()["quality"]["warnings"])


# ----------------------------------------------------------------------------------------- frozen channels


def test_a_channel_frozen_for_the_first_second_is_named_with_its_stretch(tmp_path: Path) -> None:
    t, cols = _bench()
    cols["j1/tau"][:100] = cols["j1/tau"][0]  # the torque stream starts a second late
    out = run_cli("inspect", str(_csv(tmp_path / "log.csv", t, cols)))
    assert out.returncode == 0, out.stderr
    frozen = [w for w in json.loads(out.stdout)["quality"]["warnings"] if "frozen" in w]
    assert frozen == [
        "joint 'j1': tau is frozen (exactly constant) in segment 0 0–1 s (1 s, while q moves); a stalled or "
        "late stream — trim those samples or fix the logger"
    ]


def test_a_position_frozen_inside_a_segment_while_its_velocity_moves_warns(tmp_path: Path) -> None:
    t, cols = _bench()
    cols["j1/q"][300:360] = cols["j1/q"][300]  # 0.6 s stuck at the encoder while qd still reads motion
    text = _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    assert "joint 'j1': q is frozen" in text and "segment 0 3–3.6 s (0.6 s, while qd moves)" in text


def test_channels_constant_for_the_whole_log_or_saturated_do_not_warn(tmp_path: Path) -> None:
    t, cols = _bench()
    n = t.size
    cols["j1/q_des"] = np.zeros(n)  # a torque-driven log: q_des never moves
    cols["j1/tau_ff"] = np.zeros(n)
    cols["j1/tau"] = np.clip(cols["j1/tau"], -0.5, 0.5)  # saturated effort sits exactly at its limit
    assert "frozen" not in _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    cols["j1/tau_ff"] = np.select([t < 2.0, t < 4.0], [0.8, -0.4], 0.3)  # torque steps; effort = the step
    cols["j1/tau"] = cols["j1/tau_ff"].copy()
    assert "frozen" not in _quality(read_log(_csv(tmp_path / "steps.csv", t, cols)))
    t, cols = _bench()
    assert "frozen" not in _quality(read_log(_csv(tmp_path / "clean.csv", t, cols)))


# ---------------------------------------------------------------------------------- repeated and skipped stamps


def test_skipped_stamps_give_one_warning_with_count_rate_and_where(tmp_path: Path) -> None:
    t, cols = _bench()
    keep = np.ones(t.size, bool)
    keep[[120, 250, 251, 400]] = False  # four samples never logged (one of them a double skip)
    path = _csv(tmp_path / "log.csv", t[keep], {c: v[keep] for c, v in cols.items()})
    rec = read_log(path)
    every = rec.warnings + rec.summary()["quality"]["warnings"]
    timing = [w for w in every if "time stamp" in w]
    assert len(timing) == 1, every  # not the resampling note as well
    assert "4 skipped sample(s)" in timing[0] and "100 Hz" in timing[0] and "row 121" in timing[0]
    assert "segment 0" in timing[0]
    assert rec.metadata["timing"]["0"]["skipped_samples"] == 4


def test_repeated_records_are_dropped_and_counted(tmp_path: Path) -> None:
    t, cols = _bench(n=300)
    idx = np.insert(np.arange(t.size), [50, 200], [49, 199])  # samples 49 and 199 logged twice
    rec = read_log(_csv(tmp_path / "log.csv", t[idx], {c: v[idx] for c, v in cols.items()}))
    assert rec.segments[0].n == 300
    text = _quality(rec)
    assert "2 repeated time stamp(s)" in text and "row 51" in text and "segment 0" in text
    assert "time stamps are not uniform" not in " ".join(rec.warnings)


def test_a_repeated_long_form_sample_is_dropped_for_every_joint(tmp_path: Path) -> None:
    rows = good_rows(40) + good_rows(40, joint="j2")
    rows = sorted(rows, key=lambda r: (r[0], r[1]))  # one row per joint per sample, in time order
    rows = rows[:21] + rows[20:22] + rows[21:]  # sample 10 (rows 21 and 22, both joints) logged twice
    path = tmp_path / "long.csv"
    path.write_bytes(long_csv(rows))
    rec = read_log(path)
    assert [s.n for s in rec.segments] == [40]
    assert "2 repeated time stamp(s)" not in _quality(rec) and "1 repeated time stamp(s)" in _quality(rec)


def test_a_repeated_stamp_with_other_values_is_still_an_error(tmp_path: Path) -> None:
    t, cols = _bench(n=300)
    t = t.copy()
    t[51] = t[50]  # the stamp repeats but the sample differs: which time is right is unknown
    raises_dataset_error("duplicate t|rows 51 and 52", read_log, _csv(tmp_path / "log.csv", t, cols))


def test_clean_stamps_say_nothing_about_time(tmp_path: Path) -> None:
    t, cols = _bench()
    rec = read_log(_csv(tmp_path / "log.csv", t, cols))
    every = rec.warnings + rec.summary()["quality"]["warnings"]
    assert not [w for w in every if "time stamp" in w], every
    assert rec.metadata["timing"]["0"]["skipped_samples"] == 0


# -------------------------------------------------------------------------------------------- a lagging label


def test_an_effort_label_one_sample_late_is_named_with_its_lag(tmp_path: Path) -> None:
    t, cols = _bench(lag=1)
    text = _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    assert "joint 'j1': tau lags its inputs by 1 sample (10 ms)" in text


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_simulated_log_without_lag_does_not_warn(tmp_path: Path, seed: int) -> None:
    t, cols = _bench(seed=seed)
    assert "lags its inputs" not in _quality(read_log(_csv(tmp_path / "log.csv", t, cols)))
    t, cols = _bench(seed=seed, lag=2)
    assert "by 2 samples (20 ms)" in _quality(read_log(_csv(tmp_path / "lag.csv", t, cols)))


def test_the_demo_simulator_log_does_not_warn_and_its_late_label_does() -> None:
    rec = make_demo_recording(0)  # the project's rollout, with sensor noise on q, qd and tau
    assert not [w for w in quality_report(rec)["warnings"] if "lags its inputs" in w or "frozen" in w]
    for s in rec.segments:
        assert s.tau is not None
        s.tau = np.concatenate([s.tau[:1], s.tau[:-1]])
    assert "joint 'pendulum': tau lags its inputs by 1 sample (5 ms)" in " | ".join(
        quality_report(rec)["warnings"]
    )


# ------------------------------------------------------------------------------------- degrees vs a declared unit


def _many_turns(tmp_path: Path, side: dict | None) -> tuple[str, str]:
    t = np.arange(600) / RATE
    q = 5.0 * t  # 30 rad: about 4.8 turns of a continuous joint
    path = _csv(tmp_path / "turns.csv", t, {"j1/q": q, "j1/q_des": q + 0.01}, side)
    out = run_cli("inspect", str(path))
    assert out.returncode == 0, out.stderr
    return out.stdout, _quality(read_log(path))


def test_a_declared_rad_is_not_called_degrees(tmp_path: Path) -> None:
    stdout, text = _many_turns(tmp_path, {"angle_unit": "rad"})
    assert "look like degrees" not in stdout and "look like degrees" not in text


def test_an_undeclared_unit_still_gets_the_degrees_warning(tmp_path: Path) -> None:
    stdout, text = _many_turns(tmp_path, None)
    assert "look like degrees" in stdout and "look like degrees" in text


def test_a_torque_driven_log_writing_q_des_as_q_is_not_called_a_plan() -> None:
    """q_des = q in a log driven by its feed-forward effort (or at kp 0) is no command: not a plan; the same
    positions with a position command and no effort still are."""
    from conftest import make_recording

    from actuator_sysid.datasets.quality import PLAN, commands_only

    plan = make_recording(segments=2)
    for s in plan.segments:
        s.q_des = s.q.copy()
    assert commands_only(plan) and any(w.startswith(PLAN) for w in quality_report(plan)["warnings"])
    torque = make_recording(segments=2)
    for s in torque.segments:
        s.q_des, s.tau_ff = s.q.copy(), 0.3 * np.sin(s.t)[:, None]
    assert not commands_only(torque)
    assert not any(w.startswith(PLAN) for w in quality_report(torque)["warnings"])
    zero_gain = make_recording(segments=2)
    for s in zero_gain.segments:
        s.q_des, s.metadata = s.q.copy(), {"kp": 0.0, "kd": 0.0}
    assert not commands_only(zero_gain)
