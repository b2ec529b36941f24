"""A stage's plain metadata (stages/stage_run.py) as the values the Dagster UI shows."""

from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from endless_assets.stages.stage_run import Counts, Markdown

_KINDS = {pl.Int64: "int", pl.Int32: "int", pl.UInt32: "int", pl.Float64: "float"}


def counts_table(counts: Counter, key: str, count: str = "tasks") -> dg.TableMetadataValue:
    """A count per key (most common first) as a metadata table the UI shows with its schema."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord({key: str(k), count: n}) for k, n in counts.most_common()],
        schema=dg.TableSchema(
            columns=[dg.TableColumn(key, "string"), dg.TableColumn(count, "int")]
        ),
    )


def _cell(v: Any) -> Any:
    return v if isinstance(v, int | float | bool) else ("" if v is None else str(v))


def frame_table(frame: pl.DataFrame, limit: int | None = None) -> dg.TableMetadataValue:
    """A small frame (its first `limit` rows) as a metadata table, its schema from the frame's
    types; a value that is not a number or a flag is shown as text, a missing one as ""."""
    columns = [
        dg.TableColumn(name, _KINDS.get(dtype, "bool" if dtype == pl.Boolean else "string"))
        for name, dtype in frame.schema.items()
    ]
    rows = frame.head(limit) if limit is not None else frame
    return dg.MetadataValue.table(
        records=[dg.TableRecord({k: _cell(v) for k, v in r.items()}) for r in rows.to_dicts()],
        schema=dg.TableSchema(columns=columns),
    )


def ui_metadata(plain: dict[str, Any]) -> dict[str, Any]:
    """Counts and frames as tables, markdown rendered, paths as paths, the rest as it is."""
    shown: dict[str, Any] = {}
    for key, value in plain.items():
        if isinstance(value, Counts):
            value = counts_table(value.counts, value.key, value.count)
        elif isinstance(value, pl.DataFrame):
            value = frame_table(value)
        elif isinstance(value, Markdown):
            value = dg.MetadataValue.md(str(value))
        elif isinstance(value, Path):
            value = dg.MetadataValue.path(str(value))
        shown[key] = value
    return shown
