"""Which tasks a server serves: kept rows of `filtered_dataset` (less those a recheck found
contaminated) chosen by a SQL filter, each read back as the `Task` the solver stage rolled out on
(the stored task JSON, checked against its columns as exports check it), and a seedable sampler over
them.

The filter is a boolean SQL expression over the columns of `filtered_dataset` plus two derived
ones: `difficulty` (easy, medium, hard, unsolved, unknown: the stats views' labels) and
`learnable` (some but not all scored attempts passed: the tasks whose GRPO groups can differ).
It runs through the catalog's read-only, locked connection, inside one SELECT.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from endless_assets.interop.tasks import ExportError, task_from_row, validate_task
from endless_assets.models import Task
from endless_assets.serve.errors import BadRequest
from endless_assets.store.catalog import CatalogError, query
from endless_assets.store.lake import Lake
from endless_assets.store.stats_views import difficulty_sql

SPLIT = "train"  # the one split a server offers (OpenEnv's task API names splits)


class SelectionError(BadRequest):
    """The filter is not valid SQL, matches no kept task, or a matched task cannot be served; or
    a reset names a task or an index the server does not serve."""


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def selection_filter(
    where: str = "",
    batches: list[str] | None = None,
    categories: list[str] | None = None,
    difficulties: list[str] | None = None,
    learnable: bool = False,
) -> str:
    """The flags of `endless serve` and its free `--where` as one SQL condition."""
    parts = [f"({where})"] if where.strip() else []
    for column, values in (
        ("batch", batches),
        ("category", categories),
        ("difficulty", difficulties),
    ):
        if values:
            parts.append(f"{column} in ({', '.join(_sql_text(v) for v in values)})")
    if learnable:
        parts.append("learnable")
    return " and ".join(parts) or "true"


def select_tasks(lake: Lake, condition: str = "true") -> list[Task]:
    """The kept tasks matching `condition`, ordered by batch and task id."""
    difficulty = difficulty_sql("pass_rate", "scored_attempts")
    sql = (
        "with chosen as (select *, "
        f"{difficulty} as difficulty, "
        "(successes > 0 and successes < scored_attempts) as learnable "
        "from filtered_dataset where kept and task_id not in "
        # (what `endless decontaminate` found contaminated is never served, as never exported)
        "(select task_id from contamination_recheck where status = 'rejected')) "
        f"select * exclude (difficulty, learnable) from chosen where ({condition}) "
        "order by batch, task_id"
    )
    try:
        rows = query(lake, sql).to_dicts()
    except CatalogError as exc:
        raise SelectionError(f"the task filter {condition!r} failed: {exc}") from None
    if not rows:
        raise SelectionError(f"no kept task in {lake.data_dir} matches {condition!r}")
    tasks = []
    for row in rows:
        try:
            task = task_from_row(row)
            validate_task(task)
        except ExportError as exc:
            raise SelectionError(f"cannot serve: {exc}") from None
        tasks.append(task)
    return tasks


class TaskSet:
    """The served tasks, by position and by id, and the server's sampler."""

    def __init__(self, tasks: list[Task], seed: int = 0) -> None:
        self.tasks = tuple(tasks)
        self._by_id = {t.task_id: t for t in self.tasks}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.tasks)

    def pick(
        self, task_id: str | None = None, seed: int | None = None, index: int | None = None
    ) -> Task:
        """A task: the one named, else the one at `index`, else drawn with `seed` (the same
        seed, the same task), else drawn by the server's sampler (seeded at start)."""
        if task_id:
            found = self._by_id.get(task_id)
            if found is None:
                raise SelectionError(f"task {task_id!r} is not among the {len(self)} served tasks")
            return found
        if index is not None:
            if not 0 <= index < len(self):
                raise SelectionError(f"index {index} is outside 0..{len(self) - 1}")
            return self.tasks[index]
        if seed is not None:
            return self.tasks[random.Random(seed).randrange(len(self))]
        with self._lock:
            return self.tasks[self._rng.randrange(len(self))]

    def describe(self, index: int) -> dict[str, Any]:
        """What the task API shows of a task: never its test or its solution."""
        task = self.tasks[index]
        return {
            "index": index,
            "task_id": task.task_id,
            "batch": task.batch,
            "category": task.category,
            "complexity": task.complexity,
            "difficulty": task.difficulty,
            "instruction": task.instruction,
        }
