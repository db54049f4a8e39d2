"""A servo firmware's velocity-limited goal: the setpoint moves toward the commanded goal at most goal_rate_limit.

Each physics step g ← clip(q_des, g − rate·dt, g + rate·dt) before the PD (duty) law, g starting at the segment's
first measured position (BAM's STS3215Actuator `q_target_smooth`; datasets/servo_laws.py). The kernel runs it on
the delayed command; a segment whose servo law states the rate runs it without this term (models/rollout.py
`seg_goal_rate`), a fit with this term fits it, or holds it at the rate the log states (`held_rate`) so that
every export carries the slew the kernel ran; at its neutral value (inf) the term runs each segment's own rate.
MuJoCo's <dcmotor> slewmax carries it (export/mjcf.py), and so do the consumer package's slewed Isaac Lab classes
(ACTUATORS_BEST) and Newton drive (DriveSlewedPD). Isaac Lab's own classes and MJCF's <general> do not: their
finding states the rate, and a consumer applies it to its targets each physics step before setting them.
"""

from __future__ import annotations

import math

from ...datasets.recording import DatasetError, Recording, Segment
from .base import Component, Model, Note, Param

GOAL_RATE = Param(
    "goal_rate_limit",
    "rad/s",
    0.1,
    200.0,
    "log",
    math.inf,
    "",
    "Firmware setpoint slew-rate limit: the goal the PD law sees moves at most this fast toward the command.",
)


def slew_rate(m: Model) -> float:
    """A fitted model's goal slew rate [rad/s] (goal_rate_limit), 0 for none: what each export writes."""
    rate = m.value(GOAL_RATE.name)
    return float(rate) if rate is not None and math.isfinite(rate) and rate > 0 else 0.0


def _stated(seg: Segment, joint: str) -> object:
    """A segment's stated goal rate: metadata["joints"][joint]["goal_rate_limit"], else metadata["goal_rate_limit"]."""
    return (
        seg.metadata.get("joints", {})
        .get(joint, {})
        .get("goal_rate_limit", seg.metadata.get("goal_rate_limit"))
    )


def goal_rate(seg: Segment, joint: str) -> float:
    """The setpoint slew-rate limit [rad/s] a segment's servo runs, 0 for none: its stated `goal_rate_limit`,
    else its voltage servo law's (datasets/servo_laws.py)."""
    v = _stated(seg, joint)
    if v is None:
        servo = seg.metadata.get("voltage_servo")
        v = servo.get("goal_rate_limit") if isinstance(servo, dict) else None
        if v is None:
            return 0.0
    if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v > 0):
        raise DatasetError(
            f"segment {seg.name!r}: goal_rate_limit must be a positive rate in rad/s, got {v!r}; leave it out "
            "for a servo that does not limit its goal's rate"
        )
    return float(v)


def fits_goal_rate(rec: Recording, joint: str) -> bool:
    """Whether a fit should take the joint term goal_rate_limit: a segment's servo law slews its goal at a rate the
    log must give (voltage_servo `goal_rate_fitted`, or the generic law of an unlisted servo) and no segment
    states the rate."""
    asked = any(
        s.metadata.get("servo_law") == "generic"
        or (isinstance(law := s.metadata.get("voltage_servo"), dict) and bool(law.get("goal_rate_fitted")))
        for s in rec.segments
    )
    return asked and not any(_stated(s, joint) is not None for s in rec.segments)


def _run_rates(rec: Recording, joint: str) -> set[float]:
    """The goal rate each of a joint's segments runs (0: none), as stated or tabled; empty where the log must
    give the rate (fits_goal_rate)."""
    return set() if fits_goal_rate(rec, joint) else {goal_rate(s, joint) for s in rec.segments}


def stated_rates(rec: Recording, joint: str) -> set[float]:
    """The goal rates a joint's segments run as the log states them or their laws table them; empty where the
    log must give the rate (fits_goal_rate) or no segment slews."""
    return _run_rates(rec, joint) - {0.0}


def held_rate(rec: Recording, joint: str) -> float | None:
    """The goal rate a fit holds for `joint` rather than fits: the one rate every segment runs, as stated or
    tabled; None where none runs one, the log must give it, or the segments run several (the kernel then runs
    each its own, which no single export carries)."""
    every = _run_rates(rec, joint)
    return next(iter(every)) if len(every) == 1 and 0.0 not in every else None


class ServoGoal(Component):
    """Isaac Lab's own classes and MJCF's <general> do not slew their target: those exports get a finding with the rate."""

    def notes(self, consumer: str, m: Model) -> list[Note]:
        rate = m.value(GOAL_RATE.name)
        if rate is None or not math.isfinite(rate):
            return []
        where = {
            "isaaclab": "joint position targets before set_joint_position_target",
            "newton": "control.joint_target_pos before stepping the actuators",
            "mjcf": "ctrl before mj_step",
        }[consumer]
        return [
            (
                "goal_rate_limit",
                "warning",
                f"the servo slews its goal at most {rate:.4g} rad/s and this consumer has no such limit: "
                f"apply g ← g + clip(target − g, ±{rate:.4g}·dt) to the {where}",
            )
        ]


COMPONENT = ServoGoal(
    "servo_goal",
    "joint",
    190,
    "Velocity-limited goal of a servo firmware (setpoint slew-rate limit).",
    defines=(GOAL_RATE,),
    flag=1 << 20,
    switch=GOAL_RATE.name,
    newton_doc="ActuatorSysidSlewedPDControlAPI `newton:goalRateLimit` (the consumer package's DriveSlewedPD)",
)
