"""Failure analysis and the pass@k estimator."""

from __future__ import annotations

import itertools
from math import comb

import duckdb
import pytest

from endless_assets.models import KeepRule, pass_at_k
from endless_assets.store.failure_modes import (
    FAILURE_MODES,
    Step,
    command_diversity,
    failure_mode,
    failure_mode_sql,
    loop_detected,
)


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


def test_the_failure_mode_rule_gives_the_same_mode_in_python_and_in_sql():
    """The stats views classify rollout rows stored before the failure_mode column existed with
    the SQL compiled from the one rule table: on every combination of the columns it reads, it
    names the mode the Python rule names (an old row's missing invalid_turns counts 0)."""
    grid = list(
        itertools.product(
            [None, 0, 1],
            ["harness_error", "done", "turn_limit", "time_limit", "context_limit", "error"],
            [False, True],
            [0, 1, 4],
            [0, 1, 2, None],
        )
    )
    con = duckdb.connect()
    con.execute(
        "create table solver_rollouts (reward integer, termination varchar, "
        "loop_detected boolean, n_turns integer, invalid_turns integer, i integer)"
    )
    con.executemany(
        "insert into solver_rollouts values (?, ?, ?, ?, ?, ?)",
        [(*row, i) for i, row in enumerate(grid)],
    )
    in_sql = con.execute(f"select {failure_mode_sql()} from solver_rollouts order by i").fetchall()
    in_python = [failure_mode(r, t, loop, n, invalid or 0) for r, t, loop, n, invalid in grid]
    assert [mode for (mode,) in in_sql] == in_python
    assert set(in_python) == set(FAILURE_MODES)


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
