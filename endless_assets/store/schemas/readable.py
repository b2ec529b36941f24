"""The columns of a table's pandera model as a catalog shows them: readable types (string,
int64, list<string>, struct<a: int64>, timestamp[UTC], not polars' reprs) and constraints in
words. defs/columns.py hands them to Dagster's asset pages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

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


def _constraint(stats: dict[str, Any]) -> str | None:
    if "allowed_values" in stats:
        return f"one of {', '.join(map(str, stats['allowed_values']))}"
    if "min_value" in stats and "max_value" in stats:
        return f"between {stats['min_value']} and {stats['max_value']}"
    if "min_value" in stats:
        return f">= {stats['min_value']}"
    if "max_value" in stats:
        return f"<= {stats['max_value']}"
    if "string" in stats:
        return f"starts with {stats['string']}"
    return None


@dataclass(frozen=True)
class ColumnDoc:
    name: str
    type: str
    description: str
    nullable: bool
    unique: bool
    constraints: list[str]


def column_docs(model: Any) -> list[ColumnDoc]:
    """Each column of a pandera model, in its order."""
    return [
        ColumnDoc(
            name,
            readable_type(column.dtype.type),
            column.description or "",
            column.nullable,
            column.unique,
            [c for check in column.checks if (c := _constraint(check.statistics or {}))],
        )
        for name, column in model.to_schema().columns.items()
    ]
