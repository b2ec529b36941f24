"""The `plan_batch` job: what a batch of the settings in the launchpad will cost (stages/costs.py
estimates it), running nothing and writing nothing to the lake."""

import dagster as dg
import polars as pl

from endless_assets.defs.metadata import frame_table
from endless_assets.defs.resources import PipelineSettings
from endless_assets.stages.costs import basis_markdown, estimate_for


@dg.op(
    description="Prints what a batch of the settings in `resources.pipeline.config` will cost "
    "(`endless run --plan`): LLM requests and tokens, containers, engine CPU-seconds and wall "
    "time per stage, from this instance's history of batches with those settings, or a stated "
    "prior. Runs nothing and writes nothing to the lake."
)
def estimate_batch_cost(context: dg.OpExecutionContext, pipeline: PipelineSettings):
    settings = pipeline.resolve()
    planned = estimate_for(settings, pipeline.lake())
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
