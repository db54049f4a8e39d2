"""The search's second-start rule (fitting/search.py `local_search` with a rival): a start whose least squares is
clearly worse than the other start's fit stops after a few iterations; a competitive one runs as it would alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from isaaclab_logs import TRUTH_DCMOTOR, make_recording

from actuator_sysid.fitting import search
from actuator_sysid.fitting.objective import LossScales
from actuator_sysid.fitting.space import SearchSpace
from actuator_sysid.fitting.warmstart import warm_start
from actuator_sysid.models.families import FAMILIES, Family
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch

LOADFRIC = FAMILIES["dcmotor_loadfric"]  # rich friction families are the ones that search from two starts
STRIBECK_DELAY = FAMILIES["dcmotor_stribeck_delay"]


Bench = tuple[RolloutEngine, LossScales, dict[str, float]]
Problem = tuple[RolloutEngine, LossScales, SearchSpace, np.ndarray, np.ndarray]


def _bench(noise_q: float) -> Bench:
    """The Isaac Lab DCMotor bench log (1 s windows, as a fit trains): its engine, loss scales and warm start."""
    rec = make_recording("dcmotor", noise_q=noise_q, seed=1)
    for s in rec.segments:
        s.tau = None
    batch = SegmentBatch.from_recording(rec, rec.joint_names, window=200)
    return RolloutEngine(batch), LossScales.from_batch(batch), warm_start(batch, 0)


def _problem(family: Family, bench: Bench) -> Problem:
    """The bench log with the family's space, its warm start, and the truth as a point of that space (every
    term the log lacks switched off)."""
    engine, scales, warm = bench
    space = SearchSpace.for_family(family)
    x_warm = np.array([warm[n] for n in space.names])
    truth = np.array([TRUTH_DCMOTOR.get(n, 0.0) for n in space.names])
    return engine, scales, space, x_warm, truth


def _rival(
    family: Family, engine: RolloutEngine, scales: LossScales, space: SearchSpace, x: np.ndarray
) -> search.SearchResult:
    """Another start's search that ended at x."""
    loss = float(np.sum(search.residual_fn(engine, family, space, scales)(x[None])[0] ** 2))
    return search.SearchResult([x], np.array([loss]))


@pytest.fixture(scope="module")
def noisy() -> Bench:
    """The bench log with 0.5 mrad of position noise, shared by the tests of a competitive start."""
    return _bench(5e-4)


@pytest.fixture(scope="module")
def noisy_loadfric(noisy: Bench) -> tuple[Problem, search.LocalSolve]:
    """The noisy log's loadfric problem and its warm start's solve without a rival, which the tests of a
    competitive start compare against."""
    problem = _problem(LOADFRIC, noisy)
    engine, scales, space, x_warm, _ = problem
    return problem, search.local_search(engine, LOADFRIC, space, scales, [x_warm])


def test_a_start_clearly_worse_than_the_rival_stops_after_a_few_iterations() -> None:
    """On the noise-free log the rival sits at the truth; the warm start's solve is far above it after
    ABANDON_ITERATIONS iterations, so it stops there at a fraction of the solve it makes alone."""
    engine, scales, space, x_warm, truth = _problem(LOADFRIC, _bench(0.0))
    alone = search.local_search(engine, LOADFRIC, space, scales, [x_warm])
    cut = search.local_search(
        engine, LOADFRIC, space, scales, [x_warm], rival=_rival(LOADFRIC, engine, scales, space, truth)
    )
    assert cut.abandoned and not alone.abandoned
    assert cut.after[0] < cut.before[0]  # it did descend, just not far enough
    d = int(np.sum(~space.integer))
    assert cut.evaluations <= 3 * search.ABANDON_ITERATIONS * (d + 2) < alone.evaluations / 2, (
        cut.evaluations,
        alone.evaluations,
    )


def test_a_competitive_start_runs_exactly_as_without_a_rival(
    noisy_loadfric: tuple[Problem, search.LocalSolve],
) -> None:
    """On a noisy log the warm start's solve ends near the rival (here: its own optimum) and is never stopped:
    the same point, loss and evaluations as without the rule."""
    (engine, scales, space, x_warm, _), alone = noisy_loadfric
    ruled = search.local_search(
        engine, LOADFRIC, space, scales, [x_warm], rival=search.SearchResult(alone.best, alone.after)
    )
    assert not ruled.abandoned
    np.testing.assert_array_equal(ruled.best[0], alone.best[0])
    assert ruled.after[0] == alone.after[0] and ruled.evaluations == alone.evaluations


def test_integers_do_not_decide_the_abandon(noisy: Bench) -> None:
    """A start whose delay is off looks clearly worse to least squares, which holds delays: it is judged at the
    rival's delay, goes on when that is competitive, and then solves from its own start as without a rival."""
    engine, scales, space, x_warm, truth = _problem(STRIBECK_DELAY, noisy)
    i = space.names.index("delay")
    x_off = x_warm.copy()
    x_off[i] = truth[i] + 3
    alone = search.local_search(engine, STRIBECK_DELAY, space, scales, [x_off])
    rival = _rival(STRIBECK_DELAY, engine, scales, space, truth)
    assert alone.after[0] > search.ABANDON_RATIO * rival.best_loss[0]  # at its own delay it is far above
    ruled = search.local_search(engine, STRIBECK_DELAY, space, scales, [x_off], rival=rival)
    assert not ruled.abandoned
    np.testing.assert_array_equal(ruled.best[0], alone.best[0])
    assert (
        ruled.after[0] == alone.after[0] and ruled.evaluations > alone.evaluations
    )  # the trial, then as alone


def test_abandoned_only_when_every_joint_gives_up(noisy_loadfric: tuple[Problem, search.LocalSolve]) -> None:
    """Two joints, one competitive: the start is not abandoned; the competitive joint's solve is as alone (the
    same log's solve on one joint, without a rival)."""
    (_, _, space, x_one, _), alone = noisy_loadfric
    rec = make_recording("dcmotor", noise_q=5e-4, seed=1)
    for s in rec.segments:
        s.tau = None
    rec.joints = [
        rec.joints[0],
        dataclasses.replace(rec.joints[0], name="twin"),
    ]  # the same log on a second joint
    for s in rec.segments:
        s.q, s.qd, s.q_des, s.qd_des, s.tau_ff = (
            np.hstack([a, a]) for a in (s.q, s.qd, s.q_des, s.qd_des, s.tau_ff)
        )
    batch = SegmentBatch.from_recording(rec, rec.joint_names, window=200)
    engine, scales = RolloutEngine(batch), LossScales.from_batch(batch)
    x_warm = [np.array([w[n] for n in space.names]) for w in (warm_start(batch, j) for j in range(2))]
    assert all(np.array_equal(x, x_one) for x in x_warm)  # each joint starts where the one-joint solve did
    # joint 0's rival is far below anything reachable, joint 1's is its own optimum
    ruled = search.local_search(
        engine,
        LOADFRIC,
        space,
        scales,
        x_warm,
        rival=search.SearchResult(
            [alone.best[0], alone.best[0]], np.array([1e-3 * alone.after[0], alone.after[0]])
        ),
    )
    assert not ruled.abandoned and ruled.after[0] > alone.after[0]
    np.testing.assert_array_equal(ruled.best[1], alone.best[0])
    assert ruled.after[1] == alone.after[0]


def test_the_one_finite_difference_jacobian_groups_variables_exactly() -> None:
    """fd_jacobian with `rows` (the residual rows each variable moves) perturbs variables of disjoint rows in one
    candidate: the same Jacobian as one variable at a time, in fewer candidates, at one point and at several;
    a step that would pass the upper bound is taken backwards."""
    from actuator_sysid.fitting.search import fd_colors, fd_jacobian

    a = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.2]])  # rows 0-1 move with x0, x1; rows 2-3 with x2, x3

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.concatenate([a[0] * x[:2] ** 2 + a[1] * x[:2], [np.sin(x[2]) + x[3] ** 3, x[2] * x[3]]])

    calls: list[int] = []

    def run(points: np.ndarray, _problem: np.ndarray) -> np.ndarray:
        calls.append(len(points))
        return np.stack([residuals(p) for p in points])

    x = np.array([0.3, -0.2, 0.7, 0.9])
    rows = [np.array([0, 1]), np.array([0, 1]), np.array([2, 3]), np.array([2, 3])]
    assert fd_colors(rows) == [[0, 2], [1, 3]]
    r, grouped = fd_jacobian(run, x, 1e-6, 0.9 + 5e-7, rows=rows)
    _, single = fd_jacobian(run, x, 1e-6, 0.9 + 5e-7)
    assert calls == [3, 5]  # x and two shared candidates, against x and one per variable
    assert np.allclose(r, residuals(x)) and np.allclose(grouped, single, atol=1e-9)
    exact = np.zeros((4, 4))
    exact[0, 0], exact[1, 0] = 2 * a[0, 0] * x[0] + a[1, 0], 0.0
    exact[1, 1] = 2 * a[0, 1] * x[1] + a[1, 1]
    exact[2, 2], exact[2, 3] = np.cos(x[2]), 3 * x[3] ** 2
    exact[3, 2], exact[3, 3] = x[3], x[2]
    assert np.allclose(grouped, exact, atol=1e-5)  # x3 at its bound: differenced backwards, still right
    many = np.stack([x, x + 0.1])
    rs, jac = fd_jacobian(run, many, 1e-6, 10.0, rows=rows)
    assert rs.shape == (2, 4) and jac.shape == (2, 4, 4)
    assert np.allclose(jac[1], fd_jacobian(run, many[1], 1e-6, 10.0)[1], atol=1e-9)
