"""A lake whose `filtered_dataset` holds given tasks as kept, for the tests and benchmarks of
`endless serve` and the ATIF export: the rows the solver stage writes (stages/filter.Scored), with a
score made of the given rewards, and no Dagster run.

    tasks = procedural_tasks(sandbox.base.tag, "2026-07-01", 4)
    write_kept(Lake(tmp / "data"), tasks, rewards=[1, 1, 0, 1])
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.models import Task, score_task, task_seed
from endless_assets.solver_id import SolverId
from endless_assets.stages.filter import Scored
from endless_assets.store.catalog import rebuild_catalog
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake


def procedural_tasks(base_image: str, batch: str, count: int) -> list[Task]:
    """`count` complete tasks of the procedural families (their images build offline)."""
    generator = ProceduralGenerator(base_image)
    return [generator.describe(batch, i, task_seed(batch, i))[0] for i in range(count)]


def write_kept(
    lake: Lake,
    tasks: list[Task],
    *,
    rewards: list[int] | None = None,
    solver: tuple[str, str] = ("oracle", ""),
) -> list[Task]:
    """Write `tasks` as kept `filtered_dataset` rows (one partition per batch), scored from
    `rewards` (the solver's attempts; default one success), and rebuild the catalog. The tasks
    as stored, with their scores."""
    attempts = [{"reward": r, "n_turns": 2} for r in (rewards or [1])]
    score = score_task(attempts, solver=SolverId(*solver))
    score = dataclasses.replace(score, kept=True, drop_reason="")
    scored = [t.model_copy(update={"score": score}) for t in tasks]
    by_batch: dict[str, list[dict]] = defaultdict(list)
    for task in scored:
        by_batch[task.batch].append(Scored(task, "").row())
    for batch, rows in by_batch.items():
        lake.write("filtered_dataset", batch, frame("filtered_dataset", rows))
    rebuild_catalog(lake)
    return scored
