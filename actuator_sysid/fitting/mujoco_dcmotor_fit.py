"""Fitting MuJoCo's own `<dcmotor>` families: the plant is MuJoCo (models/mujoco_dcmotor.py), the solver and
the intervals are the joint fit's own (search.trust_region, search.fd_jacobian, uncertainty.analyse)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import qmc

from ..datasets.recording import Recording
from ..models import parameters
from ..models.families import Family, get_family, is_mujoco_dcmotor
from ..models.mujoco_dcmotor import Bench, Trial
from ..models.rollout import SegmentBatch, operating_points
from .objective import VELOCITY_WEIGHT, pool_metrics
from .request import FitRequest, FitRequestError
from .result import Interval, Metrics, ModelFit, SegmentMetrics, SplitMetrics
from .search import COARSE_STEP, COV_STEP, POLISH_STEP, fd_jacobian, trust_region
from .space import SearchSpace
from .uncertainty import analyse
from .warmstart import warm_start

__all__ = [
    "DCMotorFit",
    "fit_mujoco_dcmotor",
    "given_values",
    "is_mujoco_dcmotor",
    "model_fits",
    "simulate_dcmotor",
]

# a start for what neither the caller nor the log gives: a small servo on a 12 V supply
TYPICAL = {
    "stiffness": 10.0,
    "damping": 0.3,
    "dcmotor_motor_constant": 0.3,
    "dcmotor_resistance": 3.0,
    "dcmotor_voltage_limit": 12.0,
    "dcmotor_slew_rate": 5.0,
    "dcmotor_time_constant": 1e-3,
    "dcmotor_lugre_stiffness": 100.0,
    "dcmotor_lugre_damping": 0.1,
    "dcmotor_lugre_coulomb": 0.02,
    "dcmotor_lugre_static": 0.03,
    "dcmotor_lugre_stribeck_velocity": 0.1,
    "dcmotor_cogging_amplitude": 0.01,
    "dcmotor_cogging_phase": 0.0,
}
# metadata keys (a segment's, or its per-joint block) that state a value the fit then holds
GIVEN = {"vin": "dcmotor_voltage_limit", "cogging_periods": "dcmotor_cogging_periods"}
SCALE_FREE = ("dcmotor_motor_constant", "dcmotor_resistance", "dcmotor_voltage_limit")
SCALE_REASON = (
    "K, R and the voltage limit act only through the stall torque K·Vmax/R and the back-EMF damping K²/R: "
    "state the supply voltage (metadata vin) and K and R are identified"
)


@dataclass
class DCMotorFit:
    """One family fitted on one joint: every parameter (held ones included), intervals, loss, per-segment RMSE."""

    family: str
    params: dict[str, float]
    fixed: dict[str, float]
    analysis: dict
    loss: float
    evaluations: int
    position_rmse: dict[str, float] = field(default_factory=dict)

    @property
    def unidentified(self) -> list[str]:
        return [n for n, iv in self.analysis["intervals"].items() if not iv["identified"]]


def _trials(rec: Recording, joint: str, ids: list[int]) -> list[Trial]:
    j = rec.joint_index(joint)
    return [
        Trial(
            np.asarray(rec.segments[i].q_des[:, j], float),
            float(rec.segments[i].q[0, j]),
            float(rec.segments[i].qd[0, j]),
        )
        for i in ids
    ]


def given_values(rec: Recording, joint: str) -> dict[str, float]:
    """Values the log states (supply voltage `vin`, `cogging_periods`), from the first segment saying them."""
    out: dict[str, float] = {}
    for seg in rec.segments:
        meta = {**seg.metadata, **((seg.metadata.get("joints") or {}).get(joint) or {})}
        for key, name in GIVEN.items():
            if key in meta and name not in out:
                out[name] = float(meta[key])
    return out


def _physics_dt(rec: Recording, ids: list[int], substeps: int) -> float:
    dts = {round(float(np.median(np.diff(rec.segments[i].t))), 12) for i in ids}
    if len(dts) != 1:
        raise ValueError(f"segments {ids} are logged at different rates ({sorted(dts)} s): fit them apart")
    return dts.pop() / substeps


def _bench(
    rec: Recording, joint: str, family: Family, values: Mapping[str, float], ids: list[int], substeps: int
) -> Bench:
    load = rec.joints[rec.joint_index(joint)]
    return Bench(load, {n: values[n] for n in family.params}, _physics_dt(rec, ids, substeps), substeps)


def simulate_dcmotor(
    rec: Recording,
    joint: str,
    family: Family | str,
    params: Mapping[str, float],
    substeps: int = 1,
    segments: list[int] | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Our MuJoCo rollout of fitted values over segments of one joint: per segment name, q and qd."""
    fam = get_family(family) if isinstance(family, str) else family
    ids = list(range(len(rec.segments))) if segments is None else segments
    bench = _bench(rec, joint, fam, params, ids, substeps)
    tr = bench.rollout([params], _trials(rec, joint, ids))
    return {
        rec.segments[i].name: {
            "q": tr.q[k][0],
            "qd": tr.qd[k][0],
            "computed": tr.tau[k][0],
            "applied": tr.tau[k][0],
        }
        for k, i in enumerate(ids)
    }


class _Residuals:
    """The plant as a callable: natural-unit candidates (C, d) → scaled residuals (C, R), MuJoCo rollouts."""

    def __init__(
        self,
        rec: Recording,
        joint: str,
        family: Family,
        space: SearchSpace,
        fixed: Mapping[str, float],
        ids: list[int],
        substeps: int,
        template: Mapping[str, float],
    ):
        j = rec.joint_index(joint)
        self.space, self.fixed, self.count = space, dict(fixed), 0
        self.trials = _trials(rec, joint, ids)
        self.bench = _bench(rec, joint, family, template, ids, substeps)
        self.q = [np.asarray(rec.segments[i].q[:, j], float) for i in ids]
        self.qd = [np.asarray(rec.segments[i].qd[:, j], float) for i in ids]
        n = sum(len(q) - 1 for q in self.q)
        sigma_q = max(float(np.std(np.concatenate(self.q))), 1e-6)
        sigma_qd = max(float(np.std(np.concatenate(self.qd))), 1e-6)
        self.wq, self.wqd = (
            1.0 / (sigma_q * math.sqrt(n)),
            math.sqrt(VELOCITY_WEIGHT) / (sigma_qd * math.sqrt(n)),
        )
        self.blocks = np.concatenate(
            [np.full(len(q) - 1, b) for s, q in enumerate(self.q) for b in (2 * s, 2 * s + 1)]
        )

    def values(self, x: np.ndarray) -> dict[str, float]:
        return {**self.space.as_dict(x), **self.fixed}

    def __call__(self, xs: np.ndarray) -> np.ndarray:
        xs = np.atleast_2d(xs)
        self.count += xs.shape[0]
        q, qd, _ = self.bench.rollout([self.values(x) for x in xs], self.trials)
        parts = []
        for s in range(len(self.trials)):
            parts += [(q[s][:, 1:] - self.q[s][1:]) * self.wq, (qd[s][:, 1:] - self.qd[s][1:]) * self.wqd]
        r = np.concatenate(parts, axis=1)
        return np.where(np.isfinite(r), r, 1e3)  # a candidate that blows up is far from the data


def _start(space: SearchSpace, given: Mapping[str, float]) -> np.ndarray:
    return np.array([parameters.get(n).clip(float(given.get(n, TYPICAL.get(n, 1.0)))) for n in space.names])


def _scan(run: _Residuals, space: SearchSpace, x0: np.ndarray, points: int, seed: int) -> np.ndarray:
    """The start and a Sobol cloud around it (±0.15 of the unit cube): the best as the least-squares start."""
    if points <= 0:
        return x0
    u0 = space.to_unit(x0)
    cloud = np.clip(u0 + 0.3 * (qmc.Sobol(space.dim, seed=seed).random(points) - 0.5), 0.0, 1.0)
    xs = np.vstack([x0, space.from_unit(cloud)])
    loss = np.sum(run(xs) ** 2, axis=1)
    return xs[int(np.argmin(loss))]


def fit_mujoco_dcmotor(
    rec: Recording,
    joint: str,
    family: Family | str,
    *,
    segments: list[int] | None = None,
    start: Mapping[str, float] | None = None,
    fixed: Mapping[str, float] | None = None,
    substeps: int = 1,
    budget: int = 60,
    scan: int = 16,
    seed: int = 0,
) -> DCMotorFit:
    """Fit one `<dcmotor>` family to one joint's segments (all by default) by MuJoCo rollouts.

    Values the log states (`given_values`) and `fixed` are held; the rest start from `start` (else typical
    values), the best of a small scan around it, then trust-region least squares. Intervals, identifiability
    and correlations come from uncertainty.analyse at the optimum; K, R and the voltage limit all free are
    flagged, since only two combinations of them act."""
    fam = get_family(family) if isinstance(family, str) else family
    if not is_mujoco_dcmotor(fam):
        raise ValueError(f"{fam.name} is not a MuJoCo <dcmotor> family")
    if joint not in rec.joint_names:
        raise FitRequestError(f"joint {joint!r} is not in the log; it has {rec.joint_names}")
    ids = list(range(len(rec.segments))) if segments is None else list(segments)
    held = {k: v for k, v in {**given_values(rec, joint), **(fixed or {})}.items() if k in fam.params}
    if "dcmotor_cogging_periods" in fam.params and "dcmotor_cogging_periods" not in held:
        raise FitRequestError(
            f"{fam.name}: the cogging periods per radian are a datasheet value; give them "
            "(fixed dcmotor_cogging_periods, or metadata cogging_periods)"
        )
    space = SearchSpace.for_family(fam, fixed=held)
    x0 = _start(space, start or {})
    run = _Residuals(rec, joint, fam, space, held, ids, substeps, {**space.as_dict(x0), **held})
    x = _scan(run, space, x0, scan, seed)
    x, loss, _ = trust_region(run, space, x, budget, COARSE_STEP)
    x, loss, _ = trust_region(run, space, x, budget, POLISH_STEP)
    analysis = _analysis(run, space, x)
    q = run.bench.rollout([run.values(x)], run.trials).q
    rmse = {
        rec.segments[i].name: float(np.sqrt(np.mean((q[k][0] - run.q[k]) ** 2))) for k, i in enumerate(ids)
    }
    return DCMotorFit(fam.name, run.values(x), held, analysis, float(loss), run.count, rmse)


def _analysis(run: _Residuals, space: SearchSpace, x: np.ndarray) -> dict:
    """uncertainty.analyse at the optimum, and the K/R/voltage-limit scale flagged when all three were free."""
    cont = ~space.integer
    r0, jac = fd_jacobian(lambda us, _: run(space.from_unit(us)), space.to_unit(x), COV_STEP, 1.0, cont)
    out = analyse(space, x, jac, r0, run.blocks, cont)
    if all(n in space.names for n in SCALE_FREE):
        for n in SCALE_FREE:
            iv = out["intervals"][n]
            if iv["identified"]:
                out["intervals"][n] = {**iv, "value": None, "identified": False, "reason": SCALE_REASON}
                out["warnings"].append(f"{n} is not identified: {SCALE_REASON}")
    return out


def _metrics(rec: Recording, joint: str, sims: dict[str, dict[str, np.ndarray]], val: set[str]) -> Metrics:
    """Per-segment and pooled train / validation errors of one joint's rollout (objective's definitions)."""
    j = rec.joint_index(joint)
    rows: list[dict[str, Any]] = []
    for seg in rec.segments:
        eq, eqd = sims[seg.name]["q"][1:] - seg.q[1:, j], sims[seg.name]["qd"][1:] - seg.qd[1:, j]
        rows.append(
            {
                "segment": seg.name,
                "samples": int(eq.size),
                "position_rmse": float(np.sqrt(np.mean(eq**2))),
                "position_mae": float(np.mean(np.abs(eq))),
                "velocity_rmse": float(np.sqrt(np.mean(eqd**2))),
            }
        )
    pooled = lambda rs: None if (m := pool_metrics(rs)) is None else SplitMetrics(**m)  # noqa: E731
    return Metrics(
        train=pooled([r for r in rows if r["segment"] not in val]),
        validation=pooled([r for r in rows if r["segment"] in val]),
        segments=tuple(
            SegmentMetrics(**r, split="validation" if r["segment"] in val else "train") for r in rows
        ),
    )


def _one_operating_point(rec: Recording, joint: str, family: str) -> None:
    """Refuse a log whose segments run the joint at different device gains or supplies: the `<dcmotor>` holds one
    kp, kd and voltage limit, so one fit cannot follow them (the dcmotor families scale them per segment)."""
    op = operating_points(rec, joint)
    points = {op.multipliers(s) for s in rec.segments}
    if len(points) > 1:
        logged = sorted(
            {f"kp {v:g}" for v in op.kp.values() if v is not None}
            | {f"vin {v:g}" for v in op.vin.values() if v is not None}
        )
        raise FitRequestError(
            f"{family}: joint {joint!r} runs at {len(points)} operating points ({', '.join(logged)}), and "
            "MuJoCo's <dcmotor> holds one kp, kd and voltage limit; fit the segments of one point, or use the "
            "dcmotor families, which scale the gains per segment"
        )


def model_fits(
    rec: Recording, req: FitRequest, joints: list[str], train: list[int], validation: list[int], family: str
) -> dict[str, ModelFit]:
    """The joint fit's entries for a `<dcmotor>` family: per joint, fitted on the training segments from the
    warm start's gains, replayed on every segment (fitting/fit.py dispatches here)."""
    fam, val = get_family(family), {rec.segments[i].name for i in validation}
    out = {}
    for joint in joints:
        _one_operating_point(rec, joint, family)
        warm = warm_start(SegmentBatch.from_recording(rec, [joint], train, substeps=req.decimation), 0)
        start: dict[str, float] = {**TYPICAL, **{k: warm[k] for k in ("stiffness", "damping") if k in warm}}
        fit = fit_mujoco_dcmotor(
            rec, joint, fam, segments=train, start=start, substeps=req.decimation, scan=64, seed=req.seed
        )
        sims = simulate_dcmotor(rec, joint, fam, fit.params, req.decimation)
        out[joint] = ModelFit(
            family=family,
            joint_terms=[],
            params=fit.params,
            metrics=_metrics(rec, joint, sims, val),
            loss=fit.loss,
            intervals={k: Interval.from_json(v) for k, v in fit.analysis["intervals"].items()},
            correlation=fit.analysis["correlation"],
            warnings=list(fit.analysis["warnings"]),
            n_params=len(fit.analysis["intervals"]),
            search={
                "evaluations": fit.evaluations,
                "plant": "MuJoCo <dcmotor> (mujoco.rollout)",
                "held": fit.fixed,  # values the log or the caller stated, not fitted
            },
        )
    return out
