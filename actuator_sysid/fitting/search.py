"""Global search (CMA-ES, batched ask/tell) and local refinement (trust-region least squares).

Every generation of every joint's population is one rollout launch; joints search independently
and a joint that has plateaued stops asking for new candidates. Two interchangeable CMA-ES drivers:
`cmaes` (default) calls the CMA-ES engine Optuna's CmaEsSampler wraps, directly; `optuna` goes through
the Optuna study, whose per-trial bookkeeping costs milliseconds per candidate (bench/rollout.py).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import cmaes
import numpy as np
import optuna
from scipy.optimize import least_squares
from scipy.stats import qmc

from ..models.families import Family
from ..models.rollout import RolloutEngine, full_params
from .objective import LossScales, loss_from_sums, residuals
from .space import SearchSpace

optuna.logging.set_verbosity(logging.WARNING)

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


def _params(family: Family, space: SearchSpace, x: np.ndarray) -> np.ndarray:
    """(C, J, d) natural-unit candidates → (C, J, P) kernel parameters."""
    return full_params(family, {n: x[..., i] for i, n in enumerate(space.names)}, x.shape[:2])


class _CmaesStrategy:
    """CMA-ES from the `cmaes` package (the engine behind Optuna's CmaEsSampler), without per-trial storage."""

    def __init__(self, x0: np.ndarray, population: int, seed: int, sigma: float):
        self.cma = cmaes.CMA(mean=x0, sigma=sigma, bounds=np.tile([0.0, 1.0], (x0.size, 1)),
                             seed=seed, population_size=population)

    def ask(self) -> np.ndarray:
        return np.stack([self.cma.ask() for _ in range(self.cma.population_size)])

    def tell(self, u: np.ndarray, loss: np.ndarray) -> None:
        self.cma.tell(list(zip(u, loss.tolist(), strict=True)))


class _OptunaStrategy:
    """Optuna's CmaEsSampler driven by batched ask/tell: every trial of a generation asked before any tell."""

    def __init__(self, names: tuple[str, ...], x0: np.ndarray, population: int, seed: int, sigma: float):
        self.names = names
        self.dists = {n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in names}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # x0 is deprecated in Optuna 4.9 but still honoured
            sampler = optuna.samplers.CmaEsSampler(
                x0={n: float(v) for n, v in zip(names, x0, strict=True)}, sigma0=sigma, popsize=population, seed=seed,
                warn_independent_sampling=False)
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


@dataclass
class _Run:
    """One CMA-ES run of one joint: its driver, population, and best point so far."""

    strategy: _CmaesStrategy | _OptunaStrategy
    population: int
    restarts: int = 0
    best: float = np.inf
    best_u: np.ndarray | None = None
    history: list[float] = field(default_factory=list)


def cma_search(
    engine: RolloutEngine, family: Family, space: SearchSpace, scales: LossScales, x0: list[np.ndarray],
    generations: int, population: int, seed: int, on_generation: GenerationFn | None = None,
    plateau_generations: int = 20, plateau_rtol: float = 1e-3, backend: str = "cmaes", scan_points: int = 256,
    parallel_runs: int = 4,
) -> SearchResult:
    """Parallel CMA-ES runs in the unit cube with IPOP restarts; one launch per generation for everything.

    A batched scan of the warm start and a Sobol design picks the starting means. Each joint runs
    `parallel_runs` CMA-ES instances side by side (the warm start polished locally, the best distinct
    scan points explored widely); a run that plateaus restarts from the next scan point with twice its
    population (IPOP). All candidates of all runs of all joints share one kernel launch per generation.
    """
    n_j = len(engine.batch.joints)
    rng = np.random.default_rng(seed)

    def make(j: int, k: int, restart: int, mean: np.ndarray, sigma: float) -> _Run:
        pop = population * 2**restart
        s = seed + 7919 * j + 104729 * k + 1299709 * restart
        strat = (_CmaesStrategy(mean, pop, s, sigma) if backend == "cmaes"
                 else _OptunaStrategy(space.names, mean, pop, s, sigma))
        return _Run(strat, pop, restart, best_u=mean.copy())

    # scan: the warm start plus a scrambled Sobol design, one launch
    scan = qmc.Sobol(space.dim, seed=seed).random(scan_points)
    u_scan = np.repeat(scan[:, None, :], n_j, axis=1)
    u_scan[0] = np.stack([space.to_unit(x) for x in x0])
    scan_loss = loss_from_sums(engine.sums(family, _params(family, space, space.from_unit(u_scan))),
                               engine.batch, scales)
    queue_u = [list(u_scan[1:, j][np.argsort(scan_loss[1:, j])]) for j in range(n_j)]  # best first

    def next_start(j: int) -> np.ndarray:
        return queue_u[j].pop(0) if queue_u[j] else rng.uniform(0.0, 1.0, space.dim)

    runs = [[make(j, 0, 0, u_scan[0, j], FIRST_SIGMA)]
            + [make(j, k, 0, next_start(j), RESTART_SIGMA) for k in range(1, parallel_runs)]
            for j in range(n_j)]
    best_i = np.argmin(scan_loss, axis=0)
    best_u = [u_scan[best_i[j], j].copy() for j in range(n_j)]
    best_loss = scan_loss.min(axis=0)
    finished: list[list[tuple[float, np.ndarray]]] = [[] for _ in range(n_j)]
    history: list[list[float]] = [[] for _ in range(n_j)]
    evaluations = scan_points * n_j
    g = 0
    for g in range(generations):
        sizes = [sum(r.population for r in runs[j]) for j in range(n_j)]
        u = np.repeat(np.stack(best_u)[None], max(sizes), axis=0)  # (C, J, d); short joints pad with their best
        for j in range(n_j):
            u[: sizes[j], j] = np.vstack([r.strategy.ask() for r in runs[j]])
        loss = loss_from_sums(engine.sums(family, _params(family, space, space.from_unit(u))),
                              engine.batch, scales)
        evaluations += int(sum(sizes))
        for j in range(n_j):
            offset = 0
            for k, run in enumerate(runs[j]):
                uj, lj = u[offset: offset + run.population, j], loss[offset: offset + run.population, j]
                offset += run.population
                run.strategy.tell(uj, lj)
                c = int(np.argmin(lj))
                if lj[c] < run.best:
                    run.best, run.best_u = float(lj[c]), uj[c].copy()
                run.history.append(run.best)
                h = run.history
                if len(h) > plateau_generations and h[-plateau_generations - 1] - h[-1] <= plateau_rtol * abs(h[-1]):
                    finished[j].append((run.best, run.best_u))
                    runs[j][k] = make(j, k, run.restarts + 1, next_start(j), RESTART_SIGMA)
            j_best = min(runs[j], key=lambda r: r.best)
            if j_best.best < best_loss[j]:
                best_loss[j], best_u[j] = j_best.best, j_best.best_u.copy()
            history[j].append(float(best_loss[j]))
        if on_generation:
            on_generation(g, best_loss.copy())
    candidates = []
    for j in range(n_j):
        ends = sorted(finished[j] + [(r.best, r.best_u) for r in runs[j]], key=lambda t: t[0])
        candidates.append([space.from_unit(u) for _, u in ends])
    restarts = [len(finished[j]) for j in range(n_j)]
    return SearchResult([space.from_unit(b) for b in best_u], best_loss, history, evaluations, g + 1,
                        restarts=restarts, candidates=candidates)


def refine(
    engine: RolloutEngine, family: Family, space: SearchSpace, scales: LossScales, result: SearchResult,
    max_iterations: int = 100, step: float = 1e-3, starts: int = 3,
) -> SearchResult:
    """Trust-region least squares from the best few run optima; each Jacobian is one batched launch."""
    n_j = len(engine.batch.joints)
    best = [b.copy() for b in result.best]
    best_loss = result.best_loss.copy()
    evaluations = 0
    for j in range(n_j):
        def run(us: np.ndarray, j: int = j) -> np.ndarray:
            nonlocal evaluations
            x = np.repeat(np.stack(best)[None], us.shape[0], axis=0)
            x[:, j] = space.from_unit(us)
            evaluations += us.shape[0]
            return residuals(engine.traces(family, _params(family, space, x)), engine.batch, scales, j)

        def jac(u: np.ndarray, run=run) -> np.ndarray:
            h = np.where(u + step <= 1.0, step, -step)
            r = run(np.vstack([u[None], u[None] + np.diag(h)]))
            return ((r[1:] - r[0]) / h[:, None]).T

        for i, x_start in enumerate((result.candidates[j] if result.candidates else [best[j]])[:starts]):
            # the best point gets the full budget; alternatives only a short look for a better basin
            sol = least_squares(lambda u, run=run: run(u[None])[0], space.to_unit(x_start), jac=jac,
                                bounds=(0.0, 1.0), method="trf", x_scale="jac",
                                max_nfev=max_iterations if i == 0 else max_iterations // 4,
                                xtol=1e-7, ftol=1e-9)
            loss = float(np.sum(sol.fun**2))
            if loss < best_loss[j]:
                best[j], best_loss[j] = space.from_unit(sol.x), loss
    return SearchResult(best, best_loss, result.history, result.evaluations + evaluations,
                        result.generations, result.restarts, result.candidates)
