"""HTML pages of the service: dashboard, dataset, compare, fleet, error and login pages (the page shell is
templating.py's, a fit's own page its kind's: kinds.py).

Each page is a Jinja2 template of service/templates/ (autoescaped; templating.py); this module gathers what
a page shows and builds its Plotly figures as dicts, which the templates' `plots` macro draws. The CSS and JS
are files in service/static/, inlined, so a page (and a standalone report) loads no external assets (Plotly
is served from /static)."""

from __future__ import annotations

import functools
import json
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..datasets.quality import commands_only
from ..files import json_safe
from ..fitting.request import BOUNDS
from ..fitting.result import FitResult, as_result
from ..models import parameters
from .kinds import FitKind, kind_of
from .runs import run_rows
from .templating import fmt_num as fmt_num  # re-exported: the tests format cells with it
from .templating import num_text, render, static_text
from .templating import script_json as script_json
from .templating import status_html as status_html

DOCS_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}


def docs_asset_path(name: str) -> Path | None:
    """A Swagger UI / ReDoc file shipped by the installed fastapi-offline package, so /docs works offline."""
    if name not in DOCS_ASSETS:
        return None
    return Path(str(resources.files("fastapi_offline") / "static" / name))


REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"  # ReDoc's footer image, hard-coded in its bundle


@functools.cache
def docs_asset_bytes(name: str) -> bytes | None:
    """A docs asset's bytes; ReDoc's bundle with its footer logo pointed at our own favicon, so /redoc asks
    nothing of a CDN."""
    path = docs_asset_path(name)
    if path is None:
        return None
    data = path.read_bytes()
    return (
        data.replace(REDOC_CDN_LOGO.encode(), FAVICON_URL.encode()) if name == "redoc.standalone.js" else data
    )


FAVICON_URL = "/favicon.ico"  # public (auth.PUBLIC_PATHS): the login page and ReDoc ask for it


def favicon_svg() -> str:
    """The site's icon (static/favicon.svg): the pages inline it, /favicon.ico serves it."""
    return static_text("favicon.svg")


_NOT_PAGES = ("/api/", "/openapi", "/metrics", "/healthz", "/static/")


def wants_html(path: str, accept: str) -> bool:
    """An error on a page route asked for by a browser (Accept names text/html) is answered with a page;
    API routes, and clients that do not ask for HTML, keep the JSON problem."""
    return not path.startswith(_NOT_PAGES) and "text/html" in accept


def render_error(status: int, detail: str) -> str:
    """An HTML error page: what was not found (or went wrong) and where to go from here."""
    title = {404: "Not found", 401: "Not logged in", 409: "Conflict", 422: "Not a valid request"}.get(
        status, "Error"
    )
    return render(
        "error.html", title=f"{status} {title}", nav=True, status=status, heading=title, detail=detail
    )


DEFAULT_MODELS = ("dcmotor", "dcmotor_delay", "delayed_pd")  # ticked in the form: a DC motor with and without
# delay, and the plain delayed PD — the families most logs need; the rest are one tick away
PRESETS = {  # the form's quick presets: budget fields and families (None: keep what is ticked)
    "quick": {"generations": 40, "population": 8, "seconds": 30, "models": ["dcmotor", "delayed_pd"]},
    "standard": {"generations": 200, "population": 16, "seconds": "", "models": list(DEFAULT_MODELS)},
    "thorough": {"generations": 600, "population": 32, "seconds": 900, "models": None},
}


def _form(families: list[str], defaults: dict) -> dict[str, Any]:
    """What the fit form (the fit_settings macro) needs: every field POST /api/v1/fits takes."""
    return {
        "families": families,
        "defaults": defaults,
        "ticked": DEFAULT_MODELS,
        "presets": PRESETS,
        "bounds": BOUNDS,  # the request's own bounds (fitting/request.py), so the form and the API agree
    }


def render_index(
    datasets: list[dict],
    fits: list[dict],
    families: list[str],
    defaults: dict,
    counts: dict[str, int] | None = None,
    models: list[tuple[str, int]] | None = None,
) -> str:
    """The dashboard: counts, upload form, datasets (start fit, delete) and the runs table (live progress, sort,
    filter, compare)."""
    names = {d["id"]: d["name"] for d in datasets}
    return render(
        "index.html",
        title="actuator-sysid",
        nav=True,
        datasets=datasets,
        fits=fits,
        runs=run_rows(fits, names),
        names=names,
        models=models or [],
        cards=[("datasets", len(datasets)), *(counts or {}).items()],
        warnings=[all_warnings(d["summary"]) for d in datasets],
        **_form(families, defaults),
    )


def _downsample(n: int, limit: int = 2000) -> slice:
    return slice(None, None, max(1, -(-n // limit)))


def all_warnings(summary: dict) -> list[str]:
    """A dataset's warnings: the reader's and the quality report's, each once."""
    quality = summary.get("quality") or {}
    return list(dict.fromkeys([*summary.get("warnings", []), *(quality.get("warnings") or [])]))


def _pct(v: Any) -> str:
    return f"{100 * v:.0f} %" if isinstance(v, int | float) else "—"


def _range(v: Any, unit: str = "") -> str:
    if not v:
        return "—"
    return f"{num_text(v[0])} … {num_text(v[1])}{(' ' + unit) if unit else ''}"


def _limit_cell(rep: dict | None, unit: str) -> str | dict[str, str]:
    """An effort or velocity plateau: the peak, the limit and where it comes from, time spent at it
    ({"muted": ...}: a cell the table macro greys out)."""
    if not rep:
        return {"muted": "not logged"}
    text = f"max |·| {num_text(rep.get('max_abs'))} {unit}"
    if rep.get("limit"):
        text += (
            f"; limit {num_text(rep['limit'])} {unit} ({rep.get('limit_source') or ''}), "
            f"at it {_pct(rep.get('fraction_at_limit'))} of the time"
        )
    else:
        text += "; no plateau"
    return text


_SEG_META = ("kp", "kd", "vin", "trajectory", "gain_units", "recording")


def _segment_meta(meta: dict) -> list[str | None]:
    """A segment's metadata cells: the gains, supply and trajectory (BAM keeps the trajectory under "bam");
    None where absent (a greyed dash)."""
    bam = meta.get("bam")
    nested: dict = bam if isinstance(bam, dict) else {}
    values = [meta.get(k, nested.get(k)) for k in _SEG_META]
    return [num_text(v) if v is not None else None for v in values]


def _quality(summary: dict, rec: Any) -> dict[str, Any]:
    """The quality report the upload computed, as the dataset page's tables: per joint ranges, band and
    plateaus; per segment timing, free swing and metadata."""
    q = summary.get("quality") or {}
    joints = [
        [
            name,
            _range(j.get("q_range"), "rad"),
            f"{num_text((j.get('velocity') or {}).get('max_abs'))} "
            f"(p95 {num_text((j.get('velocity') or {}).get('p95_abs'))})",
            _pct((j.get("velocity") or {}).get("fraction_near_zero")),
            _range(j.get("excitation_band_hz"), "Hz"),
            _limit_cell(j.get("effort"), "N·m"),
            _limit_cell(j.get("velocity_limit"), "rad/s"),
        ]
        for name, j in (q.get("joints") or {}).items()
    ]
    metas = {s.name: s.metadata for s in rec.segments}
    segments = [
        [
            str(s.get("name")),
            num_text(s.get("samples")),
            num_text(s.get("duration_s")),
            num_text(s.get("rate_hz")),
            "yes" if s.get("free_swing") else "no",
            _pct(s.get("driven_fraction")),
            num_text(s.get("gap_before_s")),
            *_segment_meta(metas.get(s.get("name"), {})),
        ]
        for s in q.get("segments") or []
    ]
    free = q.get("free_swing_segments") or []
    gaps = q.get("gaps") or {}
    facts = [
        ("rate [Hz]", num_text(q.get("rate_hz"))),
        ("duration [s]", num_text(q.get("duration_s"))),
        ("free-swing segments", ", ".join(free) if free else "none"),
        ("time gaps", f"{gaps.get('count', 0)} (longest {num_text(gaps.get('longest_s', 0.0))} s)"),
        ("samples dropped", num_text(q.get("samples_dropped", 0))),
        ("effort logged in every segment", "yes" if q.get("has_effort") else "no"),
    ]
    return {
        "facts": facts,
        "joints": joints,
        "segments": segments,
        "joint_head": [
            "joint",
            "q range",
            "|qd| max [rad/s]",
            "nearly still",
            "excitation band",
            "effort plateau",
            "velocity plateau",
        ],
        "segment_head": [
            "segment",
            "samples",
            "duration [s]",
            "rate [Hz]",
            "free swing",
            "driven",
            "gap before [s]",
            "kp",
            "kd",
            "vin [V]",
            "trajectory",
            "gain units",
            "recording",
        ],
    }


def _plotted(x: np.ndarray) -> np.ndarray:
    """Plot data at 1 µ-unit resolution (µs, µrad, µN·m): far below a pixel, and a third of the page's bytes."""
    return np.round(np.asarray(x, dtype=np.float64), 6)


MAX_SEGMENT_PLOTS = 40  # segments drawn on the dataset page; the quality tables list every one


# one colour per joint, distinct for up to 20 joints (then they repeat, each joint still named in the legend)
JOINT_COLORS = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
    "#393b79", "#ad494a", "#637939", "#e7ba52", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#843c39",
)  # fmt: skip


# shades per group (dark to light) for a robot's joints grouped by leg or limb: blue, red, green, orange, purple,
# brown, teal, grey
GROUP_SHADES = (
    ("#08519c", "#3182bd", "#6baed6", "#9ecae1"),
    ("#a50f15", "#de2d26", "#fb6a4a", "#fc9272"),
    ("#006d2c", "#31a354", "#74c476", "#a1d99b"),
    ("#a63603", "#e6550d", "#fd8d3c", "#fdae6b"),
    ("#54278f", "#756bb1", "#9e9ac8", "#bcbddc"),
    ("#5b3a1e", "#8c564b", "#b4816f", "#d2ab99"),
    ("#01665e", "#35978f", "#80cdc1", "#a6dbd0"),
    ("#252525", "#636363", "#969696", "#bdbdbd"),
)
MANY_JOINTS = 6  # more joints than this, grouped by their name's first token (a leg), get a hue per group


def joint_colours(names: list[str]) -> list[str]:
    """One colour per joint: distinct colours for a few joints; for many joints whose names group by their first
    token (FL_hip, FL_thigh, ... on a quadruped), one hue per group and a shade per joint in it, so the legend
    and the lines read by leg."""
    groups: dict[str, list[int]] = {}
    for k, n in enumerate(names):
        groups.setdefault(n.split("_", 1)[0] if "_" in n else n, []).append(k)
    grouped = len(names) > MANY_JOINTS and 2 <= len(groups) <= len(GROUP_SHADES)
    if (
        not grouped
        or max(len(v) for v in groups.values()) > len(GROUP_SHADES[0])
        or min(len(v) for v in groups.values()) < 2
    ):
        return [JOINT_COLORS[k % len(JOINT_COLORS)] for k in range(len(names))]
    out = [""] * len(names)
    for g, members in enumerate(groups.values()):
        for shade, k in enumerate(members):
            out[k] = GROUP_SHADES[g][shade]
    return out


def _joint_line(
    t: np.ndarray, y: np.ndarray, joint: str, color: str, dash: str, first: bool, **kw: Any
) -> dict:
    """One joint's trace: its colour, its dash for the quantity, one legend entry per joint (its first trace)."""
    return {
        "x": t,
        "y": _plotted(y),
        "name": joint,
        "legendgroup": joint,
        "showlegend": first,
        "type": "scatter",
        "mode": "lines",
        "line": {"color": color, "dash": dash, "width": 1.3},
        **kw,
    }


def segment_figures(rec: Any) -> list[dict]:
    """Per segment: q (solid) and q_des (dashed), then qd (solid) and, when logged, τ (dotted) on a second axis;
    one colour per joint, one legend entry per joint beside the axes (clicking it hides that joint's lines)."""
    figures = []
    # the legend stands right of the plot (past τ's axis where there is one), never over an axis title
    legend = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1.0, "font": {"size": 11}}
    for k, seg in enumerate(rec.segments[:MAX_SEGMENT_PLOTS]):
        sl = _downsample(seg.n)
        t = _plotted(seg.t[sl])
        pos, vel = [], []
        colours = joint_colours(list(rec.joint_names))
        for j, joint in enumerate(rec.joint_names):
            color = colours[j]
            pos.append(_joint_line(t, seg.q[sl, j], joint, color, "solid", True, hovertemplate="q %{y}"))
            if seg.q_des is not None:
                pos.append(
                    _joint_line(t, seg.q_des[sl, j], joint, color, "dash", False, hovertemplate="q_des %{y}")
                )
            vel.append(_joint_line(t, seg.qd[sl, j], joint, color, "solid", True, hovertemplate="qd %{y}"))
            if seg.tau is not None:
                vel.append(
                    _joint_line(
                        t, seg.tau[sl, j], joint, color, "dot", False, yaxis="y2", hovertemplate="τ %{y}"
                    )
                )
        what = "q solid" + (", q_des dashed" if seg.q_des is not None else "")
        figures.append(
            {
                "id": f"seg-{k}",
                "data": pos,
                "layout": {
                    "title": {
                        "text": f"segment {escape(seg.name)} · position ({what})",
                        "font": {"size": 13},
                    },
                    "xaxis": {"title": {"text": "t [s]"}},
                    "yaxis": {"title": {"text": "q, q_des [rad]"}},
                    "margin": {"t": 40, "l": 60, "r": 20, "b": 40},
                    "legend": legend,
                    "height": 300,
                },
            }
        )
        what = "qd solid" + (", τ dotted" if seg.tau is not None else "")
        layout: dict[str, Any] = {
            "title": {
                "text": f"segment {escape(seg.name)} · velocity"
                + (" and effort" if seg.tau is not None else "")
                + f" ({what})",
                "font": {"size": 13},
            },
            "xaxis": {"title": {"text": "t [s]"}},
            "yaxis": {"title": {"text": "qd [rad/s]"}},
            "margin": {"t": 40, "l": 60, "r": 20, "b": 40},
            "legend": legend,
            "height": 260,
        }
        if seg.tau is not None:
            layout["yaxis2"] = {"title": {"text": "τ [N·m]"}, "overlaying": "y", "side": "right"}
            layout["legend"] = {**legend, "x": 1.12}
        figures.append({"id": f"segv-{k}", "data": vel, "layout": layout})
    return json_safe(figures)


def render_dataset(
    d: dict, rec: Any, fits: list[dict], families: list[str], defaults: dict, robots: list[dict] | None = None
) -> str:
    """A dataset: summary, every warning, the quality report, metadata, q/q_des and qd/τ per segment, its
    fits, fit and delete; a log of a robot (`robots`: the one it was uploaded for, or those whose model has its
    joints) offers the fit through that robot first, the joint-by-joint fit below it."""
    return render(
        "dataset.html",
        title=f"dataset {d['name']}",
        nav=True,
        d=d,
        robots=robots or [],
        plan=commands_only(rec),
        warnings=all_warnings(d["summary"]),
        quality=_quality(d["summary"], rec),
        fits=fits,
        figures=segment_figures(rec),
        shown=MAX_SEGMENT_PLOTS,
        more=len(rec.segments) - MAX_SEGMENT_PLOTS,
        meta=json.dumps(d.get("metadata") or {}, indent=1),
        **_form(families, defaults),
    )


def _typed(fit: dict) -> FitResult | None:
    """A fit's result as records where its kind is comparable (a FitResult of joints); None for no result or a
    kind whose result has another shape."""
    result = fit.get("result")
    return as_result(result) if result and kind_of(fit.get("request")).comparable else None


def _best_params(fit: dict) -> dict[tuple[str, str], tuple[str, Any, list[float] | None]]:
    """(joint, parameter) → (best family, value, its 95 % interval where identified)."""
    out = {}
    for joint, jr in r.joints.items() if (r := _typed(fit)) else ():
        model = jr.models.get(jr.best_model) if jr.best_model else None
        for name, value in model.params.items() if model else ():
            iv = model.intervals.get(name) if model else None
            band = iv.interval95 if iv is not None and iv.identified else None
            out[(joint, name)] = (jr.best_model, value, band)
    return out


def _validation_errors(fa: dict, fb: dict) -> list[tuple[str, dict, dict]]:
    """Each joint's validation errors (position RMSE / MAE) of the best model: (joint, A's, B's)."""

    def errs(f: dict) -> dict[str, dict]:
        out = {}
        for joint, jr in r.joints.items() if (r := _typed(f)) else ():
            model = jr.models.get(jr.best_model) if jr.best_model else None
            val = model.metrics.validation if model else None
            out[joint] = val.to_json() if val is not None else {}
        return out

    ea, eb = errs(fa), errs(fb)
    return [(j, ea.get(j, {}), eb.get(j, {})) for j in sorted(set(ea) | set(eb))]


def _segments_of(plots: dict | None, joint: str) -> dict[str, dict]:
    """One fit's report traces of a joint, by segment name (each with that fit's own split of it)."""
    segs = (((plots or {}).get("joints") or {}).get(joint) or {}).get("segments") or []
    return {str(sg.get("name")): sg for sg in segs}


def _first_validation(segs: dict[str, dict]) -> str | None:
    """The first segment a fit validated on (else its first segment)."""
    return next((n for n, sg in segs.items() if sg.get("split") == "validation"), next(iter(segs), None))


def _trajectory_figures(joints: list[str], pa: dict | None, pb: dict | None) -> list[dict[str, Any]]:
    """Per joint, the first validation segment of each fit: the measurement and each fit's OWN simulation of
    that segment (from its own report traces), each labelled with how that fit used the segment."""
    figures = []
    for j, joint in enumerate(joints):
        fits = (("A", _segments_of(pa, joint), "#d62728"), ("B", _segments_of(pb, joint), "#1f77b4"))
        picks = [n for n in dict.fromkeys(_first_validation(segs) for _l, segs, _c in fits) if n is not None]
        for k, name in enumerate(picks):
            shown = [(label, segs[name], color) for label, segs, color in fits if name in segs]
            measured = shown[0][1]
            data: list[dict[str, Any]] = [
                {
                    "x": measured["t"],
                    "y": measured["q"],
                    "name": "measured",
                    "type": "scatter",
                    "mode": "lines",
                    "line": {"color": "#444"},
                }
            ]
            data += [
                {
                    "x": seg["t"],
                    "y": seg["q_sim"],
                    "name": f"{label} simulated ({label} {'validated on' if seg.get('split') == 'validation' else 'trained on'} it)",
                    "type": "scatter",
                    "mode": "lines",
                    "line": {"color": color, "dash": "dash"},
                    "meta": {"fit": label, "segment": name, "split": seg.get("split")},
                }
                for label, seg, color in shown
            ]
            used = ", ".join(f"{label}: {seg.get('split', '?')}" for label, seg, _c in shown)
            figures.append(
                {
                    "id": f"cmp-q-{j}-{k}",
                    "data": data,
                    "layout": {
                        "title": {"text": f"{escape(joint)} · segment {escape(name)} ({escape(used)})"},
                        "xaxis": {"title": {"text": "time [s]"}},
                        "yaxis": {"title": {"text": "position [rad]"}},
                        "margin": {"t": 40, "l": 60, "r": 20, "b": 40},
                        "legend": {"orientation": "h"},
                    },
                }
            )
    return figures


def _param_rows(fa: dict, fb: dict) -> list[dict[str, Any]]:
    """Best-model parameters of both fits per (joint, parameter), with the relative difference B vs A."""
    ka, kb = _best_params(fa), _best_params(fb)
    rows = []
    for key in sorted(set(ka) | set(kb)):
        va, vb = ka.get(key, (None, None, None)), kb.get(key, (None, None, None))
        diff = "—"
        if isinstance(va[1], int | float) and isinstance(vb[1], int | float) and va[1]:
            diff = f"{100 * (vb[1] - va[1]) / abs(va[1]):+.1f}%"
        rows.append(
            {"joint": key[0], "name": key[1], "unit": parameters.unit(key[1]), "a": va, "b": vb, "diff": diff}
        )
    return rows


def _envelope_figures(joints: list[str], pa: dict | None, pb: dict | None) -> list[dict[str, Any]]:
    """Each joint's torque–speed envelopes of both fits, overlaid."""
    figures = []
    for j, joint in enumerate(joints):
        data = []
        for label, plots, color in (("A", pa, "#d62728"), ("B", pb, "#1f77b4")):
            env = (((plots or {}).get("joints") or {}).get(joint) or {}).get("envelope") or {}
            for side, dash in (("effort_max", "solid"), ("effort_min", "dot")):
                if env.get(side):
                    data.append(
                        {
                            "x": env.get("velocity", []),
                            "y": env[side],
                            "type": "scatter",
                            "mode": "lines",
                            "name": f"{label} {side}",
                            "line": {"color": color, "dash": dash},
                        }
                    )
        if data:
            figures.append(
                {
                    "id": f"cmp-{j}",
                    "data": data,
                    "layout": {
                        "title": {"text": f"{escape(joint)} · torque–speed envelopes"},
                        "xaxis": {"title": {"text": "velocity [rad/s]"}},
                        "yaxis": {"title": {"text": "effort [N·m]"}},
                        "margin": {"t": 40, "l": 60, "r": 20, "b": 40},
                        "legend": {"orientation": "h"},
                    },
                }
            )
    return figures


def incomparable(fa: dict, fb: dict) -> str | None:
    """Why two fits cannot be compared side by side (a whole-robot fit and a joint fit, or two fits of a kind
    that is not comparable, whose results have other shapes; a fit that has not succeeded), or None."""
    unfinished = [
        f"{label} {_ended(f)}"
        for label, f in (("A", fa), ("B", fb))
        if f.get("status", "succeeded") != "succeeded"
    ]
    if unfinished:
        return (
            "; ".join(unfinished)
            + ". Only succeeded fits have parameters and traces to compare: open its page to see why, and retry it "
            "there."
        )
    ka, kb = (kind_of(f.get("request")) for f in (fa, fb))
    if ka is kb and ka.comparable:
        return None
    if ka is not kb:
        return (
            f"A is a {ka.label} fit and B a {kb.label} fit: one fits each joint alone, the other every "
            "actuator through the robot's coupled dynamics, so their parameters, errors and traces cannot "
            "be compared. Open each fit's own page."
        )
    return f"Two {ka.label} fits are compared on their own pages: this page compares joint fits."


def _ended(fit: dict) -> str:
    """How a fit that has not succeeded stands, in words: failed (with its error), cancelled, or still running."""
    status = fit.get("status")
    if status == "failed":
        return f"failed: {fit.get('error') or 'no error was recorded'}"
    if status == "cancelled":
        return "was cancelled"
    return f"is still {status} ({100 * float(fit.get('progress') or 0):.0f} %)"


def _head(fit: dict, kind: FitKind) -> dict[str, Any]:
    """A fit's header on /compare: the split and what was asked, as its kind states them."""
    return {"fit": fit, "split": kind.split_text(fit), "asked": kind.asked_rows(fit)}


def render_compare(a: tuple[dict, dict | None], b: tuple[dict, dict | None]) -> str:
    """Two fits side by side: headers with each fit's split, the validation errors, best-model parameters
    with the relative difference, each fit's own traces and the envelopes overlaid; or why they cannot be."""
    (fa, pa), (fb, pb) = a, b
    heads = [_head(f, kind_of(f.get("request"))) for f in (fa, fb)]
    why = incomparable(fa, fb)
    if why is not None:
        return render(
            "compare.html", title="compare fits", nav=True, heads=heads, why=why, figures=[], params=[]
        )
    joints = sorted(set((pa or {}).get("joints") or {}) | set((pb or {}).get("joints") or {}))
    figures = json_safe(_trajectory_figures(joints, pa, pb) + _envelope_figures(joints, pa, pb))
    same = (fa.get("result") or {}).get("split", {}).get("validation") == (fb.get("result") or {}).get(
        "split", {}
    ).get("validation")
    return render(
        "compare.html",
        title="compare fits",
        nav=True,
        heads=heads,
        why=None,
        same_split=same,
        validation=_validation_errors(fa, fb),
        params=_param_rows(fa, fb),
        figures=figures,
    )


def _fleet_trace(serial: str, pts: list[dict]) -> dict[str, Any]:
    """One serial's values over time, with its 95 % intervals as error bars (none where not identified)."""
    trace: dict[str, Any] = {
        "x": [p["time"] for p in pts],
        "y": [p["value"] for p in pts],
        "name": f"serial {serial}",
        "type": "scatter",
        "mode": "lines+markers",
        "text": [f"{p['fit_id'][:8]} · {p['family']} · {p['joint']}" for p in pts],
    }
    if any(p.get("low") is not None for p in pts):
        trace["error_y"] = {
            "type": "data",
            "symmetric": False,
            "visible": True,
            "array": [p["high"] - p["value"] if p.get("high") is not None else 0 for p in pts],
            "arrayminus": [p["value"] - p["low"] if p.get("low") is not None else 0 for p in pts],
        }
    return trace


def _fleet_marks(pts: list[dict], name: str, marker: dict[str, Any]) -> dict[str, Any]:
    """Points marked apart from the serials' lines (drift, values not identified), as a markers-only trace."""
    return {
        "x": [p["time"] for p in pts],
        "y": [p["value"] for p in pts],
        "name": name,
        "type": "scatter",
        "mode": "markers",
        "marker": marker,
    }


def _fleet_figures(summary: dict) -> list[dict[str, Any]]:
    """Per parameter: every serial's identified values over time (95 % intervals as error bars), the drift marked,
    and the values a log did not identify apart, hollow and grey."""
    flagged = {(w["fit_id"], w["param"], w["joint"]) for w in summary["warnings"]}
    figures: list[dict[str, Any]] = []
    for k, s in enumerate(summary["series"]):
        by_serial: dict[str, list[dict]] = {}
        for p in s["points"]:
            by_serial.setdefault(str(p["serial"] or "?"), []).append(p)
        data: list[dict[str, Any]] = [
            _fleet_trace(serial, [p for p in pts if p.get("identified", True)])
            for serial, pts in sorted(by_serial.items())
            if any(p.get("identified", True) for p in pts)
        ]
        loose = [p for p in s["points"] if not p.get("identified", True)]
        if loose:  # not identified by its log: hollow and grey, off the serials' lines, never drift
            text = [
                f"{p['fit_id'][:8]} · serial {p['serial'] or '?'} · not identified by its log" for p in loose
            ]
            marker = {"size": 9, "symbol": "circle-open", "color": "#999"}
            data.append({**_fleet_marks(loose, "not identified", marker), "text": text})
        bad = [p for p in s["points"] if (p["fit_id"], s["param"], p["joint"]) in flagged]
        if bad:
            marker = {"size": 14, "symbol": "circle-open", "color": "#e0a000", "line": {"width": 3}}
            data.append(_fleet_marks(bad, "drift", marker))
        sources = sorted({p["time_source"] for p in s["points"]})
        unit = f" [{s['unit']}]" if s.get("unit") else ""
        figures.append(
            {
                "id": f"fleet-{k}",
                "data": data,
                "layout": {
                    "title": {
                        "text": f"{escape(s['param'])}{escape(unit)} · {escape(', '.join(s['families']))}"
                    },
                    "height": 300,
                    "xaxis": {"title": {"text": " / ".join(sources) + " (UTC)"}},
                    "yaxis": {"title": {"text": f"{escape(s['param'])}{escape(unit)}"}},
                    "margin": {"t": 40, "l": 60, "r": 20, "b": 40},
                    "legend": {"orientation": "h"},
                },
            }
        )
    return figures


def render_fleet(models: list[tuple[str, int]], summary: dict | None) -> str:
    """The fleet: actuator models, and for one of them every parameter over time per serial, with drift."""
    figures = _fleet_figures(summary) if summary is not None else []
    return render("fleet.html", title="fleet", nav=True, models=models, summary=summary, figures=figures)


def render_login(next_url: str, error: str = "") -> str:
    """The login form: paste an API token; it is kept in an HttpOnly cookie for the pages."""
    return render("login.html", title="log in", nav=False, next_url=next_url, error=error)
