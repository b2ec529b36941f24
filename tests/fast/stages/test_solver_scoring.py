"""The solver stage arithmetic and failure analysis on plain data (no Docker, no Dagster)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from endless_assets.models import KeepRule, pass_at_curve, score_task
from endless_assets.stages.attempts import current_columns
from endless_assets.store.columns import frame
from endless_assets.store.failure_modes import FAILURE_MODES, analysis_columns, failure_mode
from endless_assets.store.schemas import SolverRollouts


def turn(kind="command", command="ls", output="", exit_code=0, **extra):
    return {"kind": kind, "command": command, "output": output, "exit_code": exit_code, **extra}


def test_the_curve_is_pass_at_k_for_every_k_and_monotone():
    assert pass_at_curve(4, 1) == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert pass_at_curve(4, 0) == [0.0] * 4
    assert pass_at_curve(0, 0) == []
    curve = pass_at_curve(16, 3)
    assert curve == sorted(curve) and curve[0] == pytest.approx(3 / 16) and curve[-1] == 1.0


def test_a_task_score_ignores_harness_errors_instead_of_counting_them_as_failures():
    rows = [
        {"reward": 1, "n_turns": 4},
        {"reward": 0, "n_turns": 16},
        {"reward": None, "n_turns": 1},
        {"reward": 1, "n_turns": 6},
    ]
    score = score_task(rows)
    assert (score.attempts, score.harness_errors, score.scored_attempts, score.successes) == (
        4,
        1,
        3,
        2,
    )
    assert score.pass_rate == pytest.approx(2 / 3) and score.pass_at_n == 1.0
    assert score.mean_turns_solved == 5.0
    empty = score_task([{"reward": None, "n_turns": 0}])
    assert (empty.scored_attempts, empty.pass_rate, empty.curve, empty.mean_turns_solved) == (
        0,
        0.0,
        [],
        None,
    )


def test_the_keep_band():
    band = KeepRule(min_pass_rate=0.1, max_pass_rate=0.9)
    assert band.decide(16, 8) == (True, "")
    assert band.decide(16, 16)[1].startswith("too_easy")
    assert band.decide(16, 1)[1].startswith("too_hard")
    assert band.decide(16, 0)[1].startswith("unsolved")
    assert "pass rate in [0.1, 0.9]" in band.describe()
    assert KeepRule().describe() == "solved at least once"
    with pytest.raises(ValueError):
        KeepRule(min_pass_rate=0.8, max_pass_rate=0.2)


@pytest.mark.parametrize(
    ("reward", "termination", "loop", "turns", "invalid", "mode"),
    [
        (None, "harness_error", False, 3, 0, "harness_error"),
        (1, "done", True, 16, 0, "solved"),
        (0, "turn_limit", True, 16, 8, "unparsable"),
        (0, "turn_limit", True, 16, 2, "loop"),
        (0, "turn_limit", False, 16, 0, "turn_exhaustion"),
        (0, "time_limit", False, 5, 0, "time_limit"),
        (0, "context_limit", False, 9, 0, "context_limit"),
        (0, "done", False, 4, 1, "wrong_done"),
    ],
)
def test_each_failure_mode(reward, termination, loop, turns, invalid, mode):
    assert failure_mode(reward, termination, loop, turns, invalid) == mode
    assert mode in FAILURE_MODES


def test_analysis_columns_from_a_stored_trajectory():
    trajectory = [
        turn(command="ls", output="a\n"),
        turn(command="make", output="error\n", exit_code=2),
        turn("invalid", command="", exit_code=None),
        turn(command="sleep 99", exit_code=None, timed_out=True, folded_turns=1),
        turn(command="cat big", output="x" * 10, truncated=True, folded_turns=1),
        turn("done", command="", exit_code=None),
    ]
    columns = analysis_columns(trajectory, "done", 0)
    assert columns == {
        "loop_detected": False,
        "command_diversity": 1.0,
        "turn_exhausted": False,
        "commands": 4,
        "invalid_turns": 1,
        "command_timeouts": 1,
        "truncated_outputs": 1,
        "folded_turns": 1,
        "failure_mode": "wrong_done",
    }


def test_rows_written_before_the_failure_analysis_columns_are_completed_on_reuse():
    old = {
        "task_id": "et-1",
        "batch": "2026-01-01",
        "rollout_idx": 0,
        "policy": "chat",
        "model": "m",
        "reward": 0,
        "termination": "turn_limit",
        "n_turns": 3,
        "trajectory": json.dumps([turn(command="cat x", output="no", exit_code=1)] * 3),
        "messages": "[]",
        "verdict": "failed",
        "error": "",
        "tokens_in": 1,
        "tokens_out": 1,
        "seconds": 1.0,
        "loop_detected": True,
        "command_diversity": 1 / 3,
        "created_at": None,
    }
    row = current_columns(old)
    assert row["failure_mode"] == "loop" and row["turn_exhausted"] and row["commands"] == 3
    assert row["prompt_version"] == ""
    row["created_at"] = datetime.now(UTC)
    SolverRollouts.validate(frame("solver_rollouts", [row]))
