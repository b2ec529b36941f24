"""The one Definitions object (loaded by workspace.yaml, `dg` and `endless`)."""

from __future__ import annotations

import warnings

import dagster as dg

from endless_assets.defs.base_image import base_image
from endless_assets.defs.completion_tests import completion_tests
from endless_assets.defs.dataset import filtered_dataset
from endless_assets.defs.decontamination import contamination_recheck, task_decontamination
from endless_assets.defs.descriptions import task_descriptions
from endless_assets.defs.drift import drift_revalidation, imported_drift_revalidation
from endless_assets.defs.environments import task_environments
from endless_assets.defs.exports import dataset_exports
from endless_assets.defs.imports import IMPORTED_ASSETS
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.jobs import (
    batch_finish,
    batch_shard,
    batch_stage_one,
    daily_batch,
    daily_batch_schedule,
    imported_batch,
)
from endless_assets.defs.plan import plan_batch
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.revisits import (
    drift_revalidation_job,
    drift_revalidation_schedule,
    imported_drift_revalidation_job,
    imported_drift_revalidation_schedule,
    imported_recheck_contamination,
    recheck_contamination,
)
from endless_assets.defs.rollouts import solver_rollouts
from endless_assets.defs.soundness import imported_task_soundness, task_soundness
from endless_assets.runs.executor import owned_in_process_executor
from endless_assets.settings import Settings

with warnings.catch_warnings():  # (source references are in beta: a warning for us, not users)
    warnings.simplefilter("ignore", dg.BetaWarning)
    ASSETS = dg.with_source_code_references(
        [
            base_image,
            task_descriptions,
            task_decontamination,
            task_environments,
            completion_tests,
            task_soundness,
            imported_task_soundness,
            solver_rollouts,
            filtered_dataset,
            contamination_recheck,
            *IMPORTED_ASSETS,
            dataset_exports,
            drift_revalidation,
            imported_drift_revalidation,
        ]
    )

defs = dg.Definitions(
    # Steps run in the run's own process: the stages form a chain, each parallelises over its
    # tasks inside its step, so one process per step would only add start-up (~3 s a step).
    # Dagster's in-process executor, with a run that records its process and waits for a pool
    # slot as a user can follow (runs/executor.py).
    executor=owned_in_process_executor,
    # Each asset links to its source (the file and line of its function, shown on its page).
    assets=ASSETS,
    jobs=[
        daily_batch,
        plan_batch,
        batch_stage_one,
        batch_shard,
        batch_finish,
        imported_batch,
        drift_revalidation_job,
        imported_drift_revalidation_job,
        recheck_contamination,
        imported_recheck_contamination,
    ],
    schedules=[
        daily_batch_schedule,
        drift_revalidation_schedule,
        imported_drift_revalidation_schedule,
    ],
    resources={
        # Every setting as this process's environment gives it, else its default: what the
        # resource page shows, and what a run uses unless its config says otherwise (a run
        # worker loads these definitions in its own environment). A variable with a bad value
        # leaves its setting unset, for the run to report.
        "pipeline": PipelineSettings(**Settings.environment_values()),
        "lake_io_manager": ParquetLakeIOManager(),
    },
)
