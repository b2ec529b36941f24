"""Drift re-validation: the kept tasks of a batch, their images rebuilt from their Dockerfiles
without any cached layer, the repeated controls run again (stages/drift.py does the work).

Not part of the daily batch: its own jobs and schedules (defs/jobs.py, the schedules start
stopped), one for generated batches and one for imported ones. Each run replaces the batch's
partition of `drift_revalidation`, so the table holds the latest check of every kept task; the
`drift` view counts them per batch, imported batches included.
"""

import time
from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.defs.columns import table_asset
from endless_assets.defs.common import (
    counts_table,
    run_parallel,
    schema_check_spec,
    timing_metadata,
    validate,
)
from endless_assets.defs.environments import imported_build_network
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageSpec
from endless_assets.models import HARNESS_ERROR, Task
from endless_assets.stages.drift import DRIFTED, VALID, DriftOutcome, revalidate
from endless_assets.stages.rows import now
from endless_assets.store.columns import frame

TABLE = "drift_revalidation"


def build_drift_revalidation(spec: StageSpec) -> dg.AssetsDefinition:
    """The drift asset of generated batches, or (IMPORTED) of imported ones."""
    imported = spec is IMPORTED

    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins("filtered_dataset", "task_soundness"),
        partitions_def=spec.partitions_def,
        group_name="drift",
        kinds={"docker", "parquet"},
        io_manager_key="lake_io_manager",
        pool="docker",
        check_specs=[schema_check_spec(TABLE, spec.prefix)],
        description="Drift re-validation: every kept task of the batch, its image rebuilt from its "
        "Dockerfile with no cached layer, the reference and the do-nothing control run "
        "`soundness_repeats` times again; the tasks that no longer validate are marked `drifted`.",
        **table_asset(TABLE),
    )
    def drift_revalidation(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        filtered_dataset: pl.DataFrame,
        task_soundness: pl.DataFrame,
    ):
        settings = pipeline.resolve()
        sandbox = pipeline.sandbox()
        started = time.monotonic()
        kept = filtered_dataset.filter(pl.col("kept")).to_dicts()
        # The reference must pass again where it passed every run when the task was kept.
        passed = {
            r["task_id"]: bool(r["reference_runs"]) and r["reference_passes"] == r["reference_runs"]
            for r in task_soundness.to_dicts()
        }
        context.log.info(f"{len(kept)} kept tasks to re-validate on freshly rebuilt images")
        network = imported_build_network(pipeline, settings)

        def work(row: dict) -> dict:
            task = Task.model_validate_json(row["task"])
            required = passed.get(task.task_id, bool(task.reference_solution.strip()))
            outcome = revalidate(
                task,
                sandbox,
                image_tag=row["image_tag"],
                repeats=settings.soundness.repeats,
                reference_required=required,
                network=network if imported else task.generator != "procedural",  # as stage II
            )
            return {**outcome.row(), "batch": row["batch"], "created_at": now()}

        def failed(row: dict, exc: BaseException) -> dict:
            outcome = DriftOutcome(row["task_id"], HARNESS_ERROR, reason=f"harness: {exc!r}")
            return {**outcome.row(), "batch": row["batch"], "created_at": now()}

        rows = run_parallel(
            context,
            kept,
            work,
            failed,
            workers=settings.run.workers,
            label="drift",
            recover=sandbox.recover,
        )
        table = frame(TABLE, rows)
        check = validate(TABLE, table, spec.prefix, context=context)
        statuses = Counter(r["status"] for r in rows)
        reasons = Counter(r["reason"].split(": ", 1)[0] for r in rows if r["reason"])
        metadata = {
            "checked": len(rows),
            "still_valid": statuses.get(VALID, 0),
            "drifted": statuses.get(DRIFTED, 0),
            "harness_errors": statuses.get(HARNESS_ERROR, 0),
            "base_image": sandbox.base.tag,
            **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
        }
        if reasons:
            metadata["reasons"] = counts_table(reasons, "reason")
        drifted = [f"- {r['task_id']}: {r['reason'][:200]}" for r in rows if r["status"] == DRIFTED]
        if drifted:
            metadata["drifted_tasks"] = dg.MetadataValue.md("\n".join(drifted[:50]))
        return dg.MaterializeResult(value=table, metadata=metadata, check_results=[check])

    return drift_revalidation


drift_revalidation = build_drift_revalidation(GENERATED)
imported_drift_revalidation = build_drift_revalidation(IMPORTED)
