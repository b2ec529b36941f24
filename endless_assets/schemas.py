"""The table contract: one pandera model per table (polars backend).

Each stage asset validates its output against its model before writing, and reports the result
as a blocking asset check. `TABLES` maps table names to models; the catalog uses it to create
typed empty views for tables that have no data yet.
"""

from __future__ import annotations

import pandera.polars as pa
import polars as pl
from pandera.api.polars.model_config import BaseConfig

from endless_assets.agent.analysis import FAILURE_MODES

STATUSES = ["ok", "rejected", "harness_error"]
TERMINATIONS = ["done", "turn_limit", "time_limit", "context_limit", "harness_error"]
DRIFT_STATUSES = ["valid", "drifted", "harness_error"]


class _Strict(BaseConfig):
    strict = True  # no undeclared columns
    coerce = False


class TaskDescriptions(pa.DataFrameModel):
    task_id: pl.Utf8 = pa.Field(unique=True, str_startswith="et-")
    batch: pl.Utf8
    index: pl.Int64 = pa.Field(ge=0)
    category: pl.Utf8
    complexity: pl.Utf8
    scenario: pl.Utf8
    family: pl.Utf8
    instruction: pl.Utf8
    truth: pl.Utf8  # JSON
    reference_solution: pl.Utf8
    generator: pl.Utf8
    generator_model: pl.Utf8
    prompt_version: pl.Utf8
    seed: pl.Int64
    status: pl.Utf8 = pa.Field(isin=STATUSES)
    reject_reason: pl.Utf8
    duplicate_of: pl.Utf8  # task id of the near-duplicate that caused a rejection, else ""
    requests: pl.Int64 = pa.Field(ge=0)
    tokens_in: pl.Int64 = pa.Field(ge=0)
    tokens_out: pl.Int64 = pa.Field(ge=0)
    seconds: pl.Float64 = pa.Field(ge=0)
    draft: pl.Utf8  # the whole Task as JSON, so later stages rebuild it exactly
    created_at: pl.Datetime(time_zone="UTC")

    class Config(_Strict):
        name = "task_descriptions"


class TaskEnvironments(pa.DataFrameModel):
    task_id: pl.Utf8 = pa.Field(unique=True)
    batch: pl.Utf8
    dockerfile: pl.Utf8
    context_files: pl.Utf8  # JSON: relative path -> text
    initial_test: pl.Utf8
    image_tag: pl.Utf8
    image_id: pl.Utf8
    attempts: pl.Int64 = pa.Field(ge=0)
    attempt_log: pl.Utf8  # JSON list: each round's stage and error
    build_seconds: pl.Float64 = pa.Field(ge=0)
    seconds: pl.Float64 = pa.Field(ge=0)
    status: pl.Utf8 = pa.Field(isin=STATUSES)
    reject_reason: pl.Utf8
    requests: pl.Int64 = pa.Field(ge=0)
    tokens_in: pl.Int64 = pa.Field(ge=0)
    tokens_out: pl.Int64 = pa.Field(ge=0)
    created_at: pl.Datetime(time_zone="UTC")

    class Config(_Strict):
        name = "task_environments"


class CompletionTests(pa.DataFrameModel):
    task_id: pl.Utf8 = pa.Field(unique=True)
    batch: pl.Utf8
    completion_test: pl.Utf8
    fails_on_initial: pl.Boolean = pa.Field(nullable=True)
    passes_with_reference: pl.Boolean = pa.Field(nullable=True)
    fails_with_noop: pl.Boolean = pa.Field(nullable=True)
    attempts: pl.Int64 = pa.Field(ge=0)
    attempt_log: pl.Utf8
    seconds: pl.Float64 = pa.Field(ge=0)
    status: pl.Utf8 = pa.Field(isin=STATUSES)
    reject_reason: pl.Utf8
    requests: pl.Int64 = pa.Field(ge=0)
    tokens_in: pl.Int64 = pa.Field(ge=0)
    tokens_out: pl.Int64 = pa.Field(ge=0)
    created_at: pl.Datetime(time_zone="UTC")

    class Config(_Strict):
        name = "completion_tests"


class TaskSoundness(pa.DataFrameModel):
    task_id: pl.Utf8 = pa.Field(unique=True)
    batch: pl.Utf8
    status: pl.Utf8 = pa.Field(isin=STATUSES)
    reject_reason: pl.Utf8  # flaky: ..., hackable: <probes>, reference_fails: ..., weak_test: ...
    repeats: pl.Int64 = pa.Field(ge=0)  # runs of each control (0: soundness off)
    reference_runs: pl.Int64 = pa.Field(ge=0)
    reference_passes: pl.Int64 = pa.Field(ge=0)
    noop_runs: pl.Int64 = pa.Field(ge=0)
    noop_passes: pl.Int64 = pa.Field(ge=0)
    shortcuts_run: pl.Int64 = pa.Field(ge=0)
    shortcuts_passed: pl.Int64 = pa.Field(ge=0)
    hackable: pl.Utf8  # comma-separated probes that passed the test, confirmed in a fresh container
    ablations_run: pl.Int64 = pa.Field(ge=0)
    ablations_rejected: pl.Int64 = pa.Field(ge=0)
    mutation_score: pl.Float64 = pa.Field(nullable=True, ge=0, le=1)  # rejected / run ablations
    containers: pl.Int64 = pa.Field(ge=0)
    engine_retries: pl.Int64 = pa.Field(ge=0)
    seconds: pl.Float64 = pa.Field(ge=0)
    cpu_seconds: pl.Float64 = pa.Field(nullable=True, ge=0)
    probes: pl.Utf8  # JSON list: each control, shortcut and ablation with its outcome
    # The model probes (stages/audit.py): "ran", "skipped: <why>" or "harness_error: <what>".
    audit: pl.Utf8 = pa.Field(nullable=True)
    audit_model: pl.Utf8 = pa.Field(nullable=True)
    audit_prompt_version: pl.Utf8 = pa.Field(nullable=True)
    aligned: pl.Boolean = pa.Field(nullable=True)  # the alignment audit (null: not run/unclear)
    cheat_passed: pl.Boolean = pa.Field(nullable=True)  # the cheat rollout passed the test
    cheat_judged_done: pl.Boolean = pa.Field(nullable=True)  # ... and the judge said: task done
    judgements: pl.Utf8 = pa.Field(nullable=True)  # JSON list: verdict, reasoning, cost per probe
    # Share of the judge's readable verdicts the reference judge (reference_judge_model) gave
    # too; null without a reference judge or a verdict both could read.
    judge_agreement: pl.Float64 = pa.Field(nullable=True, ge=0, le=1)
    requests: pl.Int64 = pa.Field(nullable=True, ge=0)  # the model probes' replies used
    tokens_in: pl.Int64 = pa.Field(nullable=True, ge=0)
    tokens_out: pl.Int64 = pa.Field(nullable=True, ge=0)
    created_at: pl.Datetime(time_zone="UTC")

    class Config(_Strict):
        name = "task_soundness"


class SolverRollouts(pa.DataFrameModel):
    task_id: pl.Utf8
    batch: pl.Utf8
    rollout_idx: pl.Int64 = pa.Field(ge=0)
    policy: pl.Utf8
    model: pl.Utf8
    prompt_version: pl.Utf8  # hash of the solver prompts ("" for oracle and noop)
    reward: pl.Int64 = pa.Field(nullable=True, isin=[0, 1])  # null: harness error
    termination: pl.Utf8 = pa.Field(isin=TERMINATIONS)
    n_turns: pl.Int64 = pa.Field(ge=0)
    trajectory: pl.Utf8  # JSON list of turns (thought, command, output, exit code, tokens, ...)
    messages: pl.Utf8  # JSON: every chat message exactly as sent and received (agent/context.py)
    verdict: pl.Utf8  # pytest's verdict summary
    error: pl.Utf8
    tokens_in: pl.Int64 = pa.Field(ge=0)
    tokens_out: pl.Int64 = pa.Field(ge=0)
    seconds: pl.Float64 = pa.Field(ge=0)
    queue_seconds: pl.Float64 = pa.Field(nullable=True, ge=0)  # waited for an LLM slot; not counted
    # Failure analysis (agent/analysis.py).
    loop_detected: pl.Boolean
    command_diversity: pl.Float64 = pa.Field(nullable=True, ge=0, le=1)
    turn_exhausted: pl.Boolean
    commands: pl.Int64 = pa.Field(ge=0)
    invalid_turns: pl.Int64 = pa.Field(ge=0)
    command_timeouts: pl.Int64 = pa.Field(ge=0)
    truncated_outputs: pl.Int64 = pa.Field(ge=0)
    folded_turns: pl.Int64 = pa.Field(ge=0)
    failure_mode: pl.Utf8 = pa.Field(isin=list(FAILURE_MODES))
    created_at: pl.Datetime(time_zone="UTC")

    class Config(_Strict):
        name = "solver_rollouts"


class FilteredDataset(pa.DataFrameModel):
    task_id: pl.Utf8 = pa.Field(unique=True)
    batch: pl.Utf8
    solver_model: pl.Utf8  # policy/model, e.g. chat/o3
    solver_policy: pl.Utf8
    attempts: pl.Int64 = pa.Field(ge=0)  # attempts made (the setting k, ENDLESS_K)
    harness_errors: pl.Int64 = pa.Field(ge=0)  # attempts with no score
    scored_attempts: pl.Int64 = pa.Field(ge=0)  # attempts - harness_errors: the n of pass@k
    successes: pl.Int64 = pa.Field(ge=0)
    pass_at_n: pl.Float64 = pa.Field(ge=0, le=1)  # pass@n over the scored attempts: solved once
    pass_at_curve: pl.Utf8  # JSON list: element i is the unbiased pass@(i+1), for every i < n
    pass_rate: pl.Float64 = pa.Field(ge=0, le=1)  # successes / scored = pass@1: the difficulty
    mean_turns_solved: pl.Float64 = pa.Field(nullable=True, ge=0)  # turns of passing attempts
    kept: pl.Boolean
    drop_reason: pl.Utf8
    category: pl.Utf8
    complexity: pl.Utf8
    scenario: pl.Utf8
    family: pl.Utf8
    instruction: pl.Utf8
    truth: pl.Utf8
    dockerfile: pl.Utf8
    context_files: pl.Utf8
    initial_test: pl.Utf8
    completion_test: pl.Utf8
    reference_solution: pl.Utf8
    image_tag: pl.Utf8
    generator: pl.Utf8
    generator_model: pl.Utf8
    prompt_version: pl.Utf8
    task: pl.Utf8  # the whole Task as JSON (models.Task): what exports rebuild it from
    created_at: pl.Datetime(time_zone="UTC")

    class Config(_Strict):
        name = "filtered_dataset"


class DriftRevalidation(pa.DataFrameModel):
    """Kept tasks re-validated on an image rebuilt from their Dockerfile (defs/drift.py): the
    latest check of each kept task of a batch."""

    task_id: pl.Utf8 = pa.Field(unique=True)
    batch: pl.Utf8
    status: pl.Utf8 = pa.Field(isin=DRIFT_STATUSES)
    reason: pl.Utf8  # build_failed: ..., reference_fails: ..., flaky: ..., hackable: ...
    image_tag: pl.Utf8  # the image the task was kept with
    rebuilt_image_id: pl.Utf8  # the fresh build's ("" when it failed)
    base_image_id: pl.Utf8  # the base image it was rebuilt on
    repeats: pl.Int64 = pa.Field(ge=0)
    reference_required: pl.Boolean
    reference_passes: pl.Int64 = pa.Field(ge=0)
    noop_passes: pl.Int64 = pa.Field(ge=0)
    build_seconds: pl.Float64 = pa.Field(ge=0)
    seconds: pl.Float64 = pa.Field(ge=0)
    cpu_seconds: pl.Float64 = pa.Field(nullable=True, ge=0)
    probes: pl.Utf8  # JSON list: each control run with its outcome
    created_at: pl.Datetime(time_zone="UTC")

    class Config(_Strict):
        name = "drift_revalidation"


TABLES: dict[str, type[pa.DataFrameModel]] = {
    "task_descriptions": TaskDescriptions,
    "task_environments": TaskEnvironments,
    "completion_tests": CompletionTests,
    "task_soundness": TaskSoundness,
    "solver_rollouts": SolverRollouts,
    "filtered_dataset": FilteredDataset,
    "drift_revalidation": DriftRevalidation,
}


def polars_schema(table: str) -> pl.Schema:
    """The polars schema of a table, in declared column order (for empty frames)."""
    model = TABLES[table]
    columns = model.to_schema().columns
    return pl.Schema({name: col.dtype.type for name, col in columns.items()})


def empty_frame(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=polars_schema(table))
