"""The jobs: the daily batch and its schedule (incremental refresh: one new batch per day), the
imported batch (a named partition of imported tasks), and drift re-validation of kept tasks
with its weekly schedule (both schedules start stopped). launch.py runs them by name, as jobs of
the `endless` code location."""

import dagster as dg

from endless_assets.defs.dataset import INPUTS
from endless_assets.defs.partitions import batches, imported_batches
from endless_assets.defs.resources import PipelineSettings
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
# (store/shards.py). The describe stage is not run again: its tasks are the ones the shards worked
# on. These three jobs are `endless run`'s steps for such a batch, not jobs to launch by hand: their
# descriptions say so first, and their tag marks them.
STAGE_ONE_ASSETS = PIPELINE_ASSETS[:3]
SHARD_ASSETS = PIPELINE_ASSETS[3:-1]
FINISH_ASSETS = PIPELINE_ASSETS[3:]
INTERNAL = "Internal step of a sharded batch (more tasks than `shard_tasks`), launched by "
SHARDED_TAGS = {"endless/role": "sharded-batch-step"}


def _sharded_step(name: str, assets: list[str], when: str):
    return dg.define_asset_job(
        name=name,
        selection=asset_selection(assets),
        tags=SHARDED_TAGS,
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
    "run's endless/shard tag, e.g. "
    "3/20); its rows are journaled and staged, the partition is written by batch_finish.",
)
batch_finish = _sharded_step(
    "batch_finish",
    FINISH_ASSETS,
    "after the shard runs: the build, validation, solver and filter stages over the shards' "
    "journaled rows (nothing runs again but "
    "harness errors), written as the batch's partitions.",
)

daily_batch_schedule = dg.build_schedule_from_partitioned_job(
    daily_batch,
    hour_of_day=2,
    description="Materializes each new day's batch (starts stopped; turn it on in the UI).",
)

recheck_contamination = dg.define_asset_job(
    name="recheck_contamination",
    selection=dg.AssetSelection.assets("contamination_recheck"),
    description="Check one batch's kept tasks again against the benchmarks of "
    "decontamination_references as they are now (`endless decontaminate`); nothing else runs.",
)

imported_recheck_contamination = dg.define_asset_job(
    name="recheck_imported_contamination",
    selection=dg.AssetSelection.assets(["imported", "contamination_recheck"]),
    description="Check one imported batch's kept tasks again against the benchmarks of "
    "decontamination_references as they are now; nothing else runs.",
)

imported_batch = dg.define_asset_job(
    name="imported_batch",
    selection=dg.AssetSelection.groups(IMPORTED.group_name),
    description="Validate, roll out and filter an imported batch (a named partition).",
)


drift_revalidation_job = dg.define_asset_job(
    name="revalidate_kept_tasks",
    selection=dg.AssetSelection.assets("drift_revalidation"),
    description="Re-validate one batch's kept tasks on images rebuilt from their Dockerfiles.",
)


imported_drift_revalidation_job = dg.define_asset_job(
    name="revalidate_imported_tasks",
    selection=dg.AssetSelection.assets(["imported", "drift_revalidation"]),
    description="Re-validate one imported batch's kept tasks on images rebuilt from their "
    "Dockerfiles.",
)


@dg.schedule(
    job=drift_revalidation_job,
    cron_schedule="0 4 * * 0",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly (Sunday 04:00 UTC): re-validates every batch that has a filtered "
    "dataset, one run per batch (starts stopped; turn it on in the UI).",
)
def drift_revalidation_schedule(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineSettings
) -> list[dg.RunRequest] | dg.SkipReason:
    known = set(batches.get_partition_keys(current_time=context.scheduled_execution_time))
    return _revalidation_runs(context, pipeline, known, "batch")


@dg.schedule(
    job=imported_drift_revalidation_job,
    cron_schedule="30 4 * * 0",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly (Sunday 04:30 UTC): re-validates every imported batch that has a "
    "filtered dataset, one run per batch (starts stopped; turn it on in the UI).",
)
def imported_drift_revalidation_schedule(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineSettings
) -> list[dg.RunRequest] | dg.SkipReason:
    known = set(context.instance.get_dynamic_partitions(imported_batches.name or ""))
    return _revalidation_runs(context, pipeline, known, "imported batch")


def _revalidation_runs(
    context: dg.ScheduleEvaluationContext, pipeline: PipelineSettings, known: set[str], what: str
) -> list[dg.RunRequest] | dg.SkipReason:
    """One run per known batch with a filtered dataset, keyed by the week (once per week)."""
    found = [b for b in pipeline.lake().batches("filtered_dataset") if b in known]
    if not found:
        return dg.SkipReason(f"no {what} has a filtered dataset yet")
    week = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [dg.RunRequest(partition_key=b, run_key=f"drift-{b}-{week}") for b in found]
