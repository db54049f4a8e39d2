"""What a fit minimises: normalised position and velocity errors, from kernel sums or from traces.

Position and velocity errors are divided by the measured signal's spread per joint, so one loss
weighs both and joints of different range alike. Velocity gets a lower weight because it is often
differentiated from encoder positions. `LOSSES`: the default "mse" (squared position and velocity errors), or
"position_mae" — mean |position error|, no velocity, BAM's own objective (docs/prior-art.md), for logs whose
velocity is an encoder difference and whose bar is a position MAE.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..models import parameters
from ..models.rollout import OperatingPoints, SegmentBatch

VELOCITY_WEIGHT = 0.25
LOSSES = ("mse", "position_mae")
MAE_SMOOTHING = 1e-3  # position_mae least squares: |e| → √(e² + δ²) − δ with e, δ in units of sigma_q
BAD_LOSS = 1e6  # assigned to diverged candidates (NaN/inf states)
KT_SPREAD = 0.1  # a tabled kt holds a servo's units to about 10 % (ln kt; BAM's six XL330 models: ±3.5 %)
KT_COST = 1.0  # one spread off the tabled kt costs this times the fit's loss without the prior


@dataclass(frozen=True)
class KtPrior:
    """A soft prior on each voltage servo joint's motor constant kt, as the kernel's tie reads it: kt/R =
    stiffness·per_stiffness, kt = damping/(kt/R) (the searched damping: outside the resistance range, where the
    kernel clamps it, the prior still pulls it back). Below the current and PWM limits a log pins only damping +
    viscous friction; the prior then sets the split, and a log that reaches the limits outweighs it. One residual
    row per joint, weight·ln(kt/kt_table); weight 0: none."""

    per_stiffness: np.ndarray  # (J,) 1/(vin·duty) at the reference kp and supply
    log_kt: np.ndarray  # (J,) ln of the tabled kt [N·m/A]
    weight: np.ndarray  # (J,) per unit of ln kt

    def at_loss(self, loss: np.ndarray) -> KtPrior:
        """The prior weighed against a fit's loss per joint (J,): one spread off costs KT_COST times it."""
        w = np.sqrt(KT_COST * np.maximum(np.asarray(loss, float), 1e-12)) / KT_SPREAD
        return dataclasses.replace(self, weight=np.where(self.weight > 0, w, 0.0))

    def rows(self, params: np.ndarray) -> np.ndarray:
        """(C, J, P) kernel parameters → (C, J) prior residuals."""
        k = params[..., parameters.INDEX["stiffness"]].astype(np.float64)
        d = params[..., parameters.INDEX["damping"]].astype(np.float64)
        ktr = np.maximum(k * self.per_stiffness, 1e-12)
        r = self.weight * (np.log(np.maximum(d, 1e-12) / ktr) - self.log_kt)
        return np.where(np.isfinite(r), r, 1e3)

    def select(self, j: int) -> KtPrior:
        sl = slice(j, j + 1)
        return KtPrior(self.per_stiffness[sl], self.log_kt[sl], self.weight[sl])


def kt_prior(ops: list[OperatingPoints]) -> KtPrior | None:
    """The kt prior of joints whose voltage servo law tables kt (voltage_servo `kt`), weight 1 until weighed
    against a fit's loss (KtPrior.at_loss); None when no joint's law tables one."""
    n = len(ops)
    per_k, log_kt, weight = np.zeros(n), np.zeros(n), np.zeros(n)
    for j, op in enumerate(ops):
        kt, ktr_per_k = (op.servo or {}).get("kt"), op.ktr_per_stiffness
        if not kt or ktr_per_k is None:
            continue
        per_k[j] = ktr_per_k
        log_kt[j] = np.log(float(kt))
        weight[j] = 1.0
    return KtPrior(per_k, log_kt, weight) if weight.any() else None


@dataclass
class LossScales:
    """Per-joint normalisers: signal spreads and sample counts over the batch's segments."""

    sigma_q: np.ndarray  # (J,)
    sigma_qd: np.ndarray  # (J,)
    n_samples: np.ndarray  # (J,) samples compared (first sample of each segment is the initial state)
    position_mae: bool = False  # the loss is mean |position error| / sigma_q (LOSSES "position_mae")
    prior: KtPrior | None = None  # a soft prior on voltage servos' kt, added to the loss

    @classmethod
    def from_batch(cls, batch: SegmentBatch) -> LossScales:
        n_j = len(batch.joints)
        sq, sqd, n = np.zeros(n_j), np.zeros(n_j), np.zeros(n_j)
        for j in range(n_j):
            idx = np.concatenate(
                [
                    np.arange(batch.segment_slice(s).start, batch.segment_slice(s).stop)
                    for s in range(batch.n_segments)
                    if batch.seg_joint[s] == j
                ]
            )
            sq[j] = max(float(np.std(batch.q[idx])), 1e-3)
            sqd[j] = max(float(np.std(batch.qd[idx])), 1e-3)
            n[j] = sum(batch.seg_len[s] - 1 for s in range(batch.n_segments) if batch.seg_joint[s] == j)
        return cls(sq, sqd, n)

    def select(self, j: int) -> LossScales:
        """The normalisers of one joint, for a batch holding only that joint."""
        return LossScales(
            self.sigma_q[j : j + 1],
            self.sigma_qd[j : j + 1],
            self.n_samples[j : j + 1],
            self.position_mae,
            None if self.prior is None else self.prior.select(j),
        )


def loss_from_sums(
    sums: np.ndarray, batch: SegmentBatch, scales: LossScales, params: np.ndarray | None = None
) -> np.ndarray:
    """(C, S, 3) kernel sums → (C, J) loss per candidate and joint, plus the prior's cost at the candidates'
    kernel `params` (C, J, P) where scales hold one; diverged candidates get BAD_LOSS."""
    n_c, n_j = sums.shape[0], len(batch.joints)
    if scales.position_mae:  # the kernel's third sum is Σ|position error|
        per_seg = sums[:, :, 2] / scales.sigma_q[batch.seg_joint]
    else:
        per_seg = (
            sums[:, :, 0] / scales.sigma_q[batch.seg_joint] ** 2
            + VELOCITY_WEIGHT * sums[:, :, 1] / scales.sigma_qd[batch.seg_joint] ** 2
        )
    loss = np.zeros((n_c, n_j))
    np.add.at(loss.T, batch.seg_joint, per_seg.T)
    loss /= scales.n_samples[None, :]
    if scales.prior is not None and params is not None:
        loss += scales.prior.rows(params) ** 2
    return np.where(np.isfinite(loss), np.minimum(loss, BAD_LOSS), BAD_LOSS)


def residuals(
    traces: dict[str, np.ndarray],
    batch: SegmentBatch,
    scales: LossScales,
    joint: int,
    params: np.ndarray | None = None,
) -> np.ndarray:
    """(C, R) residual vectors of one joint whose squared sum is that joint's loss (position_mae: the signed
    square root of each |error| / (sigma_q·n), position rows only, so least squares minimises the MAE; errors
    under MAE_SMOOTHING·sigma_q count quadratically, else a noise-free log's optimum is a kink it never reaches);
    the prior's row last where scales hold one and the candidates' kernel `params` (C, J, P) are given."""
    parts = []
    norm = np.sqrt(scales.n_samples[joint])
    for s in range(batch.n_segments):
        if batch.seg_joint[s] != joint:
            continue
        sl = batch.segment_slice(s)
        sl = slice(sl.start + 1, sl.stop)  # the first sample is the initial state, not a prediction
        if (
            scales.position_mae
        ):  # |e| smoothed below MAE_SMOOTHING·σ_q (pseudo-Huber) so least squares converges
            e = (traces["q"][:, sl].astype(np.float64) - batch.q[sl]) / scales.sigma_q[joint]
            parts.append(np.sign(e) * np.sqrt((np.sqrt(e**2 + MAE_SMOOTHING**2) - MAE_SMOOTHING) / norm**2))
            continue
        parts.append((traces["q"][:, sl] - batch.q[sl]) / (scales.sigma_q[joint] * norm))
        parts.append(
            (traces["qd"][:, sl] - batch.qd[sl])
            * (np.sqrt(VELOCITY_WEIGHT) / (scales.sigma_qd[joint] * norm))
        )
    if scales.prior is not None and params is not None:
        parts.append(scales.prior.rows(params)[:, joint, None])
    r = np.concatenate(parts, axis=1)
    return np.where(np.isfinite(r), r, 1e3)


def residual_blocks(batch: SegmentBatch, joint: int) -> np.ndarray:
    """Block id of every row of `residuals(...)` for one joint: one block per segment and channel."""
    ids, b = [], 0
    for s in range(batch.n_segments):
        if batch.seg_joint[s] != joint:
            continue
        n = int(batch.seg_len[s]) - 1
        ids += [b] * n + [b + 1] * n
        b += 2
    return np.asarray(ids)


def segment_metrics(traces: dict[str, np.ndarray], batch: SegmentBatch, candidate: int = 0) -> list[dict]:
    """Per-segment position RMSE/MAE and velocity RMSE of one candidate, with its joint."""
    out = []
    for s in range(batch.n_segments):
        sl = batch.segment_slice(s)
        sl = slice(sl.start + 1, sl.stop)
        eq = traces["q"][candidate, sl].astype(np.float64) - batch.q[sl]
        eqd = traces["qd"][candidate, sl].astype(np.float64) - batch.qd[sl]
        out.append(
            {
                "segment": batch.seg_names[s],
                "joint": batch.joints[int(batch.seg_joint[s])],
                "samples": int(eq.size),
                "position_rmse": float(np.sqrt(np.mean(eq**2))),
                "position_mae": float(np.mean(np.abs(eq))),
                "velocity_rmse": float(np.sqrt(np.mean(eqd**2))),
            }
        )
    return out


def pool_metrics(rows: list[dict]) -> dict | None:
    """Sample-weighted overall metrics from per-segment rows; None when there are none."""
    if not rows:
        return None
    n = np.array([r["samples"] for r in rows], float)
    w = n / n.sum()
    return {
        "position_rmse": float(np.sqrt(np.sum(w * np.array([r["position_rmse"] ** 2 for r in rows])))),
        "position_mae": float(np.sum(w * np.array([r["position_mae"] for r in rows]))),
        "velocity_rmse": float(np.sqrt(np.sum(w * np.array([r["velocity_rmse"] ** 2 for r in rows])))),
        "segments": len(rows),
        "samples": int(n.sum()),
    }
