"""The solver stage: k attempts per task by the configured solver, each in a fresh container (no
Dagster here). attempts.py decides which attempts run and which are reused; each scored attempt
is journaled as it finishes. `SolverSettings.episode_workers` episodes run at a time while at most
`workers` of them start a container or run pytest at once (the sandbox's CPU slots)."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from endless_assets.agent.breaker import EndpointBreaker
from endless_assets.agent.chat import SolverPrompts
from endless_assets.agent.episode import Rollout, run_episode
from endless_assets.agent.factory import policy_factory
from endless_assets.agent.policies import EpisodeTask, Policy
from endless_assets.agent.run_report import solver_run_metadata
from endless_assets.models import Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.solver_id import SolverId
from endless_assets.stages.attempts import (
    AttemptPlan,
    ImageCache,
    attempt_key,
    plan_attempts,
    with_recovered,
)
from endless_assets.stages.costs import StageMeter
from endless_assets.stages.runner import Log, now, run_parallel
from endless_assets.stages.stage_run import Counts, StageResult, timing_metadata
from endless_assets.store import shards
from endless_assets.store.failure_modes import analysis_columns
from endless_assets.store.journal import Journal
from endless_assets.store.lake import Lake

TABLE = "solver_rollouts"
ENGINE_COLUMNS = ("engine", "slots", "placed", "up", "down_reason")  # of EnginePool.report


@functools.cache
def solver_version() -> str:
    """The chat solver's prompts' hash."""
    return SolverPrompts.load().version


@dataclass(frozen=True)
class Attempt:
    """One attempt's rollout and its index among the task's attempts."""

    batch: str
    rollout_idx: int
    rollout: Rollout

    def row(self) -> dict[str, Any]:
        """The attempt's `solver_rollouts` row, with its failure analysis."""
        rollout = self.rollout
        trajectory = rollout.trajectory()
        return {
            "task_id": rollout.task_id,
            "batch": self.batch,
            "rollout_idx": self.rollout_idx,
            "policy": rollout.policy,
            "model": rollout.model,
            "prompt_version": rollout.prompt_version,
            "reward": rollout.reward,
            "termination": rollout.termination,
            "n_turns": rollout.n_turns,
            "trajectory": json.dumps(trajectory, ensure_ascii=False),
            "messages": json.dumps(rollout.messages, ensure_ascii=False),
            "verdict": rollout.verdict.summary() if rollout.verdict else "",
            "error": rollout.error,
            "tokens_in": rollout.tokens_in,
            "tokens_out": rollout.tokens_out,
            "seconds": rollout.seconds,
            "queue_seconds": rollout.queue_seconds,
            **analysis_columns(trajectory, rollout.termination, rollout.reward),
            "created_at": now(),
        }


@dataclass
class RolloutRun:
    """What one run of the solver stage made: the plan, the rows run now, the solver's probe."""

    probe: Policy
    tasks: int
    plan: AttemptPlan
    recovered: list[dict[str, Any]]
    new_rows: list[dict[str, Any]] = field(default_factory=list)
    breaker_opened: bool = False
    k: int = 0
    meter: StageMeter | None = None
    engines: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def current_rows(self) -> list[dict[str, Any]]:
        """This solver's rows for today's k: the reused ones and those run now."""
        return [*self.plan.reusable, *self.new_rows]

    @property
    def all_rows(self) -> list[dict[str, Any]]:
        """Every row the partition keeps: also attempts beyond k and other solvers' rows."""
        return [*self.current_rows, *self.plan.beyond_k, *self.plan.others]

    def result(self, warn: Callable[[str], object]) -> StageResult:
        """Every row the partition keeps, and the run's metadata (of this solver's rows for
        today's k); `warn` is told of identical attempts."""
        rows = sorted(
            self.all_rows, key=lambda r: (r["task_id"], r["policy"], r["model"], r["rollout_idx"])
        )
        current, new = self.current_rows, self.new_rows
        scored = [r["reward"] for r in current if r["reward"] is not None]
        steps = sum(r["commands"] for r in new)
        modes = Counter(r["failure_mode"] for r in current)
        wall = time.monotonic() - self.started
        metadata: dict[str, Any] = {
            "funnel_step": "solver rollouts",
            "policy": self.probe.name,
            "model": self.probe.model,
            "prompt_version": self.probe.prompt_version,
            "k": self.k,
            "tasks": self.tasks,
            "rollouts": len(current),
            "reused": len(self.plan.reusable),
            "recovered_from_journal": len(self.recovered),
            "ran_now": len(new),
            "harness_errors": len(current) - len(scored),
            "endpoint_breaker_opened": self.breaker_opened,
            "mean_reward": round(sum(scored) / len(scored), 3) if scored else 0.0,
            "loops_detected": sum(bool(r["loop_detected"]) for r in current),
            "tokens_in": sum(r["tokens_in"] or 0 for r in current),
            "tokens_out": sum(r["tokens_out"] or 0 for r in current),
            "environment_steps_now": steps,
            "other_solvers_rows_kept": len(self.plan.others),
            "failure_modes": Counts(modes, "failure_mode", "rollouts"),
            "sandbox_engines": pl.DataFrame(self.engines),
            **solver_run_metadata(self.probe, current, warn),  # endpoint, identical attempts
            **(self.meter.metadata() if self.meter else {}),
            **timing_metadata([r["seconds"] for r in new], wall),
        }
        if steps and sum(r["seconds"] for r in new) > 0:
            metadata["environment_steps_per_second"] = round(steps / max(wall, 1e-9), 2)
        return StageResult(TABLE, rows, metadata=metadata)


def run_rollouts(
    settings: Settings,
    sandbox: Sandbox,
    lake: Lake,
    batch: str,
    tasks: list[Task],
    *,
    log: Log,
    run_tags: Mapping[str, str] | None = None,
) -> RolloutRun:
    """Run the attempts the partition still lacks for `tasks` (of its shard only, in a shard
    run), and close the sandbox's warm containers."""
    started, meter = time.monotonic(), StageMeter(sandbox)
    make_policy = policy_factory(settings)
    probe = make_policy()
    policy_name, model = probe.name, probe.model
    k = settings.solver.attempts
    limits = settings.solver.limits()
    journal = Journal(lake.data_dir, TABLE, batch)
    recovered = journal.rows()
    stored = with_recovered(lake.read_or_empty(TABLE, batch).to_dicts(), recovered)
    shard = shards.parse((run_tags or {}).get(shards.TAG))
    if shard is not None:  # a shard run: the rows of the shard's tasks only
        recovered = [r for r in recovered if shard.owns(r["task_id"])]
        stored = [r for r in stored if shard.owns(r["task_id"])]
    plan = plan_attempts(tasks, stored, policy_name, model, k)
    todo = plan.todo
    workers = settings.solver.episode_workers(settings.run.workers)
    log.info(
        f"{len(tasks)} tasks x k={k} with {SolverId(policy_name, model)}: "
        f"{len(plan.reusable)} scored rollouts reused ({len(recovered)} of them from the "
        f"journal), {len(todo)} to run, {workers} episodes in "
        f"parallel, at most {settings.run.workers} starting containers or grading at once"
    )
    breaker = EndpointBreaker()
    images = ImageCache(sandbox)
    position = {(task.task_id, idx): i for i, (task, idx) in enumerate(todo)}

    def harness_error(task: Task, idx: int, error: str) -> dict:
        rollout = Rollout(
            task.task_id,
            policy_name,
            model,
            None,
            "harness_error",
            error=error,
            prompt_version=probe.prompt_version,
        )
        return Attempt(batch, idx, rollout).row()

    def prefetch(item: tuple[Task, int]) -> None:
        """Start the container of the attempt that takes this one's place in `workers` ahead."""
        ahead = position[(item[0].task_id, item[1])] + workers
        if settings.sandbox.warm_containers and ahead < len(todo):
            with contextlib.suppress(SandboxError):  # that attempt will say so itself
                sandbox.expect(images.tag(todo[ahead][0]))

    def work(item: tuple[Task, int]) -> dict:
        task, idx = item
        prefetch(item)
        if breaker.is_open:
            return harness_error(task, idx, breaker.skipped_error())
        rollout = run_episode(
            sandbox,
            images.tag(task),
            EpisodeTask(task.task_id, task.instruction, task.reference_solution),
            make_policy(),
            task.completion_test or "",
            limits,
            labels={"task_id": task.task_id, "batch": batch, "role": f"rollout-{idx}"},
            warm=bool(settings.sandbox.warm_containers),
        )
        if rollout.engine_failed:  # retried by run_parallel (on another engine of a pool)
            raise SandboxError(rollout.error)
        breaker.record(rollout)
        row = Attempt(batch, idx, rollout).row()
        if row["reward"] is not None:  # scored: persisted now, reused if this run dies
            journal.record(attempt_key(row), row)
        return row

    def failed(item: tuple[Task, int], exc: BaseException) -> dict:
        return harness_error(item[0], item[1], repr(exc))

    try:
        with meter.items():
            new_rows = run_parallel(
                todo,
                work,
                failed,
                log=log,
                workers=workers,
                label="rollout",
                recover=sandbox.recover,
            )
    finally:
        sandbox.close()  # warm containers nobody took
    engines = [{k: r[k] for k in ENGINE_COLUMNS} for r in sandbox.pool.report()]
    return RolloutRun(
        probe, len(tasks), plan, recovered, new_rows, breaker.is_open, k, meter, engines, started
    )
