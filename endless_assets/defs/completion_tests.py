"""Stage III asset: completion tests that fail on the initial state, pass with the reference
solution and fail after a do-nothing episode."""

import dagster as dg
import polars as pl

from endless_assets.defs.common import usage_metadata
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageRun, StageSpec
from endless_assets.generation.llm.cost import cost_per_task
from endless_assets.models import OK, Task
from endless_assets.stages.completion import CompletionOutcome, check_completion_test
from endless_assets.stages.rows import completion_row, draft_from_row, draft_with_environment

TABLE = "completion_tests"


def build_completion_tests(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions", "task_environments"],
        invariant="every ok completion test failed on the initial state and after a do-nothing "
        "episode (and passed with the reference solution where that is required)",
        description="Stage III: the final-state test per task, checked against the initial "
        "state, a do-nothing episode and the reference solution (an oracle episode).",
    )
    def completion_tests(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
    ):
        run = StageRun(context, pipeline, spec, TABLE)
        return _materialize(run, task_descriptions, task_environments)

    return completion_tests


def _materialize(
    run: StageRun, task_descriptions: pl.DataFrame, task_environments: pl.DataFrame
) -> dg.MaterializeResult:
    reference_required = run.generator.reference_required
    envs = {r["task_id"]: r for r in task_environments.filter(pl.col("status") == OK).to_dicts()}
    drafts = [
        draft_with_environment(draft_from_row(row), envs[row["task_id"]])
        for row in task_descriptions.to_dicts()
        if row["task_id"] in envs
    ]
    run.context.log.info(f"{len(drafts)} tasks enter stage III")
    no_reference = {d.task_id for d in drafts if not d.reference_solution.strip()}

    def work(draft: Task) -> CompletionOutcome:
        return check_completion_test(
            draft,
            run.image(draft),
            run.generator,
            run.sandbox,
            # A task that carries no reference solution (e.g. imported without one) cannot be
            # required to pass with it: the solver in stage IV decides whether it is solvable.
            reference_required=reference_required and bool(draft.reference_solution.strip()),
        )

    rows = run.each(drafts, work, completion_row, CompletionOutcome, label="completion")
    table = run.frame(rows)
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
    metadata = {**usage_metadata(table), **run.generator.run_metadata()}
    if run.generator.model:  # what the model cost per task kept so far (I-III)
        kept = sum(1 for r in rows if r["status"] == OK)
        metadata.update(cost_per_task([task_descriptions, task_environments, table], kept))
    return run.result(table, violations, funnel_step="completion test", metadata=metadata)


completion_tests = build_completion_tests(GENERATED)
