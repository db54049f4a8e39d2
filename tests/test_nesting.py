"""Model selection starts a richer family from a nested family's optimum: that point must be exact.

For every pair the fitter treats as nested, the child at `nested_start(parent, child, p)` must compute the
same trajectory as the parent at p, on a log where clamps, friction and delay all act.
"""

from __future__ import annotations

import numpy as np
import pytest
from export_helpers import MISFIT, short_recording

from actuator_sysid.fitting.fit import nested_start, nests, params_array
from actuator_sysid.fitting.space import SearchSpace
from actuator_sysid.models.families import FAMILIES
from actuator_sysid.models.rollout import RolloutEngine, SegmentBatch

PAIRS = [(p, c) for c in FAMILIES for p in FAMILIES if nests(FAMILIES[p], FAMILIES[c])]


def parent_values(name: str) -> dict[str, float]:
    """Values that make every term of the parent act: the test log's misfit, else the middle of the range."""
    family = FAMILIES[name]
    space = SearchSpace.for_family(family)
    middle = dict(zip(space.names, space.from_unit(np.full(space.dim, 0.5)), strict=True))
    return {n: float(MISFIT.get(n, middle[n])) for n in family.params}


@pytest.fixture(scope="module")
def engine() -> RolloutEngine:
    rec = short_recording(joints=["hinge"])
    return RolloutEngine(SegmentBatch.from_recording(rec, ["hinge"]))


def test_the_nested_pairs_are_the_expected_ones() -> None:
    assert {
        ("ideal_pd", "delayed_pd"),
        ("delayed_pd", "pid"),
        ("delayed_pd", "remotized_pd"),
        ("dcmotor", "dcmotor_delay"),
        ("dcmotor_stribeck_load", "dcmotor_directional_load"),
    } <= set(PAIRS)
    assert ("ideal_pd", "dcmotor") not in PAIRS and ("ideal_pd", "implicit") not in PAIRS


@pytest.mark.parametrize(("parent", "child"), PAIRS)
def test_the_child_at_the_nested_start_computes_what_the_parent_did(
    parent: str, child: str, engine: RolloutEngine
) -> None:
    p = parent_values(parent)
    x = nested_start(FAMILIES[parent], FAMILIES[child], p)
    assert x is not None and set(x) == set(FAMILIES[child].params)
    a = engine.traces(FAMILIES[parent], params_array(FAMILIES[parent], [p]))
    b = engine.traces(FAMILIES[child], params_array(FAMILIES[child], [x]))
    span = float(np.ptp(a["q"]))
    assert span > 0.1
    np.testing.assert_allclose(b["q"], a["q"], rtol=0, atol=1e-6 * span)
