"""The default fit's ladder (fitting/ladder.py): the rule on numbers, a climb on a log Newton made (ladder_judge
"training": judged on the inner split of its training part, the pick refitted and validated on the held-out part),
and the default climb (judged on the split it reports) on Rhoban's XL330 logs with every kp = 800 file held out."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import make_recording
from newton_sim import build, closed_loop

from actuator_sysid.cli import _request, build_parser, ladder_lines
from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.fitting.fit import FitRequest, fit_result, nests
from actuator_sysid.fitting.ladder import (
    DELAY,
    INNER_ON,
    MIN_GAIN,
    NATIVE,
    Rung,
    choose,
    every_rung,
    first_rungs,
    friction_rungs,
    nest_chain,
)
from actuator_sysid.fitting.request import FitRequestError, check_fields
from actuator_sysid.fitting.result import FitResult
from actuator_sysid.models.families import FAMILIES

DT = 0.005
MASS, COM, I_COM = 1.0, 0.25, 1e-4
TRUTH = {
    "stiffness": 25.0,
    "damping": 0.6,
    "saturation_effort": 7.0,
    "actuator_velocity_limit": 9.0,
    "actuator_effort_limit": 4.5,
    "armature": 0.015,
    "friction": 0.1,
    "viscous_friction": 0.05,
}
DELAY_STEPS = 4
NOISE_Q = 2e-3  # rad: the log's encoder noise, a floor no richer rung can buy its margin under
QUICK = {"generations": 2, "population": 8, "refine_iterations": 12, "seed": 0}


# --- the rule alone ---


def test_a_rung_is_kept_only_when_it_buys_the_stated_margin() -> None:
    rungs = [*first_rungs(), Rung("friction", "a"), Rung("friction", "b"), Rung("friction", "c")]
    under = 1 - MIN_GAIN / 2  # a rung that buys half the margin
    walk = choose(zip(rungs, [0.10, 0.10 * under, 0.09, 0.09 * under, 0.05], strict=True))
    assert [o.kept for o in walk.outcomes] == [True, False, True, False, True]
    assert walk.kept == "c" and walk.kept_error == 0.05
    # each rung is measured against the model kept when it came, not against the rung before it
    assert [o.against for o in walk.outcomes] == [None, NATIVE, NATIVE, "a", "a"]
    assert walk.outcomes[2].bought == pytest.approx(0.1)
    assert walk.outcomes[1].bought == pytest.approx(MIN_GAIN / 2)
    # a worse rung buys a negative share and is not kept; the margin is inclusive
    assert choose([(rungs[0], 0.1), (rungs[1], 0.2)]).kept == NATIVE
    assert choose([(rungs[0], 1.0), (rungs[1], 1.0 - MIN_GAIN)]).kept == DELAY


def test_unfitted_or_non_finite_rungs_are_skipped_and_say_why() -> None:
    walk = choose([(first_rungs()[0], 0.1), (first_rungs()[1], None), (Rung("friction", "x"), math.nan)])
    assert walk.kept == NATIVE
    assert [o.kept for o in walk.outcomes] == [True, False, False]
    assert walk.outcomes[1].why == "no finite error"
    # a perfect kept model: nothing is left to buy, the next rung is not kept
    assert choose([(first_rungs()[0], 0.0), (first_rungs()[1], 0.0)]).kept == NATIVE


def test_each_rung_nests_the_one_it_climbs_from() -> None:
    assert nests(FAMILIES[NATIVE], FAMILIES[DELAY])
    for base in (NATIVE, DELAY):
        rungs = friction_rungs(base)
        assert len(rungs) == 5, rungs  # BAM M2–M6 on the envelope, with and without the delay
        for rung in rungs:
            assert nests(FAMILIES[base], FAMILIES[rung.family]), (base, rung)
            assert FAMILIES[rung.family].delay == (base == DELAY)
        counts = [len(FAMILIES[r.family].params) for r in rungs]
        assert counts == sorted(counts)  # fewest parameters first
        # the richest rung nests every friction rung of its base
        assert all(nests(FAMILIES[r.family], FAMILIES[rungs[-1].family]) for r in rungs[:-1])
    names = [r.family for r in every_rung()]
    assert len(names) == len(set(names)) and names[:2] == [NATIVE, DELAY]


def test_the_request_tells_no_family_from_the_default() -> None:
    assert FitRequest().families == ["dcmotor"]  # the library and the API keep today's default
    assert FitRequest(families=["auto"]).families is None  # the ladder, spelled
    assert FitRequest.from_dict({"families": None}).families is None  # a stored ladder request
    assert FitRequest.from_dict({"models": ["pid"]}).families == ["pid"]
    parser = build_parser()
    args = parser.parse_args(["fit", "log.csv"])
    assert _request(args).families is None  # the CLI with no --families climbs
    assert _request(parser.parse_args(["fit", "log.csv", "--families", "dcmotor"])).families == ["dcmotor"]
    assert _request(parser.parse_args(["fit", "log.csv", "--families", "auto"])).families is None
    from actuator_sysid.service.schemas import FitCreate

    assert FitCreate(dataset_id="d").to_request().families == ["dcmotor"]  # the API's default is unchanged
    assert FitCreate(dataset_id="d", families=["auto"]).to_request().families is None  # it asks by name
    rec = make_recording()
    check_fields(rec, FitRequest(families=None))
    with pytest.raises(FitRequestError, match="give it alone"):
        check_fields(rec, FitRequest(families=["auto", "dcmotor"]))
    with pytest.raises(FitRequestError, match="families is empty"):
        check_fields(rec, FitRequest(families=[]))
    # the ladder's judge: the held-out split by default, the training part's inner split when asked
    assert FitRequest().ladder_judge == "held-out"
    assert (
        _request(parser.parse_args(["fit", "log.csv", "--ladder-judge", "training"])).ladder_judge
        == "training"
    )
    assert FitCreate(dataset_id="d", ladder_judge="training").to_request().ladder_judge == "training"
    with pytest.raises(FitRequestError, match="ladder_judge must be one of held-out, training"):
        check_fields(rec, FitRequest(families=None, ladder_judge="validation"))


# --- a climb on a log the real Newton 1.8 made (DC-motor clamp, 4-step command delay) ---


def _commands(k: int, n: int) -> np.ndarray:
    t = np.arange(n) * DT
    if k == 0:  # chirp
        return 1.2 * np.sin(2 * math.pi * (0.3 * t + 1.5 * t**2 / (2 * t[-1])))
    if k == 1:  # steps
        return np.repeat([0.0, 1.0, -0.8, 0.5, -1.2, 0.9], n // 6 + 1)[:n]
    return 0.8 * np.sin(2 * math.pi * 1.5 * t)


def _log(delay: int | None, segments: int = 3, samples: int = 400, seed: int = 0) -> Recording:
    """Segments of a pendulum driven by Newton's PD + ClampingDCMotor (+ delay), stepped by SolverMuJoCo."""
    rng = np.random.default_rng(seed)
    segs = []
    for k in range(segments):
        model, act, dof = build(
            MASS,
            COM,
            I_COM,
            joint={
                "armature": TRUTH["armature"],
                "friction": TRUTH["friction"],
                "damping": TRUTH["viscous_friction"],
            },
            drive="pd",
            drive_kwargs={"kp": TRUTH["stiffness"], "kd": TRUTH["damping"]},
            clamps=[
                (
                    "dc_motor",
                    {
                        "saturation_effort": TRUTH["saturation_effort"],
                        "velocity_limit": TRUTH["actuator_velocity_limit"],
                        "max_motor_effort": TRUTH["actuator_effort_limit"],
                    },
                )
            ],
            delay_steps=delay,
        )
        q_des = _commands(k, samples)
        run = closed_loop(model, act, dof, q_des, DT)
        z = np.zeros((samples, 1))
        q = run["q"] + rng.normal(0.0, NOISE_Q, samples)
        t = np.arange(samples) * DT + 10.0 * k
        segs.append(
            Segment(str(k), t, q=q[:, None], qd=run["qd"][:, None], q_des=q_des[:, None], qd_des=z, tau_ff=z)
        )
    return Recording([JointInfo("hinge", inertia=I_COM, mass=MASS, com_distance=COM)], segs)


@pytest.fixture(scope="module")
def climbed() -> FitResult:
    # five recordings: one held out, and of the four that train, the last judges the rungs (the inner split)
    return fit_result(
        _log(DELAY_STEPS, segments=5), FitRequest(families=None, ladder_judge="training", **QUICK)
    )


def test_the_climb_keeps_the_delay_and_what_it_adds_buys_nothing_held_out(climbed: FitResult) -> None:
    ladder = climbed.extra["ladder"]
    steps = ladder["joints"]["hinge"]["steps"]
    assert [s["family"] for s in steps[:2]] == [NATIVE, DELAY]
    path = [r.family for r in friction_rungs(DELAY)]
    assert [s["family"] for s in steps[2:7]] == path  # climbed from the delay
    assert steps[1]["kept"] and steps[1]["bought"] > 0.5  # the delay buys most of the error
    pick = ladder["joints"]["hinge"]["picked"]
    assert pick == climbed.joints["hinge"].best_model and pick in (DELAY, *path)
    assert ladder["judged_on"] == INNER_ON and ladder["min_gain"] == MIN_GAIN and not ladder["not_fitted"]
    assert ladder["inner_split"] == "the last 1 of the 4 training recordings, whole"
    assert ladder["held_out"] == climbed.split.method and climbed.split.validation == ["2"]
    # the pick and the rungs it nests from are refitted on the whole training part, validated on the held-out one
    models = climbed.joints["hinge"].models
    chain = nest_chain(pick, [NATIVE, DELAY, *path[: path.index(pick) if pick in path else 0]])
    assert set(models) == set(ladder["refitted"]) == set(chain) and chain[:2] == [NATIVE, DELAY]
    held = ladder["joints"]["hinge"]["held_out"]
    assert (
        held[pick]
        == ladder["joints"]["hinge"]["picked_held_out"]
        == models[pick].metrics.validation.position_mae
    )
    assert held[DELAY] < 0.5 * held[NATIVE]
    # the log has no friction a rung could add: whatever the inner split's noise kept buys nothing held out
    assert held[pick] <= 1.02 * held[DELAY], held
    fitted = climbed.joints["hinge"].best.params
    assert abs(fitted["delay"] - DELAY_STEPS) <= 1, fitted
    assert fitted["stiffness"] == pytest.approx(TRUTH["stiffness"], rel=0.05)
    assert models[DELAY].search["started_from"] == NATIVE  # the refit nests as the climb did
    for f in set(models) - {NATIVE, DELAY}:
        assert set(models[f].search["starts"]) - {"warm start"}, models[f].search["starts"]
    assert climbed.request["families"] is None  # stored as asked: a refit climbs again


def test_the_cli_says_what_each_rung_bought(climbed: FitResult) -> None:
    lines = ladder_lines(climbed)
    assert lines[0].startswith("ladder (no --families): ") and f"{MIN_GAIN:.0%}" in lines[0]
    assert any(f"delay ({DELAY})" in ln and "kept" in ln and "bought +" in ln for ln in lines)
    pick = climbed.joints["hinge"].best_model
    assert lines[-2].strip().startswith(f"hinge: picked {pick} ({INNER_ON} position MAE")
    assert lines[-1].strip().startswith("hinge: held out (") and "no choice saw this part" in lines[-1]
    again = FitResult.from_json(json.loads(json.dumps(climbed.to_json())))
    assert ladder_lines(again) == lines  # fit.json keeps the record
    assert ladder_lines(FitResult()) == []


def test_a_spent_budget_stops_the_climb_and_says_so() -> None:
    res = fit_result(_log(None, segments=2, samples=200), FitRequest(families=None, budget_s=0.1, **QUICK))
    ladder = res.extra["ladder"]
    assert res.joints["hinge"].best_model == NATIVE  # the first rung is always fitted
    assert DELAY in ladder["not_fitted"]
    assert any("not fitted: the time budget was spent" in n for n in ladder["notes"])


# --- acceptance: Rhoban's XL330 logs, every kp = 800 file held out ---

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "bam-xl330" / "processed"
# The named families on this split at the default request (seed 0), with the XL330's tabled kt as a prior,
# measured 2026-12-06 on the 2-core machine in one fit of the 13 families then registered: validation position MAE
# [rad] — the best: dcmotor_directional_load 0.0448 (0.0448 named alone); dcmotor_quadratic_load 0.0603,
# dcmotor_stribeck_load 0.0690, dcmotor_loadfric 0.0797, dcmotor_stribeck_delay 0.0915, dcmotor_delay 0.0942,
# dcmotor_stribeck 0.0943, dcmotor 0.0998, remotized_pd 0.1555, pid 0.1673, delayed_pd 0.1673, ideal_pd 0.1719,
# implicit 0.1726. The ladder fits the same families the same way where it climbs to them (its
# dcmotor_directional_load, the pick: 0.0448 with one BLAS thread as here, 0.0455 with two, as the named fit gives
# with two); the best of the ones it does not fit is pinned here.
NAMED_NOT_CLIMBED_BEST = 0.0603


@pytest.mark.slow
def test_the_xl330_pick_is_as_good_as_the_best_named_family() -> None:
    """The pick's quality; its time (the 60 s target on 2 cores) is measured by bench/family_ladder.py."""
    files = sorted(DATA.glob("*.json"))
    if not files:
        pytest.skip(f"the BAM XL330 logs are not here ({DATA.resolve()} has no *.json)")
    from actuator_sysid.datasets.readers import read_paths

    rec = read_paths(files)
    wall, cpu = time.perf_counter(), time.process_time()
    res = fit_result(rec, FitRequest(families=None, holdout="kp=800"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    jr = res.joints["xl330"]
    errors = {f: m.metrics.validation.position_mae for f, m in jr.models.items()}
    picked = errors[jr.best_model]
    print(
        f"ladder on XL330 (kp = 800 held out): {wall:.1f} s wall, {cpu:.1f} s CPU, load {os.getloadavg()[0]:.1f}"
    )
    print("\n".join(ladder_lines(res)))
    assert len(res.split.validation) == 4 and res.extra["ladder"]["judged_on"] == "validation"
    assert picked <= min(errors.values()) * (1 + 1e-9), errors  # as good as every family it fitted
    assert picked <= NAMED_NOT_CLIMBED_BEST, errors  # and every named family it did not fit
