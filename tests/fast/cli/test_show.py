"""`endless show`: a task's rollouts, one trajectory turn by turn, its exact chat messages."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from endless_assets.agent.episode import Rollout, Turn
from endless_assets.cli import app
from endless_assets.cli.app import err, out
from endless_assets.stages.rollouts import Attempt
from endless_assets.store.catalog import rebuild_catalog
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake

TASK = "et-0123456789abcdef"
MESSAGES = [
    {"role": "system", "content": "You are an expert Linux user."},
    {"role": "user", "content": "Task: count the [bold]lines[/bold]."},
    {"role": "assistant", "content": "<command>wc -l data.txt</command>"},
    {"role": "user", "content": "3 data.txt\n[exit code: 0]"},
]


def rollout(model: str, reward: int, turns: list[Turn]) -> Rollout:
    return Rollout(TASK, "chat", model, reward, "done", turns=turns, messages=MESSAGES, seconds=2.5)


@pytest.fixture
def lake_env(tmp_path, monkeypatch):
    long_output = "\n".join(f"line {i} [red]not markup[/red]" for i in range(400))
    turns = [
        Turn(0, "command", thought="Count them.", command="wc -l data.txt", output="3 data.txt\n",
             exit_code=0, tokens_in=50, tokens_out=9),
        Turn(1, "invalid", error="the reply has no <command>...</command>", tokens_in=70),
        Turn(2, "command", command="sleep 99", timed_out=True, note="interrupted (SIGINT)"),
        Turn(3, "command", command="cat big.log", output=long_output, exit_code=0,
             truncated=True, original_bytes=123456, folded_turns=2),
        Turn(4, "done"),
    ]  # fmt: skip
    rows = [
        Attempt("2026-02-02", 0, rollout("model-a", 1, turns)).row(),
        Attempt("2026-02-02", 1, rollout("model-a", 0, turns[:1])).row(),
        Attempt("2026-02-02", 0, rollout("model-b", 0, [Turn(0, "done")])).row(),
    ]
    lake = Lake(tmp_path)
    lake.write("solver_rollouts", "2026-02-02", frame("solver_rollouts", rows))
    rebuild_catalog(lake)
    monkeypatch.setenv("ENDLESS_DATA_DIR", str(tmp_path))
    for console in (out, err):  # a wide terminal, whatever runs the test
        monkeypatch.setattr(console, "_width", 160)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, ["show", *args])


def test_without_a_rollout_it_lists_every_attempt(lake_env):
    result = run(TASK)
    assert result.exit_code == 0, result.output
    assert result.output.count("model-a") == 2 and result.output.count("model-b") == 1
    assert "--rollout N" in result.output


def test_a_trajectory_turn_by_turn(lake_env):
    result = run(TASK, "--rollout", "0", "--model", "model-a")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "reward 1 · termination done" in text and "chat/model-a" in text
    assert "turn 1 · command · 50 in / 9 out tokens" in text
    assert "Count them." in text and "$ wc -l data.txt" in text and "exit code 0" in text
    assert "unusable reply: the reply has no <command>...</command>" in text
    assert "timed out (interrupted (SIGINT))" in text
    assert "2 earlier turns folded" in text
    assert "output cut by the harness (123456 bytes in all)" in text
    assert "line 0 [red]not markup[/red]" in text, "outputs are printed literally, not as markup"
    assert "line 399" not in text and "--full shows them" in text
    assert "line 399" in run(TASK, "-r", "0", "--model", "model-a", "--full").output


def test_the_exact_chat_messages(lake_env):
    result = run(TASK, "--rollout", "0", "--model", "model-a", "--messages")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == MESSAGES


def test_mistakes_are_named(lake_env):
    ambiguous = run(TASK, "--rollout", "0")
    assert ambiguous.exit_code == 2 and "several solvers" in ambiguous.output
    assert "chat/model-a, chat/model-b" in ambiguous.output
    missing = run(TASK, "--rollout", "7", "--model", "model-a")
    assert missing.exit_code == 2 and "has no rollout 7 (it has [0, 1])" in missing.output
    unknown = run("et-nope")
    assert unknown.exit_code == 2 and "no rollouts of task 'et-nope'" in unknown.output
