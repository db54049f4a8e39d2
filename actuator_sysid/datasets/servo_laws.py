"""Servo firmware laws as data: the duty law, what the firmware does to the goal, the current limit, per servo model.

A voltage-driven servo runs duty = clip(duty_per_kp_rad·kp·(g − q), ±max_duty) on its goal g and |I| ≤ current_limit
[A]; some firmwares move g toward the commanded goal at most goal_rate_limit [rad/s] (a velocity-limited setpoint).
Each row cites the file of BAM (`better-actuator-models` 1.0.2, `bam/`) its numbers come from. A servo the table does
not hold gets GENERIC: every term is fitted (models/components/servo_goal.py fits the goal rate; the DC envelope,
untied, fits the duty scale, the duty limit and the current limit as stall effort, no-load speed and rated effort).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ServoLaw:
    """One servo model's firmware law; None: the firmware has no such term (or, in GENERIC, it is fitted)."""

    name: str
    source: str  # where the numbers come from
    duty_per_kp_rad: float | None = None  # duty per rad of goal error per firmware kp unit
    max_duty: float | None = None  # the largest duty the firmware puts out (PWM limit)
    current_limit: float | None = None  # A: the firmware current limiter (BAM: a duty window around back-EMF)
    resistance: tuple[float, float] | None = None  # Ω: the winding resistance range BAM's model searches
    kt: float | None = (
        None  # N·m/A: the motor constant this servo's units share (a soft prior; None: none known)
    )
    goal_rate_limit: float | None = None  # rad/s: the setpoint's slew-rate limit (nominal where fitted)
    goal_rate_fitted: bool = False  # the firmware limits the goal's rate, at a value the log must give
    drive: str = "voltage"  # "voltage": the law above; "current" / "torque": another law (no tie)

    def voltage_servo(self) -> dict | None:
        """The segment metadata `voltage_servo` this law writes (models/rollout.py reads it); None: not voltage."""
        if self.drive != "voltage" or self.duty_per_kp_rad is None:
            return None
        out: dict = {"duty_per_kp_rad": self.duty_per_kp_rad, "max_duty": self.max_duty or 1.0}
        if self.current_limit is not None:
            out["current_limit"] = self.current_limit
        if self.resistance is not None:
            out["resistance"] = list(self.resistance)
        if self.kt is not None:
            out["kt"] = self.kt
        if self.goal_rate_limit is not None:
            out["goal_rate_limit"] = self.goal_rate_limit
            out["goal_rate_fitted"] = self.goal_rate_fitted
        return out


XL330_COUNTS_PER_TURN = 4096
XL330_KP_DIVISOR = 256  # the firmware divides kp by 256 (the manual says 128; the logged PWM says 256)
XL330_PWM_LIMIT = 885
XL330_KT = 0.378  # N·m/A: the mean kt of BAM's six identified XL330 models
STS3215_MAX_SPEED_STEPS = 3400  # steps/s of 4096 per turn: BAM's default max_velocity of the setpoint

SERVO_LAWS: dict[str, ServoLaw] = {
    law.name: law
    for law in (
        ServoLaw(
            "xl330",
            "bam/dynamixel/actuator.py XL330Actuator (error_gain, max_pwm, max_current; R range of initialize); "
            "kt: the mean of bam/params/xl330/m1–m6.json (0.362–0.387)",
            duty_per_kp_rad=(XL330_COUNTS_PER_TURN / (2 * math.pi)) / (XL330_KP_DIVISOR * XL330_PWM_LIMIT),
            max_duty=1.0,
            current_limit=1.75,
            resistance=(2.0, 5.0),
            kt=XL330_KT,
        ),
        ServoLaw(
            "xl320",
            "bam/dynamixel/actuator.py XL320Actuator (error_gain 0.05048199, max_pwm 1.0; R range 3–40 Ω)",
            duty_per_kp_rad=0.05048199,
            max_duty=1.0,
            resistance=(3.0, 40.0),
        ),
        *(
            ServoLaw(
                name,
                "bam/dynamixel/actuator.py MXActuator (error_gain 0.158, max_pwm 0.9625; R range 1–5 Ω)",
                duty_per_kp_rad=0.158,
                max_duty=0.9625,
                resistance=(1.0, 5.0),
            )
            for name in ("mx64", "mx106")
        ),
        ServoLaw(
            "sts3215",
            "bam/feetech/actuator.py STS3215Actuator (error_gain 0.166, max_pwm 0.97, no current limiter; "
            "q_target_smooth clamped to ±max_velocity·dt, max_velocity fitted from 3400 steps/s; R range 0.1–10 Ω)",
            duty_per_kp_rad=0.166,
            max_duty=0.97,
            resistance=(0.1, 10.0),
            goal_rate_limit=STS3215_MAX_SPEED_STEPS * 2 * math.pi / 4096,
            goal_rate_fitted=True,
        ),
        # BAM actuators whose firmware is not a voltage P law: their logs get no tie and no generic law
        ServoLaw("xl330i", "bam/dynamixel/actuator.py XL330CurrentActuator (current P law)", drive="current"),
        *(
            ServoLaw(name, "bam/erob/actuator.py ErobActuator (current PD law)", drive="current")
            for name in ("erob80_100", "erob80_50")
        ),
        ServoLaw("unitree_go1", "bam/unitree/actuator.py UnitreeGo1Actuator (torque PD law)", drive="torque"),
    )
}

GENERIC = ServoLaw(
    "generic",
    "fitted: the goal rate limit (goal_rate_limit), the duty scale (stiffness per kp), the duty limit "
    "(saturation_effort) and the current limit (actuator_effort_limit) of an untied DC envelope",
    goal_rate_fitted=True,
)
"""The law of a voltage servo nobody listed: every term fitted from the log."""

GENERIC_TERMS = ("goal_rate_limit", "stiffness", "saturation_effort", "actuator_effort_limit")
"""What the generic law fits in place of the table's constants."""


def law_for(motor: str | None) -> tuple[ServoLaw | None, str | None]:
    """The law of a servo model named in a log (case-insensitive) and a note when the name is not in the table:
    (the row, None), (GENERIC, why) for an unlisted name, (None, None) when the log names no servo."""
    if motor is None or not str(motor).strip():
        return None, None
    key = str(motor).strip().lower()
    if key in SERVO_LAWS:
        return SERVO_LAWS[key], None
    listed = ", ".join(n for n, law in SERVO_LAWS.items() if law.drive == "voltage")
    return GENERIC, (
        f"servo {str(motor)[:64]!r} is not in the firmware law table ({listed}): it gets the generic voltage "
        f"servo law, whose terms are fitted ({', '.join(GENERIC_TERMS)}); add joint term goal_rate_limit to "
        "fit its setpoint rate limit"
    )


def goal_rate_limit(law: ServoLaw | None) -> tuple[float, bool]:
    """(rate [rad/s], fitted) of a law's setpoint limit: (0, False) where it has none."""
    if law is None or (law.goal_rate_limit is None and not law.goal_rate_fitted):
        return 0.0, False
    return float(law.goal_rate_limit or 0.0), law.goal_rate_fitted


def generic_terms(
    params: dict[str, float], kp_reference: float, vin_reference: float, max_duty: float = 1.0
) -> dict[str, float]:
    """The generic law's terms from a fitted DC envelope at the reference kp and supply: duty per rad·kp, the
    motor's kt and R, and the current limit (where the rated effort is finite). A position log gives the duty
    scale only relative to the duty limit, so `max_duty` (the PWM limit, 1 unless known) fixes the scale."""
    stiffness, damping = params["stiffness"], params["damping"]
    sat = params["saturation_effort"]
    ktr = sat / (vin_reference * max_duty)  # kt/R: stall torque per volt
    kt = damping / ktr  # back-EMF damping kt²/R over kt/R
    out = {
        "duty_per_kp_rad": max_duty * stiffness / (sat * kp_reference),
        "max_duty": max_duty,
        "kt": kt,
        "resistance": kt / ktr,
    }
    limit = params.get("actuator_effort_limit")
    if limit is not None and math.isfinite(limit):
        out["current_limit"] = limit / kt
    if math.isfinite(params.get("goal_rate_limit", math.inf)):
        out["goal_rate_limit"] = params["goal_rate_limit"]
    return out
