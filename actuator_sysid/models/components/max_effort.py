"""The box clamp ±actuator_effort_limit (§A.3, §A.10, Newton ClampingMaxEffort)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Component, Model
from .dc_motor import EFFORT_LIMIT


class MaxEffort(Component):
    """NewtonMaxEffortClampingAPI with `newton:maxEffort`, only when the limit is finite."""

    def envelope(self, v: np.ndarray, params: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        elim = params.get(EFFORT_LIMIT.name, np.inf)
        return np.full(v.shape, -elim), np.full(v.shape, elim)

    def newton_actuator(self, m: Model) -> tuple[list[str], dict[str, Any]]:
        limit = m.value(EFFORT_LIMIT.name)
        return ([], {}) if limit is None else ([self.newton_api], {EFFORT_LIMIT.newton_attr: limit})


COMPONENT = MaxEffort(
    "max_effort",
    "clamp",
    15,
    "Box clip of the effort at ±actuator_effort_limit.",
    params=(EFFORT_LIMIT.name,),
    flag=1,
    isaaclab_fields=(EFFORT_LIMIT.name,),
    newton_api="NewtonMaxEffortClampingAPI",
)
