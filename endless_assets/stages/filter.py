"""The solver filter (no Dagster here; defs/dataset.py is the asset): each task that reached the
solver stage scored by the configured solver's attempts, with all a trainer needs to rebuild and
grade it, and the batch's funnel."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl

from endless_assets.agent.factory import policy_factory
from endless_assets.models import Task, score_tasks
from endless_assets.sampling.measures import cost_per_learnable, learnable_share, task_costs
from endless_assets.settings import Settings
from endless_assets.solver_id import SolverId
from endless_assets.stages.funnel import batch_funnel
from endless_assets.stages.runner import now
from endless_assets.stages.stage_run import Counts, StageResult, task_markdown
from endless_assets.stages.tasks import tasks_with_tests
from endless_assets.store.columns import frame, stored_columns

TABLE = "filtered_dataset"


@dataclass(frozen=True)
class Scored:
    """The filter's outcome for one task: the task with its score, and its image's tag."""

    task: Task
    image_tag: str

    def row(self) -> dict[str, Any]:
        """The task's row: the score, the task's columns, the whole task as JSON (for exports)."""
        task, score = self.task, self.task.score
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
            "image_tag": self.image_tag,
            "task": task.stored_json(),
            "created_at": now(),
        }


def run_filter(settings: Settings, tables: dict[str, pl.DataFrame]) -> StageResult:
    """Score the batch's tasks by the solver's first `attempts` attempts; keep those in the band."""
    started = time.monotonic()
    probe = policy_factory(settings)()
    rule = settings.keep.rule()
    solver = SolverId(probe.name, probe.model)
    rollouts = tables["solver_rollouts"].filter(
        (pl.col("policy") == probe.name)
        & (pl.col("model") == probe.model)
        & (pl.col("rollout_idx") < settings.solver.attempts)
    )
    by_task: dict[str, list[dict]] = {}
    for r in rollouts.to_dicts():
        by_task.setdefault(r["task_id"], []).append(r)
    stages = [tables[t] for t in ("task_environments", "completion_tests", "task_soundness")]
    images = dict(tables["task_environments"].select("task_id", "image_tag").iter_rows())
    tasks = tasks_with_tests(tables["task_descriptions"], *stages)
    scored = score_tasks(tasks, by_task, rule, solver=solver)
    rows = [Scored(task, images[task.task_id]).row() for task in scored]
    violations = [
        f"{r['task_id']}: kept with {r['successes']} successes and pass rate {r['pass_rate']:.2f}"
        for r in rows
        if r["kept"]
        and (r["successes"] < 1 or not rule.min_pass_rate <= r["pass_rate"] <= rule.max_pass_rate)
    ]
    kept_rows = [r for r in rows if r["kept"]]
    reasons = Counter(r["drop_reason"].split(": ", 1)[0] for r in rows if not r["kept"])
    table = frame(TABLE, rows)
    metadata: dict[str, Any] = {
        "funnel_step": "solver filter",
        "entered": len(rows),
        "kept": len(kept_rows),
        "dropped": len(rows) - len(kept_rows),
        "solver": str(solver),
        "keep_rule": rule.describe(),
        "mean_pass_rate": round(sum(r["pass_rate"] for r in rows) / len(rows), 3) if rows else 0.0,
        "wall_seconds": round(time.monotonic() - started, 2),
        # The batch's path from described to kept, with the top reason per step.
        "funnel": batch_funnel({**tables, TABLE: table}),
        **learnable_metadata(
            table,
            [tables["task_descriptions"], *stages, tables["solver_rollouts"]],
            [*stages, tables["solver_rollouts"]],
        ),
    }
    if reasons:
        metadata["drop_reasons"] = Counts(reasons, "reason")
    if kept_rows:
        metadata["sample_task"] = task_markdown(kept_rows[0])
    return StageResult(TABLE, rows, violations, metadata)


def learnable_metadata(
    table: pl.DataFrame, token_frames: list[pl.DataFrame], container_frames: list[pl.DataFrame]
) -> dict:
    """The batch's learnable share and what each learnable task cost (every token and container
    second of the batch's tasks, kept or not); a figure with nothing to divide by left out."""
    if table.is_empty():
        return {"learnable": 0}
    share = learnable_share(table).row(0, named=True)
    costs = cost_per_learnable(table, task_costs(token_frames, container_frames))
    cost = costs.row(0, named=True) if len(costs) else {}
    figures = {
        "learnable": share["learnable"],
        "learnable_share": share["learnable_share"],
        "tokens_per_learnable": cost.get("tokens_per_learnable"),
        "container_seconds_per_learnable": cost.get("container_seconds_per_learnable"),
    }
    return {
        k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items() if v is not None
    }
