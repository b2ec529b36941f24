"""The report's learnable-share section: the share per batch, the describe stage's draw per batch
(expected next to measured), and the lineages of variants."""

from __future__ import annotations

import polars as pl

from endless_assets.report.svg import vbar
from endless_assets.report.tables import batch_filter
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.store.stats_views import render_stats_sql


def learnable_per_batch(lake: Lake, batches: list[str] | None) -> pl.DataFrame:
    """The `learnable` view per batch and solver, oldest batch first."""
    return query(lake, render_stats_sql("learnable", where=batch_filter(batches)))


def learnable_chart(per_batch: pl.DataFrame) -> str:
    """Per batch (per solver when there are several), the learnable share of the kept tasks."""
    if per_batch.is_empty():
        return "<p class='empty'>no scored tasks</p>"
    solvers = sorted(per_batch["solver"].unique().to_list())
    bins = []
    for batch in sorted(per_batch["batch"].unique().to_list()):
        rows = per_batch.filter(pl.col("batch") == batch)
        shares = dict(zip(rows["solver"], rows["learnable_share"].fill_null(0.0), strict=True))
        bins.append((batch, [float(shares.get(s, 0.0)) for s in solvers]))
    return vbar(bins, solvers, x_label="batch: learnable share of kept tasks", title="learnable")


def calibration_chart(draws: pl.DataFrame) -> str:
    """Per drawn batch, the learnable share of kept tasks the draw expected and the measured."""
    rows = draws.filter(pl.col("expected_learnable_share").is_not_null())
    if rows.is_empty():
        return "<p class='empty'>no batch drawn from a history yet</p>"
    bins = []
    for row in rows.iter_rows(named=True):  # two columns a batch, side by side, labelled once
        bins.append((row["batch"], [row["expected_learnable_share"], 0.0]))
        bins.append(("", [0.0, row["learnable_share"] or 0.0]))
    return vbar(
        bins,
        ["expected before the batch", "measured after it"],
        x_label="batch: learnable share of kept tasks, expected and measured",
        title="calibration",
    )


def lineages(lake: Lake, batches: list[str] | None, limit: int = 50) -> pl.DataFrame:
    """Variants and their parents: the move, and each one's pass rate where it was scored."""
    return query(
        lake,
        f"""
        select * from (
            select c.batch, c.task_id, c.parent_task_id, p.batch as parent_batch,
                   p.family || ':' || coalesce(json_extract_string(p.truth, '$.level'),
                                               p.complexity) as parent_cell,
                   c.family || ':' || coalesce(json_extract_string(c.truth, '$.level'),
                                               c.complexity) as cell,
                   fp.pass_rate as parent_pass_rate, fc.pass_rate as pass_rate, fc.kept
            from task_descriptions c
            left join task_descriptions p on p.task_id = c.parent_task_id
            left join filtered_dataset fp on fp.task_id = c.parent_task_id
            left join filtered_dataset fc on fc.task_id = c.task_id
            where coalesce(c.parent_task_id, '') <> ''
        )
        where {batch_filter(batches)}
        order by batch, task_id limit {int(limit)}
        """,
    )
