"""Stage IV: k attempts per task by the configured solver, each in a fresh container (no Dagster
here).

Which attempts run and which are reused is attempts.py's business; each scored attempt is
persisted as it finishes (store/journal.py), so an interrupted run loses only what was in
flight. Episodes run `Settings.episode_workers` at a time (16 for a chat model, which mostly
waits on its endpoint) while at most `workers` of them start a container or run pytest at once
(the sandbox's slots), so a 2-core machine stays responsive.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from endless_assets.agent.breaker import EndpointBreaker
from endless_assets.agent.episode import Rollout, run_episode
from endless_assets.agent.factory import policy_factory
from endless_assets.agent.policies import EpisodeTask, Policy
from endless_assets.models import Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.stages.attempts import (
    AttemptPlan,
    ImageCache,
    attempt_key,
    plan_attempts,
    with_recovered,
)
from endless_assets.stages.rows import rollout_row
from endless_assets.stages.runner import Log, run_parallel
from endless_assets.store.journal import Journal
from endless_assets.store.lake import Lake
from endless_assets.store.shards import Shard

TABLE = "solver_rollouts"


@dataclass
class RolloutRun:
    """What one run of stage IV made: the plan, the rows it ran now, and the solver's probe."""

    probe: Policy
    tasks: int
    plan: AttemptPlan
    recovered: list[dict[str, Any]]
    new_rows: list[dict[str, Any]] = field(default_factory=list)
    breaker_opened: bool = False

    @property
    def current_rows(self) -> list[dict[str, Any]]:
        """This solver's rows for today's k: the reused ones and those run now."""
        return [*self.plan.reusable, *self.new_rows]

    @property
    def all_rows(self) -> list[dict[str, Any]]:
        """Every row the partition keeps: also attempts beyond k and other solvers' rows."""
        return [*self.current_rows, *self.plan.beyond_k, *self.plan.others]


def run_rollouts(
    settings: Settings,
    sandbox: Sandbox,
    lake: Lake,
    batch: str,
    tasks: list[Task],
    *,
    log: Log,
    shard: Shard | None = None,
) -> RolloutRun:
    """Run the attempts the partition still lacks for `tasks` (those of `shard` only, in a shard
    run) and return them with the plan. Closes the sandbox's warm containers at the end."""
    make_policy = policy_factory(settings)
    probe = make_policy()
    policy_name, model = probe.name, probe.model
    k = settings.solver.attempts
    limits = settings.solver.limits()
    journal = Journal(lake.data_dir, TABLE, batch)
    recovered = journal.rows()
    stored = with_recovered(lake.read_or_empty(TABLE, batch).to_dicts(), recovered)
    if shard is not None:  # a shard run: the rows of the shard's tasks only
        recovered = [r for r in recovered if shard.owns(r["task_id"])]
        stored = [r for r in stored if shard.owns(r["task_id"])]
    plan = plan_attempts(tasks, stored, policy_name, model, k)
    todo = plan.todo
    workers = settings.episode_workers
    log.info(
        f"{len(tasks)} tasks x k={k} with {policy_name}/{model or '-'}: "
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
        return rollout_row(batch, idx, rollout)

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
        row = rollout_row(batch, idx, rollout)
        if row["reward"] is not None:  # scored: persisted now, reused if this run dies
            journal.record(attempt_key(row), row)
        return row

    def failed(item: tuple[Task, int], exc: BaseException) -> dict:
        return harness_error(item[0], item[1], repr(exc))

    try:
        new_rows = run_parallel(
            todo, work, failed, log=log, workers=workers, label="rollout", recover=sandbox.recover
        )
    finally:
        sandbox.close()  # warm containers nobody took
    return RolloutRun(probe, len(tasks), plan, recovered, new_rows, breaker.is_open)
