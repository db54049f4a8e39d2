"""Compile, once per machine, the Warp kernels that CPU fits and their exports' replays launch.

Warp builds a module the first time one of its kernels runs and caches the build by the module's source hash.
Without this, the first fit after install spends its first seconds compiling (Newton's MuJoCo conversion
kernels alone take over ten on two cores). `actuator-sysid warmup` runs it (`make install` and the images do); a later fit loads the cache.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass

# Python modules whose Warp module a CPU fit, a robot fit or an export replay loads: ours, Newton's conversion to
# MuJoCo (its C backend included), the articulation and inertia kernels Newton's model finalisation runs, the
# NewtonActuator classes and Featherstone kernels the replays step, and MuJoCo Warp's step for implicit robot fits
# (the few kernels it generates per model size still build on first use)
MODULES = (
    "actuator_sysid.models.kernels",
    "actuator_sysid.models.articulated",
    "actuator_sysid.models.mujoco_c",
    "actuator_sysid.consumers.newton",
    "newton._src.solvers.mujoco.kernels",
    "newton._src.sim.articulation",
    "newton._src.sim.inverse_dynamics",
    "newton._src.solvers.featherstone.kernels",
    "newton._src.actuators.actuator",
    "newton._src.actuators.delay",
    "newton._src.actuators.drives.drive_pd",
    "newton._src.actuators.clamping.clamping_dc_motor",
    "newton._src.actuators.clamping.clamping_max_effort",
    "newton._src.actuators.joint_space_response",
    "mujoco_warp._src.forward",
    "mujoco_warp._src.solver",
    "mujoco_warp._src.smooth",
    "mujoco_warp._src.support",
    "mujoco_warp._src.constraint",
    "mujoco_warp._src.passive",
    "mujoco_warp._src.derivative",
    "mujoco_warp._src.set_const",
)

# kernels declared with module="unique": each is a Warp module of its own
UNIQUE_KERNELS = (
    ("newton._src.geometry.inertia", "validate_and_correct_inertia_kernel"),
    ("newton._src.geometry.inertia", "compute_body_inverses_kernel"),
)


@dataclass(frozen=True)
class Compiled:
    """What one warm-up did: the Warp modules it loaded, and how long it took (s)."""

    modules: tuple[str, ...]
    seconds: float


def kernel_modules() -> list:
    """The Warp modules above (their Python modules imported), built or not."""
    import warp as wp

    mods = []
    for name in MODULES:
        importlib.import_module(name)
        mods.append(wp.get_module(name))
    for name, kernel in UNIQUE_KERNELS:
        mods.append(getattr(importlib.import_module(name), kernel).module)
    return mods


def compile_kernels(device: str = "cpu", workers: int | None = None) -> Compiled:
    """Build (or load from the cache) every module above on `device`, `workers` at once (default: the cores)."""
    import warp as wp

    wp.init()
    mods = kernel_modules()
    start = time.perf_counter()
    wp.force_load(device=device, modules=mods, max_workers=workers or len(os.sched_getaffinity(0)))
    return Compiled(tuple(m.name for m in mods), time.perf_counter() - start)
