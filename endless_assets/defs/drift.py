"""Drift re-validation: the kept tasks of a batch, their images rebuilt from their Dockerfiles
without any cached layer, the repeated controls run again (stages/drift.py does the work).

Not part of the daily batch: its own jobs and schedules (defs/revisits.py, the schedules start
stopped), one for generated batches and one for imported ones. Each run replaces the batch's
partition of `drift_revalidation`, so the table holds the latest check of every kept task; the
`drift` view counts them per batch, imported batches included.
"""

import dagster as dg
import polars as pl

from endless_assets.defs.common import stage_result
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageSpec
from endless_assets.stages.drift import run_drift

TABLE = "drift_revalidation"


def build_drift_revalidation(spec: StageSpec) -> dg.AssetsDefinition:
    """The drift asset of generated batches, or (IMPORTED) of imported ones."""

    @spec.asset(
        TABLE,
        ["filtered_dataset", "task_soundness"],
        group_name="drift",
        description="Drift re-validation: every kept task of the batch, its image rebuilt from its "
        "Dockerfile with no cached layer, the reference and the do-nothing control run "
        "`soundness_repeats` times again; the tasks that no longer validate are marked `drifted`.",
    )
    def drift_revalidation(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        filtered_dataset: pl.DataFrame,
        task_soundness: pl.DataFrame,
    ):
        settings = pipeline.resolve()
        result = run_drift(
            settings,
            pipeline.sandbox(),
            filtered_dataset.filter(pl.col("kept")),
            task_soundness,
            log=context.log,
            # as the build stage built them: imported Dockerfiles as `build_network` says
            network=pipeline.imported_build_network(settings) if spec.imported else None,
        )
        return stage_result(context, result, spec.prefix)

    return drift_revalidation


drift_revalidation = build_drift_revalidation(GENERATED)
imported_drift_revalidation = build_drift_revalidation(IMPORTED)
