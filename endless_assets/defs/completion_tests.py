"""Stage III asset: completion tests that fail on the initial state, pass with the reference
solution and fail after a do-nothing episode."""

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
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.generation.factory import docker_slots, task_parallelism
from endless_assets.generation.llm.cost import cost_per_task
from endless_assets.models import Task
from endless_assets.sandbox.client import SandboxError
from endless_assets.stages import HARNESS_ERROR, OK
from endless_assets.stages.completion import CompletionOutcome, check_completion_test
from endless_assets.stages.rows import (
    completion_row,
    draft_from_row,
    draft_with_environment,
    frame,
)

TABLE = "completion_tests"


def build_completion_tests(spec: StageSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins("task_descriptions", "task_environments"),
        partitions_def=spec.partitions_def,
        group_name=spec.group_name,
        kinds={"docker", "parquet"},
        io_manager_key="lake_io_manager",
        pool="docker",
        check_specs=[
            schema_check_spec(TABLE, spec.prefix),
            invariants_check_spec(
                TABLE,
                "every ok completion test failed on the initial state and after a do-nothing "
                "episode (and passed with the reference solution where that is required)",
                spec.prefix,
            ),
        ],
        description="Stage III: the final-state test per task, checked against the initial "
        "state, a do-nothing episode and the reference solution (an oracle episode).",
    )
    def completion_tests(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
    ):
        return _materialize(context, pipeline, task_descriptions, task_environments, spec)

    return completion_tests


def _materialize(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    task_descriptions: pl.DataFrame,
    task_environments: pl.DataFrame,
    spec: StageSpec,
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    sandbox = pipeline.sandbox()
    generator = spec.generator(settings, sandbox.base.tag)
    reference_required = generator.reference_required
    started = time.monotonic()
    envs = {r["task_id"]: r for r in task_environments.filter(pl.col("status") == OK).to_dicts()}
    drafts = [
        draft_with_environment(draft_from_row(row), envs[row["task_id"]])
        for row in task_descriptions.to_dicts()
        if row["task_id"] in envs
    ]
    context.log.info(f"{len(drafts)} tasks enter stage III")
    no_reference = {d.task_id for d in drafts if not d.reference_solution.strip()}

    slots = docker_slots(settings)

    def work(draft: Task) -> dict:
        with slots:
            build = sandbox.build(draft.dockerfile or "", draft.context_files)
        if not build.ok:
            raise SandboxError(f"the stage II image no longer builds: {build.log[-500:]}")
        outcome = check_completion_test(
            draft,
            build.tag,
            generator,
            sandbox,
            # A task that carries no reference solution (e.g. imported without one) cannot be
            # required to pass with it: the solver in stage IV decides whether it is solvable.
            reference_required=reference_required and bool(draft.reference_solution.strip()),
            docker_slots=slots,
        )
        return completion_row(draft, outcome)

    def failed(draft: Task, exc: BaseException) -> dict:
        out = CompletionOutcome(draft.task_id, HARNESS_ERROR, reject_reason=f"harness: {exc!r}")
        return completion_row(draft, out)

    resume = resumable(pipeline, settings, TABLE, context.partition_key, generator)
    rows = run_parallel(
        context,
        drafts,
        resume.wrap(work),
        failed,
        workers=task_parallelism(generator, settings),
        label="completion",
    )
    table = frame(TABLE, rows)
    check = validate(TABLE, table, spec.prefix, context=context)
    violations = []
    for r in rows:
        if r["status"] != OK:
            continue
        if not r["fails_on_initial"]:
            violations.append(f"{r['task_id']}: ok but did not fail on the initial state")
        if not r["fails_with_noop"]:
            violations.append(f"{r['task_id']}: ok but did not fail after a do-nothing episode")
        if (
            reference_required
            and r["task_id"] not in no_reference
            and not r["passes_with_reference"]
        ):
            violations.append(f"{r['task_id']}: ok but the reference solution fails")
    metadata = {
        "funnel_step": "III. completion test",
        "entered": len(drafts),
        "recovered_from_journal": len(resume.recovered),
        **status_metadata(table),
        **usage_metadata(table),
        **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
        **generator.run_metadata(),
    }
    if generator.model:  # what the model cost per task kept so far (I-III)
        kept = sum(1 for r in rows if r["status"] == OK)
        metadata.update(cost_per_task([task_descriptions, task_environments, table], kept))
    return dg.MaterializeResult(
        value=table,
        metadata=metadata,
        check_results=[check, invariants(TABLE, violations, spec.prefix)],
    )


completion_tests = build_completion_tests(GENERATED)
