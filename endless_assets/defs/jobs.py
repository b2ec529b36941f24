"""The jobs that make batches: the daily batch and its schedule (one new batch per day, starts
stopped), a sharded batch's steps, and the imported batch (a named partition of imported tasks).
Jobs that look at a made batch again live in revisits.py. launch.py runs them by name."""

import dagster as dg

from endless_assets.defs.dataset import INPUTS
from endless_assets.defs.stage_spec import IMPORTED

# The batch's assets in order: the base image, the stage tables the filter reads, the filter.
PIPELINE_ASSETS = ["base_image", *INPUTS, "filtered_dataset"]


def asset_selection(names) -> dg.AssetSelection:
    """The assets of these definitions (the describe stage's with the draw tables it writes too)."""
    return dg.AssetSelection.assets(*names).required_multi_asset_neighbors()


daily_batch = dg.define_asset_job(
    name="daily_batch",
    selection=asset_selection(PIPELINE_ASSETS),
    description="Materialize one batch end to end: describe, build, validate, probe, solve, "
    "filter.",
)

# A batch larger than `shard_tasks` runs as: the describe stage once, then the per-task stages once
# per shard (a run tagged endless/shard=i/n), then the build, validation, solver and filter stages
# once more, untagged: they find every row in the journals and write the partitions
# (store/shards.py). These three jobs are `endless run`'s steps for such a batch, not jobs to
# launch by hand: their descriptions say so first, and their tag marks them.
STAGE_ONE_ASSETS = PIPELINE_ASSETS[:3]
SHARD_ASSETS = PIPELINE_ASSETS[3:-1]
FINISH_ASSETS = PIPELINE_ASSETS[3:]
INTERNAL = "Internal step of a sharded batch (more tasks than `shard_tasks`), launched by "


def _sharded_step(name: str, assets: list[str], when: str):
    return dg.define_asset_job(
        name=name,
        selection=asset_selection(assets),
        tags={"endless/role": "sharded-batch-step"},
        description=f"{INTERNAL}`endless run` {when} To make a batch, launch daily_batch.",
    )


batch_stage_one = _sharded_step(
    "batch_stage_one",
    STAGE_ONE_ASSETS,
    "before the shard runs: the base image, every task description and its decontamination.",
)
batch_shard = _sharded_step(
    "batch_shard",
    SHARD_ASSETS,
    "once per shard: the build, validation and solver stages for the tasks of one shard (the "
    "run's endless/shard tag, e.g. 3/20); its rows are journaled and staged, the partition is "
    "written by batch_finish.",
)
batch_finish = _sharded_step(
    "batch_finish",
    FINISH_ASSETS,
    "after the shard runs: the build, validation, solver and filter stages over the shards' "
    "journaled rows (nothing runs again but harness errors), written as the batch's partitions.",
)

daily_batch_schedule = dg.build_schedule_from_partitioned_job(
    daily_batch,
    hour_of_day=2,
    description="Materializes each new day's batch (starts stopped; turn it on in the UI).",
)

imported_batch = dg.define_asset_job(
    name="imported_batch",
    selection=dg.AssetSelection.groups(IMPORTED.group_name),
    description="Validate, roll out and filter an imported batch (a named partition).",
)
