"""How much of a batch can teach: the share of kept tasks a solver solved in some of its attempts
but not all, and what each such learnable task cost."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import polars as pl


def is_learnable(successes: str = "successes", attempts: str = "scored_attempts") -> pl.Expr:
    """Solved in some scored attempts, not all: 0 < pass rate < 1, counted exactly."""
    return (pl.col(successes) > 0) & (pl.col(successes) < pl.col(attempts))


def learnable_share(filtered: pl.DataFrame, by: Sequence[str] = ("batch",)) -> pl.DataFrame:
    """Per group of `by` (default: per batch), from filtered_dataset rows: scored, kept,
    learnable (kept, 0 < pass rate < 1), learnable_share (of kept) and learnable_per_scored
    (null: nothing to divide by), sorted by the groups."""
    learnable = pl.col("kept") & is_learnable()
    return (
        filtered.group_by(*by)
        .agg(
            scored=(pl.col("scored_attempts") > 0).sum().cast(pl.Int64),
            kept=pl.col("kept").sum().cast(pl.Int64),
            learnable=learnable.sum().cast(pl.Int64),
        )
        .with_columns(
            learnable_share=_ratio("learnable", "kept"),
            learnable_per_scored=_ratio("learnable", "scored"),
        )
        .sort(*by)
    )


def _ratio(numerator: str, denominator: str) -> pl.Expr:
    return (
        pl.when(pl.col(denominator) > 0)
        .then(pl.col(numerator) / pl.col(denominator))
        .otherwise(None)
        .cast(pl.Float64)
    )


def task_costs(
    token_frames: Iterable[pl.DataFrame], container_frames: Iterable[pl.DataFrame]
) -> pl.DataFrame:
    """task_id, batch, tokens and container_seconds per task: the tokens of every frame in
    `token_frames` and the `seconds` of every frame in `container_frames` (the stages that run
    containers)."""
    parts = [
        f.select(
            "task_id",
            "batch",
            tokens=(pl.col("tokens_in").fill_null(0) + pl.col("tokens_out").fill_null(0)).cast(
                pl.Int64
            ),
            container_seconds=pl.lit(0.0),
        )
        for f in token_frames
    ]
    parts += [
        f.select(
            "task_id",
            "batch",
            tokens=pl.lit(0, dtype=pl.Int64),
            container_seconds=pl.col("seconds").fill_null(0.0).cast(pl.Float64),
        )
        for f in container_frames
    ]
    if not parts:
        schema = {"task_id": pl.Utf8, "batch": pl.Utf8, "tokens": pl.Int64}
        return pl.DataFrame(schema={**schema, "container_seconds": pl.Float64})
    return (
        pl.concat(parts)
        .group_by("task_id", "batch")
        .agg(pl.col("tokens").sum(), pl.col("container_seconds").sum())
        .sort("batch", "task_id")
    )


def cost_per_learnable(filtered: pl.DataFrame, costs: pl.DataFrame) -> pl.DataFrame:
    """Per batch: tasks, tokens and container_seconds over every task (`costs`, as `task_costs`
    gives), learnable, and tokens_per_learnable and container_seconds_per_learnable (null: none
    learnable)."""
    learnable = (
        filtered.filter(pl.col("kept") & is_learnable())
        .group_by("batch")
        .agg(learnable=pl.len().cast(pl.Int64))
    )
    return (
        costs.group_by("batch")
        .agg(
            tasks=pl.len().cast(pl.Int64),
            tokens=pl.col("tokens").sum().cast(pl.Int64),
            container_seconds=pl.col("container_seconds").sum().cast(pl.Float64),
        )
        .join(learnable, on="batch", how="left")
        .with_columns(pl.col("learnable").fill_null(0))
        .with_columns(
            tokens_per_learnable=_ratio("tokens", "learnable"),
            container_seconds_per_learnable=_ratio("container_seconds", "learnable"),
        )
        .sort("batch")
    )
