"""The filtered dataset: each task that reached the solver stage with its score (pass@n, pass rate,
difficulty, the keep decision) and everything a trainer needs to rebuild and grade it
(stages/filter.py does the work); a generated batch's step also records what it cost."""

import dagster as dg
import polars as pl

from endless_assets.defs.common import stage_result
from endless_assets.defs.costs import record_batch_costs
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.stages.filter import TABLE, run_filter

INPUTS = (
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
    "task_soundness",
    "solver_rollouts",
)


def build_filtered_dataset(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        INPUTS,
        docker=False,
        invariant="every kept task was solved at least once and its pass rate is inside the "
        "keep band",
        description="One row per task that reached the solver stage: successes, pass@n, pass rate "
        "(difficulty), kept or not and why, and the columns needed to rebuild and grade it; its "
        "materialization carries the batch's funnel.",
    )
    def filtered_dataset(
        context: dg.AssetExecutionContext, pipeline: PipelineSettings, **tables: pl.DataFrame
    ):
        result = run_filter(pipeline.resolve(), tables)
        if not spec.imported:  # what the batch cost beside its estimate (batch_costs)
            spent = {t: tables[t] for t in INPUTS if t != "task_decontamination"}
            result.metadata.update(record_batch_costs(context, pipeline, spec, spent))
        return stage_result(context, result, spec.prefix)

    return filtered_dataset


filtered_dataset = build_filtered_dataset(GENERATED)
