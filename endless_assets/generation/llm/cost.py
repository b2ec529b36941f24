"""What the model cost per task, from the stage tables' `requests` and token columns."""

from __future__ import annotations

import polars as pl


def cost_per_task(stage_tables: list[pl.DataFrame], tasks: int) -> dict[str, float]:
    """What the batch's requests and tokens over the given stage tables (rejected tasks'
    spend included) come to per surviving task."""
    if tasks < 1:
        return {}
    totals = {"requests": 0, "tokens_in": 0, "tokens_out": 0}
    for table in stage_tables:
        for column in totals:
            if column in table.columns and len(table):
                totals[column] += int(table[column].sum())
    return {f"{column}_per_ok_task": round(v / tasks, 1) for column, v in totals.items()}
