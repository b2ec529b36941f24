"""The tasks a stage works on, read back from the tables of the stages before it."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from endless_assets.models import OK, Service, Task


def draft_from_row(row: dict[str, Any]) -> Task:
    return Task.model_validate_json(row["draft"])


def _ok_rows(table: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in table.filter(pl.col("status") == OK).to_dicts()}


def ok_drafts(descriptions: pl.DataFrame) -> list[Task]:
    """The tasks the describe stage described without a rejection."""
    return [draft_from_row(row) for row in descriptions.filter(pl.col("status") == OK).to_dicts()]


def draft_with_environment(draft: Task, env_row: dict[str, Any]) -> Task:
    """The draft with what the build stage built: its Dockerfile, files, initial test and the
    services as built (a repair may have fixed one, never renamed it: the id stays)."""
    built = [Service.model_validate(s) for s in json.loads(env_row.get("services") or "[]")]
    return draft.model_copy(
        update={
            "dockerfile": env_row["dockerfile"],
            "context_files": json.loads(env_row["context_files"] or "{}"),
            "initial_test": env_row["initial_test"],
            "services": built or draft.services,
        }
    )


def tasks_with_environments(descriptions: pl.DataFrame, environments: pl.DataFrame) -> list[Task]:
    """The tasks that passed the build stage, each with its environment filled in."""
    envs = _ok_rows(environments)
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
    its environment and completion test filled in."""
    tests = _ok_rows(completion_tests)
    if soundness is not None:
        sound = _ok_rows(soundness)
        tests = {task_id: row for task_id, row in tests.items() if task_id in sound}
    return [
        task.model_copy(update={"completion_test": tests[task.task_id]["completion_test"]})
        for task in tasks_with_environments(descriptions, environments)
        if task.task_id in tests
    ]
