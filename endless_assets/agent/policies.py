"""Policies decide the next action from what the agent has seen.

The episode loop is the same for all of them: `reset` with the task, then `act` with each
observation until the policy says done or a limit is reached.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Literal, Protocol

ActionKind = Literal["command", "done", "invalid"]


@dataclass
class Action:
    kind: ActionKind
    command: str = ""
    thought: str = ""
    raw: str = ""  # the model's reply as received (chat policies)
    error: str = ""  # why an invalid reply was invalid
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    folded_turns: int = 0  # earlier turns folded into a summary in the request (chat policies)
    finish_reason: str = ""  # the server's, for chat policies ("stop", "length", ...)


@dataclass
class EpisodeTask:
    task_id: str
    instruction: str
    reference_solution: str = ""


class Policy(Protocol):
    name: str
    model: str
    prompt_version: str  # hash of the prompts a chat policy uses; "" for the others

    def reset(self, task: EpisodeTask) -> None: ...

    def act(self, observation: str | None) -> Action: ...

    def messages(self) -> list[dict[str, Any]]: ...


def solution_command(script: str) -> str:
    """Run a bash script as one shell command (a heredoc with an unguessable delimiter)."""
    delimiter = "ENDLESS_SOLUTION_" + secrets.token_hex(6)
    return f"bash <<'{delimiter}'\n{script.rstrip()}\n{delimiter}"


class OraclePolicy:
    """Runs the task's reference solution as a single command, then declares done."""

    name = "oracle"
    model = "reference-solution"
    prompt_version = ""

    def __init__(self) -> None:
        self._task: EpisodeTask | None = None
        self._step = 0

    def reset(self, task: EpisodeTask) -> None:
        self._task = task
        self._step = 0

    def act(self, observation: str | None) -> Action:
        assert self._task is not None
        self._step += 1
        if self._step == 1 and self._task.reference_solution.strip():
            return Action("command", command=solution_command(self._task.reference_solution))
        return Action("done")

    def messages(self) -> list[dict[str, Any]]:
        return []


class NoopPolicy:
    """Does nothing: the completion test must fail after its episode."""

    name = "noop"
    model = "noop"
    prompt_version = ""

    def reset(self, task: EpisodeTask) -> None:
        pass

    def act(self, observation: str | None) -> Action:
        return Action("done")

    def messages(self) -> list[dict[str, Any]]:
        return []
