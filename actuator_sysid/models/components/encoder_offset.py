"""A constant encoder bias: measured q = true q + offset, and the controller sees the measured q."""

from __future__ import annotations

from .base import Component, Model, Note, Param, PlantBound

OFFSET = Param(
    "encoder_offset",
    "rad",
    -0.3,
    0.3,
    "linear",
    0.0,
    "",
    "Constant encoder bias: measured q = true q + offset; the controller sees the measured q.",
    plant=PlantBound(0.15, ("range",)),
)


class EncoderOffset(Component):
    """No consumer field holds it; Isaac Lab's Python export carries it in a subclass (export/isaaclab.py)."""

    def notes(self, consumer: str, m: Model) -> list[Note]:
        offset = m.value(OFFSET.name)
        if not offset:
            return []
        if consumer == "newton":
            return [
                (
                    "encoder_offset",
                    "warning",
                    f"a NewtonActuator has no encoder offset: subtract {offset:.4g} "
                    "rad from measured positions before commanding the exported model",
                )
            ]
        if consumer == "mjcf":
            return [
                (
                    "encoder_offset",
                    "warning",
                    f"subtract the encoder offset {offset:.4g} rad from measured "
                    "positions: MuJoCo's actuator reads the true joint position",
                )
            ]
        return []


COMPONENT = EncoderOffset(
    "encoder_offset",
    "joint",
    140,
    "Constant encoder bias.",
    defines=(OFFSET,),
    newton_doc="— (a finding: subtract it from measured positions)",
)
