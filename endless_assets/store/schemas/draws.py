"""The tables of the describe stage's draw: `task_draws`, one row per task index with the cell it
was drawn from and why, and `cell_history`, the solver's history window the draw read, one row per
cell; and the columns of the `cell_batches` view (per batch, solver and cell), which the
history is summed from. The cell and count columns are said once, in the bases."""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from endless_assets.store.schemas.base import Strict, col

N = {"ge": 0}
MAYBE = {"nullable": True}


class Cells(pa.DataFrameModel):
    """The columns that name a cell (`sampling.cells.Cell.columns`)."""

    cell: pl.Utf8 = col("the cell's id: taxonomy:<category>:<complexity> or family:<name>:<level>")
    kind: pl.Utf8 = col(
        "taxonomy (LLM-written tasks) or family (procedural tasks)", isin=["taxonomy", "family"]
    )
    category: pl.Utf8 = col("taxonomy category (taxonomy cells; null for family cells)", **MAYBE)
    complexity: pl.Utf8 = col(
        "taxonomy complexity (taxonomy cells; null for family cells)", **MAYBE
    )
    family: pl.Utf8 = col("procedural family (family cells; null for taxonomy cells)", **MAYBE)
    level: pl.Int64 = col(
        "the family's complexity level 1-6 (family cells; else null)", ge=1, le=6, **MAYBE
    )


class Counts(Cells):
    """What a solver made of a cell's tasks over some batches."""

    generated: pl.Int64 = col("task_descriptions rows of the cell (any status)")
    described: pl.Int64 = col("of which status ok")
    reached: pl.Int64 = col("tasks the solver made at least one attempt at")
    scored: pl.Int64 = col("tasks with at least one scored attempt (reward not null)")
    kept: pl.Int64 = col("tasks filtered_dataset kept for this solver")
    learnable: pl.Int64 = col("scored tasks with 0 < successes < scored attempts")
    all_passed: pl.Int64 = col("scored tasks every scored attempt solved")
    all_failed: pl.Int64 = col("scored tasks no attempt solved")
    attempts: pl.Int64 = col("scored attempts over the scored tasks")
    successes: pl.Int64 = col("of which solved")
    mean_pass_rate: pl.Float64 = col(
        "mean over scored tasks of successes / scored attempts", **MAYBE
    )
    outcomes: pl.Utf8 = col("JSON list of [successes, scored attempts, tasks], sorted")
    tokens: pl.Int64 = col(
        "model tokens spent making the cell's tasks (describe to soundness), in and out", **MAYBE
    )
    rollout_tokens: pl.Int64 = col("the solver's tokens over its attempts at them, in and out")


class _BatchSolver(pa.DataFrameModel):
    batch: pl.Utf8 = col("the batch the tasks belong to")
    solver: pl.Utf8 = col("policy or policy/model ('' for a batch no solver reached yet)")


class CellBatches(Counts, _BatchSolver):
    """The `cell_batches` view's columns (a view, never validated): per batch, solver and cell."""


class _Window(pa.DataFrameModel):
    as_of: pl.Utf8 = col("the batch the history is for: only batches strictly before it count")
    solver: pl.Utf8 = col("policy or policy/model")
    batches: pl.Int64 = col("batches in the window (those the solver reached)")
    first_batch: pl.Utf8 = col("the window's first batch ('' when empty)")
    last_batch: pl.Utf8 = col("the window's last batch ('' when empty)")


class CellHistory(Counts, _Window):
    """The history a frontier draw read: per cell, what its solver made of the batches before."""

    class Config(Strict):
        name = "cell_history"


class _Slot(pa.DataFrameModel):
    batch: pl.Utf8 = col("the batch drawn for (its history is the batches strictly before)")
    index: pl.Int64 = col("the task's position in its batch, from 0", **N)


class TaskDraws(Cells, _Slot):
    """The describe stage's draw: per task index, its cell, the draw's mode and why."""

    source: pl.Utf8 = col(
        "uniform (cold start or degraded), floor (the cells drawn least, the least known first), "
        "exploit or explore (Thompson sampling: explore when the cell's expected score is below "
        "half the best's, so it won on its uncertainty) or evolve",
        isin=["uniform", "floor", "exploit", "explore", "evolve"],
    )
    mode: pl.Utf8 = col(
        "the draw's mode: cold_start, degraded or targeting",
        isin=["cold_start", "degraded", "targeting"],
    )
    solver: pl.Utf8 = col("the solver whose history steered the draw ('' at a cold start)")
    k: pl.Int64 = col("attempts per task the scores assume (null at a cold start)", **MAYBE)
    target_pass_rate: pl.Float64 = col("the pass rate a drawn task should land near")
    evidence: pl.Int64 = col("the cell's scored tasks in the history window", **N)
    learnable_seen: pl.Int64 = col("of which learnable (0 < successes < attempts)", **N)
    mean_pass_rate: pl.Float64 = col("posterior mean pass rate of a new task of the cell", **MAYBE)
    learnable_prob: pl.Float64 = col(
        "posterior probability a new task of the cell is kept and learnable (0 < pass rate < 1)",
        **MAYBE,
    )
    kept_prob: pl.Float64 = col(
        "posterior probability a new task of the cell is kept (solved, inside the keep band)",
        **MAYBE,
    )
    survival: pl.Float64 = col("share of the cell's tasks expected to reach the solver", **MAYBE)
    signal: pl.Float64 = col(
        "expected training signal of a new task (reward variance peaked at the target, 0 "
        "outside the keep band; 1 at the target)",
        **MAYBE,
    )
    tokens: pl.Float64 = col(
        "expected tokens a task of the cell costs (null: none recorded)", **MAYBE
    )
    score: pl.Float64 = col(
        "posterior mean score: survival x signal per token, relative to the average task", **MAYBE
    )
    uncertainty: pl.Float64 = col(
        "posterior sd of a new task's expected signal: how unsure the draw is of the cell's worth",
        **MAYBE,
    )
    model: pl.Utf8 = col(
        "the posterior: pooled (over categories and levels) or per_cell",
        isin=["pooled", "per_cell"],
    )
    sample: pl.Float64 = col(
        "the Thompson-sampled score that won the slot (exploit, explore)", **MAYBE
    )
    sampled_pass_rate: pl.Float64 = col("the sampled mean pass rate behind it", **MAYBE)
    history_batches: pl.Int64 = col("batches in the history window", **N)
    history_last: pl.Utf8 = col("the window's last batch ('' when empty)")
    parent_task_id: pl.Utf8 = col("the task an evolve slot is a variant of ('' otherwise)")
    seed: pl.Int64 = col("an evolve slot's child seed (null: the batch's own seed)", **MAYBE)
    why: pl.Utf8 = col("an evolve slot's reason ('' otherwise)")

    class Config(Strict):
        name = "task_draws"
