"""The whole-robot fit's finite-difference Jacobians, each fitting/search.py's fd_jacobian: a variable's column
holds only the residual rows of the joints it can move, so variables that never move each other's joints share
one perturbed candidate (exact), and every candidate of a Jacobian goes in one batch of rollouts."""

from __future__ import annotations

import numpy as np

from ..search import fd_colors, fd_jacobian
from .plant import CoupledEvaluator, DecoupledEvaluator
from .problem import Problem


def coupled_rows(prob: Problem) -> list[np.ndarray]:
    """Per search variable, the joints whose coupled residuals it moves: every joint of each coupling component
    its parameters touch (joints in different components, e.g. two legs on a fixed base, never load each other)."""
    comps = prob.component
    return [np.flatnonzero(np.isin(comps, comps[idx])) for idx in prob.var_joints()]


def decoupled_rows(prob: Problem) -> list[np.ndarray]:
    """Per search variable, the joints whose decoupled residuals it moves: a group term only its group's joints
    (each joint rolls out alone); an encoder bias every joint of its coupling component (gravity at the true
    angle)."""
    comps = prob.component
    return [
        idx if not vn.endswith(".bias") else np.flatnonzero(np.isin(comps, comps[idx]))
        for vn, idx in zip(prob.var_names, prob.var_joints(), strict=True)
    ]


def fd_candidates(rows: list[np.ndarray]) -> int:
    """Candidates one Jacobian over these rows rolls out: the point and one per colour."""
    return 1 + len(fd_colors(rows))


def coupled_jacobian(
    prob: Problem, ev: CoupledEvaluator, x: np.ndarray, delay: int
) -> tuple[np.ndarray, np.ndarray]:
    """(Jacobian (R, d), residuals (R,)) of the coupled residuals at x (search units), in one batch: x and a
    forward step per colour."""
    r0, jm = fd_jacobian(
        lambda xs, _: ev.residuals(xs, np.full(len(xs), delay)),
        x,
        prob.steps(),
        prob.bounds()[1],
        rows=coupled_rows(prob),
    )
    return np.ascontiguousarray(jm), r0.reshape(-1)  # row-major: the trust region's sums follow memory order


def jacobian_and_initial_state_effect(
    prob: Problem, ev: CoupledEvaluator, x: np.ndarray, delay: int, h: float = 1e-3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """coupled_jacobian() at x, and (J, W, L, J): how each window's simulated positions move per radian of its
    measured initial position of each joint (a noisy input the fit takes as given; the intervals count its
    noise), from one coupled batch: x, its colour steps, and x from each joint's measured start moved by h."""
    j, effect = ev.q.shape[1], []

    def run(xs: np.ndarray, _: np.ndarray) -> np.ndarray:
        nc = xs.shape[0]
        q0 = np.repeat(ev.q[ev.starts][None], nc + j, axis=0)  # (candidates + J, W, J)
        q0[nc + np.arange(j), :, np.arange(j)] += h
        cand = np.concatenate([xs, np.repeat(x[None], j, axis=0)])
        sim = ev.simulate(cand, np.full(nc + j, delay), q0)
        effect.append((sim[nc:, :, 1:] - sim[:1, :, 1:]) / h)
        return ev.residuals_of(sim[:nc])

    r0, jm = fd_jacobian(run, x, prob.steps(), prob.bounds()[1], rows=coupled_rows(prob))
    return np.ascontiguousarray(jm), r0.reshape(-1), effect[0]


def decoupled_jacobian(
    dev: DecoupledEvaluator, x: np.ndarray, delays: np.ndarray, r0: np.ndarray
) -> np.ndarray:
    """(P, N, d) Jacobians of the decoupled residuals at x (P, d), one problem per row at its own delay, where the
    residuals are r0 (P, J, S): every problem's colour steps in one batch."""
    prob = dev.prob
    return fd_jacobian(
        lambda xs, k: dev.residuals(xs, delays[k]),
        x,
        prob.steps(),
        prob.bounds()[1],
        rows=decoupled_rows(prob),
        r0=r0,
    )[1]
