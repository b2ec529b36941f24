"""The jobs: the daily batch and its schedule (incremental refresh: one new batch per day), and
the imported batch (a named partition of imported tasks). `daily_batch_job` and
`imported_batch_job` resolve them from the Definitions, as module-level functions Dagster can
reconstruct in step processes (launch.py runs them)."""

import dagster as dg

from endless_assets.defs.stage_spec import IMPORTED

PIPELINE_ASSETS = [
    "base_image",
    "task_descriptions",
    "task_environments",
    "completion_tests",
    "task_soundness",
    "solver_rollouts",
    "filtered_dataset",
]

daily_batch = dg.define_asset_job(
    name="daily_batch",
    selection=dg.AssetSelection.assets(*PIPELINE_ASSETS),
    description="Materialize one batch end to end: describe, build, validate, probe, solve, "
    "filter.",
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


def daily_batch_job() -> dg.JobDefinition:
    from endless_assets.definitions import defs

    return defs.resolve_job_def("daily_batch")


def imported_batch_job() -> dg.JobDefinition:
    from endless_assets.definitions import defs

    return defs.resolve_job_def("imported_batch")
