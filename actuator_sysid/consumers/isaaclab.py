"""Isaac Lab 3.0 actuator classes and cfgs for the models Isaac Lab has no class for.

`DelayedDCMotor` (family dcmotor_delay), `DelayedPIDActuator` (pid), nets that read the drive's commands
(`ActuatorNetMLPCommands`, `ActuatorNetLSTMCommands`), BAM's friction budget on the DC-motor
classes (`DCMotorBAMFriction`, `DelayedDCMotorBAMFriction`, families dcmotor_stribeck … dcmotor_stribeck_delay,
docs/prior-art.md M2–M6), a slewed position target (`DCMotorGoalSlew`, `IdealPDActuatorGoalSlew`: a servo's goal
rate, MuJoCo's <dcmotor> slewmax) and an encoder offset on any of them (`…WithEncoderOffset`). They reuse Isaac Lab's own
buffers and clip code, so the maths stays Isaac Lab's (docs/consumer-semantics.md §A.3–§A.5; PID as Newton's
DrivePID, §C.2). Isaac Lab runs explicit subclasses only with `SimulationCfg(use_newton_actuators=False)`.

Importing this module imports Isaac Lab; `actuator_sysid.consumers` itself does not.
"""

from __future__ import annotations

from dataclasses import MISSING
from typing import Any

import torch
from isaaclab.actuators import (
    ActuatorNetLSTM,
    ActuatorNetLSTMCfg,
    ActuatorNetMLP,
    ActuatorNetMLPCfg,
    DCMotor,
    DCMotorCfg,
    DelayedPDActuator,
    DelayedPDActuatorCfg,
    IdealPDActuator,
    IdealPDActuatorCfg,
    RemotizedPDActuator,
    RemotizedPDActuatorCfg,
)
from isaaclab.actuators.actuator_base import resolve_joint_parameter
from isaaclab.utils import configclass, index_fill_

__all__ = [
    "ActuatorNetLSTMCommands",
    "ActuatorNetLSTMCommandsCfg",
    "ActuatorNetMLPCommands",
    "ActuatorNetMLPCommandsCfg",
    "BAMFrictionMixin",
    "DCMotorBAMFriction",
    "DCMotorBAMFrictionCfg",
    "DelayedDCMotor",
    "DelayedDCMotorBAMFriction",
    "DelayedDCMotorBAMFrictionCfg",
    "DelayedDCMotorCfg",
    "DelayedPIDActuator",
    "DelayedPIDActuatorCfg",
    "DCMotorBAMFrictionGoalSlew",
    "DCMotorBAMFrictionGoalSlewCfg",
    "DCMotorGoalSlew",
    "DCMotorGoalSlewCfg",
    "DelayedDCMotorBAMFrictionGoalSlew",
    "DelayedDCMotorBAMFrictionGoalSlewCfg",
    "DelayedDCMotorGoalSlew",
    "DelayedDCMotorGoalSlewCfg",
    "EncoderOffsetMixin",
    "GoalSlewMixin",
    "IdealPDActuatorGoalSlew",
    "IdealPDActuatorGoalSlewCfg",
]


def _param(act: Any, value: Any, default: Any = None) -> torch.Tensor:
    """A cfg value as Isaac Lab resolves it per joint: (num_envs, num_joints)."""
    return resolve_joint_parameter(value, default, act._joint_names, act._num_envs, act._device)


class DelayedDCMotor(DelayedPDActuator):
    """DelayedPDActuator (delayed targets and feed-forward) whose output DCMotor's torque-speed envelope clips."""

    def __init__(self, cfg: DelayedDCMotorCfg, *args: Any, **kwargs: Any) -> None:
        super().__init__(cfg, *args, **kwargs)
        if cfg.actuator_velocity_limit is None:
            raise ValueError("DelayedDCMotor needs actuator_velocity_limit")
        self._saturation_effort = _param(self, cfg.saturation_effort)
        self._vel_at_effort_lim = self.actuator_velocity_limit * (
            1 + self.actuator_effort_limit / self._saturation_effort
        )

    _clip_effort = DCMotor._clip_effort  # Isaac Lab's own four-quadrant clip


@configclass
class DelayedDCMotorCfg(DelayedPDActuatorCfg):
    """DC-motor envelope and command delay together (family dcmotor_delay)."""

    class_type: type = DelayedDCMotor
    saturation_effort: float = MISSING  # type: ignore[assignment]


class DelayedPIDActuator(DelayedPDActuator):
    """Newton's DrivePID on delayed commands: I = clip(I + e*dt, ±integral_max) is updated before use,
    effort = kp*e + ki*I + kd*(qd_des − qd) + ff, then the box clip (family pid)."""

    def __init__(self, cfg: DelayedPIDActuatorCfg, *args: Any, **kwargs: Any) -> None:
        super().__init__(cfg, *args, **kwargs)
        self._ki = _param(self, cfg.ki)
        self._integral_max = _param(self, cfg.integral_max)
        self._integral = torch.zeros_like(self.computed_effort)

    def reset(self, env_ids: Any) -> None:
        super().reset(env_ids)
        self._integral[slice(None) if env_ids is None else env_ids] = 0.0

    def compute(self, control_action: Any, joint_pos: torch.Tensor, joint_vel: torch.Tensor) -> Any:
        control_action.joint_positions = self.positions_delay_buffer.compute(control_action.joint_positions)
        control_action.joint_velocities = self.velocities_delay_buffer.compute(
            control_action.joint_velocities
        )
        control_action.joint_efforts = self.efforts_delay_buffer.compute(control_action.joint_efforts)
        error = control_action.joint_positions - joint_pos
        self._integral = torch.clip(
            self._integral + error * self.cfg.physics_dt, -self._integral_max, self._integral_max
        )
        control_action.joint_efforts = control_action.joint_efforts + self._ki * self._integral
        return IdealPDActuator.compute(self, control_action, joint_pos, joint_vel)


@configclass
class DelayedPIDActuatorCfg(DelayedPDActuatorCfg):
    """PID with integral clamp, box clip and command delay (family pid); physics_dt is the step it assumes."""

    class_type: type = DelayedPIDActuator
    ki: float = MISSING  # type: ignore[assignment]
    integral_max: float = float("inf")
    physics_dt: float = MISSING  # type: ignore[assignment]


class BAMFrictionMixin:
    """BAM's friction budget (docs/prior-art.md M2–M6) on top of the engine's Coulomb `friction`.

    The fit's plant holds the joint while |joint_inertia/dt·qd + τ_m + τ_e| ≤ budget, budget = friction +
    stribeck_friction·s + |Kle·τ_e − Kl·τ_m| + s·|Kles·τ_e − Kls·τ_m| (+ M6 quadratic terms while motor and load
    oppose), s = exp(−|qd/stribeck_velocity|^stribeck_exponent), τ_m the clipped motor effort and τ_e everything
    else acting on the joint (gravity, contacts, coupling). The engine applies the cfg's constant `friction` as
    its Coulomb stopping constraint; this actuator adds `friction_effort`, a torque that stops the joint up to
    (budget − friction), computed like that rule: with both the stop is the fit's.

    τ_e: give it each step with `set_external_effort` (exact: the joints' gravity and other passive torques,
    e.g. minus the articulation's generalized gravity and Coriolis forces), else it is estimated from the
    previous step's velocity change, (joint_inertia + dt·viscous_friction)·qd/dt − joint_inertia·qd_prev/dt −
    previous output − the engine's Coulomb friction as this actuator predicted it; zero on the first step after a
    reset. The estimate is exact while the joint slides, keeps while it is held the error it had when it stopped
    (a held joint shows its load only to within `friction`), and lags one step.
    joint_inertia is the bench load plus armature the fit assumed; on a robot set it to the joint-space inertia.
    physics_dt must be the simulation step, and compute() must run once per physics step (Isaac Lab does).
    `set_torque_enabled` switches the servo's torque off and on (per env and joint), as BAM's torque_enable.
    `friction_effort` and `external_effort` hold the added torque and τ_e; `applied_effort` stays the motor's
    clipped effort, the joint efforts sent to the simulation are their sum.
    """

    cfg: Any
    computed_effort: torch.Tensor
    applied_effort: torch.Tensor

    def __init__(self, cfg: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(cfg, *args, **kwargs)  # type: ignore[call-arg]
        self._inertia = _param(self, cfg.joint_inertia)
        self._coulomb = _param(self, cfg.friction, 0.0)
        self._viscous = _param(self, cfg.viscous_friction, 0.0)
        self._stribeck = _param(self, cfg.stribeck_friction)
        self._stribeck_velocity = _param(self, cfg.stribeck_velocity)
        self._stribeck_exponent = _param(self, cfg.stribeck_exponent)
        self._kl = _param(self, cfg.load_friction)
        self._kls = _param(self, cfg.load_friction_stribeck)
        self._kle = _param(self, cfg.load_friction_external, self._kl)  # M3/M4: one gain for both sides
        self._kles = _param(self, cfg.load_friction_external_stribeck, self._kls)
        self._kqm = _param(self, cfg.load_friction_quadratic_motor)
        self._kqe = _param(self, cfg.load_friction_quadratic_external)
        zeros = torch.zeros_like(self.computed_effort)
        self.friction_effort, self.external_effort = zeros.clone(), zeros.clone()
        self._prev_vel, self._prev_out, self._prev_engine = zeros.clone(), zeros.clone(), zeros.clone()
        self._has_prev = torch.zeros_like(self.computed_effort, dtype=torch.bool)
        self._given_external: torch.Tensor | None = None
        self._enabled = torch.ones_like(self.computed_effort, dtype=torch.bool)

    def set_torque_enabled(self, enabled: torch.Tensor | bool) -> None:
        """The servo's torque enable, (num_envs, num_joints) or one for all, kept until changed: while off the
        motor applies nothing (its commands and delay run on) and the budget still holds the joint against the
        load, with τ_m = 0 (BAM's torque_enable = false)."""
        flags = torch.as_tensor(enabled, dtype=torch.bool, device=self.computed_effort.device)
        self._enabled = flags.expand_as(self.computed_effort).clone()

    def set_external_effort(self, external: torch.Tensor) -> None:
        """τ_e for the next compute() [N·m], (num_envs, num_joints): used once, in place of the estimate."""
        self._given_external = external

    def reset(self, env_ids: Any) -> None:
        super().reset(env_ids)  # type: ignore[misc]
        self._has_prev[slice(None) if env_ids is None else env_ids] = False

    def _estimate(self, joint_vel: torch.Tensor, dt: float) -> torch.Tensor:
        """τ_e from the previous step's velocity change (the class docstring says when it is exact)."""
        inertia_dt = (
            self._inertia + dt * self._viscous
        ) / dt  # viscous damping implicit, as MuJoCo's implicitfast
        ext = (
            inertia_dt * joint_vel - self._inertia / dt * self._prev_vel - self._prev_out - self._prev_engine
        )
        return torch.where(self._has_prev, ext, torch.zeros_like(ext))

    def _budget_extra(self, motor: torch.Tensor, ext: torch.Tensor, joint_vel: torch.Tensor) -> torch.Tensor:
        """The budget above the engine's Coulomb friction (docs/prior-art.md M2–M6)."""
        s = torch.exp(-(torch.abs(joint_vel / self._stribeck_velocity) ** self._stribeck_exponent))
        extra = (
            self._stribeck * s
            + torch.abs(self._kle * ext - self._kl * motor)
            + s * torch.abs(self._kles * ext - self._kls * motor)
        )
        oppose = motor * ext < 0.0
        zero = torch.zeros_like(ext)
        quadratic = torch.where(
            oppose & (ext.abs() < motor.abs()),
            self._kqe * ext * ext,
            torch.where(oppose & (ext.abs() > motor.abs()), self._kqm * motor * motor, zero),
        )
        return extra + s * quadratic

    def compute(self, control_action: Any, joint_pos: torch.Tensor, joint_vel: torch.Tensor) -> Any:
        control_action = super().compute(control_action, joint_pos, joint_vel)  # type: ignore[misc]
        off = ~self._enabled
        if bool(off.any()):  # torque off: the motor's efforts are zero, its friction is not
            self.computed_effort = self.computed_effort.masked_fill(off, 0.0)
            self.applied_effort = self.applied_effort.masked_fill(off, 0.0)
            control_action.joint_efforts = control_action.joint_efforts.masked_fill(off, 0.0)
        motor = control_action.joint_efforts
        dt = self.cfg.physics_dt
        given, self._given_external = self._given_external, None
        ext = self._estimate(joint_vel, dt) if given is None else given.to(motor)
        extra = self._budget_extra(motor, ext, joint_vel)
        stop = self._inertia / dt * joint_vel + motor + ext  # what would stop the joint within this step
        self.friction_effort = -torch.sign(stop) * torch.minimum(torch.abs(stop), extra)
        self.external_effort = ext
        control_action.joint_efforts = motor + self.friction_effort
        rest = (
            stop + self.friction_effort
        )  # what the engine's Coulomb friction sees: it stops up to `friction`
        self._prev_engine = -torch.sign(rest) * torch.minimum(torch.abs(rest), self._coulomb)
        self._prev_vel = joint_vel.clone()
        self._prev_out = control_action.joint_efforts.clone()
        self._has_prev[:] = True
        return control_action


class DCMotorBAMFriction(BAMFrictionMixin, DCMotor):
    """DCMotor with BAM's friction budget (see BAMFrictionMixin)."""


class DelayedDCMotorBAMFriction(BAMFrictionMixin, DelayedDCMotor):
    """DelayedDCMotor with BAM's friction budget (see BAMFrictionMixin)."""


@configclass
class DCMotorBAMFrictionCfg(DCMotorCfg):
    """DCMotorCfg with BAM's friction budget; a load_friction_external* left None equals its motor-side gain."""

    class_type: type = DCMotorBAMFriction
    joint_inertia: float = MISSING  # type: ignore[assignment]  # kg·m², load + armature the joint is stopped with
    physics_dt: float = MISSING  # type: ignore[assignment]  # s, the simulation step
    stribeck_friction: float = 0.0  # N·m
    stribeck_velocity: float = 1.0  # rad/s
    stribeck_exponent: float = 2.0  # 1
    load_friction: float = 0.0  # N·m/N·m
    load_friction_stribeck: float = 0.0  # N·m/N·m
    load_friction_external: float | None = None  # N·m/N·m
    load_friction_external_stribeck: float | None = None  # N·m/N·m
    load_friction_quadratic_motor: float = 0.0  # 1/(N·m)
    load_friction_quadratic_external: float = 0.0  # 1/(N·m)


@configclass
class DelayedDCMotorBAMFrictionCfg(DelayedDCMotorCfg):
    """DelayedDCMotorCfg with BAM's friction budget; a load_friction_external* left None equals its motor side."""

    class_type: type = DelayedDCMotorBAMFriction
    joint_inertia: float = MISSING  # type: ignore[assignment]  # kg·m², load + armature the joint is stopped with
    physics_dt: float = MISSING  # type: ignore[assignment]  # s, the simulation step
    stribeck_friction: float = 0.0  # N·m
    stribeck_velocity: float = 1.0  # rad/s
    stribeck_exponent: float = 2.0  # 1
    load_friction: float = 0.0  # N·m/N·m
    load_friction_stribeck: float = 0.0  # N·m/N·m
    load_friction_external: float | None = None  # N·m/N·m
    load_friction_external_stribeck: float | None = None  # N·m/N·m
    load_friction_quadratic_motor: float = 0.0  # 1/(N·m)
    load_friction_quadratic_external: float = 0.0  # 1/(N·m)


class EncoderOffsetMixin:
    """The controller reads the encoder, q + encoder_offset (a constant bias fitted from the log)."""

    cfg: Any

    def compute(self, control_action: Any, joint_pos: torch.Tensor, joint_vel: torch.Tensor) -> Any:
        return super().compute(control_action, joint_pos + self.cfg.encoder_offset, joint_vel)  # type: ignore[misc]


class IdealPDActuatorWithEncoderOffset(EncoderOffsetMixin, IdealPDActuator):
    """IdealPDActuator whose controller sees the encoder offset."""


class DCMotorWithEncoderOffset(EncoderOffsetMixin, DCMotor):
    """DCMotor whose controller sees the encoder offset."""


class DelayedPDActuatorWithEncoderOffset(EncoderOffsetMixin, DelayedPDActuator):
    """DelayedPDActuator whose controller sees the encoder offset."""


class RemotizedPDActuatorWithEncoderOffset(EncoderOffsetMixin, RemotizedPDActuator):
    """RemotizedPDActuator whose controller sees the encoder offset."""


class DelayedDCMotorWithEncoderOffset(EncoderOffsetMixin, DelayedDCMotor):
    """DelayedDCMotor whose controller sees the encoder offset."""


class DelayedPIDActuatorWithEncoderOffset(EncoderOffsetMixin, DelayedPIDActuator):
    """DelayedPIDActuator whose controller sees the encoder offset."""


class DCMotorBAMFrictionWithEncoderOffset(EncoderOffsetMixin, DCMotorBAMFriction):
    """DCMotorBAMFriction whose controller sees the encoder offset."""


class DelayedDCMotorBAMFrictionWithEncoderOffset(EncoderOffsetMixin, DelayedDCMotorBAMFriction):
    """DelayedDCMotorBAMFriction whose controller sees the encoder offset."""


@configclass
class IdealPDActuatorWithEncoderOffsetCfg(IdealPDActuatorCfg):
    class_type: type = IdealPDActuatorWithEncoderOffset
    encoder_offset: float = 0.0  # rad


@configclass
class DCMotorWithEncoderOffsetCfg(DCMotorCfg):
    class_type: type = DCMotorWithEncoderOffset
    encoder_offset: float = 0.0  # rad


@configclass
class DelayedPDActuatorWithEncoderOffsetCfg(DelayedPDActuatorCfg):
    class_type: type = DelayedPDActuatorWithEncoderOffset
    encoder_offset: float = 0.0  # rad


@configclass
class RemotizedPDActuatorWithEncoderOffsetCfg(RemotizedPDActuatorCfg):
    class_type: type = RemotizedPDActuatorWithEncoderOffset
    encoder_offset: float = 0.0  # rad


@configclass
class DelayedDCMotorWithEncoderOffsetCfg(DelayedDCMotorCfg):
    class_type: type = DelayedDCMotorWithEncoderOffset
    encoder_offset: float = 0.0  # rad


@configclass
class DelayedPIDActuatorWithEncoderOffsetCfg(DelayedPIDActuatorCfg):
    class_type: type = DelayedPIDActuatorWithEncoderOffset
    encoder_offset: float = 0.0  # rad


@configclass
class DCMotorBAMFrictionWithEncoderOffsetCfg(DCMotorBAMFrictionCfg):
    class_type: type = DCMotorBAMFrictionWithEncoderOffset
    encoder_offset: float = 0.0  # rad


@configclass
class DelayedDCMotorBAMFrictionWithEncoderOffsetCfg(DelayedDCMotorBAMFrictionCfg):
    class_type: type = DelayedDCMotorBAMFrictionWithEncoderOffset
    encoder_offset: float = 0.0  # rad


class GoalSlewMixin:
    """A slewed position target: each physics step, before the PD law, g ← clip(target, g ± goal_rate_limit·dt).

    After a reset g starts at the joint's position (a servo firmware's velocity-limited goal), or at the first
    target with `slew_from_target` (MuJoCo's <dcmotor> slewmax, whose slew state starts at the setpoint).
    physics_dt must be the simulation step, and compute() must run once per physics step (Isaac Lab does).
    `goal` holds the slewed target the PD law saw last.
    """

    cfg: Any
    computed_effort: torch.Tensor

    def __init__(self, cfg: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(cfg, *args, **kwargs)  # type: ignore[call-arg]
        if not cfg.physics_dt > 0:
            raise ValueError(f"physics_dt must be > 0, got {cfg.physics_dt!r}")
        self._goal_rate = _param(self, cfg.goal_rate_limit)
        self.goal = torch.zeros_like(self.computed_effort)
        self._goal_set = torch.zeros_like(self.computed_effort, dtype=torch.bool)

    def reset(self, env_ids: Any) -> None:
        super().reset(env_ids)  # type: ignore[misc]
        self._goal_set[slice(None) if env_ids is None else env_ids] = False

    def compute(self, control_action: Any, joint_pos: torch.Tensor, joint_vel: torch.Tensor) -> Any:
        target = control_action.joint_positions
        start = target if self.cfg.slew_from_target else joint_pos
        g = torch.where(self._goal_set, self.goal, start)
        step = self._goal_rate * self.cfg.physics_dt
        self.goal = torch.minimum(torch.maximum(target, g - step), g + step)
        self._goal_set[:] = True
        control_action.joint_positions = self.goal.clone()
        return super().compute(control_action, joint_pos, joint_vel)  # type: ignore[misc]


class DCMotorGoalSlew(GoalSlewMixin, DCMotor):
    """DCMotor whose position target is slewed (see GoalSlewMixin)."""


class IdealPDActuatorGoalSlew(GoalSlewMixin, IdealPDActuator):
    """IdealPDActuator whose position target is slewed (see GoalSlewMixin)."""


@configclass
class DCMotorGoalSlewCfg(DCMotorCfg):
    """DCMotorCfg with a slewed position target: goal_rate_limit [rad/s], physics_dt [s]."""

    class_type: type = DCMotorGoalSlew
    goal_rate_limit: float = MISSING  # type: ignore[assignment]
    physics_dt: float = MISSING  # type: ignore[assignment]
    slew_from_target: bool = False


@configclass
class IdealPDActuatorGoalSlewCfg(IdealPDActuatorCfg):
    """IdealPDActuatorCfg with a slewed position target: goal_rate_limit [rad/s], physics_dt [s]."""

    class_type: type = IdealPDActuatorGoalSlew
    goal_rate_limit: float = MISSING  # type: ignore[assignment]
    physics_dt: float = MISSING  # type: ignore[assignment]
    slew_from_target: bool = False


class _GoalSlewPD(GoalSlewMixin, IdealPDActuator):
    """IdealPDActuator's PD law on a slewed target: the base a delayed class reaches after its delay, so the
    delayed target is slewed (a servo's bus delays the goal, then its firmware slews it)."""


class DelayedDCMotorGoalSlew(DelayedDCMotor, _GoalSlewPD):
    """DelayedDCMotor whose delayed position target is slewed (see GoalSlewMixin)."""


class DCMotorBAMFrictionGoalSlew(BAMFrictionMixin, DCMotorGoalSlew):
    """DCMotorGoalSlew with BAM's friction budget (see BAMFrictionMixin)."""


class DelayedDCMotorBAMFrictionGoalSlew(BAMFrictionMixin, DelayedDCMotorGoalSlew):
    """DelayedDCMotorGoalSlew with BAM's friction budget (see BAMFrictionMixin)."""


@configclass
class DelayedDCMotorGoalSlewCfg(DelayedDCMotorCfg):
    """DelayedDCMotorCfg whose delayed position target is slewed: goal_rate_limit [rad/s], physics_dt [s]."""

    class_type: type = DelayedDCMotorGoalSlew
    goal_rate_limit: float = MISSING  # type: ignore[assignment]
    physics_dt: float = MISSING  # type: ignore[assignment]
    slew_from_target: bool = False


@configclass
class DCMotorBAMFrictionGoalSlewCfg(DCMotorBAMFrictionCfg):
    """DCMotorBAMFrictionCfg with a slewed position target: goal_rate_limit [rad/s]."""

    class_type: type = DCMotorBAMFrictionGoalSlew
    goal_rate_limit: float = MISSING  # type: ignore[assignment]
    slew_from_target: bool = False


@configclass
class DelayedDCMotorBAMFrictionGoalSlewCfg(DelayedDCMotorBAMFrictionCfg):
    """DelayedDCMotorBAMFrictionCfg whose delayed position target is slewed: goal_rate_limit [rad/s]."""

    class_type: type = DelayedDCMotorBAMFrictionGoalSlew
    goal_rate_limit: float = MISSING  # type: ignore[assignment]
    slew_from_target: bool = False


COMMAND_CHANNELS = ("tau_ff", "tau_cmd", "kp", "kd")  # channels after [pos_error, vel | vel_error], in order


def _check_inputs(inputs: list[str]) -> list[str]:
    """The cfg's input layout, checked: pos_error, vel or vel_error, then COMMAND_CHANNELS in order."""
    inputs = list(inputs)
    rest = inputs[2:]
    ok = inputs[:1] == ["pos_error"] and inputs[1:2] in (["vel"], ["vel_error"])
    if not ok or rest != [c for c in COMMAND_CHANNELS if c in rest]:
        raise ValueError(
            f"inputs must be 'pos_error', then 'vel' or 'vel_error', then any of {list(COMMAND_CHANNELS)} in "
            f"that order, got {inputs!r}"
        )
    return inputs


def command_channels(
    act: Any, action: Any, joint_pos: torch.Tensor, joint_vel: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """(q_des − q, velocity channel, further channels), (num_envs, num_joints) each, from the articulation's
    targets: position, velocity (qd_des; none given: 0) and effort (τ_ff; none: 0), and the joint's stiffness
    and damping as the gains (MIT mode: kp, kd of the command); tau_cmd = kp·(q_des − q) + kd·(qd_des − qd) + τ_ff."""
    zero = torch.zeros_like(joint_pos)
    qd_des = zero if action.joint_velocities is None else action.joint_velocities
    tau_ff = zero if action.joint_efforts is None else action.joint_efforts
    err = action.joint_positions - joint_pos
    kp, kd = act.stiffness, act.damping
    named = {"tau_ff": tau_ff, "tau_cmd": kp * err + kd * (qd_des - joint_vel) + tau_ff, "kp": kp, "kd": kd}
    vel = joint_vel if act.cfg.inputs[1] == "vel" else qd_des - joint_vel
    return err, vel, [named[c] for c in act.cfg.inputs[2:]]


def _finish(act: Any, control_action: Any, joint_vel: torch.Tensor) -> Any:
    """Isaac Lab's ending of a net's compute: the DC-motor clip, the efforts out, no position or velocity target."""
    act.applied_effort = act._clip_effort(act.computed_effort, joint_vel)
    control_action.joint_efforts = act.applied_effort
    control_action.joint_positions = None
    control_action.joint_velocities = None
    return control_action


class ActuatorNetMLPCommands(ActuatorNetMLP):
    """ActuatorNetMLP for a net that also reads the drive's commands.

    Its input is Isaac Lab's [pos, vel] blocks (input_order), the velocity channel qd or qd_des − qd, then one
    block per further channel (cfg.inputs: tau_ff, tau_cmd, kp, kd), each its history at input_idx times
    cfg.command_scales[channel]. The gains are the joint's stiffness and damping."""

    cfg: ActuatorNetMLPCommandsCfg
    _joint_pos_error_history: torch.Tensor  # Isaac Lab's own buffers, typed for the checker
    _joint_vel_history: torch.Tensor

    def __init__(self, cfg: ActuatorNetMLPCommandsCfg, *args: Any, **kwargs: Any) -> None:
        _check_inputs(cfg.inputs)
        super().__init__(cfg, *args, **kwargs)
        extra = len(cfg.inputs) - 2
        h = self._joint_pos_error_history.shape[1]
        self._command_history = torch.zeros(self._num_envs, h, self.num_joints, extra, device=self._device)

    def reset(self, env_ids: Any) -> None:
        super().reset(env_ids)
        index_fill_(self._command_history, env_ids, 0.0)

    def compute(self, control_action: Any, joint_pos: torch.Tensor, joint_vel: torch.Tensor) -> Any:
        err, vel, extra = command_channels(self, control_action, joint_pos, joint_vel)
        self._joint_pos_error_history = self._joint_pos_error_history.roll(1, 1)
        self._joint_pos_error_history[:, 0] = err
        self._joint_vel_history = self._joint_vel_history.roll(1, 1)
        self._joint_vel_history[:, 0] = vel
        self._command_history = self._command_history.roll(1, 1)
        if extra:
            self._command_history[:, 0] = torch.stack(extra, dim=-1)
        n = self._num_envs * self.num_joints

        def block(hist: torch.Tensor) -> torch.Tensor:  # (envs, H, joints) → (envs·joints, K)
            return torch.stack([hist[:, i] for i in self.cfg.input_idx], dim=2).reshape(n, -1)

        pos = block(self._joint_pos_error_history) * self.cfg.pos_scale
        vel_in = block(self._joint_vel_history) * self.cfg.vel_scale
        blocks = [pos, vel_in] if self.cfg.input_order == "pos_vel" else [vel_in, pos]
        for c, name in enumerate(self.cfg.inputs[2:]):
            blocks.append(block(self._command_history[..., c]) * self.cfg.command_scales[name])
        with torch.inference_mode():
            torques = self.network(torch.cat(blocks, dim=1))
        self.computed_effort = torques.reshape(self._num_envs, self.num_joints) * self.cfg.torque_scale
        return _finish(self, control_action, joint_vel)


@configclass
class ActuatorNetMLPCommandsCfg(ActuatorNetMLPCfg):
    """ActuatorNetMLPCfg with the net's input channels (NetSpec.inputs) and the further channels' scales."""

    class_type: type = ActuatorNetMLPCommands
    inputs: list[str] = MISSING  # type: ignore[assignment]
    command_scales: dict[str, float] = MISSING  # type: ignore[assignment]


class ActuatorNetLSTMCommands(ActuatorNetLSTM):
    """ActuatorNetLSTM for a net that also reads the drive's commands: its input per step is the raw
    [q_des − q, qd or qd_des − qd, further channels] (cfg.inputs); the module scales them itself."""

    cfg: ActuatorNetLSTMCommandsCfg

    def __init__(self, cfg: ActuatorNetLSTMCommandsCfg, *args: Any, **kwargs: Any) -> None:
        _check_inputs(cfg.inputs)
        super().__init__(cfg, *args, **kwargs)
        self.sea_input = torch.zeros(
            self._num_envs * self.num_joints, 1, len(cfg.inputs), device=self._device
        )

    def compute(self, control_action: Any, joint_pos: torch.Tensor, joint_vel: torch.Tensor) -> Any:
        err, vel, extra = command_channels(self, control_action, joint_pos, joint_vel)
        for c, x in enumerate([err, vel, *extra]):
            self.sea_input[:, 0, c] = x.flatten()
        with torch.inference_mode():
            torques, (self.sea_hidden_state[:], self.sea_cell_state[:]) = self.network(
                self.sea_input, (self.sea_hidden_state, self.sea_cell_state)
            )
        self.computed_effort = torques.reshape(self._num_envs, self.num_joints)
        return _finish(self, control_action, joint_vel)


@configclass
class ActuatorNetLSTMCommandsCfg(ActuatorNetLSTMCfg):
    """ActuatorNetLSTMCfg with the net's input channels (NetSpec.inputs); its scales are in the module."""

    class_type: type = ActuatorNetLSTMCommands
    inputs: list[str] = MISSING  # type: ignore[assignment]


CFG_CLASSES: dict[str, type] = {
    name: obj
    for name, obj in list(globals().items())
    if name.endswith("Cfg") and isinstance(obj, type) and obj.__module__ == __name__
}
"""Every cfg class of this module by name (the Isaac Lab export names them)."""
