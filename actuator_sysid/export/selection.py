"""What every exporter shares: the chosen model per joint, the test-bench load, findings and unit factors.

A fit result names several fitted families per joint; each exporter picks one per joint (the caller's
choice, else the best-ranked one the consumer can express) and reads its parameters under the registry's
Isaac Lab names, SI units (docs/consumer-semantics.md §A.1, §C.3, §D).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TypeVar

from ..datasets.names import NAME_RULE, name_problem, quote_name
from ..datasets.recording import JointInfo, Recording
from ..fitting.result import FitResult, Interval, ModelFit, ResultLike, as_result
from ..models.families import NET_FAMILIES, RICH_FRICTION_TERMS, Family, get_family

T = TypeVar("T")
DEG_PER_RAD = 180.0 / math.pi
RAD_PER_DEG = math.pi / 180.0


class ExportError(ValueError):
    """A result that cannot be exported as asked (unknown joint or family, a cfg that fails validation)."""


@dataclass(frozen=True)
class Finding:
    """One validation finding: a rule code, how bad, where (prim path, joint or cfg group) and why."""

    code: str
    severity: str  # "error" | "warning" | "info"
    where: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.severity.upper():7} {self.code:<34} {self.where}: {self.message}"


@dataclass
class ChosenModel:
    """The family and fitted values one exporter writes for one joint."""

    joint: str
    family: Family
    params: dict[str, float]
    table_positions: list[float] | None = None
    notes: list[str] = field(default_factory=list)

    def value(self, name: str) -> float | None:
        """A fitted value, or None when this family does not fit it (or it is not finite)."""
        if name not in self.family.params:
            return None
        v = self.params.get(name)
        return float(v) if v is not None and math.isfinite(float(v)) else None


def joint_family(result: ResultLike, joint: str, name: str) -> Family:
    """The fitted family `name` of `joint` with the joint terms it was fitted with."""
    jr = as_result(result).joints[joint]
    if name not in jr.models:
        raise ExportError(f"joint {joint!r} has no fitted {name!r} model; fitted: {sorted(jr.models)}")
    if name in NET_FAMILIES:
        held = (
            "newton.onnx (Isaac Lab has no GRU actuator)"
            if name == "gru"
            else "torchscript.pt, newton.onnx, newton.pt2 and ACTUATORS_NET in isaaclab.py"
        )
        raise ExportError(
            f"joint {joint!r}: {name!r} is an actuator network; its exports are {held} (fit a "
            "parametric family for the others)"
        )
    fam = get_family(name)
    terms = jr.models[name].joint_terms
    return fam.with_terms(tuple(terms)) if terms is not None else fam


def export_family(
    result: ResultLike,
    joint: str,
    families: dict[str, str] | str | None = None,
    expresses: Callable[[Family], bool] | None = None,
) -> str:
    """The family an export writes for a joint: the caller's (`families[joint]`, or one family for all joints),
    else the best-ranked fitted family the consumer holds exactly (`expresses`), else the best model: a fit
    of a family the consumer can run beats a richer fit cut down to what it can run."""
    named = families if isinstance(families, str) else (families or {}).get(joint)
    if named:
        return named
    r = as_result(result)
    jr = r.joints[joint]
    best = jr.best_model
    if expresses is not None and (best in NET_FAMILIES or not expresses(joint_family(r, joint, best))):
        for row in jr.ranking:
            name = row.family
            if name in jr.models and name not in NET_FAMILIES and expresses(joint_family(r, joint, name)):
                return name
    return best


def substitutions(result: ResultLike, models: list, consumer: str, prefix: str) -> list[Finding]:
    """A finding per joint whose best model the consumer cannot hold, so that its export writes another fit."""
    out = []
    typed = as_result(result)
    for m in models:
        jr = typed.joints[m.joint]
        best = jr.best_model
        if not isinstance(m, ChosenModel) or m.family.name == best:
            continue
        rmse = {r.family: r.position_rmse for r in jr.ranking}
        gap = (
            f" (validation position RMSE {rmse[m.family.name]:.3g} rad against {rmse[best]:.3g})"
            if rmse.get(best) and rmse.get(m.family.name)
            else ""
        )
        out.append(
            Finding(
                f"{prefix}.best_model_not_expressible",
                "warning",
                m.joint,
                f"the best model, {best}, is not one {consumer} can hold exactly: this export writes "
                f"{m.family.name}, the best-ranked fit it holds{gap}; choose the family with "
                f"--family {m.joint}={best} to export the best model approximated",
            )
        )
    return out


def choose(
    result: ResultLike,
    families: dict[str, str] | str | None = None,
    expresses: Callable[[Family], bool] | None = None,
) -> list[ChosenModel]:
    """One model per joint, the family `export_family` picks."""
    out = []
    r = as_result(result)
    for joint, jr in r.joints.items():
        name = export_family(r, joint, families, expresses)
        fam = joint_family(r, joint, name)
        model = jr.models[name]
        out.append(ChosenModel(joint, fam, dict(model.params), model.table_positions))
    return out


def physics_dt(result: ResultLike) -> float:
    """The physics step the fit assumed [s]."""
    return float(as_result(result).assumptions.physics_dt)


def bench_loads(
    result: ResultLike, rec: Recording | None = None, loads: dict[str, dict] | None = None
) -> dict[str, JointInfo]:
    """The test-bench load of each fitted joint: from `loads`, the recording, or the result itself.

    The standalone Newton stage and MuJoCo model simulate this load (a pendulum, q = 0 hanging down).
    """
    out: dict[str, JointInfo] = {}
    for joint, jr in as_result(result).joints.items():
        given = (loads or {}).get(joint) or jr.load
        if given is not None:
            keys = set(JointInfo.__dataclass_fields__)
            out[joint] = JointInfo(
                **{"name": joint, **{k: v for k, v in given.items() if k in keys and k != "name"}}
            )
        elif rec is not None and joint in rec.joint_names:
            out[joint] = rec.joints[rec.joint_index(joint)]
        else:
            raise ExportError(
                f"the test-bench load of joint {joint!r} is unknown: pass the recording (CLI: --log) "
                "or target a robot USD (--robot)"
            )
    return out


def load_dict(info: JointInfo) -> dict:
    """A JSON-ready load description."""
    return {k: v for k, v in asdict(info).items() if k != "name"}


# --- what an export may claim: unidentified parameters, user-given values, rounding, joint names, provenance ---

UNIDENTIFIED_MODES = ("omit", "comment")
# parameters whose consumer default is "no such limit / no such term" (registry neutral: 0 or ∞): an
# unidentified one is left out, so the consumer's default applies, only where that default is the model the fit
# validated (default_fits); the others (gains, the DC envelope, the delay, ki, the torque table) are required by the
# consumer's class and are written with a loud comment instead
OMITTABLE = frozenset(
    {
        "actuator_effort_limit",
        "armature",
        "friction",
        "dynamic_friction",
        "viscous_friction",
        "integral_max",
        "encoder_offset",
        *RICH_FRICTION_TERMS,
    }
)


def parse_assignments(items: list[str] | str | None, what: str = "--set") -> dict[str, float]:
    """`actuator_effort_limit=0.6` (or `knee/actuator_effort_limit=0.6`, comma-separated or repeated) → dict."""
    from ..models import parameters

    if not items:
        return {}
    parts = [x.strip() for item in ([items] if isinstance(items, str) else items) for x in item.split(",")]
    names = {p.name for p in parameters.PARAMS}
    out: dict[str, float] = {}
    for item in (p for p in parts if p):
        key, sep, value = item.partition("=")
        name = key.strip().rpartition("/")[2]
        if not sep or name not in names:
            raise ExportError(
                f"{what} takes [JOINT/]PARAMETER=VALUE with a registry parameter name "
                f"(docs/models.md), got {item!r}"
            )
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise ExportError(f"{what} {key.strip()} must be a number, got {value.strip()!r}") from None
    return out


def parse_rename(items: list[str] | str | None) -> dict[str, str]:
    """`pendulum=elbow_joint` (comma-separated or repeated) → {"pendulum": "elbow_joint"}."""
    if not items:
        return {}
    parts = [x.strip() for item in ([items] if isinstance(items, str) else items) for x in item.split(",")]
    out: dict[str, str] = {}
    for item in (p for p in parts if p):
        old, sep, new = (s.strip() for s in item.partition("="))
        if not sep or not old or not new:
            raise ExportError(f"--rename takes FIT_JOINT=ROBOT_JOINT, got {quote_name(item)}")
        out[old] = check_rename(new)
    return out


def check_rename(new: object) -> str:
    """A rename target (a robot joint name every export then writes) under the name rule (datasets/names.py):
    ExportError (the CLI's message, the service's 422) naming the character otherwise."""
    problem = name_problem(new)
    if problem is not None:
        raise ExportError(f"--rename target {quote_name(new)}: {problem}; a joint name has {NAME_RULE}")
    return str(new)


def round_to_interval(value: float, estimate: float, interval: list[float] | None) -> float:
    """`value` with the digits its 95 % interval supports: down to a tenth of the half-width (relative to
    the estimate, so a value scaled to another operating point keeps its relative precision)."""
    if not interval or not math.isfinite(value) or value == 0 or not estimate:
        return value
    half = abs(interval[1] - interval[0]) / 2 * abs(value / estimate)
    if not math.isfinite(half) or half <= 0:
        return value
    rounded = round(value, 1 - math.floor(math.log10(half)))
    return rounded if rounded != 0 else value


def _reason(iv: Interval) -> str:
    return str(iv.reason or "the fit does not determine it")


AT_END = (
    1e-3  # an estimate this close to an end of its search range (unit coordinate, as searched) sits there
)


def _unit(p, value: float) -> float:
    """A value's place in its parameter's search range, 0 … 1, in the scale the search moves in (log or linear)."""
    if p.scale == "log" and value > 0 and p.lower > 0:
        return (math.log(value) - math.log(p.lower)) / (math.log(p.upper) - math.log(p.lower))
    return (value - p.lower) / (p.upper - p.lower)


def default_fits(name: str, iv: Interval | dict) -> bool:
    """Whether the consumer's default (the registry's neutral value: no limit, no term) is the model the fit
    validated: the fit does not depend on the parameter (a limit never pressed, a term never acting), or its
    estimate itself sits at the searched end where the default lies (∞ for a limit, the lowest value for a
    term). An estimate inside the range is written, flagged NOT IDENTIFIED, even where its 95 % interval
    reaches the default: its sloppy partners keep their fitted values, and the default alone would export a
    model that was never validated."""
    from ..models import parameters

    iv = iv if isinstance(iv, Interval) else Interval.from_json(iv)
    reason = str(iv.reason or "")
    if "never presses" in reason or "never reaches" in reason:
        return True
    p = parameters.get(name)
    if iv.estimate is None or not math.isfinite(float(iv.estimate)):
        return False
    u = _unit(p, float(iv.estimate))
    if math.isinf(p.neutral):
        return u >= 1.0 - AT_END
    return p.neutral == 0.0 and u <= AT_END


def _prepared_model(
    joint: str, model: ModelFit, unidentified: str, given: dict[str, float], used: set[str]
) -> ModelFit:
    """One model as an export states it (see prepare); the user-given keys it took are added to `used`."""
    params = dict(model.params)
    flagged: dict[str, dict] = {}
    gave: dict[str, float] = {}
    for name in list(params):
        key = f"{joint}/{name}" if f"{joint}/{name}" in given else name if name in given else None
        iv = model.intervals.get(name)
        if key is not None:
            params[name] = int(round(given[key])) if name == "delay" else float(given[key])
            gave[name] = params[name]
            used.add(key)
        elif iv is not None and not iv.identified:
            omit = unidentified == "omit" and name in OMITTABLE and default_fits(name, iv)
            why = (
                ""
                if unidentified == "comment"
                else " (the consumer requires a value)"
                if name not in OMITTABLE
                else " (the consumer's default is not the model validated: its partners keep their values)"
            )
            flagged[name] = {
                "reason": _reason(iv),
                "estimate": params[name],
                "action": "omitted: the consumer's default applies"
                if omit
                else "written: NOT IDENTIFIED, the fit's estimate" + why,
            }
            if omit:
                del params[name]
        elif iv is not None and iv.interval95 and name != "delay" and isinstance(params[name], int | float):
            params[name] = round_to_interval(
                float(params[name]), float(iv.estimate or params[name]), iv.interval95
            )
    return replace(model, params=params, unidentified=flagged, given=gave)


def prepare(
    result: ResultLike,
    *,
    unidentified: str = "omit",
    given: dict[str, float] | None = None,
    rename: dict[str, str] | None = None,
    rec: Recording | None = None,
) -> FitResult:
    """The result as an export may state it: each model's unidentified parameters (intervals' `identified`)
    left out where the consumer has a default (`omit`, the default; `comment` writes the estimate, flagged),
    user-given values (`given`, [joint/]name → value) in their place, identified values rounded to their
    intervals, joints renamed. Each model gets `unidentified` {name: {reason, estimate, action}} and `given`."""
    if unidentified not in UNIDENTIFIED_MODES:
        raise ExportError(f"unidentified must be one of {list(UNIDENTIFIED_MODES)}, got {unidentified!r}")
    from ..models import parameters

    r = as_result(result)
    given = dict(given or {})
    names = {p.name for p in parameters.PARAMS}
    bad = [k for k in given if k.rpartition("/")[2] not in names]
    if bad:
        raise ExportError(
            f"--set {', '.join(bad)}: name a registry parameter (docs/models.md), e.g. "
            "actuator_effort_limit=0.6 or knee/actuator_effort_limit=0.6"
        )
    rename = {str(j): check_rename(new) for j, new in (rename or {}).items()}
    unknown = [j for j in rename if j not in r.joints]
    unknown += [k.partition("/")[0] for k in given if "/" in k and k.partition("/")[0] not in r.joints]
    if unknown:
        raise ExportError(f"unknown joint(s) {sorted(set(unknown))}: the fit has {sorted(r.joints)}")
    used: set[str] = set()
    joints = {
        joint: replace(
            jr,
            models={
                name: _prepared_model(joint, m, unidentified, given, used) for name, m in jr.models.items()
            },
        )
        for joint, jr in r.joints.items()
    }
    missing = sorted(set(given) - used)
    if missing:
        raise ExportError(
            f"--set {', '.join(missing)}: no fitted model of the named joint(s) has that parameter"
        )
    if not rename:
        return replace(r, joints=joints)
    if rec is not None:  # the bench load travels with the joint, under its new name
        for joint in rename:
            if joint in rec.joint_names and not joints[joint].has("load"):
                joints[joint] = replace(joints[joint], load=load_dict(rec.joints[rec.joint_index(joint)]))
    a = r.assumptions
    return replace(
        r,
        joints={rename.get(j, j): v for j, v in joints.items()},
        renamed=rename,
        assumptions=replace(
            a, operating_point=_renamed(a.operating_point, rename), gain_units=_renamed(a.gain_units, rename)
        ),
    )


def _renamed(table: Mapping[str, T] | None, rename: dict[str, str]) -> Mapping[str, T] | None:
    """A per-joint table under the new joint names (anything else as it is)."""
    if table is None:
        return None
    return {rename.get(str(j), str(j)): v for j, v in table.items()}


def unidentified_notes(
    result: ResultLike,
    families: dict[str, str] | str | None = None,
    expresses: Callable[[Family], bool] | None = None,
    with_best: bool = False,
) -> list[str]:
    """One line per unidentified or user-given parameter of each joint's exported model (after `prepare`);
    with_best: the joint's best model too (isaaclab.py's ACTUATORS_BEST)."""
    lines = []
    r = as_result(result)
    for joint, jr in r.joints.items():
        try:
            names = [export_family(r, joint, families, expresses)]
        except ExportError:
            continue
        if with_best and not families and jr.best_model not in names:
            names.append(jr.best_model)
        for name in names:
            model = jr.models.get(name)
            if model is None:
                continue
            for p, u in (model.unidentified or {}).items():
                est = f"; estimate {u['estimate']:.4g}" if u["action"].startswith("written") else ""
                lines.append(f"NOT IDENTIFIED {joint} {name}.{p} ({u['action']}{est}): {u['reason']}")
            for p, v in (model.given or {}).items():
                lines.append(f"GIVEN {joint} {name}.{p} = {v:g} (set by the user, not fitted)")
    return lines


def provenance(result: ResultLike, info: dict | None = None) -> dict:
    """Where an export comes from: fit id and dataset where known, the date of the fit (`fitted`, UTC: a
    re-export states the fit's date, not the day it is rendered), each joint's validation error, the verdict, and
    the physics dt and decimation its delays count in."""
    r = as_result(result)
    info = {**(r.origin or {}), **(info or {})}
    errors = {}
    for joint, jr in r.joints.items():
        best = jr.best_model
        model = jr.models.get(best)
        rmse = model.metrics.validation.position_rmse if model and model.metrics.validation else None
        torque = model.torque_error("validation") if model is not None else None
        if jr.ranked_by() == "torque_rmse" and model is not None and torque is not None:
            errors[joint] = {"family": best, "torque_rmse_nm": float(f"{torque:.4g}")} | {
                k: float(f"{v:.4g}")
                for k in ("torque_mae", "torque_r2", "torque_rmse_of_range")
                if (v := model.torque_error("validation", k)) is not None
            }
        elif isinstance(rmse, int | float):
            errors[joint] = {"family": best, "position_rmse_rad": float(f"{rmse:.4g}")}
    ds = r.dataset or {}
    verdict = info.pop("verdict", None) or (r.verdict.to_json() if r.verdict else None) or {}
    out = {
        "tool": "actuator-sysid",
        "fit_id": info.pop("fit_id", None) or r.fit_id,
        "dataset": info.pop("dataset", None)
        or {k: ds[k] for k in ("source_format", "joints", "segments", "duration_s") if k in ds}
        or None,
        "fitted": r.fitted_on,
        "validation_error": errors or None,
        "verdict": verdict.get("verdict", "not judged"),
        "verdict_reasons": [
            r for c in verdict.get("checks", []) if c["status"] != "ok" for r in [c["reason"]]
        ],
        "physics_dt_s": float(f"{physics_dt(r):.6g}"),
        "decimation": int(r.assumptions.decimation or 1),
        "delay_unit": "physics steps of physics_dt_s",
        **info,
    }
    if r.renamed:
        out["renamed_joints"] = r.renamed
    return {k: v for k, v in out.items() if v is not None}


def provenance_lines(prov: dict) -> list[str]:
    """The provenance as comment lines."""
    ds = prov.get("dataset")
    ds_text = ds if isinstance(ds, str) else ", ".join(f"{k} {v}" for k, v in (ds or {}).items())
    errors = prov.get("validation_error") or {}
    err = (
        "; ".join(
            f"{j}: {e['family']} "
            + (
                f"torque RMSE {e['torque_rmse_nm']:g} N·m"
                + (
                    f" ({e['torque_rmse_of_range']:.1%} of the torque range)"
                    if "torque_rmse_of_range" in e
                    else ""
                )
                + (f", MAE {e['torque_mae']:g} N·m" if "torque_mae" in e else "")
                + (f", R² {e['torque_r2']:.3f}" if "torque_r2" in e else "")
                if "torque_rmse_nm" in e
                else f"{e['position_rmse_rad']:g} rad"
            )
            for j, e in errors.items()
        )
        or "none computed"
    )
    what = (
        "validation error"
        if any("torque_rmse_nm" in e for e in errors.values())
        else "validation position RMSE"
    )
    lines = [
        f"actuator-sysid export · fit {prov.get('fit_id', 'unknown')} · dataset {ds_text or 'unknown'} · "
        f"fitted {prov['fitted']}",
        f"{what}: {err} · verdict: {str(prov['verdict']).upper()}",
        *(f"  verdict reason: {r}" for r in prov.get("verdict_reasons", [])),
        f"physics dt {prov['physics_dt_s']:g} s, decimation {prov['decimation']}: delays count physics steps",
    ]
    if prov.get("renamed_joints"):
        lines.append("joints renamed: " + ", ".join(f"{a} -> {b}" for a, b in prov["renamed_joints"].items()))
    return lines


def stamp(fmt: str, text: str, prov: dict, notes: list[str]) -> str:
    """The export with its provenance and unidentified/given parameters stated: comments (.py, .yaml, .usda,
    .xml) and, in .json and .yaml, `provenance` and `unidentified` keys."""
    import json

    lines = provenance_lines(prov) + notes
    if fmt.endswith(".json"):
        doc = json.loads(text)
        if isinstance(doc, dict):
            return json.dumps({"provenance": prov, "unidentified": notes, **doc}, indent=2) + "\n"
        return text
    if fmt.endswith(".yaml"):
        import yaml

        head = "".join(f"# {comment_line(line)}\n" for line in lines)
        return (
            head
            + yaml.safe_dump(
                {"provenance": prov, "unidentified": notes}, sort_keys=False, allow_unicode=True, width=110
            )
            + text
        )
    return prepend_comment(fmt, text, lines)


def comment_line(text: object, xml: bool = False) -> str:
    """`text` as one line of a comment, whatever it holds: every control, format or line-separator character
    (a newline would end the comment and start code) written as its escape, e.g. \\n or \\u2028; xml: no
    `--` and no trailing `-` either (they end an XML comment or make it invalid)."""
    out = "".join(
        repr(ch)[1:-1] if unicodedata.category(ch) in _UNSAFE_IN_COMMENT else ch for ch in str(text)
    )
    if xml:
        while "--" in out:
            out = out.replace("--", "–")
        if out.endswith("-"):
            out += " "
    return out


_UNSAFE_IN_COMMENT = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def prepend_comment(fmt: str, text: str, lines: list[str]) -> str:
    """`lines` as a comment at the top of an export (.py, .yaml, .usda, .xml): after an XML declaration or the
    #usda header, which must stay first. Each line stays one comment line whatever it holds (comment_line)."""
    if fmt.endswith(".xml"):
        body = "\n       ".join(comment_line(line, xml=True) for line in lines)
        comment = f"<!-- {body} -->\n"
        if text.startswith("<?xml"):
            head, _, rest = text.partition("\n")
            return head + "\n" + comment + rest
        return comment + text
    if fmt.endswith(".usda"):
        head, _, rest = text.partition("\n")
        return head + "\n" + "".join(f"# {comment_line(line)}\n" for line in lines) + rest
    return "".join(f"# {comment_line(line)}\n" for line in lines) + text
