"""What every fit worker imports before its first step, imported once by the workers' forkserver
(jobs.worker_context). A module that fails to import here is left for the worker to import, and to report."""

from __future__ import annotations

import contextlib
import importlib

# the fitting stack, then what the exports' validation imports after the search: the writers, the consumers'
# classes and Newton's SolverMuJoCo, which imports mujoco_warp even for its C backend
WARM_IMPORTS = (
    "actuator_sysid.service.jobs",
    "cmaes",  # the search's engine and its Sobol scan, imported where a search runs
    "scipy.stats.qmc",
    "torch",
    "newton",
    "mujoco",
    "mujoco_warp",
    "actuator_sysid.pipeline",
    "actuator_sysid.export.consumer_replay",
    "actuator_sysid.export.checkpoints",
    "actuator_sysid.export.isaaclab",
    "actuator_sysid.export.newton_usd",
    "actuator_sysid.export.mjcf",
    "actuator_sysid.export.validate",
    "actuator_sysid.consumers.newton",
    "actuator_sysid.consumers.isaaclab",
    "actuator_sysid.models.networks",
)

for _name in WARM_IMPORTS:
    with contextlib.suppress(Exception):
        importlib.import_module(_name)
