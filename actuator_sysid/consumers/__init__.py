"""The consumer package: the models Isaac Lab and Newton have no class for, as classes they run.

- Isaac Lab 3.0: `actuator_sysid.consumers.isaaclab` — actuator classes and `ActuatorBaseCfg` subclasses (with
  `class_type`) for dcmotor_delay, pid, BAM's friction budget and the encoder offset; the isaaclab.py export
  imports its cfgs from there.
- Newton 1.8: `actuator_sysid.consumers.newton` — `ClampingFrictionBudget` under the codeless USD API schema
  `ActuatorSysidFrictionBudgetAPI`, which the newton.usda export writes on a rich family's NewtonActuator;
  `actuator_sysid.consumers.newton_nets` — `DriveNeuralMLPCommands` / `DriveNeuralLSTMCommands`, Newton's neural
  drives fed the drive's commands (τ_ff, qd_des, kp, kd), for the newton.onnx of a net that reads them.

Call `register()` once, before reading a newton.usda, in a Newton (or Isaac Lab on Newton) project. Importing
this package imports neither Isaac Lab nor Newton.
"""

from __future__ import annotations

from .schema import BUDGET_API, PD_API, register_usd_schemas

__all__ = ["BUDGET_API", "PD_API", "register"]

register_usd_schemas()  # before any stage is opened, so USD reads the schemas with its own


def register() -> None:
    """Register our USD schemas and Newton components (idempotent); needs Newton 1.8 (newton[sim])."""
    try:
        from . import newton as _newton
    except ImportError as e:
        raise ImportError(
            f"actuator_sysid.consumers.register() needs Newton 1.8 ({e.name or 'newton'} is not installed): "
            "pip install 'newton[sim]==1.8.0'"
        ) from e
    _newton.register()
