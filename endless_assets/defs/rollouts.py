"""Stage IV asset: k attempts per task by the configured solver, each in a fresh container
(stages/rollouts.py does the work)."""

import time
from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.agent.run_report import solver_run_metadata
from endless_assets.defs.columns import solver_version, table_asset
from endless_assets.defs.common import (
    counts_table,
    engines_table,
    schema_check_spec,
    timing_metadata,
    validate,
)
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.stages.costs import StageMeter
from endless_assets.stages.rollouts import TABLE, run_rollouts
from endless_assets.stages.rows import tasks_with_tests
from endless_assets.store import shards
from endless_assets.store.columns import frame


def build_solver_rollouts(spec: StageSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins(
            "task_descriptions", "task_environments", "completion_tests", "task_soundness"
        ),
        partitions_def=spec.partitions_def,
        group_name=spec.group_name,
        kinds={"docker", "parquet"},
        io_manager_key="lake_io_manager",
        pool="docker",
        check_specs=[schema_check_spec(TABLE, spec.prefix)],
        description="Stage IV: one row per attempt (reward, termination, trajectory, failure "
        "analysis) for every task whose completion test was validated.",
        **table_asset(TABLE, code_version=solver_version()),
    )
    def solver_rollouts(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
        completion_tests: pl.DataFrame,
        task_soundness: pl.DataFrame,
    ):
        return _materialize(
            context,
            pipeline,
            task_descriptions,
            task_environments,
            completion_tests,
            task_soundness,
            spec,
        )

    return solver_rollouts


def _materialize(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    task_descriptions: pl.DataFrame,
    task_environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
    task_soundness: pl.DataFrame,
    spec: StageSpec,
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    sandbox = pipeline.sandbox()
    started = time.monotonic()
    meter = StageMeter(sandbox)
    tasks = tasks_with_tests(task_descriptions, task_environments, completion_tests, task_soundness)
    with meter.items():
        run = run_rollouts(
            settings,
            sandbox,
            pipeline.lake(),
            context.partition_key,
            tasks,
            log=context.log,
            shard=shards.parse(context.run.tags.get(shards.TAG)),
        )
    probe, plan, new_rows, current_rows = run.probe, run.plan, run.new_rows, run.current_rows
    table = frame(TABLE, run.all_rows).sort(["task_id", "policy", "model", "rollout_idx"])
    check = validate(TABLE, table, spec.prefix, context=context)
    current = frame(TABLE, current_rows)
    scored = current.filter(pl.col("reward").is_not_null())
    ran_seconds = sum(r["seconds"] for r in new_rows)
    steps = sum(r["commands"] for r in new_rows)
    modes = Counter(r["failure_mode"] for r in current_rows)
    metadata = {
        "funnel_step": "solver rollouts",
        "policy": probe.name,
        "model": probe.model,
        "prompt_version": probe.prompt_version,
        "k": settings.solver.attempts,
        "tasks": run.tasks,
        "rollouts": len(current),
        "reused": len(plan.reusable),
        "recovered_from_journal": len(run.recovered),
        "ran_now": len(new_rows),
        "harness_errors": len(current) - len(scored),
        "endpoint_breaker_opened": run.breaker_opened,
        "mean_reward": round(float(scored["reward"].mean()), 3) if len(scored) else 0.0,
        "loops_detected": int(current["loop_detected"].sum()) if len(current) else 0,
        "tokens_in": int(current["tokens_in"].sum()) if len(current) else 0,
        "tokens_out": int(current["tokens_out"].sum()) if len(current) else 0,
        "environment_steps_now": steps,
        "other_solvers_rows_kept": len(plan.others),
        "failure_modes": counts_table(modes, "failure_mode", "rollouts"),
        "sandbox_engines": engines_table(sandbox.pool.report()),
        **solver_run_metadata(probe, current_rows, context.log.warning),  # endpoint, identical
        **meter.metadata(),
        **timing_metadata([r["seconds"] for r in new_rows], time.monotonic() - started),
    }
    if ran_seconds > 0 and steps:
        metadata["environment_steps_per_second"] = round(
            steps / max(time.monotonic() - started, 1e-9), 2
        )
    return dg.MaterializeResult(value=table, metadata=metadata, check_results=[check])


solver_rollouts = build_solver_rollouts(GENERATED)
