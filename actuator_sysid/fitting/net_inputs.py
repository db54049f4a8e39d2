"""What an actuator net reads: today's [q_des − q, qd], or the drive's commands too when the log carries them.

A torque-commanded or MIT-mode drive computes τ = kp·(q_des − q) + kd·(qd_des − qd) + τ_ff with gains set per
command: a net that sees only q_des − q and qd cannot know τ_ff, qd_des or the gains. `command_inputs` picks
the layout (models/networks.py NetSpec.inputs) from the log: "vel_error" where qd_des is logged (non-zero),
"tau_cmd" (the drive's law) where the segments log a kp in SI, else "tau_ff" where τ_ff is logged; the raw gains
"kp" / "kd" on request. `segment_commands` gives each segment's (T, 4) COMMANDS columns (qd_des, tau_ff, kp, kd),
the gains held per segment as its metadata states.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..datasets.recording import Recording, Segment
from ..models.networks import BASE_INPUTS, COMMANDS, INPUT_MEANING, check_inputs
from ..numbers import is_real

INPUT_CHOICES = ("auto", "error", "commands")  # NetOptions.inputs


def logged_gain(seg: Segment, key: str, joint: str) -> float | None:
    """A segment's logged kp or kd for one joint in SI (a number, or a {joint: value} map); None where it states
    none or states it in device units (a consumer's stiffness and damping are SI)."""
    units = str(seg.metadata.get("gain_units", "device" if "bam" in seg.metadata else "SI"))
    v = seg.metadata.get(key)
    v = v.get(joint) if isinstance(v, Mapping) else v
    return float(v) if units.lower() == "si" and is_real(v) else None


def segment_commands(seg: Segment, j: int, joint: str) -> np.ndarray:
    """(T, 4) float32 COMMANDS of one joint in one segment: qd_des, tau_ff, kp, kd (SI; 0 where not logged)."""
    out = np.zeros((seg.n, len(COMMANDS)), np.float32)
    out[:, 0] = np.asarray(seg.qd_des[:, j], np.float32)
    out[:, 1] = np.asarray(seg.tau_ff[:, j], np.float32)
    for c, key in ((2, "kp"), (3, "kd")):
        out[:, c] = logged_gain(seg, key, joint) or 0.0
    return out


def _varies(values: list[float | None]) -> bool:
    known = {v for v in values if v is not None}
    return len(known) > 1


def command_inputs(
    rec: Recording, joint: str, choice: str | list[str] = "auto", normalise_kp: bool = True
) -> list[str]:
    """The input channels for one joint's net: "error" today's; "commands" every command the log holds; "auto"
    the richer layout when the log carries τ_ff, qd_des or a kd that varies between segments (a kp that varies
    alone is left to gain normalisation where `normalise_kp`, the position servo's exact fold); a list: that
    layout. Where the segments log SI gains the drive's own law, tau_cmd, stands for τ_ff: it carries the gains
    as the drive uses them (a held-out kp is predicted better than from raw gain channels, which "commands" adds
    where they vary)."""
    if isinstance(choice, list):
        check_inputs(choice)
        return list(choice)
    if choice not in INPUT_CHOICES:
        raise ValueError(
            f"network inputs must be one of {list(INPUT_CHOICES)} or a list of channels, got {choice!r}"
        )
    if choice == "error":
        return list(BASE_INPUTS)
    j = rec.joint_index(joint)
    qd_des = any(np.any(s.qd_des[:, j] != 0) for s in rec.segments)
    tau_ff = any(np.any(s.tau_ff[:, j] != 0) for s in rec.segments)
    kps = [logged_gain(s, "kp", joint) for s in rec.segments]
    kp, kd = _varies(kps), _varies([logged_gain(s, "kd", joint) for s in rec.segments])
    if choice == "auto" and not (qd_des or tau_ff or kd or (kp and not normalise_kp)):
        return list(BASE_INPUTS)
    law = any(kps)  # a drive with a position loop: kp logged, and not zero
    return [
        "pos_error",
        "vel_error" if qd_des else "vel",
        *(["tau_cmd"] if law else ["tau_ff"] if tau_ff else []),
        *(["kp"] if kp and choice == "commands" else []),
        *(["kd"] if kd and choice == "commands" else []),
    ]


def inputs_note(inputs: list[str], choice: str | list[str]) -> str | None:
    """The fit's note on a commands net's inputs (None for today's layout)."""
    if list(inputs) == list(BASE_INPUTS):
        return None
    how = "the log carries the drive's commands" if choice == "auto" else f"networks.inputs {choice!r}"
    channels = ", ".join(f"{c} = {INPUT_MEANING[c]}" for c in inputs)
    return (
        f"the net reads the drive's commands ({how}): inputs {channels}; Isaac Lab runs it with "
        "actuator_sysid.consumers.isaaclab ActuatorNetMLPCommands / ActuatorNetLSTMCommands (the gains from the "
        "joint's stiffness / damping), not with ActuatorNetMLP / ActuatorNetLSTM; Newton runs an MLP or LSTM "
        "with actuator_sysid.consumers.newton_nets DriveNeuralMLPCommands / DriveNeuralLSTMCommands and a GRU "
        "with one command channel (docs/consumer-semantics.md §C.8–C.9); networks.inputs 'error' fits today's "
        "layout"
    )
