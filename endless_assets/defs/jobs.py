"""The daily batch job and its schedule (incremental refresh: one new batch per day)."""

import dagster as dg

PIPELINE_ASSETS = [
    "base_image",
    "task_descriptions",
    "task_environments",
    "completion_tests",
    "solver_rollouts",
    "filtered_dataset",
]

daily_batch = dg.define_asset_job(
    name="daily_batch",
    selection=dg.AssetSelection.assets(*PIPELINE_ASSETS),
    description="Materialize one batch end to end: describe, build, validate, solve, filter.",
)

daily_batch_schedule = dg.build_schedule_from_partitioned_job(
    daily_batch,
    hour_of_day=2,
    description="Materializes each new day's batch (starts stopped; turn it on in the UI).",
)
