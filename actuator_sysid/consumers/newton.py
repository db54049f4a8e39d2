"""Newton 1.8 actuator components for BAM's friction budget (docs/prior-art.md M2–M6), and their registration.

`ClampingFrictionBudget` is the last clamp of a NewtonActuator: it adds to the clamped motor effort τ_m the
stopping torque of the fit's plant (docs/consumer-semantics.md §F), −sign(stop)·min(|stop|, budget) with
stop = joint_inertia/dt·qd + τ_m + τ_e, budget = Coulomb + Stribeck + load terms. It carries the Coulomb part
too, so the joint's own `newton:friction` (MuJoCo's soft frictionloss) stays 0. τ_e, the external torque on
the joint, comes from the simulation each step: `set_external_effort(model, external_effort(model, state))`.

USD: `ActuatorSysidFrictionBudgetAPI` (attributes below) after the clamps, and `ActuatorSysidPDControlAPI`
(Newton's DrivePD under our name) as the drive, so a stage read without `register()` fails with "no drive
schema" instead of running without the budget. Importing this module imports Newton and Warp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import newton
import numpy as np
import warp as wp
from newton.actuators import ClampingBase, ComponentKind, DriveBase, DrivePD, register_actuator_component

from .schema import BUDGET_API, BUDGET_ATTRIBUTES, PD_API, SLEW_PD_API, register_usd_schemas

__all__ = [
    "ClampingFrictionBudget",
    "DriveSlewedPD",
    "budget_dofs",
    "external_effort",
    "register",
    "set_external_effort",
    "set_torque_enabled",
]

_KERNEL_ARGS = tuple(k for k in BUDGET_ATTRIBUTES.values() if k != "physics_dt")  # the kernel's order
_NONNEGATIVE = tuple(k for k in BUDGET_ATTRIBUTES.values() if k not in ("stribeck_velocity", "physics_dt"))


@wp.kernel
def _friction_budget_kernel(
    velocities: wp.array[float],
    vel_indices: wp.array[wp.uint32],
    external: wp.array[float],
    enabled: wp.array[wp.int32],
    coulomb: wp.array[float],
    stribeck: wp.array[float],
    stribeck_velocity: wp.array[float],
    stribeck_exponent: wp.array[float],
    kl: wp.array[float],
    kls: wp.array[float],
    kle: wp.array[float],
    kles: wp.array[float],
    kqm: wp.array[float],
    kqe: wp.array[float],
    inertia: wp.array[float],
    dt: float,
    src: wp.array[float],
    dst: wp.array[float],
):
    """docs/prior-art.md M2–M6 budget, and the §F stop rule up to it, added to the clamped motor effort."""
    i = wp.tid()
    dof = vel_indices[i]
    qd = velocities[dof]
    motor = src[i]
    if enabled[dof] == 0:  # torque off: no motor effort, the friction still holds the joint against the load
        motor = 0.0
    ext = external[dof]
    s = wp.exp(-wp.pow(wp.abs(qd / stribeck_velocity[i]), stribeck_exponent[i]))
    budget = coulomb[i] + stribeck[i] * s
    budget = budget + wp.abs(kle[i] * ext - kl[i] * motor) + s * wp.abs(kles[i] * ext - kls[i] * motor)
    if motor * ext < 0.0:  # M6 while motor and load oppose: the smaller torque's square
        if wp.abs(ext) < wp.abs(motor):
            budget = budget + s * kqe[i] * ext * ext
        elif wp.abs(ext) > wp.abs(motor):
            budget = budget + s * kqm[i] * motor * motor
    stop = inertia[i] / dt * qd + motor + ext  # what would stop the joint within this step
    dst[i] = motor - wp.sign(stop) * wp.min(wp.abs(stop), budget)  # type: ignore[index]  # Warp's DSL


class ClampingFrictionBudget(ClampingBase):
    """BAM's friction budget as a stopping torque after the other clamps (module docstring); explicit mode only."""

    SHARED_PARAMS: ClassVar[set[str]] = {"physics_dt"}

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        """The budget's parameters with their neutral defaults; the external gains default to the motor-side."""
        out = {k: float(args.get(k, 0.0)) for k in BUDGET_ATTRIBUTES.values()}
        out["stribeck_velocity"] = float(args.get("stribeck_velocity", 1.0))
        out["stribeck_exponent"] = float(args.get("stribeck_exponent", 2.0))
        out["load_friction_external"] = float(args.get("load_friction_external", out["load_friction"]))
        out["load_friction_external_stribeck"] = float(
            args.get("load_friction_external_stribeck", out["load_friction_stribeck"])
        )
        bad = [k for k in _NONNEGATIVE if not (math.isfinite(out[k]) and out[k] >= 0.0)]
        bad += [k for k in ("stribeck_velocity", "joint_inertia", "physics_dt") if not out[k] > 0.0]
        if bad:
            raise ValueError(
                f"{BUDGET_API}: {', '.join(f'{k} = {out[k]}' for k in bad)} must be finite and "
                "≥ 0 (stribeck_velocity, joint_inertia and physics_dt > 0)"
            )
        return out

    def __init__(self, physics_dt: float, **params: wp.array) -> None:
        missing = set(BUDGET_ATTRIBUTES.values()) - {"physics_dt"} - set(params)
        if missing:
            raise ValueError(f"ClampingFrictionBudget needs {sorted(missing)}")
        self.physics_dt = float(physics_dt)
        self.params = params
        self.external: wp.array | None = None
        self.enabled: wp.array | None = None  # per DOF, 0 = torque off (set_torque_enabled); None: all on

    def modify_forces(
        self,
        src_forces: wp.array,
        dst_forces: wp.array,
        positions: wp.array,
        velocities: wp.array,
        pos_indices: wp.array,
        vel_indices: wp.array,
        device: Any = None,
    ) -> None:
        external, self.external = self.external, None  # given for this step only: a stale τ_e is no estimate
        if external is None:
            raise RuntimeError(
                f"{BUDGET_API} (actuator_sysid.consumers) needs the joints' external torque every step: call "
                "actuator_sysid.consumers.newton.set_external_effort(model, external_effort(model, state)) "
                "before stepping the actuators"
            )
        if self.enabled is None or self.enabled.shape[0] != velocities.shape[0]:
            self.enabled = wp.ones(velocities.shape[0], dtype=wp.int32, device=velocities.device)
        p = self.params
        wp.launch(
            _friction_budget_kernel,
            dim=len(src_forces),
            inputs=[
                velocities,
                vel_indices,
                external,
                self.enabled,
                *(p[n] for n in _KERNEL_ARGS),
                self.physics_dt,
                src_forces,
            ],
            outputs=[dst_forces],
            device=device,
        )


@wp.kernel
def _slewed_pd_kernel(
    positions: wp.array[float],
    velocities: wp.array[float],
    target_pos: wp.array[float],
    target_vel: wp.array[float],
    feedforward: wp.array[float],
    pos_indices: wp.array[wp.uint32],
    vel_indices: wp.array[wp.uint32],
    target_pos_indices: wp.array[wp.uint32],
    target_vel_indices: wp.array[wp.uint32],
    kp: wp.array[float],
    kd: wp.array[float],
    const_effort: wp.array[float],
    rate: wp.array[float],
    from_target: wp.array[float],
    goal: wp.array[float],
    started: wp.array[wp.int32],
    dt: float,
    efforts: wp.array[float],
    next_goal: wp.array[float],
):
    """g = clip(target, g_prev ± rate·dt), g_prev before the first step the joint position, or the target where
    from_target is set (MuJoCo's <dcmotor> slew state); effort = const + feedforward + kp·(g − q) +
    kd·(target_vel − qd)."""
    i = wp.tid()
    q = positions[pos_indices[i]]
    prev = q
    if from_target[i] > wp.float32(0.5):
        prev = target_pos[target_pos_indices[i]]
    if started[i] != 0:
        prev = goal[i]
    step = rate[i] * dt
    g = wp.clamp(target_pos[target_pos_indices[i]], prev - step, prev + step)
    ff = wp.float32(0.0)
    if feedforward:
        ff = feedforward[target_vel_indices[i]]
    const_e = wp.float32(0.0)
    if const_effort:
        const_e = const_effort[i]
    efforts[i] = (
        const_e
        + ff
        + kp[i] * (g - q)
        + kd[i] * (target_vel[target_vel_indices[i]] - velocities[vel_indices[i]])
    )
    next_goal[i] = g


@wp.kernel
def _unstart_kernel(started: wp.array[wp.int32], mask: wp.array[wp.bool]):
    i = wp.tid()
    if mask[i]:
        started[i] = 0


class DriveSlewedPD(DriveBase):
    """Newton's PD law on a slewed position target (a servo firmware's velocity-limited goal): each step the goal
    moves toward the (delayed) target at most goal_rate_limit·dt, starting at the joint position after a reset, or
    at the first target with slew_from_target (MuJoCo's <dcmotor>). Stateful (the goal); explicit mode only."""

    @dataclass
    class State(DriveBase.State):
        """The slewed goal per DOF and whether it has started (0: it starts at the joint position)."""

        goal: wp.array | None = None
        started: wp.array | None = None

        def reset(self, mask: wp.array | None = None) -> None:
            assert self.started is not None
            if mask is None:
                self.started.zero_()
                return
            wp.launch(_unstart_kernel, dim=len(mask), inputs=[self.started, mask], device=self.started.device)

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        out = {k: float(args.get(k, 0.0)) for k in ("kp", "kd", "const_effort", "goal_rate_limit")}
        out["slew_from_target"] = 1.0 if args.get("slew_from_target") else 0.0
        bad = [k for k in ("kp", "kd") if not out[k] >= 0.0]
        bad += (
            []
            if out["goal_rate_limit"] > 0.0 and math.isfinite(out["goal_rate_limit"])
            else ["goal_rate_limit"]
        )
        if bad:
            raise ValueError(
                f"{SLEW_PD_API}: {', '.join(f'{k} = {out[k]}' for k in bad)} must be ≥ 0 (goal_rate_limit "
                "finite and > 0)"
            )
        return out

    def __init__(
        self,
        kp: wp.array,
        kd: wp.array,
        goal_rate_limit: wp.array,
        const_effort: wp.array | None = None,
        slew_from_target: wp.array | None = None,
    ) -> None:
        if not kp.shape == kd.shape == goal_rate_limit.shape:
            raise ValueError("kp, kd and goal_rate_limit must have one shape")
        self.kp, self.kd, self.goal_rate_limit, self.const_effort = kp, kd, goal_rate_limit, const_effort
        self.slew_from_target = (
            wp.zeros(kp.shape, dtype=wp.float32, device=kp.device)
            if slew_from_target is None
            else slew_from_target
        )
        self._next_goal: wp.array | None = None

    def finalize(self, device: wp.Device, num_actuators: int) -> None:
        self._next_goal = wp.zeros(num_actuators, dtype=wp.float32, device=device)

    def is_stateful(self) -> bool:
        return True

    def is_graphable(self) -> bool:
        return True

    def state(self, num_actuators: int, device: wp.Device) -> DriveSlewedPD.State:
        return DriveSlewedPD.State(
            goal=wp.zeros(num_actuators, dtype=wp.float32, device=device),
            started=wp.zeros(num_actuators, dtype=wp.int32, device=device),
        )

    def compute(
        self,
        positions: wp.array,
        velocities: wp.array,
        target_pos: wp.array,
        target_vel: wp.array,
        feedforward: wp.array | None,
        pos_indices: wp.array,
        vel_indices: wp.array,
        target_pos_indices: wp.array,
        target_vel_indices: wp.array,
        forces: wp.array,
        state: DriveBase.State | None,
        dt: float,
        device: wp.Device | None = None,
        *,
        custom_inputs: dict[str, Any] | None = None,
    ) -> None:
        assert isinstance(state, DriveSlewedPD.State) and self._next_goal is not None
        wp.launch(
            _slewed_pd_kernel,
            dim=len(forces),
            inputs=[
                positions,
                velocities,
                target_pos,
                target_vel,
                feedforward,
                pos_indices,
                vel_indices,
                target_pos_indices,
                target_vel_indices,
                self.kp,
                self.kd,
                self.const_effort,
                self.goal_rate_limit,
                self.slew_from_target,
                state.goal,
                state.started,
                float(dt),
            ],
            outputs=[forces, self._next_goal],
            device=device,
        )

    def update_state(self, current_state: DriveBase.State, next_state: DriveBase.State) -> None:
        assert isinstance(next_state, DriveSlewedPD.State) and next_state.goal is not None
        assert next_state.started is not None and self._next_goal is not None
        wp.copy(next_state.goal, self._next_goal)
        next_state.started.fill_(1)


def budget_clamps(model: Any) -> list[ClampingFrictionBudget]:
    """Every friction-budget clamp of a finalized Newton model's actuators."""
    return [c for a in model.actuators for c in a.clamping if isinstance(c, ClampingFrictionBudget)]


def external_effort(model: Any, state: Any, applied: wp.array | None = None) -> wp.array:
    """τ_e per DOF [N·m or N]: the applied joint forces (`applied`, e.g. control.joint_f before the actuators
    add theirs) minus gravity and Coriolis forces, g(q) + C(q, qd)·qd (newton.eval_inverse_dynamics_passive;
    state.body_q must match state.joint_q)."""
    n = model.joint_dof_count
    gravity = wp.zeros(n, dtype=float, device=model.device)
    coriolis = wp.zeros(n, dtype=float, device=model.device)
    newton.eval_inverse_dynamics_passive(model, state, gravity_force=gravity, coriolis_force=coriolis)
    out = (applied.numpy() if applied is not None else 0.0) - gravity.numpy() - coriolis.numpy()
    return wp.array(out, dtype=float, device=model.device)


def set_external_effort(model: Any, external: wp.array) -> None:
    """Hand τ_e (joint_dof_count values) to every friction-budget clamp of the model for the next actuator step
    (used once: give it before every step)."""
    for clamp in budget_clamps(model):
        clamp.external = external


def budget_dofs(model: Any) -> list[int]:
    """The DOF indices whose actuators end in a friction-budget clamp."""
    return [
        int(i)
        for a in model.actuators
        if any(isinstance(c, ClampingFrictionBudget) for c in a.clamping)
        for i in a.indices.numpy()
    ]


def set_torque_enabled(model: Any, enabled: Any) -> None:
    """The servos' torque enable per DOF (joint_dof_count booleans, kept until changed; all on by default): a
    friction-budget joint whose torque is off gets no motor effort, only the budget's friction against the load
    (BAM's torque_enable = false); its drive and delay run on."""
    flags = np.asarray(enabled, dtype=bool).reshape(-1)
    if flags.shape[0] != model.joint_dof_count:
        raise ValueError(
            f"set_torque_enabled takes {model.joint_dof_count} values (one per DOF), got {flags.shape[0]}"
        )
    arr: wp.array = wp.array(flags.astype(np.int32), dtype=wp.int32, device=model.device)
    for clamp in budget_clamps(model):
        clamp.enabled = arr


_registered = False


def register() -> None:
    """Register the USD schemas and the Newton components (idempotent): call before reading a stage."""
    global _registered
    register_usd_schemas()
    if _registered:
        return
    register_actuator_component(PD_API, DrivePD, ComponentKind.DRIVE)
    register_actuator_component(BUDGET_API, ClampingFrictionBudget, ComponentKind.CLAMPING)
    register_actuator_component(SLEW_PD_API, DriveSlewedPD, ComponentKind.DRIVE)
    _registered = True


register()  # importing this module is enough; register() stays the one public call
