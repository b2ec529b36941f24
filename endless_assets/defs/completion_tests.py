"""The validation stage asset: completion tests that fail on the initial state, pass with the
reference solution and fail after a do-nothing episode (stages/completion.py does the work)."""

import dagster as dg
import polars as pl

from endless_assets.defs.common import stage_result
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.stages.completion import run_completion_tests

TABLE = "completion_tests"


def build_completion_tests(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions", "task_environments"],
        invariant="every ok completion test failed on the initial state and after a do-nothing "
        "episode (and passed with the reference solution where that is required)",
        description="The validation stage: the final-state test per task, checked against the "
        "initial "
        "state, a do-nothing episode and the reference solution (an oracle episode).",
    )
    def completion_tests(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
    ):
        run = spec.run(context, pipeline, TABLE)
        result = run_completion_tests(run, task_descriptions, task_environments)
        return stage_result(context, result, spec.prefix)

    return completion_tests


completion_tests = build_completion_tests(GENERATED)
