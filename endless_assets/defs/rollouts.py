"""Stage IV asset: k attempts per task by the configured solver, each in a fresh container.

Rows of other solvers already in the partition are kept, so two models' pass rates compare in
one query. Re-materializing reuses this solver's scored rollouts and runs only the missing or
`harness_error` ones.
"""

import json
import time
from typing import Any

import dagster as dg
import polars as pl

from endless_assets.agent.episode import EpisodeLimits, Rollout, run_episode
from endless_assets.agent.factory import policy_factory
from endless_assets.agent.policies import EpisodeTask
from endless_assets.defs.common import run_parallel, schema_check_spec, timing_metadata, validate
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.sandbox.client import SandboxError
from endless_assets.stages import OK
from endless_assets.stages.rows import frame, rollout_row

TABLE = "solver_rollouts"


def build_solver_rollouts(spec: StageSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins("task_descriptions", "task_environments", "completion_tests"),
        partitions_def=spec.partitions_def,
        group_name=spec.group_name,
        kinds={"docker", "parquet"},
        io_manager_key="lake_io_manager",
        pool="docker",
        check_specs=[schema_check_spec(TABLE, spec.prefix)],
        description="Stage IV: one row per attempt (reward, termination, trajectory, failure "
        "analysis) for every task whose completion test was validated.",
    )
    def solver_rollouts(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
        completion_tests: pl.DataFrame,
    ):
        return _materialize(
            context, pipeline, task_descriptions, task_environments, completion_tests, spec
        )

    return solver_rollouts


def _materialize(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    task_descriptions: pl.DataFrame,
    task_environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
    spec: StageSpec,
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    sandbox = pipeline.sandbox()
    batch = context.partition_key
    make_policy = policy_factory(settings)
    probe = make_policy()
    policy_name, model = probe.name, probe.model
    k = settings.attempts
    limits = EpisodeLimits(
        max_turns=settings.max_turns,
        command_timeout=settings.command_timeout,
        episode_seconds=settings.episode_seconds,
        output_cap=settings.output_cap,
    )
    started = time.monotonic()

    tests = {r["task_id"]: r for r in completion_tests.filter(pl.col("status") == OK).to_dicts()}
    envs = {r["task_id"]: r for r in task_environments.to_dicts()}
    tasks = [r for r in task_descriptions.to_dicts() if r["task_id"] in tests]

    previous = pipeline.lake().read_or_empty(TABLE, batch)
    mine = (pl.col("policy") == policy_name) & (pl.col("model") == model)
    others = previous.filter(~mine) if len(previous) else previous
    reusable = (
        {
            (r["task_id"], r["rollout_idx"]): r
            for r in previous.filter(mine & (pl.col("termination") != "harness_error")).to_dicts()
            if r["task_id"] in tests and r["rollout_idx"] < k
        }
        if len(previous)
        else {}
    )
    todo = [
        (task, idx) for task in tasks for idx in range(k) if (task["task_id"], idx) not in reusable
    ]
    context.log.info(
        f"{len(tasks)} tasks x k={k} with {policy_name}/{model or '-'}: "
        f"{len(reusable)} scored rollouts reused, {len(todo)} to run"
    )

    def work(item: tuple[dict[str, Any], int]) -> dict:
        task, idx = item
        env = envs[task["task_id"]]
        build = sandbox.build(env["dockerfile"], json.loads(env["context_files"] or "{}"))
        if not build.ok:
            raise SandboxError(f"the task image no longer builds: {build.log[-500:]}")
        rollout = run_episode(
            sandbox,
            build.tag,
            EpisodeTask(task["task_id"], task["instruction"], task["reference_solution"]),
            make_policy(),
            tests[task["task_id"]]["completion_test"],
            limits,
            labels={"task_id": task["task_id"], "batch": batch, "role": f"rollout-{idx}"},
        )
        return rollout_row(batch, idx, rollout)

    def failed(item: tuple[dict[str, Any], int], exc: BaseException) -> dict:
        task, idx = item
        rollout = Rollout(
            task["task_id"], policy_name, model, None, "harness_error", error=repr(exc)
        )
        return rollout_row(batch, idx, rollout)

    new_rows = run_parallel(context, todo, work, failed, workers=settings.workers, label="rollout")
    rows = [*reusable.values(), *new_rows]
    table = (
        pl.concat([frame(TABLE, rows), others], how="vertical_relaxed")
        if len(others)
        else frame(TABLE, rows)
    )
    table = table.sort(["task_id", "policy", "model", "rollout_idx"])
    check = validate(TABLE, table, spec.prefix)
    current = table.filter(mine)
    scored = current.filter(pl.col("termination") != "harness_error")
    metadata = {
        "funnel_step": "IV. solver rollouts",
        "policy": policy_name,
        "model": model,
        "k": k,
        "tasks": len(tasks),
        "rollouts": len(current),
        "reused": len(reusable),
        "ran_now": len(new_rows),
        "harness_errors": len(current) - len(scored),
        "mean_reward": round(float(scored["reward"].mean()), 3) if len(scored) else 0.0,
        "loops_detected": int(current["loop_detected"].sum()) if len(current) else 0,
        "other_solvers_rows_kept": len(others),
        **timing_metadata([r["seconds"] for r in new_rows], time.monotonic() - started),
    }
    return dg.MaterializeResult(value=table, metadata=metadata, check_results=[check])


solver_rollouts = build_solver_rollouts(GENERATED)
