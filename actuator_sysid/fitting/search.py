"""Global search (CMA-ES, batched ask/tell) and local refinement (trust-region least squares).

Every generation of every joint's population is one rollout launch; joints search independently
and a joint that has plateaued stops asking for new candidates. Two interchangeable CMA-ES drivers:
`cmaes` (default) calls the CMA-ES engine Optuna's CmaEsSampler wraps, directly; `optuna` goes through
the Optuna study, whose per-trial bookkeeping costs milliseconds per candidate (bench/rollout.py).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from scipy.optimize import OptimizeResult, least_squares

from ..models import parameters
from ..models.families import Family
from ..models.rollout import RolloutEngine, full_params
from .objective import VELOCITY_WEIGHT, LossScales, loss_from_sums, residual_blocks, residuals
from .space import SearchSpace
from .uncertainty import analyse, delay_profile

if TYPE_CHECKING:
    import cmaes
    import optuna


GenerationFn = Callable[[int, np.ndarray], None]
"""on_generation(generation index, best loss per joint)"""


@dataclass
class SearchResult:
    """Best parameters (natural units) and the search history, per joint."""

    best: list[np.ndarray]  # per joint, (d,)
    best_loss: np.ndarray  # (J,)
    history: list[list[float]] = field(default_factory=list)  # per joint: best loss after each generation
    evaluations: int = 0
    generations: int = 0
    restarts: list[int] = field(default_factory=list)  # per joint
    candidates: list[list[np.ndarray]] = field(default_factory=list)  # per joint: run optima, best first
    analysis: list[dict] = field(default_factory=list)  # per joint: intervals, correlation, warnings
    stopped_on: str = "generations"  # why it ended: generations, plateau (every joint), budget or abandoned
    local: dict = field(default_factory=dict)  # the least-squares solve before the search (api.search)


def _stalled(history: list[float], generations: int, rtol: float) -> bool:
    """True when the best loss improved by no more than rtol (relative) over the last `generations`."""
    return len(history) > generations and history[-generations - 1] - history[-1] <= rtol * abs(history[-1])


def fd_colors(rows: Sequence[np.ndarray]) -> list[list[int]]:
    """Variables that may share one finite-difference candidate, by position in `rows` (per variable, the residual
    rows it can move): greedily, each joins the first colour whose rows are disjoint from its own."""
    colors: list[tuple[set[int], list[int]]] = []
    for v, r in enumerate(rows):
        own = {int(k) for k in r}
        for used, members in colors:
            if not used & own:
                used |= own
                members.append(v)
                break
        else:
            colors.append((own, [v]))
    return [m for _, m in colors]


def fd_jacobian(
    run: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x: np.ndarray,
    step: np.ndarray | float,
    upper: np.ndarray | float,
    dims: np.ndarray | None = None,
    rows: Sequence[np.ndarray] | None = None,
    r0: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Residuals at x and their forward-difference Jacobian over the dimensions `dims` (a mask; default all): the
    one finite-difference Jacobian of the fitters, at one point x (d,) or at a point per problem (P, d).

    `run(points, problem)` gives the residuals (N, ...) of points (N, d), each of problem `problem` (N,): every
    perturbed candidate of every problem goes to it as one batch, problem by problem, x itself first unless its
    residuals `r0` are given. A step that would pass `upper` is taken backwards. With `rows` (per variable, the
    indices along the residuals' first axis it can move; its column is zero elsewhere), variables whose rows are
    disjoint share one candidate (fd_colors), which is exact. Returns (residuals at x, Jacobian (R, dims) of the
    flattened residuals), each with a leading problem axis for several points."""
    xs = np.atleast_2d(x)
    p, d = xs.shape
    mask = np.ones(d, bool) if dims is None else np.asarray(dims, bool)
    cols = np.flatnonzero(mask)
    h = np.where(xs + step <= upper, step, -step) * mask  # (P, d)
    if rows is None:
        colors = [[int(v)] for v in cols]
    else:
        colors = [[int(cols[i]) for i in c] for c in fd_colors([rows[int(v)] for v in cols])]
    shift = np.zeros((p, len(colors), d))
    for ci, members in enumerate(colors):
        shift[:, ci, members] = h[:, members]
    cand = xs[:, None, :] + shift
    if r0 is None:
        cand = np.concatenate([xs[:, None, :], cand], axis=1)
    k = cand.shape[1]
    r = np.asarray(run(cand.reshape(p * k, d), np.repeat(np.arange(p), k)))
    r = r.reshape(p, k, *r.shape[1:])
    base = r[:, 0] if r0 is None else np.asarray(r0).reshape(p, *r.shape[2:])
    moved = r[:, 1:] if r0 is None else r
    jt = np.zeros((p, cols.size, *base.shape[1:]))
    at = {int(v): i for i, v in enumerate(cols)}
    for ci, members in enumerate(colors):
        diff = moved[:, ci] - base
        for v in members:
            scale = h[:, v].reshape(p, *([1] * (diff.ndim - 1)))
            if rows is None:
                jt[:, at[v]] = diff / scale
            else:
                jt[:, at[v], rows[v]] = diff[:, rows[v]] / scale
    jac = jt.reshape(p, cols.size, -1).transpose(0, 2, 1)
    return (base[0], jac[0]) if x.ndim == 1 else (base, jac)


def candidate_params(family: Family, space: SearchSpace, x: np.ndarray) -> np.ndarray:
    """(C, J, d) natural-unit candidates → (C, J, P) kernel parameters."""
    return full_params(family, {n: x[..., i] for i, n in enumerate(space.names)}, x.shape[:2])


def residual_fn(
    engine: RolloutEngine,
    family: Family,
    space: SearchSpace,
    scales: LossScales,
    count: list[int] | None = None,
) -> Callable[[np.ndarray], np.ndarray]:
    """Residual vectors of natural-unit candidates (C, d) on a one-joint engine, one launch per call;
    `count` accumulates the candidates evaluated."""

    def run(xs: np.ndarray) -> np.ndarray:
        if count is not None:
            count[0] += xs.shape[0]
        params = candidate_params(family, space, xs[:, None, :])
        return residuals(engine.traces(family, params), engine.batch, scales, 0, params)

    return run


@dataclass(frozen=True)
class Tolerances:
    """scipy least_squares' stopping tolerances and trust-region solver for one kind of problem."""

    xtol: float = 1e-10
    ftol: float = 1e-12
    gtol: float = 1e-10
    tr_solver: str | None = "lsmr"
    # solve in the unit cube (a registry space, log or linear per parameter); False: in the space's own units,
    # for a space already linear in well-scaled search units (the trust region starts from their magnitude)
    unit_cube: bool = True


# tight tolerances for a joint: with noisy initial states the optimum sits in a shallow valley that a loose xtol
# leaves early (measured: 6 % above the loss at the true parameters)
JOINT_TOLERANCES = Tolerances()


class LeastSquares(NamedTuple):
    """A trust-region solve's point (natural units), its loss (sum of squares) and whether scipy converged."""

    x: np.ndarray
    loss: float
    converged: bool


def trust_region(
    run: Callable[[np.ndarray], np.ndarray],
    space: SearchSpace,
    x_start: np.ndarray,
    budget: int,
    step: float,
    give_up: float = math.inf,
    jac: Callable[[np.ndarray], np.ndarray] | None = None,
    tol: Tolerances = JOINT_TOLERANCES,
) -> LeastSquares:
    """Trust-region least squares over the continuous dimensions of `space` from x_start (integers held): the
    residuals of natural-unit candidates from `run`, the Jacobian a forward difference of unit-cube `step` as
    one launch, or `jac(x)` (residual rows × every dimension, natural units) where the caller has a cheaper one.
    A solve whose loss is still above `give_up` after ABANDON_ITERATIONS iterations stops there."""
    cont = ~space.integer
    if not cont.any():
        return LeastSquares(x_start, float(np.sum(run(x_start[None])[0] ** 2)), True)
    if not tol.unit_cube:
        return _trust_region_natural(run, space, x_start, budget, jac, tol)
    u0 = space.to_unit(x_start)

    def full(uc: np.ndarray) -> np.ndarray:
        u = np.repeat(u0[None], uc.shape[0], axis=0)
        u[:, cont] = uc
        return space.from_unit(u)

    def unit_jac(uc: np.ndarray) -> np.ndarray:
        u = u0.copy()
        u[cont] = uc
        if jac is None:
            return fd_jacobian(lambda us, _: run(space.from_unit(us)), u, step, 1.0, cont)[1]
        x = space.from_unit(u)
        return jac(x)[:, cont] * space.dx_du(x)[cont]

    def hopeless(intermediate_result: OptimizeResult) -> None:  # scipy's name; its cost is half the loss
        if intermediate_result.nit >= ABANDON_ITERATIONS and 2.0 * intermediate_result.cost > give_up:
            raise StopIteration

    sol = _trf(
        lambda uc: run(full(uc[None]))[0],
        u0[cont],
        unit_jac,
        (0.0, 1.0),
        budget,
        tol,
        hopeless if give_up < math.inf else None,
    )
    return LeastSquares(full(sol.x[None])[0], float(np.sum(sol.fun**2)), bool(sol.status > 0))


def _trf(
    fun: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    jac: Callable[[np.ndarray], np.ndarray],
    bounds: tuple,
    budget: int,
    tol: Tolerances,
    callback: Callable[[OptimizeResult], None] | None = None,
) -> OptimizeResult:
    """scipy's bounded trust-region reflective least squares, variables scaled by the Jacobian's columns."""
    return least_squares(
        fun,
        x0,
        jac=jac,
        bounds=bounds,
        method="trf",
        x_scale="jac",
        max_nfev=budget,
        xtol=tol.xtol,
        ftol=tol.ftol,
        gtol=tol.gtol,
        tr_solver=tol.tr_solver,
        callback=callback,
    )


def _trust_region_natural(
    run: Callable[[np.ndarray], np.ndarray],
    space: SearchSpace,
    x_start: np.ndarray,
    budget: int,
    jac: Callable[[np.ndarray], np.ndarray] | None,
    tol: Tolerances,
) -> LeastSquares:
    """trust_region in the space's own (linear) units, every dimension continuous."""
    if jac is None or space.log.any() or space.integer.any():
        raise ValueError("a trust region in natural units needs a linear, continuous space and a Jacobian")
    sol = _trf(lambda x: run(x[None])[0], x_start, jac, (space.lower, space.upper), budget, tol)
    return LeastSquares(sol.x, float(np.sum(sol.fun**2)), bool(sol.status > 0))


def solve_least_squares(
    run: Callable[[np.ndarray], np.ndarray],
    space: SearchSpace,
    x_start: np.ndarray,
    budget: int,
    step: float,
    give_up: float = math.inf,
) -> tuple[np.ndarray, float]:
    """trust_region with a joint's tolerances and the forward-difference Jacobian; returns (x, loss)."""
    x, loss, _ = trust_region(run, space, x_start, budget, step, give_up)
    return x, loss


def batched_lm(
    residuals: Callable[[np.ndarray, np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    iterations: int,
    prune: tuple[int, float] | None = None,
    tol: float = 1e-3,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Levenberg–Marquardt on many independent problems at once, one per row of x0 (P, d), inside the bounds.

    `residuals(x, rows)` gives the residuals (P', N) of problems `rows` at x (P', d) as one batch, `jacobian(x,
    rows, r)` their Jacobians (P', N, d) at x, where the residuals are r. Per iteration: one batch for the
    Jacobians of the problems still moving, one for four damping trials each. A problem stops when its loss
    falls by less than `tol` (relative) or its damping saturates; `prune` (n, f): after n iterations, problems
    whose loss is above f × the best stop. Returns the points, their losses (RMS) and the Jacobian batches."""
    p, d = x0.shape
    x = x0.copy()
    r0 = residuals(x, np.arange(p))
    loss = np.sqrt(np.mean(r0**2, axis=1))
    lam = np.full(p, 1e-3)
    done = np.zeros(p, bool)
    trials = np.array([0.1, 1.0, 10.0, 100.0])
    jacobians = 0
    for it in range(iterations):
        if prune is not None and it == prune[0]:
            done |= loss > prune[1] * loss.min()
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        jm = jacobian(x[act], act, r0[act])
        jacobians += 1
        jt = jm.transpose(0, 2, 1)  # batched BLAS products: einsum's own loop is many times slower here
        a = jt @ jm
        g = (jt @ r0[act][..., None])[..., 0]
        diag = np.einsum("pdd->pd", a) + 1e-12
        cand = np.zeros((act.size, trials.size, d))
        for ti, t in enumerate(trials):
            m = a + (lam[act, None] * t * diag)[:, :, None] * np.eye(d)[None]
            cand[:, ti] = np.clip(x[act] - np.linalg.solve(m, g[..., None])[..., 0], lower, upper)
        rt = residuals(cand.reshape(-1, d), np.repeat(act, trials.size)).reshape(act.size, trials.size, -1)
        lt = np.sqrt(np.mean(rt**2, axis=2))  # (active, trials)
        for i, k in enumerate(act):
            b_ = int(np.argmin(lt[i]))
            if lt[i, b_] < loss[k]:
                done[k] = lt[i, b_] > (1.0 - tol) * loss[k]
                x[k], loss[k], r0[k] = cand[i, b_], lt[i, b_], rt[i, b_]
                lam[k] = max(lam[k] * trials[b_] / 3.0, 1e-7)
            else:
                lam[k] = min(lam[k] * 1e3, 1e6)
                done[k] = lam[k] >= 1e6
    return x, loss, jacobians


class LocalSolve(NamedTuple):
    """`local_search`'s answer, per joint: the better of start and solution, the start's loss and that point's,
    the candidates evaluated, and whether every joint gave up against the rival (the start is abandoned)."""

    best: list[np.ndarray]
    before: np.ndarray
    after: np.ndarray
    evaluations: int
    abandoned: bool = False


def _coarse_then_fine(
    run: Callable[[np.ndarray], np.ndarray],
    coarse: Callable[[np.ndarray], np.ndarray],
    space: SearchSpace,
    x: np.ndarray,
    budget: int,
    give_up: float = math.inf,
) -> tuple[np.ndarray, float]:
    """The coarse solve into the basin, then the fine one on the fit's own loss (`run`); `give_up` applies to
    the coarse one only when it is on that loss (a position-MAE fit's coarse solve is on squared errors)."""
    x, loss = solve_least_squares(
        coarse, space, x, budget, COARSE_STEP, give_up if coarse is run else math.inf
    )
    if coarse is run and loss > give_up:
        return x, loss
    return solve_least_squares(run, space, x, budget, POLISH_STEP, give_up)


def local_search(
    engine: RolloutEngine,
    family: Family,
    space: SearchSpace,
    scales: LossScales,
    x0: list[np.ndarray],
    max_iterations: int = 200,
    rival: SearchResult | None = None,
) -> LocalSolve:
    """Least squares from each joint's start before the global search: the coarse step into the basin, the
    fine step to its floor. On these objectives CMA-ES plateaus orders of magnitude above the optimum of
    a curved valley (DC-motor slope, damping and viscous friction trade off) that least squares follows,
    so the search then starts from this point and looks for anything better.
    A position-MAE fit takes the coarse step on squared errors (a smooth valley least squares follows) and
    the fine step on its own loss.
    `rival`: another start's search of this family. Each joint's solve then gives up once it has run
    ABANDON_ITERATIONS iterations still over ABANDON_RATIO times the rival's loss, tried with the rival's integer
    values (least squares moves none, so they must not decide); a joint that does not give up is solved from its
    own start as without a rival."""
    n_j = len(x0)
    best, before, after, count, gave_up = [], np.zeros(n_j), np.zeros(n_j), [0], np.zeros(n_j, bool)
    for j, x_start in enumerate(x0):
        sc = scales.select(j)
        run = residual_fn(engine.for_joint(j), family, space, sc, count)
        coarse = (
            residual_fn(
                engine.for_joint(j), family, space, dataclasses.replace(sc, position_mae=False), count
            )
            if sc.position_mae
            else run
        )
        before[j] = float(np.sum(run(x_start[None])[0] ** 2))
        trial = x_start if rival is None else np.where(space.integer, rival.best[j], x_start)
        give_up = math.inf if rival is None else ABANDON_RATIO * float(rival.best_loss[j])
        x, loss = _coarse_then_fine(run, coarse, space, trial, max_iterations, give_up)
        gave_up[j] = min(loss, before[j]) > give_up  # nor is the start itself (its own integers) under it
        if not gave_up[j] and not np.array_equal(trial, x_start):
            x, loss = _coarse_then_fine(run, coarse, space, x_start, max_iterations)
        best.append(x if loss < before[j] else x_start)
        after[j] = min(loss, before[j])
    return LocalSolve(best, before, after, count[0], rival is not None and bool(gave_up.all()))


def release_limits(
    run: Callable[[np.ndarray], np.ndarray], space: SearchSpace, x: np.ndarray, loss: float
) -> tuple[np.ndarray, float, set[str]]:
    """Move each limit the log never presses (a clamp whose off value is infinite) to its search bound, where
    it stops binding, when the loss stays the same (RELEASE_RTOL): of the limits the data cannot place, the
    one that does not cut efforts the log never asked for. Otherwise the optimum keeps wherever the search
    left such a limit, and validation motion beyond the training regime hits a clamp nobody measured."""
    limits = [
        i
        for i, n in enumerate(space.names)
        if not space.integer[i] and parameters.get(n).neutral == math.inf and x[i] < space.upper[i]
    ]
    released: set[str] = set()
    while limits:
        moved = np.repeat(x[None], len(limits), axis=0)
        for k, i in enumerate(limits):
            moved[k, i] = space.upper[i]
        losses = np.sum(run(moved) ** 2, axis=1)
        k = int(np.argmin(losses))
        if not losses[k] <= loss * (1 + RELEASE_RTOL):
            break
        x, loss = moved[k], min(loss, float(losses[k]))
        released.add(space.names[limits.pop(k)])
    return x, loss, released


class _CmaesStrategy:
    """CMA-ES from the `cmaes` package (the engine behind Optuna's CmaEsSampler), without per-trial storage.

    With integer dimensions (delays) it is CMA-ES with margin (CMAwM), which keeps a grid dimension from
    collapsing onto one value before the others have converged.
    """

    def __init__(self, x0: np.ndarray, population: int, seed: int, sigma: float, steps: np.ndarray):
        import cmaes  # with scipy.stats, which it imports, a second of start-up for a server that never fits

        bounds = np.tile([0.0, 1.0], (x0.size, 1))
        self.margin = bool(np.any(steps > 0))
        if self.margin:
            self.cma = cmaes.CMAwM(
                mean=x0, sigma=sigma, bounds=bounds, steps=steps, seed=seed, population_size=population
            )
        else:
            self.cma = cmaes.CMA(mean=x0, sigma=sigma, bounds=bounds, seed=seed, population_size=population)
        self._raw: list[np.ndarray] = []

    def ask(self) -> np.ndarray:
        """The whole generation at once (one matrix product, not one library call per candidate)."""
        if not self.margin:
            return self._sample(self.cma, self.cma._bounds, None)
        cma = self.cma._cma
        x = self._sample(cma, self.cma._continuous_space, self.cma._continuous_idx)
        self._raw = list(x)
        enc = x.copy()
        if self.cma._n_zdim > 0:
            enc[:, self.cma._discrete_idx] = self.cma._encode_discrete_params(x[:, self.cma._discrete_idx])
        return enc

    @staticmethod
    def _sample(cma: cmaes.CMA, bounds: np.ndarray | None, idx: np.ndarray | None) -> np.ndarray:
        """λ draws from N(m, σ²C), each redrawn while outside the box (up to the library's limit of tries),
        then clipped — the library's ask() vectorised. `idx`: the dimensions the box applies to (CMAwM)."""
        b, d = cma._eigen_decomposition()
        bd = b * d  # B·diag(D)

        def draw(k: int) -> np.ndarray:
            return cma._mean + cma._sigma * (cma._rng.randn(k, cma._n_dim) @ bd.T)

        x = draw(cma.population_size)
        if bounds is None:
            return x
        lo, hi = bounds[:, 0], bounds[:, 1]

        def outside(v: np.ndarray) -> np.ndarray:
            w = v if idx is None else v[:, idx]
            return np.any((w < lo) | (w > hi), axis=1)

        bad = outside(x)
        for _ in range(cma._n_max_resampling):
            if not bad.any():
                break
            x[bad] = draw(int(bad.sum()))
            bad = outside(x)
        if bad.any():
            if idx is None:
                x[bad] = np.clip(x[bad], lo, hi)
            else:
                x[np.ix_(bad, idx)] = np.clip(x[np.ix_(bad, idx)], lo, hi)
        return x

    def tell(self, u: np.ndarray, loss: np.ndarray) -> None:
        xs = self._raw if self.margin else list(u)
        self.cma.tell(list(zip(xs, loss.tolist(), strict=True)))


class _OptunaStrategy:
    """Optuna's CmaEsSampler driven by batched ask/tell: every trial of a generation asked before any tell."""

    def __init__(
        self,
        names: tuple[str, ...],
        x0: np.ndarray,
        population: int,
        seed: int,
        sigma: float,
        steps: np.ndarray,
    ):
        import optuna

        optuna.logging.set_verbosity(logging.WARNING)
        self.names = names
        self.dists: dict[str, optuna.distributions.BaseDistribution] = {
            n: optuna.distributions.FloatDistribution(0.0, 1.0, step=float(st) if st > 0 else None)
            for n, st in zip(names, steps, strict=True)
        }
        if np.any(steps > 0):  # a stepped distribution needs a mean on its grid
            x0 = np.where(steps > 0, np.round(x0 / np.where(steps > 0, steps, 1.0)) * steps, x0)
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", FutureWarning
            )  # x0 is deprecated in Optuna 4.9 but still honoured
            sampler = optuna.samplers.CmaEsSampler(
                x0={n: float(v) for n, v in zip(names, x0, strict=True)},
                sigma0=sigma,
                popsize=population,
                seed=seed,
                warn_independent_sampling=False,
                with_margin=bool(np.any(steps > 0)),
            )
        self.study = optuna.create_study(sampler=sampler, direction="minimize")
        self.population = population
        self._trials: list = []

    def ask(self) -> np.ndarray:
        self._trials = [self.study.ask(self.dists) for _ in range(self.population)]
        return np.array([[t.params[n] for n in self.names] for t in self._trials])

    def tell(self, u: np.ndarray, loss: np.ndarray) -> None:
        for t, v in zip(self._trials, loss.tolist(), strict=True):
            self.study.tell(t, v)


BACKENDS = ("cmaes", "optuna")
FIRST_SIGMA = 0.05  # in the unit cube: about a third of a decade on a six-decade log scale
RESTART_SIGMA = 1.0 / 6.0
STALL_GENERATIONS = 50  # a joint stops when its best loss improved less than STALL_RTOL over this many
STALL_RTOL = 1e-4
# forward-difference step of the polishing solve, in the unit cube: about √ε of float32 relative to a
# parameter on a six-decade log scale, the balance of truncation and rounding error. With only the coarse
# 1e-3 step the trust region collapsed (xtol) short of the optimum in a friction valley, 4-8 % above the
# loss at the true parameters; started far from the optimum, 1e-4 alone can wander into a wrong basin.
POLISH_STEP = 1e-4
COARSE_STEP = 1e-3
RELEASE_RTOL = (
    1e-4  # a limit moved off changes the loss by less than this (relative): the log never pressed it
)
# a second start (fitting/fit.py _fit_family) whose least squares is still over ABANDON_RATIO times the first
# start's final loss after ABANDON_ITERATIONS iterations is abandoned. Measured (BENCHMARKS.md "Fits"): on the
# noise-free bench log the warm start is 1e5-1e8 times above the nested fit by then (and ends 1e3 times above
# it); on the real XL330 logs every warm start is within 1.3 times of it by then, on the bench log with 0.5 mrad
# noise within 3.3 times of its own optimum: those go on exactly as before
ABANDON_RATIO = 100.0
ABANDON_ITERATIONS = 20
RIVAL_BUDGET = 25  # residual evaluations of the refine's solve from a run optimum other than the incumbent
COV_STEP = (
    1e-5  # unit-cube step of the covariance Jacobian: local, so kinks (clips, stiction) do not inflate it
)


@dataclass
class _Run:
    """One CMA-ES run of one joint: its driver, population, and best point so far."""

    strategy: _CmaesStrategy | _OptunaStrategy
    population: int
    restarts: int = 0
    best: float = np.inf
    best_u: np.ndarray = field(default_factory=lambda: np.empty(0))  # set to the start mean by make()
    history: list[float] = field(default_factory=list)


def _scan(
    engine: RolloutEngine,
    family: Family,
    space: SearchSpace,
    scales: LossScales,
    x0: list[np.ndarray],
    extra_starts: list[list[np.ndarray]] | None,
    scan_points: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The warm start, the known good points and a scrambled Sobol design in the unit cube, (N, J, d), and their
    losses (N, J): one launch."""
    from scipy.stats import qmc

    scan = qmc.Sobol(space.dim, seed=seed).random(scan_points)
    u_scan = np.repeat(scan[:, None, :], len(x0), axis=1)
    u_scan[0] = np.stack([space.to_unit(x) for x in x0])
    for j, starts in enumerate(extra_starts or []):
        for i, x in enumerate(starts[: scan_points - 1]):
            u_scan[1 + i, j] = space.to_unit(x)
    params = candidate_params(family, space, space.from_unit(u_scan))
    scan_loss = loss_from_sums(engine.sums(family, params), engine.batch, scales, params)
    return u_scan, scan_loss


def _tell_runs(
    runs: list[_Run],
    u: np.ndarray,
    loss: np.ndarray,
    finished: list[tuple[float, np.ndarray]],
    restart: Callable[[int, _Run], _Run],
    plateau_generations: int,
    plateau_rtol: float,
) -> None:
    """One joint's generation (u (C, d), loss (C,), its runs' candidates in order) told to its runs; a run that
    plateaued goes to `finished` and `restart(k, run)` replaces it."""
    offset = 0
    for k, run in enumerate(runs):
        uj, lj = u[offset : offset + run.population], loss[offset : offset + run.population]
        offset += run.population
        run.strategy.tell(uj, lj)
        c = int(np.argmin(lj))
        if lj[c] < run.best:
            run.best, run.best_u = float(lj[c]), uj[c].copy()
        run.history.append(run.best)
        if _stalled(run.history, plateau_generations, plateau_rtol):
            finished.append((run.best, run.best_u))
            runs[k] = restart(k, run)


def cma_search(
    engine: RolloutEngine,
    family: Family,
    space: SearchSpace,
    scales: LossScales,
    x0: list[np.ndarray],
    generations: int,
    population: int,
    seed: int,
    on_generation: GenerationFn | None = None,
    plateau_generations: int = 20,
    plateau_rtol: float = 1e-3,
    backend: str = "cmaes",
    scan_points: int = 256,
    parallel_runs: int = 4,
    deadline: float | None = None,
    extra_starts: list[list[np.ndarray]] | None = None,
) -> SearchResult:
    """Parallel CMA-ES runs in the unit cube with IPOP restarts; one launch per generation for everything.

    A batched scan of the warm start and a Sobol design picks the starting means. Each joint runs
    `parallel_runs` CMA-ES instances side by side (the warm start polished locally, the best distinct
    scan points explored widely); a run that plateaus restarts from the next scan point with twice its
    population (IPOP). All candidates of all runs of all joints share one kernel launch per generation.
    At `deadline` (time.perf_counter() seconds) the search stops after the current generation and
    returns its best so far, with stopped_on="budget". `extra_starts` (natural units, per joint) join the scan
    as known good points, e.g. a nested family's optimum.
    """
    n_j = len(engine.batch.joints)
    u_scan, scan_loss = _scan(engine, family, space, scales, x0, extra_starts, scan_points, seed)
    runs, restart = _start_runs(space, u_scan, scan_loss, population, seed, backend, parallel_runs)
    best_i = np.argmin(scan_loss, axis=0)
    best_u = [u_scan[best_i[j], j].copy() for j in range(n_j)]
    best_loss = scan_loss.min(axis=0)
    finished: list[list[tuple[float, np.ndarray]]] = [[] for _ in range(n_j)]
    history: list[list[float]] = [[] for _ in range(n_j)]
    evaluations = scan_points * n_j
    active = np.ones(n_j, bool)  # a joint whose best has stalled stops searching; the rest go on
    g = 0
    stopped_on = "generations"
    for g in range(generations):
        evaluations += _generation(
            engine,
            family,
            space,
            scales,
            runs,
            active,
            best_u,
            best_loss,
            finished,
            history,
            restart,
            plateau_generations,
            plateau_rtol,
        )
        if on_generation:
            on_generation(g, best_loss.copy())
        if not active.any():
            stopped_on = "plateau"
            break
        if deadline is not None and time.perf_counter() >= deadline and g + 1 < generations:
            stopped_on = "budget"
            break
    ends = [
        sorted(finished[j] + [(r.best, r.best_u) for r in runs[j]], key=lambda t: t[0]) for j in range(n_j)
    ]
    return SearchResult(
        [space.from_unit(b) for b in best_u],
        best_loss,
        history,
        evaluations,
        g + 1,
        restarts=[len(f) for f in finished],
        candidates=[[space.from_unit(u) for _, u in e] for e in ends],
        stopped_on=stopped_on,
    )


def _start_runs(
    space: SearchSpace,
    u_scan: np.ndarray,
    scan_loss: np.ndarray,
    population: int,
    seed: int,
    backend: str,
    parallel_runs: int,
) -> tuple[list[list[_Run]], Callable[[int], Callable[[int, _Run], _Run]]]:
    """Each joint's first CMA-ES runs (the warm start polished locally, the best distinct scan points explored
    widely), and per joint the IPOP restart: twice the population, from the next scan point (then at random)."""
    n_j = u_scan.shape[1]
    rng = np.random.default_rng(seed)

    def make(j: int, k: int, restart: int, mean: np.ndarray, sigma: float) -> _Run:
        pop = population * 2**restart
        s = seed + 7919 * j + 104729 * k + 1299709 * restart
        strat = (
            _CmaesStrategy(mean, pop, s, sigma, space.steps)
            if backend == "cmaes"
            else _OptunaStrategy(space.names, mean, pop, s, sigma, space.steps)
        )
        return _Run(strat, pop, restart, best_u=mean.copy())

    queue_u = [list(u_scan[1:, j][np.argsort(scan_loss[1:, j])]) for j in range(n_j)]  # best first

    def next_start(j: int) -> np.ndarray:
        return queue_u[j].pop(0) if queue_u[j] else rng.uniform(0.0, 1.0, space.dim)

    def restart(j: int) -> Callable[[int, _Run], _Run]:
        return lambda k, run: make(j, k, run.restarts + 1, next_start(j), RESTART_SIGMA)

    runs = [
        [make(j, 0, 0, u_scan[0, j], FIRST_SIGMA)]
        + [make(j, k, 0, next_start(j), RESTART_SIGMA) for k in range(1, parallel_runs)]
        for j in range(n_j)
    ]
    return runs, restart


def _generation(
    engine: RolloutEngine,
    family: Family,
    space: SearchSpace,
    scales: LossScales,
    runs: list[list[_Run]],
    active: np.ndarray,
    best_u: list[np.ndarray],
    best_loss: np.ndarray,
    finished: list[list[tuple[float, np.ndarray]]],
    history: list[list[float]],
    restart: Callable[[int], Callable[[int, _Run], _Run]],
    plateau_generations: int,
    plateau_rtol: float,
) -> int:
    """One generation of every active joint's runs in one launch: ask, evaluate, tell, keep each joint's best
    and stop a joint whose best has stalled (updates the lists and arrays in place); returns the evaluations."""
    n_j = len(runs)
    sizes = [sum(r.population for r in runs[j]) if active[j] else 0 for j in range(n_j)]
    u = np.repeat(np.stack(best_u)[None], max(sizes), axis=0)  # (C, J, d); short joints pad with their best
    for j in np.flatnonzero(active).tolist():
        u[: sizes[j], j] = np.vstack([r.strategy.ask() for r in runs[j]])
    params = candidate_params(family, space, space.from_unit(u))
    loss = loss_from_sums(engine.sums(family, params), engine.batch, scales, params)
    for j in range(n_j):
        if active[j]:
            _tell_runs(
                runs[j], u[:, j], loss[:, j], finished[j], restart(j), plateau_generations, plateau_rtol
            )
            j_best = min(runs[j], key=lambda r: r.best)
            if j_best.best < best_loss[j]:
                best_loss[j], best_u[j] = j_best.best, j_best.best_u.copy()
        history[j].append(float(best_loss[j]))
        if len(history[j]) > STALL_GENERATIONS + 20 and _stalled(history[j], STALL_GENERATIONS, STALL_RTOL):
            active[j] = False
    return int(sum(sizes))


def initial_state_sensitivity(
    engine: RolloutEngine,
    family: Family,
    space: SearchSpace,
    scales: LossScales,
    x: np.ndarray,
    r0: np.ndarray,
    blocks: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Residual sensitivity to each segment's initial position and velocity, and their noise variances.

    Every rollout starts from the first measured sample, noise included; the variance of that noise is
    taken from the segment's own residuals (position block for q0, velocity block for qd0). A segment's
    residuals depend on its own initial state only, so one launch with every segment's q0 moved (and one
    for qd0) gives all the columns.
    """
    batch = engine.batch
    params = candidate_params(family, space, x[None, None, :])
    segment_of_row = blocks // 2
    cols, variances = np.zeros((r0.size, 2 * batch.n_segments)), np.zeros(2 * batch.n_segments)
    for c, (attr, delta, norm) in enumerate(
        (
            ("seg_q0", 1e-4, scales.sigma_q[0]),
            ("seg_qd0", 1e-3, scales.sigma_qd[0] / np.sqrt(VELOCITY_WEIGHT)),
        )
    ):
        moved = dataclasses.replace(batch, **{attr: getattr(batch, attr) + np.float32(delta)})
        eng = RolloutEngine(
            moved, engine.device, threads=1, effort_mode="implicit" if engine.mode_flags else "explicit"
        )
        diff = (residuals(eng.traces(family, params), moved, scales, 0)[0] - r0) / delta
        for s in range(batch.n_segments):
            rows = segment_of_row == s
            cols[rows, 2 * s + c] = diff[rows]
            # the residual is scaled by 1/(σ·√N); undo it to get the raw noise variance of that block
            raw = r0[blocks == 2 * s + c] * norm * np.sqrt(scales.n_samples[0])
            variances[2 * s + c] = float(np.mean(raw**2)) if raw.size else 0.0
    return cols, variances


Solve = Callable[..., tuple[np.ndarray, float]]
"""solve(x_start, budget, step=...) -> (x, loss): least squares on one joint (refine)"""


def _profile_integers(
    solve: Solve, space: SearchSpace, x_best: np.ndarray, best_loss: float, max_iterations: int
) -> tuple[np.ndarray, float, dict[int, dict[int, float]]]:
    """Exact integers (delays): each moved to a neighbour while that lowers the loss, the rest re-solved; returns
    the best point, its loss, and per integer dimension the loss at every value tried."""
    profiles: dict[int, dict[int, float]] = {}
    for i in np.flatnonzero(space.integer):
        profile = profiles.setdefault(int(i), {int(x_best[i]): float(best_loss)})
        for _ in range(int(space.upper[i] - space.lower[i])):
            moved = False
            for d in (x_best[i] - 1, x_best[i] + 1):
                if not space.lower[i] <= d <= space.upper[i] or int(d) in profile:
                    continue
                x = x_best.copy()
                x[i] = d
                x, loss = solve(x, max_iterations // 2)
                profile[int(d)] = loss
                if loss < best_loss:
                    x_best, best_loss, moved = x, loss, True
                    break
            if not moved:
                break
    return x_best, best_loss, profiles


def _uncertainty(
    sub: RolloutEngine,
    family: Family,
    space: SearchSpace,
    sc: LossScales,
    x: np.ndarray,
    run: Callable[[np.ndarray], np.ndarray],
    count: list[int],
    solutions: list[tuple[np.ndarray, float]],
    candidates: list[np.ndarray],
    released: set[str],
    profiles: dict[int, dict[int, float]],
) -> dict:
    """Intervals, correlation and warnings at one joint's optimum x: the Jacobian over the continuous dimensions
    and residual blocks (a position-MAE fit's from the squared-error residuals at its optimum, Gaussian noise per
    block), rivals from the other refined optima and every CMA-ES run's end point, delays from their profiles."""
    cont = ~space.integer
    analysis: dict = {"intervals": {}, "correlation": {"names": [], "matrix": []}, "warnings": []}
    if cont.any():
        # the data's own information: squared errors, no prior
        cov_sc = dataclasses.replace(sc, position_mae=False, prior=None)
        data_only = sc.position_mae or sc.prior is not None
        run_cov = residual_fn(sub, family, space, cov_sc, count) if data_only else run
        r0, jac_c = fd_jacobian(
            lambda us, _: run_cov(space.from_unit(us)), space.to_unit(x), COV_STEP, 1.0, cont
        )
        blocks = residual_blocks(sub.batch, 0)
        jac_n, var_n = initial_state_sensitivity(sub, family, space, cov_sc, x, r0, blocks)
        # a run's end point in one launch: its loss only bounds its own optimum's from above, so one within the
        # noise is a rival as it stands
        ends = np.stack(candidates) if candidates else x[None]
        if data_only:  # every rival's loss in the units of r0
            solutions = [(xs, float(np.sum(run_cov(xs[None])[0] ** 2))) for xs, _ in solutions]
        end_loss = np.sum(run_cov(ends) ** 2, axis=1)
        rivals = [
            (xs, loss)
            for xs, loss in [*solutions, *zip(ends, end_loss, strict=True)]
            if not np.array_equal(xs, x)
        ]
        analysis = analyse(space, x, jac_c, r0, blocks, cont, jac_n, var_n, rivals, released)
    for i in np.flatnonzero(space.integer):
        dp = delay_profile(profiles[int(i)], int(x[i]))
        analysis["intervals"][space.names[i]] = dp
        if not dp["identified"]:
            analysis["warnings"].append(f"{space.names[i]} is not identified: {dp['reason']}")
    return analysis


def refine(
    engine: RolloutEngine,
    family: Family,
    space: SearchSpace,
    scales: LossScales,
    result: SearchResult,
    max_iterations: int = 200,
    step: float = COARSE_STEP,
    starts: int = 3,
    polish_step: float = POLISH_STEP,
) -> SearchResult:
    """Trust-region least squares per joint from the incumbent and the best other run optima, then
    uncertainty at the optimum.

    Integer dimensions (delays) stay fixed during least squares; afterwards each is moved to a neighbour
    while that lowers the loss (exact integer handling). Each Jacobian is one batched launch of all
    perturbed candidates, on an engine holding only that joint's segments. The coarse `step` smooths over
    the kinks of clamps and stiction on the way into the basin; a last solve with `polish_step` finishes.
    """
    best = [b.copy() for b in result.best]
    best_loss = result.best_loss.copy()
    analyses: list[dict] = []
    evaluations = 0
    for j in range(len(engine.batch.joints)):
        sub, sc = engine.for_joint(j), scales.select(j)
        count = [0]
        run = residual_fn(sub, family, space, sc, count)

        def solve(x_start: np.ndarray, budget: int, run=run, step: float = step) -> tuple[np.ndarray, float]:
            return solve_least_squares(run, space, x_start, budget, step)

        solutions: list[tuple[np.ndarray, float]] = []  # every start's optimum: rivals for the intervals
        # the incumbent with the full budget; then the best other run optima, each with a short solve that goes
        # on only when it beats the incumbent (run optima sit up the incumbent's own valley more often than in
        # another basin, and following it down costs ten times the short solve)
        candidates = result.candidates[j] if result.candidates else []
        for k, x_start in enumerate([best[j], *candidates[: starts - 1]]):
            x, loss = solve(x_start, max_iterations if k == 0 else min(max_iterations, RIVAL_BUDGET))
            if k > 0 and loss < best_loss[j]:
                x, loss = solve(x, max_iterations)
            solutions.append((x, loss))
            if loss < best_loss[j]:
                best[j], best_loss[j] = x, loss
        best[j], best_loss[j], profiles = _profile_integers(
            solve, space, best[j], float(best_loss[j]), max_iterations
        )
        x, loss = solve(best[j], max_iterations, step=polish_step)
        solutions.append((x, loss))
        if loss < best_loss[j]:
            best[j], best_loss[j] = x, loss
        best[j], best_loss[j], released = release_limits(run, space, best[j], best_loss[j])
        analyses.append(
            _uncertainty(
                sub, family, space, sc, best[j], run, count, solutions, candidates, released, profiles
            )
        )
        evaluations += count[0]
    return SearchResult(
        best,
        best_loss,
        result.history,
        result.evaluations + evaluations,
        result.generations,
        result.restarts,
        result.candidates,
        analyses,
        result.stopped_on,
        result.local,
    )
