"""The solver stage asset: k attempts per task by the configured solver, each in a fresh container
(stages/rollouts.py does the work)."""

import dagster as dg
import polars as pl

from endless_assets.defs.common import stage_result
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.stages.rollouts import TABLE, run_rollouts, solver_version
from endless_assets.stages.tasks import tasks_with_tests


def build_solver_rollouts(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions", "task_environments", "completion_tests", "task_soundness"],
        code_version=solver_version(),
        description="The solver stage: one row per attempt (reward, termination, trajectory, "
        "failure "
        "analysis) for every task whose completion test was validated.",
    )
    def solver_rollouts(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
        completion_tests: pl.DataFrame,
        task_soundness: pl.DataFrame,
    ):
        run = run_rollouts(
            pipeline.resolve(),
            pipeline.sandbox(),
            pipeline.lake(),
            context.partition_key,
            tasks_with_tests(
                task_descriptions, task_environments, completion_tests, task_soundness
            ),
            log=context.log,
            run_tags=context.run.tags,
        )
        return stage_result(context, run.result(context.log.warning), spec.prefix)

    return solver_rollouts


solver_rollouts = build_solver_rollouts(GENERATED)
