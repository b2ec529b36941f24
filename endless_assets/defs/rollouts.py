"""Stage IV asset: k attempts per task by the configured solver, each in a fresh container.

Which attempts run and which are reused is stages/attempts.py's business; each scored attempt
is persisted as it finishes (store/journal.py), so an interrupted run loses only what was in
flight. Episodes run
`Settings.episode_workers` at a time (16 for a chat model, which mostly waits on its endpoint)
while at most `workers` of them start a container or run pytest at once, so a 2-core machine
stays responsive.
"""

import contextlib
import threading
import time
from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.agent.breaker import EndpointBreaker
from endless_assets.agent.episode import EpisodeLimits, Rollout, run_episode
from endless_assets.agent.factory import policy_factory
from endless_assets.agent.policies import EpisodeTask
from endless_assets.agent.run_report import solver_run_metadata
from endless_assets.defs.columns import solver_version, table_asset
from endless_assets.defs.common import (
    counts_table,
    engines_table,
    run_parallel,
    schema_check_spec,
    timing_metadata,
    validate,
)
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.models import Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.stages.attempts import ImageCache, attempt_key, plan_attempts, with_recovered
from endless_assets.stages.rows import rollout_row, tasks_with_tests
from endless_assets.store import shards
from endless_assets.store.columns import frame
from endless_assets.store.journal import Journal

TABLE = "solver_rollouts"


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

    tasks = tasks_with_tests(task_descriptions, task_environments, completion_tests, task_soundness)
    lake = pipeline.lake()
    journal = Journal(lake.data_dir, TABLE, batch)
    recovered = journal.rows()
    stored = with_recovered(lake.read_or_empty(TABLE, batch).to_dicts(), recovered)
    shard = shards.parse(context.run.tags.get(shards.TAG))
    if shard is not None:  # a shard run: the rows of the shard's tasks only
        recovered = [r for r in recovered if shard.owns(r["task_id"])]
        stored = [r for r in stored if shard.owns(r["task_id"])]
    plan = plan_attempts(tasks, stored, policy_name, model, k)
    todo, reusable = plan.todo, plan.reusable
    workers = settings.episode_workers
    context.log.info(
        f"{len(tasks)} tasks x k={k} with {policy_name}/{model or '-'}: "
        f"{len(reusable)} scored rollouts reused ({len(recovered)} of them from the journal), "
        f"{len(todo)} to run, {workers} episodes in "
        f"parallel, at most {settings.workers} starting containers or grading at once"
    )
    docker_slots = threading.BoundedSemaphore(max(1, settings.workers))
    breaker = EndpointBreaker()
    images = ImageCache(sandbox)

    position = {(task.task_id, idx): i for i, (task, idx) in enumerate(todo)}

    def prefetch(item: tuple[Task, int]) -> None:
        """Start the container of the attempt that takes this one's place in `workers` ahead."""
        ahead = position[(item[0].task_id, item[1])] + workers
        if settings.warm_containers and ahead < len(todo):
            with contextlib.suppress(SandboxError):  # that attempt will say so itself
                sandbox.expect(images.tag(todo[ahead][0]))

    def work(item: tuple[Task, int]) -> dict:
        task, idx = item
        prefetch(item)
        if breaker.is_open:
            skipped = Rollout(
                task.task_id,
                policy_name,
                model,
                None,
                "harness_error",
                error=breaker.skipped_error(),
                prompt_version=probe.prompt_version,
            )
            return rollout_row(batch, idx, skipped)
        rollout = run_episode(
            sandbox,
            images.tag(task),
            EpisodeTask(task.task_id, task.instruction, task.reference_solution),
            make_policy(),
            task.completion_test or "",
            limits,
            labels={"task_id": task.task_id, "batch": batch, "role": f"rollout-{idx}"},
            docker_slots=docker_slots,
            warm=bool(settings.warm_containers),
        )
        if rollout.engine_failed:  # retried by run_parallel (on another engine of a pool)
            raise SandboxError(rollout.error)
        breaker.record(rollout)
        row = rollout_row(batch, idx, rollout)
        if row["reward"] is not None:  # scored: persisted now, reused if this run dies
            journal.record(attempt_key(row), row)
        return row

    def failed(item: tuple[Task, int], exc: BaseException) -> dict:
        task, idx = item
        rollout = Rollout(
            task.task_id,
            policy_name,
            model,
            None,
            "harness_error",
            error=repr(exc),
            prompt_version=probe.prompt_version,
        )
        return rollout_row(batch, idx, rollout)

    try:
        new_rows = run_parallel(
            context, todo, work, failed, workers=workers, label="rollout", recover=sandbox.recover
        )
    finally:
        sandbox.close()  # warm containers nobody took
    current_rows = [*reusable, *new_rows]
    table = frame(TABLE, [*current_rows, *plan.beyond_k, *plan.others]).sort(
        ["task_id", "policy", "model", "rollout_idx"]
    )
    check = validate(TABLE, table, spec.prefix, context=context)
    current = frame(TABLE, current_rows)
    scored = current.filter(pl.col("reward").is_not_null())
    ran_seconds = sum(r["seconds"] for r in new_rows)
    steps = sum(r["commands"] for r in new_rows)
    modes = Counter(r["failure_mode"] for r in current_rows)
    metadata = {
        "funnel_step": "IV. solver rollouts",
        "policy": policy_name,
        "model": model,
        "prompt_version": probe.prompt_version,
        "k": k,
        "tasks": len(tasks),
        "rollouts": len(current),
        "reused": len(reusable),
        "recovered_from_journal": len(recovered),
        "ran_now": len(new_rows),
        "harness_errors": len(current) - len(scored),
        "endpoint_breaker_opened": breaker.is_open,
        "mean_reward": round(float(scored["reward"].mean()), 3) if len(scored) else 0.0,
        "loops_detected": int(current["loop_detected"].sum()) if len(current) else 0,
        "tokens_in": int(current["tokens_in"].sum()) if len(current) else 0,
        "tokens_out": int(current["tokens_out"].sum()) if len(current) else 0,
        "environment_steps_now": steps,
        "other_solvers_rows_kept": len(plan.others),
        "failure_modes": counts_table(modes, "failure_mode", "rollouts"),
        "sandbox_engines": engines_table(sandbox.pool.report()),
        **solver_run_metadata(probe, current_rows, context.log.warning),  # endpoint, identical
        **timing_metadata([r["seconds"] for r in new_rows], time.monotonic() - started),
    }
    if ran_seconds > 0 and steps:
        metadata["environment_steps_per_second"] = round(
            steps / max(time.monotonic() - started, 1e-9), 2
        )
    return dg.MaterializeResult(value=table, metadata=metadata, check_results=[check])


solver_rollouts = build_solver_rollouts(GENERATED)
