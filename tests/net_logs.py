"""Logs made by a known nonlinear actuator, in plain numpy, independent of the package's models.

The actuator is a DC motor behind a PD loop on commands delayed by a whole number of steps; its output
loses Stribeck friction (breakaway above Coulomb, falling off with speed, plus viscous) and is capped by a
limit that depends on the joint position (a linkage whose leverage changes). The load is a pendulum
(q = 0 hanging down) stepped by semi-implicit Euler, as docs/consumer-semantics.md §F.
"""

from __future__ import annotations

import numpy as np

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment

TRUTH = {
    "kp": 9.0,
    "kd": 0.25,
    "delay": 2,
    "sat": 3.2,
    "vlim": 8.0,
    "elim": 2.2,
    "f_coulomb": 0.15,
    "f_static": 0.5,
    "v_stribeck": 0.3,
    "viscous": 0.03,
}
LOAD = {"mass": 0.6, "com_distance": 0.2, "inertia": 0.004}
DT = 0.005


def position_limit(q: float) -> float:
    """The effort cap of the linkage at joint angle q [N·m]."""
    return TRUTH["elim"] * (0.55 + 0.45 * np.cos(q))


def actuator_torque(q_des_delayed: float, q: float, qd: float, position_limited: bool = True) -> float:
    """Output torque of the nonlinear actuator for one step."""
    t = TRUTH
    tau = t["kp"] * (q_des_delayed - q) - t["kd"] * qd
    v = min(max(qd, -t["vlim"] * (1 + t["elim"] / t["sat"])), t["vlim"] * (1 + t["elim"] / t["sat"]))
    tau = min(
        max(tau, max(t["sat"] * (-1 - v / t["vlim"]), -t["elim"])),
        min(t["sat"] * (1 - v / t["vlim"]), t["elim"]),
    )
    stribeck = t["f_coulomb"] + (t["f_static"] - t["f_coulomb"]) * np.exp(-((qd / t["v_stribeck"]) ** 2))
    tau = tau - stribeck * np.tanh(qd / 0.05) - t["viscous"] * qd
    lim = position_limit(q) if position_limited else np.inf
    return float(min(max(tau, -lim), lim))


def commands(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(n) * DT
    if kind == "chirp":
        f = 0.2 + (2.5 - 0.2) * t / t[-1]
        return 1.1 * np.sin(2 * np.pi * np.cumsum(f) * DT)
    if kind == "steps":
        levels = rng.uniform(-1.2, 1.2, n // 80 + 1)
        return np.repeat(levels, 80)[:n]
    freqs = rng.uniform(0.2, 2.0, 4)
    phases = rng.uniform(0, 2 * np.pi, 4)
    return 0.35 * sum(np.sin(2 * np.pi * f * t + p) for f, p in zip(freqs, phases, strict=True))


def simulate(
    q_des: np.ndarray, q0: float = 0.0, position_limited: bool = True, lag_s: float = 0.0
) -> dict[str, np.ndarray]:
    """Roll the load under the actuator; tau is the torque the actuator applied at each sample.

    lag_s > 0 puts a first-order lag (a current loop of that time constant) on the motor torque, a dynamic
    no parametric family expresses (they know only whole-step delays).
    """
    n = q_des.size
    inertia = LOAD["inertia"] + LOAD["mass"] * LOAD["com_distance"] ** 2
    mgl = LOAD["mass"] * 9.81 * LOAD["com_distance"]
    q, qd, lagged = q0, 0.0, 0.0
    alpha = DT / (lag_s + DT)
    out = {k: np.zeros(n) for k in ("q", "qd", "tau")}
    for k in range(n):
        out["q"][k], out["qd"][k] = q, qd
        tau = actuator_torque(q_des[max(k - TRUTH["delay"], 0)], q, qd, position_limited)
        lagged = tau = lagged + alpha * (tau - lagged)
        out["tau"][k] = tau
        qd = qd + DT * (tau - mgl * np.sin(q)) / inertia
        q = q + DT * qd
    return out


def nonlinear_recording(
    n_segments: int = 8,
    seconds: float = 4.0,
    seed: int = 0,
    torque: bool = True,
    position_limited: bool = True,
    lag_s: float = 0.0,
) -> Recording:
    """Segments of chirps, steps and multisines through the nonlinear actuator; tau left out when asked.

    position_limited=False drops the position-dependent cap: an actuator net's inputs (position error and
    velocity histories, the Isaac Lab contract) cannot see the absolute position that cap depends on.
    """
    rng = np.random.default_rng(seed)
    n = int(seconds / DT)
    segs = []
    for s in range(n_segments):
        q_des = commands(("chirp", "steps", "multisine")[s % 3], n, rng)
        tr = simulate(q_des, q0=float(rng.uniform(-0.3, 0.3)), position_limited=position_limited, lag_s=lag_s)
        col = lambda a: a[:, None]  # noqa: E731
        segs.append(
            Segment(
                str(s),
                np.arange(n) * DT,
                q=col(tr["q"]),
                qd=col(tr["qd"]),
                q_des=col(q_des),
                qd_des=np.zeros((n, 1)),
                tau_ff=np.zeros((n, 1)),
                tau=col(tr["tau"]) if torque else None,
            )
        )
    return Recording([JointInfo("j", **LOAD)], segs)


# --- a stiff position-controlled actuator on a bench, logged at 66.7 Hz ---

BENCH = {"kp": 2000.0, "kd": 10.0, "lag_s": 0.004}  # N·m/rad, N·m·s/rad, the current loop's lag s
BENCH_LOAD = {"mass": 40.0, "com_distance": 0.1, "inertia": 0.05}  # kg, m, kg·m² about the COM
BENCH_DT = 0.015  # the log's sample time (66.7 Hz)
BENCH_SUBSTEPS = 15  # the simulator's steps per logged sample (1 ms)


def bench_recording(
    n_segments: int = 6, seconds: float = 12.0, seed: int = 0, centre: float = 0.0
) -> Recording:
    """A position servo τ = lag(kp·(q_des − q) − kd·qd) (first-order lag BENCH["lag_s"]) on a heavy pendulum,
    tracking multisines of about 1 rad around `centre` (0: hanging down): position errors of 1e-3 … 1e-2 rad,
    velocities of several rad/s, torques of tens of N·m (off centre, both sit on the gravity load's offset),
    logged at 66.7 Hz. Plain numpy, semi-implicit Euler at 1 ms."""
    b, load, h = BENCH, BENCH_LOAD, BENCH_DT / BENCH_SUBSTEPS
    inertia = load["inertia"] + load["mass"] * load["com_distance"] ** 2
    mgl = load["mass"] * 9.81 * load["com_distance"]
    rng = np.random.default_rng(seed)
    n = int(seconds / BENCH_DT)
    t_fine = np.arange(n * BENCH_SUBSTEPS) * h
    segs = []
    for s in range(n_segments):
        freqs, phases = rng.uniform(0.1, 1.2, 4), rng.uniform(0, 2 * np.pi, 4)
        amp = rng.uniform(0.5, 1.2)
        wave = sum(np.sin(2 * np.pi * f * t_fine + p) for f, p in zip(freqs, phases, strict=True))
        q_des = centre + amp * wave / 2.5
        q, qd, tau = float(q_des[0]), 0.0, mgl * np.sin(q_des[0])
        log = {k: np.zeros(n) for k in ("q", "qd", "tau", "q_des")}
        for k in range(n * BENCH_SUBSTEPS):
            if k % BENCH_SUBSTEPS == 0:
                i = k // BENCH_SUBSTEPS
                log["q"][i], log["qd"][i], log["tau"][i], log["q_des"][i] = q, qd, tau, q_des[k]
            cmd = b["kp"] * (q_des[k] - q) - b["kd"] * qd
            tau += h / (b["lag_s"] + h) * (cmd - tau)
            qd += h * (tau - mgl * np.sin(q)) / inertia
            q += h * qd
        col = lambda a: a[:, None]  # noqa: E731
        segs.append(
            Segment(
                f"bench{s}",
                np.arange(n) * BENCH_DT,
                q=col(log["q"]),
                qd=col(log["qd"]),
                q_des=col(log["q_des"]),
                qd_des=np.zeros((n, 1)),
                tau_ff=np.zeros((n, 1)),
                tau=col(log["tau"]),
            )
        )
    return Recording([JointInfo("j", **load)], segs)
