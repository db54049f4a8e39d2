"""Public entry points of fitting: plain functions on plain data, used by the CLI and the service worker."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..datasets.recording import Recording
from ..models import parameters
from ..models.families import EFFORT_MODES, FAMILIES, JOINT_TERMS, Family, get_family
from ..models.rollout import RolloutEngine, SegmentBatch, full_params
from .objective import LossScales, pool_metrics, segment_metrics
from .search import BACKENDS, cma_search, refine
from .space import SearchSpace
from .warmstart import warm_start

ProgressFn = Callable[[float, str], None]
"""progress(fraction 0..1, message) — called often; must be cheap."""

MODEL_PENALTY = 0.01  # per extra parameter, relative, when ranking families by validation error


class FitRequestError(ValueError):
    """A fit request that cannot run on this dataset (unknown joint, unknown model family, bad budget)."""


@dataclass
class FitRequest:
    joints: list[str] | None = None  # None = every joint in the recording
    models: list[str] = field(default_factory=lambda: ["dcmotor"])  # family names, see models.families
    generations: int = 200
    population: int = 16  # per CMA-ES run; four runs search side by side
    seed: int = 0
    refine_iterations: int = 200
    device: str = "cpu"
    search_backend: str = "cmaes"  # or "optuna": the same CMA-ES through an Optuna study
    decimation: int = 1  # physics steps per log sample; commands held, delay counted in physics steps
    joint_terms: list[str] | None = None  # None: each family's default (armature, friction, viscous_friction)
    effort_mode: str = "explicit"  # or "implicit": Newton's implicit effort mode, for stiff gains
    window_s: float | None = 1.0  # training rollouts restart from the log every window_s seconds (None: never)
    use_logged_gains: bool = False  # segments' recorded kp/kd (metadata, SI) replace the fitted gains there


def validate_request(rec: Recording, req: FitRequest) -> None:
    """Raise FitRequestError naming the problem, before anything is queued or stored."""
    for name in req.joints or []:
        if name not in rec.joint_names:
            raise FitRequestError(f"unknown joint {name!r}: the dataset has joints {rec.joint_names}")
    if req.joints is not None and not req.joints:
        raise FitRequestError("joints is empty: name at least one joint or omit the field")
    if not req.models:
        raise FitRequestError(f"models is empty: choose from {sorted(FAMILIES)}")
    for m in req.models:
        if m not in FAMILIES:
            raise FitRequestError(f"unknown model family {m!r}: choose from {sorted(FAMILIES)}")
    if not 1 <= req.generations <= 10_000:
        raise FitRequestError(f"budget.generations must be between 1 and 10000, got {req.generations}")
    if not 4 <= req.population <= 4096:
        raise FitRequestError(f"budget.population must be between 4 and 4096, got {req.population}")
    if not 1 <= req.decimation <= 64:
        raise FitRequestError(f"decimation must be between 1 and 64 physics steps per sample, got {req.decimation}")
    for term in req.joint_terms or []:
        if term not in JOINT_TERMS:
            raise FitRequestError(f"unknown joint term {term!r}: choose from {list(JOINT_TERMS)}")
    if req.window_s is not None and not req.window_s > 0:
        raise FitRequestError(f"window_s must be a positive number of seconds or null, got {req.window_s}")
    if req.effort_mode not in EFFORT_MODES:
        raise FitRequestError(f"unknown effort mode {req.effort_mode!r}: choose from {list(EFFORT_MODES)}")
    if req.search_backend not in BACKENDS:
        raise FitRequestError(f"unknown search backend {req.search_backend!r}: choose from {list(BACKENDS)}")
    if not rec.segments:
        raise FitRequestError("the dataset has no segments")
    missing = [s.name for s in rec.segments if s.q_des is None]
    if missing:
        raise FitRequestError(f"segments {missing} have no q_des: closed-loop fits need the commanded position")


def split_segments(n: int, validation_fraction: float = 0.2) -> tuple[list[int], list[int]]:
    """Hold out evenly spaced whole segments for validation; a single segment is train only."""
    if n < 2:
        return list(range(n)), []
    n_val = max(1, int(round(validation_fraction * n)))
    val = sorted({int(round(x)) for x in np.linspace(0, n - 1, n_val + 2)[1:-1]})
    return [i for i in range(n) if i not in val], val


def _family_params(family: Family, space: SearchSpace, x: np.ndarray) -> dict[str, float]:
    """Natural-unit fitted values → the full Isaac Lab parameter dict of a family."""
    out = space.as_dict(x)
    for name in family.params:
        out.setdefault(name, parameters.get(name).neutral)
    if "delay" in out:
        out["delay"] = int(round(out["delay"]))
    return out


def params_array(family: Family, joint_params: list[dict[str, float]]) -> np.ndarray:
    """Per-joint parameter dicts → a (1, J, P) kernel array."""
    cols = {n: np.array([[p[n] for p in joint_params]]) for n in family.params}
    return full_params(family, cols, (1, len(joint_params)))


def fit_recording(rec: Recording, req: FitRequest, progress: ProgressFn | None = None) -> dict:
    """Fit every requested family to every requested joint; returns the API `result` object.

    {"joints": {name: {"models": {family: {"params", "metrics": {"train", "validation", "segments"}, ...}},
                       "best_model": family, "ranking": [...]}}, "split": {...}, "assumptions": {...}, ...}
    """
    validate_request(rec, req)
    t_start = time.perf_counter()
    joints = req.joints or rec.joint_names
    train_ids, val_ids = split_segments(len(rec.segments))
    every = SegmentBatch.from_recording(rec, joints, substeps=req.decimation, logged_gains=req.use_logged_gains)
    window = None if not req.window_s else max(10, int(round(req.window_s / np.median([s.dt for s in rec.segments]))))
    train = SegmentBatch.from_recording(rec, joints, train_ids, substeps=req.decimation, knots=every.knots,
                                        window=window, logged_gains=req.use_logged_gains)
    train_engine = RolloutEngine(train, req.device, effort_mode=req.effort_mode)
    full_engine = RolloutEngine(every, req.device, effort_mode=req.effort_mode)
    scales = LossScales.from_batch(train)
    x_warm = [warm_start(train, j) for j in range(len(joints))]
    val_names = {rec.segments[i].name for i in val_ids}

    per_joint: dict[str, dict] = {j: {"models": {}, "load": asdict(rec.joints[rec.joint_index(j)])} for j in joints}
    n_fam = len(req.models)
    for fi, fam_name in enumerate(req.models):
        family = family_for(req, fam_name)
        space = SearchSpace.for_family(family)
        x0 = [np.array([w[n] for n in space.names]) for w in x_warm]

        def on_gen(g: int, best: np.ndarray, fi=fi, fam_name=fam_name) -> None:
            if progress:
                frac = (fi + 0.9 * (g + 1) / req.generations) / n_fam
                progress(min(frac, 1.0), f"{fam_name}: generation {g + 1}/{req.generations}, "
                                         f"best loss {float(np.max(best)):.4g}")

        res = cma_search(train_engine, family, space, scales, x0, req.generations, req.population,
                         req.seed, on_generation=on_gen, backend=req.search_backend)
        if progress:
            progress((fi + 0.9) / n_fam, f"{fam_name}: refining by least squares")
        res = refine(train_engine, family, space, scales, res, max_iterations=req.refine_iterations)

        fitted = [_family_params(family, space, x) for x in res.best]
        p_arr = params_array(family, fitted)
        traces = full_engine.traces(family, p_arr)
        seg_rows = segment_metrics(traces, every)
        for j, name in enumerate(joints):
            rows = [dict(r, split="validation" if r["segment"] in val_names else "train")
                    for r in seg_rows if r["joint"] == name]
            for r in rows:
                del r["joint"]
            per_joint[name]["models"][fam_name] = {
                "family": fam_name,
                "isaaclab_cfg": family.isaaclab_cfg,
                "joint_terms": list(family.joint_terms),
                "params": fitted[j],
                **({"table_positions": every.knots[j].astype(float).tolist()} if "position_table" in family.clamps
                   else {}),
                "metrics": {
                    "train": pool_metrics([r for r in rows if r["split"] == "train"]),
                    "validation": pool_metrics([r for r in rows if r["split"] == "validation"]),
                    "segments": rows,
                },
                "loss": float(res.best_loss[j]),
                "intervals": res.analysis[j]["intervals"],
                "correlation": res.analysis[j]["correlation"],
                "warnings": res.analysis[j]["warnings"],
                "n_params": len(space.names),
                "warm_start": {n: float(x_warm[j][n]) for n in space.names},
                "search": {"generations": res.generations, "evaluations": res.evaluations,
                           "restarts": res.restarts[j],
                           "population": req.population, "convergence": res.history[j]},
            }
    for name in joints:
        per_joint[name]["ranking"] = _rank(per_joint[name]["models"])
        per_joint[name]["best_model"] = per_joint[name]["ranking"][0]["family"]
    if progress:
        progress(1.0, "done")
    return {
        "joints": per_joint,
        "split": {"method": "whole segments, evenly spaced", "train": [rec.segments[i].name for i in train_ids],
                  "validation": [rec.segments[i].name for i in val_ids]},
        "assumptions": {
            "effort_mode": req.effort_mode,
            "integrator": "semi-implicit Euler with implicit joint damping and Coulomb friction as a "
                          "stopping constraint (consumer-semantics §F, matches Newton SolverMuJoCo)",
            "physics_dt": float(np.median(every.seg_dt)),
            "decimation": req.decimation,
            "delay_unit": "physics steps",
            "loss": "mean squared position error / var(q) + 0.25 · mean squared velocity error / var(qd)",
            "training_windows_s": req.window_s,
            "logged_gains": req.use_logged_gains,
        },
        "request": asdict(req),
        "dataset": rec.summary(),
        "elapsed_s": round(time.perf_counter() - t_start, 3),
    }


def family_for(req: FitRequest, name: str) -> Family:
    """The named family with the request's joint terms, if it asks for other ones."""
    family = get_family(name)
    return family.with_terms(tuple(req.joint_terms)) if req.joint_terms is not None else family


def _rank(models: dict[str, dict]) -> list[dict]:
    """Order families by validation position RMSE (train when no validation) with a parameter penalty."""
    rows = []
    for fam, m in models.items():
        split = "validation" if m["metrics"]["validation"] else "train"
        err = m["metrics"][split]["position_rmse"]
        rows.append({"family": fam, "score": err * (1 + MODEL_PENALTY * m["n_params"]), "split": split,
                     "position_rmse": err, "n_params": m["n_params"]})
    return sorted(rows, key=lambda r: r["score"])


def simulate(rec: Recording, joint: str, family: str, params: dict[str, float], device: str = "cpu",
             joint_terms: list[str] | None = None, decimation: int = 1,
             table_positions: list[float] | None = None, effort_mode: str = "explicit",
             logged_gains: bool = False) -> dict:
    """Roll one fitted model over every segment of one joint; per-segment traces as numpy arrays."""
    fam = get_family(family)
    if joint_terms is not None:
        fam = fam.with_terms(tuple(joint_terms))
    knots = None if table_positions is None else np.asarray([table_positions])
    batch = SegmentBatch.from_recording(rec, [joint], substeps=decimation, knots=knots, logged_gains=logged_gains)
    tr = RolloutEngine(batch, device, effort_mode=effort_mode).traces(fam, params_array(fam, [params]))
    return {batch.seg_names[s]: {k: tr[k][0, batch.segment_slice(s)] for k in ("q", "qd", "computed", "applied")}
            for s in range(batch.n_segments)}


def envelope(family: str, params: dict[str, float], v_max: float, n: int = 121) -> dict:
    """The family's effort window over joint velocity, for the torque–speed plot."""
    v = np.linspace(-v_max, v_max, n)
    elim = params.get("actuator_effort_limit", np.inf)
    if "dc_motor" in get_family(family).clamps:
        sat, vlim = params["saturation_effort"], params["actuator_velocity_limit"]
        corner = vlim * (1 + elim / sat)
        vc = np.clip(v, -corner, corner)
        hi = np.minimum(sat * (1 - vc / vlim), elim)
        lo = np.maximum(sat * (-1 - vc / vlim), -elim)
    else:
        hi, lo = np.full(n, elim), np.full(n, -elim)
    fin = lambda a: [float(x) if np.isfinite(x) else None for x in a]  # noqa: E731
    return {"velocity": v.tolist(), "effort_max": fin(hi), "effort_min": fin(lo)}


def report_data(rec: Recording, result: dict, max_points: int = 1500) -> dict:
    """Simulated traces and envelope points for the report plots (downsampled, JSON-ready)."""
    val = set(result["split"]["validation"])
    out: dict[str, dict] = {}
    for joint, jr in result["joints"].items():
        fam = jr["best_model"]
        model = jr["models"][fam]
        params = model["params"]
        assumed = result.get("assumptions", {})
        sims = simulate(rec, joint, fam, params, joint_terms=model.get("joint_terms"),
                        decimation=assumed.get("decimation", 1), table_positions=model.get("table_positions"),
                        effort_mode=assumed.get("effort_mode", "explicit"),
                        logged_gains=assumed.get("logged_gains", False))
        j = rec.joint_index(joint)
        segs, pv, pe = [], [], []
        has_tau = all(s.tau is not None for s in rec.segments)
        for seg in rec.segments:
            sim = sims[seg.name]
            step = max(1, seg.n // max_points)
            sl = slice(None, None, step)
            segs.append({
                "name": seg.name, "split": "validation" if seg.name in val else "train",
                "t": seg.t[sl].tolist(), "q": seg.q[sl, j].tolist(), "q_sim": sim["q"][sl].tolist(),
                "q_des": seg.q_des[sl, j].tolist(),
                "qd": seg.qd[sl, j].tolist(), "qd_sim": sim["qd"][sl].tolist(),
                "tau_sim": sim["applied"][sl].tolist(),
            })
            pv.append(seg.qd[sl, j])
            pe.append(seg.tau[sl, j] if has_tau else sim["applied"][sl])
        v_all = np.concatenate(pv)
        out[joint] = {
            "family": fam,
            "segments": segs,
            "envelope": envelope(fam, params, max(1.2 * float(np.max(np.abs(v_all))), 1e-3)),
            "points": {"velocity": v_all.tolist(), "effort": np.concatenate(pe).tolist(),
                       "source": "measured" if has_tau else "simulated"},
        }
    return {"joints": out}
