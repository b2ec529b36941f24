"""The columns of a table row that repeat its task (shared by `task_descriptions` and
`filtered_dataset`; exports check them against the task JSON the row carries), and a frame in a
table's schema."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from endless_assets.models import Task
from endless_assets.store.schemas import polars_schema


def frame(table: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = polars_schema(table)
    if not rows:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(rows, schema=schema)


# The task's own columns, shared by `task_descriptions` and `filtered_dataset`.
TASK_COLUMNS = (
    "category",
    "complexity",
    "scenario",
    "family",
    "parent_task_id",
    "instruction",
    "truth",
    "reference_solution",
    "generator",
    "generator_model",
    "prompt_version",
)


def task_columns(task: Task) -> dict[str, Any]:
    columns = {name: getattr(task, name) for name in TASK_COLUMNS}
    columns["truth"] = task.truth_json()
    columns["services"] = task.services_json()
    return columns


def stored_columns(task: Task) -> dict[str, Any]:
    """The columns of a `filtered_dataset` row that repeat the task (for SQL); exports check
    them against the task JSON the row carries."""
    return {
        **task_columns(task),
        "dockerfile": task.dockerfile or "",
        "context_files": json.dumps(task.context_files, sort_keys=True, ensure_ascii=False),
        "initial_test": task.initial_test or "",
        "completion_test": task.completion_test or "",
    }
