"""Command delay in whole physics steps (§A.5 Isaac Lab DelayBuffer, §C.2 Newton ActuatorDelay)."""

from __future__ import annotations

from typing import Any

from .base import Component, Model, Param

DELAY = Param(
    "delay",
    "physics steps",
    0,
    20,
    "linear",
    0.0,
    "newton:delaySteps",
    "Command delay counted in physics steps (Isaac Lab min_delay = max_delay).",
    integer=True,
)


class Delay(Component):
    """NewtonActuatorDelayAPI only with an authored `newton:delaySteps` ≥ 1, never with 0 (§C.4)."""

    def newton_actuator(self, m: Model) -> tuple[list[str], dict[str, Any]]:
        steps = int(round(m.params.get(DELAY.name, 0)))
        return ([self.newton_api], {DELAY.newton_attr: steps}) if steps >= 1 else ([], {})


COMPONENT = Delay(
    "delay",
    "delay",
    120,
    "Delay of targets and feed-forward.",
    defines=(DELAY,),
    isaaclab_fields=("min_delay", "max_delay"),
    newton_api="NewtonActuatorDelayAPI",
)
