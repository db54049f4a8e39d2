"""What every fit worker imports before its first step, imported once by the workers' forkserver
(jobs.worker_context). A module that fails to import here is left for the worker to import, and to report."""

from __future__ import annotations

import contextlib
import importlib

WARM_IMPORTS = ("actuator_sysid.service.jobs", "torch", "newton", "mujoco")

for _name in WARM_IMPORTS:
    with contextlib.suppress(Exception):
        importlib.import_module(_name)
