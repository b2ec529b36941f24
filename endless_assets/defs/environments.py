"""Stage II asset: build each task's environment and check its initial state."""

import os
import time

import dagster as dg
import polars as pl

from endless_assets.defs.common import (
    invariants,
    invariants_check_spec,
    resumable,
    run_parallel,
    schema_check_spec,
    status_metadata,
    timing_metadata,
    usage_metadata,
    validate,
)
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageSpec
from endless_assets.generation.factory import docker_slots, task_parallelism
from endless_assets.models import Task
from endless_assets.settings import FIELDS, Settings
from endless_assets.stages import HARNESS_ERROR, OK
from endless_assets.stages.environment import EnvironmentOutcome, build_environment
from endless_assets.stages.rows import draft_from_row, environment_row, frame

TABLE = "task_environments"


def build_task_environments(spec: StageSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins("task_descriptions"),
        partitions_def=spec.partitions_def,
        group_name=spec.group_name,
        kinds={"docker", "parquet"},
        io_manager_key="lake_io_manager",
        pool="docker",
        check_specs=[
            schema_check_spec(TABLE, spec.prefix),
            invariants_check_spec(TABLE, "every ok environment has a built image", spec.prefix),
        ],
        description="Stage II: a Dockerfile on the base image and an initial-state test per "
        "task; built and run; repaired with the error as feedback where the generator can.",
    )
    def task_environments(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
    ):
        return _materialize(context, pipeline, task_descriptions, spec)

    return task_environments


def _materialize(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    task_descriptions: pl.DataFrame,
    spec: StageSpec,
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    sandbox = pipeline.sandbox()
    generator = spec.generator(settings, sandbox.base.tag)
    started = time.monotonic()
    drafts = [
        draft_from_row(row) for row in task_descriptions.filter(pl.col("status") == OK).to_dicts()
    ]
    context.log.info(f"{len(drafts)} tasks enter stage II")

    slots = docker_slots(settings)
    imported = spec.prefix == IMPORTED.prefix
    network = imported_build_network(pipeline, settings) if imported else None
    if network is False:
        context.log.info(
            "imported Dockerfiles build without a network (set build_network explicitly, "
            "e.g. ENDLESS_BUILD_NETWORK=1, to give their RUN steps the host's)"
        )

    def work(draft: Task) -> dict:
        outcome = build_environment(
            draft, generator, sandbox, docker_slots=slots, build_network=network
        )
        return environment_row(draft, outcome)

    def failed(draft: Task, exc: BaseException) -> dict:
        out = EnvironmentOutcome(draft.task_id, HARNESS_ERROR, reject_reason=f"harness: {exc!r}")
        return environment_row(draft, out)

    resume = resumable(pipeline, settings, TABLE, context.partition_key, generator)
    rows = run_parallel(
        context,
        drafts,
        resume.wrap(work),
        failed,
        workers=task_parallelism(generator, settings),
        label="environment",
    )
    table = frame(TABLE, rows)
    check = validate(TABLE, table, spec.prefix, context=context)
    violations = [
        f"{r['task_id']}: status ok without an image"
        for r in rows
        if r["status"] == OK and not r["image_id"]
    ]
    metadata = {
        "funnel_step": "II. environment",
        "entered": len(drafts),
        "recovered_from_journal": len(resume.recovered),
        **status_metadata(table),
        **usage_metadata(table),
        **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
        "repair_rounds_used": int(table["attempts"].sum()) if len(table) else 0,
        **generator.run_metadata(),
    }
    return dg.MaterializeResult(
        value=table,
        metadata=metadata,
        check_results=[check, invariants(TABLE, violations, spec.prefix)],
    )


def imported_build_network(pipeline: PipelineSettings, settings: Settings) -> bool:
    """May RUN steps of imported Dockerfiles reach the network? Only if `build_network` is set
    explicitly (resource config, or its environment variable), not by its default.

    A build with a network uses the host's (dockerd runs without iptables here, so the default
    bridge has no route out), where a RUN step reaches every service of the build host,
    loopback included; an imported Dockerfile is someone else's code."""
    env = next(f.env for f in FIELDS if f.name == "build_network")
    explicit = pipeline.build_network is not None or bool(os.environ.get(env, "").strip())
    return explicit and settings.build_network


task_environments = build_task_environments(GENERATED)
