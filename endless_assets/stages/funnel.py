"""One batch's funnel from its stage frames in memory: the `funnel` and `funnel_reasons` stats
views (store/funnel.py) run before anything is written, with the top reason per step."""

from __future__ import annotations

import duckdb
import polars as pl

from endless_assets.store.funnel import COUNTS, TABLES
from endless_assets.store.stats_views import render_stats_sql

COLUMNS = ("stage", *COUNTS, "top_reason", "top_reason_tasks")


def batch_funnel(frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per step that had tasks, in order: its counts, and the reason most tasks did not
    survive it ("" and 0: none dropped out)."""
    with duckdb.connect() as db:
        for table in TABLES:
            db.register(table, frames[table].to_arrow())
        funnel = db.sql(render_stats_sql("funnel")).pl()
        reasons = db.sql(render_stats_sql("funnel_reasons")).pl()
    top = (
        reasons.sort(["stage_order", "tasks", "reason"], descending=[False, True, False])
        .group_by("stage_order", maintain_order=True)
        .first()
        .select("stage_order", top_reason="reason", top_reason_tasks="tasks")
    )
    return (
        funnel.join(top, on="stage_order", how="left")
        .sort("stage_order")
        .with_columns(
            pl.col("top_reason").fill_null(""),
            pl.col("top_reason_tasks").fill_null(0),
        )
        .select(COLUMNS)
    )
