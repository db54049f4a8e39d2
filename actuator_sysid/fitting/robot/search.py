"""The whole-robot search. Decoupled (the default): Levenberg–Marquardt on each joint's own rollout at every
candidate delay, each independent block (a leg on a fixed base) its own problem, a delay that fits worse than
its neighbour fitted again from the neighbour's point, the best delays rolled out coupled and refined by
output space mapping, coupled least squares when that stalls; of the lowest training loss's delay and the step
above it, the longer is kept when the loss cannot tell them apart. Coupled: trust-region least squares on
batched coupled rollouts, the delay scanned before and after. Both on fitting/search.py's solvers, with
jacobian.py's Jacobians."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..robot_judge import DELAY_TIE
from ..search import Tolerances, batched_lm, trust_region
from .jacobian import coupled_jacobian, coupled_rows, decoupled_jacobian, decoupled_rows, fd_candidates
from .options import RobotFitOptions
from .plant import CoupledEvaluator, DecoupledEvaluator, rms
from .problem import FD_STEP, Problem
from .start import scan_delay

LM_TOL = 1e-3  # the decoupled least squares stops a problem once its loss falls by less than this share
STEPS = (0.5, 1.0, 2.0)  # the coupled refinement tries these multiples of each space-mapping step
# delays within DELAY_TIE of the lowest training loss are not told apart by the training part: all are rolled out
# coupled, and of the lowest and the step above it, the longer is kept when it is within it (the verdict says so)
DELAY_NOTE = (
    "the lowest coupled training loss after fitting at each delay, or one step longer within "
    f"{DELAY_TIE * 100:g} % of it"
)
SLOW = 0.5  # a refinement round that lowers the coupled loss by less than half hands over to coupled least squares
# a few costly Jacobians: loose tolerances, in the search's own units (log10 and centiradians, all O(1))
COUPLED_TOLERANCES = Tolerances(xtol=1e-6, ftol=1e-6, gtol=1e-8, tr_solver=None, unit_cube=False)
MIN_GAIN = 0.005  # no coupled refinement round when a Gauss-Newton step would lower the coupled RMS less
# a delay's fit started again from its neighbour's point: a few LM steps show whether it moves
RESTART_ITERATIONS = 4


class BudgetSpent(Exception):
    """Raised inside the least-squares residual when the time budget is spent; the best point so far stands."""


def lm_blocks(prob: Problem) -> list[tuple[np.ndarray, np.ndarray]]:
    """The decoupled problem's independent blocks, each (its variables, its joints): variables are joined through
    the joints whose decoupled residuals they move (decoupled_rows), so per joint on a fixed base a block is one
    leg, and groups that span the legs make one block of the whole robot."""
    rows = decoupled_rows(prob)
    parent = list(range(len(prob.names)))

    def root(j: int) -> int:
        while parent[j] != j:
            parent[j] = parent[parent[j]]
            j = parent[j]
        return j

    for r in rows:
        for j in r[1:]:
            parent[root(int(j))] = root(int(r[0]))
    roots = np.array([root(j) for j in range(len(prob.names))])
    of_var = np.array([roots[int(r[0])] for r in rows])
    return [(np.flatnonzero(of_var == c), np.flatnonzero(roots == c)) for c in np.unique(of_var)]


def _decoupled_lm(
    dev: DecoupledEvaluator,
    xs: np.ndarray,
    delays: np.ndarray,
    iterations: int,
    offset: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Levenberg–Marquardt (fitting/search.py batched_lm) on the decoupled residuals (+ `offset`, (P, N)) of each
    row of xs at its own delay, one problem per row and independent block (lm_blocks: its own damping, steps and
    stop, as a leg's joints never load another leg's), with coloured forward-difference Jacobians
    (decoupled_jacobian); the blocks of one row share each rollout batch. Returns the points, their losses (RMS
    over every joint) and the number of Jacobian batches."""
    prob = dev.prob
    npb, d, nj = xs.shape[0], xs.shape[1], len(prob.names)
    off = np.zeros((npb, nj, 1)) if offset is None else offset.reshape(npb, nj, -1)
    blocks = lm_blocks(prob)
    nb = len(blocks)
    dmax, jmax = max(v.size for v, _ in blocks), max(j.size for _, j in blocks)
    lo, hi = prob.bounds()
    span = np.maximum(hi - lo, 1e-12)
    # each block's variables in their unit cube, so that every problem has the same bounds
    u0 = np.zeros((npb * nb, dmax))
    for b, (v, _) in enumerate(blocks):
        u0[b::nb, : v.size] = (xs[:, v] - lo[v]) / span[v]

    def merged(u: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One candidate per row of xs and trial: (candidates (C, d), their row of xs, each problem's candidate)."""
        count: dict[int, int] = {}
        keys: dict[tuple[int, int], int] = {}
        cand_of = np.empty(rows.size, int)
        for i, k in enumerate(rows.tolist()):
            slot = count.get(k, 0)
            count[k] = slot + 1
            cand_of[i] = keys.setdefault((k // nb, slot), len(keys))
        owner = np.array([pp for pp, _ in keys])
        x = xs[owner].copy()
        for i, k in enumerate(rows.tolist()):
            v = blocks[k % nb][0]
            x[cand_of[i], v] = lo[v] + u[i, : v.size] * span[v]
        return x, owner, cand_of

    def residuals(u: np.ndarray, rows: np.ndarray) -> np.ndarray:
        x, owner, cand_of = merged(u, rows)
        r = dev.residuals(x, delays[owner])
        out = np.zeros((rows.size, jmax, r.shape[2]))
        for i, k in enumerate(rows.tolist()):
            j = blocks[k % nb][1]
            out[i, : j.size] = r[cand_of[i], j] + off[k // nb, j]
        return out.reshape(rows.size, -1)

    def jacobian(u: np.ndarray, rows: np.ndarray, r: np.ndarray) -> np.ndarray:
        # the offset is constant in x: the Jacobian is the decoupled residuals' own, differenced without it
        x, owner, cand_of = merged(u, rows)
        rr = r.reshape(rows.size, jmax, -1)
        r0 = np.zeros((x.shape[0], nj, rr.shape[2]))
        for i, k in enumerate(rows.tolist()):
            j = blocks[k % nb][1]
            r0[cand_of[i], j] = rr[i, : j.size] - off[k // nb, j]
        jm = decoupled_jacobian(dev, x, delays[owner], r0).reshape(x.shape[0], nj, rr.shape[2], d)
        out = np.zeros((rows.size, jmax, rr.shape[2], dmax))
        for i, k in enumerate(rows.tolist()):
            v, j = blocks[k % nb]
            out[i, : j.size, :, : v.size] = jm[cand_of[i]][j][:, :, v] * span[v]
        return out.reshape(rows.size, -1, dmax)

    u, loss, jacobians = batched_lm(
        residuals, jacobian, u0, np.zeros(dmax), np.ones(dmax), iterations, None, LM_TOL
    )
    x = xs.copy()
    for b, (v, _) in enumerate(blocks):
        x[:, v] = lo[v] + u[b::nb, : v.size] * span[v]
    total = np.sqrt((loss.reshape(npb, nb) ** 2).sum(axis=1) * jmax / nj)  # padded rows are zeros
    return x, total, jacobians


def _continued(
    dev: DecoupledEvaluator, xs: np.ndarray, loss: np.ndarray, delays: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """A delay's fit started again from its better neighbour's point, the lower of the two kept: first beside the
    lowest delay and at each delay that fits worse than both its neighbours, then beside each point that moved,
    while one moves. The loss varies smoothly with the delay, so a delay that fits far worse than its neighbour
    stopped short of its own optimum. delays ascending, one step apart."""
    xs, loss, total = xs.copy(), loss.copy(), 0
    step = np.arange(delays.size)

    def around(loss: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each delay's better neighbour, and its better and worse neighbour's losses (inf past either end)."""
        pad = np.concatenate([[np.inf], loss, [np.inf]])
        below, above = pad[:-2], pad[2:]
        return np.where(below < above, step - 1, step + 1), np.minimum(below, above), np.maximum(below, above)

    nb, _, worse = around(loss)
    moved = np.zeros(delays.size, bool)  # tried from first: the lowest delay, and beside a delay above both
    moved[[int(np.argmin(loss)), *nb[loss > worse]]] = True
    for _ in range(delays.size - 1):
        nb, better_nb, _ = around(loss)
        redo = np.flatnonzero((loss > better_nb) & moved[nb])
        if redo.size == 0:
            break
        x2, l2, nj = _decoupled_lm(dev, xs[nb[redo]], delays[redo], RESTART_ITERATIONS)
        total += nj
        better = l2 < loss[redo] * (1.0 - LM_TOL)
        moved[:] = False
        moved[redo[better]] = True
        xs[redo[better]], loss[redo[better]] = x2[better], l2[better]
    return xs, loss, total


def _predicted_gain(jm: np.ndarray, r: np.ndarray) -> np.ndarray:
    """(P,) the share by which a Gauss-Newton step on Jacobians jm (P, N, d) would lower the RMS of r (P, N):
    1 − |r − P r| / |r|, P the projection onto each Jacobian's range."""
    out = np.zeros(r.shape[0])
    for k in range(r.shape[0]):
        step = np.linalg.lstsq(jm[k], r[k], rcond=None)[0]
        out[k] = 1.0 - np.linalg.norm(r[k] - jm[k] @ step) / max(float(np.linalg.norm(r[k])), 1e-300)
    return out


def _refine_coupled(
    ev: CoupledEvaluator,
    dev: DecoupledEvaluator,
    xs: np.ndarray,
    delays: np.ndarray,
    rc: np.ndarray,
    rounds: int,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, dict[int, float], dict[str, int]]:
    """Coupled refinement at a few delays at once (output space mapping): each round fits the decoupled model
    plus the coupled rollouts' own mismatch at the current point, then one coupled batch tries the full and the
    half step of every problem; a problem keeps its better point. rc: coupled residuals at xs (P, J, S).
    Returns the best point, its delay, the final coupled training RMSE at each delay, and the statistics."""
    p = xs.shape[0]
    x, r = xs.copy(), rc.copy()
    loss = np.sqrt(np.mean(r**2, axis=(1, 2)))
    stats = {"coupled_batches": 0, "decoupled_jacobians": 0, "rounds": 0, "stalled": 0}
    final: dict[int, float] = {}
    for _ in range(rounds):
        rd = dev.residuals(x, delays)
        delta = r - rd
        gain = _predicted_gain(decoupled_jacobian(dev, x, delays, rd), r.reshape(p, -1))
        stats["decoupled_jacobians"] += 1
        say(
            "coupled refinement: a Gauss-Newton step on the decoupled Jacobian would lower the coupled training "
            "RMSE by " + ", ".join(f"{g_:.2%}" for g_ in gain)
        )
        if spent() or np.all(gain < MIN_GAIN):  # the decoupled optimum is the coupled one, to that share
            break
        xn, _, nj = _decoupled_lm(dev, x, delays, 4, offset=delta.reshape(p, -1))
        stats["decoupled_jacobians"] += nj
        lo, hi = dev.prob.bounds()
        cand = np.concatenate(
            [np.clip(x + a * (xn - x), lo, hi) for a in STEPS]
        )  # half, full and twice the step
        rt = ev.residuals(cand, np.tile(delays, len(STEPS)))
        stats["coupled_batches"] += 1
        stats["rounds"] += 1
        lt = rms(rt).reshape(len(STEPS), p)
        before = loss.copy()
        for k in range(p):
            b = int(np.argmin(lt[:, k]))
            if lt[b, k] < loss[k]:
                x[k], loss[k], r[k] = cand[b * p + k], lt[b, k], rt[b * p + k]
        say(
            "coupled refinement: training RMSE "
            + ", ".join(f"delay {int(d)}: {lv:.6f} rad" for d, lv in zip(delays, loss, strict=True))
        )
        if np.all(loss > SLOW * before):  # the decoupled model no longer leads the coupled loss down fast
            stats["stalled"] = 1
            break
        if p > 1 and loss.max() > 2.0 * loss.min():  # a delay that cannot win stops costing rollouts
            keep = np.arange(p) != int(np.argmax(loss))
            final.update({int(d): float(v) for d, v in zip(delays[~keep], loss[~keep], strict=True)})
            x, r, loss, delays, p = x[keep], r[keep], loss[keep], delays[keep], p - 1
    final.update({int(d): float(v) for d, v in zip(delays, loss, strict=True)})
    b = _pick(delays, loss)
    return x[b], int(delays[b]), final, stats


def _pick(delays: np.ndarray, loss: np.ndarray) -> int:
    """The problem with the lowest loss, or the one a delay step longer when its loss is within DELAY_TIE of it.
    A delay between two grid steps fits about as well at either neighbour; damping and armature add lag but
    cannot take it away, so a delay too short is made up by them on motion slower than use while one too long is
    not, and their lag does not grow with frequency as a delay's does: of the two, the longer extrapolates."""
    b = int(np.argmin(loss))
    up = np.flatnonzero(delays == delays[b] + 1)
    return int(up[0]) if up.size and loss[up[0]] <= (1.0 + DELAY_TIE) * loss[b] else b


def search_decoupled(
    ev: CoupledEvaluator,
    dev: DecoupledEvaluator,
    x0: np.ndarray,
    delay: int,
    opts: RobotFitOptions,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, dict[str, Any]]:
    """The fast path: a decoupled least-squares fit at every candidate delay (one lockstep batch; x0 one start,
    or one per delay; _continued where a delay fits worse than its neighbour), the two best by that training
    loss (and any within DELAY_TIE of the best) rolled out coupled, the two best by the coupled training loss
    and the one _pick would keep refined coupled (while a Gauss-Newton step on the decoupled Jacobian promises
    a gain; coupled least squares for the rest of max_iterations when that stalls); _pick keeps the lowest
    coupled loss's delay, or one step longer within DELAY_TIE of it.
    Returns the point, the delay and the search statistics."""
    delays = np.array([delay]) if opts.delay is not None else np.arange(opts.max_delay + 1)
    x0 = (
        np.broadcast_to(x0, (delays.size, x0.shape[-1])) if x0.ndim == 1 or x0.shape[0] != delays.size else x0
    )
    xs, dloss, nj = _decoupled_lm(dev, np.array(x0), delays, 12)
    xs, dloss, nj2 = _continued(dev, xs, dloss, delays)
    nj += nj2
    say(
        "decoupled fit per delay: "
        + ", ".join(f"{int(d)}: {v:.6f}" for d, v in zip(delays, dloss, strict=True))
    )
    order = np.argsort(dloss)  # the decoupled loss ranks the delays; those it cannot tell apart go on coupled
    top = order[: max(2, int(np.sum(dloss <= (1.0 + DELAY_TIE) * dloss.min())))]
    rc = ev.residuals(xs[top], delays[top])
    closs = rms(rc)
    say(
        "coupled training RMSE at the decoupled fits: "
        + ", ".join(f"delay {int(delays[k])}: {v:.6f} rad" for k, v in zip(top, closs, strict=True))
    )
    best2 = np.argsort(closs)[:2]
    longest = _pick(delays[top], closs)  # the delay the rule would keep now goes on to be refined too
    keep = np.array([*best2, *([longest] if longest not in best2 else [])], int)
    x, best, final, st = _refine_coupled(
        ev, dev, xs[top][keep], delays[top][keep], rc[keep], max(1, opts.max_iterations), spent, say
    )
    left = opts.max_iterations - st["rounds"]
    lsq: dict[str, Any] = {"jacobians": 0, "stopped_on": "converged"}
    if st["stalled"] and left > 0 and not spent():  # the last stretch by coupled least squares
        say(f"coupled least squares at delay {best} (the decoupled model no longer helps)")
        x, lsq = _least_squares(dev.prob, ev, x, best, left, spent, say)
        final[best] = float(lsq["rmse"])
    stats: dict[str, Any] = {
        "search": "decoupled (each joint's own rollout along the measured motion), then coupled refinement",
        "jacobians": lsq["jacobians"],
        "decoupled_jacobians": nj + st["decoupled_jacobians"],
        "coupled_batches": 1 + st["coupled_batches"],
        "refinement_rounds": st["rounds"],
        "fd_candidates_per_jacobian": fd_candidates(decoupled_rows(dev.prob)),
        "stopped_on": "budget" if spent() else lsq["stopped_on"],
        "initial_rmse": float(closs[keep[0]]),
        "rmse": final[best],
        "delay_decoupled_rmse": {str(int(d)): float(v) for d, v in zip(delays, dloss, strict=True)},
        "delay_coupled_rmse": {str(d): v for d, v in final.items()},
        "_decoupled_x": xs[int(np.flatnonzero(delays == best)[0])],
    }  # the report's decoupled fit (popped)
    return x, best, stats


def _least_squares(
    prob: Problem,
    ev: CoupledEvaluator,
    x0: np.ndarray,
    delay: int,
    max_nfev: int,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, dict[str, Any]]:
    """Trust-region least squares (fitting/search.py) from x0 with a coloured forward-difference Jacobian (coupled_jacobian); the
    best point evaluated and stats."""
    cache: dict[bytes, np.ndarray] = {}
    best: dict[str, Any] = {"x": x0.copy(), "loss": math.inf}
    stats: dict[str, Any] = {
        "jacobians": 0,
        "fd_candidates_per_jacobian": fd_candidates(coupled_rows(prob)),
        "stopped_on": "iterations",
    }

    def remember(x: np.ndarray, r: np.ndarray) -> None:
        cache[x.tobytes()] = r
        lv = float(np.sqrt(np.mean(r**2)))
        if lv < best["loss"]:
            best["x"], best["loss"] = x.copy(), lv

    def check_budget() -> None:
        if spent():
            raise BudgetSpent

    def fun(x: np.ndarray) -> np.ndarray:
        if x.tobytes() not in cache:
            check_budget()
            remember(x, ev.residuals(x[None], np.array([delay]))[0].reshape(-1))
        return cache[x.tobytes()]

    def jac(x: np.ndarray) -> np.ndarray:
        check_budget()
        jm, r0 = coupled_jacobian(prob, ev, x, delay)
        remember(x, r0)
        stats["jacobians"] += 1
        say(
            f"iteration {stats['jacobians']}: training RMSE {best['loss']:.5f} rad, "
            f"{ev.world_steps / max(ev.seconds, 1e-9):.0f} world-steps/s"
        )
        return jm

    r_init = ev.residuals(x0[None], np.array([delay]))[0].reshape(-1)
    remember(x0, r_init)
    stats["initial_rmse"] = best["loss"]
    try:
        check_budget()
        sol = trust_region(
            lambda xs: fun(xs[0])[None],
            prob.space(),
            x0,
            max_nfev,
            FD_STEP["log"],
            jac=jac,
            tol=COUPLED_TOLERANCES,
        )
        stats["stopped_on"] = "converged" if sol.converged else "iterations"
    except BudgetSpent:
        stats["stopped_on"] = "budget"
    stats["rmse"] = best["loss"]
    return best["x"], stats


def search_coupled(
    prob: Problem,
    ev: CoupledEvaluator,
    ev_scan: CoupledEvaluator,
    x0: np.ndarray,
    delay: int,
    opts: RobotFitOptions,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, str, dict[str, Any]]:
    """The coupled path: the delay scanned at fixed parameters before and after one coupled least-squares run."""
    delay_note = "fixed" if opts.delay is not None else "scanned"
    if opts.delay is None:
        if spent():
            delay_note = f"not scanned (time budget spent): {delay}"
        else:
            delay = scan_delay(ev_scan, x0, opts.max_delay, say)
    x_best, stats = _least_squares(prob, ev, x0, delay, opts.max_iterations, spent, say)
    if opts.delay is None and stats["stopped_on"] != "budget":
        delay = scan_delay(ev_scan, x_best, opts.max_delay, say)
    stats["search"] = "coupled"
    return x_best, delay, delay_note, stats
