"""Failure analysis of one trajectory (the definitions: docs/solver.md): `loop_detected` (one
normalized command 3+ times with the same observation, or a block of 2-4 steps repeated back to
back 3 times), `command_diversity` (unique / total commands from the first failing one; null when
none failed) and one `failure_mode` per rollout, the first of `FAILURE_RULES` that applies (the
stats views run the same rule compiled to SQL: `failure_mode_sql`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SPACE = re.compile(r"\s+")
REPEAT_THRESHOLD = 3
MAX_CYCLE = 4


@dataclass(frozen=True)
class Step:
    command: str
    output: str
    exit_code: int | None
    timed_out: bool = False


def normalize(command: str) -> str:
    return _SPACE.sub(" ", command.strip())


def _key(step: Step) -> tuple[str, str, int | None]:
    return normalize(step.command), step.output, step.exit_code


def loop_detected(steps: Sequence[Step]) -> bool:
    observations: dict[str, set[tuple[str, int | None]]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    for step in steps:
        cmd = normalize(step.command)
        counts[cmd] += 1
        observations[cmd].add((step.output, step.exit_code))
    if any(counts[c] >= REPEAT_THRESHOLD and len(observations[c]) == 1 for c in counts):
        return True
    keys = [_key(s) for s in steps]
    for period in range(2, MAX_CYCLE + 1):
        span = period * REPEAT_THRESHOLD
        for start in range(0, len(keys) - span + 1):
            window = keys[start : start + span]
            if len(set(window[:period])) > 1 and all(
                window[i] == window[i + period] for i in range(span - period)
            ):
                return True
    return False


def command_diversity(steps: Sequence[Step]) -> float | None:
    first_failure = next(
        (i for i, s in enumerate(steps) if s.timed_out or (s.exit_code not in (0,))), None
    )
    if first_failure is None:
        return None
    tail = [normalize(s.command) for s in steps[first_failure:]]
    return len(set(tail)) / len(tail)


@dataclass(frozen=True)
class Is:
    """A column of a `solver_rollouts` row holds a value (None: the column is null)."""

    column: str
    value: str | int | bool | None

    def holds(self, row: Mapping[str, Any]) -> bool:
        got = row[self.column]
        return got is None if self.value is None else got == self.value

    def sql(self) -> str:
        if self.value is None:
            return f"{self.column} is null"
        if isinstance(self.value, bool):
            return f"{self.column} = {str(self.value).lower()}"
        if isinstance(self.value, int):
            return f"{self.column} = {self.value}"
        return f"{self.column} = '{self.value}'"


@dataclass(frozen=True)
class HalfOrMore:
    """A count column is at least half of a non-zero total (a null count is 0)."""

    count: str
    total: str

    def holds(self, row: Mapping[str, Any]) -> bool:
        return bool(row[self.total]) and (row[self.count] or 0) * 2 >= row[self.total]

    def sql(self) -> str:
        return f"{self.total} > 0 and coalesce({self.count}, 0) * 2 >= {self.total}"


# The failure-mode rule, declared once: the first mode any of whose conditions holds, else
# FALLBACK_MODE. `failure_mode` applies it to a rollout as it is scored; `failure_mode_sql`
# compiles it for the stats views, which classify rows stored before the column existed.
FAILURE_RULES: tuple[tuple[str, tuple[Is | HalfOrMore, ...]], ...] = (
    ("harness_error", (Is("reward", None), Is("termination", "harness_error"))),
    ("solved", (Is("reward", 1),)),
    ("unparsable", (HalfOrMore("invalid_turns", "n_turns"),)),
    ("loop", (Is("loop_detected", True),)),
    ("turn_exhaustion", (Is("termination", "turn_limit"),)),
    ("time_limit", (Is("termination", "time_limit"),)),
    ("context_limit", (Is("termination", "context_limit"),)),
)
FALLBACK_MODE = "wrong_done"
FAILURE_MODES = (*(mode for mode, _ in FAILURE_RULES), FALLBACK_MODE)


def failure_mode(
    reward: int | None, termination: str, loop: bool, turns: int, invalid_turns: int
) -> str:
    row = {
        "reward": reward,
        "termination": termination,
        "loop_detected": loop,
        "n_turns": turns,
        "invalid_turns": invalid_turns,
    }
    return next(
        (mode for mode, any_of in FAILURE_RULES if any(c.holds(row) for c in any_of)),
        FALLBACK_MODE,
    )


def failure_mode_sql() -> str:
    """The rule as a SQL expression over a `solver_rollouts` row."""
    whens = "\n".join(
        f"    when {' or '.join(c.sql() for c in any_of)} then '{mode}'"
        for mode, any_of in FAILURE_RULES
    )
    return f"case\n{whens}\n    else '{FALLBACK_MODE}' end"


def analysis_columns(
    trajectory: Sequence[Mapping[str, Any]], termination: str, reward: int | None
) -> dict[str, Any]:
    """The failure-analysis columns of a `solver_rollouts` row, from its trajectory."""
    steps = [
        Step(
            str(t.get("command", "")),
            str(t.get("output", "")),
            t.get("exit_code"),
            bool(t.get("timed_out", False)),
        )
        for t in trajectory
        if t.get("kind") == "command"
    ]
    invalid = sum(1 for t in trajectory if t.get("kind") == "invalid")
    loop = loop_detected(steps)
    return {
        "loop_detected": loop,
        "command_diversity": command_diversity(steps),
        "turn_exhausted": termination == "turn_limit",
        "commands": len(steps),
        "invalid_turns": invalid,
        "command_timeouts": sum(1 for s in steps if s.timed_out),
        "truncated_outputs": sum(1 for t in trajectory if t.get("truncated")),
        "folded_turns": max((int(t.get("folded_turns", 0) or 0) for t in trajectory), default=0),
        "failure_mode": failure_mode(reward, termination, loop, len(trajectory), invalid),
    }
