"""The typed fit result (fitting/result.py) reads a stored fit.json and writes it back key for key, in order:
the golden fit, a fit with a network, a device-gains fit and a k-fold fit, each small and seeded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_recording

from actuator_sysid.fitting.fit import FitRequest, fit_recording
from actuator_sysid.fitting.result import FitResult, Interval, JointFit, ModelFit, NetFit, as_result

GOLDEN = Path(__file__).resolve().parent / "golden" / "fit.json"
SMALL = {"generations": 3, "population": 8, "refine_iterations": 10}


def _stored(result: dict) -> dict:
    """The result as fit.json stores it and the database returns it (JSON text, parsed)."""
    return json.loads(json.dumps(result))


def _assert_round_trip(doc: dict) -> FitResult:
    typed = FitResult.from_json(doc)
    back = typed.to_json()
    assert json.dumps(back) == json.dumps(doc)  # same keys, same order, same values and JSON types
    assert FitResult.from_json(back) == typed
    return typed


@pytest.fixture(scope="module")
def net_fit() -> dict:
    rec = make_recording(segments=3, n=120, seed=1)
    return _stored(
        fit_recording(
            rec,
            FitRequest(
                models=["ideal_pd", "mlp"],
                seed=0,
                **SMALL,
                networks={"epochs": 3, "patience": 2, "hidden": [4]},
            ),
        )
    )


def test_golden_fit_round_trips_and_reads_by_attribute() -> None:
    doc = json.loads(GOLDEN.read_text())
    r = _assert_round_trip(doc)
    j1 = r.joints["j1"]
    assert isinstance(j1, JointFit) and j1.best_model == doc["joints"]["j1"]["best_model"]
    best = j1.best
    want = doc["joints"]["j1"]["models"][j1.best_model]
    assert isinstance(best, ModelFit) and not best.is_network
    assert best.params == want["params"] and best.joint_terms == want["joint_terms"]
    assert best.metrics.validation is not None
    assert best.metrics.validation.position_rmse == want["metrics"]["validation"]["position_rmse"]
    assert [s.segment for s in best.metrics.segments] == [s["segment"] for s in want["metrics"]["segments"]]
    iv = best.intervals["stiffness"]
    assert isinstance(iv, Interval) and iv.identified is want["intervals"]["stiffness"]["identified"]
    assert [row.family for row in j1.ranking] == [row["family"] for row in doc["joints"]["j1"]["ranking"]]
    assert (
        r.split.validation == doc["split"]["validation"]
        and r.assumptions.physics_dt == doc["assumptions"]["physics_dt"]
    )
    assert r.verdict is not None and r.verdict.verdict == doc["verdict"]["verdict"]
    assert [c.check for c in r.verdict.checks] == [c["check"] for c in doc["verdict"]["checks"]]
    assert as_result(r) is r and as_result(doc) == r


def test_unknown_and_missing_keys_survive() -> None:
    """A key this version does not name is written back where it stood; a result missing optional keys (an
    older version's) loads with defaults and writes back without them."""
    doc = json.loads(GOLDEN.read_text())
    doc["joints"]["j1"]["models"]["ideal_pd"] = {
        "future_key": [1, 2],
        **doc["joints"]["j1"]["models"]["ideal_pd"],
    }
    doc["joints"]["j1"]["models"]["ideal_pd"]["metrics"]["later"] = {"x": 1}
    doc["split"] = {"train": ["s1"], "validation": ["s0"]}  # older: no method
    doc["budget"] = "unlimited"  # a record's key holding another JSON type is kept as is
    del doc["verdict"]
    r = _assert_round_trip(doc)
    m = r.model("j1", "ideal_pd")
    assert m.extra["future_key"] == [1, 2] and m.metrics.extra["later"] == {"x": 1}
    assert r.verdict is None and r.budget is None and r.split.method is None
    assert r.extra["budget"] == "unlimited" and r.split.validation == ["s0"]
    assert "verdict" not in r.to_json() and "method" not in r.to_json()["split"]


def test_a_network_fit_round_trips(net_fit: dict) -> None:
    r = _assert_round_trip(net_fit)
    jr = r.joints["j1"]
    net = jr.models["mlp"]
    assert isinstance(net, NetFit) and net.is_network and not jr.nets_only()
    assert net.network == net_fit["joints"]["j1"]["models"]["mlp"]["network"]
    assert net.training == net_fit["joints"]["j1"]["models"]["mlp"]["training"]
    assert {row.family for row in jr.ranking} == {"ideal_pd", "mlp"}


def test_a_device_gains_fit_round_trips() -> None:
    rec = make_recording(segments=3, n=120, seed=2)
    rec.metadata["gain_units"] = "device"
    for seg, kp in zip(rec.segments, (100.0, 200.0, 400.0), strict=True):
        seg.metadata["kp"] = kp
    doc = _stored(fit_recording(rec, FitRequest(models=["ideal_pd"], seed=0, **SMALL)))
    r = _assert_round_trip(doc)
    model = r.model("j1", "ideal_pd")
    assert (
        model.device_gains is not None
        and model.device_gains == doc["joints"]["j1"]["models"]["ideal_pd"]["device_gains"]
    )
    assert r.joints["j1"].device_gains == model.device_gains
    assert r.assumptions.gain_units == {"j1": "device"}


def test_a_k_fold_fit_round_trips() -> None:
    rec = make_recording(segments=4, n=120, seed=3)
    doc = _stored(fit_recording(rec, FitRequest(models=["ideal_pd"], folds=2, seed=0, **SMALL)))
    r = _assert_round_trip(doc)
    metrics = r.model("j1", "ideal_pd").metrics
    assert r.split.folds == doc["split"]["folds"] and metrics.folds is not None and len(metrics.folds) == 2
    assert metrics.folds_mean == doc["joints"]["j1"]["models"]["ideal_pd"]["metrics"]["folds_mean"]


def test_exports_read_the_typed_result_as_they_read_the_stored_dict() -> None:
    """Every text export of the golden fit is the same text whether it is handed the stored dict or the typed
    result (the exporters convert at their door)."""
    from actuator_sysid.export import TEXT_FORMATS, render_format

    doc = json.loads(GOLDEN.read_text())
    rec = make_recording(segments=2, n=150, seed=0)  # the golden log (tests/test_golden.py write_log)
    typed = FitResult.from_json(doc)
    for fmt in TEXT_FORMATS:
        assert render_format(typed, rec, fmt) == render_format(doc, rec, fmt), fmt


def _records(rec: object) -> list:
    """Every record inside a record (itself included): fields, mapping values and sequence items."""
    from dataclasses import fields

    from actuator_sysid.fitting.result import Record

    out, todo = [], [rec]
    while todo:
        x = todo.pop()
        if isinstance(x, Record):
            out.append(x)
            todo += [getattr(x, f.name) for f in fields(x) if f.name not in ("extra", "key_order")]
        elif isinstance(x, dict):
            todo += list(x.values())
        elif isinstance(x, tuple):
            todo += list(x)
    return out


@pytest.fixture(scope="module")
def typed_fit() -> FitResult:
    """A fit built as records by the fit itself: a parametric family and a net, on a log with torque."""
    from actuator_sysid.fitting.fit import fit_result

    rec = make_recording(segments=3, n=120, seed=1)
    for seg in rec.segments:
        seg.tau = 0.5 * (seg.q_des - seg.q)
    return fit_result(
        rec,
        FitRequest(
            families=["ideal_pd", "mlp"],
            seed=0,
            **SMALL,
            networks={"epochs": 3, "patience": 2, "hidden": [4]},
        ),
    )


def test_the_fit_builds_the_typed_result(typed_fit: FitResult) -> None:
    """fit_result returns records, not a dict: every key the fit writes is a named field (nothing in `extra`),
    and the records read back from their JSON are the same records, saying `has` alike for every field."""
    jr = typed_fit.joints["j1"]
    param, net = jr.models["ideal_pd"], jr.models["mlp"]
    assert isinstance(param, ModelFit) and not isinstance(param, NetFit) and isinstance(net, NetFit)
    assert param.metrics.validation is not None and param.metrics.segments[0].split in ("train", "validation")
    assert isinstance(param.intervals["stiffness"], Interval) and jr.ranking[0].family in ("ideal_pd", "mlp")
    # the open-loop torque comparison is built into both fits (fitting/training.py add_networks)
    assert param.torque_metrics is not None and net.torque_range is not None
    assert net.comparison is not None and set(net.comparison["torque_rmse"]) == {"network", "parametric"}
    built = _records(typed_fit)
    assert not [type(r).__name__ for r in built if r.extra], "a key the fit writes has no field"
    doc = _stored(typed_fit.to_json())
    stored = FitResult.from_json(doc)
    assert stored == typed_fit
    for a, b in zip(built, _records(stored), strict=True):
        assert type(a) is type(b)
        keys = {f for f in b.key_order}
        assert all(a.has(k) == b.has(k) for k in keys | set(a.to_json())), type(a).__name__
    assert list(doc["joints"]["j1"]["models"]["mlp"])[:5] == [
        "family",
        "isaaclab_cfg",
        "joint_terms",
        "params",
        "network",
    ]


def test_a_built_record_writes_only_the_fields_that_apply() -> None:
    """A record built in code leaves out the fields a fit writes only when they apply (added_for, device_gains,
    the folds, a reason) while unset, and writes the others, unset or not, in the fit's order."""
    from actuator_sysid.fitting.result import Metrics, SplitNames

    m = ModelFit(
        family="ideal_pd", isaaclab_cfg="IdealPDActuatorCfg", joint_terms=[], params={"stiffness": 1.0}
    )
    doc = m.to_json()
    assert list(doc)[:4] == ["family", "isaaclab_cfg", "joint_terms", "params"]
    assert not {"added_for", "device_gains", "table_positions", "tied", "search", "given"} & set(doc)
    assert {"metrics", "loss", "intervals", "correlation", "warnings", "n_params"} <= set(doc)
    assert not m.has("device_gains") and m.has("loss")
    assert "added_for" in ModelFit(family="delayed_pd", added_for=["remotized_pd"]).to_json()
    assert Interval(value=None, estimate=2.0, identified=False).to_json() == {
        "value": None,
        "estimate": 2.0,
        "std_relative": None,
        "interval95": None,
        "identified": False,
    }
    assert set(Metrics().to_json()) == {"train", "validation", "segments"}
    assert set(SplitNames(method="random", train=["a"], validation=["b"]).to_json()) == {
        "method",
        "train",
        "validation",
    }


def test_the_verdict_is_built_as_records() -> None:
    """fitting/verdict.py judges into Verdict and Check records; without the exports' validation the golden
    fit's own checks come out as the stored verdict has them (the export checks aside)."""
    from actuator_sysid.fitting.result import Check, Verdict
    from actuator_sysid.fitting.verdict import fit_verdict, judge

    doc = json.loads(GOLDEN.read_text())
    rec = make_recording(segments=2, n=150, seed=0)  # the golden log (tests/test_golden.py write_log)
    v = judge(doc, rec)
    assert isinstance(v, Verdict) and v.checks and all(isinstance(c, Check) for c in v.checks)
    assert [c.to_json() for c in v.checks if c.check != "exports_unchecked"] == [
        c for c in doc["verdict"]["checks"] if not c["check"].startswith("export")
    ]
    assert fit_verdict(doc, rec) == v.to_json() and list(v.to_json()) == [
        "verdict",
        "reasons",
        "checks",
        "thresholds",
    ]
