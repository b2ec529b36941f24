"""The tasks a stage works on, read back from the tables of the stages before it."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from endless_assets.models import OK, Task


def draft_from_row(row: dict[str, Any]) -> Task:
    return Task.model_validate_json(row["draft"])


def ok_drafts(descriptions: pl.DataFrame) -> list[Task]:
    """The tasks the describe stage described without a rejection."""
    return [draft_from_row(row) for row in descriptions.filter(pl.col("status") == OK).to_dicts()]


def draft_with_environment(draft: Task, env_row: dict[str, Any]) -> Task:
    return draft.model_copy(
        update={
            "dockerfile": env_row["dockerfile"],
            "context_files": json.loads(env_row["context_files"] or "{}"),
            "initial_test": env_row["initial_test"],
        }
    )


def tasks_with_environments(descriptions: pl.DataFrame, environments: pl.DataFrame) -> list[Task]:
    """The tasks that passed the build stage, each with its environment filled in (the validation
    stage's)."""
    envs = {r["task_id"]: r for r in environments.filter(pl.col("status") == OK).to_dicts()}
    return [
        draft_with_environment(draft_from_row(row), envs[row["task_id"]])
        for row in descriptions.to_dicts()
        if row["task_id"] in envs
    ]


def tasks_with_tests(
    descriptions: pl.DataFrame,
    environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
    soundness: pl.DataFrame | None = None,
) -> list[Task]:
    """The tasks that passed the validation stage (and the soundness stage, when given), each with
    its environment and completion test filled in (what the solver stage attempts and what
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
