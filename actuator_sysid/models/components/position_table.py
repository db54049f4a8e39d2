"""A position-dependent torque limit (§A.6 Isaac Lab RemotizedPD, Newton ClampingPositionBased)."""

from __future__ import annotations

import math
from typing import Any

from .base import TABLE_KNOTS, Component, Model, Param

PARAMS = tuple(
    Param(
        f"lookup_effort_{k}",
        "N·m",
        1e-2,
        1e3,
        "log",
        math.inf,
        f"newton:lookupEfforts[{k}]",
        f"Torque limit at knot {k} of the position table (Isaac Lab joint_parameter_lookup column 2).",
    )
    for k in range(TABLE_KNOTS)
)


class PositionTable(Component):
    """NewtonPositionBasedClampingAPI with the table's positions and efforts."""

    def newton_actuator(self, m: Model) -> tuple[list[str], dict[str, Any]]:
        if not m.table_positions:
            raise ValueError(f"joint {m.joint!r}: a {m.family.name} model needs its table positions")
        efforts = [float(m.params[p.name]) for p in PARAMS[: len(m.table_positions)]]
        return [self.newton_api], {
            "lookupPositions": [float(x) for x in m.table_positions],
            PARAMS[0].newton_attr.split("[")[0]: efforts,
        }  # newton:lookupEfforts[k]


COMPONENT = PositionTable(
    "position_table",
    "clamp",
    150,
    "Position-dependent torque limit table.",
    defines=PARAMS,
    flag=4,
    isaaclab_fields=("joint_parameter_lookup",),
    newton_api="NewtonPositionBasedClampingAPI",
)
