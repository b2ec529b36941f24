"""The validation stage: the completion test must fail on the initial state, pass after the
reference solution, and fail again after a do-nothing episode."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import polars as pl

from endless_assets.agent.episode import EpisodeLimits, Rollout, run_episode_in
from endless_assets.agent.policies import EpisodeTask, NoopPolicy, OraclePolicy
from endless_assets.generation import TaskGenerator
from endless_assets.generation.llm.cost import cost_per_task
from endless_assets.models import OK, REJECTED, Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading import bundle
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.grading.verdict import Verdict
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.stages.repair import FEEDBACK_LIMIT, Failed, RepairOutcome, cause, repair
from endless_assets.stages.stage_run import StageResult, StageRun, usage_metadata
from endless_assets.stages.tasks import tasks_with_environments
from endless_assets.store.columns import frame

CHECK_LIMITS = EpisodeLimits(max_turns=4, command_timeout=300)


@dataclass
class CompletionOutcome(RepairOutcome):
    completion_test: str = ""
    fails_on_initial: bool | None = None
    passes_with_reference: bool | None = None
    fails_with_noop: bool | None = None

    def columns(self) -> dict[str, Any]:
        return {
            "completion_test": self.completion_test,
            "fails_on_initial": self.fails_on_initial,
            "passes_with_reference": self.passes_with_reference,
            "fails_with_noop": self.fails_with_noop,
        }


def check_completion_test(
    draft: Task,
    image_tag: str,
    generator: TaskGenerator,
    sandbox: Sandbox,
    *,
    max_rounds: int | None = None,
    reference_required: bool = True,
    limits: EpisodeLimits = CHECK_LIMITS,
) -> CompletionOutcome:
    """Write (or take) the completion test and check it in one fresh container per round: on
    the initial state (must fail by assertion), after a do-nothing episode (must fail), after the
    reference solution (must pass). The first two leave the files as they were; a test whose
    side effects change that can only make a later check pass where it should fail (a rejection,
    never an acceptance). `reference_required=False` (the LLM path) records a failing reference
    instead of rejecting: the solver then decides whether the task is solvable."""
    outcome = CompletionOutcome(task_id=draft.task_id, status=REJECTED)
    labels = {"task_id": draft.task_id, "batch": draft.batch, "role": "completion-check"}
    task = EpisodeTask(draft.task_id, draft.instruction, draft.reference_solution)

    def check(test: str) -> Failed | None:
        outcome.completion_test = test
        noop = oracle = None
        with sandbox.container(image_tag, labels=labels, hold_cpu=True) as box:
            initial = run_pytest(box, test, timeout=sandbox.config.test_timeout, stop_agent=False)
            if initial.status == "failed":
                noop = run_episode_in(box, task, NoopPolicy(), test, limits)
                if noop.reward == 0:
                    oracle = run_episode_in(box, task, OraclePolicy(), test, limits, learn=True)
        for episode in (noop, oracle):
            if episode is not None and episode.termination == "harness_error":
                raise SandboxError(episode.error)
        outcome.fails_on_initial = initial.status == "failed"
        if initial.status != "failed":
            failed = _initial_failure(outcome, initial)
            if initial.needs_network:  # nothing a repair of the test could change
                return Failed(f"needs_network: {initial.needs_network}", failed.feedback)
            return failed
        outcome.log("initial_state")
        assert noop is not None
        outcome.fails_with_noop = noop.reward == 0
        if not outcome.fails_with_noop:
            outcome.log("noop", "passes after doing nothing")
            return Failed(
                "passes_with_noop: the completion test passes after a do-nothing episode",
                "The completion test PASSES after an episode in which the agent did nothing, "
                "so it cannot tell a solved task from an untouched one. Make it check the end "
                "state the task asks for.",
            )
        assert oracle is not None
        outcome.passes_with_reference = oracle.reward == 1
        if outcome.passes_with_reference:
            # What it changed in the system locations, an honest agent may change too
            # (system_paths.py): the completion test carries it to every later verdict.
            outcome.completion_test = bundle.allow(test, oracle.verdict.system_changes)
            return None
        detail = oracle.verdict.summary() if oracle.verdict else oracle.termination
        tail = oracle.verdict.output[-FEEDBACK_LIMIT:] if oracle.verdict else ""
        solution = _solution_note(oracle)
        outcome.log("reference_solution", f"{detail}{solution}\n{tail}")
        if not reference_required:
            return None
        needs = oracle.verdict.needs_network if oracle.verdict else ""
        if needs:
            return Failed(f"needs_network: {needs}")
        return Failed(f"reference_fails: {detail}{solution}{cause(tail, 'test output')}")

    rounds = generator.repair_rounds if max_rounds is None else max_rounds
    write = partial(generator.write_completion_test, draft)
    return repair(outcome, rounds, write, check, "completion_unparsable", recover=sandbox.recover)


def _solution_note(oracle: Rollout) -> str:
    """What the reference solution itself said when it failed (e.g. its "Permission denied"),
    for the reject reason: its exit code and the end of its output; "" if it exited 0."""
    turns = [t for t in oracle.turns if t.kind == "command"]
    if not turns:
        return ""
    last = turns[-1]
    if last.exit_code == 0 and not last.timed_out:
        return ""
    how = "timed out" if last.timed_out else f"exited {last.exit_code}"
    return f"; the reference solution {how}{cause(last.output, 'its output')}"


def _initial_failure(outcome: CompletionOutcome, verdict: Verdict) -> Failed:
    """Why the test did not fail properly on the initial state (logged), with repair feedback."""
    tail = verdict.output[-FEEDBACK_LIMIT:]
    if verdict.passed:
        outcome.log("initial_state", "passes on the initial state")
        return Failed(
            "passes_on_initial: the completion test passes before any work is done",
            "The completion test PASSES on the initial state, before any work is done, so it "
            "cannot tell a solved task from an untouched one. Make it check the end state the "
            f"task asks for. pytest output (tail):\n{tail}",
        )
    outcome.log("initial_state", f"{verdict.summary()}\n{tail}")
    return Failed(
        f"completion_test_broken: {verdict.summary()}{cause(tail)}",
        f"The completion test does not run cleanly on the initial state ({verdict.summary()}); "
        "it must be collected and its tests must fail by assertion. pytest output (tail):\n"
        f"{tail}",
    )


def run_completion_tests(
    run: StageRun, descriptions: pl.DataFrame, environments: pl.DataFrame
) -> StageResult:
    """The validation stage over the tasks whose environment the build stage built."""
    reference_required = run.generator.reference_required
    drafts = tasks_with_environments(descriptions, environments)
    run.log.info(f"{len(drafts)} tasks enter the validation stage")
    no_reference = {d.task_id for d in drafts if not d.reference_solution.strip()}

    def work(draft: Task) -> CompletionOutcome:
        return check_completion_test(
            draft,
            run.image(draft),
            run.generator,
            run.sandbox,
            # A task that carries no reference solution (e.g. imported without one) cannot be
            # required to pass with it: the solver in the solver stage decides whether it is
            # solvable.
            reference_required=reference_required and draft.task_id not in no_reference,
        )

    rows = run.each(drafts, work, CompletionOutcome, label="completion")
    violations = []
    for r in (r for r in rows if r["status"] == OK):
        if not r["fails_on_initial"]:
            violations.append(f"{r['task_id']}: ok but did not fail on the initial state")
        if not r["fails_with_noop"]:
            violations.append(f"{r['task_id']}: ok but did not fail after a do-nothing episode")
        required = reference_required and r["task_id"] not in no_reference
        if required and not r["passes_with_reference"]:
            violations.append(f"{r['task_id']}: ok but the reference solution fails")
    metadata = {**usage_metadata(rows), **run.generator.run_metadata()}
    if run.generator.model:  # what the model cost per task kept so far (describe to validation)
        kept = sum(1 for r in rows if r["status"] == OK)
        table = frame(run.table, rows)
        metadata.update(cost_per_task([descriptions, environments, table], kept))
    return run.result(rows, violations, funnel_step="completion test", **metadata)
