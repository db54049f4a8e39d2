"""A 95 % interval spanning decades reads "not identified" (interval_text), and the stored result of a Go2 robot fit
in the shapes a robot fit stores, with long values in its tables (errors of four digits, values such as 1.018e+04
and -0.837) and one interval spanning 80 decades, so a robot fit's page is drawn without running a fit.

The browser checks that no number wraps, no interval prints a bound beyond 1e6 and no page shows a Python literal
(on the XL330 fit report, the dashboard, the Go2 robot page and this Go2 robot fit's page), that the robot verdict
reads at a glance and that the XL330 report is light are in tests/test_browser_layout.py: they read the XL330 fits
and the Go2 of its `site`, which a module of their own would have to build a second time."""

from __future__ import annotations

from actuator_sysid.service.templating import interval_text

# the 54 terms of a Go2 fit (12 joints' bias, 3 groups' 14 terms) that the log does not identify, named in one reason
UNIDENTIFIED = [f"{g}.term{k}" for g in ("hip", "thigh", "calf") for k in range(14)] + [
    f"bias{k}" for k in range(12)
]


def _go2_verdict(joints: list[str]) -> dict:
    """A Go2 robot fit's verdict in the shape robot_judge stores: 17 checks worst first, one naming 54 terms."""
    checks = [
        {
            "check": "identifiability",
            "status": "usable",
            "reason": f"{len(UNIDENTIFIED)} terms are not identified by this log: " + ", ".join(UNIDENTIFIED),
        },
        {
            "check": "at_bound",
            "status": "usable",
            "reason": "hip.armature sits at its upper search bound (0.5)",
        },
    ]
    checks += [
        {
            "check": "validation_error",
            "status": "ok",
            "reason": f"{j}: validation RMSE 0.0027 rad, 1 % of its range",
        }
        for j in joints[:12]
    ]
    checks += [
        {"check": "delay", "status": "ok", "reason": "the delay was scanned: 2 steps"},
        {"check": "gains", "status": "ok", "reason": "the PD gains are the log's own"},
        {"check": "export_replay", "status": "ok", "reason": "isaaclab replays the exports within tolerance"},
    ]
    return {"verdict": "usable", "reasons": [c["reason"] for c in checks], "checks": checks}


def _go2_result(joints: list[str]) -> dict:
    """A Go2 robot fit's result in the shapes a robot fit stores (the fields the robot fit page reads)."""
    groups = {
        g: {
            "joint_names_expr": f".*_{g}_joint",
            "joints": [j for j in joints if f"_{g}_" in j],
            "armature": 0.026963,
            "viscous_friction": -0.83712,
            "friction": 0.17634,
            "stiffness": 10183.0,
            "damping": 1.0181,
            "saturation_effort": 23.7,
            "velocity_limit": 30.1,
            "effort_limit": 23.7,
        }
        for g in ("hip", "thigh", "calf")
    }
    per_joint = {j: 0.0026963 + 1e-5 * k for k, j in enumerate(joints)}
    intervals = {
        f"{g}.{t}": {
            "estimate": 0.17634,
            "interval95": [0.17634 - 0.0123, 0.17634 + 0.0123],
            "identified": True,
        }
        for g in groups
        for t in ("armature", "viscous_friction", "friction")
    }
    intervals["calf.friction"] = {
        "estimate": 0.0012,
        "interval95": [1.611e-41, 6.998e39],
        "identified": False,
        "reason": "the log does not excite it",
    }
    decoupled = {
        "note": "each joint fitted alone",
        "rmse": 0.0041,
        "per_joint_rmse": {j: 0.0041 + 1e-5 * k for k, j in enumerate(joints)},
        "groups": {
            g: {t: e[t] * 1.1 for t in ("armature", "friction", "damping")} for g, e in groups.items()
        },
        "delay_steps": 2,
    }
    return {
        "kind": "robot",
        "verdict": _go2_verdict(joints),
        "bounds": {"at_bound": [{"term": "hip.armature", "value": 0.5, "bound": "upper", "limit": 0.5}]},
        "validation": {
            "split": "time",
            "fraction": 0.3,
            "split_time_s": 1.4,
            "replay": "coupled",
            "rmse": 0.0026963,
            "model_defaults_rmse": 0.01254,
            "model_defaults": "the MJCF's terms",
            "per_joint_rmse": per_joint,
            "model_defaults_per_joint_rmse": {j: 0.01254 for j in joints},
            "decoupled_fit": decoupled,
        },
        "encoder_bias": {j: -0.0008371 for j in joints},
        "groups": groups,
        "intervals": intervals,
        "identifiability": {"method": "Gauss-Newton covariance", "warnings": []},
        "delay_steps": 2,
        "delay": "scanned",
        "sim": {"dt": 0.00125, "decimation": 4},
        "gains": "from the log",
        "joint_mapping": "by name",
        "training": {"jacobians": 3, "stopped_on": "budget"},
        "world_steps_per_s": 10183.0,
        "wall_s": 61.8,
        "replays": {
            "part": {"duration_s": 0.6, "what": "the last 30 %"},
            "ours": {"rmse": 0.0026963},
            "definition": "relative difference",
            "consumers": {
                "isaaclab": {
                    "status": "ok",
                    "rmse_replay": 0.0027,
                    "relative_difference": 0.01,
                    "within_tolerance": True,
                }
            },
        },
        "exports": {},
        "assumptions": ["rigid links"],
    }


def test_interval_text_reads_not_identified_when_it_spans_decades() -> None:
    assert interval_text(0.1, 0.2) == "[0.1, 0.2]"
    assert interval_text(-0.5, 0.7, 0.1) == "[-0.5, 0.7]"
    for lo, hi, est in (
        (1.611e-41, 6.998e39, 0.0012),
        (1e-3, 2.0, None),
        (-3e6, 1.0, None),
        (-5e3, 5e3, 1.0),
    ):
        assert interval_text(lo, hi, est).startswith("not identified"), (lo, hi, est)
    assert interval_text(1e4, 1.1e4, 1.05e4) == "[1e+04, 1.1e+04]"  # a large, tight value stays a number
