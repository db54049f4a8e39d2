"""What the best model's residual still holds, in words: a friction band near standstill, a dead zone,
missing friction, a position-dependent error, a lag, or nothing but noise.

Input is the report's per-segment traces (`report_data(...)["joints"][j]["segments"]`: t, q, q_sim, q_des, qd,
qd_sim), so the diagnosis reads exactly what the report plots. Each finding is plain data: kind, strength,
a sentence, and the x/y of one small plot. The residual is r = q − q_sim of a closed-loop rollout of the
whole segment; most patterns are read where the rollout is quasi-static (both joints still, or the same
position passed in both directions), because once a trajectory diverges its residual is mostly phase error.

Thresholds are set so that measurement noise alone says "no structure" and each injected effect is named
(tests/test_diagnostics.py). Under a PD loop static friction F holds the joint like a dead zone of width
F / kp, so the two findings are told apart by what happens in motion: stiction fades with speed (the error
sits near standstill), a dead zone or backlash keeps its offset, Coulomb friction also slows the motion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

V_SMALL = 0.2  # rad/s: below this the joint counts as still
MIN_SAMPLES = 20  # a segment shorter than this is skipped
PLOT_POINTS = 1500  # scatter points per finding plot

# thresholds (see the module docstring and tests/test_diagnostics.py)
LAG_SHARE = 0.5  # a shift must remove at least this share of the residual energy
LAG_MIN_SAMPLES = 0.5  # ... and be at least half a physics step (half a sample without physics_dt)
BAND_EXCESS = 0.05  # friction band: of the log's standstill, the net share the simulation spends moving
BAND_RATIO = 1.3  # friction band: residual RMS at standstill over residual RMS in motion
HOLD_SIGMAS = 5.0  # a hold offset must exceed this many noise standard deviations
SHORT_SHARE = 0.75  # dead zone: share of held samples where the log stopped short of the simulation
ENERGY_GAP = 0.05  # friction: relative difference of the kinetic energy (mean qd²) of log and simulation
POSITION_SHARE = 0.6  # position: share of the variance the other direction's binned mean predicts
WHITE_P = 0.01  # Ljung–Box p-value below which the residual is not white
WHITE_LAGS = 10
NOISE_LEVEL = 0.5  # a structured part below this fraction of the noise RMS is noise for any practical purpose


@dataclass
class _Seg:
    """One segment's traces as float arrays, finite samples only."""

    name: str
    dt: float
    q: np.ndarray
    q_sim: np.ndarray
    q_des: np.ndarray
    qd: np.ndarray
    qd_sim: np.ndarray

    @property
    def r(self) -> np.ndarray:
        return self.q - self.q_sim


def _segments(segments: list[dict]) -> list[_Seg]:
    """The report segments as arrays; segments without simulated traces or too short are left out."""
    out: list[_Seg] = []
    for s in segments:
        if not s.get("q_sim") or not s.get("qd_sim"):
            continue
        a = {
            k: np.asarray(s.get(k) or [], dtype=np.float64)
            for k in ("t", "q", "q_sim", "q_des", "qd", "qd_sim")
        }
        n = min(len(v) for v in a.values())
        if n < MIN_SAMPLES:
            continue
        a = {k: v[:n] for k, v in a.items()}
        ok = np.all([np.isfinite(v) for v in a.values()], axis=0)
        if not ok.all():  # a diverged rollout: keep the finite prefix so shifts stay meaningful
            n = int(np.argmin(ok))  # the first non-finite sample
            if n < MIN_SAMPLES:
                continue
            a = {k: v[:n] for k, v in a.items()}
        dt = float(np.median(np.diff(a["t"])))
        out.append(
            _Seg(
                str(s.get("name", len(out))),
                dt if dt > 0 else 0.0,
                a["q"],
                a["q_sim"],
                a["q_des"],
                a["qd"],
                a["qd_sim"],
            )
        )
    return out


def _noise_sigma(x: np.ndarray) -> float:
    """Standard deviation of the white part of x, from the MAD of its second differences (a smooth error
    barely changes them; white noise of σ gives them σ·√6)."""
    d = np.diff(x, 2)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(6.0)) if d.size else 0.0


def _thin(*arrays: np.ndarray) -> list[list[float]]:
    """Every array cut to at most PLOT_POINTS evenly spaced samples, as lists (JSON-ready)."""
    n = len(arrays[0])
    idx = np.linspace(0, n - 1, min(n, PLOT_POINTS)).astype(int) if n else np.zeros(0, int)
    return [np.round(a[idx], 7).tolist() for a in arrays]


def _plot(title: str, x_label: str, y_label: str, traces: list[dict]) -> dict:
    """A small plot as plain data: each trace has name, mode (markers|lines), x, y."""
    return {"title": title, "x_label": x_label, "y_label": y_label, "traces": traces}


def _lag(segs: list[_Seg], physics_dt: float | None) -> dict | None:
    """Shift of the log against the simulation that removes most of the position residual (pooled).

    A fitted family without a delay can mimic one with more damping, which leaves little for a shift to
    remove: such a fit shows up as missing or excess friction instead.
    """
    dt = float(np.median([s.dt for s in segs]))
    if dt <= 0:
        return None
    m = max(5, math.ceil(0.1 / dt))
    use = [s for s in segs if len(s.q) > 4 * m]
    if not use:
        m = max(2, min(len(s.q) for s in segs) // 5)
        use = [s for s in segs if len(s.q) > 4 * m]
        if not use:
            return None
    shifts = np.arange(-4 * m, 4 * m + 1) / 4.0  # quarter samples: downsampled traces still resolve a step
    energy = np.zeros(shifts.size)
    for s in use:
        n = len(s.q)
        b = s.q_sim[m : n - m]
        for i, sh in enumerate(shifts):
            lo, f = int(np.floor(sh)), float(sh - np.floor(sh))
            a = s.q[
                m + lo : n - m + lo
            ]  # the log sh samples later against the simulation, linearly interpolated
            if f:
                a = (1.0 - f) * a + f * s.q[m + lo + 1 : n - m + lo + 1]
            d = a - b
            energy[i] += float(d @ d)
    i = int(np.argmin(energy))
    e0 = energy[4 * m]
    if e0 <= 0:
        return None
    share = 1.0 - energy[i] / e0
    frac = 0.0
    if 0 < i < shifts.size - 1:
        den = energy[i - 1] - 2 * energy[i] + energy[i + 1]
        frac = 0.125 * (energy[i - 1] - energy[i + 1]) / den if den > 0 else 0.0
    shift = float(shifts[i] + frac)
    rms = np.sqrt(energy / sum(len(s.q) - 2 * m for s in use))
    ms = shift * dt * 1e3
    steps = shift * dt / physics_dt if physics_dt else shift
    finding = {
        "kind": "lag",
        "strength": float(share),
        "shift_samples": shift,
        "shift_ms": ms,
        "shift_steps": steps,
        "plot": _plot(
            "residual RMS with the log shifted against the simulation",
            "shift [ms]",
            "position residual RMS [rad]",
            [
                {
                    "name": "residual RMS",
                    "mode": "lines",
                    "x": (shifts * dt * 1e3).round(4).tolist(),
                    "y": rms.round(9).tolist(),
                }
            ],
        ),
    }
    if share < LAG_SHARE or abs(steps if physics_dt else shift) < LAG_MIN_SAMPLES:
        return None
    evidence = f"shifting the log removes {100 * share:.0f} % of the residual"
    unit = "physics steps" if physics_dt else "samples"
    at = f"samples at {1.0 / dt:.4g} Hz"
    if shift > 0:
        finding["sentence"] = (
            f"The simulation leads the log by {ms:.1f} ms ({shift:.1f} {at}): a command "
            f"delay of ~{round(steps)} {unit} is missing ({evidence}) — try a family with a delay."
        )
    else:
        finding["sentence"] = (
            f"The log leads the simulation by {-ms:.1f} ms ({-shift:.1f} {at}): the "
            f"model's delay is ~{round(-steps)} {unit} too long, or the log's timestamps are "
            f"shifted ({evidence})."
        )
    return finding


def _still(segs: list[_Seg]) -> dict[str, np.ndarray]:
    """Pooled standstill masks and the simulation's approach direction before each standstill."""
    q, r, qd, qds, e, appr = [], [], [], [], [], []
    for s in segs:
        moving = np.abs(s.qd_sim) > V_SMALL
        last = np.maximum.accumulate(np.where(moving, np.arange(len(s.q)), 0))
        appr.append(np.where(moving[last], np.sign(s.qd_sim[last]), 0.0))
        q.append(s.q)
        r.append(s.r)
        qd.append(s.qd)
        qds.append(s.qd_sim)
        e.append(s.q_des - s.q)
    cat = {k: np.concatenate(v) for k, v in dict(q=q, r=r, qd=qd, qd_sim=qds, e=e, approach=appr).items()}
    cat["still"] = np.abs(cat["qd"]) < V_SMALL
    cat["sim_still"] = np.abs(cat["qd_sim"]) < V_SMALL
    return cat


def _hold(p: dict[str, np.ndarray], sigma: float) -> dict | None:
    """Where both joints stand still: how far the log stops from the simulation, and whether short of it."""
    both = p["still"] & p["sim_still"]
    if both.sum() < MIN_SAMPLES:
        return None
    r = p["r"][both]
    width = float(np.quantile(np.abs(r), 0.9))
    big = np.abs(r) > HOLD_SIGMAS * max(sigma, 1e-12)
    big &= p["approach"][both] != 0
    short = (
        float(np.mean(r[big] * p["approach"][both][big] < 0)) if big.sum() >= MIN_SAMPLES else float("nan")
    )
    return {
        "width": width,
        "samples": int(both.sum()),
        "short": short,
        "significant": width > HOLD_SIGMAS * max(sigma, 1e-12),
    }


def _friction_band(p: dict[str, np.ndarray], hold: dict | None) -> dict | None:
    """Residual concentrated where the joint is nearly still, and the log stuck while the simulation moves."""
    still, sim_still, r = p["still"], p["sim_still"], p["r"]
    if still.mean() < 0.02 or (~still).sum() < MIN_SAMPLES:
        return None
    rms_still = float(np.sqrt(np.mean(r[still] ** 2)))
    rms_moving = float(np.sqrt(np.mean(r[~still] ** 2)))
    ratio = rms_still / max(rms_moving, 1e-12)
    excess = float((np.sum(still & ~sim_still) - np.sum(sim_still & ~still)) / still.sum())
    if excess < BAND_EXCESS or ratio < BAND_RATIO or not (hold and hold["significant"]):
        return None
    x, y = _thin(p["qd"], r)
    lim = float(np.quantile(np.abs(p["qd"]), 0.98))
    edges = np.linspace(-lim, lim, 25)
    idx = np.clip(np.searchsorted(edges, p["qd"], side="right") - 1, 0, edges.size - 2)
    cnt = np.bincount(idx, minlength=edges.size - 1)
    band_rms = np.sqrt(np.bincount(idx, weights=r**2, minlength=edges.size - 1) / np.maximum(cnt, 1))
    keep = cnt >= 5
    centres = 0.5 * (edges[1:] + edges[:-1])
    return {
        "kind": "friction_band",
        "strength": ratio,
        "rms_still": rms_still,
        "rms_moving": rms_moving,
        "stuck_share": excess,
        "sentence": (
            f"The error sits where the joint is nearly still (|qd| < {V_SMALL:g} rad/s): residual RMS "
            f"{rms_still:.3g} rad there against {rms_moving:.3g} rad in motion, and for "
            f"{100 * excess:.0f} % of the log's standstill the simulation is still moving: static "
            "friction or stiction the model lacks — try a Stribeck family."
        ),
        "plot": _plot(
            "position residual vs measured velocity",
            "qd [rad/s]",
            "q − q_sim [rad]",
            [
                {"name": "residual", "mode": "markers", "x": x, "y": y},
                {
                    "name": "RMS per velocity bin",
                    "mode": "lines",
                    "x": centres[keep].round(6).tolist(),
                    "y": band_rms[keep].round(9).tolist(),
                },
            ],
        ),
    }


def _dead_zone(p: dict[str, np.ndarray], hold: dict | None, stiffness: float | None) -> dict | None:
    """The log stops short of where the simulation settles: the command moves that far before the joint follows."""
    if not hold or not hold["significant"] or not hold["short"] >= SHORT_SHARE:
        return None
    w = hold["width"]
    friction = (
        f"of ~{stiffness * w:.3g} N·m (stiffness {stiffness:.3g} N·m/rad × that width)"
        if stiffness
        else "F ≈ stiffness × that width"
    )
    still, sim_still = p["still"], p["sim_still"]
    x, y = _thin(p["e"][still], p["qd"][still])
    es = (p["e"] + p["r"])[sim_still]  # q_des − q_sim
    xs, ys = _thin(es, p["qd_sim"][sim_still])
    return {
        "kind": "dead_zone",
        "strength": w,
        "width_rad": w,
        "short_share": hold["short"],
        "sentence": (
            f"The joint stays put while the command moves up to ~{w:.3g} rad away: where both stand "
            f"still the log stops short of the simulation in {100 * hold['short']:.0f} % of "
            f"{hold['samples']} samples (90 % within {w:.3g} rad): a dead zone or backlash the model "
            f"lacks, or static friction {friction}."
        ),
        "plot": _plot(
            "velocity vs tracking error while still",
            "q_des − q [rad]",
            "qd [rad/s]",
            [
                {"name": "log", "mode": "markers", "x": x, "y": y},
                {"name": "simulation", "mode": "markers", "x": xs, "y": ys},
            ],
        ),
    }


def _friction(segs: list[_Seg]) -> dict | None:
    """The log moves with less (or more) kinetic energy than the simulation: dissipation the model lacks."""
    qd = np.concatenate([s.qd for s in segs])
    qds = np.concatenate([s.qd_sim for s in segs])
    noise = float(np.median([_noise_sigma(s.qd - s.qd_sim) for s in segs])) ** 2
    e_log, e_sim = max(float(np.mean(qd**2)) - noise, 0.0), float(np.mean(qds**2))
    if e_sim <= 0:
        return None
    ratio = e_log / e_sim
    if abs(1.0 - ratio) < ENERGY_GAP:
        return None
    span = [
        -max(float(np.quantile(np.abs(qds), 0.99)), 1e-6),
        max(float(np.quantile(np.abs(qds), 0.99)), 1e-6),
    ]
    x, y = _thin(qds, qd - qds)
    more = ratio < 1
    return {
        "kind": "friction",
        "strength": abs(1.0 - ratio),
        "energy_ratio": ratio,
        "sentence": (
            f"The log moves with {100 * abs(1 - ratio):.0f} % {'less' if more else 'more'} kinetic "
            f"energy (mean qd²) than the simulation: "
            + (
                "friction the model lacks (Coulomb, viscous or load-dependent) slows the real joint "
                "— free the friction terms, or try a richer friction family (dcmotor_stribeck, "
                "dcmotor_loadfric)."
                if more
                else "the model dissipates more than the joint does (friction or damping too high)."
            )
        ),
        "plot": _plot(
            "velocity residual vs simulated velocity",
            "qd_sim [rad/s]",
            "qd − qd_sim [rad/s]",
            [
                {"name": "residual", "mode": "markers", "x": x, "y": y},
                {"name": "zero", "mode": "lines", "x": span, "y": [0.0, 0.0]},
            ],
        ),
    }


def _binned_cross(
    q: np.ndarray, r: np.ndarray, up: np.ndarray, n_bins: int
) -> tuple[float, np.ndarray, np.ndarray]:
    """Share of r's variance predicted by the binned mean of r vs q of the other direction of motion."""
    edges = np.linspace(q.min(), q.max(), n_bins + 1)
    idx = np.clip(np.searchsorted(edges, q, side="right") - 1, 0, n_bins - 1)
    means = {}
    for d in (True, False):
        sel = up == d
        cnt = np.bincount(idx[sel], minlength=n_bins)
        tot = np.bincount(idx[sel], weights=r[sel], minlength=n_bins)
        means[d] = np.where(cnt >= 3, tot / np.maximum(cnt, 1), np.nan)
    pred = np.where(up, means[False][idx], means[True][idx])
    ok = np.isfinite(pred)
    if ok.sum() < max(MIN_SAMPLES, 0.3 * r.size):
        return float("nan"), edges, np.full(n_bins, np.nan)
    rr = r[ok] - r[ok].mean()
    share = 1.0 - float(np.sum((rr - (pred[ok] - r[ok].mean())) ** 2) / max(np.sum(rr**2), 1e-30))
    cnt = np.bincount(idx, minlength=n_bins)
    both = np.where(cnt >= 3, np.bincount(idx, weights=r, minlength=n_bins) / np.maximum(cnt, 1), np.nan)
    return share, edges, both


def _position(segs: list[_Seg]) -> dict | None:
    """Residual that is a function of position: the binned mean from one direction of motion predicts the other."""
    best: tuple[float, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    groups = (
        [("all segments", segs)] + [(f"segment {s.name}", [s]) for s in segs]
        if len(segs) > 1
        else [(f"segment {segs[0].name}", segs)]
    )
    for label, group in groups:
        q = np.concatenate([s.q for s in group])
        r = np.concatenate([s.r for s in group])
        qd = np.concatenate([s.qd for s in group])
        moving = np.abs(qd) > 0.25 * V_SMALL
        if moving.sum() < 5 * MIN_SAMPLES or np.ptp(q[moving]) < 0.05:
            continue
        n_bins = int(np.clip(moving.sum() // 40, 4, 16))
        share, edges, means = _binned_cross(q[moving], r[moving], qd[moving] > 0, n_bins)
        if np.isfinite(share) and (best is None or share > best[0]):
            best = (share, label, q[moving], r[moving], edges, means)
    if best is None or best[0] < POSITION_SHARE:
        return None
    share, label, q, r, edges, means = best
    centres = 0.5 * (edges[1:] + edges[:-1])
    ok = np.isfinite(means)
    amp = 0.5 * float(np.ptp(means[ok]))
    x, y = _thin(q, r)
    return {
        "kind": "position",
        "strength": share,
        "amplitude_rad": amp,
        "where": label,
        "sentence": (
            f"The error follows position: on {label} the mean residual binned by q, learned moving one "
            f"way, predicts {100 * share:.0f} % of the residual moving the other way (± {amp:.3g} rad): "
            "a position-dependent torque the model lacks — cogging, a linkage, or a gravity or load "
            "model error (check mass, com_distance, the encoder offset)."
        ),
        "plot": _plot(
            f"position residual vs position ({label})",
            "q [rad]",
            "q − q_sim [rad]",
            [
                {"name": "residual", "mode": "markers", "x": x, "y": y},
                {
                    "name": "binned mean",
                    "mode": "lines",
                    "x": centres[ok].round(6).tolist(),
                    "y": means[ok].round(9).tolist(),
                },
            ],
        ),
    }


def _whiteness(segs: list[_Seg]) -> tuple[float, np.ndarray, np.ndarray]:
    """Ljung–Box test of the position residual, pooled over segments: p-value, lags and mean autocorrelation."""
    q_stat, dof, acfs = 0.0, 0, []
    lags = np.arange(1, WHITE_LAGS + 1)
    for s in segs:
        r = s.r - s.r.mean()
        n = r.size
        den = float(r @ r)
        if n <= 2 * WHITE_LAGS or den <= 0:
            continue
        acf = np.array([float(r[k:] @ r[:-k]) / den for k in lags])
        q_stat += n * (n + 2) * float(np.sum(acf**2 / (n - lags)))
        dof += WHITE_LAGS
        acfs.append(acf)
    if not dof:
        return 1.0, lags, np.zeros(WHITE_LAGS)
    return float(stats.chi2.sf(q_stat, dof)), lags, np.mean(acfs, axis=0)


def diagnose(
    segments: list[dict], physics_dt: float | None = None, stiffness: float | None = None
) -> list[dict]:
    """Findings about the best model's residual, in the order lag, friction band or dead zone, friction,
    position; one "noise" or "unexplained" finding when none of the patterns is there.

    segments: the report's traces of one joint (t, q, q_sim, q_des, qd, qd_sim lists); physics_dt: the fit's
    physics step [s], to count a lag in steps (the traces may be downsampled); stiffness: the fitted Kp
    [N·m/rad], to turn a dead zone into the static friction that would hold the joint alike. Each finding is
    {kind, strength, sentence, plot: {title, x_label, y_label, traces: [{name, mode, x, y}]}, ...figures}.
    strength per kind: lag, the share of the residual energy the shift removes; friction_band, residual RMS
    at standstill over RMS in motion; dead_zone, the hold offset [rad]; friction, the relative kinetic-energy
    gap; position, the share of the residual one direction's binned mean predicts in the other; noise, the
    structured RMS over the noise RMS; unexplained, the lag-1 autocorrelation.
    """
    segs = _segments(segments)
    if not segs:
        return []
    sigma = float(np.median([_noise_sigma(s.r) for s in segs]))
    pooled = _still(segs)
    hold = _hold(pooled, sigma)
    band = _friction_band(pooled, hold)
    findings = [
        f
        for f in (
            _lag(segs, physics_dt),
            band,
            None if band else _dead_zone(pooled, hold, stiffness),
            _friction(segs),
            _position(segs),
        )
        if f
    ]
    if findings:
        return findings
    p, lags, acf = _whiteness(segs)
    plot = _plot(
        "autocorrelation of the position residual",
        "lag [samples]",
        "autocorrelation",
        [{"name": "residual", "mode": "lines+markers", "x": lags.tolist(), "y": acf.round(6).tolist()}],
    )
    rms = float(np.sqrt(np.mean(np.concatenate([s.r for s in segs]) ** 2)))
    structured = math.sqrt(max(rms**2 - sigma**2, 0.0))  # what is left beyond the white part
    if p >= WHITE_P or structured < NOISE_LEVEL * sigma:
        why = (
            f"its autocorrelation passes a white-noise test (Ljung–Box p = {p:.2f})"
            if p >= WHITE_P
            else f"only {structured:.2g} rad RMS is left beyond white noise of {sigma:.2g} rad"
        )
        return [
            {
                "kind": "noise",
                "strength": structured / max(sigma, 1e-30),
                "p_value": p,
                "noise_rad": sigma,
                "plot": plot,
                "sentence": f"No structure left: the residual (RMS {rms:.3g} rad) looks like noise — {why}.",
            }
        ]
    return [
        {
            "kind": "unexplained",
            "strength": float(acf[0]),
            "p_value": p,
            "plot": plot,
            "sentence": (
                f"The residual (RMS {rms:.3g} rad) is correlated in time (lag-1 autocorrelation "
                f"{acf[0]:.2f}) but shows none of the patterns looked for (a friction band, a dead "
                "zone, missing friction, a position-dependent error, a lag)."
            ),
        }
    ]


STEP_COARSE = 0.2  # ω·dt (or half of the damping rate · dt) above which explicit steps bend the fitted gains


def coarse_step(params: dict[str, float], inertia: float, dt: float, decimation: int) -> str | None:
    """A warning when the physics step is coarse for the fitted gains, so the gains fitted at this step would
    move at another one: the PD's natural frequency ω = √(kp/J) or its damping rate (kd + viscous)/J, times
    dt, against STEP_COARSE (explicit integration drifts from the continuous law as they grow). None when fine
    or without a stiffness and a positive inertia."""
    k = float(params.get("stiffness") or 0.0)
    j = inertia + float(params.get("armature") or 0.0)
    if k <= 0 or j <= 0 or not dt > 0:
        return None
    w = math.sqrt(k / j) * dt
    c = (float(params.get("damping") or 0.0) + float(params.get("viscous_friction") or 0.0)) / j * dt
    if max(w, c / 2) <= STEP_COARSE:
        return None
    return (
        f"the fitted gains depend on the physics step: at dt = {1e3 * dt:.3g} ms (decimation {decimation}) "
        f"√(kp/J)·dt = {w:.2g} and (kd + viscous)/J·dt = {c:.2g} (coarse above {STEP_COARSE:g}, or "
        f"{2 * STEP_COARSE:g} for the damping), so explicit steps bend the response the gains were fitted to; "
        "simulate at this dt, or refit with a larger --decimation (finer steps) to see whether they hold"
    )
