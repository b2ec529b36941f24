"""The stats as readable tables over the chosen batches (all by default): the catalog's stats
view templates grouped over the selection, so `endless stats`, the report and the export metadata
agree with `select * from <view>`."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from endless_assets.store.catalog import query
from endless_assets.store.funnel import COUNTS
from endless_assets.store.lake import Lake, LakeError, check_batch_key
from endless_assets.store.stats_views import render_stats_sql


@dataclass(frozen=True)
class StatsTable:
    name: str  # the stats view it summarizes
    title: str
    frame: pl.DataFrame


# name -> (title, columns shown, in order)
TABLES: dict[str, tuple[str, list[str]]] = {
    "funnel": ("Funnel", ["stage", *COUNTS]),
    "funnel_reasons": ("Why tasks did not survive", ["stage", "reason", "tasks", "example"]),
    "category_mix": (
        "Category x complexity",
        ["category", "complexity", "described", "reached_filter", "kept", "mean_pass_rate"],
    ),
    "soundness": (
        "Soundness per category",
        [
            "category",
            "probed",
            "sound",
            "flaky",
            "hackable",
            "weak_test",
            "mean_mutation_score",
            "min_mutation_score",
            "audited",
            "cheats_passed",
            "misaligned",
        ],
    ),
    "soundness_probes": ("Shortcut probes that passed a completion test", ["probe", "tasks"]),
    "drift": (
        "Kept tasks re-validated on a rebuilt image",
        ["kept", "checked", "still_valid", "drifted", "harness_errors", "last_checked"],
    ),
    "difficulty": ("Difficulty per solver (pass rate)", ["solver", "difficulty", "tasks"]),
    "failure_modes": (
        "Failure modes per solver",
        [
            "solver",
            "failure_mode",
            "rollouts",
            "tasks",
            "mean_turns",
            "mean_command_diversity",
            "loop_share",
        ],
    ),
    "learnable": (
        "Learnable share (kept tasks solved in some attempts, not all) and its cost",
        [
            "solver",
            "scored",
            "kept",
            "learnable",
            "learnable_share",
            "tokens_per_learnable",
            "seconds_per_learnable",
        ],
    ),
    "token_cost": (
        "Token cost per stage",
        ["stage", "requests", "tokens_in", "tokens_out", "tokens", "tokens_per_kept_task"],
    ),
    "cost_estimates": (
        "Cost estimated before each run (endless run --plan) and actual",
        [
            "stage",
            "requests_est",
            "requests",
            "tokens_est",
            "tokens",
            "containers_est",
            "containers",
            "engine_cpu_s_est",
            "engine_cpu_s",
            "wall_s_est",
            "wall_s",
        ],
    ),
    "generator_models": (
        "Generator models",
        ["generator", "sampled", "described", "built", "validated", "kept", "tokens"],
    ),
    "solver_models": (
        "Solver models",
        [
            "solver",
            "tasks",
            "solved_tasks",
            "rollouts",
            "success_rate",
            "mean_turns",
            "loop_rate",
            "mean_command_diversity",
            "tokens_per_rollout",
        ],
    ),
    "model_matrix": (
        "Generator x solver",
        ["generator", "solver", "tasks", "solved_tasks", "mean_pass_rate"],
    ),
    "decontamination": (
        "Decontamination against benchmark task sets",
        [
            "checked",
            "reference_sets",
            "thresholds",
            "checked_tasks",
            "contaminated",
            "contaminated_share",
            "last_checked",
        ],
    ),
}


def batch_filter(batches: list[str] | None) -> str:
    """SQL for `batch in (...)`; batch keys are checked, so they need no escaping."""
    if not batches:
        return "true"
    for batch in batches:
        check_batch_key(batch)
    return "batch in (" + ", ".join(f"'{b}'" for b in batches) + ")"


def check_batches(lake: Lake, batches: list[str] | None) -> None:
    if not batches:
        return
    known = set(lake.batches("task_descriptions"))
    missing = [b for b in batches if b not in known]
    if missing:
        raise LakeError(
            f"no batch {', '.join(missing)} in {lake.root} "
            f"(batches: {', '.join(sorted(known)) or 'none'})"
        )


def stats_query(lake: Lake, name: str, batches: list[str] | None = None) -> pl.DataFrame:
    """One stats view summed over the chosen batches (no batch column)."""
    sql = render_stats_sql(name, key="'selected'", where=batch_filter(batches))
    return query(lake, sql).drop("batch", strict=False)


def stats_tables(lake: Lake, batches: list[str] | None = None) -> list[StatsTable]:
    """The stats views summed over the chosen batches, then the frontier draw per batch."""
    check_batches(lake, batches)
    tables = []
    for name, (title, columns) in TABLES.items():
        frame = stats_query(lake, name, batches)
        tables.append(StatsTable(name, title, frame.select([c for c in columns if c in frame])))
    title = "Frontier draw per batch: what it expected before the batch, what was measured after"
    draws = draws_per_batch(lake, batches).select(FRONTIER_STATS)
    tables.append(StatsTable("frontier_batches", title, draws))
    return tables


# What the report shows of the frontier_batches view: the draw, then expected next to measured.
FRONTIER_COLUMNS = (
    *("batch", "mode", "model", "tasks", "cells", "uniform", "floor", "explore", "exploit"),
    *("evolve", "explored_uncertainty", "expected_learnable_share", "learnable_share"),
    *("expected_learnable", "learnable_per_scored", "expected_signal", "signal"),
    *("expected_pass_rate", "pass_rate"),
)


# The columns `endless stats` prints of it (the report shows them all).
FRONTIER_STATS = (
    *("batch", "mode", "floor", "explore", "exploit", "evolve", "explored_uncertainty"),
    *("expected_learnable_share", "learnable_share", "expected_signal", "signal"),
)


def draws_per_batch(lake: Lake, batches: list[str] | None) -> pl.DataFrame:
    """The describe stage's draw per batch (frontier only): its mode, how many tasks each source
    gave, how unsure it was of the cells it explored, and what it expected of the batch next to what
    was measured after (the `frontier_batches` view)."""
    columns = ", ".join(FRONTIER_COLUMNS)
    return query(
        lake, f"select {columns} from frontier_batches where {batch_filter(batches)} order by batch"
    )


def headline(lake: Lake, batches: list[str] | None = None) -> dict[str, float | int]:
    """The few figures a reader wants first (also the dataset_exports asset metadata)."""
    where = batch_filter(batches)
    row = query(
        lake,
        f"""
        select
          (select count(distinct batch) from task_descriptions where {where}) as batches,
          (select count(*) from task_descriptions where {where}) as tasks_sampled,
          (select count(*) from filtered_dataset where kept and {where}) as tasks_kept,
          (select count(*) from filtered_dataset where kept and successes > 0
              and successes < scored_attempts and {where}) as tasks_learnable,
          (select avg(pass_rate) from filtered_dataset where kept and {where}) as mean_pass_rate,
          (select count(*) from solver_rollouts where {where}) as rollouts
        """,
    ).row(0, named=True)
    cost = stats_query(lake, "token_cost", batches)
    tokens = int(cost["tokens"].fill_null(0).sum()) if len(cost) else 0
    sampled = int(row["tasks_sampled"] or 0)
    kept = int(row["tasks_kept"] or 0)
    return {
        "batches": int(row["batches"] or 0),
        "tasks_sampled": sampled,
        "tasks_kept": kept,
        "keep_rate": round(kept / sampled, 4) if sampled else 0.0,
        "learnable_share": round(int(row["tasks_learnable"] or 0) / kept, 4) if kept else 0.0,
        "mean_pass_rate_kept": round(float(row["mean_pass_rate"] or 0.0), 4),
        "rollouts": int(row["rollouts"] or 0),
        "tokens": tokens,
        "tokens_per_kept_task": round(tokens / kept, 1) if kept else 0.0,
    }
