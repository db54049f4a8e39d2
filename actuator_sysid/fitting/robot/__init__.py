"""A coupled fit of every actuator of a robot hanging in the air, through the robot's own model (Newton).

Joints are grouped by regex as Isaac Lab's `joint_names_expr` (per joint by default); each group gets an armature,
a viscous damping and a frictionloss (and PD gains when the log does not state them), optionally a DC-motor
envelope (`dc_motor=True`: saturation effort, velocity limit, max motor effort — Newton's ClampingDCMotor, Isaac
Lab's DCMotor clip, docs/consumer-semantics.md §A.4 / §C.2), each joint an encoder bias; the command delay is one
integer for the robot, over physics steps 0..max_delay. Training windows restart from the measured state. The
search (search="decoupled", the default) fits, at every candidate delay at once, each joint's own 1-DoF rollout
with the joint-space inertia and the coupling and gravity efforts Newton computes along the measured motion
(models/articulated.py DecoupledRollout) by Levenberg–Marquardt (fitting/search.py batched_lm), each block of
variables that moves its own joints alone (a leg on a fixed base) a problem of its own; the delays that decoupled
training loss ranks first (and any it cannot tell apart) are rolled out coupled, the two best and the one kept
below refined by output space mapping (the decoupled fit plus the coupled rollouts' own mismatch, one coupled
batch a round) while a Gauss-Newton step promises a gain, and by coupled least squares when that stalls; the
lowest coupled training loss picks the delay, or the step above it when that is within 5 % (a delay between two
grid steps fits about as well at either neighbour; damping and armature add lag but cannot remove it, so a delay
too short is made up by them on motion slower than use, and their lag does not grow with frequency as a
delay's does). search="coupled" is the plain path: trust-region least squares (fitting/search.py trust_region)
on batched coupled rollouts, the delay scanned at fixed parameters before and after. Either way the
finite-difference Jacobian perturbs parameters that cannot load each other (joints in different coupling
components, e.g. two legs on a fixed base) in the same candidate, which is exact, and every reported figure comes
from coupled rollouts. The envelope starts from the equation-error regression, or a coarse scan scaled by the PD
effort the log demands. The group terms are a registry family's parameters (family_terms: ideal_pd, or dcmotor
with the envelope), bounded by the registry's plant rules scaled to the model and the log (model_bounds). A
single-segment log is split in time: the last `validation_fraction` is replayed from the measured state at the
split, and that replay gives the reported error, beside the model file's own joint terms on the same split.

The result (`fit_robot`: a RobotResult, fitting/result.py; `to_json()` is fit.json's; SI units):
- `kind` "robot"; `robot` (models/robot.py `summary()`); `joint_mapping` (how log joints met model joints);
- `groups`: {group: {`joint_names_expr`, `joints` [names], `armature` kg·m², `viscous_friction` N·m·s/rad,
  `friction` N·m (frictionloss), `stiffness` N·m/rad, `damping` N·m·s/rad (PD kd), `effort_limit` N·m or None
  (the fitted max motor effort when the envelope is fitted, or a fitted box where the model's position servos
  state a force range, which the fit replaces with them; else the model's limit), `saturation_effort` N·m,
  `velocity_limit` rad/s (None when no envelope is fitted), `model_effort_limit` N·m or None (the model file's
  joint limit, a box after the envelope), `envelope_active` (share of held-out physics steps at which the
  envelope cut the PD effort, 0 without one)}};
- `motor_envelope` ("dc_motor" or "off"), `gains` (where the PD gains came from), `encoder_bias` {joint: rad},
  `delay_steps` (physics steps), `delay` (how it was found), `sim` {`dt` physics step s, `decimation`};
- `validation` {`split` "time", `split_sample`, `split_time_s`, `fraction`, `rmse`, `per_joint_rmse`,
  `model_defaults_rmse`, `model_defaults_per_joint_rmse`, `model_defaults`, `replay`, and on the decoupled path
  `decoupled_fit` {rmse, per_joint_rmse, groups, encoder_bias, delay_steps, note}: the decoupled fit beside the
  coupled one, replayed coupled};
- `training` {windows, window_s, search, jacobians (coupled), fd_candidates_per_jacobian, stopped_on,
  initial_rmse, rmse (coupled), search_s, start; decoupled path: decoupled_jacobians, coupled_batches,
  refinement_rounds, delay_decoupled_rmse, delay_coupled_rmse}; `wall_s`, `world_steps`, `world_steps_per_s`;
  `effort_mode` ("explicit" or Newton's "implicit", every coupled rollout's); `assumptions` [text].
`isaaclab_dict(result)` turns it into the whole-robot `actuators={...}` dict of an ArticulationCfg.

The modules, by concern: options.py (RobotFitOptions), problem.py (the search variables, their bounds and steps,
groups), data.py (prepare_fit: the log mapped, split and windowed; bounds from the model and the log), plant.py
(coupled and decoupled rollouts, replays), start.py (the search's start and scans), jacobian.py (the
finite-difference Jacobians, all fitting/search.py fd_jacobian), search.py (decoupled and coupled search),
validate.py (the held-out replays), result.py (the RobotResult), output.py (Isaac Lab dict, fit.json, CLI
lines), fit.py (fit_robot).
"""

from .data import FitData, model_bounds, pd_effort, prepare_fit
from .fit import fit_robot
from .inertial import InertialOptions, InertialResult, identify_inertials
from .jacobian import coupled_jacobian, jacobian_and_initial_state_effect
from .options import REQUEST_NAMES, RobotFitOptions
from .output import has_envelope, isaaclab_dict, result_lines, write_robot_fit
from .plant import CoupledEvaluator, DecoupledEvaluator, c_rollout, joint_terms, replay_coupled
from .problem import (
    ALL_TERMS,
    BIAS_UNIT,
    DC_TERMS,
    OFFSET,
    POSITION_FRICTION,
    Problem,
    family_terms,
    parse_groups,
    require_stand,
    resolve_groups,
)
from .result import BIAS_PLAUSIBLE, bound_report
from .validate import replay_validation

__all__ = [
    "ALL_TERMS",
    "BIAS_PLAUSIBLE",
    "BIAS_UNIT",
    "DC_TERMS",
    "OFFSET",
    "POSITION_FRICTION",
    "REQUEST_NAMES",
    "CoupledEvaluator",
    "DecoupledEvaluator",
    "FitData",
    "InertialOptions",
    "InertialResult",
    "Problem",
    "RobotFitOptions",
    "bound_report",
    "c_rollout",
    "coupled_jacobian",
    "family_terms",
    "fit_robot",
    "has_envelope",
    "identify_inertials",
    "isaaclab_dict",
    "jacobian_and_initial_state_effect",
    "joint_terms",
    "model_bounds",
    "parse_groups",
    "pd_effort",
    "prepare_fit",
    "replay_coupled",
    "replay_validation",
    "require_stand",
    "resolve_groups",
    "result_lines",
    "write_robot_fit",
]
