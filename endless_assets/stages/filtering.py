"""Stage IV's arithmetic: the unbiased pass@k estimator, difficulty, and the keep rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from endless_assets.models import Task

# Difficulty labels from a solver's pass rate over its scored attempts (the same thresholds in
# SQL views and in exports): a task every attempt solves is easy, one solved at least once but in
# under a quarter of attempts is hard; never solved is "unsolved" (no label in Harbor terms).
DIFFICULTY_THRESHOLDS: tuple[tuple[str, float], ...] = (("easy", 0.75), ("medium", 0.25))


def difficulty_label(pass_rate: float | None, attempts: int = 1) -> str:
    """easy (>= 0.75), medium (>= 0.25), hard (> 0), unsolved (0), unknown (no scored attempt)."""
    if pass_rate is None or attempts <= 0:
        return "unknown"
    for label, floor in DIFFICULTY_THRESHOLDS:
        if pass_rate >= floor:
            return label
    return "hard" if pass_rate > 0 else "unsolved"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k from n attempts with c successes (Chen et al., 2021)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at_curve(n: int, c: int) -> list[float]:
    """pass@k for every k from 1 to n (element i is pass@(i+1)); empty when n is 0."""
    return [pass_at_k(n, c, k) for k in range(1, n + 1)]


@dataclass(frozen=True)
class TaskScore:
    """One task's attempts by one solver, reduced to what the keep rule and a trainer need, and
    the keep decision (stage IV's part of a `Task`)."""

    attempts: int  # rows for the task (scored or not)
    harness_errors: int
    scored_attempts: int  # attempts - harness_errors: the n of pass@k
    successes: int
    pass_at_n: float  # pass@k with k = n: solved at least once
    curve: list[float]
    pass_rate: float  # successes / scored_attempts = pass@1: the difficulty
    mean_turns_solved: float | None
    solver_model: str = ""  # policy/model, e.g. chat/o3
    solver_policy: str = ""
    kept: bool = False
    drop_reason: str = ""

    @property
    def difficulty(self) -> str:
        return difficulty_label(self.pass_rate, self.scored_attempts)


def score_task(
    rollouts: Sequence[Mapping[str, Any]],
    rule: KeepRule | None = None,
    *,
    solver_model: str = "",
    solver_policy: str = "",
) -> TaskScore:
    """Score a task from its `solver_rollouts` rows (reward null = harness error, not 0) and
    decide whether `rule` keeps it."""
    scored = [r for r in rollouts if r["reward"] is not None]
    solved = [r for r in scored if r["reward"] == 1]
    n, c = len(scored), len(solved)
    kept, reason = (rule or KeepRule()).decide(n, c)
    return TaskScore(
        attempts=len(rollouts),
        harness_errors=len(rollouts) - n,
        scored_attempts=n,
        successes=c,
        pass_at_n=pass_at_k(n, c, n) if n else 0.0,
        curve=pass_at_curve(n, c),
        pass_rate=c / n if n else 0.0,
        mean_turns_solved=sum(r["n_turns"] for r in solved) / c if c else None,
        solver_model=solver_model,
        solver_policy=solver_policy,
        kept=kept,
        drop_reason=reason,
    )


def score_tasks(
    tasks: Sequence[Task],
    rollouts: Mapping[str, Sequence[Mapping[str, Any]]],
    rule: KeepRule,
    *,
    solver_model: str,
    solver_policy: str,
) -> list[Task]:
    """Stage IV's last step: each task with its score by one solver (`rollouts` by task id)."""
    return [
        task.model_copy(
            update={
                "score": score_task(
                    rollouts.get(task.task_id, []),
                    rule,
                    solver_model=solver_model,
                    solver_policy=solver_policy,
                )
            }
        )
        for task in tasks
    ]


@dataclass(frozen=True)
class KeepRule:
    """Keep a task when its pass rate is inside [min_pass_rate, max_pass_rate] and it was solved.

    The default is the paper's rule: solved at least once. `max_pass_rate < 1` drops tasks solved
    in every attempt, which teach nothing under a binary reward.
    """

    min_pass_rate: float = 0.0
    max_pass_rate: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_pass_rate <= self.max_pass_rate <= 1:
            raise ValueError(
                "need 0 <= min_pass_rate <= max_pass_rate <= 1, got "
                f"{self.min_pass_rate} and {self.max_pass_rate}"
            )

    def describe(self) -> str:
        if (self.min_pass_rate, self.max_pass_rate) == (0.0, 1.0):
            return "solved at least once"
        return f"solved at least once, pass rate in [{self.min_pass_rate}, {self.max_pass_rate}]"

    def decide(self, scored: int, successes: int) -> tuple[bool, str]:
        if scored == 0:
            return False, "no_scored_attempts: every attempt was a harness error"
        if successes == 0:
            return False, f"unsolved: 0 of {scored} attempts passed"
        rate = successes / scored
        if rate < self.min_pass_rate:
            return False, f"too_hard: pass rate {rate:.2f} < {self.min_pass_rate:.2f}"
        if rate > self.max_pass_rate:
            return False, f"too_easy: pass rate {rate:.2f} > {self.max_pass_rate:.2f}"
        return True, ""
