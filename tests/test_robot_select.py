"""A robot fit's configuration chosen by its training data alone (issue 23, "generalisation is the target").

The log is made by Newton alone (tests/robot_sim.py: Newton's DrivePD at the logged gains, its delay buffer,
MuJoCo's C solver) on the two-link arm of tests/test_robot_torque.py under position targets, with an encoder
bias on both joints. The selection's inner split of the training part must prefer the encoder bias, report
every alternative's figure, and never read the validation part of the log.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from robot_sim import robot_recording, simulate_newton_log
from test_robot_torque import DEC, LOG_DT, TRUTH, load_arm, multisine

from actuator_sysid.datasets.recording import Recording
from actuator_sysid.fitting.robot import RobotFitOptions, fit_robot
from actuator_sysid.fitting.robot_select import (
    BIAS_MARGIN,
    GAINS_MARGIN,
    LATE_SHARE,
    Candidate,
    candidate_axes,
    delay_from_teacher,
    inner_share,
    late_rmse,
    name_groups,
    select_robot_fit,
    training_choice,
    training_part,
)
from actuator_sysid.fitting.robot_teacher import TEACHER_FINE, TEACHER_SPEED, teacher_distance
from actuator_sysid.models.robot import RobotError, RobotModel

KP, KD, DELAY, SAMPLES = 150.0, 4.0, 2, 300
BIAS = np.array([0.04, -0.03])  # rad, what the encoders add to the true angle


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> RobotModel:
    return load_arm(tmp_path_factory.mktemp("arm"))


@pytest.fixture(scope="module")
def biased(arm: RobotModel) -> Recording:
    """1.5 s of multi-sine position targets about 0, the gains stated in the log, a bias on each encoder."""
    cmd = multisine(SAMPLES, (0.6, 0.5), seed=3)
    q, qd = simulate_newton_log(
        arm, cmd, decimation=DEC, delay=DELAY, kp=KP, kd=KD, log_dt=LOG_DT, bias=BIAS, **TRUTH
    )
    return robot_recording(arm, cmd, q, qd, log_dt=LOG_DT, kp=KP, kd=KD)


def test_name_groups_and_the_default_axes(arm: RobotModel, biased: Recording) -> None:
    """Legs' joints that share a name after their first token form groups; the arm's do not, so its axes are
    gains (the log states them), bias and window, each starting from its simplest entry."""
    names = [f"{leg}_{p}_joint" for leg in ("FL", "FR", "RL") for p in ("hip", "calf")]
    groups = name_groups(names)
    assert groups is not None and set(groups) == {"hip", "calf"}
    assert groups["calf"] == "FL_calf_joint|FR_calf_joint|RL_calf_joint"
    assert name_groups(["yaw", "pitch"]) is None
    axes = candidate_axes(biased, arm, RobotFitOptions(decimation=DEC))
    assert [[c.name for c in a] for a in axes] == [
        ["gains given", "gains fitted"],
        ["bias off", "bias within ±0.05 rad", "bias on"],  # simplest first
        ["window 0.5 s"],  # 1 s does not fit in the inner split's 0.6 s of training (3/7 of 1.05 s validates)
    ]
    assert axes[0][1].fit_gains and axes[0][1].changes == {"kp": None, "kd": None}
    assert axes[1][1].changes == {"fit_bias": True, "bias_limit": 0.05}
    assert axes[0][1].margin == GAINS_MARGIN and all(c.margin == BIAS_MARGIN for c in axes[1][1:])
    assert [c.ordered for c in axes[1]] == [False, True, False]  # a bounded bias that loses ends the axis
    assert all(c.on_training for a in axes[:2] for c in a) and not axes[2][0].on_training
    short = candidate_axes(biased, arm, RobotFitOptions(decimation=DEC, window_s=0.1))[-1]
    assert [c.name for c in short] == ["window 0.1 s", "window 0.2 s", "window 0.4 s"]
    assert [c.ordered for c in short] == [False, True, True]
    assert all(c.margin == 0.0 for c in short[1:])  # a longer window is no richer model: the lower RMSE wins
    capped = candidate_axes(biased, arm, RobotFitOptions(decimation=DEC, bias_limit=0.02))[1]
    assert [c.name for c in capped] == ["bias off", "bias within ±0.02 rad", "bias on"]
    assert capped[2].changes == {"fit_bias": True, "bias_limit": None}
    # a bias turned off names a configuration: the selection holds it, the gains axis stays
    held = candidate_axes(biased, arm, RobotFitOptions(decimation=DEC, bias_limit=0.02, fit_bias=False))
    assert [[c.name for c in a] for a in held[:2]] == [["gains given", "gains fitted"], ["bias off"]]
    assert held[1][0].changes == {"fit_bias": False} and held[1][0].on_training


def test_bias_limit_caps_every_bias_and_flags_the_one_it_holds(arm: RobotModel, biased: Recording) -> None:
    """The pitch encoder reads 0.03 rad off; capped at 0.01 rad, its bias ends at the cap, flagged at bound, and
    no joint's bias passes the cap. A cap outside 0.001..0.3 rad is refused."""
    opts = RobotFitOptions(decimation=DEC, max_iterations=2, delay=DELAY, bias_limit=0.01)
    res = fit_robot(biased, arm, opts)
    assert all(abs(b) <= 0.01 + 1e-9 for b in res.encoder_bias.values()), res.encoder_bias
    at = {e.term: e for e in res.bounds.at_bound}
    assert at["pitch.bias"].bound == "lower" and at["pitch.bias"].limit == pytest.approx(0.01), at
    with pytest.raises(RobotError, match="bias_limit"):
        fit_robot(biased, arm, dataclasses.replace(opts, bias_limit=0.5))


def test_training_part_is_the_fit_s_own(biased: Recording, arm: RobotModel) -> None:
    """The selection sees the samples fit_robot trains on, no later one."""
    part, how = training_part(biased, arm, RobotFitOptions(decimation=DEC, validation_fraction=0.4))
    seg = biased.segments[0]
    assert part.segments[0].n == round(seg.n * 0.6) and how.startswith("samples 0–")
    np.testing.assert_array_equal(part.segments[0].q, seg.q[: part.segments[0].n])
    with pytest.raises(RobotError, match="inner_fraction"):
        select_robot_fit(biased, arm, RobotFitOptions(decimation=DEC), inner_fraction=0.9)
    # the inner validation is as long as the real one, within 0.3..0.6 of the training part
    assert inner_share(biased, RobotFitOptions(validation_fraction=0.3)) == pytest.approx(3 / 7)
    assert inner_share(biased, RobotFitOptions(validation_fraction=0.1)) == 0.3
    assert inner_share(biased, RobotFitOptions(validation_fraction=0.5)) == 0.6


def test_selection_prefers_the_bias_the_log_has_and_never_reads_the_validation_part(
    arm: RobotModel, biased: Recording
) -> None:
    """Bias off starts (the options as given), bias on must win on the inner split, and the refit's held-out
    error is the chosen candidate's class. The same selection on a log whose validation part is replaced by
    other motion gives the same candidates' figures, bit for bit: only the training part chose. Each candidate's
    fit reports its own progress under its name (the live chart draws each as its curve), the refit under none."""
    said: list[str] = []
    opts = RobotFitOptions(
        decimation=DEC, fit_bias=False, max_iterations=2, delay=DELAY, progress=said.append
    )
    axes = [[Candidate("bias off"), Candidate("bias on", {"fit_bias": True})]]
    res = select_robot_fit(biased, arm, opts, inner_iterations=2, axes=axes)
    sel = res.selection
    refit = next(i for i, m in enumerate(said) if m.startswith("select: chosen bias on")) + 1
    for name in ("bias off", "bias on"):
        inner = [m for m in said[:refit] if m.startswith(f"select, inner split: {name}: ")]
        assert any("training RMSE" in m for m in inner), said
    assert said[refit:] and not any(m.startswith("select") for m in said[refit:]), said
    assert any("training RMSE" in m for m in said[refit:]), said
    opts = dataclasses.replace(opts, progress=None)
    by = {c["name"]: c for c in sel["candidates"]}
    assert set(by) == {"bias off", "bias on"} and sel["chosen"] == "bias on", sel
    assert by["bias on"]["inner_validation_rmse"] < 0.5 * by["bias off"]["inner_validation_rmse"], by
    assert set(by["bias on"]["inner_validation_per_joint_rmse"]) == set(arm.joint_names)
    # the refit on the whole training part finds the pitch's bias (gravity shows it; the yaw's PD hides its own)
    assert res.encoder_bias["pitch"] == pytest.approx(BIAS[1], abs=5e-3), res.encoder_bias
    assert res.validation.rmse < by["bias off"]["inner_validation_rmse"]
    seg = biased.segments[0]
    split = round(seg.n * 0.7)
    other = seg.q.copy()
    other[split:] = other[split:][::-1] + 0.2  # the validation part, another motion entirely
    changed = dataclasses.replace(biased, segments=[dataclasses.replace(seg, q=other)])
    again = select_robot_fit(changed, arm, opts, inner_iterations=2, axes=axes).selection
    assert [c["inner_validation_rmse"] for c in again["candidates"]] == [
        c["inner_validation_rmse"] for c in sel["candidates"]
    ]


def test_an_ordered_axis_stops_at_its_first_step_that_loses(arm: RobotModel, biased: Recording) -> None:
    """Along an ordered axis the next step is tried only while the one before won: bias off loses on a biased
    log, so the step after it is never fitted."""
    opts = RobotFitOptions(decimation=DEC, max_iterations=2, delay=DELAY)
    axes = [
        [
            Candidate("bias on"),
            Candidate("bias off", {"fit_bias": False}, ordered=True),
            Candidate("bias on, capped", {"bias_limit": 0.1}, ordered=True),
        ]
    ]
    sel = select_robot_fit(biased, arm, opts, inner_iterations=2, axes=axes).selection
    assert [c["name"] for c in sel["candidates"]] == ["bias on", "bias off"] and sel["chosen"] == "bias on", (
        sel
    )


def _with_kp(rec: Recording, kp: float) -> Recording:
    """The same log stating another kp."""
    return dataclasses.replace(
        rec, segments=[dataclasses.replace(s, metadata={**s.metadata, "kp": kp}) for s in rec.segments]
    )


def test_the_teacher_s_distance_is_the_replays_own(arm: RobotModel, biased: Recording) -> None:
    """teacher_distance replays each fit and the teacher (at twice the physics rate) on the training commands
    played faster: a fit with the log's true gains lies near a teacher fitted on the same log, one fitted with a
    kp 40 % low five times further or more, at the log's own pace and 3 × faster."""
    opts = RobotFitOptions(decimation=DEC, max_iterations=2, delay=DELAY)
    train = training_part(biased, arm, opts)[0]
    true_gains = fit_robot(biased, arm, opts)
    low = fit_robot(_with_kp(biased, 0.6 * KP), arm, opts)
    fine = dataclasses.replace(opts, decimation=DEC * TEACHER_FINE, delay=DELAY * TEACHER_FINE)
    teacher = fit_robot(biased, arm, fine)
    fits = {"true": true_gains, "low": low}
    at = {s: teacher_distance(train, arm, opts, fits, teacher, s) for s in (1, TEACHER_SPEED)}
    for d in at.values():
        assert 0 < d["true"] < min(5e-3, 0.2 * d["low"]), at
    assert at[1] != at[TEACHER_SPEED], at  # another playback, other replays


def test_the_gains_and_the_bias_are_decided_on_the_whole_training_part(
    arm: RobotModel, biased: Recording
) -> None:
    """Where no teacher can be fitted (it carries friction along the stroke, and the arm's joints have no limits
    to run it between), the training part decides by the rule the teacher replaces, and says why. The Newton log
    stating its true gains keeps them (the fitted ones do not buy GAINS_MARGIN) and keeps the
    bias its encoders have (its fit tracks the training part's last share far better replayed free, and its
    training RMSE is far lower); the same log stating a kp 40 % low gets fitted gains, which lower its training
    error by more than GAINS_MARGIN. The selection states the figures, and its inner split tries no other gains
    or bias."""
    opts = RobotFitOptions(decimation=DEC, max_iterations=6, delay=DELAY)
    gains_axis, bias_axis = candidate_axes(biased, arm, opts)[:2]
    kept, row = training_choice(biased, arm, opts, gains_axis, bias_axis)
    gains, bias = row["gains_training_rmse_with_bias"], row["bias_training_rmse"]
    assert [c.name for c in kept] == ["gains given", "bias within ±0.05 rad"], row
    assert "rule" not in row and "have none in the model" in row["teacher_failed"], row
    assert gains["gains given"] < 1e-4 < gains["gains fitted"], row
    assert bias["bias within ±0.05 rad"] < 0.1 * bias["bias off"] and row["delay_steps"] == DELAY, row
    # off against bounded by each fit replayed free over the training part's last share: the bias wins there too
    late = row["bias_late_rmse"]
    assert set(late) == {"bias off", "bias within ±0.05 rad"}, row
    assert late["bias within ±0.05 rad"] < 0.1 * late["bias off"], row
    # that replay is the fit's own validation replay of the span: a fit on the training part validated on its
    # last LATE_SHARE (or another share asked for) states the same figure
    for share in (LATE_SHARE, 0.2):
        own = fit_robot(
            training_part(biased, arm, opts)[0], arm, dataclasses.replace(opts, validation_fraction=share)
        )
        late_own = late_rmse(biased, arm, opts, {"own": own}, share)["own"]
        assert late_own == pytest.approx(own.validation.rmse, rel=1e-6), share
    wrong = _with_kp(biased, 0.6 * KP)
    kept, row = training_choice(wrong, arm, opts, gains_axis, bias_axis)
    gains = row["gains_training_rmse_with_bias"]
    assert (
        kept[0].name == "gains fitted" and gains["gains fitted"] < (1 - GAINS_MARGIN) * gains["gains given"]
    ), row
    said: list[str] = []
    sel = select_robot_fit(
        wrong, arm, dataclasses.replace(opts, progress=said.append), inner_iterations=2
    ).selection
    assert any(m.startswith("select: gains fitted, bias within ±0.05 rad: ") for m in said), said
    assert sel["training_choice"] == row and sel["chosen"].startswith(", ".join(row["kept"])), sel
    assert sel["protocol"].startswith("the gains and the bias first, on the whole training part"), sel[
        "protocol"
    ]
    assert sel["candidates"] == [], sel["candidates"]  # one window fits: nothing is left for the inner split


def test_a_log_without_gains_has_its_bias_decided_on_the_training_part_alone(
    arm: RobotModel, biased: Recording
) -> None:
    """Where neither the log nor the options state gains there is no gains axis: the bias alone is decided on
    the whole training part (bounded first, then off at its delay; the gains are guessed, so no free bias, which
    would trade with them), and the protocol says so."""
    seg = biased.segments[0]
    meta = {k: v for k, v in seg.metadata.items() if k not in ("kp", "kd")}
    bare = dataclasses.replace(biased, segments=[dataclasses.replace(seg, metadata=meta)])
    opts = RobotFitOptions(decimation=DEC, max_iterations=2, delay=DELAY)
    axes = candidate_axes(bare, arm, opts)
    assert [a[0].name for a in axes] == ["bias off", "window 0.5 s"], axes
    sel = select_robot_fit(bare, arm, opts, inner_iterations=2).selection
    tc = sel["training_choice"]
    assert "gains_training_rmse_with_bias" not in tc and len(tc["kept"]) == 1, tc
    off, bounded, free = (c.name for c in axes[0])
    table = tc["bias_training_rmse"]
    assert {off, bounded} <= set(table), tc
    assert free not in table, tc  # a free bias is never fitted over guessed gains
    assert sel["protocol"].startswith("the bias first, on the whole training part"), sel["protocol"]
    assert sel["chosen"].startswith(tc["kept"][0]), sel


def test_the_refit_takes_the_step_above_a_teacher_delay_between_two_of_the_fits_steps() -> None:
    """A teacher delay between two of the fit's steps (odd on its grid, TEACHER_FINE × finer) gives the refit the
    step above; one on the fit's grid, a delay given, or a choice no teacher made leave the refit's scan alone."""
    taught = {"rule": "teacher", "teacher": {"delay_steps": 2 * TEACHER_FINE + 1}}
    assert TEACHER_FINE == 2
    assert delay_from_teacher(taught, RobotFitOptions()) == 3
    assert delay_from_teacher({"rule": "teacher", "teacher": {"delay_steps": 1}}, RobotFitOptions()) == 1
    assert delay_from_teacher({"rule": "teacher", "teacher": {"delay_steps": 4}}, RobotFitOptions()) is None
    assert delay_from_teacher(taught, RobotFitOptions(delay=1)) is None
    assert delay_from_teacher({"kept": ["gains given", "bias off"]}, RobotFitOptions()) is None
    assert delay_from_teacher(None, RobotFitOptions()) is None
