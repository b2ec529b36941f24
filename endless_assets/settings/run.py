"""Settings of a run as a whole: where the lake lives, how big a batch is, its seed, parallelism."""

from __future__ import annotations

from dataclasses import dataclass

from endless_assets.settings.declare import setting


@dataclass(frozen=True)
class RunSettings:
    data_dir: str = setting(
        "data", "ENDLESS_DATA_DIR", "where the lake and the catalog live", operational=True
    )
    tasks: int = setting(
        24, "ENDLESS_TASKS", "tasks per batch (the describe stage samples this many)"
    )
    seed: int = setting(0, "ENDLESS_SEED", "salt for the batch's seeds; change it to redraw a day")
    workers: int = setting(
        6, "ENDLESS_WORKERS", "tasks processed in parallel within a stage", operational=True
    )
    shard_tasks: int = setting(
        1000,
        "ENDLESS_SHARD_TASKS",
        "`endless run` splits a larger batch into shard runs of about this many tasks (a "
        "task's shard is a hash of its id; the build, validation and solver stages per shard; one "
        "partition in the end)",
        operational=True,
    )
