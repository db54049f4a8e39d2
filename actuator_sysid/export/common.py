"""What every exporter shares: the chosen model per joint, the test-bench load, findings and unit factors.

A fit result names several fitted families per joint; each exporter picks one per joint (the caller's
choice, else the best-ranked one the consumer can express) and reads its parameters under the registry's
Isaac Lab names, SI units (consumer-semantics §A.1, §C.3, §D).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..datasets.recording import JointInfo, Recording
from ..models.families import NET_FAMILIES, Family, get_family

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


def joint_family(result: dict, joint: str, name: str) -> Family:
    """The fitted family `name` of `joint` with the joint terms it was fitted with."""
    jr = result["joints"][joint]
    if name not in jr["models"]:
        raise ExportError(f"joint {joint!r} has no fitted {name!r} model; fitted: {sorted(jr['models'])}")
    if name in NET_FAMILIES:
        held = ("newton.onnx (Isaac Lab has no GRU actuator)" if name == "gru" else
                "torchscript.pt, newton.onnx, newton.pt2 and ACTUATORS_NET in isaaclab.py")
        raise ExportError(f"joint {joint!r}: {name!r} is an actuator network; its exports are {held} (fit a "
                          "parametric family for the others)")
    fam = get_family(name)
    terms = jr["models"][name].get("joint_terms")
    return fam.with_terms(tuple(terms)) if terms is not None else fam


def export_family(result: dict, joint: str, families: dict[str, str] | str | None = None,
               expresses: Callable[[Family], bool] | None = None) -> str:
    """The family an export writes for a joint: the caller's (`families[joint]`, or one family for all joints),
    else the best-ranked fitted family the consumer holds exactly (`expresses`), else the best model: a fit
    of a family the consumer can run beats a richer fit cut down to what it can run."""
    named = families if isinstance(families, str) else (families or {}).get(joint)
    if named:
        return named
    jr = result["joints"][joint]
    best = jr["best_model"]
    if expresses is not None and (best in NET_FAMILIES or not expresses(joint_family(result, joint, best))):
        for row in jr.get("ranking") or []:
            name = row["family"]
            if name in jr["models"] and name not in NET_FAMILIES and expresses(joint_family(result, joint, name)):
                return name
    return best


def substitutions(result: dict, models: list, consumer: str, prefix: str) -> list[Finding]:
    """A finding per joint whose best model the consumer cannot hold, so that its export writes another fit."""
    out = []
    for m in models:
        jr = result["joints"][m.joint]
        best = jr["best_model"]
        if not isinstance(m, ChosenModel) or m.family.name == best:
            continue
        rmse = {r["family"]: r.get("position_rmse") for r in jr.get("ranking") or []}
        gap = (f" (validation position RMSE {rmse[m.family.name]:.3g} rad against {rmse[best]:.3g})"
               if rmse.get(best) and rmse.get(m.family.name) else "")
        out.append(Finding(f"{prefix}.best_model_not_expressible", "warning", m.joint,
                           f"the best model, {best}, is not one {consumer} can hold exactly: this export writes "
                           f"{m.family.name}, the best-ranked fit it holds{gap}; choose the family with "
                           f"--family {m.joint}={best} to export the best model approximated"))
    return out


def choose(result: dict, families: dict[str, str] | str | None = None,
           expresses: Callable[[Family], bool] | None = None) -> list[ChosenModel]:
    """One model per joint, the family `export_family` picks."""
    out = []
    for joint, jr in result["joints"].items():
        name = export_family(result, joint, families, expresses)
        fam = joint_family(result, joint, name)
        model = jr["models"][name]
        out.append(ChosenModel(joint, fam, dict(model["params"]), model.get("table_positions")))
    return out


def physics_dt(result: dict) -> float:
    """The physics step the fit assumed [s]."""
    return float(result.get("assumptions", {}).get("physics_dt", 0.005))


def bench_loads(result: dict, rec: Recording | None = None,
                loads: dict[str, dict] | None = None) -> dict[str, JointInfo]:
    """The test-bench load of each fitted joint: from `loads`, the recording, or the result itself.

    The standalone Newton stage and MuJoCo model simulate this load (a pendulum, q = 0 hanging down).
    """
    out: dict[str, JointInfo] = {}
    for joint, jr in result["joints"].items():
        given = (loads or {}).get(joint) or jr.get("load")
        if given is not None:
            keys = set(JointInfo.__dataclass_fields__)
            out[joint] = JointInfo(**{"name": joint, **{k: v for k, v in given.items() if k in keys and k != "name"}})
        elif rec is not None and joint in rec.joint_names:
            out[joint] = rec.joints[rec.joint_index(joint)]
        else:
            raise ExportError(f"the test-bench load of joint {joint!r} is unknown: pass the recording (CLI: --log) "
                              "or target a robot USD (--robot)")
    return out


def load_dict(info: JointInfo) -> dict:
    """A JSON-ready load description."""
    return {k: v for k, v in asdict(info).items() if k != "name"}
