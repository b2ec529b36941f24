"""The jobs that look at a made batch again, for generated and imported batches alike: the
contamination recheck, and drift re-validation of kept tasks with its weekly schedules (they
start stopped). launch.py and `endless decontaminate` run them by name."""

import dagster as dg

from endless_assets.defs.partitions import batches, imported_batches
from endless_assets.defs.resources import PipelineSettings

AGAIN = "against the benchmarks of decontamination_references as they are now"
recheck_contamination = dg.define_asset_job(
    name="recheck_contamination",
    selection=dg.AssetSelection.assets("contamination_recheck"),
    description=f"Check one batch's kept tasks again {AGAIN} (`endless decontaminate`); nothing "
    "else runs.",
)
imported_recheck_contamination = dg.define_asset_job(
    name="recheck_imported_contamination",
    selection=dg.AssetSelection.assets(["imported", "contamination_recheck"]),
    description=f"Check one imported batch's kept tasks again {AGAIN}; nothing else runs.",
)

REBUILT = "kept tasks on images rebuilt from their Dockerfiles."
drift_revalidation_job = dg.define_asset_job(
    name="revalidate_kept_tasks",
    selection=dg.AssetSelection.assets("drift_revalidation"),
    description=f"Re-validate one batch's {REBUILT}",
)
imported_drift_revalidation_job = dg.define_asset_job(
    name="revalidate_imported_tasks",
    selection=dg.AssetSelection.assets(["imported", "drift_revalidation"]),
    description=f"Re-validate one imported batch's {REBUILT}",
)


def _weekly_revalidation(name: str, job, at: str, what: str, known) -> dg.ScheduleDefinition:
    """One run per `known` batch with a filtered dataset, keyed by the week (once per week)."""
    hour, minute = at.split(":")

    @dg.schedule(
        name=name,
        job=job,
        cron_schedule=f"{int(minute)} {int(hour)} * * 0",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Weekly (Sunday {at} UTC): re-validates every {what} that has a filtered "
        "dataset, one run per batch (starts stopped; turn it on in the UI).",
    )
    def schedule(
        context: dg.ScheduleEvaluationContext, pipeline: PipelineSettings
    ) -> list[dg.RunRequest] | dg.SkipReason:
        ours = known(context)
        found = [b for b in pipeline.lake().batches("filtered_dataset") if b in ours]
        if not found:
            return dg.SkipReason(f"no {what} has a filtered dataset yet")
        week = context.scheduled_execution_time.strftime("%Y-%m-%d")
        return [dg.RunRequest(partition_key=b, run_key=f"drift-{b}-{week}") for b in found]

    return schedule


drift_revalidation_schedule = _weekly_revalidation(
    "drift_revalidation_schedule",
    drift_revalidation_job,
    "04:00",
    "batch",
    lambda context: set(batches.get_partition_keys(current_time=context.scheduled_execution_time)),
)
imported_drift_revalidation_schedule = _weekly_revalidation(
    "imported_drift_revalidation_schedule",
    imported_drift_revalidation_job,
    "04:30",
    "imported batch",
    lambda context: set(context.instance.get_dynamic_partitions(imported_batches.name or "")),
)
