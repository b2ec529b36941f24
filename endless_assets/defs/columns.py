"""What the catalog shows of each table asset before its first materialization: its columns
(from the pandera models in store/schemas/, with their descriptions, readable types and
constraints), owners, tags, the code version where one says what made the rows, and the DuckDB view
it is read through. The IO manager reports the same column schema with each materialization."""

from __future__ import annotations

import functools
from typing import Any

import dagster as dg
import polars as pl

from endless_assets.store.schemas import TABLES

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
_NAMES = {
    pl.String: "string",
    pl.Boolean: "bool",
    pl.Int8: "int8",
    pl.Int16: "int16",
    pl.Int32: "int32",
    pl.Int64: "int64",
    pl.UInt8: "uint8",
    pl.UInt16: "uint16",
    pl.UInt32: "uint32",
    pl.UInt64: "uint64",
    pl.Float32: "float32",
    pl.Float64: "float64",
    pl.Date: "date",
    pl.Binary: "binary",
}


def readable_type(dtype: pl.DataType) -> str:
    """A polars type as a catalog reads it: string, int64, list<string>, struct<a: int64>,
    timestamp[UTC] (not polars' reprs)."""
    if isinstance(dtype, pl.List | pl.Array):
        return f"list<{readable_type(dtype.inner)}>"
    if isinstance(dtype, pl.Struct):
        fields = ", ".join(f"{f.name}: {readable_type(f.dtype)}" for f in dtype.fields)
        return f"struct<{fields}>"
    if isinstance(dtype, pl.Datetime):
        return f"timestamp[{dtype.time_zone}]" if dtype.time_zone else "timestamp"
    for kind, name in _NAMES.items():
        if dtype == kind:
            return name
    return str(dtype).lower()


def _constraints(column: Any) -> dg.TableColumnConstraints:
    other = []
    for check in column.checks:
        stats = check.statistics or {}
        if "allowed_values" in stats:
            other.append(f"one of {', '.join(map(str, stats['allowed_values']))}")
        elif "min_value" in stats and "max_value" in stats:
            other.append(f"between {stats['min_value']} and {stats['max_value']}")
        elif "min_value" in stats:
            other.append(f">= {stats['min_value']}")
        elif "max_value" in stats:
            other.append(f"<= {stats['max_value']}")
        elif "string" in stats:
            other.append(f"starts with {stats['string']}")
    return dg.TableColumnConstraints(nullable=column.nullable, unique=column.unique, other=other)


@functools.cache
def column_schema(table: str) -> dg.TableSchema:
    """A table's columns as Dagster shows them on the asset page, from its pandera model."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name,
                readable_type(column.dtype.type),
                description=(column.description or "").replace("<", "&lt;"),  # (markdown)
                constraints=_constraints(column),
            )
            for name, column in TABLES[table].to_schema().columns.items()
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
