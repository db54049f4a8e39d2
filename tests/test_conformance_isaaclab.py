"""Per-step efforts of our kernel against the real Isaac Lab 3.0 actuator classes (docs/consumer-semantics.md §A).

Random states and commands go through the Isaac Lab class and through the kernel in open-loop mode (the
actuator sees the given states); computed and applied efforts must agree within 1e-5 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from isaaclab.actuators import (
    DCMotor,
    DCMotorCfg,
    DelayedPDActuator,
    DelayedPDActuatorCfg,
    IdealPDActuator,
    IdealPDActuatorCfg,
    RemotizedPDActuator,
    RemotizedPDActuatorCfg,
)
from isaaclab.utils.types import ArticulationActions

from actuator_sysid.datasets.recording import JointInfo, Recording, Segment
from actuator_sysid.models.families import FAMILIES, Family
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch, full_params

GAINS = {"stiffness": 18.0, "damping": 0.7}
TABLE_X = [-1.2, -0.4, 0.0, 0.5, 1.3]
TABLE_Y = [1.5, 3.0, 4.0, 3.5, 2.0]
RTOL = 1e-5


def random_sequence(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "q": rng.uniform(-2, 2, n),
        "qd": rng.uniform(-10, 10, n),
        "q_des": rng.uniform(-2, 2, n),
        "qd_des": rng.uniform(-3, 3, n),
        "tau_ff": rng.uniform(-1, 1, n),
    }


def isaaclab_efforts(
    act, seq: dict[str, np.ndarray], resets: list[int]
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Step one env through the sequence, resetting at the given steps; returns efforts and the lag per reset."""
    n = seq["q"].size
    col = lambda a, k: torch.tensor([[a[k]]], dtype=torch.float32)  # noqa: E731
    computed, applied, lags = np.zeros(n), np.zeros(n), []
    for k in range(n):
        if k in resets:
            act.reset(torch.arange(1))
            buf = getattr(act, "positions_delay_buffer", None)
            lags.append(int(buf.time_lags[0]) if buf is not None else 0)
        action = ArticulationActions(
            joint_positions=col(seq["q_des"], k),
            joint_velocities=col(seq["qd_des"], k),
            joint_efforts=col(seq["tau_ff"], k),
        )
        act.compute(action, col(seq["q"], k), col(seq["qd"], k))
        computed[k] = float(act.computed_effort[0, 0])
        applied[k] = float(act.applied_effort[0, 0])
    return computed, applied, lags


def kernel_efforts(
    family: Family,
    params: dict,
    seq: dict[str, np.ndarray],
    resets: list[int],
    lags: list[int],
    knots: list[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The same sequence as one segment per reset interval, each with the lag Isaac Lab drew for it."""
    n = seq["q"].size
    bounds = [*resets, n]
    computed, applied = np.zeros(n), np.zeros(n)
    for a, b, lag in zip(bounds[:-1], bounds[1:], lags, strict=True):
        arr = {k: v[a:b, None].astype(np.float64) for k, v in seq.items()}
        seg = Segment(
            "s",
            np.arange(b - a) * 0.005,
            q=arr["q"],
            qd=arr["qd"],
            q_des=arr["q_des"],
            qd_des=arr["qd_des"],
            tau_ff=arr["tau_ff"],
        )
        batch = SegmentBatch.from_recording(
            Recording([JointInfo("j", inertia=0.1)], [seg]),
            ["j"],
            knots=None if knots is None else np.array([knots]),
        )
        values = {k: v for k, v in params.items() if k in family.params}
        if family.delay:
            values["delay"] = float(lag)
        tr = RolloutEngine(batch).traces(family, full_params(family, values, (1, 1)), open_loop=True)
        computed[a:b], applied[a:b] = tr["computed"][0], tr["applied"][0]
    return computed, applied


def assert_close(ours: np.ndarray, theirs: np.ndarray) -> None:
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=RTOL * max(1.0, float(np.abs(theirs).max())))


def make(cls, cfg) -> object:
    return cls(cfg, joint_names=["j"], joint_ids=slice(None), num_envs=1, device="cpu")


FRICTION_MODES = {
    "coulomb": ("armature", "friction", "viscous_friction"),
    "physx static+dynamic, encoder offset": (
        "armature",
        "friction",
        "dynamic_friction",
        "viscous_friction",
        "encoder_offset",
    ),
}
JOINT_VALUES = {
    "armature": 0.02,
    "friction": 0.3,
    "dynamic_friction": 0.2,
    "viscous_friction": 0.1,
    "encoder_offset": 0.05,
}


@pytest.mark.parametrize("terms", list(FRICTION_MODES))
def test_ideal_pd_and_dcmotor_over_a_sequence(terms: str) -> None:
    """Joint terms act in the plant, not the actuator: with any friction mode the efforts on given states
    are Isaac Lab's (the encoder offset too, since the controller sees the measured position)."""
    seq = random_sequence(300, 1)
    for family, act, params in (
        (
            "ideal_pd",
            make(
                IdealPDActuator,
                IdealPDActuatorCfg(joint_names_expr=["j"], actuator_effort_limit=4.0, **GAINS),
            ),
            {"actuator_effort_limit": 4.0},
        ),
        (
            "dcmotor",
            make(
                DCMotor,
                DCMotorCfg(
                    joint_names_expr=["j"],
                    actuator_effort_limit=4.0,
                    saturation_effort=7.0,
                    actuator_velocity_limit=6.0,
                    **GAINS,
                ),
            ),
            {"actuator_effort_limit": 4.0, "saturation_effort": 7.0, "actuator_velocity_limit": 6.0},
        ),
    ):
        theirs = isaaclab_efforts(act, seq, resets=[0])
        fam = FAMILIES[family].with_terms(FRICTION_MODES[terms])
        ours = kernel_efforts(fam, {**GAINS, **params, **JOINT_VALUES}, seq, [0], [0])
        assert_close(ours[0], theirs[0])
        assert_close(ours[1], theirs[1])
        assert np.any(theirs[1] != theirs[0])  # the clip was active somewhere


@pytest.mark.parametrize("min_delay,max_delay", [(0, 0), (1, 1), (3, 3), (7, 7), (0, 6)])
def test_delayed_pd_with_resets(min_delay: int, max_delay: int) -> None:
    torch.manual_seed(min_delay * 10 + max_delay)
    seq = random_sequence(160, 2)
    resets = [0, 3, 45, 90, 91, 130]  # includes back-to-back resets and intervals shorter than the lag
    cfg = DelayedPDActuatorCfg(
        joint_names_expr=["j"], actuator_effort_limit=5.0, min_delay=min_delay, max_delay=max_delay, **GAINS
    )
    theirs_c, theirs_a, lags = isaaclab_efforts(make(DelayedPDActuator, cfg), seq, resets)
    ours_c, ours_a = kernel_efforts(
        FAMILIES["delayed_pd"], {**GAINS, "actuator_effort_limit": 5.0}, seq, resets, lags
    )
    assert_close(ours_c, theirs_c)
    assert_close(ours_a, theirs_a)


@pytest.mark.parametrize("lag", [0, 2, 5])
def test_remotized_pd_table_clamp(lag: int) -> None:
    seq = random_sequence(200, 3)
    seq["q"] = np.random.default_rng(4).uniform(-2.0, 2.0, 200)  # also outside the table: end values hold
    cfg = RemotizedPDActuatorCfg(
        joint_names_expr=["j"],
        min_delay=lag,
        max_delay=lag,
        joint_parameter_lookup=[[x, 1.0, y] for x, y in zip(TABLE_X, TABLE_Y, strict=True)],
        **GAINS,
    )
    resets = [0, 120]
    theirs_c, theirs_a, lags = isaaclab_efforts(make(RemotizedPDActuator, cfg), seq, resets)
    params = {**GAINS, **{f"lookup_effort_{k}": y for k, y in enumerate(TABLE_Y)}}
    ours_c, ours_a = kernel_efforts(FAMILIES["remotized_pd"], params, seq, resets, lags, knots=TABLE_X)
    assert_close(ours_c, theirs_c)
    assert_close(ours_a, theirs_a)
    assert np.any(np.abs(theirs_a) < np.abs(theirs_c))  # the table limited some efforts
