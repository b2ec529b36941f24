"""A batch's measured cost (stages/costs.py does the arithmetic): the `filtered_dataset` step
records the batch's `batch_costs` rows from what the Dagster instance says each stage's steps did.
The estimate before a run is plan.py's."""

import time
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import polars as pl

from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import StageSpec
from endless_assets.stages.costs import STAGE_TABLES, record_costs, stage_measures


def record_batch_costs(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    spec: StageSpec,
    frames: dict[str, pl.DataFrame],
) -> dict[str, Any]:
    """Write the batch's `batch_costs` rows and return them as metadata. The batch's runs are those
    since the run that described its tasks (the describe stage): this run, or a sharded batch's
    stage-one, shard and finish runs, or a run re-executed from a failure and the one before. The
    estimate is the one the history recorded before the first of them gives."""
    batch, instance = context.partition_key, context.instance
    latest = dg.AssetRecordsFilter(
        asset_key=spec.key("task_descriptions"), asset_partitions=[batch]
    )
    described = instance.fetch_materializations(latest, limit=1, ascending=False).records
    first_run = described[0].run_id if described else context.run.run_id
    started = _run_times(instance, first_run)[0] or time.time()
    steps: dict[str, list[dict[str, Any]]] = {stage: [] for stage in STAGE_TABLES}
    runs = {context.run.run_id, first_run}
    for stage, table in STAGE_TABLES.items():
        found = dg.AssetRecordsFilter(
            asset_key=spec.key(table), asset_partitions=[batch], after_timestamp=started - 1
        )
        for record in instance.fetch_materializations(found, limit=10_000).records:
            runs.add(record.run_id)
            meta = record.asset_materialization.metadata if record.asset_materialization else {}
            steps[stage].append({key: entry.value for key, entry in meta.items()})
    ordered = sorted(runs, key=lambda run: _run_times(instance, run)[0] or 0.0)
    run_seconds, walls = 0.0, dict.fromkeys(STAGE_TABLES, 0.0)
    stage_of = {"__".join(spec.key(table).path): stage for stage, table in STAGE_TABLES.items()}
    for run in ordered:
        begin, end = _run_times(instance, run)
        if begin is not None:
            run_seconds += (end or time.time()) - begin
        for stats in instance.get_run_step_stats(run):
            stage = stage_of.get(stats.step_key)
            if stage and stats.start_time is not None and stats.end_time is not None:
                walls[stage] += stats.end_time - stats.start_time
    figures = record_costs(
        pipeline.resolve(),
        pipeline.lake(),
        batch,
        frames,
        stage_measures(steps, walls),
        runs=ordered,
        run_seconds=run_seconds,
        before=datetime.fromtimestamp(started, UTC),
    )
    return {name: dg.MetadataValue.md(text) for name, text in figures.items()}


def _run_times(instance: dg.DagsterInstance, run_id: str) -> tuple[float | None, float | None]:
    record = instance.get_run_record_by_id(run_id)
    return (record.start_time, record.end_time) if record is not None else (None, None)
