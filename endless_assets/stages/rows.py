"""Stage outcomes -> table rows (plain dicts in schema column order) and back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import polars as pl

from endless_assets.agent.episode import Rollout
from endless_assets.generation import Usage
from endless_assets.models import OK, Task, task_id_for
from endless_assets.stages.completion import CompletionOutcome
from endless_assets.stages.environment import EnvironmentOutcome
from endless_assets.stages.soundness.stage import SoundnessOutcome
from endless_assets.store.columns import stored_columns, task_columns
from endless_assets.store.failure_modes import analysis_columns


def now() -> datetime:
    return datetime.now(UTC)


def description_row(
    draft: Task,
    usage: Usage,
    seconds: float,
    *,
    status: str = OK,
    reason: str = "",
    duplicate_of: str = "",
) -> dict[str, Any]:
    return {
        "task_id": draft.task_id,
        "batch": draft.batch,
        "index": draft.index,
        **task_columns(draft),
        "seed": draft.seed,
        "status": status,
        "reject_reason": reason,
        "duplicate_of": duplicate_of,
        "requests": usage.requests,
        "tokens_in": usage.tokens_in,
        "tokens_out": usage.tokens_out,
        "seconds": seconds,
        "draft": draft.stored_json(),
        "created_at": now(),
    }


def failed_description_row(
    batch: str,
    index: int,
    seed: int,
    generator: str,
    model: str,
    version: str,
    reason: str,
    usage: Usage,
    seconds: float,
    status: str,
) -> dict[str, Any]:
    """A stage-I failure (no usable task): kept as a row so the funnel shows it."""
    placeholder = Task.model_construct(
        batch=batch,
        index=index,
        seed=seed,
        instruction="",
        truth={},
        generator=generator,
        generator_model=model,
        prompt_version=version,
        **dict.fromkeys(("category", "complexity", "scenario", "family", "reference_solution"), ""),
    )
    row = description_row(placeholder, usage, seconds, status=status, reason=reason)
    row.update(task_id=task_id_for(batch, index, "", {"failed": True}), draft="")
    return row


def draft_from_row(row: dict[str, Any]) -> Task:
    return Task.model_validate_json(row["draft"])


def tasks_with_tests(
    descriptions: pl.DataFrame,
    environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
    soundness: pl.DataFrame | None = None,
) -> list[Task]:
    """The tasks that passed stage III (and the soundness stage, when given), each with its
    environment and completion test filled in (what stage IV attempts and what
    `filtered_dataset` scores)."""
    tests = {r["task_id"]: r for r in completion_tests.filter(pl.col("status") == OK).to_dicts()}
    if soundness is not None:
        sound = set(soundness.filter(pl.col("status") == OK)["task_id"].to_list())
        tests = {task_id: row for task_id, row in tests.items() if task_id in sound}
    envs = {r["task_id"]: r for r in environments.to_dicts()}
    return [
        draft_with_environment(draft_from_row(row), envs[row["task_id"]]).model_copy(
            update={"completion_test": tests[row["task_id"]]["completion_test"]}
        )
        for row in descriptions.to_dicts()
        if row["task_id"] in tests
    ]


def environment_row(draft: Task, out: EnvironmentOutcome) -> dict[str, Any]:
    return {
        "task_id": draft.task_id,
        "batch": draft.batch,
        "dockerfile": out.dockerfile,
        "context_files": json.dumps(out.context_files, sort_keys=True, ensure_ascii=False),
        "initial_test": out.initial_test,
        "image_tag": out.image_tag,
        "image_id": out.image_id,
        "attempts": out.attempts,
        "attempt_log": out.attempt_log_json(),
        "build_seconds": out.build_seconds,
        "seconds": out.seconds,
        "status": out.status,
        "reject_reason": out.reject_reason,
        "requests": out.usage.requests,
        "tokens_in": out.usage.tokens_in,
        "tokens_out": out.usage.tokens_out,
        "created_at": now(),
    }


def draft_with_environment(draft: Task, env_row: dict[str, Any]) -> Task:
    return draft.model_copy(
        update={
            "dockerfile": env_row["dockerfile"],
            "context_files": json.loads(env_row["context_files"] or "{}"),
            "initial_test": env_row["initial_test"],
        }
    )


def completion_row(draft: Task, out: CompletionOutcome) -> dict[str, Any]:
    return {
        "task_id": draft.task_id,
        "batch": draft.batch,
        "completion_test": out.completion_test,
        "fails_on_initial": out.fails_on_initial,
        "passes_with_reference": out.passes_with_reference,
        "fails_with_noop": out.fails_with_noop,
        "attempts": out.attempts,
        "attempt_log": out.attempt_log_json(),
        "seconds": out.seconds,
        "status": out.status,
        "reject_reason": out.reject_reason,
        "requests": out.usage.requests,
        "tokens_in": out.usage.tokens_in,
        "tokens_out": out.usage.tokens_out,
        "created_at": now(),
    }


def filtered_row(task: Task, image_tag: str) -> dict[str, Any]:
    """A scored task as a `filtered_dataset` row: the score, the task's columns, and the whole
    task as JSON (what exports read back)."""
    score = task.score
    if score is None:
        raise ValueError(f"task {task.task_id} has no score yet")
    return {
        "task_id": task.task_id,
        "batch": task.batch,
        "solver_model": str(score.solver),
        "solver_policy": score.solver.policy,
        "attempts": score.attempts,
        "harness_errors": score.harness_errors,
        "scored_attempts": score.scored_attempts,
        "successes": score.successes,
        "pass_at_n": score.pass_at_n,
        "pass_at_curve": json.dumps([round(p, 6) for p in score.curve]),
        "pass_rate": score.pass_rate,
        "mean_turns_solved": score.mean_turns_solved,
        "kept": score.kept,
        "drop_reason": score.drop_reason,
        **stored_columns(task),
        "image_tag": image_tag,
        "task": task.stored_json(),
        "created_at": now(),
    }


def soundness_row(task: Task, outcome: SoundnessOutcome) -> dict[str, Any]:
    return {**outcome.row(), "batch": task.batch, "created_at": now()}


def rollout_row(batch: str, rollout_idx: int, rollout: Rollout) -> dict[str, Any]:
    trajectory = rollout.trajectory()
    return {
        "task_id": rollout.task_id,
        "batch": batch,
        "rollout_idx": rollout_idx,
        "policy": rollout.policy,
        "model": rollout.model,
        "prompt_version": rollout.prompt_version,
        "reward": rollout.reward,
        "termination": rollout.termination,
        "n_turns": rollout.n_turns,
        "trajectory": json.dumps(trajectory, ensure_ascii=False),
        "messages": json.dumps(rollout.messages, ensure_ascii=False),
        "verdict": rollout.verdict.summary() if rollout.verdict else "",
        "error": rollout.error,
        "tokens_in": rollout.tokens_in,
        "tokens_out": rollout.tokens_out,
        "seconds": rollout.seconds,
        "queue_seconds": rollout.queue_seconds,
        **analysis_columns(trajectory, rollout.termination, rollout.reward),
        "created_at": now(),
    }
