"""A 1-DoF pendulum in the real Newton 1.8 simulator, driven by a NewtonActuator, for conformance tests.

Mirrors the pendulum of docs/consumer-semantics.md §E: one link on a revolute joint about Y, its COM `com` below the
joint (q = 0 hanging down, gravity −Z), SolverMuJoCo on the MuJoCo CPU backend.
"""

from __future__ import annotations

import newton
import numpy as np
import warp as wp
from newton.actuators import (
    ClampingDCMotor,
    ClampingMaxEffort,
    ClampingPositionBased,
    DrivePD,
    DrivePID,
    JointSpaceResponse,
)

wp.config.quiet = True

CLAMPS = {
    "max_effort": ClampingMaxEffort,
    "dc_motor": ClampingDCMotor,
    "position_table": ClampingPositionBased,
}


def build(
    mass: float,
    com: float,
    inertia_com: float,
    joint: dict,
    drive: str,
    drive_kwargs: dict,
    clamps: list[tuple[str, dict]],
    delay_steps: int | None,
):
    """Model with one actuated pendulum; returns (model, actuator, dof index)."""
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    link = builder.add_link(com=wp.vec3(0.0, 0.0, -com), mass=mass, inertia=wp.mat33(np.eye(3) * inertia_com))
    builder.add_shape_sphere(
        link,
        xform=wp.transform(wp.vec3(0.0, 0.0, -com), wp.quat_identity()),
        radius=0.02,
        cfg=newton.ModelBuilder.ShapeConfig(density=0.0, has_shape_collision=False),
    )
    j = builder.add_joint_revolute(parent=-1, child=link, axis=newton.Axis.Y, **joint)
    builder.add_articulation([j])
    dof = builder.joint_qd_start[j]
    builder.add_actuator(
        DrivePID if drive == "pid" else DrivePD,
        index=dof,
        clamping=[(CLAMPS[name], kw) for name, kw in clamps],
        delay_steps=delay_steps,
        **drive_kwargs,
    )
    model = builder.finalize(device="cpu")
    return model, model.actuators[0], dof


def closed_loop(
    model, actuator, dof: int, q_des: np.ndarray, dt: float, q0: float = 0.0, implicit_effort: bool = False
) -> dict[str, np.ndarray]:
    """Step actuator + SolverMuJoCo(use_mujoco_cpu=True); log the state and applied effort at every step.

    implicit_effort=True switches the actuator to Newton's implicit effort mode, with the joint-space
    response refreshed once per step before the actuator steps (§C.5).
    """
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=True, disable_contacts=True)
    response = None
    if implicit_effort:
        response = JointSpaceResponse(model)
        actuator.set_effort_mode_implicit(response)
    s0, s1 = model.state(), model.state()
    q_init = s0.joint_q.numpy()
    q_init[0] = q0
    s0.joint_q.assign(q_init)
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    control = model.control()
    a, b = actuator.state(), actuator.state()
    n = q_des.size
    out = {"q": np.zeros(n), "qd": np.zeros(n), "applied": np.zeros(n)}
    target = control.joint_target_q.numpy()
    for k in range(n):
        out["q"][k], out["qd"][k] = float(s0.joint_q.numpy()[0]), float(s0.joint_qd.numpy()[dof])
        target[dof] = q_des[k]
        control.joint_target_q.assign(target)
        control.joint_f.zero_()
        if response is not None:
            response.refresh(s0)
        actuator.step(s0, control, a, b, dt=dt)
        out["applied"][k] = float(control.joint_f.numpy()[dof])
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        a, b = b, a
    return out


def open_loop(model, actuator, dof: int, seq: dict[str, np.ndarray], dt: float) -> np.ndarray:
    """Feed the actuator given states and commands (no solver); returns the effort it writes each step."""
    state, control = model.state(), model.control()
    a, b = actuator.state(), actuator.state()
    n = seq["q"].size
    eff = np.zeros(n)
    for k in range(n):
        for arr, key in (
            (state.joint_q, "q"),
            (state.joint_qd, "qd"),
            (control.joint_target_q, "q_des"),
            (control.joint_target_qd, "qd_des"),
            (control.joint_act, "tau_ff"),
        ):
            v = arr.numpy()
            v[dof] = seq[key][k]
            arr.assign(v)
        control.joint_f.zero_()
        actuator.step(state, control, a, b, dt=dt)
        eff[k] = float(control.joint_f.numpy()[dof])
        a, b = b, a
    return eff
