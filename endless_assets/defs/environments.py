"""Stage II asset: build each task's environment and check its initial state."""

import os

import dagster as dg
import polars as pl

from endless_assets.defs.common import usage_metadata
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageRun, StageSpec
from endless_assets.models import OK, Task
from endless_assets.settings import FIELDS, Settings
from endless_assets.stages.environment import EnvironmentOutcome, build_environment
from endless_assets.stages.rows import draft_from_row, environment_row

TABLE = "task_environments"


def build_task_environments(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions", "task_decontamination"],
        invariant="every ok environment has a built image",
        description="Stage II: a Dockerfile on the base image and an initial-state test per "
        "task; built and run; repaired with the error as feedback where the generator can.",
    )
    def task_environments(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_decontamination: pl.DataFrame,
    ):
        contaminated = task_decontamination.filter(pl.col("status") != OK)["task_id"]
        clean = task_descriptions.filter(~pl.col("task_id").is_in(contaminated.to_list()))
        return _materialize(StageRun(context, pipeline, spec, TABLE), clean)

    return task_environments


def _materialize(run: StageRun, task_descriptions: pl.DataFrame) -> dg.MaterializeResult:
    drafts = [
        draft_from_row(row) for row in task_descriptions.filter(pl.col("status") == OK).to_dicts()
    ]
    run.context.log.info(f"{len(drafts)} tasks enter stage II")

    imported = run.spec.prefix == IMPORTED.prefix
    network = imported_build_network(run.pipeline, run.settings) if imported else None
    if network is False:
        run.context.log.info(
            "imported Dockerfiles build without a network (set build_network explicitly, "
            "e.g. ENDLESS_BUILD_NETWORK=1, to let their RUN steps reach the registries)"
        )

    def work(draft: Task) -> EnvironmentOutcome:
        return build_environment(draft, run.generator, run.sandbox, build_network=network)

    rows = run.each(drafts, work, environment_row, EnvironmentOutcome, label="environment")
    table = run.frame(rows)
    violations = [
        f"{r['task_id']}: status ok without an image"
        for r in rows
        if r["status"] == OK and not r["image_id"]
    ]
    metadata = {
        **usage_metadata(table),
        "repair_rounds_used": int(table["attempts"].sum()) if len(table) else 0,
        **run.generator.run_metadata(),
    }
    return run.result(table, violations, funnel_step="environment", metadata=metadata)


def imported_build_network(pipeline: PipelineSettings, settings: Settings) -> bool:
    """May RUN steps of imported Dockerfiles reach the network? Only if `build_network` is set
    explicitly (resource config, or its environment variable), not by its default.

    A build with a network reaches the package registries through a proxy of ours, never this
    host's services or a container (sandbox/image/build_network.py), but whatever else the
    machine's uplink reaches; an imported Dockerfile is someone else's code."""
    env = next(f.env for f in FIELDS if f.name == "build_network")
    explicit = pipeline.build_network is not None or bool(os.environ.get(env, "").strip())
    return explicit and settings.sandbox.build_network


task_environments = build_task_environments(GENERATED)
