"""Failure analysis and the pass@k estimator."""

from __future__ import annotations

from math import comb

import pytest

from endless_assets.agent.analysis import Step, command_diversity, loop_detected
from endless_assets.stages.filtering import KeepRule, pass_at_k


def steps(*items):
    return [Step(c, o, e) for c, o, e in items]


def test_same_command_three_times_with_same_observation_is_a_loop():
    trajectory = steps(
        ("ls", "a\n", 0), ("cat x", "no\n", 1), ("ls  ", "a\n", 0), (" ls", "a\n", 0)
    )
    assert loop_detected(trajectory)


def test_repeating_a_command_while_state_changes_is_not_a_loop():
    trajectory = steps(("wc -l f", "1\n", 0), ("wc -l f", "2\n", 0), ("wc -l f", "3\n", 0))
    assert not loop_detected(trajectory)


def test_a_repeated_cycle_is_a_loop():
    cycle = [("cd /a", "", 0), ("make", "error 2\n", 2)]
    trajectory = steps(*(cycle * 3))
    assert loop_detected(trajectory)
    assert not loop_detected(steps(*(cycle * 2)))


def test_command_diversity_counts_from_the_first_failure():
    trajectory = steps(("ls", "", 0), ("make", "e", 2), ("make", "e", 2), ("vi x", "", 0))
    assert command_diversity(trajectory) == pytest.approx(2 / 3)
    assert command_diversity(steps(("ls", "", 0))) is None


@pytest.mark.parametrize(("n", "c"), [(16, 0), (16, 1), (16, 5), (16, 16), (3, 2)])
def test_pass_at_k_matches_the_definition(n, c):
    for k in range(1, n + 1):
        expected = 1 - comb(n - c, k) / comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_impossible_arguments():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_keep_rule():
    assert KeepRule().decide(16, 1) == (True, "")
    assert KeepRule().decide(16, 0)[1].startswith("unsolved")
    assert KeepRule().decide(0, 0)[1].startswith("no_scored_attempts")
    assert KeepRule(max_pass_rate=0.9).decide(4, 4)[1].startswith("too_easy")
