"""Decontamination assets: each described task against the reference sets right after the describe
stage (a contaminated task never reaches the build stage), and a batch's kept tasks checked again
later, every field, against the references set now (stages/decontamination.py does the work)."""

import dagster as dg
import polars as pl

from endless_assets.defs.common import stage_result
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageSpec
from endless_assets.stages.decontamination import run_decontamination
from endless_assets.stages.tasks import ok_drafts, tasks_with_tests

TABLE = "task_decontamination"
RECHECK = "contamination_recheck"
INVARIANT = "every rejected task names the benchmark task it shares a field with"


def build_task_decontamination(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions"],
        invariant=INVARIANT,
        docker=False,
        description="Decontamination: every described task against the benchmarks of "
        "`decontamination_references`, field by field (instruction, tests, solution, "
        "Dockerfile, text fixtures: what the describe stage wrote); a task sharing a field with "
        "one is "
        "rejected `contaminated` and never reaches the build stage.",
    )
    def task_decontamination(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
    ):
        tasks = ok_drafts(task_descriptions)
        result = run_decontamination(
            pipeline.resolve(), tasks, TABLE, log=context.log, funnel_step="decontamination"
        )
        return stage_result(context, result, spec.prefix)

    return task_decontamination


def build_contamination_recheck(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        RECHECK,
        ["task_descriptions", "task_environments", "completion_tests", "filtered_dataset"],
        invariant=INVARIANT,
        docker=False,
        description="The batch's kept tasks checked again against the benchmarks of "
        "`decontamination_references` as they are now, every field (the Dockerfile and tests "
        "of later stages too); nothing is rebuilt or run again. `endless export` leaves the "
        "contaminated ones out.",
    )
    def contamination_recheck(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
        completion_tests: pl.DataFrame,
        filtered_dataset: pl.DataFrame,
    ):
        kept = set(filtered_dataset.filter(pl.col("kept"))["task_id"].to_list())
        tasks = tasks_with_tests(task_descriptions, task_environments, completion_tests)
        result = run_decontamination(
            pipeline.resolve(),
            [t for t in tasks if t.task_id in kept],
            RECHECK,
            log=context.log,
            kept_tasks=len(kept),
        )
        return stage_result(context, result, spec.prefix)

    return contamination_recheck


task_decontamination = build_task_decontamination(GENERATED)
imported_task_decontamination = build_task_decontamination(IMPORTED)
contamination_recheck = build_contamination_recheck(GENERATED)
imported_contamination_recheck = build_contamination_recheck(IMPORTED)
