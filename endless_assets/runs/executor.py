"""The code location's executor: Dagster's in-process executor, with a run that records the
process executing it and waits for a pool slot as a user can follow.

Steps run in the run's own process (the stages form a chain and parallelise over their tasks
inside their step). On top of Dagster's:
- before the first step, the run records its process (dead_runs.OWNER_TAG), whoever launched
  it, so that a run whose process dies is recognised (runs/dead_runs.py);
- a step waiting for a slot of a pool (the `docker` pool: one Docker stage at a time per engine
  pool) says which runs hold it, since when, and how to free it, again when that changes and
  every minute; it frees the slots of holders whose process is gone (dead_runs.reap), sleeps
  between its claims instead of spinning (Dagster 1.13's in-process loop never sleeps there),
  and ends at once on Ctrl-C or SIGTERM (Dagster's loop does not look for interrupts there).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import dagster as dg
from dagster._core.definitions.executor_definition import IN_PROC_CONFIG
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.api import ExecuteRunWithPlanIterable
from dagster._core.execution.context_creation_job import PlanExecutionContextManager
from dagster._core.execution.plan.execute_plan import inner_plan_execution_iterator
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.retries import RetryMode
from dagster._core.execution.step_dependency_config import StepDependencyConfig
from dagster._core.executor.in_process import InProcessExecutor
from dagster._utils.interrupts import check_captured_interrupt

from endless_assets import processes
from endless_assets.runs import dead_runs

LOOK_SECONDS = 2.0  # how often a waiting step looks at who holds its pool
TELL_SECONDS = 60.0  # a reminder this often while the same runs hold it
NAP_SECONDS = 0.25  # the longest sleep between two looks for an interrupt


class WaitingConcurrency(InstanceConcurrencyContext):
    """Dagster's claims of pool slots for one run, with the waiting described above."""

    def __init__(
        self, instance: dg.DagsterInstance, run: dg.DagsterRun, say: Callable[[str], None]
    ) -> None:
        super().__init__(instance, run)
        self._say = say
        self._waiting: dict[str, float] = {}  # step key -> when it started waiting
        self._looked: dict[str, float] = {}
        self._told: dict[str, tuple[str, float]] = {}  # step key -> (what was said, when)

    def claim(self, concurrency_key: str, step_key: str, step_priority: int = 0) -> bool:
        if check_captured_interrupt():
            raise DagsterExecutionInterruptedError(
                f"interrupted while step {step_key} waited for a slot of pool {concurrency_key}"
            )
        if super().claim(concurrency_key, step_key, step_priority):
            started = self._waiting.pop(step_key, None)
            if step_key in self._told and started is not None:
                waited = time.monotonic() - started
                self._say(f"step {step_key}: got a slot of pool {concurrency_key} ({waited:.0f} s)")
            return True
        now = time.monotonic()
        self._waiting.setdefault(step_key, now)
        if now - self._looked.get(step_key, 0.0) >= LOOK_SECONDS:
            self._looked[step_key] = now
            self._look(concurrency_key, step_key, now)
        return False

    def _look(self, pool: str, step_key: str, now: float) -> None:
        others = sorted(dead_runs.queued(self._instance, pool) - {self._run_id})
        reaped = dead_runs.reap(self._instance, others) if others else []
        for one in reaped:
            self._say(f"run {one.run_id}: {one.reason.removeprefix('endless: ')}")
        if reaped or dead_runs.free_ended(self._instance):
            self._pending_timeouts[step_key] = 0.0  # claim again at once
            return
        holders = dead_runs.holders(self._instance, pool)
        if not holders:
            return
        limit = self.get_pool_info(pool)
        slots = f"{limit.limit} slot(s)" if limit is not None else "its slots"
        said = (
            f"step {step_key} waits for a slot of pool {pool} ({slots}, all taken), held by "
            + "; ".join(h.describe() for h in holders)
            + ". It goes on when they end; to free the pool sooner, stop that run (Ctrl-C in "
            "its terminal, or Terminate on its page in the UI). A run whose process is gone is "
            "marked failed and its slot freed by itself (also `endless sweep`)."
        )
        told, when = self._told.get(step_key, ("", 0.0))
        if said != told or now - when >= TELL_SECONDS:
            self._told[step_key] = (said, now)
            self._say(said)

    def interval_to_next_pending_claim_check(self) -> float:
        # Dagster 1.13's returns min(0, ...): the loop never sleeps. Sleep until the next claim
        # is due, in naps short enough to see an interrupt at once.
        if not self._pending_claims:
            return 0.0
        due = min(self._pending_timeouts.values(), default=0.0) - time.time()
        return max(0.0, min(due, NAP_SECONDS))


def _plan_iterator(job_context, execution_plan) -> Iterator[DagsterEvent]:
    with WaitingConcurrency(
        job_context.instance, job_context.dagster_run, job_context.log.warning
    ) as concurrency:
        yield from inner_plan_execution_iterator(job_context, execution_plan, concurrency)


class OwnedInProcessExecutor(InProcessExecutor):
    def execute(self, plan_context, execution_plan) -> Iterator[DagsterEvent]:
        instance, run = plan_context.instance, plan_context.dagster_run
        instance.add_run_tags(run.run_id, {dead_runs.OWNER_TAG: str(processes.me())})
        pid = os.getpid()
        keys = execution_plan.step_keys_to_execute
        yield DagsterEvent.engine_event(
            plan_context,
            f"Executing steps in process (pid: {pid})",
            event_specific_data=EngineEventData.in_process(pid, keys),
        )
        started = time.monotonic()
        yield from iter(
            ExecuteRunWithPlanIterable(
                execution_plan=plan_context.execution_plan,
                iterator=_plan_iterator,
                execution_context_manager=PlanExecutionContextManager(
                    job=plan_context.job,
                    retry_mode=plan_context.retry_mode,
                    execution_plan=plan_context.execution_plan,
                    run_config=plan_context.run_config,
                    dagster_run=run,
                    instance=instance,
                    raise_on_error=plan_context.raise_on_error,
                    output_capture=plan_context.output_capture,
                    step_dependency_config=self.step_dependency_config,
                ),
            )
        )
        yield DagsterEvent.engine_event(
            plan_context,
            f"Finished steps in process (pid: {pid}) in {time.monotonic() - started:.1f} s",
            event_specific_data=EngineEventData.in_process(pid, keys),
        )


@dg.executor(name="in_process", config_schema=IN_PROC_CONFIG)
def owned_in_process_executor(init_context) -> OwnedInProcessExecutor:
    """Dagster's in-process executor (the same config), with a run that records its process and
    waits for pool slots as described in endless_assets/runs/executor.py."""
    config = init_context.executor_config
    return OwnedInProcessExecutor(
        retries=RetryMode.from_config(config["retries"]),
        step_dependency_config=StepDependencyConfig.from_config(
            config.get("step_dependency_config")
        ),
    )
