"""A coupled fit of every actuator of a robot hanging in the air, through the robot's own model (Newton).

Joints are grouped by regex as Isaac Lab's `joint_names_expr` (per joint by default); each group gets an armature,
a viscous damping and a frictionloss (and PD gains when the log does not state them), optionally a DC-motor
envelope (`dc_motor=True`: saturation effort, velocity limit, max motor effort — Newton's ClampingDCMotor, Isaac
Lab's DCMotor clip, docs/consumer-semantics.md §A.4 / §C.2), each joint an encoder bias; the command delay is one
integer for the robot, over physics steps 0..max_delay. Training windows restart from the measured state. The
search (search="decoupled", the default) fits, at every candidate delay at once, each joint's own 1-DoF rollout
with the joint-space inertia and the coupling and gravity efforts Newton computes along the measured motion
(models/articulated.py DecoupledRollout) by Levenberg–Marquardt (fitting/search.py batched_lm); the delays that
decoupled training loss ranks first (and any it cannot tell apart) are rolled out coupled, the two best refined by
output space mapping (the decoupled fit plus the coupled rollouts' own mismatch, one coupled batch a round) while
a Gauss-Newton step promises a gain, and by coupled least squares when that stalls; the lower coupled training
loss picks the delay. search="coupled" is the plain path: trust-region least squares (fitting/search.py
trust_region) on batched coupled rollouts, the delay scanned at fixed parameters before and after. Either way the
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
  (the fitted max motor effort when the envelope is fitted, else the model's limit), `saturation_effort` N·m,
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
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..datasets.names import check_name, quote_name
from ..datasets.recording import Recording, Segment
from ..models import parameters
from ..models.articulated import (
    EFFORT_MODES,
    ArticulatedRollout,
    DecoupledRollout,
    JointTerms,
    inverse_dynamics,
    joint_space_terms,
    limited,
    physics_targets,
)
from ..models.families import Family, get_family
from ..models.robot import RobotError, RobotModel, map_joints
from . import robot_judge
from .coverage import robot_beyond_training
from .request import ROBOT_BOUNDS
from .result import (
    GROUP_KEYS,
    BoundHit,
    DecoupledFit,
    RobotBounds,
    RobotGroup,
    RobotResult,
    RobotTraining,
    RobotValidation,
    Verdict,
    WideBias,
)
from .search import Tolerances, batched_lm, trust_region
from .space import SearchSpace, plant_range
from .warmstart import fit_dc_envelope

log = logging.getLogger(__name__)

# Every searched term is a registry parameter (models/parameters.py) of the group's family (ideal_pd, or
# dcmotor with the envelope), bounded by its `plant` rule: scaled per group to the model and the log
# (model_bounds), never a fixed cap.
ENVELOPE_FAMILY = {False: "ideal_pd", True: "dcmotor"}
BIAS_PLAUSIBLE = 0.05  # rad; a fitted bias beyond this is flagged as absorbing model error, not a calibration
AT_BOUND = 1e-3  # a search variable within this share of its range from a bound is reported at that bound
DC_TERMS = (
    "saturation_effort",
    "actuator_velocity_limit",
    "actuator_effort_limit",
)  # the envelope (Newton's)
# every group term in search order; the PD gains are searched when the log does not state them, the envelope with
# dc_motor, and the family's actuator_effort_limit without an envelope is the model file's joint limit (fixed)
ALL_TERMS = ("armature", "viscous_friction", "friction", "friction_upper", "stiffness", "damping", *DC_TERMS)
POSITION_FRICTION = (
    "friction_upper"  # with position_friction: friction at the upper limit, `friction` at the lower
)
OFFSET = "encoder_offset"  # the registry's encoder bias; fit.json names it encoder_bias
BIAS_UNIT = 0.01  # the search sees the bias in centiradians so every variable is O(1)
FD_STEP = {"log": 0.02, "bias": 0.1}
SCAN_WINDOWS = 4
LM_TOL = 1e-3  # the decoupled least squares stops a problem once its loss falls by less than this share
STEPS = (0.5, 1.0, 2.0)  # the coupled refinement tries these multiples of each space-mapping step
DELAY_TIE = (
    0.05  # delays whose decoupled training loss is within this share of the best are all rolled out coupled
)
SLOW = 0.5  # a refinement round that lowers the coupled loss by less than half hands over to coupled least squares
_EFFORT_TEXT = {
    "explicit": "explicit effort (from the step's start state)",
    "implicit": "Newton's implicit effort mode (Newton's own DrivePD and clamps, solved at the predicted "
    "end-of-step state through newton.actuators.JointSpaceResponse.refresh_from_solve, the solver's inertia)",
}
# a few costly Jacobians: loose tolerances, in the search's own units (log10 and centiradians, all O(1))
COUPLED_TOLERANCES = Tolerances(xtol=1e-6, ftol=1e-6, gtol=1e-8, tr_solver=None, unit_cube=False)
MIN_GAIN = 0.005  # no coupled refinement round when a Gauss-Newton step would lower the coupled RMS less
# the envelope's start scan, per group: max motor effort × the largest PD effort the log demands, saturation
# effort × that, velocity limit × the fastest logged speed
ENVELOPE_GRID = {"effort": (0.15, 0.25, 0.4, 0.6, 0.9), "ratio": (1.2, 2.0, 4.0), "speed": (1.2, 2.0, 4.0)}


# the last robot's explicit C rollout, shared by its fits' evaluators
_C_ROLLOUT: list[tuple[RobotModel, ArticulatedRollout]] = []


def c_rollout(robot: RobotModel) -> ArticulatedRollout:
    """The explicit-mode MuJoCo C rollout of `robot`, converted once per robot object (a selection fits one robot
    many times); only the last robot's is kept."""
    if not _C_ROLLOUT or _C_ROLLOUT[0][0] is not robot:
        _C_ROLLOUT[:] = [(robot, ArticulatedRollout(robot, 1, device="cpu", mujoco_cpu=True))]
    return _C_ROLLOUT[0][1]


class BudgetSpent(Exception):
    """Raised inside the least-squares residual when the time budget is spent; the best point so far stands."""


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


@dataclass
class _Problem:
    """The parameter layout: which group each joint is in and where each variable sits."""

    names: list[str]  # model joint names
    groups: dict[str, list[int]]  # group → joint indices
    exprs: dict[str, str]
    terms: list[str]  # per-group searched terms
    fit_bias: bool
    kp: np.ndarray | None  # (J,) known gains, or None
    kd: np.ndarray | None
    effort_limit: np.ndarray
    component: np.ndarray  # (J,) the robot's coupling component of each joint
    var_names: list[str] = field(default_factory=list)
    effort_mode: str = "explicit"  # every coupled rollout's (RobotFitOptions.effort_mode)
    # {group: {term: (lo, hi)}} log10 bounds and (J,) encoder bias bounds, rad (model_bounds), and the scales
    term_bounds: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    bias_bound: np.ndarray | None = None
    scales: dict[str, dict[str, float]] = field(default_factory=dict)
    gains: str = "fitted per group (the log states none)"  # where the PD gains came from, for the result
    # payload bodies (link inertial corrections): names, builder indices, the model's mass (B,) and COM (B, 3)
    bodies: list[str] = field(default_factory=list)
    body_index: np.ndarray | None = None
    body_mass0: np.ndarray | None = None
    body_com0: np.ndarray | None = None
    fit_com: bool = False

    def __post_init__(self) -> None:
        self.var_names = [self.var_name(g, t) for g in self.groups for t in self.terms]
        for b in self.bodies:
            self.var_names += [f"{b}.mass"] + ([f"{b}.com_{a}" for a in "xyz"] if self.fit_com else [])
        if self.fit_bias:
            self.var_names += [f"{n}.bias" for n in self.names]

    @staticmethod
    def var_name(group: str, term: str) -> str:
        """A group term's search variable as the result names it ("FR_hip.effort_limit")."""
        return f"{group}.{GROUP_KEYS.get(term, term)}"

    def var(self, group: str, term: str) -> int:
        """A group term's position among the search variables."""
        return self.var_names.index(self.var_name(group, term))

    @property
    def size(self) -> int:
        return len(self.var_names)

    def bound(self, group: str, term: str) -> tuple[float, float]:
        """One group term's log10 bounds (model_bounds)."""
        return self.term_bounds[group][term]

    def clip_log(self, group: str, term: str, value: float) -> float:
        """A natural value as its search variable (log10), inside its bounds."""
        lo, hi = self.bound(group, term)
        return float(np.clip(math.log10(max(value, 10**lo)), lo, hi))

    @property
    def per_body(self) -> int:
        """Search variables per payload body: log10 mass, and the COM offset (cm) with fit_com."""
        return 4 if self.fit_com else 1

    def body_bounds(self) -> tuple[list[float], list[float]]:
        """The payload variables' bounds: mass a decade either side of the model's; the COM offset within
        max(5 cm, twice the model COM's distance from the body frame) per axis."""
        lo: list[float] = []
        hi: list[float] = []
        for k in range(len(self.bodies)):
            assert self.body_mass0 is not None and self.body_com0 is not None
            m = math.log10(float(self.body_mass0[k]))
            lo.append(m - 1.0)
            hi.append(m + 1.0)
            if self.fit_com:
                c = max(0.05, 2.0 * float(np.linalg.norm(self.body_com0[k]))) / BIAS_UNIT
                lo += [-c] * 3
                hi += [c] * 3
        return lo, hi

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Every search variable's (lower, upper) bound, in the search's own units."""
        b = self.bias_bound if self.bias_bound is not None else np.full(len(self.names), 0.3)
        bias = list(b / BIAS_UNIT) if self.fit_bias else []
        blo, bhi = self.body_bounds()
        lo = [self.bound(g, t)[0] for g in self.groups for t in self.terms] + blo + [-v for v in bias]
        hi = [self.bound(g, t)[1] for g in self.groups for t in self.terms] + bhi + bias
        return np.array(lo), np.array(hi)

    def space(self) -> SearchSpace:
        """The search variables as a SearchSpace in the search's own units (log10 of group terms and masses,
        centiradians and centimetres of biases and COM offsets), linear in them."""
        lo, hi = self.bounds()
        return SearchSpace(
            tuple(self.var_names), lo, hi, np.zeros(self.size, bool), np.zeros(self.size, bool)
        )

    def steps(self) -> np.ndarray:
        nt = len(self.groups) * len(self.terms)
        body = ([FD_STEP["log"]] + [FD_STEP["bias"]] * (self.per_body - 1)) * len(self.bodies)
        return np.array([FD_STEP["log"]] * nt + body + [FD_STEP["bias"]] * (self.size - nt - len(body)))

    def joint_values(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """(C, d) search variables → per-joint natural values {term: (C, J)}, bias included."""
        c, j = x.shape[0], len(self.names)
        out = {t: np.full((c, j), parameters.get(t).neutral) for t in ALL_TERMS}
        k = 0
        for idx in self.groups.values():
            for t in self.terms:
                out[t][:, idx] = (10.0 ** x[:, k])[:, None]
                k += 1
        if POSITION_FRICTION not in self.terms:  # constant along the stroke
            out[POSITION_FRICTION] = out["friction"].copy()
        if self.kp is not None:
            out["stiffness"][:] = self.kp[None]
            out["damping"][:] = self.kd[None] if self.kd is not None else 0.0
        if self.bodies:
            assert self.body_com0 is not None
            nb, pb = len(self.bodies), self.per_body
            xb = x[:, k : k + nb * pb].reshape(c, nb, pb)
            out["body_mass"] = 10.0 ** xb[:, :, 0]
            out["body_com"] = self.body_com0[None] + (
                xb[:, :, 1:] * BIAS_UNIT if self.fit_com else np.zeros((c, nb, 3))
            )
            k += nb * pb
        out[OFFSET] = x[:, k:] * BIAS_UNIT if self.fit_bias else np.zeros((c, j))
        return out

    @property
    def dc_motor(self) -> bool:
        return "saturation_effort" in self.terms

    def var_joints(self) -> list[np.ndarray]:
        """Per variable, the joints whose parameters it sets."""
        out = [np.array(idx) for idx in self.groups.values() for _ in self.terms]
        out += [np.arange(len(self.names))] * (len(self.bodies) * self.per_body)  # a body loads every joint
        if self.fit_bias:
            out += [np.array([i]) for i in range(len(self.names))]
        return out


MAX_GROUP_REGEX = 1000
"""Characters a group's regex may have."""


def resolve_groups(
    names: list[str], groups: dict[str, str] | None
) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Group → joint indices by full-match regex; every joint in exactly one group (Isaac Lab's rule)."""
    if not groups:
        return {n: [i] for i, n in enumerate(names)}, {n: re.escape(n) for n in names}
    out: dict[str, list[int]] = {}
    owner: dict[int, str] = {}
    for g, expr in groups.items():
        check_name(g, "group name", "groups")  # a group name reaches every export; its regex is data, quoted
        if not isinstance(expr, str) or len(expr) > MAX_GROUP_REGEX:
            raise RobotError(
                f"group {g}: the regex must be text of at most {MAX_GROUP_REGEX} characters, got {quote_name(expr)}"
            )
        try:
            pat = re.compile(expr)
        except re.error as e:
            raise RobotError(f"group {g}: {expr!r} is not a regular expression ({e})") from None
        idx = [i for i, n in enumerate(names) if pat.fullmatch(n)]
        if not idx:
            raise RobotError(f"group {g}: {expr!r} matches no joint of the model ({', '.join(names)})")
        for i in idx:
            if i in owner:
                raise RobotError(
                    f"joint {names[i]} is in groups {owner[i]} and {g}; a joint belongs to one group"
                )
            owner[i] = g
        out[g] = idx
    left = [names[i] for i in range(len(names)) if i not in owner]
    if left:
        raise RobotError(
            f"joint(s) {', '.join(left)} match no group ({', '.join(f'{g}={e}' for g, e in groups.items())})"
        )
    return out, dict(groups)


def require_stand(floating: bool, fixed_base: str | None) -> str | None:
    """A floating-base model hangs on a stand: the link fixed to the world must be named (CLI and API alike).
    Returns the note the robot's summary carries for a floating base, else None."""
    if not floating:
        return None
    if not fixed_base:
        raise RobotError(
            "a floating base but no link named: an in-air fit holds the robot on a stand; name the "
            "link fixed to the world (--fixed-base LINK, or fixed_base in the API; this version "
            "fixes the root link)"
        )
    return f"the model's floating base is held at {fixed_base} (fixed to the world)"


def parse_groups(text: str | None) -> dict[str, str] | None:
    """`hip='.*_hip_joint',thigh=...` (quotes optional) → {name: regex}; None or empty → per joint."""
    if not text:
        return None
    out = {}
    for part in re.split(r",(?=\s*[A-Za-z_][\w-]*\s*=)", text):
        if "=" not in part:
            raise RobotError(f"--groups: {part!r} is not NAME=REGEX")
        name, expr = part.split("=", 1)
        out[name.strip()] = expr.strip().strip("'\"")
    return out


def _log_gains(seg: Segment, key: str, names: list[str]) -> np.ndarray | None:
    """Per-joint gain from a segment's metadata (a number, or a {joint: value} dict), if stated."""
    v = seg.metadata.get(key)
    if v is None:
        return None
    if isinstance(v, dict):
        return np.array([float(v[n]) for n in names])
    return np.full(len(names), float(v))


def _color(var_comps: list[set[int]]) -> list[list[int]]:
    """Greedy grouping of variables whose coupling components are disjoint (one FD candidate per colour)."""
    colors: list[tuple[set[int], list[int]]] = []
    for v, comps in enumerate(var_comps):
        for used, members in colors:
            if not used & comps:
                used |= comps
                members.append(v)
                break
        else:
            colors.append((set(comps), [v]))
    return [m for _, m in colors]


def joint_terms(
    v: dict[str, np.ndarray], effort_limit: np.ndarray, bodies: np.ndarray | None = None
) -> JointTerms:
    """The rollout's per-world terms from per-joint values {term: (W, J)}; the model's box limit `effort_limit`;
    the payload bodies' (builder indices `bodies`) mass (W, B) and COM (W, B, 3) where the values have them."""
    return JointTerms(
        stiffness=v["stiffness"],
        damping=v["damping"],
        armature=v["armature"],
        viscous_friction=v["viscous_friction"],
        friction=v["friction"],
        friction_upper=v.get(POSITION_FRICTION),
        encoder_offset=v[OFFSET],
        joint_effort_limit=effort_limit,
        saturation_effort=v.get("saturation_effort"),
        actuator_velocity_limit=v.get("actuator_velocity_limit"),
        actuator_effort_limit=v.get("actuator_effort_limit"),
        bodies=bodies if "body_mass" in v else None,
        body_mass=v.get("body_mass"),
        body_com=v.get("body_com"),
    )


class _Evaluator:
    """Batched coupled rollouts of candidates over fixed windows, one Newton model per world count."""

    def __init__(
        self,
        robot: RobotModel,
        prob: _Problem,
        q: np.ndarray,
        qd: np.ndarray,
        cmd: np.ndarray,
        cmd_qd: np.ndarray,
        starts: np.ndarray,
        length: int,
        decimation: int,
        dt: float,
        device: str,
        tau_ff: np.ndarray | None = None,
        first: np.ndarray | None = None,
    ):
        self.robot, self.prob = robot, prob
        self.q, self.qd, self.cmd, self.cmd_qd = q, qd, cmd, cmd_qd
        self.tau_ff = np.zeros_like(cmd) if tau_ff is None else tau_ff
        self.first = first  # (T,) each sample's recording's first sample, None: one recording
        self.starts, self.length, self.dec, self.dt, self.device = starts, length, decimation, dt, device
        self._models: dict[int, ArticulatedRollout] = {}
        self.world_steps = 0
        self.seconds = 0.0

    def engine(self, worlds: int) -> ArticulatedRollout:
        """The rollout for `worlds` worlds: on the CPU in explicit mode MuJoCo's C backend of the same Newton
        solver (it steps a world several times faster than Warp's CPU backend, whose cost is kernel launches),
        else Newton's SolverMuJoCo on Warp."""
        explicit_cpu = self.prob.effort_mode == "explicit" and str(self.device).startswith("cpu")
        if explicit_cpu:
            return c_rollout(self.robot).at_worlds(worlds)
        if worlds not in self._models:
            self._models[worlds] = ArticulatedRollout(
                self.robot,
                worlds,
                device=self.device,
                effort_mode=self.prob.effort_mode,
            )
        return self._models[worlds]

    def simulate(self, x: np.ndarray, delays: np.ndarray, q0: np.ndarray | None = None) -> np.ndarray:
        """(C, d) candidates with (C,) delays → measured positions (C, windows, length + 1, J); `q0` (C, windows,
        J) starts each candidate's windows from other measured positions than the log's."""
        c, nw, j = x.shape[0], self.starts.size, len(self.prob.names)
        vals = self.prob.joint_values(x)
        rep = {k: np.repeat(v, nw, axis=0) for k, v in vals.items()}  # world = candidate · nw + window
        starts = np.tile(self.starts, c)
        firsts = None if self.first is None else self.first[self.starts]
        # both targets delayed, as Isaac Lab's DelayBuffers and Newton's Delay hold them
        tq, tqd, tff = (
            np.concatenate(
                [
                    physics_targets(cmd, starts[w0 : w0 + nw], self.length, self.dec, int(d), firsts)
                    for w0, d in zip(range(0, c * nw, nw), delays, strict=True)
                ],
                axis=1,
            )
            for cmd in (self.cmd, self.cmd_qd, self.tau_ff)
        )
        terms = joint_terms(rep, np.broadcast_to(self.prob.effort_limit, (c * nw, j)), self.prob.body_index)
        t0 = time.perf_counter()
        start_q = self.q[starts] if q0 is None else np.asarray(q0, float).reshape(c * nw, j)
        out_q, _ = self.engine(c * nw).run(start_q, self.qd[starts], tq, tqd, terms, self.dec, self.dt, tff)
        self.seconds += time.perf_counter() - t0
        self.world_steps += c * nw * self.length * self.dec
        return out_q.transpose(1, 0, 2).reshape(c, nw, self.length + 1, j)

    def residuals(self, x: np.ndarray, delays: np.ndarray) -> np.ndarray:
        """(C, J, windows·length) simulated minus measured positions after each window's first sample."""
        return self.residuals_of(self.simulate(x, delays))

    def residuals_of(self, positions: np.ndarray) -> np.ndarray:
        """residuals() of simulated positions (C, windows, length + 1, J)."""
        sim = positions[:, :, 1:]
        idx = self.starts[:, None] + np.arange(1, self.length + 1)[None]
        meas = self.q[idx]  # (nw, L, J)
        r = sim - meas[None]
        return np.nan_to_num(r.transpose(0, 3, 1, 2).reshape(sim.shape[0], len(self.prob.names), -1), nan=1.0)


class _DecoupledEvaluator:
    """_Evaluator's interface on the fast path: each joint's own 1-DoF rollout along the measured motion
    (models/articulated.py DecoupledRollout). It steers the search; no reported figure comes from it."""

    def __init__(
        self,
        robot: RobotModel,
        prob: _Problem,
        data: _Data,
        starts: np.ndarray,
        decimation: int,
        bias0: np.ndarray,
        device: str = "cpu",
    ):
        self.prob, self.data, self.starts, self.dec = prob, data, starts, decimation
        self.roll = DecoupledRollout(
            robot,
            data.q,
            data.qd,
            data.cmd,
            data.cmd_qd,
            data.split,
            data.dt * decimation,
            bias0,
            device,
            prob.effort_mode,
            tau_ff=data.tau_ff,
            cuts=np.array([a for a, _ in data.pieces[1:]], int),
        )
        self.first = data.first_of(starts)
        self.calls = 0

    def residuals(self, x: np.ndarray, delays: np.ndarray) -> np.ndarray:
        """(C, J, windows·length) simulated minus measured positions, as _Evaluator.residuals."""
        v = self.prob.joint_values(x)
        c, j = x.shape[0], len(self.prob.names)
        v["joint_effort_limit"] = np.broadcast_to(self.prob.effort_limit, (c, j))
        par = np.stack([v[t] for t in DecoupledRollout.COLUMNS], axis=2)
        r = self.roll.run(
            par, np.asarray(delays), self.starts, self.data.length, self.dec, self.data.dt, self.first
        )
        self.calls += 1
        return np.nan_to_num(r.transpose(0, 3, 1, 2).reshape(c, j, -1), nan=1.0, posinf=1.0, neginf=-1.0)


def _decoupled_colors(prob: _Problem) -> tuple[list[list[int]], list[np.ndarray]]:
    """Variables perturbed together in the decoupled Jacobian, and each variable's joints: a group term moves
    only its group's joints there; an encoder bias moves every joint of its coupling component (gravity at the
    true angle; joints in different components never load each other)."""
    comps = prob.component
    rows = [
        idx if not vn.endswith(".bias") else np.flatnonzero(np.isin(comps, comps[idx]))
        for vn, idx in zip(prob.var_names, prob.var_joints(), strict=True)
    ]
    return _color([set(int(k) for k in r) for r in rows]), rows


def _decoupled_jacobian(
    dev: _DecoupledEvaluator, x: np.ndarray, delays: np.ndarray, r0: np.ndarray
) -> np.ndarray:
    """(P, N, d) coloured forward-difference Jacobians of the decoupled residuals at x (P, d), r0 (P, J, S) there."""
    prob = dev.prob
    p, d = x.shape
    _, hi = prob.bounds()
    colors, rows = _decoupled_colors(prob)
    hs = np.zeros((len(colors), d))
    for ci, members in enumerate(colors):
        hs[ci, members] = prob.steps()[members]
    hs = np.where(x[:, None, :] + hs[None] <= hi, hs[None], -hs[None])  # (P, colours, d)
    rc = dev.residuals((x[:, None, :] + hs).reshape(-1, d), np.repeat(delays, len(colors)))
    rc = rc.reshape(p, len(colors), *r0.shape[1:])
    jt = np.zeros((p, d, *r0.shape[1:]))
    for ci, members in enumerate(colors):
        diff = rc[:, ci] - r0
        for v in members:
            jt[:, v, rows[v]] = diff[:, rows[v]] / hs[:, ci, v][:, None, None]
    return jt.reshape(p, d, -1).transpose(0, 2, 1)


def _decoupled_lm(
    dev: _DecoupledEvaluator,
    xs: np.ndarray,
    delays: np.ndarray,
    iterations: int,
    offset: np.ndarray | None = None,
    prune: tuple[int, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Levenberg–Marquardt (fitting/search.py batched_lm) on the decoupled residuals (+ `offset`, (P, N)), one
    problem per row of xs with its own delay, with coloured forward-difference Jacobians. `prune` (n, f): after
    n iterations, problems whose loss is above f × the best stop (a delay that cannot win). Returns the points,
    their losses (RMS) and the number of Jacobian batches."""
    nj = len(dev.prob.names)
    off = np.zeros((xs.shape[0], nj, 1)) if offset is None else offset.reshape(xs.shape[0], nj, -1)

    def residuals(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return (dev.residuals(x, delays[rows]) + off[rows]).reshape(x.shape[0], -1)

    def jacobian(x: np.ndarray, rows: np.ndarray, r: np.ndarray) -> np.ndarray:
        # the offset is constant in x: the Jacobian is the decoupled residuals' own, differenced without it
        return _decoupled_jacobian(dev, x, delays[rows], r.reshape(x.shape[0], nj, -1) - off[rows])

    lo, hi = dev.prob.bounds()
    return batched_lm(residuals, jacobian, xs, lo, hi, iterations, prune, LM_TOL)


def _predicted_gain(jm: np.ndarray, r: np.ndarray) -> np.ndarray:
    """(P,) the share by which a Gauss-Newton step on Jacobians jm (P, N, d) would lower the RMS of r (P, N):
    1 − |r − P r| / |r|, P the projection onto each Jacobian's range."""
    out = np.zeros(r.shape[0])
    for k in range(r.shape[0]):
        step = np.linalg.lstsq(jm[k], r[k], rcond=None)[0]
        out[k] = 1.0 - np.linalg.norm(r[k] - jm[k] @ step) / max(float(np.linalg.norm(r[k])), 1e-300)
    return out


def _refine_coupled(
    ev: _Evaluator,
    dev: _DecoupledEvaluator,
    xs: np.ndarray,
    delays: np.ndarray,
    rc: np.ndarray,
    rounds: int,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, dict[int, float], dict[str, int]]:
    """Coupled refinement at a few delays at once (output space mapping): each round fits the decoupled model
    plus the coupled rollouts' own mismatch at the current point, then one coupled batch tries the full and the
    half step of every problem; a problem keeps its better point. rc: coupled residuals at xs (P, J, S).
    Returns the best point, its delay, the final coupled training RMSE at each delay, and the statistics."""
    p = xs.shape[0]
    x, r = xs.copy(), rc.copy()
    loss = np.sqrt(np.mean(r**2, axis=(1, 2)))
    stats = {"coupled_batches": 0, "decoupled_jacobians": 0, "rounds": 0, "stalled": 0}
    final: dict[int, float] = {}
    for _ in range(rounds):
        rd = dev.residuals(x, delays)
        delta = r - rd
        gain = _predicted_gain(_decoupled_jacobian(dev, x, delays, rd), r.reshape(p, -1))
        stats["decoupled_jacobians"] += 1
        say(
            "coupled refinement: a Gauss-Newton step on the decoupled Jacobian would lower the coupled training "
            "RMSE by " + ", ".join(f"{g_:.2%}" for g_ in gain)
        )
        if spent() or np.all(gain < MIN_GAIN):  # the decoupled optimum is the coupled one, to that share
            break
        xn, _, nj = _decoupled_lm(dev, x, delays, 4, offset=delta.reshape(p, -1))
        stats["decoupled_jacobians"] += nj
        lo, hi = dev.prob.bounds()
        cand = np.concatenate(
            [np.clip(x + a * (xn - x), lo, hi) for a in STEPS]
        )  # half, full and twice the step
        rt = ev.residuals(cand, np.tile(delays, len(STEPS)))
        stats["coupled_batches"] += 1
        stats["rounds"] += 1
        lt = _rms(rt).reshape(len(STEPS), p)
        before = loss.copy()
        for k in range(p):
            b = int(np.argmin(lt[:, k]))
            if lt[b, k] < loss[k]:
                x[k], loss[k], r[k] = cand[b * p + k], lt[b, k], rt[b * p + k]
        say(
            "coupled refinement: training RMSE "
            + ", ".join(f"delay {int(d)}: {lv:.6f} rad" for d, lv in zip(delays, loss, strict=True))
        )
        if np.all(loss > SLOW * before):  # the decoupled model no longer leads the coupled loss down fast
            stats["stalled"] = 1
            break
        if p > 1 and loss.max() > 2.0 * loss.min():  # a delay that cannot win stops costing rollouts
            keep = np.arange(p) != int(np.argmax(loss))
            final.update({int(d): float(v) for d, v in zip(delays[~keep], loss[~keep], strict=True)})
            x, r, loss, delays, p = x[keep], r[keep], loss[keep], delays[keep], p - 1
    final.update({int(d): float(v) for d, v in zip(delays, loss, strict=True)})
    b = int(np.argmin(loss))
    return x[b], int(delays[b]), final, stats


def _search_decoupled(
    robot: RobotModel,
    ev: _Evaluator,
    dev: _DecoupledEvaluator,
    x0: np.ndarray,
    delay: int,
    opts: RobotFitOptions,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, dict[str, Any]]:
    """The fast path: a decoupled least-squares fit at every candidate delay (one lockstep batch; x0 one start, or
    one per delay), the two best by that training loss (and any within DELAY_TIE of the best) rolled out coupled,
    the two best by the coupled training loss refined coupled (while a
    Gauss-Newton step on the decoupled Jacobian promises a gain; coupled least squares for the rest of
    max_iterations when that stalls); the lower coupled training loss picks the delay. Returns the point, the
    delay and the search statistics."""
    delays = np.array([delay]) if opts.delay is not None else np.arange(opts.max_delay + 1)
    x0 = (
        np.broadcast_to(x0, (delays.size, x0.shape[-1])) if x0.ndim == 1 or x0.shape[0] != delays.size else x0
    )
    xs, dloss, nj = _decoupled_lm(dev, np.array(x0), delays, 12)
    say(
        "decoupled fit per delay: "
        + ", ".join(f"{int(d)}: {v:.6f}" for d, v in zip(delays, dloss, strict=True))
    )
    order = np.argsort(dloss)  # the decoupled loss ranks the delays; those it cannot tell apart go on coupled
    top = order[: max(2, int(np.sum(dloss <= (1.0 + DELAY_TIE) * dloss.min())))]
    rc = ev.residuals(xs[top], delays[top])
    closs = _rms(rc)
    say(
        "coupled training RMSE at the decoupled fits: "
        + ", ".join(f"delay {int(delays[k])}: {v:.6f} rad" for k, v in zip(top, closs, strict=True))
    )
    keep = np.argsort(closs)[:2]
    x, best, final, st = _refine_coupled(
        ev, dev, xs[top][keep], delays[top][keep], rc[keep], max(1, opts.max_iterations), spent, say
    )
    left = opts.max_iterations - st["rounds"]
    lsq: dict[str, Any] = {"jacobians": 0, "stopped_on": "converged"}
    if st["stalled"] and left > 0 and not spent():  # the last stretch by coupled least squares
        say(f"coupled least squares at delay {best} (the decoupled model no longer helps)")
        x, lsq = _least_squares(robot, dev.prob, ev, x, best, left, spent, say)
        final[best] = float(lsq["rmse"])
    stats: dict[str, Any] = {
        "search": "decoupled (each joint's own rollout along the measured motion), then coupled refinement",
        "jacobians": lsq["jacobians"],
        "decoupled_jacobians": nj + st["decoupled_jacobians"],
        "coupled_batches": 1 + st["coupled_batches"],
        "refinement_rounds": st["rounds"],
        "fd_candidates_per_jacobian": 1 + len(_decoupled_colors(dev.prob)[0]),
        "stopped_on": "budget" if spent() else lsq["stopped_on"],
        "initial_rmse": float(closs[keep[0]]),
        "rmse": final[best],
        "delay_decoupled_rmse": {str(int(d)): float(v) for d, v in zip(delays, dloss, strict=True)},
        "delay_coupled_rmse": {str(d): v for d, v in final.items()},
        "_decoupled_x": xs[int(np.flatnonzero(delays == best)[0])],
    }  # the report's decoupled fit (popped)
    return x, best, stats


def replay_coupled(
    robot: RobotModel,
    vals: list[dict[str, np.ndarray]],
    delays: list[int],
    q: np.ndarray,
    qd: np.ndarray,
    cmd: np.ndarray,
    cmd_qd: np.ndarray,
    start: int,
    decimation: int,
    dt: float,
    effort: np.ndarray,
    effort_mode: str = "explicit",
    tau_ff: np.ndarray | None = None,
    spans: list[tuple[int, int, int]] | None = None,
    bodies: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each parameter set replayed alone from the measured state at `start` to the log's end: positions
    (T − start, J) and the share of physics steps at which the motor envelope cut the PD effort (J,); the
    logged feed-forward effort `tau_ff` (T, J) joins the PD effort as the targets do. `spans` (start, stop,
    first sample of its recording) replaces that one stretch by several, each replayed from its own measured
    start; their positions follow each other in the output (whole validation recordings).

    One world per replay on MuJoCo's C backend through the same Newton solver (the Warp backend agrees with it
    to float32 precision; tests/test_robot.py), because one world gains nothing from Warp's batching.
    """
    spans = spans or [(start, q.shape[0], 0)]
    out = []
    eng = ArticulatedRollout(robot, 1, device="cpu", mujoco_cpu=True, effort_mode=effort_mode)
    for v, d in zip(vals, delays, strict=True):
        terms = joint_terms({k: x[:1] for k, x in v.items()}, effort[None], bodies)
        parts, cut, steps = [], np.zeros(q.shape[1]), 0
        for a, b, first in spans:
            s, f, length = np.array([a]), np.array([first]), b - 1 - a
            rq, _ = eng.run(
                q[s],
                qd[s],
                physics_targets(cmd, s, length, decimation, d, f),
                physics_targets(cmd_qd, s, length, decimation, d, f),
                terms,
                decimation,
                dt,
                None if tau_ff is None else physics_targets(tau_ff, s, length, decimation, d, f),
            )
            parts.append(rq[:, 0])
            cut += eng.clip_fraction[0] * length
            steps += length
        out.append((np.concatenate(parts), cut / max(steps, 1)))
    return out


@dataclass
class _Data:
    """The log in model joint order, its time split and the training windows."""

    q: np.ndarray
    qd: np.ndarray
    cmd: np.ndarray
    cmd_qd: np.ndarray
    tau_ff: np.ndarray  # the logged feed-forward effort, N·m (zeros where the log has none)
    t: np.ndarray
    dt: float  # physics step
    split: int
    starts: np.ndarray
    length: int
    how: str  # how log joints were mapped
    pieces: list[tuple[int, int]] = field(default_factory=list)  # training recordings' [start, end) samples
    val_pieces: list[tuple[int, int]] = field(default_factory=list)  # each replayed alone from its start
    first: np.ndarray | None = (
        None  # (T,) each sample's recording's first sample (a delay reaches no further)
    )
    recordings: dict = field(default_factory=dict)  # how the split was made, recording names on each side

    def first_of(self, starts: np.ndarray) -> np.ndarray:
        """(W,) the first sample of each window's recording."""
        return np.zeros(len(starts), int) if self.first is None else self.first[np.asarray(starts, int)]


def family_terms(family: Family, gains_known: bool) -> list[str]:
    """The group terms a robot fit searches of a registry family, in search order: the PD gains only where the
    log states none; the effort limit only inside a DC envelope (else the model file's joint limit holds it)."""
    held = {"stiffness", "damping"} if gains_known else set()
    if "saturation_effort" not in family.params:
        held.add("actuator_effort_limit")
    unknown = [p for p in family.params if p not in ALL_TERMS and p != "delay"]
    if unknown:
        raise RobotError(f"family {family.name}: a whole-robot fit cannot search {', '.join(unknown)}")
    return [t for t in ALL_TERMS if t in family.params and t not in held]


def prepare_fit(rec: Recording, robot: RobotModel, opts: RobotFitOptions) -> tuple[_Data, _Problem, bool]:
    """Map the log onto the model, resolve groups and gains, split it (in time for one recording, else by whole
    recordings); returns data, problem, gains known."""
    order, how = map_joints(robot, rec.joint_names, len(rec.joint_names))
    perm = np.argsort(order)  # model joint k is log column perm[k]
    names = robot.joint_names
    groups, exprs = resolve_groups(names, opts.groups)
    kp, kd = _gains(rec, opts, perm, len(names))
    gains_known = kp is not None
    data = _assemble(rec, perm, opts, how)
    if kp is not None and kd is not None:
        idle = [n for k, n in enumerate(names) if kp[k] == 0 and kd[k] == 0 and not np.any(data.tau_ff[:, k])]
        if idle:
            raise RobotError(
                f"joint(s) {', '.join(idle)}: the gains are zero (kp = kd = 0) and the log has no feed-forward "
                "effort (tau_ff) for them, so nothing drives them; give the gains the robot ran "
                "(--kp / --kd, or kp / kd in the log's metadata) or log the commanded effort as tau_ff"
            )
    terms = family_terms(get_family(ENVELOPE_FAMILY[opts.dc_motor]), gains_known)
    if opts.position_friction:
        open_ = [n for n, ok in zip(names, limited(robot), strict=True) if not ok]
        if open_:
            raise RobotError(
                f"joint(s) {', '.join(open_)}: position-dependent friction runs between the joint's limits, and "
                "these have none in the model; fit without it"
            )
        terms.insert(terms.index("friction") + 1, POSITION_FRICTION)
    effort = np.where(np.isfinite(robot.effort_limit), robot.effort_limit, 1e6)
    prob = _Problem(
        names,
        groups,
        exprs,
        terms,
        opts.fit_bias,
        kp,
        kd,
        effort,
        np.asarray(robot.component),
        **_payload(robot, opts),
    )
    if opts.effort_mode not in EFFORT_MODES:
        raise RobotError(f"effort_mode {opts.effort_mode!r}: one of {', '.join(EFFORT_MODES)}")
    prob.effort_mode = opts.effort_mode
    prob.term_bounds, prob.bias_bound, prob.scales = model_bounds(robot, prob, data, opts.decimation)
    if opts.bias_limit is not None:
        lo, hi = ROBOT_BOUNDS["bias_limit"]
        if not lo <= opts.bias_limit <= hi:
            raise RobotError(f"bias_limit {opts.bias_limit} rad: between {lo:g} and {hi:g}")
        prob.bias_bound = np.minimum(prob.bias_bound, opts.bias_limit)
    prob.gains = _gains_note(prob, opts, bool(np.any(data.tau_ff)))
    return data, prob, gains_known


def _payload(robot: RobotModel, opts: RobotFitOptions) -> dict:
    """The payload bodies' _Problem fields: names, builder indices, the model's mass and COM; every name must be
    a link of the model with a mass (a correction scales it)."""
    for b in opts.payload or []:  # a payload body's name reaches the result and its exports
        check_name(b, "payload body name", "payload")
    if not opts.payload or robot.builder is None:  # no builder: the service's pre-check, the fit checks
        return {}
    builder: Any = robot.builder
    links = [lab.rsplit("/", 1)[-1] for lab in builder.body_label]
    missing = [b for b in opts.payload if b not in links]
    if missing:
        raise RobotError(
            f"payload body {', '.join(missing)} is not a link of {robot.path.name}; its links: {', '.join(links)}"
        )
    idx = np.array([links.index(b) for b in opts.payload])
    mass = np.array([float(builder.body_mass[i]) for i in idx])
    if np.any(mass <= 0):
        light = [b for b, m in zip(opts.payload, mass, strict=True) if m <= 0]
        raise RobotError(f"payload body {', '.join(light)} has no mass in the model: give it a nominal one")
    com = np.array([np.asarray(builder.body_com[i], float) for i in idx])
    return {
        "bodies": list(opts.payload),
        "body_index": idx,
        "body_mass0": mass,
        "body_com0": com,
        "fit_com": opts.payload_com,
    }


def _gains(
    rec: Recording, opts: RobotFitOptions, perm: np.ndarray, j: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The PD gains in model joint order: the options', else the log's (every recording must state the same),
    else None (fitted); kd 0 where kp is known and kd is not."""
    logged: list[np.ndarray | None] = []
    for key, given in (("kp", opts.kp), ("kd", opts.kd)):
        if given is not None:
            logged.append(np.full(j, float(given)))
            continue
        per_seg = [_log_gains(seg, key, list(rec.joint_names)) for seg in rec.segments]
        first = per_seg[0]
        for seg, v in zip(rec.segments[1:], per_seg[1:], strict=True):
            if (v is None) != (first is None) or (v is not None and not np.array_equal(v, np.asarray(first))):
                raise RobotError(
                    f"recording {seg.name} states {key} {v if v is None else v.tolist()} where "
                    f"{rec.segments[0].name} states {first if first is None else first.tolist()}; this version "
                    f"fits one set of gains: give --{key}, or fit the recordings of each gain apart"
                )
        logged.append(None if first is None else first[perm])
    kp, kd = logged
    if kp is not None and kd is None:
        kd = np.zeros(j)
    return kp, kd


def _recording_split(rec: Recording, opts: RobotFitOptions) -> tuple[list[int], list[int], str]:
    """Training and validation segment indices of a log of several recordings, and how they were chosen: the
    named holdout (KEY=VALUE on segment metadata, as a joint fit's --holdout), else the last recordings (the
    validation fraction of them, at least one): train earlier, validate later."""
    from .plan import plan_split, recordings
    from .request import FitRequest, FitRequestError

    groups = recordings(rec)
    if opts.holdout:
        try:
            split = plan_split(rec, FitRequest(holdout=opts.holdout))
        except FitRequestError as e:
            raise RobotError(str(e)) from None
        return split.train, split.validation, split.method
    if len(groups) < 2:
        raise RobotError(
            f"the log's {len(rec.segments)} segments are one recording (split at time gaps); a robot fit "
            "validates on whole recordings: log another recording, or name a holdout (--holdout KEY=VALUE)"
        )
    k = min(len(groups) - 1, max(1, int(round(len(groups) * opts.validation_fraction))))
    val = sorted(i for g in groups[-k:] for i in g)
    return (
        [i for i in range(len(rec.segments)) if i not in val],
        val,
        f"the last {k} of {len(groups)} recordings",
    )


def _assemble(rec: Recording, perm: np.ndarray, opts: RobotFitOptions, how: str) -> _Data:
    """The log in model joint order, training recordings first, then the validation ones; one recording is split
    in time (the last validation_fraction validates, replayed from the measured state at the cut)."""
    segs = rec.segments
    dt_log = segs[0].dt
    for s_ in segs[1:]:
        if abs(s_.dt - dt_log) > 0.01 * dt_log:
            raise RobotError(
                f"recording {s_.name} is sampled every {s_.dt:.6g} s, {segs[0].name} every {dt_log:.6g} s; "
                "a robot fit needs one sample rate (resample the log)"
            )
    length = max(2, int(round(opts.window_s / dt_log)))
    if len(segs) == 1 and not opts.holdout:
        n = segs[0].n
        split = int(round(n * (1.0 - opts.validation_fraction)))
        if split < 10 or n - split < 10:
            raise RobotError(
                f"the log has {n} samples: too few to split {opts.validation_fraction:.0%} off for validation"
            )
        train_idx, val_idx, method = [0], list[int](), "time"
        pieces, val_pieces = [(0, split)], [(split, n)]
    else:
        train_idx, val_idx, method = _recording_split(rec, opts)
        sizes = [segs[i].n for i in train_idx + val_idx]
        edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        bounds = list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))
        pieces, val_pieces = bounds[: len(train_idx)], bounds[len(train_idx) :]
        split = pieces[-1][1]
    order = train_idx + val_idx
    cols = [
        np.concatenate([np.nan_to_num(np.asarray(getattr(segs[i], ch), float)) for i in order])[:, perm]
        for ch in ("q", "qd", "q_des", "qd_des", "tau_ff")
    ]
    first = np.zeros(cols[0].shape[0], int)
    for a, b in pieces + val_pieces:
        first[a:b] = a if len(order) > 1 else 0
    starts = np.concatenate([np.arange(a, b - length, length) for a, b in pieces]).astype(int)
    if starts.size == 0:
        raise RobotError(f"the training part ({split} samples) is shorter than one {opts.window_s} s window")
    t = segs[0].t if len(order) == 1 else np.arange(cols[0].shape[0]) * dt_log
    q, qd, cmd, cmd_qd, tau_ff = cols
    return _Data(
        q,
        qd,
        cmd,
        cmd_qd,
        tau_ff,
        t,
        dt_log / opts.decimation,
        split,
        starts,
        length,
        how,
        pieces=pieces,
        val_pieces=val_pieces,
        first=first,
        recordings={
            "method": method,
            "training": [segs[i].name for i in train_idx],
            "validation": [segs[i].name for i in val_idx],
        },
    )


def _gains_note(prob: _Problem, opts: RobotFitOptions, feed_forward: bool) -> str:
    """Where the PD gains came from, and whether the log's feed-forward effort drives the joints."""
    if prob.kp is None:
        note = robot_judge.GAINS_GUESSED
    elif not np.any(prob.kp) and (prob.kd is None or not np.any(prob.kd)):
        return "zero (kp = kd = 0): the log's feed-forward effort (tau_ff) drives the joints"
    else:
        note = "as given (kp / kd options)" if opts.kp is not None else "from the log"
    return note + ("; plus the log's feed-forward effort (tau_ff)" if feed_forward else "")


def _demand(prob: _Problem, data: _Data, n: int) -> np.ndarray:
    """(n, J) the effort the log asks of each joint over its first n samples at the known gains, N·m."""
    j = len(prob.names)
    kp = prob.kp if prob.kp is not None else np.zeros(j)
    kd = prob.kd if prob.kd is not None else np.zeros(j)
    return _pd_effort(data, kp, kd, n)


def _pd_effort(data: _Data, kp: np.ndarray, kd: np.ndarray, n: int | None = None) -> np.ndarray:
    """(n, J) the feed-forward effort plus the PD effort at gains kp, kd (J,) on the logged states and commands
    of the first n samples (all by default): open loop, no delay; the PD acts on the reading, bias included."""
    sl = slice(None, n)
    return data.tau_ff[sl] + kp * (data.cmd[sl] - data.q[sl]) + kd * (data.cmd_qd[sl] - data.qd[sl])


def model_bounds(
    robot: RobotModel, prob: _Problem, data: _Data, decimation: int
) -> tuple[dict[str, dict[str, tuple[float, float]]], np.ndarray, dict[str, dict[str, float]]]:
    """Per group the log10 bounds of every term (the registry's plant rules, fitting/space.py plant_range),
    scaled to the model and the training log; per joint the encoder bias bound (the registry's share of its
    range); and the scales used, for the result.

    The rigid-body effort and the joint-space inertia come from Newton's (MuJoCo's) inverse dynamics along at
    most 200 training samples, so a heavy arm's friction or a light finger's armature is inside the bounds."""
    n = int(data.split)
    h = data.dt * decimation
    pick = np.unique(np.linspace(0, n - 1, min(200, n)).round().astype(int))
    acc = np.gradient(data.qd[:n], h, axis=0)
    if robot.builder is None:  # a model summary (the service's pre-check): no inverse dynamics
        rigid = diag = np.zeros((pick.size, len(prob.names)))
    else:
        rigid, diag, _ = joint_space_terms(robot, data.q[pick], data.qd[pick], acc[pick], derivatives=False)
    limit = np.where(np.isfinite(robot.effort_limit) & (robot.effort_limit < 1e5), robot.effort_limit, 0.0)
    demand = np.quantile(np.abs(_demand(prob, data, n)), 0.999, axis=0)
    effort = np.maximum.reduce(
        [limit, demand, np.quantile(np.abs(rigid), 0.99, axis=0), np.full(limit.shape, 1e-3)]
    )
    speed = np.maximum(np.quantile(np.abs(data.qd[:n]), 0.99, axis=0), 1e-2)
    vmax = np.maximum(np.abs(data.qd[:n]).max(axis=0), 1e-2)
    accel = np.maximum(np.quantile(np.abs(acc), 0.99, axis=0), 1e-1)
    inertia = np.maximum(diag.max(axis=0), 1e-9)
    out: dict[str, dict[str, tuple[float, float]]] = {}
    scales: dict[str, dict[str, float]] = {}
    for g, idx in prob.groups.items():
        e, v, a, m = (float(x[idx].max()) for x in (effort, speed, accel, inertia))
        scales[g] = {
            "effort": e,
            "speed": v,
            "max_speed": float(vmax[idx].max()),
            "acceleration": a,
            "inertia": m,
        }
        out[g] = {t: tuple(math.log10(b) for b in plant_range(t, scales[g])) for t in ALL_TERMS}  # type: ignore[misc]
    span = robot.upper - robot.lower
    finite = limited(robot)
    offset = parameters.get(OFFSET)
    assert offset.plant is not None
    # a share of the joint's range; the registry's range where the joint has no finite one
    bias = np.where(finite, offset.plant.multiple * np.where(finite, span, 0.0), offset.upper)
    return out, np.maximum(bias, 0.01), scales


def _start(
    robot: RobotModel,
    prob: _Problem,
    ev_scan: _Evaluator | _DecoupledEvaluator,
    gains_known: bool,
    delay: int,
    say: Callable[[str], None],
) -> np.ndarray:
    """The search's start: the model file's joint terms (group means), gains from a coarse scan if unknown."""
    x0 = []
    for g, idx in prob.groups.items():
        for t in prob.terms:
            limit = float(np.min(prob.effort_limit[idx]))
            v = {
                "armature": robot.armature[idx].mean(),
                "viscous_friction": robot.viscous_friction[idx].mean(),
                "friction": robot.friction[idx].mean(),
                "friction_upper": robot.friction[idx].mean(),
                "stiffness": 20.0,
                "damping": 1.0,
                "saturation_effort": limit,
                "actuator_velocity_limit": 100.0,
                "actuator_effort_limit": limit,
            }[t]  # envelope: scanned
            x0.append(prob.clip_log(g, t, v))
    for k in range(len(prob.bodies)):  # payloads start at the model's mass and COM
        assert prob.body_mass0 is not None
        x0 += [math.log10(float(prob.body_mass0[k]))] + [0.0] * (prob.per_body - 1)
    x = np.array(x0 + [0.0] * (len(prob.names) if prob.fit_bias else 0))
    if gains_known:
        return x
    grid = [
        (a, b) for a in (5.0, 10.0, 20.0, 40.0, 80.0) for b in (0.3, 1.0, 3.0)
    ]  # (kp, kd) for every group
    xs = np.repeat(x[None], len(grid), axis=0)
    for gi, (a, b) in enumerate(grid):
        for k, vn in enumerate(prob.var_names):
            g, _, t = vn.rpartition(".")
            if t in ("stiffness", "damping"):
                xs[gi, k] = prob.clip_log(g, t, a if t == "stiffness" else b)
    scan = _rms(ev_scan.residuals(xs, np.full(len(grid), delay)))
    best = int(np.argmin(scan))
    say(f"gain scan: best kp {grid[best][0]}, kd {grid[best][1]} (training RMSE {scan.min():.4f} rad)")
    return xs[best]


def _rms(r: np.ndarray) -> np.ndarray:
    return np.sqrt(np.mean(r.reshape(r.shape[0], -1) ** 2, axis=1))


def _interval_demand(prob: _Problem, data: _Data, n: int, decimation: int, delay: int) -> np.ndarray:
    """(n − 1, J) PD plus feed-forward effort over each training interval, averaged over its physics steps (states interpolated
    between samples, commands as the delay holds them); the PD acts on the reading, so the bias is in it."""
    kp = prob.kp if prob.kp is not None else np.zeros(len(prob.names))
    kd = prob.kd if prob.kd is not None else np.zeros(len(prob.names))
    q, qd, acc = data.q[:n], data.qd[:n], np.zeros((n - 1, len(prob.names)))
    for i in range(decimation):
        idx = np.floor_divide(np.arange(n - 1) * decimation + i - delay, decimation)
        idx = np.maximum(idx, data.first_of(np.arange(n - 1)))  # no command from before its recording
        w = i / decimation
        acc += (
            data.tau_ff[idx]
            + kp * (data.cmd[idx] - (q[:-1] + w * np.diff(q, axis=0)))
            + kd * (data.cmd_qd[idx] - (qd[:-1] + w * np.diff(qd, axis=0)))
        )
    return acc / decimation


def _regress_group(
    idx: list[int], lhs: np.ndarray, acc: np.ndarray, vel: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Armature, viscous and Coulomb friction shared by the group's joints, by least squares on
    lhs = demand − rigid-body effort = arm·qdd + visc·qd + fc·sign(qd) + an offset per joint (what the rigid-body
    effort misses, e.g. gravity at the biased reading) over moving samples the motor did not clip (robust
    reweighting: samples far off the fit are the envelope's, dropped). Returns (arm, visc, fc, offsets...), the
    residual (T, len(idx)) and its robust sigma."""
    t, k = lhs.shape[0], len(idx)
    rows = np.zeros((t, k, 3 + k))
    rows[..., 0], rows[..., 1], rows[..., 2] = acc[:, idx], vel[:, idx], np.sign(vel[:, idx])
    for m in range(k):
        rows[:, m, 3 + m] = 1.0
    y = lhs[:, idx]
    moving = np.abs(vel[:, idx]) > 0.02 * np.abs(vel[:, idx]).max(axis=0)
    keep = moving & (np.abs(y) <= np.quantile(np.abs(y), 0.4, axis=0))
    coef = np.zeros(3 + k)
    sigma = math.inf
    for _ in range(4):
        if keep.sum() < 3 + k:
            break
        coef = np.linalg.lstsq(rows[keep], y[keep], rcond=None)[0]
        res = y - rows @ coef
        sigma = 1.4826 * float(np.median(np.abs(res[keep]))) + 1e-9
        keep = moving & (np.abs(res) < 4.0 * sigma)
    return coef, y - rows @ coef, sigma


def _equation_error_start(
    robot: RobotModel,
    prob: _Problem,
    data: _Data,
    x0: np.ndarray,
    delays: np.ndarray,
    decimation: int,
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, bool, np.ndarray] | None:
    """A start from the log's own motion, with the gains known: the rigid-body effort Newton's MuJoCo model
    needs along the measured motion (inverse dynamics) against the PD effort the log demands gives, by linear
    least squares per group, armature, viscous and Coulomb friction on the samples the motor did not clip, and
    the DC envelope through those it did; the delay is the one fitting best; biases start at 0 (only gravity
    sees them). Returns (x, delay, envelope found, the start at every delay (D, d)), or None without gains."""
    if prob.kp is None:
        return None
    n = data.split
    h = data.dt * decimation
    acc = np.diff(data.qd[:n], axis=0) / h
    vel = 0.5 * (data.qd[1:n] + data.qd[: n - 1])
    rigid = inverse_dynamics(robot, 0.5 * (data.q[1:n] + data.q[: n - 1]), vel, acc)
    seams = [a - 1 for a, _ in data.pieces[1:]]  # intervals across two recordings: not motion, left out
    acc[seams], vel[seams] = 0.0, 0.0
    scores, points = [], []
    for d in delays:
        demand = _interval_demand(prob, data, n, decimation, int(d))
        fits = [(idx, *_regress_group(idx, demand - rigid, acc, vel)) for idx in prob.groups.values()]
        scores.append(sum(f[3] for f in fits))
        points.append(_ee_point(prob, x0, fits, demand, vel))
    b = int(np.argmin(scores))
    say(
        f"equation-error start: delay {int(delays[b])} physics steps"
        + (
            ", the envelope through the samples the motor clipped (flat above every effort where it clipped none)"
            if prob.dc_motor
            else ""
        )
    )
    return points[b], int(delays[b]), prob.dc_motor, np.array(points)


def _ee_point(prob: _Problem, x0: np.ndarray, fits: list, demand: np.ndarray, vel: np.ndarray) -> np.ndarray:
    """The search variables from the equation-error regressions of every group (and its envelope)."""
    x = x0.copy()
    for idx, coef, res, sigma in fits:
        g = next(name for name, members in prob.groups.items() if members == idx)
        for t, v in zip(("armature", "viscous_friction", "friction"), coef[:3], strict=True):
            x[prob.var(g, t)] = prob.clip_log(g, t, v)
        if POSITION_FRICTION in prob.terms:  # constant along the stroke to start
            x[prob.var(g, POSITION_FRICTION)] = x[prob.var(g, "friction")]
        if prob.dc_motor:
            sign = np.sign(demand[:, idx])
            given = demand[:, idx] - res  # the effort the motor gave
            # the PD asked for clearly more than the motor gave (5 % of its largest effort, beyond the fit's noise)
            clipped = res * sign > max(4.0 * sigma, 0.05 * float(np.quantile(np.abs(given), 0.99)))
            env = fit_dc_envelope((sign * vel[:, idx])[clipped], (sign * given)[clipped], given, vel[:, idx])
            for t, v in zip(DC_TERMS, env, strict=True):
                x[prob.var(g, t)] = prob.clip_log(g, t, v)
    return x


def _scan_envelope(
    prob: _Problem,
    data: _Data,
    ev_scan: _Evaluator | _DecoupledEvaluator,
    x: np.ndarray,
    delay: int,
    decimation: int,
    say: Callable[[str], None],
) -> np.ndarray:
    """The envelope's start: a coarse grid (ENVELOPE_GRID) scaled per group by the PD effort the log demands from
    its measured state and delayed commands and by its fastest speed; the best training fit (one batch)."""
    v = prob.joint_values(x[None])
    n = data.split
    lag = np.maximum(np.arange(n) - int(round(delay / decimation)), data.first_of(np.arange(n)))
    demand = np.abs(
        data.tau_ff[lag]
        + v["stiffness"][0] * (data.cmd[lag] - data.q[:n])
        + v["damping"][0] * (data.cmd_qd[:n] - data.qd[:n])
    )
    speed = np.abs(data.qd[:n])
    grid = list(itertools.product(*ENVELOPE_GRID.values()))
    xs = np.repeat(x[None], len(grid), axis=0)
    for gi, (e, r, sp) in enumerate(grid):
        for g, idx in prob.groups.items():
            top, vmax = max(float(demand[:, idx].max()), 1e-3), max(float(speed[:, idx].max()), 1e-2)
            for t, val in (
                ("actuator_effort_limit", e * top),
                ("saturation_effort", r * e * top),
                ("actuator_velocity_limit", sp * vmax),
            ):
                xs[gi, prob.var(g, t)] = prob.clip_log(g, t, val)
    scan = _rms(ev_scan.residuals(xs, np.full(len(grid), delay)))
    best = int(np.argmin(scan))
    say(
        f"envelope scan: best max motor effort {grid[best][0]} × the demanded effort, saturation × {grid[best][1]}, "
        f"velocity limit × {grid[best][2]} the fastest speed (training RMSE {scan.min():.4f} rad)"
    )
    return xs[best]


def _scan_delay(
    ev_scan: _Evaluator | _DecoupledEvaluator, x: np.ndarray, max_delay: int, say: Callable[[str], None]
) -> int:
    """The integer physics-step delay with the lowest training error at x, over 0..max_delay (one batch)."""
    ds = np.arange(max_delay + 1)
    sc = _rms(ev_scan.residuals(np.repeat(x[None], ds.size, axis=0), ds))
    say(
        f"delay scan (physics steps 0..{max_delay}): best {int(ds[np.argmin(sc)])} (training RMSE {sc.min():.4f} rad)"
    )
    return int(ds[np.argmin(sc)])


def _fd_steps(robot: RobotModel, prob: _Problem, x: np.ndarray) -> tuple[list[list[int]], list[np.ndarray]]:
    """The colours (variables that never load each other's joints) and one forward step per colour at x."""
    colors = _color([set(int(c) for c in robot.component[j]) for j in prob.var_joints()])
    steps, (_, hi) = prob.steps(), prob.bounds()
    hs = []
    for members in colors:
        h = np.zeros_like(x)
        for v in members:
            h[v] = steps[v] if x[v] + steps[v] <= hi[v] else -steps[v]
        hs.append(h)
    return colors, hs


def _fd_jacobian(
    robot: RobotModel,
    prob: _Problem,
    x: np.ndarray,
    colors: list[list[int]],
    hs: list[np.ndarray],
    r: np.ndarray,
) -> np.ndarray:
    """The (R, d) Jacobian from residuals r (1 + colours, J, S) at x and at each colour's step: a variable's
    column holds only the rows of the joints it loads."""
    comps = robot.component
    var_comps = [set(int(c) for c in comps[j]) for j in prob.var_joints()]
    comp_joints = {int(c): np.flatnonzero(comps == c) for c in np.unique(comps)}
    jm = np.zeros((r[0].size, x.size))
    for ci, members in enumerate(colors):
        diff = r[ci + 1] - r[0]
        for v in members:
            rows = np.zeros(r.shape[1], bool)
            for c in var_comps[v]:
                rows[comp_joints[c]] = True
            jm[:, v] = np.where(rows[:, None], diff / hs[ci][v], 0.0).reshape(-1)
    return jm


def coupled_jacobian(
    robot: RobotModel, prob: _Problem, ev: _Evaluator, x: np.ndarray, delay: int
) -> tuple[np.ndarray, np.ndarray]:
    """(Jacobian (R, d), residuals (R,)) of the coupled residuals at x (search units): forward differences, one
    candidate per colour (its variables never load each other's joints), all in one batch."""
    colors, hs = _fd_steps(robot, prob, x)
    r = ev.residuals(np.array([x] + [x + h for h in hs]), np.full(len(hs) + 1, delay))  # (1 + colours, J, S)
    return _fd_jacobian(robot, prob, x, colors, hs, r), r[0].reshape(-1)


def jacobian_and_initial_state_effect(
    robot: RobotModel, prob: _Problem, ev: _Evaluator, x: np.ndarray, delay: int, h: float = 1e-3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """coupled_jacobian() at x, and (J, W, L, J): how each window's simulated positions move per radian of its
    measured initial position of each joint (a noisy input the fit takes as given; the intervals count its
    noise), from one coupled batch: x, its colour steps, and x from each joint's measured start moved by h."""
    colors, hs = _fd_steps(robot, prob, x)
    j, nc = ev.q.shape[1], 1 + len(hs)
    q0 = np.repeat(ev.q[ev.starts][None], nc + j, axis=0)  # (1 + colours + J, W, J)
    q0[nc + np.arange(j), :, np.arange(j)] += h
    cand = np.array([x] + [x + s for s in hs] + [x] * j)
    sim = ev.simulate(cand, np.full(nc + j, delay), q0)
    r = ev.residuals_of(sim[:nc])
    effect = (sim[nc:, :, 1:] - sim[:1, :, 1:]) / h
    return _fd_jacobian(robot, prob, x, colors, hs, r), r[0].reshape(-1), effect


def _least_squares(
    robot: RobotModel,
    prob: _Problem,
    ev: _Evaluator,
    x0: np.ndarray,
    delay: int,
    max_nfev: int,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, dict[str, Any]]:
    """Trust-region least squares (fitting/search.py) from x0 with a coloured forward-difference Jacobian; the
    best point evaluated and stats."""
    colors = _color([set(int(c) for c in robot.component[j]) for j in prob.var_joints()])
    cache: dict[bytes, np.ndarray] = {}
    best: dict[str, Any] = {"x": x0.copy(), "loss": math.inf}
    stats: dict[str, Any] = {
        "jacobians": 0,
        "fd_candidates_per_jacobian": 1 + len(colors),
        "stopped_on": "iterations",
    }

    def remember(x: np.ndarray, r: np.ndarray) -> None:
        cache[x.tobytes()] = r
        lv = float(np.sqrt(np.mean(r**2)))
        if lv < best["loss"]:
            best["x"], best["loss"] = x.copy(), lv

    def check_budget() -> None:
        if spent():
            raise BudgetSpent

    def fun(x: np.ndarray) -> np.ndarray:
        if x.tobytes() not in cache:
            check_budget()
            remember(x, ev.residuals(x[None], np.array([delay]))[0].reshape(-1))
        return cache[x.tobytes()]

    def jac(x: np.ndarray) -> np.ndarray:
        check_budget()
        jm, r0 = coupled_jacobian(robot, prob, ev, x, delay)
        remember(x, r0)
        stats["jacobians"] += 1
        say(
            f"iteration {stats['jacobians']}: training RMSE {best['loss']:.5f} rad, "
            f"{ev.world_steps / max(ev.seconds, 1e-9):.0f} world-steps/s"
        )
        return jm

    r_init = ev.residuals(x0[None], np.array([delay]))[0].reshape(-1)
    remember(x0, r_init)
    stats["initial_rmse"] = best["loss"]
    try:
        check_budget()
        sol = trust_region(
            lambda xs: fun(xs[0])[None],
            prob.space(),
            x0,
            max_nfev,
            FD_STEP["log"],
            jac=jac,
            tol=COUPLED_TOLERANCES,
        )
        stats["stopped_on"] = "converged" if sol.converged else "iterations"
    except BudgetSpent:
        stats["stopped_on"] = "budget"
    stats["rmse"] = best["loss"]
    return best["x"], stats


def _search_coupled(
    robot: RobotModel,
    prob: _Problem,
    ev: _Evaluator,
    ev_scan: _Evaluator,
    x0: np.ndarray,
    delay: int,
    opts: RobotFitOptions,
    spent: Callable[[], bool],
    say: Callable[[str], None],
) -> tuple[np.ndarray, int, str, dict[str, Any]]:
    """The coupled path: the delay scanned at fixed parameters before and after one coupled least-squares run."""
    delay_note = "fixed" if opts.delay is not None else "scanned"
    if opts.delay is None:
        if spent():
            delay_note = f"not scanned (time budget spent): {delay}"
        else:
            delay = _scan_delay(ev_scan, x0, opts.max_delay, say)
    x_best, stats = _least_squares(robot, prob, ev, x0, delay, opts.max_iterations, spent, say)
    if opts.delay is None and stats["stopped_on"] != "budget":
        delay = _scan_delay(ev_scan, x_best, opts.max_delay, say)
    stats["search"] = "coupled"
    return x_best, delay, delay_note, stats


def fit_robot(rec: Recording, robot: RobotModel, opts: RobotFitOptions | None = None) -> RobotResult:
    """Fit the robot's actuators to the log through coupled rollouts; returns the fit result."""
    opts = opts or RobotFitOptions()
    t_start = time.perf_counter()
    say = opts.progress or (lambda m: log.info(m))
    data, prob, gains_known = prepare_fit(rec, robot, opts)

    def evaluator(starts: np.ndarray) -> _Evaluator:
        return _Evaluator(
            robot,
            prob,
            data.q,
            data.qd,
            data.cmd,
            data.cmd_qd,
            starts,
            data.length,
            opts.decimation,
            data.dt,
            opts.device,
            data.tau_ff,
            data.first,
        )

    ev = evaluator(data.starts)
    if opts.search not in ("decoupled", "coupled"):
        raise RobotError(f"search {opts.search!r}: 'decoupled' or 'coupled'")
    # a payload changes the rigid-body efforts the decoupled plants are built on: its fit searches coupled
    coupled = opts.search == "coupled" or bool(prob.bodies)
    if coupled:  # the gain and delay scans see at most SCAN_WINDOWS windows spread over the training part
        pick = np.linspace(0, data.starts.size - 1, min(SCAN_WINDOWS, data.starts.size)).round().astype(int)
        ev_scan: _Evaluator | _DecoupledEvaluator = evaluator(data.starts[np.unique(pick)])
    else:  # every scan on the decoupled path, over every training window
        ev_scan = _DecoupledEvaluator(
            robot, prob, data, data.starts, opts.decimation, np.zeros(len(prob.names)), opts.device
        )

    def spent() -> bool:
        return opts.budget_s is not None and time.perf_counter() - t_start > opts.budget_s

    delay = int(opts.delay) if opts.delay is not None else 0
    x0 = _start(robot, prob, ev_scan, gains_known, delay, say)
    delays = np.array([delay]) if opts.delay is not None else np.arange(opts.max_delay + 1)
    ee = _equation_error_start(robot, prob, data, x0, delays, opts.decimation, say) if gains_known else None
    envelope_found, start_note, starts = False, "the model file's joint terms", None
    if ee is not None:
        sc = _rms(ev_scan.residuals(np.stack([x0, ee[0]]), np.array([delay, ee[1]])))
        say(
            f"start: the model file's terms {sc[0]:.4f} rad, the equation-error start {sc[1]:.4f} rad (training)"
        )
        if sc[1] < sc[0]:
            x0, delay, envelope_found, starts = ee
            start_note = "equation error along the measured motion (Newton's inverse dynamics)"
    if prob.dc_motor and not envelope_found and not spent():
        x0 = _scan_envelope(prob, data, ev_scan, x0, delay, opts.decimation, say)
    delay_note = "fixed" if opts.delay is not None else "scanned"
    if isinstance(ev_scan, _DecoupledEvaluator):
        x_best, delay, stats = _search_decoupled(
            robot, ev, ev_scan, x0 if starts is None else starts, delay, opts, spent, say
        )
        if opts.delay is None:
            delay_note = "chosen by the coupled training loss after fitting at each delay"
    else:
        x_best, delay, delay_note, stats = _search_coupled(
            robot, prob, ev, ev_scan, x0, delay, opts, spent, say
        )
    stats["search_s"] = time.perf_counter() - t_start
    stats["start"] = start_note
    fitted = prob.joint_values(x_best[None])
    decoupled_x = stats.pop("_decoupled_x", None)
    validation = _validate(robot, prob, data, fitted, delay, gains_known, opts, decoupled_x)
    validation = replace(validation, motion=robot_judge.motion_stats(data.q[data.split :], prob.names))
    if opts.judge:  # the intervals' Jacobian at the optimum and the effect of the measured initial states
        jm, r_opt, effect0 = jacobian_and_initial_state_effect(robot, prob, ev, x_best, delay)
    world_steps = ev.world_steps + (ev_scan.world_steps if isinstance(ev_scan, _Evaluator) else 0)
    coupled_s = ev.seconds + (ev_scan.seconds if isinstance(ev_scan, _Evaluator) else 0.0)
    res = _result(
        robot,
        prob,
        data,
        fitted,
        delay,
        delay_note,
        validation,
        stats,
        opts,
        {
            "wall_s": float(time.perf_counter() - t_start),
            "world_steps": int(world_steps),
            "world_steps_per_s": float(world_steps / max(coupled_s, 1e-9)),
        },
    )
    if not opts.judge:
        return res
    res = res.with_uncertainty(
        robot_judge.uncertainty(
            prob.var_names, x_best, prob.bounds(), jm, r_opt, BIAS_UNIT, (effect0, data.q[: data.split])
        )
    )
    return replace(res, verdict=robot_judge.robot_verdict(res))


def replay_validation(
    robot: RobotModel,
    prob: _Problem,
    data: _Data,
    fitted: dict[str, np.ndarray],
    delay: int,
    decimation: int,
    decoupled: tuple[dict[str, np.ndarray], int] | None = None,
    beside: bool = True,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The validation span replayed from the measured state at the split with the fit, with the model file's own
    joint terms (the fit's gains, no bias, no delay; unless not `beside`) and, given its (values, delay), the
    decoupled fit: each (positions, envelope-cut share per joint), in that order."""
    defaults = {
        "armature": robot.armature[None],
        "viscous_friction": robot.viscous_friction[None],
        "friction": robot.friction[None],
        "stiffness": fitted["stiffness"],
        "damping": fitted["damping"],
        OFFSET: np.zeros((1, len(prob.names))),
    }
    vals, delays = ([fitted, defaults], [delay, 0]) if beside else ([fitted], [delay])
    if decoupled is not None:
        vals.append(decoupled[0])
        delays.append(decoupled[1])
    return replay_coupled(
        robot,
        vals,
        delays,
        data.q,
        data.qd,
        data.cmd,
        data.cmd_qd,
        data.split,
        decimation,
        data.dt,
        prob.effort_limit,
        prob.effort_mode,
        data.tau_ff,
        [(a, b, int(data.first_of(np.array([a]))[0])) for a, b in data.val_pieces] or None,
        prob.body_index,
    )


def _rmse(sim: np.ndarray, meas: np.ndarray, names: list[str]) -> tuple[float, dict[str, float]]:
    """Position RMSE of a replay against the log, overall and per joint."""
    e = sim - meas
    return float(np.sqrt(np.mean(e**2))), {
        nm: float(np.sqrt(np.mean(e[:, k] ** 2))) for k, nm in enumerate(names)
    }


def _validate(
    robot: RobotModel,
    prob: _Problem,
    data: _Data,
    fitted: dict[str, np.ndarray],
    delay: int,
    gains_known: bool,
    opts: RobotFitOptions,
    decoupled_x: np.ndarray | None = None,
) -> RobotValidation:
    """Replay from the measured state at the split: the fit, and the model file's joint terms, per joint RMSE;
    with the decoupled search's point, that too (`decoupled_fit`), in the same replay."""
    names = prob.names
    dec = None if decoupled_x is None or not opts.judge else (prob.joint_values(decoupled_x[None]), delay)
    reps = replay_validation(robot, prob, data, fitted, delay, opts.decimation, dec, opts.judge)
    rep_fit, cut = reps[0]
    meas = data.q[data.split :]
    val, val_j = _rmse(rep_fit, meas, names)
    dval, dval_j = _rmse(reps[1][0], meas, names) if opts.judge else (None, {})
    by_time = data.recordings.get("method", "time") == "time"
    return RobotValidation(
        split="time" if by_time else "recordings",
        split_sample=int(data.split),
        split_time_s=float(data.t[data.split] - data.t[0]),
        fraction=(
            float(opts.validation_fraction)
            if by_time
            else float(data.q.shape[0] - data.split) / data.q.shape[0]
        ),
        recordings=None if by_time else data.recordings,
        rmse=val,
        per_joint_rmse=val_j,
        model_defaults_rmse=dval,
        model_defaults_per_joint_rmse=dval_j,
        model_defaults=(
            "the model file's armature, damping and frictionloss; gains "
            + ("from the log" if gains_known else "as fitted")
            + "; no delay, no encoder bias"
        )
        if opts.judge
        else "",
        replay=(
            "from the measured state at the split"
            if by_time
            else "each held-out recording whole, from its own first measured state"
        )
        + ", coupled, Newton SolverMuJoCo",
        envelope_active_per_joint={nm: float(cut[k]) for k, nm in enumerate(names)},
        beyond_training=robot_beyond_training(
            names, _pd_effort(data, fitted["stiffness"][0], fitted["damping"][0]), data.qd, int(data.split)
        ),
        decoupled_fit=(
            None if dec is None else _decoupled_beside(prob, dec[0], _rmse(reps[-1][0], meas, names), delay)
        ),
    )


def _decoupled_beside(
    prob: _Problem, v: dict[str, np.ndarray], errors: tuple[float, dict[str, float]], delay: int
) -> DecoupledFit:
    """The decoupled fit (each joint's own 1-DoF fit along the measured motion, at the chosen delay) and its
    errors replayed coupled over the validation span like the fit, so the report shows what coupling changed."""
    return DecoupledFit(
        rmse=errors[0],
        per_joint_rmse=errors[1],
        groups={
            g: {
                t: float(v[t][0, idx[0]])
                for t in ("armature", "viscous_friction", "friction", "stiffness", "damping")
            }
            for g, idx in prob.groups.items()
        },
        encoder_bias={nm: float(v[OFFSET][0, k]) for k, nm in enumerate(prob.names)},
        delay_steps=int(delay),
        note="each joint's own 1-DoF fit along the measured motion (Newton's joint-space inertia and "
        "coupling efforts), before any coupled refinement; replayed coupled from the split",
    )


def _training(data: _Data, opts: RobotFitOptions, stats: dict[str, Any]) -> RobotTraining:
    """The search's record: the training windows and the search statistics (a stat this version does not name
    is kept in `extra`)."""
    named = {f.name for f in fields(RobotTraining)}
    values: dict[str, Any] = {k: (float(v) if isinstance(v, float) else v) for k, v in stats.items()}
    return RobotTraining(
        windows=int(data.starts.size),
        window_s=float(data.length * data.dt * opts.decimation),
        **{k: v for k, v in values.items() if k in named and k not in ("extra", "key_order")},
        extra={k: v for k, v in values.items() if k not in named},
    )


def _result(
    robot: RobotModel,
    prob: _Problem,
    data: _Data,
    fitted: dict[str, np.ndarray],
    delay: int,
    delay_note: str,
    validation: RobotValidation,
    stats: dict,
    opts: RobotFitOptions,
    timing: dict[str, Any],
) -> RobotResult:
    """The fit result: groups with their values, bias, delay, sim step, validation, assumptions."""
    names, effort = prob.names, prob.effort_limit
    group_out = {}
    cut = validation.envelope_active_per_joint
    for g, idx in prob.groups.items():
        at = idx[0]
        model_limit = float(effort[idx].max()) if np.all(effort[idx] < 1e6) else None
        envelope = {
            GROUP_KEYS.get(t, t): float(fitted[t][0, at]) if prob.dc_motor else None for t in DC_TERMS
        }
        group_out[g] = RobotGroup(
            joint_names_expr=prob.exprs[g],
            joints=[names[i] for i in idx],
            armature=float(fitted["armature"][0, at]),
            viscous_friction=float(fitted["viscous_friction"][0, at]),
            friction=float(fitted["friction"][0, at]),
            friction_upper=float(fitted[POSITION_FRICTION][0, at])
            if POSITION_FRICTION in prob.terms
            else None,
            stiffness=float(fitted["stiffness"][0, at]),
            damping=float(fitted["damping"][0, at]),
            effort_limit=envelope["effort_limit"] if prob.dc_motor else model_limit,
            saturation_effort=envelope["saturation_effort"],
            velocity_limit=envelope["velocity_limit"],
            model_effort_limit=model_limit,
            envelope_active=float(np.mean([cut[names[i]] for i in idx])),
        )
    return RobotResult(
        robot=robot.summary(),
        joint_mapping=data.how,
        groups=group_out,
        motor_envelope="dc_motor" if prob.dc_motor else "off",
        gains=prob.gains,
        bounds=bound_report(prob, fitted),
        encoder_bias={nm: float(fitted[OFFSET][0, k]) for k, nm in enumerate(names)},
        delay_steps=int(delay),
        delay=delay_note,
        sim={"dt": float(data.dt), "decimation": int(opts.decimation)},
        validation=validation,
        training=_training(data, opts, stats),
        **timing,
        effort_mode=prob.effort_mode,  # explicit or implicit (Newton's), as the 1-DoF fit's assumptions state
        bodies=_bodies_out(prob, fitted) if prob.bodies else None,
        assumptions=[
            "coupled rigid-body dynamics: Newton 1.8 SolverMuJoCo (Warp backend for batched candidates, MuJoCo C "
            "for single replays), contacts off, base fixed",
            "visuals, collision shapes and meshes skipped",
            f"PD actuator, {_EFFORT_TEXT[prob.effort_mode]} once per physics step of {data.dt:.6g} s "
            f"(log dt / {opts.decimation}), "
            + (
                "clipped by a DC-motor envelope per group (Newton's ClampingDCMotor: saturation effort, velocity "
                "limit, max motor effort), then "
                if prob.dc_motor
                else "no motor envelope (dc_motor off), "
            )
            + "clipped at the model's joint effort limits",
            "armature, viscous damping and frictionloss are MuJoCo's joint terms (Isaac Lab armature, "
            "viscous_friction, friction on its Newton backend)",
            "encoder bias: the encoder reads the true angle plus the bias; the PD acts on that reading",
        ],
    )


def _bodies_out(prob: _Problem, fitted: dict[str, np.ndarray]) -> dict:
    """The payload bodies' fitted mass and COM beside the model's (link inertial corrections)."""
    assert prob.body_mass0 is not None and prob.body_com0 is not None
    return {
        b: {
            "mass": float(fitted["body_mass"][0, k]),
            "model_mass": float(prob.body_mass0[k]),
            "com": [float(v) for v in fitted["body_com"][0, k]],
            "model_com": [float(v) for v in prob.body_com0[k]],
            "com_fitted": prob.fit_com,
            "note": "mass (and COM) fitted, the inertia about the COM scaled with the mass; the exports do not "
            "write it: set it in the robot model",
        }
        for k, b in enumerate(prob.bodies)
    }


def bound_report(prob: _Problem, fitted: dict[str, np.ndarray]) -> RobotBounds:
    """The searched terms' bounds (natural units), the terms that ended at one, and the encoder biases beyond a
    plausible calibration (BIAS_PLAUSIBLE): those absorb model error and are named, never exported silently."""
    bounds: dict[str, list[float]] = {}
    at: list[BoundHit] = []
    for g, idx in prob.groups.items():
        for t in prob.terms:
            lo, hi = prob.bound(g, t)
            key = prob.var_name(g, t)
            bounds[key] = [10**lo, 10**hi]
            x = math.log10(max(float(fitted[t][0, idx[0]]), 1e-300))
            for side, b in (("lower", lo), ("upper", hi)):
                if abs(x - b) <= AT_BOUND * (hi - lo):
                    at.append(BoundHit(term=key, value=10**x, bound=side, limit=10**b))
    if prob.bodies:
        lo_b, hi_b = prob.body_bounds()
        for k, body in enumerate(prob.bodies):
            lo, hi = lo_b[k * prob.per_body], hi_b[k * prob.per_body]
            bounds[f"{body}.mass"] = [10**lo, 10**hi]
            x = math.log10(float(fitted["body_mass"][0, k]))
            for side, lim in (("lower", lo), ("upper", hi)):
                if abs(x - lim) <= AT_BOUND * (hi - lo):
                    at.append(BoundHit(term=f"{body}.mass", value=10**x, bound=side, limit=10**lim))
    wide: list[WideBias] = []
    if prob.fit_bias:
        bb = prob.bias_bound if prob.bias_bound is not None else np.full(len(prob.names), 0.3)
        for k, nm in enumerate(prob.names):
            b, v = float(bb[k]), float(fitted[OFFSET][0, k])
            bounds[f"{nm}.bias"] = [-b, b]
            if abs(abs(v) - b) <= AT_BOUND * 2 * b:
                at.append(BoundHit(term=f"{nm}.bias", value=v, bound="upper" if v > 0 else "lower", limit=b))
            if abs(v) > BIAS_PLAUSIBLE:
                wide.append(WideBias(joint=nm, bias=v))
    notes = [
        f"{e.term} ended at its {e.bound} bound ({e.limit:.4g}): the data push it beyond the range "
        "the model and the log make plausible; treat the value as unidentified"
        for e in at
    ] + [
        f"{w.joint}: encoder bias {w.bias:+.4f} rad is beyond a plausible calibration "
        f"({BIAS_PLAUSIBLE} rad): it absorbs model error (gravity, friction or transmission the model lacks)"
        for w in wide
    ]
    return RobotBounds(
        bounds=bounds, at_bound=tuple(at), implausible_bias=tuple(wide), notes=notes, scales=prob.scales
    )


def has_envelope(group: RobotGroup) -> bool:
    """Whether a result group states a DC-motor envelope (a saturation effort and a finite, positive velocity
    limit): the one test the Isaac Lab dict and the USD/MJCF exports and replays pick their class by."""
    sat, vlim = group.saturation_effort, group.envelope_velocity()
    finite = [isinstance(v, int | float) and math.isfinite(v) for v in (sat, vlim)]
    return all(finite) and isinstance(vlim, int | float) and vlim > 0


def isaaclab_dict(result: RobotResult) -> dict:
    """The whole-robot `actuators={...}` dict of an ArticulationCfg, one entry per group, and `sim`."""
    delay = int(result.delay_steps)
    acts = {}
    for g, e in result.groups.items():
        dc = has_envelope(e)
        cls = (
            ("DelayedDCMotorCfg" if delay else "DCMotorCfg")
            if dc
            else ("DelayedPDActuatorCfg" if delay else "IdealPDActuatorCfg")
        )
        cfg: dict[str, Any] = {
            "class_type": cls,
            "joint_names_expr": [e.joint_names_expr],
            "stiffness": e.stiffness,
            "damping": e.damping,
            "armature": e.armature,
            "friction": e.consumer_friction(),
            "viscous_friction": e.viscous_friction,
        }
        if e.effort_limit is not None:
            cfg["actuator_effort_limit"] = e.effort_limit
        box = e.model_effort_limit  # after the envelope, the model's box clips at the smaller of the two
        if dc and isinstance(box, int | float) and box < cfg.get("actuator_effort_limit", math.inf):
            cfg["actuator_effort_limit"] = float(box)
        if dc:
            cfg["saturation_effort"] = e.saturation_effort
            cfg["actuator_velocity_limit"] = e.envelope_velocity()
        if delay:
            cfg["min_delay"] = cfg["max_delay"] = delay
        acts[g] = cfg
    note = "the encoder bias is not an Isaac Lab actuator field: add it to the measured joint positions"
    if moving := result.stroke_friction_groups:
        note += (
            f"; the friction of {', '.join(moving)} changes along the stroke, which no Isaac Lab field holds: "
            "friction is its mid-stroke value"
        )
    if delay and any(a["class_type"] == "DelayedDCMotorCfg" for a in acts.values()):
        note += (
            "; DelayedDCMotorCfg (DC envelope and delay together) is not an Isaac Lab class: it is the one "
            "the 1-DoF Isaac Lab export defines (DelayedPDActuator clipped by DCMotor's envelope)"
        )
    return {
        "actuators": acts,
        "sim": dict(result.sim),
        "encoder_bias": dict(result.encoder_bias),
        "note": note,
    }


def write_robot_fit(result: RobotResult, exports: Mapping[str, str], out: str | Path) -> list[str]:
    """Write fit.json (the whole result) and the rendered whole-robot exports ({file name: text}, export/robot.py,
    isaaclab.json among them where it was written) into `out`; the names written, fit.json first."""
    import json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fit.json").write_text(json.dumps(result.to_json(), indent=2))
    for name, text in exports.items():
        (out / name).write_text(text)
    return ["fit.json", *exports]


def result_lines(result: RobotResult) -> list[str]:
    """The CLI's summary of a whole-robot fit: mapping, validation error per joint beside the model's defaults."""
    v, verdict, robot = result.validation, result.verdict or Verdict(), result.robot
    lines = [
        f"verdict: {verdict.verdict.upper()}",
        *(f"  {r}" for r in verdict.reasons),
        f"robot {robot['path']}: {len(robot['joints'])} joints, base "
        f"{robot['base']} fixed; {robot['notes'][0]}",
        f"joints mapped {result.joint_mapping}",
        (
            f"held-out RMSE (last {v.fraction:.0%} of the log in time, replayed from the measured state at "
            f"{v.split_time_s:.2f} s)"
            if v.split == "time"
            else f"held-out RMSE (recordings {', '.join(v.validated_recordings)}, "
            f"{(v.recordings or {}).get('method')}, each replayed whole)"
        )
        + f": {v.rmse:.4f} rad; the model file's joint terms: {v.model_defaults_rmse:.4f} rad",
    ]
    dec = v.decoupled_fit
    if dec:
        lines.append(
            f"the decoupled fit (each joint's own 1-DoF fit, before the coupled check), replayed coupled: "
            f"{dec.rmse:.4f} rad"
        )
    for nm, e in v.per_joint_rmse.items():
        lines.append(
            f"  {nm}: {e:.4f} rad (model defaults {v.model_defaults_per_joint_rmse[nm]:.4f}"
            + (f", decoupled fit {dec.per_joint_rmse[nm]:.4f})" if dec else ")")
        )
    for note in result.bounds.notes:
        lines.append(f"  flag: {note}")
    t = result.training
    lines.append(
        f"delay {result.delay_steps} physics steps; sim dt {result.physics_dt:.6g} s, decimation "
        f"{result.decimation}; {t.jacobians} Jacobians, stopped on {t.stopped_on}; "
        f"{result.world_steps_per_s:.0f} world-steps/s; {result.wall_s:.0f} s"
    )
    return lines
