"""What the catalog shows of each table asset before its first materialization: its columns
(from the pandera models, store/schemas/readable.py), owners, tags, the code version where one
says what made the rows, and the DuckDB view it is read through. The IO manager reports the same
column schema with each materialization."""

from __future__ import annotations

import functools
from typing import Any

import dagster as dg

from endless_assets.store.schemas import TABLES
from endless_assets.store.schemas.readable import column_docs

OWNERS = ["team:endless"]
# The stage of each table, as the funnel names it (a tag the catalog filters on).
STAGES = {
    "task_descriptions": "describe",
    "task_draws": "describe",
    "cell_history": "describe",
    "task_decontamination": "decontamination",
    "contamination_recheck": "decontamination",
    "task_environments": "environment",
    "completion_tests": "completion-test",
    "task_soundness": "soundness",
    "solver_rollouts": "solver-rollouts",
    "filtered_dataset": "solver-filter",
    "drift_revalidation": "drift",
}


@functools.cache
def column_schema(table: str) -> dg.TableSchema:
    """A table's columns as Dagster shows them on the asset page (descriptions are markdown)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                c.name,
                c.type,
                description=c.description.replace("<", "&lt;"),
                constraints=dg.TableColumnConstraints(c.nullable, c.unique, c.constraints),
            )
            for c in column_docs(TABLES[table])
        ]
    )


def table_asset(table: str, *, code_version: str | None = None) -> dict[str, Any]:
    """The catalog arguments of a table asset's decorator: its column schema and the DuckDB view
    that reads it (metadata), owners, tags and `code_version` (what made its rows, when one
    version says it)."""
    return {
        "metadata": {
            "dagster/column_schema": column_schema(table),
            "dagster/table_name": f"endless.main.{table}",
        },
        "owners": OWNERS,
        "tags": {"endless/stage": STAGES[table], "endless/table": table},
        "code_version": code_version,
    }
