"""The tables of soundness, the solver stage, the filtered dataset and drift re-validation."""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from endless_assets.store.schemas.base import (
    BATCH,
    CREATED_AT,
    DRIFT_STATUSES,
    FAILURES,
    PARENT_TASK_ID,
    SECONDS,
    SERVICES,
    STATUS,
    STATUSES,
    TASK_ID,
    TERMINATIONS,
    TOKENS_IN,
    TOKENS_OUT,
    Strict,
    col,
)

CPU = "CPU seconds the task's containers used (null: not measured)"
PROBES = "JSON list: each control run with its outcome"
N = {"ge": 0}
SHARE = {"nullable": True, "ge": 0, "le": 1}


class TaskSoundness(pa.DataFrameModel):
    task_id: pl.Utf8 = col(TASK_ID, unique=True)
    batch: pl.Utf8 = col(BATCH)
    status: pl.Utf8 = col(STATUS, isin=STATUSES)
    reject_reason: pl.Utf8 = col("flaky, hackable: PROBES, reference_fails or weak_test: ...")
    repeats: pl.Int64 = col("runs of each control (0: soundness off)", **N)
    reference_runs: pl.Int64 = col("runs of the reference solution", **N)
    reference_passes: pl.Int64 = col("of which the completion test passed", **N)
    noop_runs: pl.Int64 = col("runs of the do-nothing control", **N)
    noop_passes: pl.Int64 = col("of which the completion test passed (should be 0)", **N)
    shortcuts_run: pl.Int64 = col("shortcut probes tried (pass without doing the task?)", **N)
    shortcuts_passed: pl.Int64 = col("shortcut probes the test let pass", **N)
    hackable: pl.Utf8 = col("comma-separated probes that passed, confirmed in a fresh container")
    ablations_run: pl.Int64 = col("one-step ablations of the reference run", **N)
    ablations_rejected: pl.Int64 = col("ablations the completion test rejected", **N)
    mutation_score: pl.Float64 = col("rejected / run ablations: the test's strength", **SHARE)
    containers: pl.Int64 = col("containers started for the task", **N)
    engine_retries: pl.Int64 = col("work retried after a sandbox engine failed", **N)
    seconds: pl.Float64 = col(SECONDS, **N)
    cpu_seconds: pl.Float64 = col(CPU, nullable=True, ge=0)
    probes: pl.Utf8 = col("JSON list: each control, shortcut and ablation with its outcome")
    audit: pl.Utf8 = col("the model probes: ran, skipped: WHY or harness_error", nullable=True)
    audit_model: pl.Utf8 = col("the auditor model", nullable=True)
    audit_prompt_version: pl.Utf8 = col("hash of the audit prompts", nullable=True)
    aligned: pl.Boolean = col(
        "the alignment audit's verdict (null: not run/unclear)", nullable=True
    )
    cheat_passed: pl.Boolean = col("the cheat rollout passed the test", nullable=True)
    cheat_judged_done: pl.Boolean = col("... and the judge said the task was done", nullable=True)
    judgements: pl.Utf8 = col("JSON list: verdict, reasoning, cost per probe", nullable=True)
    judge_agreement: pl.Float64 = col(
        "share of the judge's readable verdicts the reference judge gave too", **SHARE
    )
    requests: pl.Int64 = col("model requests of the probes", nullable=True, ge=0)
    tokens_in: pl.Int64 = col(TOKENS_IN, nullable=True, ge=0)
    tokens_out: pl.Int64 = col(TOKENS_OUT, nullable=True, ge=0)
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "task_soundness"


class SolverRollouts(pa.DataFrameModel):
    task_id: pl.Utf8 = col(TASK_ID)
    batch: pl.Utf8 = col(BATCH)
    rollout_idx: pl.Int64 = col("the attempt's number for this task and solver, from 0", **N)
    policy: pl.Utf8 = col("the solver: oracle, noop or chat")
    model: pl.Utf8 = col("the solver's model (empty for oracle and noop)")
    prompt_version: pl.Utf8 = col("hash of the solver prompts ('' for oracle and noop)")
    reward: pl.Int64 = col(
        "1: the test passed, 0: not, null: harness error", nullable=True, isin=[0, 1]
    )
    termination: pl.Utf8 = col("why the episode ended", isin=TERMINATIONS)
    n_turns: pl.Int64 = col("turns the agent took", **N)
    trajectory: pl.Utf8 = col("JSON list of turns: thought, command, output, exit code, tokens")
    messages: pl.Utf8 = col("JSON: every chat message exactly as sent and received")
    verdict: pl.Utf8 = col("pytest's verdict summary")
    error: pl.Utf8 = col("what went wrong in the harness, if anything")
    tokens_in: pl.Int64 = col(TOKENS_IN, **N)
    tokens_out: pl.Int64 = col(TOKENS_OUT, **N)
    seconds: pl.Float64 = col("wall-clock seconds of the episode", **N)
    queue_seconds: pl.Float64 = col("waited for a model slot (not counted)", nullable=True, ge=0)
    loop_detected: pl.Boolean = col("the agent repeated itself (failure analysis)")
    command_diversity: pl.Float64 = col("distinct commands / commands", **SHARE)
    turn_exhausted: pl.Boolean = col("the episode hit the turn limit")
    commands: pl.Int64 = col("commands run", **N)
    invalid_turns: pl.Int64 = col("replies with no command that could be read", **N)
    command_timeouts: pl.Int64 = col("commands stopped at command_timeout", **N)
    truncated_outputs: pl.Int64 = col("outputs cut to fit the context", **N)
    folded_turns: pl.Int64 = col("old turns folded into a summary", **N)
    failure_mode: pl.Utf8 = col("the failure analysis' reading of a failed attempt", isin=FAILURES)
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "solver_rollouts"


class FilteredDataset(pa.DataFrameModel):
    task_id: pl.Utf8 = col(TASK_ID, unique=True)
    batch: pl.Utf8 = col(BATCH)
    solver_model: pl.Utf8 = col("policy/model that scored it, e.g. chat/o3")
    solver_policy: pl.Utf8 = col("the solver: oracle, noop or chat")
    attempts: pl.Int64 = col("attempts made (the setting k, ENDLESS_K)", **N)
    harness_errors: pl.Int64 = col("attempts with no score", **N)
    scored_attempts: pl.Int64 = col("attempts - harness_errors: the n of pass@k", **N)
    successes: pl.Int64 = col("scored attempts the test passed", **N)
    pass_at_n: pl.Float64 = col("pass@n over the scored attempts: solved at least once", ge=0, le=1)
    pass_at_curve: pl.Utf8 = col("JSON list: element i is the unbiased pass@(i+1)")
    pass_rate: pl.Float64 = col("successes / scored = pass@1: the difficulty", ge=0, le=1)
    mean_turns_solved: pl.Float64 = col("mean turns of passing attempts", nullable=True, ge=0)
    kept: pl.Boolean = col("in the dataset: solved at least once, pass rate in the keep band")
    drop_reason: pl.Utf8 = col("why it was not kept, `reason: detail` (empty when kept)")
    category: pl.Utf8 = col("taxonomy category")
    complexity: pl.Utf8 = col("taxonomy complexity")
    scenario: pl.Utf8 = col("the persona and situation")
    family: pl.Utf8 = col("the procedural family, or the generator's name")
    parent_task_id: pl.Utf8 = col(PARENT_TASK_ID)
    instruction: pl.Utf8 = col("what the agent is told to do")
    truth: pl.Utf8 = col("JSON: the privileged facts the tests check")
    dockerfile: pl.Utf8 = col("the task's Dockerfile")
    context_files: pl.Utf8 = col("JSON: relative path -> text, the build context's files")
    initial_test: pl.Utf8 = col("pytest file for the untouched state")
    completion_test: pl.Utf8 = col("pytest file that grades the agent")
    reference_solution: pl.Utf8 = col("a shell script that solves the task")
    services: pl.Utf8 = col(SERVICES)
    image_tag: pl.Utf8 = col("the image the task was validated on")
    generator: pl.Utf8 = col("who wrote the task")
    generator_model: pl.Utf8 = col("the model that wrote it")
    prompt_version: pl.Utf8 = col("the generator's version")
    task: pl.Utf8 = col("the whole Task as JSON (models.Task): what exports rebuild it from")
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "filtered_dataset"


class DriftRevalidation(pa.DataFrameModel):
    """Kept tasks re-validated on an image rebuilt from their Dockerfile (defs/drift.py): the
    latest check of each kept task of a batch."""

    task_id: pl.Utf8 = col(TASK_ID, unique=True)
    batch: pl.Utf8 = col(BATCH)
    status: pl.Utf8 = col("valid, drifted or harness_error", isin=DRIFT_STATUSES)
    reason: pl.Utf8 = col("build_failed, reference_fails, flaky or hackable: ... (empty: valid)")
    image_tag: pl.Utf8 = col("the image the task was kept with")
    rebuilt_image_id: pl.Utf8 = col("the fresh build's id ('' when it failed)")
    base_image_id: pl.Utf8 = col("the base image it was rebuilt on")
    repeats: pl.Int64 = col("runs of each control", **N)
    reference_required: pl.Boolean = col("the reference must pass (it did when kept)")
    reference_passes: pl.Int64 = col("reference runs the test passed", **N)
    noop_passes: pl.Int64 = col("do-nothing runs the test passed (should be 0)", **N)
    build_seconds: pl.Float64 = col("seconds spent rebuilding the image", **N)
    seconds: pl.Float64 = col(SECONDS, **N)
    cpu_seconds: pl.Float64 = col(CPU, nullable=True, ge=0)
    probes: pl.Utf8 = col(PROBES)
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "drift_revalidation"
