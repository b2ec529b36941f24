"""A batch's cost, estimated and measured (store/costs.py, store/cost_record.py): the
`filtered_dataset` step records the batch's `batch_costs` rows (what each stage did cost beside
the estimate its history gave before the run), and the `plan_batch` job shows the estimate for
the settings in the launchpad, running nothing and writing nothing to the lake."""

import time
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import polars as pl

from endless_assets.defs.common import frame_table
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import StageSpec
from endless_assets.stages.costs import cost_profile
from endless_assets.store.cost_record import (
    STAGE_TABLES,
    Measured,
    comparison,
    cost_frame,
    usage,
)
from endless_assets.store.costs import TABLE, Estimate, estimate, planned_runs, read_history


def record_batch_costs(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    spec: StageSpec,
    frames: dict[str, pl.DataFrame],
) -> dict[str, Any]:
    """Write the batch's `batch_costs` rows and return them as metadata. The batch's runs are
    those since the run that described its tasks (stage I): this run, or a sharded batch's
    stage-one, shard and finish runs, or a run re-executed from a failure and the one before.
    The estimate is the one the history recorded before the first of them gives."""
    batch = context.partition_key
    instance = context.instance
    settings = pipeline.resolve()
    profile = cost_profile(settings)
    described = _latest(instance, spec.key(STAGE_TABLES["describe"]), batch)
    first_run = described.run_id if described is not None else context.run.run_id
    started = _run_times(instance, first_run)[0] or time.time()
    measured: dict[str, Measured] = {stage: Measured() for stage in STAGE_TABLES}
    runs = {context.run.run_id, first_run}
    for stage, table in STAGE_TABLES.items():
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=spec.key(table), asset_partitions=[batch], after_timestamp=started - 1
            ),
            limit=10_000,
        ).records
        for record in records:
            runs.add(record.run_id)
            meta = record.asset_materialization.metadata if record.asset_materialization else {}
            measured[stage].add(
                _made(stage, meta),
                int(_value(meta, "containers_started") or 0),
                _value(meta, "engine_cpu_seconds") if stage != "describe" else 0.0,
                _value(meta, "items_wall_seconds"),
            )
    ordered = sorted(runs, key=lambda run: _run_times(instance, run)[0] or 0.0)
    run_seconds = 0.0
    for run in ordered:
        begin, end = _run_times(instance, run)
        if begin is not None:
            run_seconds += (end or time.time()) - begin
        for stats in instance.get_run_step_stats(run):
            stage = _stage_of(spec, stats.step_key)
            if stage and stats.start_time is not None and stats.end_time is not None:
                measured[stage].wall_seconds += stats.end_time - stats.start_time
    before = datetime.fromtimestamp(started, UTC)
    planned = estimate(
        read_history(pipeline.lake()),
        profile,
        batch=batch,
        before=before,
        runs=planned_runs(settings.run.tasks, settings.run.shard_tasks),
    )
    costs = cost_frame(
        batch,
        profile,
        planned,
        usage(frames, profile),
        measured,
        runs=ordered,
        run_seconds=run_seconds,
        now=datetime.now(UTC),
    )
    pipeline.lake().write(TABLE, batch, costs)
    return {
        "cost_estimate_vs_actual": dg.MetadataValue.md(markdown(comparison(costs))),
        "cost_estimate_basis": dg.MetadataValue.md(basis_markdown(planned)),
    }


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, batch: str):
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[batch]), limit=1, ascending=False
    ).records
    return found[0] if found else None


def _run_times(instance: dg.DagsterInstance, run_id: str) -> tuple[float | None, float | None]:
    record = instance.get_run_record_by_id(run_id)
    return (record.start_time, record.end_time) if record is not None else (None, None)


def _value(meta: dict, key: str) -> Any:
    entry = meta.get(key)
    return entry.value if entry is not None else None


def _made(stage: str, meta: dict) -> int:
    """Units the step made, not took from a journal (a sharded batch's finish run takes its
    shards') or earlier rows."""
    if stage == "solver rollouts":
        return int(_value(meta, "ran_now") or 0)
    if stage == "describe":  # (never sharded: its journal holds this batch's rows only)
        return max(
            0, int(_value(meta, "rows") or 0) - int(_value(meta, "recovered_from_journal") or 0)
        )
    return int(_value(meta, "units_made") or 0)


def _stage_of(spec: StageSpec, step_key: str) -> str | None:
    for stage, table in STAGE_TABLES.items():
        if step_key == "__".join(spec.key(table).path):
            return stage
    return None


def markdown(frame: pl.DataFrame) -> str:
    """A frame as a markdown table (a metadata table cannot hold an empty cell)."""

    def cell(value: Any) -> str:
        if value is None:
            return ""
        return f"{value:,.2f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


def basis_markdown(planned: Estimate) -> str:
    lines = [f"- **{s.stage}**: {s.basis}" for s in planned.stages]
    return "\n".join(lines)


@dg.op(
    description="Prints what a batch of the settings in `resources.pipeline.config` will cost "
    "(`endless run --plan`): LLM requests and tokens, containers, engine CPU-seconds and wall "
    "time per stage, from this instance's history of batches with those settings, or a stated "
    "prior. Runs nothing and writes nothing to the lake."
)
def estimate_batch_cost(context: dg.OpExecutionContext, pipeline: PipelineSettings):
    settings = pipeline.resolve()
    runs = planned_runs(settings.run.tasks, settings.run.shard_tasks)
    planned = estimate(read_history(pipeline.lake()), cost_profile(settings), runs=runs)
    frame = planned.frame().with_columns(pl.col(pl.Float64).round(2))
    context.log.info(f"estimate for {settings.run.tasks} tasks:\n{frame.drop('basis')}")
    return dg.Output(
        None,
        metadata={
            "tasks": settings.run.tasks,
            "estimate": frame_table(frame.drop("basis")),
            "basis": dg.MetadataValue.md(basis_markdown(planned)),
        },
    )


@dg.job(
    name="plan_batch",
    description="What a daily_batch run with the same `resources.pipeline.config` will cost, "
    "before it runs (`endless run --plan`): the estimate is in this run's log and its step's "
    "output metadata. Runs nothing and writes nothing to the lake.",
)
def plan_batch():
    estimate_batch_cost()
