"""`batch_costs`: what a batch cost, stage by stage, beside what was estimated before it ran
(store/costs.py). Written by `filtered_dataset` at the end of the batch's run; the history
`endless run --plan` estimates the next batches from."""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from endless_assets.store.schemas.base import BATCH, CREATED_AT, TOKENS_IN, TOKENS_OUT, Strict, col

COST_STAGES = [
    *("describe", "environment", "completion test"),
    *("soundness", "solver rollouts", "other"),
]
N = {"ge": 0}
NULLABLE = {"nullable": True, "ge": 0}
ESTIMATED = "estimated before the run: "


class BatchCosts(pa.DataFrameModel):
    batch: pl.Utf8 = col(BATCH)
    stage: pl.Utf8 = col(
        "describe, environment, completion test, soundness, solver rollouts, or other (the base "
        "image, decontamination, the filter, starting and ending the runs)",
        isin=COST_STAGES,
    )
    stage_order: pl.Int64 = col("the stage's place in the pipeline, from 1", **N)
    generator: pl.Utf8 = col("the generator setting: procedural or llm")
    generator_model: pl.Utf8 = col("the generator's model ('' for procedural)")
    solver: pl.Utf8 = col("the solver setting: oracle, noop or chat")
    solver_model: pl.Utf8 = col("the solver's model ('' for oracle and noop)")
    k: pl.Int64 = col("attempts per task in the solver stage", ge=1)
    soundness: pl.Utf8 = col("the soundness setting: full, controls or off")
    soundness_repeats: pl.Int64 = col("runs of each soundness control", **N)
    auditor_model: pl.Utf8 = col("the soundness auditor's model ('' when none runs)")
    workers: pl.Int64 = col("tasks in parallel per stage", ge=1)
    tasks: pl.Int64 = col("tasks the batch asked for", **N)
    units: pl.Int64 = col(
        "what the stage worked on: tasks entering it (attempts in solver rollouts, runs in other)",
        **N,
    )
    units_run: pl.Int64 = col("of which made in this batch's runs (not reused from a journal)", **N)
    requests: pl.Int64 = col("LLM requests of the stage's rows", **N)
    tokens_in: pl.Int64 = col(TOKENS_IN, **N)
    tokens_out: pl.Int64 = col(TOKENS_OUT, **N)
    containers: pl.Int64 = col("task containers the stage started", **N)
    engine_cpu_seconds: pl.Float64 = col(
        "CPU-seconds of the container engine while the stage ran (null: a remote engine)",
        **NULLABLE,
    )
    wall_seconds: pl.Float64 = col("wall-clock seconds of the stage's steps", **N)
    fixed_seconds: pl.Float64 = col(
        "of which outside the work on its units (setting up, reading and writing tables): what "
        "does not grow with the batch",
        **N,
    )
    est_units: pl.Float64 = col(ESTIMATED + "units", **N)
    est_requests: pl.Float64 = col(ESTIMATED + "LLM requests", **N)
    est_tokens_in: pl.Float64 = col(ESTIMATED + "prompt tokens", **N)
    est_tokens_out: pl.Float64 = col(ESTIMATED + "completion tokens", **N)
    est_containers: pl.Float64 = col(ESTIMATED + "task containers", **N)
    est_engine_cpu_seconds: pl.Float64 = col(ESTIMATED + "engine CPU-seconds", **NULLABLE)
    est_wall_seconds: pl.Float64 = col(ESTIMATED + "wall-clock seconds", **N)
    basis: pl.Utf8 = col("what the estimate came from: which earlier batches, or the prior and why")
    run_ids: pl.Utf8 = col("the Dagster runs that made the batch, comma-separated")
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "batch_costs"


# The stats view `cost_estimates` (store/stats_views.py): per batch and stage, the estimate made
# before the run beside what the stage cost.
COST_ESTIMATES_SQL = """
    select {key} as batch, stage_order, stage,
           sum(est_requests) as requests_est, sum(requests)::BIGINT as requests,
           sum(est_tokens_in + est_tokens_out) as tokens_est,
           sum(tokens_in + tokens_out)::BIGINT as tokens,
           sum(est_containers) as containers_est, sum(containers)::BIGINT as containers,
           sum(est_engine_cpu_seconds) as engine_cpu_s_est, sum(engine_cpu_seconds) as engine_cpu_s,
           sum(est_wall_seconds) as wall_s_est, sum(wall_seconds) as wall_s
    from batch_costs where {where} group by all order by batch, stage_order
"""
