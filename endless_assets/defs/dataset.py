"""The filtered dataset: each task that reached stage IV with its score (pass@n, pass rate,
difficulty, the keep decision) and everything a trainer needs to rebuild and grade it."""

import time
from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.agent.factory import policy_factory
from endless_assets.defs.columns import table_asset
from endless_assets.defs.common import (
    counts_table,
    frame_table,
    invariants,
    invariants_check_spec,
    schema_check_spec,
    task_markdown,
    validate,
)
from endless_assets.defs.costs import record_batch_costs
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.models import score_tasks
from endless_assets.sampling.measures import cost_per_learnable, learnable_share, task_costs
from endless_assets.stages.funnel import batch_funnel
from endless_assets.stages.rows import filtered_row, tasks_with_tests
from endless_assets.store.columns import frame

TABLE = "filtered_dataset"


def build_filtered_dataset(spec: StageSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins(
            "task_descriptions",
            "task_decontamination",
            "task_environments",
            "completion_tests",
            "task_soundness",
            "solver_rollouts",
        ),
        partitions_def=spec.partitions_def,
        group_name=spec.group_name,
        kinds={"python", "parquet"},
        io_manager_key="lake_io_manager",
        check_specs=[
            schema_check_spec(TABLE, spec.prefix),
            invariants_check_spec(
                TABLE,
                "every kept task was solved at least once and its pass rate is inside the keep "
                "band",
                spec.prefix,
            ),
        ],
        description="One row per task that reached stage IV: successes, pass@n, pass rate "
        "(difficulty), kept or not and why, and the columns needed to rebuild and grade it; its "
        "materialization carries the batch's funnel.",
        **table_asset(TABLE),
    )
    def filtered_dataset(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_decontamination: pl.DataFrame,
        task_environments: pl.DataFrame,
        completion_tests: pl.DataFrame,
        task_soundness: pl.DataFrame,
        solver_rollouts: pl.DataFrame,
    ):
        return _materialize(
            context,
            pipeline,
            task_descriptions,
            task_decontamination,
            task_environments,
            completion_tests,
            task_soundness,
            solver_rollouts,
            spec,
        )

    return filtered_dataset


def _materialize(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    task_descriptions: pl.DataFrame,
    task_decontamination: pl.DataFrame,
    task_environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
    task_soundness: pl.DataFrame,
    solver_rollouts: pl.DataFrame,
    spec: StageSpec,
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    started = time.monotonic()
    probe = policy_factory(settings)()
    rule = settings.keep.rule()
    solver = f"{probe.name}/{probe.model}" if probe.model else probe.name
    rollouts = solver_rollouts.filter(
        (pl.col("policy") == probe.name)
        & (pl.col("model") == probe.model)
        & (pl.col("rollout_idx") < settings.solver.attempts)
    )
    by_task: dict[str, list[dict]] = {}
    for r in rollouts.to_dicts():
        by_task.setdefault(r["task_id"], []).append(r)
    images = {r["task_id"]: r["image_tag"] for r in task_environments.to_dicts()}
    rows = [
        filtered_row(task, images[task.task_id])
        for task in score_tasks(
            tasks_with_tests(
                task_descriptions, task_environments, completion_tests, task_soundness
            ),
            by_task,
            rule,
            solver_model=solver,
            solver_policy=probe.name,
        )
    ]
    table = frame(TABLE, rows)
    check = validate(TABLE, table, spec.prefix, context=context)
    violations = [
        f"{r['task_id']}: kept with {r['successes']} successes and pass rate {r['pass_rate']:.2f}"
        for r in rows
        if r["kept"]
        and (r["successes"] < 1 or not rule.min_pass_rate <= r["pass_rate"] <= rule.max_pass_rate)
    ]
    kept_rows = [r for r in rows if r["kept"]]
    reasons = Counter(r["drop_reason"].split(": ", 1)[0] for r in rows if not r["kept"])
    metadata = {
        "funnel_step": "solver filter",
        "entered": len(rows),
        "kept": len(kept_rows),
        "dropped": len(rows) - len(kept_rows),
        "solver": solver,
        "keep_rule": rule.describe(),
        "mean_pass_rate": round(sum(r["pass_rate"] for r in rows) / len(rows), 3) if rows else 0.0,
        "wall_seconds": round(time.monotonic() - started, 2),
    }
    # The batch's path from described to kept, with the top reason per step (always there; a
    # step nothing dropped out of has an empty reason).
    metadata["funnel"] = frame_table(
        batch_funnel(
            {
                "task_descriptions": task_descriptions,
                "task_decontamination": task_decontamination,
                "task_environments": task_environments,
                "completion_tests": completion_tests,
                "task_soundness": task_soundness,
                "filtered_dataset": table,
            }
        )
    )
    metadata.update(
        learnable_metadata(
            table,
            [
                task_descriptions,
                task_environments,
                completion_tests,
                task_soundness,
                solver_rollouts,
            ],
            [task_environments, completion_tests, task_soundness, solver_rollouts],
        )
    )
    if reasons:
        metadata["drop_reasons"] = counts_table(reasons, "reason")
    if spec is GENERATED:  # what the batch cost beside its estimate (batch_costs)
        stage_frames = {
            "task_descriptions": task_descriptions,
            "task_environments": task_environments,
            "completion_tests": completion_tests,
            "task_soundness": task_soundness,
            "solver_rollouts": solver_rollouts,
        }
        metadata.update(record_batch_costs(context, pipeline, spec, stage_frames))
    if kept_rows:
        metadata["sample_task"] = dg.MetadataValue.md(task_markdown(kept_rows[0]))
    return dg.MaterializeResult(
        value=table,
        metadata=metadata,
        check_results=[check, invariants(TABLE, violations, spec.prefix)],
    )


def learnable_metadata(
    table: pl.DataFrame, token_frames: list[pl.DataFrame], container_frames: list[pl.DataFrame]
) -> dict:
    """The batch's learnable share (kept tasks with 0 < pass rate < 1) and what each learnable
    task cost: every token and container second spent on the batch's tasks, kept or not (a
    figure with nothing to divide by is left out)."""
    if table.is_empty():
        return {"learnable": 0}
    share = learnable_share(table).row(0, named=True)
    costs = cost_per_learnable(table, task_costs(token_frames, container_frames))
    cost = costs.row(0, named=True) if len(costs) else {}
    figures = {
        "learnable": share["learnable"],
        "learnable_share": share["learnable_share"],
        "tokens_per_learnable": cost.get("tokens_per_learnable"),
        "container_seconds_per_learnable": cost.get("container_seconds_per_learnable"),
    }
    return {
        k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items() if v is not None
    }


filtered_dataset = build_filtered_dataset(GENERATED)
