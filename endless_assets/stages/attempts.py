"""The solver stage's bookkeeping (no Dagster here): which attempts a run must make and which it
reuses.

Rows of other solvers already in the partition are kept, so two models' pass rates compare in
one query. Re-running reuses this solver's scored attempts and plans only the missing or
`harness_error` ones; attempts beyond today's `k` (an earlier run with a larger k) stay stored,
unused.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from endless_assets.models import Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.store.failure_modes import analysis_columns


@dataclass
class AttemptPlan:
    todo: list[tuple[Task, int]] = field(default_factory=list)  # (task, rollout_idx) to run
    reusable: list[dict[str, Any]] = field(default_factory=list)  # this solver's scored rows
    beyond_k: list[dict[str, Any]] = field(default_factory=list)  # kept, unused
    others: list[dict[str, Any]] = field(default_factory=list)  # other solvers' rows, kept


def plan_attempts(
    tasks: list[Task], stored: list[dict[str, Any]], policy: str, model: str, k: int
) -> AttemptPlan:
    """Split the partition's stored rollout rows and list the attempts still to make."""
    ids = {task.task_id for task in tasks}
    rows = [current_columns(r) for r in stored]
    mine = [r for r in rows if (r["policy"], r["model"]) == (policy, model)]
    reusable = {
        (r["task_id"], r["rollout_idx"]): r
        for r in mine
        if r["termination"] != "harness_error" and r["task_id"] in ids and r["rollout_idx"] < k
    }
    return AttemptPlan(
        todo=[
            (task, idx) for task in tasks for idx in range(k) if (task.task_id, idx) not in reusable
        ],
        reusable=list(reusable.values()),
        beyond_k=[r for r in mine if r["rollout_idx"] >= k and r["task_id"] in ids],
        others=[r for r in rows if (r["policy"], r["model"]) != (policy, model)],
    )


def with_recovered(
    stored: list[dict[str, Any]], recovered: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The partition's stored rows with the journal's rows (attempts finished by a run that did
    not get to write the partition) taking the place of the stored row of the same attempt."""
    key = lambda r: (r["task_id"], r["policy"], r["model"], r["rollout_idx"])  # noqa: E731
    rows = {key(r): r for r in stored}
    rows.update({key(r): r for r in recovered})
    return list(rows.values())


def attempt_key(row: dict[str, Any]) -> str:
    """A rollout row's identity in the journal."""
    return f"{row['task_id']}\0{row['policy']}\0{row['model']}\0{row['rollout_idx']}"


def current_columns(row: dict[str, Any]) -> dict[str, Any]:
    """A row written by an older version of the rollouts table, completed with today's columns."""
    row = {"prompt_version": "", **row}
    if row.get("failure_mode") is None:
        trajectory = json.loads(row.get("trajectory") or "[]")
        row.update(analysis_columns(trajectory, row["termination"], row["reward"]))
    return row


class ImageCache:
    """Each task's image, checked once per run (a content-addressed cache hit after the build
    stage)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._tags: dict[str, str] = {}
        self._lock = threading.Lock()

    def tag(self, task: Task) -> str:
        with self._lock:
            if task.task_id in self._tags:
                return self._tags[task.task_id]
        build = self.sandbox.build(
            task.dockerfile or "", task.context_files, services=task.services
        )
        if not build.ok:
            raise SandboxError(f"the task image no longer builds: {build.log[-500:]}")
        with self._lock:
            self._tags[task.task_id] = build.tag
        return build.tag
