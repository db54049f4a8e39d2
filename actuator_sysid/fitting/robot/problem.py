"""The whole-robot fit's search variables (Problem): each group's registry terms (log10), payload masses and
COMs, encoder biases (centiradians), their bounds and finite-difference steps; joint groups by regex."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ...datasets.names import check_name, quote_name
from ...models import parameters
from ...models.families import Family
from ...models.robot import RobotError
from ..result import GROUP_KEYS
from ..space import SearchSpace

# Every searched term is a registry parameter (models/parameters.py) of the group's family (ideal_pd, or
# dcmotor with the envelope), bounded by its `plant` rule: scaled per group to the model and the log
# (model_bounds), never a fixed cap.
ENVELOPE_FAMILY = {False: "ideal_pd", True: "dcmotor"}
DC_TERMS = (
    "saturation_effort",
    "actuator_velocity_limit",
    "actuator_effort_limit",
)  # the envelope (Newton's)
# every group term in search order; the PD gains are searched when the log does not state them, the envelope with
# dc_motor, and the family's actuator_effort_limit without an envelope is the model file's joint limit (fixed)
# unless the model's own position servos state one (then it is theirs, replaced: searched as a box)
ALL_TERMS = ("armature", "viscous_friction", "friction", "friction_upper", "stiffness", "damping", *DC_TERMS)
POSITION_FRICTION = (
    "friction_upper"  # with position_friction: friction at the upper limit, `friction` at the lower
)
OFFSET = "encoder_offset"  # the registry's encoder bias; fit.json names it encoder_bias
BIAS_UNIT = 0.01  # the search sees the bias in centiradians so every variable is O(1)
FD_STEP = {"log": 0.02, "bias": 0.1}  # forward-difference steps: log10 terms; centiradians and centimetres


@dataclass
class Problem:
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


def family_terms(family: Family, gains_known: bool, servo_limit: bool = False) -> list[str]:
    """The group terms a robot fit searches of a registry family, in search order: the PD gains only where the
    log states none; the effort limit inside a DC envelope, or as a box where the model's position servos state
    a force range (`servo_limit`: the fit replaces them), else the model file's joint limit holds it."""
    held = {"stiffness", "damping"} if gains_known else set()
    if "saturation_effort" not in family.params and not servo_limit:
        held.add("actuator_effort_limit")
    unknown = [p for p in family.params if p not in ALL_TERMS and p != "delay"]
    if unknown:
        raise RobotError(f"family {family.name}: a whole-robot fit cannot search {', '.join(unknown)}")
    return [t for t in ALL_TERMS if t in family.params and t not in held]
