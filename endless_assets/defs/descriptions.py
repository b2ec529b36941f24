"""The describe stage asset: sample the batch's task descriptions, with the frontier draw and the
history it read as two more tables (stages/describe.py does the work)."""

import dagster as dg

from endless_assets.defs.columns import table_asset
from endless_assets.defs.common import schema_check_spec, validate
from endless_assets.defs.metadata import ui_metadata
from endless_assets.defs.partitions import batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.stages.describe import TABLE, generator_version, run_describe

DRAW_TABLES = ("task_draws", "cell_history")


def _out(table: str, description: str, **kwargs) -> dg.AssetOut:
    return dg.AssetOut(
        key=table,
        kinds={"python", "parquet"},
        io_manager_key="lake_io_manager",
        description=description,
        **table_asset(table, **kwargs),
    )


@dg.multi_asset(
    outs={
        TABLE: _out(
            TABLE,
            "The describe stage: one row per sampled task (instruction, privileged truth, "
            "reference "
            "solution), seeded by the batch key; rejected samples keep their row and reason. "
            "Under the frontier sampler each task's cell is drawn from the solver's history of "
            "the batches before it (task_draws, cell_history).",
            code_version=generator_version(),
        ),
        "task_draws": _out("task_draws", "The cell each task of the batch was drawn from."),
        "cell_history": _out(
            "cell_history", "What the solver made of each cell in the batches before the draw."
        ),
    },
    name="task_descriptions",
    partitions_def=batches,
    group_name="pipeline",
    deps=["base_image"],
    check_specs=[schema_check_spec(table) for table in (TABLE, *DRAW_TABLES)],
)
def task_descriptions(context: dg.AssetExecutionContext, pipeline: PipelineSettings):
    run = run_describe(pipeline.resolve(), pipeline.lake(), context.partition_key, log=context.log)
    frames = {TABLE: run.frame(), "task_draws": run.draws, "cell_history": run.history}
    checks = {table: validate(table, frame, context=context) for table, frame in frames.items()}
    for table, frame in frames.items():
        metadata = ui_metadata(run.metadata) if table == TABLE else {}
        yield dg.Output(frame, output_name=table, metadata=metadata)
        yield checks[table]
