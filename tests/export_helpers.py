"""Fit results built from known parameters, for export tests that need no search."""

from __future__ import annotations

from actuator_sysid.datasets.recording import Recording
from actuator_sysid.fitting.fit import split_segments
from actuator_sysid.models.families import FAMILIES
from actuator_sysid.models.rollout import default_knots

# every text export a per-joint fit writes (export/formats.py TEXT_FORMATS, spelled out as the tests expect)
TEXT_EXPORTS = (
    "isaaclab.py",
    "isaaclab.json",
    "isaaclab.yaml",
    "newton.usda",
    "mjcf.xml",
    "randomization.json",
    "mjlab_cfg.py",
)

TRUTH = {
    "stiffness": 25.0,
    "damping": 0.6,
    "saturation_effort": 7.0,
    "actuator_velocity_limit": 9.0,
    "actuator_effort_limit": 4.5,
    "armature": 0.015,
    "friction": 0.2,
    "viscous_friction": 0.08,
    "delay": 3,
    "ki": 4.0,
    "integral_max": 0.3,
    "dynamic_friction": 0.15,
    "encoder_offset": 0.02,
    **{f"lookup_effort_{k}": v for k, v in enumerate((3.0, 4.2, 4.5, 4.0, 3.5))},
}


def model_entry(
    family: str,
    params: dict,
    joint_terms: tuple[str, ...] | None = None,
    table_positions: list[float] | None = None,
) -> dict:
    """One fitted-model entry as fit_recording writes it (metrics left out)."""
    fam = FAMILIES[family] if joint_terms is None else FAMILIES[family].with_terms(joint_terms)
    entry = {
        "family": family,
        "isaaclab_cfg": fam.isaaclab_cfg,
        "joint_terms": list(fam.joint_terms),
        "params": {k: (int(params[k]) if k == "delay" else float(params[k])) for k in fam.params},
        "metrics": {"train": {}, "validation": {}, "segments": []},
        "n_params": len(fam.params),
    }
    if "position_table" in fam.clamps:
        entry["table_positions"] = list(table_positions or [-1.2, -0.5, 0.0, 0.5, 1.2])
    return entry


def make_result(
    models: dict[str, dict[str, dict]], rec: Recording | None = None, dt: float = 0.005, decimation: int = 1
) -> dict:
    """A result for {joint: {family: model entry}}; the first family of a joint is its best model."""
    joints = {}
    for joint, fams in models.items():
        names = list(fams)
        if rec is not None:
            for f in names:
                if "table_positions" in fams[f]:
                    fams[f]["table_positions"] = default_knots(rec, joint).tolist()
        joints[joint] = {
            "models": fams,
            "best_model": names[0],
            "ranking": [{"family": f, "score": float(i)} for i, f in enumerate(names)],
        }
    train, val = split_segments(len(rec.segments)) if rec is not None else ([], [])
    names = [s.name for s in rec.segments] if rec is not None else []
    return {
        "joints": joints,
        "split": {"train": [names[i] for i in train], "validation": [names[i] for i in val]},
        "assumptions": {"physics_dt": dt, "decimation": decimation, "effort_mode": "explicit"},
    }


def short_recording(
    n_segments: int = 3,
    n_samples: int = 400,
    joints: list[str] | None = None,
    family: str = "dcmotor",
    noise_q: float = 0.0,
) -> Recording:
    """The Isaac Lab test-bench log (tests/isaaclab_logs.py) cut short; its one joint copied under `joints`;
    `noise_q` [rad] adds position noise."""
    import numpy as np
    from isaaclab_logs import make_recording

    from actuator_sysid.datasets.recording import JointInfo

    rec = make_recording(family, noise_q=noise_q)
    rec.segments = rec.segments[:n_segments]
    names = joints or ["hinge"]
    for s in rec.segments:
        for k in ("t", "q", "qd", "q_des", "qd_des", "tau_ff", "tau"):
            a = getattr(s, k)[:n_samples]
            setattr(s, k, a if a.ndim == 1 else np.repeat(a, len(names), axis=1))
    info = rec.joints[0]
    rec.joints = [
        JointInfo(n, info.joint_type, info.inertia, info.mass, info.com_distance, info.gravity) for n in names
    ]
    return rec


# A model that is off the truth, so our own rollout has an RMSE a consumer's replay must reproduce within 10 %.
MISFIT = {
    **TRUTH,
    "stiffness": 20.0,
    "damping": 0.5,
    "saturation_effort": 7.0,
    "actuator_velocity_limit": 9.0,
    "actuator_effort_limit": 4.5,
    "armature": 0.015,
    "friction": 0.2,
    "viscous_friction": 0.08,
}
