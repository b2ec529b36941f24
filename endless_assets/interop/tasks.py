"""The tasks an export ships: kept rows of `filtered_dataset`, read from the lake and checked.

Every export goes through `load_tasks` and `validate_task`: a task that could not be rebuilt or
graded (no instruction, a Dockerfile without FROM, a completion test that does not parse or
defines no test, an unsafe build-context path) fails the whole export with its task id, before
anything is written.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import polars as pl
from pydantic import ValidationError

from endless_assets.generation.parsing import parse_python
from endless_assets.interop.dockerfile import DockerfileError, base_images
from endless_assets.models import Task, TaskScore
from endless_assets.solver_id import SolverId
from endless_assets.store.columns import stored_columns
from endless_assets.store.lake import Lake

TASK_ID = re.compile(r"^et-[0-9a-f]{16}$")


class ExportError(Exception):
    """An export cannot be written; the message names the task and what is wrong with it."""


def load_tasks(lake: Lake, batches: list[str] | None = None) -> list[Task]:
    """Kept tasks of the chosen batches (all when None), ordered by batch and task id."""
    frame = lake.read_all("filtered_dataset")
    if batches:
        materialized = set(lake.batches("filtered_dataset"))
        missing = sorted(set(batches) - materialized)
        if missing:
            known = ", ".join(sorted(materialized)) or "none"
            raise ExportError(
                f"no filtered_dataset partition for batch(es) {', '.join(missing)} "
                f"(materialized: {known})"
            )
        frame = frame.filter(pl.col("batch").is_in(batches))
    kept = frame.filter(pl.col("kept")).sort(["batch", "task_id"])
    if batches and not len(kept):
        raise ExportError("nothing to export: " + "; ".join(_none_kept(frame, b) for b in batches))
    return [task_from_row(row) for row in kept.to_dicts()]


def _none_kept(frame: pl.DataFrame, batch: str) -> str:
    """Why a batch has no kept task, in a few words."""
    rows = frame.filter(pl.col("batch") == batch)
    if not len(rows):
        return f"batch {batch} has no kept task (no task reached the solver filter)"
    reasons = rows["drop_reason"].str.split(": ").list.first().value_counts(sort=True)
    top = ", ".join(f"{r['drop_reason']} {r['count']}" for r in reasons.head(3).to_dicts())
    return f"batch {batch} has no kept task ({len(rows)} filtered, none kept: {top})"


def task_from_row(row: dict[str, Any]) -> Task:
    """A `filtered_dataset` row back as the `Task` it was written from, with its score."""
    task_id = str(row.get("task_id") or "?")
    stored = row.get("task") or ""
    if not stored:
        raise ExportError(
            f"task {task_id} (batch {row.get('batch')}): the filtered_dataset row was written by "
            "an older version and does not carry the task; re-materialize filtered_dataset for "
            "that batch (it reuses the stored attempts)"
        )
    try:
        task = Task.model_validate_json(stored)
        curve = json.loads(row.get("pass_at_curve") or "[]")
    except (ValueError, ValidationError) as exc:
        raise ExportError(f"task {task_id}: the stored task does not parse: {exc}") from exc
    if task.task_id != task_id:
        raise ExportError(f"task {task_id}: the stored task is {task.task_id}, not this row's")
    differing = [name for name, value in stored_columns(task).items() if row.get(name) != value]
    if differing:
        raise ExportError(
            f"task {task_id} (batch {row.get('batch')}): column(s) {', '.join(differing)} "
            "disagree with the stored task; re-materialize filtered_dataset for that batch"
        )
    score = TaskScore(
        attempts=int(row.get("attempts") or 0),
        harness_errors=int(row.get("harness_errors") or 0),
        scored_attempts=int(row.get("scored_attempts") or 0),
        successes=int(row.get("successes") or 0),
        pass_at_n=float(row.get("pass_at_n") or 0.0),
        curve=[float(p) for p in curve],
        pass_rate=float(row.get("pass_rate") or 0.0),
        mean_turns_solved=row.get("mean_turns_solved"),
        solver=SolverId.parse(row.get("solver_model") or ""),
        kept=bool(row.get("kept")),
        drop_reason=row.get("drop_reason") or "",
    )
    return task.model_copy(update={"score": score})


def validate_task(task: Task) -> None:
    """Raise ExportError naming the task if it cannot be shipped as a gradeable task."""
    problems: list[str] = []
    if not TASK_ID.match(task.task_id):
        problems.append(f"task id {task.task_id!r} is not of the form et-<16 hex digits>")
    if not task.instruction.strip():
        problems.append("the instruction is empty")
    try:
        if not base_images(task.dockerfile or ""):
            problems.append("the Dockerfile has no FROM line")
    except DockerfileError as exc:
        problems.append(f"the Dockerfile is malformed: {exc}")
    problems += _test_problems("completion test", task.completion_test or "")
    if (task.initial_test or "").strip():
        problems += _test_problems("initial-state test", task.initial_test)
    if problems:
        raise ExportError(f"task {task.task_id} (batch {task.batch}): " + "; ".join(problems))


def _test_problems(what: str, source: str) -> list[str]:
    if not source.strip():
        return [f"the {what} is empty"]
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        return [f"the {what} does not parse (line {exc.lineno}: {exc.msg})"]
    names = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]
    return [] if names else [f"the {what} defines no test function"]


def validate_all(tasks: list[Task]) -> None:
    """Validate every task first, so a bad task fails the export before anything is written."""
    for task in tasks:
        validate_task(task)
