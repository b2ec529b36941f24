"""The build stage asset: build each task's environment and check its initial state
(stages/environment.py does the work)."""

import dagster as dg
import polars as pl

from endless_assets.defs.common import stage_result
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.stages.environment import run_environments

TABLE = "task_environments"


def build_task_environments(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions", "task_decontamination"],
        invariant="every ok environment has a built image",
        description="The build stage: a Dockerfile on the base image and an initial-state test per "
        "task; built and run; repaired with the error as feedback where the generator can.",
    )
    def task_environments(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_decontamination: pl.DataFrame,
    ):
        run = spec.run(context, pipeline, TABLE)
        network = pipeline.imported_build_network(run.settings) if spec.imported else None
        result = run_environments(run, task_descriptions, task_decontamination, network)
        return stage_result(context, result, spec.prefix)

    return task_environments


task_environments = build_task_environments(GENERATED)
