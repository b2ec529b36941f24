"""The tables of the describe, build and validation stages: what a task is, its environment and its
completion test."""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from endless_assets.store.schemas.base import (
    ATTEMPT_LOG,
    BATCH,
    CREATED_AT,
    PARENT_TASK_ID,
    REQUESTS,
    SECONDS,
    SERVICES,
    STATUS,
    STATUSES,
    TASK_ID,
    TOKENS_IN,
    TOKENS_OUT,
    Strict,
    col,
)


class TaskDescriptions(pa.DataFrameModel):
    task_id: pl.Utf8 = col(TASK_ID, unique=True, str_startswith="et-")
    batch: pl.Utf8 = col(BATCH)
    index: pl.Int64 = col("the task's position in its batch, from 0", ge=0)
    category: pl.Utf8 = col("taxonomy category (prompts/taxonomy.yaml), e.g. file_operations")
    complexity: pl.Utf8 = col("taxonomy complexity: easy, medium or hard")
    scenario: pl.Utf8 = col("the persona and situation the task is told in")
    family: pl.Utf8 = col("the procedural family that made it, or the LLM generator's name")
    parent_task_id: pl.Utf8 = col(PARENT_TASK_ID)
    instruction: pl.Utf8 = col("what the agent is told to do")
    truth: pl.Utf8 = col("JSON: the privileged facts the tests check (never shown to the agent)")
    reference_solution: pl.Utf8 = col("a shell script that solves the task")
    services: pl.Utf8 = col(SERVICES)
    generator: pl.Utf8 = col("who wrote the task: procedural, llm or imported")
    generator_model: pl.Utf8 = col("the model that wrote it (empty for procedural tasks)")
    prompt_version: pl.Utf8 = col("the generator's version: its prompts' hash, or the families'")
    seed: pl.Int64 = col("the task's seed, from the batch key, its index and the seed setting")
    status: pl.Utf8 = col(STATUS, isin=STATUSES)
    reject_reason: pl.Utf8 = col("why it was rejected, `reason: detail` (empty when ok)")
    duplicate_of: pl.Utf8 = col("task id of the near-duplicate that caused a rejection, else ''")
    requests: pl.Int64 = col(REQUESTS, ge=0)
    tokens_in: pl.Int64 = col(TOKENS_IN, ge=0)
    tokens_out: pl.Int64 = col(TOKENS_OUT, ge=0)
    seconds: pl.Float64 = col(SECONDS, ge=0)
    draft: pl.Utf8 = col("the whole Task as JSON, so later stages rebuild it exactly")
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "task_descriptions"


class TaskEnvironments(pa.DataFrameModel):
    task_id: pl.Utf8 = col(TASK_ID, unique=True)
    batch: pl.Utf8 = col(BATCH)
    dockerfile: pl.Utf8 = col("the task's Dockerfile, FROM the base image")
    context_files: pl.Utf8 = col("JSON: relative path -> text, the build context's files")
    initial_test: pl.Utf8 = col("pytest file that must pass on the untouched container")
    image_tag: pl.Utf8 = col("the built image's tag (a hash of Dockerfile and context)")
    image_id: pl.Utf8 = col("the built image's id")
    attempts: pl.Int64 = col("build-and-test rounds made (repairs included)", ge=0)
    attempt_log: pl.Utf8 = col(ATTEMPT_LOG)
    build_seconds: pl.Float64 = col("seconds spent building images", ge=0)
    services: pl.Utf8 = col(SERVICES + "; as built: a repair may have fixed one")
    seconds: pl.Float64 = col(SECONDS, ge=0)
    status: pl.Utf8 = col(STATUS, isin=STATUSES)
    reject_reason: pl.Utf8 = col("why: build_failed, initial_test_failed, ... (empty when ok)")
    requests: pl.Int64 = col(REQUESTS, ge=0)
    tokens_in: pl.Int64 = col(TOKENS_IN, ge=0)
    tokens_out: pl.Int64 = col(TOKENS_OUT, ge=0)
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "task_environments"


class CompletionTests(pa.DataFrameModel):
    task_id: pl.Utf8 = col(TASK_ID, unique=True)
    batch: pl.Utf8 = col(BATCH)
    completion_test: pl.Utf8 = col("pytest file that passes only once the task is done")
    fails_on_initial: pl.Boolean = col("the test fails on the untouched state", nullable=True)
    passes_with_reference: pl.Boolean = col(
        "the test passes after the reference solution", nullable=True
    )
    fails_with_noop: pl.Boolean = col("the test fails after a do-nothing agent", nullable=True)
    attempts: pl.Int64 = col("write-and-check rounds made (repairs included)", ge=0)
    attempt_log: pl.Utf8 = col(ATTEMPT_LOG)
    seconds: pl.Float64 = col(SECONDS, ge=0)
    status: pl.Utf8 = col(STATUS, isin=STATUSES)
    reject_reason: pl.Utf8 = col("why: passes_on_initial, reference_fails, ... (empty when ok)")
    requests: pl.Int64 = col(REQUESTS, ge=0)
    tokens_in: pl.Int64 = col(TOKENS_IN, ge=0)
    tokens_out: pl.Int64 = col(TOKENS_OUT, ge=0)
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "completion_tests"
