"""Decontamination assets: each described task against the reference sets right after stage I (a
contaminated task never reaches stage II), and a batch's kept tasks checked again later, every
field, against the references set now (stages/decontamination.py does the work)."""

from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.defs.common import (
    counts_table,
    invariants,
    status_metadata,
    validate,
)
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageSpec
from endless_assets.models import REJECTED, Task
from endless_assets.settings import Settings
from endless_assets.stages.decontamination import Checker, checker
from endless_assets.stages.rows import draft_from_row, now, tasks_with_tests
from endless_assets.store.columns import frame

TABLE = "task_decontamination"
RECHECK = "contamination_recheck"
INVARIANT = "every rejected task names the benchmark task it shares a field with"


def _checker(context: dg.AssetExecutionContext, settings: Settings) -> Checker:
    found = checker(
        settings.decontamination.references,
        settings.decontamination.ngrams,
        settings.decontamination.fuzzy,
        settings.run.data_dir,
    )
    if not found.references.tasks:
        context.log.info("no reference set to check against (decontamination_references)")
    else:
        context.log.info(
            f"checking against {found.sets} ({len(found.references.tasks)} benchmark tasks; "
            f"{found.decontaminator.index.summary()})"
        )
    return found


def _rows(found: Checker, tasks: list[Task]) -> list[dict]:
    return [{**found.check(task).row(), "created_at": now()} for task in tasks]


def _result(
    context: dg.AssetExecutionContext,
    spec: StageSpec,
    table_name: str,
    found: Checker,
    rows: list[dict],
    extra: dict,
) -> dg.MaterializeResult:
    table = frame(table_name, rows)
    check = validate(table_name, table, spec.prefix, context=context)
    violations = [
        f"{r['task_id']}: rejected without a contaminated: reason"
        for r in rows
        if r["status"] == REJECTED and not r["reject_reason"].startswith("contaminated: ")
    ]
    rejected = [r for r in rows if r["status"] == REJECTED]
    sources = Counter(
        r["reject_reason"].split(" (", 1)[0].removeprefix("contaminated: ") for r in rejected
    )
    metadata = {
        **extra,
        "entered": len(rows),
        **status_metadata(table),
        "reference_sets": found.sets or "none",
        "thresholds": found.describe_thresholds(),
        "contaminated": len(rejected),
        "unreadable_reference_tasks": len(found.references.unreadable),
    }
    if rejected:
        metadata["benchmark_tasks"] = counts_table(sources, "benchmark task")
    return dg.MaterializeResult(
        value=table,
        metadata=metadata,
        check_results=[check, invariants(table_name, violations, spec.prefix)],
    )


def build_task_decontamination(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions"],
        invariant=INVARIANT,
        docker=False,
        description="Decontamination: every described task against the benchmarks of "
        "`decontamination_references`, field by field (instruction, tests, solution, "
        "Dockerfile, text fixtures: what stage I wrote); a task sharing a field with one is "
        "rejected `contaminated` and never reaches stage II.",
    )
    def task_decontamination(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
    ):
        settings = pipeline.resolve()
        found = _checker(context, settings)
        ok = task_descriptions.filter(pl.col("status") == "ok").to_dicts()
        rows = _rows(found, [draft_from_row(row) for row in ok])
        extra = {"funnel_step": "decontamination"}
        return _result(context, spec, TABLE, found, rows, extra)

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
        settings = pipeline.resolve()
        found = _checker(context, settings)
        kept = set(filtered_dataset.filter(pl.col("kept"))["task_id"].to_list())
        tasks = tasks_with_tests(task_descriptions, task_environments, completion_tests)
        rows = _rows(found, [t for t in tasks if t.task_id in kept])
        return _result(context, spec, RECHECK, found, rows, {"kept_tasks": len(kept)})

    return contamination_recheck


task_decontamination = build_task_decontamination(GENERATED)
imported_task_decontamination = build_task_decontamination(IMPORTED)
contamination_recheck = build_contamination_recheck(GENERATED)
imported_contamination_recheck = build_contamination_recheck(IMPORTED)
