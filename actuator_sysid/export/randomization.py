"""Domain-randomization ranges from a fit, shaped for Isaac Lab's event terms.

Ranges come from the fit's 95 % intervals where the result has them, taken jointly: each parameter's interval
with its correlated partners held at their fitted values (the conditional interval, its marginal narrowed by
1/√(R⁻¹)ᵢᵢ of the fit's correlation matrix R), so drawing every parameter on its own stays inside what the data
allow together, where the marginal intervals of two sloppy partners drawn apart would not; a parameter the fit did not identify
(or the user gave) gets no range (its `sources` entry says why), since a range from its interval would be a
guess (clipped to the registry bounds and
to non-negative values); otherwise from the spread of the same family's values across joints; otherwise a
stated ±10 % around the fitted value. Isaac Lab shapes: `randomize_actuator_gains` (stiffness, damping),
`randomize_joint_parameters` (friction, armature), both with operation "abs" and a uniform distribution,
and `min_delay` / `max_delay` for a DelayedPDActuatorCfg. Quantities no event term covers (viscous
friction, effort limits, DC-motor envelope) are listed per joint for a custom event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np

from ..fitting.result import Interval, ResultLike, as_result
from ..models import parameters
from .selection import choose

DEFAULT_RELATIVE = 0.10
STANDS_ALONE = 0.999  # a conditional factor above this: the parameter's own interval is its range


def conditional_factors(correlation: Mapping) -> dict[str, float]:
    """Per parameter, its conditional σ over its marginal σ, 1/√(R⁻¹)ᵢᵢ: 1 for a parameter correlated with
    none, towards 0 for one its partners can stand in for (an empty or malformed matrix gives none)."""
    names = list(correlation.get("names") or [])
    r = np.asarray(correlation.get("matrix") or [], np.float64)
    if not names or r.shape != (len(names), len(names)):
        return {}
    r = np.where(np.isfinite(r), r, 0.0)
    r[np.diag_indices_from(r)] = 1.0  # a blind parameter's row is zeroed by the fit: it stands alone
    precision = np.diag(np.linalg.pinv(r, rcond=1e-10, hermitian=True))
    return {
        n: float(min(1.0, 1.0 / math.sqrt(pi))) if pi > 0 else 1.0
        for n, pi in zip(names, precision, strict=True)
    }


def _joint_interval(name: str, value: float, iv: Interval, factor: float) -> tuple[float, float]:
    """The 95 % interval of one parameter with its partners held: its marginal narrowed around the estimate by
    `factor`, in ln(value) for a log-scaled parameter (whose interval is symmetric there)."""
    assert iv.interval95 is not None
    lo, hi = (float(x) for x in iv.interval95)
    if factor > STANDS_ALONE:
        return lo, hi  # correlated with none: its own interval, as stated
    est = float(iv.estimate) if iv.estimate is not None else value
    if parameters.get(name).scale == "log" and est > 0 and lo > 0:
        return est * (lo / est) ** factor, est * (hi / est) ** factor
    return est - factor * (est - lo), est + factor * (hi - est)


def _ranges(result: ResultLike, families: dict[str, str] | str | None) -> dict[str, dict]:
    typed = as_result(result)
    models = choose(typed, families)
    by_family: dict[str, list] = {}
    for m in models:
        by_family.setdefault(m.family.name, []).append(m)
    out = {}
    for m in models:
        fit = typed.model(m.joint, m.family.name)
        intervals = fit.intervals
        factors = conditional_factors(fit.correlation)
        ranges, sources = {}, {}
        left_out = {
            **{n: "not identified: " + str(u.get("reason", "")) for n, u in (fit.unidentified or {}).items()},
            **{n: "not identified: " + (iv.reason or "") for n, iv in intervals.items() if not iv.identified},
            **{n: "given by the user, not fitted" for n in fit.given or {}},
        }
        for name in m.family.params:
            v = m.params.get(name)
            if name in left_out:
                sources[name] = "no range: " + left_out[name]
                continue
            if v is None or not math.isfinite(float(v)):
                continue
            p = parameters.get(name)
            iv = intervals.get(name)
            peers = [
                float(o.params[name])
                for o in by_family[m.family.name]
                if name in o.params and math.isfinite(float(o.params[name]))
            ]
            if iv is not None and iv.interval95:
                f = factors.get(name, 1.0)
                lo, hi = _joint_interval(name, float(v), iv, f)
                src = (
                    "interval95"
                    if f > STANDS_ALONE
                    else f"joint interval95: its partners held at their fitted values ({f:.2g}× its own)"
                )
            elif len(peers) > 1 and max(peers) > min(peers):
                lo, hi, src = min(peers), max(peers), "spread across joints"
            else:
                d = abs(float(v)) * DEFAULT_RELATIVE if name != "delay" else 1.0
                lo, hi, src = (
                    float(v) - d,
                    float(v) + d,
                    f"default ±{DEFAULT_RELATIVE:.0%}" if name != "delay" else "default ±1 step",
                )
            lo, hi = max(float(lo), p.lower if p.lower < 0 else 0.0), min(float(hi), p.upper)
            if p.integer:
                lo, hi = int(math.floor(lo)), int(math.ceil(hi))
            ranges[name] = [lo, hi]
            sources[name] = src
        out[m.joint] = {"family": m.family.name, "ranges": ranges, "sources": sources}
    return out


def randomization(
    result: ResultLike, families: dict[str, str] | str | None = None, asset: str = "robot"
) -> dict:
    """The randomization document: per-joint ranges and Isaac Lab event-term parameters."""
    joints = _ranges(result, families)
    events, cfgs = {}, {}
    for joint, j in joints.items():
        r = j["ranges"]
        asset_cfg = {"name": asset, "joint_names": [joint]}
        gains = {f"{k}_distribution_params": r[k] for k in ("stiffness", "damping") if k in r}
        if gains:
            events[f"actuator_gains_{joint}"] = {
                "func": "isaaclab.envs.mdp.events:randomize_actuator_gains",
                "mode": "reset",
                "params": {"asset_cfg": asset_cfg, **gains, "operation": "abs", "distribution": "uniform"},
            }
        jp = {f"{k}_distribution_params": r[k] for k in ("friction", "armature") if k in r}
        if jp:
            events[f"joint_parameters_{joint}"] = {
                "func": "isaaclab.envs.mdp.events:randomize_joint_parameters",
                "mode": "startup",
                "params": {"asset_cfg": asset_cfg, **jp, "operation": "abs", "distribution": "uniform"},
            }
        if "delay" in r:
            cfgs[joint] = {"min_delay": r["delay"][0], "max_delay": r["delay"][1]}
    return {
        "units": {p.name: p.unit for p in parameters.PARAMS},
        "joints": joints,
        "isaaclab": {
            "events": events,
            "actuator_cfg": cfgs,
            "note": "EventTermCfg(func=..., mode=..., params=...) with SceneEntityCfg(**asset_cfg). "
            "A delay range needs Isaac Lab's PyTorch path: Newton-native execution fixes the delay at "
            "max_delay (consumer-semantics §A.11). viscous_friction and effort limits have no event term.",
        },
    }


def render_randomization(result: ResultLike, families: dict[str, str] | str | None = None) -> str:
    return json.dumps(randomization(result, families), indent=2) + "\n"
