"""Stage I asset: sample the batch's task descriptions."""

import time
from collections import Counter

import dagster as dg

from endless_assets.defs.columns import generator_version, table_asset
from endless_assets.defs.common import (
    counts_table,
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
from endless_assets.models import HARNESS_ERROR, OK, REJECTED, task_seed
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.stages.rows import description_row, failed_description_row
from endless_assets.store.columns import frame

TABLE = "task_descriptions"


@dg.asset(
    partitions_def=batches,
    group_name="pipeline",
    kinds={"python", "parquet"},
    deps=["base_image"],
    io_manager_key="lake_io_manager",
    check_specs=[schema_check_spec(TABLE)],
    description="Stage I: one row per sampled task (instruction, privileged truth, reference "
    "solution), seeded by the batch key; rejected samples keep their row and reason.",
    **table_asset(TABLE, code_version=generator_version()),
)
def task_descriptions(context: dg.AssetExecutionContext, pipeline: PipelineSettings):
    settings = pipeline.resolve()
    batch = context.partition_key
    generator = make_generator(settings, base_image_tag())
    started = time.monotonic()

    def describe(index: int) -> dict:
        seed = task_seed(batch, index, settings.seed)
        t0 = time.monotonic()
        try:
            draft, usage = generator.describe(batch, index, seed)
        except GenerationError as exc:
            return failed_description_row(
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
        return description_row(draft, usage, time.monotonic() - t0)

    def failed(index: int, exc: BaseException) -> dict:
        return failed_description_row(
            batch,
            index,
            task_seed(batch, index, settings.seed),
            generator.name,
            generator.model,
            generator.version,
            f"harness: {exc!r}",
            Usage(),
            0.0,
            HARNESS_ERROR,
        )

    resume = resumable(pipeline, settings, TABLE, batch, generator, key="index")
    rows = run_parallel(
        context,
        list(range(settings.tasks)),
        resume.wrap(describe),
        failed,
        workers=task_parallelism(generator, settings),
        label="describe",
    )
    if generator.dedupe_threshold is not None:
        rows = reject_duplicates(rows, pipeline.lake(), generator.dedupe_threshold)
    table = frame(TABLE, rows)
    check = validate(TABLE, table, context=context)
    ok_rows = [r for r in rows if r["status"] == OK]
    metadata = {
        "funnel_step": "I. describe",
        "generator": generator.name,
        "recovered_from_journal": len(resume.recovered),
        **status_metadata(table),
        **usage_metadata(table),
        **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
        **generator.run_metadata(),
    }
    if ok_rows:
        metadata["sample_task"] = dg.MetadataValue.md(task_markdown(ok_rows[0]))
        metadata["categories"] = counts_table(
            Counter(table.filter(table["status"] == OK)["category"].to_list()), "category"
        )
    return dg.MaterializeResult(value=table, metadata=metadata, check_results=[check])
