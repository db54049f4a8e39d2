"""A rich family's two search starts: the one not kept is replayed on the validation recordings and reported
beside the kept one, with a warning when the training data barely choose between them (fitting/starts.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actuator_sysid.fitting.starts import NEAR_START_LOSS, START_DISAGREEMENT, start_disagreement

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "bam-xl330" / "processed"


@pytest.mark.unit
def test_near_training_losses_that_validate_apart_are_warned_about() -> None:
    msg = start_disagreement(
        {"dcmotor": 0.0110, "warm start": 0.00937}, {"dcmotor": 0.0557, "warm start": 0.1385}, "warm start"
    )
    assert msg is not None
    assert "dcmotor" in msg and "0.0557" in msg and "0.139" in msg and "17 % worse" in msg


@pytest.mark.unit
@pytest.mark.parametrize(
    ("losses", "validation"),
    [
        ({"a": 1.0, "b": 1.0 + NEAR_START_LOSS + 0.01}, {"a": 0.05, "b": 0.20}),  # b trained clearly worse
        ({"a": 1.0, "b": 1.01}, {"a": 0.05, "b": 0.05 * START_DISAGREEMENT * 0.99}),  # they validate alike
        ({"a": 1.0, "b": 1.01}, {"a": 0.05, "b": None}),  # b has no validation error
        ({"a": 1.0, "b": 1.01}, {"b": 0.20}),  # nor has the kept one
    ],
)
def test_no_warning_when_training_tells_them_apart_or_validation_does_not(
    losses: dict[str, float], validation: dict[str, float | None]
) -> None:
    assert start_disagreement(losses, validation, "a") is None


@pytest.mark.slow
def test_a_real_fit_reports_both_starts_on_the_held_out_kp() -> None:
    """BAM's XL330 logs, kp = 800 held out: dcmotor_directional_load is searched from dcmotor's optimum and from
    the warm start. Both are replayed on the kp = 800 files; the kept one's figure is the fit's own validation
    error, and the warning follows the rule from the figures the result states."""
    files = sorted(DATA.glob("*.json"))
    if not files:
        pytest.skip(f"the BAM XL330 logs are not here ({DATA.resolve()} has no *.json)")
    from actuator_sysid.datasets.readers import read_paths
    from actuator_sysid.fitting.fit import FitRequest, fit_result
    from actuator_sysid.fitting.verdict import judge

    rec = read_paths([DATA])
    result = fit_result(rec, FitRequest(families=["dcmotor_directional_load"], holdout="kp=800", seed=2))
    model = result.joints["xl330"].models["dcmotor_directional_load"]
    search = dict(model.search or {})
    starts, validation = search["starts"], search["starts_validation"]
    assert set(validation) == set(starts) == {"dcmotor", "warm start"}
    kept = search["started_from"]
    assert starts[kept] == min(starts.values())  # training loss chose, as before
    assert model.metrics.validation is not None
    assert validation[kept] == pytest.approx(model.metrics.validation.position_mae, rel=1e-9)
    other = next(s for s in starts if s != kept)
    # the nested parent's own fit, replayed alone, is not the other start (that one has the rich terms)
    assert validation[other] != pytest.approx(validation[kept], rel=1e-3)
    warned = [w for w in model.warnings if "barely choose between two optima" in w]
    expected = start_disagreement({kept: model.loss, other: starts[other]}, validation, kept)
    assert bool(warned) == (expected is not None)
    # a real disagreement: the nested start's optimum validates at 0.042-0.046 rad, the warm start's at 0.057.
    # Whether their training losses (0.0129 against 0.0135) fall within the rule's 5 %, and which trains lower,
    # depends on the machine's floating point (4.9 % on one AMD EPYC, 5.1 % on another), so the warning is
    # checked against the rule above and the start kept against the training losses
    assert max(validation.values()) > 1.08 * min(validation.values())
    # the verdict names it: usable if that family is the one exported, else an ok-status note on its rank
    checks = [c for c in judge(result, rec).checks if c.check == "rival_optima"]
    joint = result.joints["xl330"]
    status = "usable" if joint.best_model == "dcmotor_directional_load" else "ok"
    assert [c.status for c in checks] == ([status] if warned else [])
    assert not warned or "dcmotor_directional_load" in checks[0].reason
