"""The decoupled search splits the robot into blocks that move only their own joints (a leg on a fixed base, or a
joint alone without bias), and keeps the step above the lowest delay when the loss cannot tell them apart."""

from __future__ import annotations

import numpy as np

from actuator_sysid.fitting.robot import Problem, resolve_groups
from actuator_sysid.fitting.robot.search import DELAY_TIE, _pick, lm_blocks

NAMES = [f"{leg}_{part}_joint" for leg in ("FL", "FR") for part in ("hip", "thigh", "calf")]
COMPONENT = np.repeat([0, 1], 3)  # two legs on a fixed base never load each other


def _problem(groups: dict[str, str] | None, fit_bias: bool) -> Problem:
    idx, exprs = resolve_groups(NAMES, groups)
    j = len(NAMES)
    return Problem(
        NAMES,
        idx,
        exprs,
        ["armature", "viscous_friction", "friction"],
        fit_bias,
        np.full(j, 20.0),
        np.full(j, 1.5),
        np.full(j, 23.7),
        COMPONENT,
    )


def test_per_joint_terms_with_bias_make_one_block_per_leg() -> None:
    prob = _problem(None, fit_bias=True)
    blocks = lm_blocks(prob)
    assert [j.tolist() for _, j in blocks] == [[0, 1, 2], [3, 4, 5]]
    for (v, _), leg in zip(blocks, ("FL", "FR"), strict=True):
        names = [prob.var_names[k] for k in v]
        assert len(names) == 3 * 3 + 3 and all(n.startswith(leg) for n in names), names
    # every variable in exactly one block
    assert sorted(np.concatenate([v for v, _ in blocks]).tolist()) == list(range(prob.size))


def test_without_bias_each_joint_is_its_own_block_and_shared_groups_join_the_legs() -> None:
    alone = lm_blocks(_problem(None, fit_bias=False))
    assert [j.tolist() for _, j in alone] == [[k] for k in range(len(NAMES))]
    shared = lm_blocks(_problem({p: f".*_{p}_joint" for p in ("hip", "thigh", "calf")}, fit_bias=True))
    assert len(shared) == 1 and shared[0][1].tolist() == list(range(len(NAMES)))


def test_of_the_lowest_delay_and_the_step_above_it_the_longer_is_kept_when_tied() -> None:
    delays = np.array([0, 1, 2, 3])
    near = 1.0 + 0.5 * DELAY_TIE
    assert (
        _pick(delays, np.array([1.2, 1.0, near, near])) == 2
    )  # the step above the lowest is within DELAY_TIE
    assert _pick(delays, np.array([1.2, 1.0, 1.0 + 2 * DELAY_TIE, near])) == 1  # it is not: the lowest
    assert _pick(delays, np.array([near, 1.0, 1.3, 1.4])) == 1  # a tie below the lowest does not move it
    assert _pick(np.array([5, 2, 3]), np.array([1.0, 1.1, near])) == 0  # no step above 5 among them
    assert _pick(np.array([3, 2]), np.array([near, 1.0])) == 0  # in any order of the problems
