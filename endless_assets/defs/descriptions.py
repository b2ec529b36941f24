"""Stage I asset: sample the batch's task descriptions."""

import time
from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.defs.columns import generator_version, table_asset
from endless_assets.defs.common import (
    counts_table,
    frame_table,
    resumable,
    run_parallel,
    schema_check_spec,
    status_metadata,
    task_markdown,
    timing_metadata,
    usage_metadata,
    validate,
)
from endless_assets.defs.partitions import batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.generation import GenerationError, Usage
from endless_assets.generation.dedupe import reject_duplicates
from endless_assets.generation.factory import make_generator, task_parallelism
from endless_assets.models import HARNESS_ERROR, OK, REJECTED
from endless_assets.sampling.policy import Draw
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.stages.draws import (
    describe_slot,
    draw_history,
    draws_frame,
    history_frame,
    parent_tasks,
    plan_draw,
    sampler_label,
    slot_columns,
    slot_seed,
    why_uniform,
)
from endless_assets.stages.rows import description_row, failed_description_row
from endless_assets.store.columns import frame
from endless_assets.store.schemas import TABLES

TABLE = "task_descriptions"


@dg.asset(
    partitions_def=batches,
    group_name="pipeline",
    kinds={"python", "parquet"},
    deps=["base_image"],
    io_manager_key="lake_io_manager",
    check_specs=[schema_check_spec(TABLE)],
    description="Stage I: one row per sampled task (instruction, privileged truth, reference "
    "solution), seeded by the batch key; rejected samples keep their row and reason. Under the "
    "frontier sampler each task's cell is drawn from the solver's history of the batches before "
    "it; the draw and the history it read are written to the task_draws and cell_history "
    "tables.",
    **table_asset(TABLE, code_version=generator_version()),
)
def task_descriptions(context: dg.AssetExecutionContext, pipeline: PipelineSettings):
    settings = pipeline.resolve()
    batch = context.partition_key
    generator = make_generator(settings, base_image_tag())
    started = time.monotonic()
    history = draw_history(pipeline.lake(), settings, generator, batch)
    plan = plan_draw(pipeline.lake(), settings, generator, batch, history)
    parents = parent_tasks(pipeline.lake(), plan)
    note = plan.reason if plan is not None else why_uniform(settings, generator, batch)
    if note:  # said once per run, not per task; a warning when the frontier was asked for
        say = context.log.warning if settings.sampling.sampler == "frontier" else context.log.info
        say(f"sampler: {note}")

    def describe(index: int) -> dict:
        seed = slot_seed(plan, batch, index, settings.run.seed)
        t0 = time.monotonic()
        try:
            draft, usage = describe_slot(generator, plan, batch, index, seed, parents)
        except GenerationError as exc:
            row = failed_description_row(
                batch,
                index,
                seed,
                generator.name,
                generator.model,
                generator.version,
                str(exc),
                exc.usage,
                time.monotonic() - t0,
                REJECTED,
            )
            return {**row, **slot_columns(plan, index)}
        return description_row(draft, usage, time.monotonic() - t0)

    def failed(index: int, exc: BaseException) -> dict:
        row = failed_description_row(
            batch,
            index,
            slot_seed(plan, batch, index, settings.run.seed),
            generator.name,
            generator.model,
            generator.version,
            f"harness: {exc!r}",
            Usage(),
            0.0,
            HARNESS_ERROR,
        )
        return {**row, **slot_columns(plan, index)}

    draw_rows = plan.rows() if plan is not None else None  # another draw's journal: not reused
    resume = resumable(
        pipeline, settings, TABLE, batch, generator, key="index", made_from=draw_rows
    )
    rows = run_parallel(
        context,
        list(range(settings.run.tasks)),
        resume.wrap(describe),
        failed,
        workers=task_parallelism(generator, settings),
        label="describe",
    )
    if generator.dedupe_threshold is not None:
        rows = reject_duplicates(rows, pipeline.lake(), generator.dedupe_threshold)
    table = frame(TABLE, rows)
    check = validate(TABLE, table, context=context)
    for name, drawn in (
        ("task_draws", draws_frame(plan)),
        ("cell_history", history_frame(history)),
    ):
        TABLES[name].validate(drawn, lazy=True)  # ours to get right: fails the step
        pipeline.lake().write(name, batch, drawn)
    ok_rows = [r for r in rows if r["status"] == OK]
    metadata = {
        "funnel_step": "describe",
        "generator": generator.name,
        "recovered_from_journal": len(resume.recovered),
        **status_metadata(table),
        **usage_metadata(table),
        **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
        **generator.run_metadata(),
        **draw_metadata(sampler_label(settings), plan, note),
    }
    if ok_rows:
        metadata["sample_task"] = dg.MetadataValue.md(task_markdown(ok_rows[0]))
        metadata["categories"] = counts_table(
            Counter(table.filter(table["status"] == OK)["category"].to_list()), "category"
        )
    return dg.MaterializeResult(value=table, metadata=metadata, check_results=[check])


def _round(value):
    return round(value, 4) if isinstance(value, float) else value


def draw_metadata(sampler: str, plan: Draw | None, note: str) -> dict:
    """The draw in the materialization's metadata: its summary, the note said once (why it is
    uniform), and the tasks per cell."""
    meta: dict = {"sampler": sampler}
    if note:
        meta["sampler_note"] = note
    if plan is None:
        return meta
    meta.update({f"draw_{k}": v for k, v in plan.summary().items() if v is not None})
    meta["draw_cells"] = counts_table(Counter(s.cell.id for s in plan.slots), "cell")
    if plan.views:  # what the solver's history window said of each cell it has seen
        seen = pl.DataFrame(
            [
                {"cell": cell.id, **{k: _round(v) for k, v in vars(view).items()}}
                for cell, view in sorted(plan.views.items())
                if view.evidence
            ]
        )
        if len(seen):
            meta["draw_history"] = frame_table(seen.sort("score", descending=True))
    return meta
