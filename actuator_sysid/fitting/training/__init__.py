"""Actuator networks fitted to a log: supervised on measured torque, or trained in the loop without it.

With torque in the log, the MLP learns torque from position-error and velocity histories at `input_idx`
(physics steps back, as Isaac Lab counts them) and the LSTM / GRU from the raw [q_des − q, qd] sequence. Without
torque, the net is first fitted to the inverse-dynamics torque of the known load (J·Δqd/dt + m·g·l·sin q,
the plant the kernel steps) and then trained in the loop: batched, differentiable rollouts of that plant
(semi-implicit Euler, consumer-semantics §F, no joint terms: the net holds the whole actuator) over windows
that restart from the log, loss on position and velocity as the parametric fits use. The DC-motor envelope
Isaac Lab clips the net with is the tightest one that contains the (velocity, torque) points, measured or
estimated. Segments split into train and validation as the parametric fits do; early stopping on the
validation loss; deterministic for a seed.

Gain normalisation: a log recorded at several controller gains (BAM's servo at firmware kp 100/200/800) is
a servo whose duty is clip(error_gain·kp·(q_des − q)): a net that sees only q_des − q cannot know kp. Each
segment's position error is therefore multiplied by kp_s / kp_ref before the net sees it, kp_ref the most
logged gain (by samples), so the fitted net, as exported, is the actuator at kp_ref; `at_gain` folds another
kp into the scales. A segment without a logged kp gets factor 1. Where a segment's per-sample torque-enable
flag is off (`Segment.enable`, or metadata free_swing for the whole segment) the actuator applies no torque.
"""

from __future__ import annotations

from .data import (
    JointData,
    containing_envelope,
    gain_reference,
    inverse_dynamics,
    joint_data,
    segment_enable,
    segment_kp,
)
from .fit import STILL_FALLING, add_networks, check_request, fit_networks, net_fit, simulate_net
from .history import COARSE_HISTORY_SAMPLES, HISTORY_MS, history_steps, history_text
from .metrics import (
    NetEntry,
    at_gain,
    network_from_result,
    pool_torque,
    recording_commands,
    split_metrics,
    torque_rows,
    trajectory_metrics,
    trajectory_rows,
    weights_to_json,
)
from .options import ISAACLAB_CFG, LIMITS, NetFitError, NetOptions, ProgressFn
from .plant import (
    RECURRENT_CARRY,
    _mlp_table,
    _set_scales,
    history_carry,
    raw_inputs,
    rollout,
    seg_channels,
    simulate_segments,
)
from .trainers import EVAL_EVERY, WHOLE_INNER, inner_split, train_in_loop, train_supervised

__all__ = [
    "COARSE_HISTORY_SAMPLES",
    "EVAL_EVERY",
    "HISTORY_MS",
    "ISAACLAB_CFG",
    "JointData",
    "LIMITS",
    "NetEntry",
    "NetFitError",
    "NetOptions",
    "ProgressFn",
    "RECURRENT_CARRY",
    "STILL_FALLING",
    "WHOLE_INNER",
    "_mlp_table",
    "_set_scales",
    "add_networks",
    "at_gain",
    "check_request",
    "containing_envelope",
    "fit_networks",
    "gain_reference",
    "history_carry",
    "history_steps",
    "history_text",
    "inner_split",
    "inverse_dynamics",
    "joint_data",
    "net_fit",
    "network_from_result",
    "pool_torque",
    "raw_inputs",
    "recording_commands",
    "rollout",
    "seg_channels",
    "segment_enable",
    "segment_kp",
    "simulate_net",
    "simulate_segments",
    "split_metrics",
    "torque_rows",
    "train_in_loop",
    "train_supervised",
    "trajectory_metrics",
    "trajectory_rows",
    "weights_to_json",
]
