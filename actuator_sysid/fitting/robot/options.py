"""How a whole-robot fit runs (RobotFitOptions), and the one place where a request's fields become options."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

# a request's name for an option where it is not the option's own: the API's iterations, the CLI's --generations
# and --budget
REQUEST_NAMES = {"iterations": "max_iterations", "generations": "max_iterations", "budget": "budget_s"}


@dataclass
class RobotFitOptions:
    """How a whole-robot fit runs; defaults follow the Go2 in-air data (decimation 4, last 30 % validates)."""

    groups: dict[str, str] | None = None  # name → regex matched in full; None: one group per joint
    decimation: int = 4
    validation_fraction: float = 0.3
    window_s: float = 0.5  # training rollouts restart from the measured state this often
    fit_bias: bool = True
    # rad: caps every joint's bias (a plausible calibration); None: the bound the registry gives each joint
    bias_limit: float | None = None
    dc_motor: bool = False  # fit a DC-motor envelope per group; off: the log must not saturate the motors
    delay: int | None = None  # physics steps; None: scanned over 0..max_delay
    max_delay: int = 8
    kp: float | None = None  # N·m/rad; None: the log's segment metadata, else fitted per group
    kd: float | None = None
    max_iterations: int = (
        12  # least-squares Jacobian evaluations (coupled search), refinement rounds (decoupled)
    )
    search: str = "decoupled"  # "decoupled": each joint's own rollout, then a coupled refinement; "coupled"
    budget_s: float | None = None  # wall-clock cap on the search (the validation replay always runs)
    device: str = "cpu"
    # "explicit": the PD effort from the step's start state; "implicit": Newton's implicit effort mode in every
    # coupled rollout (Newton's own actuators) and, on each joint's own 1-DoF plant, in the decoupled search
    effort_mode: str = "explicit"
    # KEY=VALUE on segment metadata (a joint fit's --holdout): those recordings validate; None: the last ones
    holdout: str | None = None
    # link inertial corrections: bodies (the model's link names) whose mass is fitted, and their COM with payload_com
    payload: list[str] | None = None
    payload_com: bool = False
    # Coulomb friction linear along each joint's stroke (friction at the lower limit, friction_upper at the upper)
    position_friction: bool = False
    # the intervals, the verdict and the replays beside the fit (model defaults, decoupled): off for a selection
    # candidate, which is ranked by its validation RMSE alone
    judge: bool = True
    progress: Callable[[str], None] | None = None

    @classmethod
    def from_fields(cls, values: Mapping[str, Any]) -> RobotFitOptions:
        """The options a request gives (the API's RobotFitIn, the CLI's parsed flags), each under its own name or
        its REQUEST_NAMES alias: a value None keeps the option's default, a name that is no option is left out."""
        given = {REQUEST_NAMES.get(k, k): v for k, v in values.items()}
        return cls(**{f.name: given[f.name] for f in fields(cls) if given.get(f.name) is not None})
