"""The whole-robot pages' parts: a robot fit's page (small multiples per joint, the error bars, what coupling
changed), its header's split and asked rows (the fit kind's answers for /compare too), and the robot page's
joint-tree depths. The request checks, queueing and the worker step are in robots.py."""

from __future__ import annotations

import numpy as np

from .db import NotFoundError, Repository
from .report import VERDICT_STYLE
from .robots import RobotFitIn
from .templating import fmt_num, num_text, page, plot_script, plotly_inline, render, status_html


def split_text(fit: dict) -> str:
    """How a robot fit was split: the split its result's validation states or, before it ran, the one its
    request asks for (a robot fit's options stand at the top of its request, as queue_robot_fit stores them)."""
    req = fit.get("request") or {}
    v = (fit.get("result") or {}).get("validation") or {}
    if v.get("split") == "recordings":
        recs = v.get("recordings") or {}
        return f"{recs.get('method')}: recordings {', '.join(recs.get('validation') or [])} validate, whole"
    if v.get("fraction"):
        return (
            f"time split: the last {100 * float(v['fraction']):.0f} % of the log validates, the rest trains"
        )
    if req.get("holdout"):
        return f"holdout {req['holdout']}: those recordings validate, whole (asked)"
    frac = float(req.get("validation_fraction", RobotFitIn.model_fields["validation_fraction"].default))
    return f"time split: the last {100 * frac:.0f} % of the log validates, the rest trains (asked)"


def asked_rows(fit: dict) -> list[tuple[str, str]]:
    """What a robot fit was asked, as header rows: the robot, the budget and every option it set otherwise than
    RobotFitIn's defaults (groups, gains, bias, delay, ...)."""
    req = fit.get("request") or {}
    defaults = RobotFitIn().model_dump()
    options = {k: req[k] for k in sorted(defaults) if k != "budget_s" and k in req and req[k] != defaults[k]}
    return [
        ("kind", "whole-robot fit"),
        ("robot", str(req.get("robot_id") or "")),
        ("budget", f"{num_text(req.get('budget_s'))} s" if req.get("budget_s") else "—"),
        ("options", ", ".join(f"{k}={v}" for k, v in options.items()) or "defaults"),
    ]


def joint_depths(joints: list[dict]) -> list[int]:
    """Each joint's depth in the joint tree (0 at a root), for the page's indentation."""
    index = {j["name"]: k for k, j in enumerate(joints)}
    out: list[int] = []
    for j in joints:
        d, p = 0, j["parent"]
        while p is not None and d < len(joints):
            d, p = d + 1, joints[index[p]]["parent"]
        out.append(d)
    return out


def coupling_change(v: dict) -> dict | None:
    """What coupling changed, from the result's validation: the coupled fit's held-out RMSE over the decoupled
    fit's (both replayed coupled on the same span), overall and on the joint it changed most; None without one."""
    dec = v.get("decoupled_fit")
    if not dec or not v.get("per_joint_rmse"):
        return None
    ratio = {
        n: e / dec["per_joint_rmse"][n]
        for n, e in v["per_joint_rmse"].items()
        if dec["per_joint_rmse"][n] > 0 and e > 0
    }
    # the joint whose error coupling changed by the largest factor, better or worse
    joint = max(ratio, key=lambda n: abs(np.log(ratio[n]))) if ratio else None
    return {
        "coupled": v["rmse"],
        "decoupled": dec["rmse"],
        "ratio": v["rmse"] / dec["rmse"] if dec["rmse"] > 0 else None,
        "joint": joint,
        "joint_ratio": ratio.get(joint) if joint else None,
    }


# a reason in the verdict's summary is cut to about a line; the whole of it is in the list of checks below
REASON_CHARS = 90


def short_reason(text: str, limit: int = REASON_CHARS) -> str:
    """A reason cut to `limit` characters at a word (a list of names cut after a whole name), marked with "…"."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return f"{cut} …"


def verdict_summary(result: dict) -> dict | None:
    """The robot verdict at a glance: its word, the headline figure (the held-out RMSE beside the model file's own
    terms', on the stated split), the worst one or two reasons cut to a line, and every check for the list below."""
    verdict = result.get("verdict")
    if not verdict:
        return None
    checks = [
        {"status": str(c.get("status", "")), "reason": str(c.get("reason", ""))}
        for c in verdict.get("checks") or []
    ] or [{"status": "", "reason": str(r)} for r in verdict.get("reasons") or []]
    worst = [c for c in checks if c["status"] != "ok"][:2] or checks[:1]
    v = result.get("validation") or {}
    if v.get("split") == "recordings":
        names = (v.get("recordings") or {}).get("validation") or []
        span = f"the held-out recording{'s' if len(names) != 1 else ''} {', '.join(names)}"
    else:
        span = f"the last {100 * float(v.get('fraction') or 0):.0f} % of the log in time"
    return {
        "word": str(verdict.get("verdict", "?")),
        "rmse": v.get("rmse"),
        "defaults_rmse": v.get("model_defaults_rmse"),
        "span": span,
        "top": [{"status": c["status"], "reason": short_reason(c["reason"])} for c in worst],
        "checks": checks,
    }


# the small multiples' lines, in the legend above them: (trace key, label, colour, dash)
MULTIPLE_LINES = (
    ("measured", "measured", "#222222", "solid"),
    ("fit", "simulated (fit)", "#d62728", "solid"),
    ("decoupled", "simulated (decoupled fit)", "#1f77b4", "dash"),
    ("model_defaults", "simulated (model file's terms)", "#9aa0a6", "dot"),
)


def _small_multiples(traces: dict) -> list[dict]:
    """One figure per joint on the validation span: measured, the coupled fit, the decoupled fit (when the traces
    have it) and the model file's own terms above, each simulation's residual (simulated − measured) below. One
    legend for all, above the grid (multiple_legend), so no figure gives up its plot to a legend."""
    figs: list[dict] = []
    t = traces.get("t", [])
    for k, (name, tr) in enumerate(traces.get("joints", {}).items()):
        measured = np.asarray(tr.get("measured", []), float)
        data = []
        for key, label, color, dash in MULTIPLE_LINES:
            if key not in tr:
                continue
            line = {"color": color, "width": 1.2, "dash": dash}
            data.append(
                {"x": t, "y": tr[key], "name": label, "mode": "lines", "showlegend": False, "line": line}
            )
            if key != "measured" and len(tr[key]) == len(measured):
                residual = np.round(np.asarray(tr[key], float) - measured, 6)
                data.append(
                    {
                        "x": t,
                        "y": residual.tolist(),
                        "name": f"{label} − measured",
                        "mode": "lines",
                        "yaxis": "y2",
                        "showlegend": False,
                        "line": line,
                    }
                )
        figs.append(
            {
                "id": f"joint-{k}",
                "data": data,
                "layout": {
                    "title": {"text": name, "font": {"size": 12}, "x": 0.02, "xanchor": "left"},
                    "height": 260,
                    "showlegend": False,
                    "margin": {"l": 50, "r": 10, "t": 28, "b": 30},
                    "xaxis": {"title": {"text": "t [s]"}, "anchor": "y2"},
                    "yaxis": {"title": {"text": "q [rad]"}, "domain": [0.4, 1.0]},
                    "yaxis2": {"title": {"text": "residual"}, "domain": [0.0, 0.3], "zeroline": True},
                },
            }
        )
    return figs


def multiple_legend(traces: dict | None) -> list[dict[str, str]]:
    """The small multiples' one legend: each line they draw, with its colour and dash."""
    joints = list(((traces or {}).get("joints") or {}).values())
    keys = set(joints[0]) if joints else set()
    return [{"label": label, "color": c, "dash": d} for key, label, c, d in MULTIPLE_LINES if key in keys]


def joint_rows(result: dict) -> list[dict]:
    """The per-joint table: each joint's group, held-out errors, encoder bias, its group's terms with their
    intervals, and its flags (a term at a search bound, an implausible bias); a term the log did not identify
    is marked, with its reason on hover."""
    v = result.get("validation") or {}
    intervals = result.get("intervals") or {}
    bounds = result.get("bounds") or {}
    at_bound = {e.get("term") for e in bounds.get("at_bound") or []}
    implausible = {w.get("joint") for w in bounds.get("implausible_bias") or []}
    group_of = {j: g for g, e in (result.get("groups") or {}).items() for j in e.get("joints") or []}
    dec = (v.get("decoupled_fit") or {}).get("per_joint_rmse") or {}
    rows = []
    for name, err in (v.get("per_joint_rmse") or {}).items():
        g = group_of.get(name, "")
        group = (result.get("groups") or {}).get(g) or {}
        terms = []
        for term in JOINT_TERMS:
            iv = intervals.get(f"{g}.{term}") or {}
            terms.append(
                {
                    "value": group.get(term),
                    "identified": iv.get("identified", True),
                    "reason": iv.get("reason") or "",
                    "interval": iv.get("interval95"),
                }
            )
        bias_iv = intervals.get(f"{name}.bias") or {}
        flags = [f"{t} at a search bound" for t in sorted(at_bound) if t.startswith(f"{g}.")]
        if name in implausible:
            flags.append("bias beyond a plausible calibration")
        rows.append(
            {
                "joint": name,
                "group": g,
                "rmse": err,
                "decoupled": dec.get(name),
                "defaults": (v.get("model_defaults_per_joint_rmse") or {}).get(name),
                "bias": (result.get("encoder_bias") or {}).get(name),
                "bias_identified": bias_iv.get("identified", True),
                "bias_reason": bias_iv.get("reason") or "",
                "terms": terms,
                "flags": flags,
            }
        )
    return rows


JOINT_TERMS = ("armature", "viscous_friction", "friction")  # the per-joint table's group terms


def _figures(traces: dict, v: dict) -> list[dict]:
    """Small multiples, one per joint, and the per-joint error bars: the coupled fit beside the decoupled fit
    (validation.decoupled_fit, when the result has one) and the model file's terms, grouped per joint."""
    per_joint, defaults = v.get("per_joint_rmse", {}), v.get("model_defaults_per_joint_rmse", {})
    decoupled = (v.get("decoupled_fit") or {}).get("per_joint_rmse")
    names = list(per_joint)
    series = [("coupled fit", per_joint, "#d62728")]
    if decoupled:
        series.append(("decoupled fit (replayed coupled)", decoupled, "#1f77b4"))
    series.append(("model file's joint terms", defaults, "#9aa0a6"))
    errors = {
        "id": "errors",
        "data": [
            {
                "type": "bar",
                "x": names,
                "y": [values.get(n) for n in names],
                "name": label,
                "marker": {"color": color},
            }
            for label, values, color in series
        ],
        "layout": {
            "barmode": "group",
            "height": 320,
            "yaxis": {"title": {"text": "validation RMSE [rad]"}},
            "margin": {"l": 60, "r": 10, "t": 20, "b": 90},
            "legend": {"orientation": "h", "y": 1.12},
        },
    }
    return [*_small_multiples(traces), errors]


def render_robot_fit(
    fit: dict,
    traces: dict | None,
    exports: list[str],
    repo: Repository,
    project: str | None,
    standalone: bool = False,
) -> str:
    """The robot fit page: per-joint small multiples on the validation span, per-joint error bars of the coupled
    fit beside the decoupled fit and the model file's own terms, what coupling changed, the groups with their
    values (and the decoupled fit's), the delay and the encoder bias. `standalone` (the
    report.html of all.zip) inlines Plotly and links the exports beside it."""
    result = fit.get("result") or {}
    v = result.get("validation") or {}
    figs = _figures(traces or {}, v) if result else []
    try:
        robot: dict | None = repo.get_robot(fit["request"]["robot_id"], project)
    except NotFoundError:
        robot = None
    body = render(
        "robot_fit.html",
        fit=fit,
        split=split_text(fit),
        result=result,
        v=v,
        coupling=coupling_change(v) if result else None,
        exports=exports,
        robot=robot,
        figures=figs,
        traces=bool(traces),
        fmt=fmt_num,
        status=status_html,
        standalone=standalone,
        verdict_style=VERDICT_STYLE,
        summary=verdict_summary(result) if result else None,
        joint_rows=joint_rows(result) if result else [],
        joint_terms=JOINT_TERMS,
        legend=multiple_legend(traces),
    )
    plots = plot_script(figs, plotly_inline() if standalone else None)
    return page(f"robot fit {fit['id'][:8]}", body + plots, nav=not standalone)
