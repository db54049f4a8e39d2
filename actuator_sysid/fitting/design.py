"""Predicted identifiability of a designed excitation: what a fit of it would tell, before anyone records it.

The nominal model is simulated on the planned commands; its trajectory stands in for the measurement.
The fitter's own pieces then run on it: the finite-difference Jacobian of the residuals in registry unit
coordinates (one batched launch of perturbed candidates), the initial-state sensitivity, and
`uncertainty.analyse` — with the stated sensor noise in place of measured residuals. Integer delays are
judged as the fitter judges them (`delay_profile`): the loss at a neighbouring delay, after the continuous
parameters have absorbed what they can (linearised: the residual change projected off the Jacobian),
must rise at least 5 % above the noise floor. The prediction is a lower bound on what the fit will report:
it assumes the nominal model is right and the noise white.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..datasets.excitation import ExcitationError, ExcitationSpec, design, excitation_files
from ..datasets.recording import Recording
from ..models import parameters
from ..models.families import FAMILIES, Family, get_family
from ..models.rollout import RolloutEngine, SegmentBatch
from .fit import params_array
from .objective import VELOCITY_WEIGHT, LossScales, residual_blocks, residuals
from .plan import split_segments
from .search import COV_STEP, candidate_params, fd_jacobian, initial_state_sensitivity
from .space import SearchSpace
from .uncertainty import Z95, analyse, delay_profile

NOMINAL: dict[str, float] = {
    "stiffness": 20.0,
    "damping": 0.5,
    "saturation_effort": 5.0,
    "actuator_velocity_limit": 10.0,
    "actuator_effort_limit": 3.0,
    "armature": 0.01,
    "friction": 0.1,
    "viscous_friction": 0.05,
    "delay": 2,
    "dynamic_friction": 0.08,
    "ki": 5.0,
    "integral_max": 0.5,
    "encoder_offset": 0.01,
    **{f"lookup_effort_{k}": 3.0 for k in range(parameters.TABLE_KNOTS)},
}
"""Nominal actuator parameters used where the request names none (a small servo); state your own."""

WINDOW_S = 1.0  # the fitter's default training windows (FitRequest.window_s)


def _noise(spec: ExcitationSpec) -> tuple[float, float]:
    """Position and velocity noise σ; velocity defaults to central differences of noisy positions."""
    sq = float(spec.noise_q)
    sqd = float(spec.noise_qd) if spec.noise_qd is not None else sq * spec.rate / math.sqrt(2.0)
    return sq, sqd


def _nominal(spec: ExcitationSpec, family: Family) -> dict[str, float]:
    """The family's parameters: the request's nominal values, then kp/kd, then NOMINAL."""
    given = dict(spec.nominal or {})
    for key, name in (("kp", "stiffness"), ("kd", "damping")):
        if getattr(spec, key) is not None:
            given.setdefault(name, float(getattr(spec, key)))
    out = {}
    for name in family.params:
        p = parameters.get(name)
        if name not in given and name not in NOMINAL:
            raise ExcitationError(f"nominal: {family.name} needs a nominal {name} ({p.unit}); state it")
        v = float(given.get(name, NOMINAL.get(name, 0.0)))
        if not (p.lower <= v <= p.upper):
            raise ExcitationError(
                f"nominal {name} = {v:g} {p.unit} is outside the fitted range "
                f"[{p.lower:g}, {p.upper:g}]; state a value within it"
            )
        out[name] = float(round(v)) if p.integer else v
    return out


def _check(spec: ExcitationSpec) -> None:
    """Reject unknown families and nominal names before simulating anything."""
    for m in spec.families:
        if m not in FAMILIES:
            raise ExcitationError(f"families: unknown model family {m!r}; choose from {sorted(FAMILIES)}")
    for name, v in (spec.nominal or {}).items():
        if name not in parameters.BY_NAME:
            raise ExcitationError(f"nominal: unknown parameter {name!r}; known: {sorted(parameters.BY_NAME)}")
        if not (isinstance(v, int | float) and math.isfinite(v)):
            raise ExcitationError(f"nominal: {name} must be a finite number, got {v!r}")


def _regime(family: Family, p: dict[str, float], trace: dict[str, np.ndarray], qd: np.ndarray) -> dict:
    """How far the nominal run reaches into the clamps: fraction of time clipped, peak speed."""
    driven = trace["driven"]
    comp, app = trace["computed"][driven], trace["applied"][driven]
    clipped = np.abs(comp - app) > 1e-6 * np.maximum(np.abs(comp), 1e-3)
    out = {
        "fraction_clipped": float(np.mean(clipped)) if clipped.size else 0.0,
        "peak_speed": float(np.max(np.abs(qd))) if qd.size else 0.0,
    }
    if "dc_motor" in family.clamps:
        out["peak_speed_over_velocity_limit"] = out["peak_speed"] / p["actuator_velocity_limit"]
    return out


def _why(name: str, regime: dict, reason: str) -> str:
    """A short reason for the family summary, naming the regime the excitation misses where it can."""
    if name == "actuator_velocity_limit" and regime.get("peak_speed_over_velocity_limit", 1.0) < 0.5:
        return (
            f"velocity limit not reached (peak speed {regime['peak_speed']:.3g} rad/s is "
            f"{100 * regime['peak_speed_over_velocity_limit']:.0f} % of it)"
        )
    if (
        name in ("saturation_effort", "actuator_velocity_limit", "actuator_effort_limit")
        and regime["fraction_clipped"] < 0.01
    ):
        return "torque limits hardly reached (clipped {:.1f} % of the time)".format(
            100 * regime["fraction_clipped"]
        )
    return reason


def _nominal_batch(
    rec: Recording, family: Family, nominal: dict[str, float], device: str
) -> tuple[dict[str, np.ndarray], SegmentBatch]:
    """The nominal simulation of rec's commands, and the fitter's training batch on it (q, qd replaced by it)."""
    joint = rec.joint_names[0]
    every = SegmentBatch.from_recording(rec, [joint])
    sim = RolloutEngine(every, device, threads=1).traces(family, params_array(family, [nominal]))
    segs = []
    for s, seg in enumerate(rec.segments):
        sl = every.segment_slice(s)
        segs.append(
            dataclasses.replace(
                seg,
                q=sim["q"][0, sl, None].astype(np.float64),
                qd=sim["qd"][0, sl, None].astype(np.float64),
                tau=None,
            )
        )
    nom = dataclasses.replace(rec, segments=segs)
    train_ids, _ = split_segments(len(segs))
    window = max(10, int(round(WINDOW_S / float(np.median([s.dt for s in segs])))))
    return sim, SegmentBatch.from_recording(nom, [joint], train_ids, knots=every.knots, window=window)


def _noise_residuals(blocks: np.ndarray, scales: LossScales, noise_q: float, noise_qd: float) -> np.ndarray:
    """The stated noise, as residual rows: alternating signs so the AR(1) inflation sees white noise."""
    norm = math.sqrt(scales.n_samples[0])
    per_block = np.where(
        blocks % 2 == 0,
        noise_q / (scales.sigma_q[0] * norm),
        noise_qd * math.sqrt(VELOCITY_WEIGHT) / (scales.sigma_qd[0] * norm),
    )
    return per_block * np.where(np.arange(blocks.size) % 2 == 0, 1.0, -1.0)


def _delay_profiles(
    run, space: SearchSpace, x: np.ndarray, r_clean: np.ndarray, jac: np.ndarray, floor: float
) -> dict[str, dict]:
    """The fitter's delay profile of each integer parameter, continuous parameters re-fitted (linearly)."""
    cont = ~space.integer
    out = {}
    for i in np.flatnonzero(space.integer):
        losses = {int(x[i]): floor}
        for d in (x[i] - 1, x[i] + 1):
            if space.lower[i] <= d <= space.upper[i]:
                xd = x.copy()
                xd[i] = d
                delta = run(xd[None])[0] - r_clean
                if cont.any():
                    delta = delta - jac @ np.linalg.lstsq(jac, delta, rcond=None)[0]
                losses[int(d)] = floor + float(np.sum(delta**2))
        out[space.names[i]] = delay_profile(losses, int(x[i]))
    return out


def _parameter_rows(
    space: SearchSpace, x: np.ndarray, nominal: dict[str, float], intervals: dict, regime: dict, floor: float
) -> tuple[dict[str, dict], list[str], list[str]]:
    """Per parameter: predicted half-width (or neighbour-loss rise for a delay) and why it is unidentifiable;
    with the identifiable names and the unidentifiable ones' reasons."""
    params, good, bad = {}, [], []
    for name in space.names:
        iv = intervals[name]
        p = parameters.get(name)
        row: dict = {"nominal": nominal[name], "unit": p.unit, "identifiable": bool(iv["identified"])}
        if p.integer:
            rise = min(
                (
                    v / floor - 1
                    for d, v in iv["loss_at"].items()
                    if int(d) != int(x[space.names.index(name)])
                ),
                default=0.0,
            )
            row.update(
                half_width95_relative=0.0 if iv["identified"] else None, neighbour_loss_rise=float(rise)
            )
        else:
            sd = iv["std_relative"]
            row.update(
                half_width95_relative=float(Z95 * sd) if sd is not None else None, interval95=iv["interval95"]
            )
        if not iv["identified"]:
            row["reason"] = _why(name, regime, iv.get("reason", ""))
            bad.append(f"{name} → unidentifiable ({row['reason']})")
        else:
            good.append(name)
        params[name] = row
    return params, good, bad


def predict_family(
    rec: Recording,
    family: Family,
    nominal: dict[str, float],
    noise_q: float,
    noise_qd: float,
    device: str = "cpu",
) -> dict:
    """Predicted 95 % half-widths and identifiability of one family's parameters on rec's commands.

    rec: one joint, commands in q_des (q's first sample is the start); q and qd are replaced by the
    nominal simulation. The segment split and training windows are the fitter's defaults.
    """
    sim, batch = _nominal_batch(rec, family, nominal, device)
    engine = RolloutEngine(batch, device, threads=1)
    scales = LossScales.from_batch(batch)
    space = SearchSpace.for_family(family)
    x = np.array([nominal[n] for n in space.names], float)
    cont = ~space.integer

    def run(xs: np.ndarray) -> np.ndarray:
        return residuals(
            engine.traces(family, candidate_params(family, space, xs[:, None, :])), batch, scales, 0
        )

    blocks = residual_blocks(batch, 0)
    r_noise = _noise_residuals(blocks, scales, noise_q, noise_qd)
    analysis: dict = {"intervals": {}, "warnings": []}
    r_clean, jac = fd_jacobian(lambda us, _: run(space.from_unit(us)), space.to_unit(x), COV_STEP, 1.0, cont)
    if cont.any():
        jac_n, _ = initial_state_sensitivity(engine, family, space, scales, x, r_clean, blocks)
        var_n = np.tile([noise_q**2, noise_qd**2], batch.n_segments)
        analysis = analyse(space, x, jac, r_noise, blocks, cont, jac_n, var_n)
    floor = float(np.sum(r_noise**2))
    analysis["intervals"].update(_delay_profiles(run, space, x, r_clean, jac, floor))
    regime = _regime(
        family,
        nominal,
        {
            **{k: sim[k][0] for k in ("computed", "applied")},
            "driven": np.concatenate([np.full(s.n, not s.metadata.get("free_swing")) for s in rec.segments]),
        },
        sim["qd"][0],
    )
    params, good, bad = _parameter_rows(space, x, nominal, analysis["intervals"], regime, floor)
    if not bad:
        summary = f"{family.name}: identifiable"
    else:
        summary = f"{family.name}: " + (f"{', '.join(good)} identifiable; " if good else "") + "; ".join(bad)
    return {
        "family": family.name,
        "identifiable": not bad,
        "summary": summary,
        "parameters": params,
        "regime": regime,
        "correlation_warnings": [w for w in analysis["warnings"] if "hard to separate" in w],
    }


def predict(spec: ExcitationSpec, rec: Recording | None = None, device: str = "cpu") -> dict:
    """Per-family predicted identifiability of the excitation `spec` designs, for its load and noise."""
    _check(spec)
    rec = rec if rec is not None else design(spec)
    noise_q, noise_qd = _noise(spec)
    fams = {}
    for m in spec.families:
        fam = get_family(m)
        fams[m] = predict_family(rec, fam, _nominal(spec, fam), noise_q, noise_qd, device)
    return {
        "noise": {"q": noise_q, "qd": noise_qd},
        "load": {"inertia": spec.J, "gravity_torque": spec.mgl},
        "method": "nominal model simulated on the commands; finite-difference Jacobian of the fitter's "
        "residuals in registry unit coordinates (the fitter's windows and split); 95 % half-widths "
        "from the fitter's covariance with the stated noise; delays by the fitter's 5 % "
        "neighbour-loss rule",
        "families": fams,
        "summary": [f["summary"] for f in fams.values()],
    }


def excitation_with_identifiability(
    spec: ExcitationSpec, device: str = "cpu"
) -> tuple[str, dict, dict | None]:
    """The excitation's CSV text and sidecar (which then holds the prediction), and the prediction itself."""
    spec.check()
    rec = design(spec)
    pred = predict(spec, rec, device) if spec.families else None
    if pred is not None:
        rec.metadata["excitation"]["identifiability"] = pred
    text, side = excitation_files(spec, rec)
    return text, side, pred


def format_prediction(pred: dict) -> str:
    """Plain-text table of a prediction, for the CLI."""
    lines = [
        f"predicted identifiability (noise σ_q = {pred['noise']['q']:.3g} rad, "
        f"σ_qd = {pred['noise']['qd']:.3g} rad/s):"
    ]
    for fam in pred["families"].values():
        lines.append(f"  {fam['summary']}")
        for name, row in fam["parameters"].items():
            hw = row["half_width95_relative"]
            hw_s = (
                "exact"
                if row["unit"] == "physics steps" and row["identifiable"]
                else (f"±{100 * hw:.3g} %" if hw is not None else "unbounded")
            )
            lines.append(
                f"    {name:<26}{row['nominal']:>10.4g} {row['unit']:<14}{hw_s:>14}  "
                f"{'identifiable' if row['identifiable'] else 'UNIDENTIFIABLE'}"
            )
    return "\n".join(lines)
