"""Helpers shared by the stage assets: their checks, and a stage's plain metadata as the UI's
values."""

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pandera.polars as pa
import polars as pl

from endless_assets.stages.stage_run import Counts, Markdown, StageResult
from endless_assets.store.schemas import TABLES


def asset_key(table: str, prefix: Sequence[str] = ()) -> dg.AssetKey:
    """The key of a table's asset: the table name, under a prefix for imported batches."""
    return dg.AssetKey([*prefix, table])


def schema_check_spec(
    table: str, prefix: Sequence[str] = (), *, invariant: str | None = None
) -> dg.AssetCheckSpec:
    """The blocking check that a table's rows satisfy its pandera model, or (`invariant`, what
    it states) that they hold the stage's invariants."""
    return dg.AssetCheckSpec(
        name="matches_schema" if invariant is None else "pipeline_invariants",
        asset=asset_key(table, prefix),
        blocking=True,
        description=invariant or f"every row of {table} satisfies its pandera model (schemas.py)",
    )


def validate(
    table: str,
    frame: pl.DataFrame,
    prefix: Sequence[str] = (),
    *,
    context: dg.AssetExecutionContext | None = None,
) -> dg.AssetCheckResult:
    """Validate against the pandera model. An invalid frame fails the step: nothing is written,
    the partition already stored stays as it was, and the check is recorded as failed with the
    errors (the asset page shows it like any other check result)."""
    try:
        TABLES[table].validate(frame, lazy=True)
    except pa.errors.SchemaErrors as exc:
        errors = dg.MetadataValue.md(f"```\n{str(exc)[:8000]}\n```")
        if context is not None:
            context.log_event(
                dg.AssetCheckEvaluation(
                    asset_key=asset_key(table, prefix),
                    check_name="matches_schema",
                    passed=False,
                    severity=dg.AssetCheckSeverity.ERROR,
                    metadata={"errors": errors, "rows": len(frame)},
                )
            )
        raise dg.Failure(
            description=f"{table} does not match its schema; nothing was written",
            metadata={"errors": errors},
        ) from exc
    return dg.AssetCheckResult(
        check_name="matches_schema",
        asset_key=asset_key(table, prefix),
        passed=True,
        metadata={"rows": len(frame)},
    )


def counts_table(counts: Counter, key: str, count: str = "tasks") -> dg.TableMetadataValue:
    """A count per key (most common first) as a metadata table the UI shows with its schema."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord({key: str(k), count: n}) for k, n in counts.most_common()],
        schema=dg.TableSchema(
            columns=[dg.TableColumn(key, "string"), dg.TableColumn(count, "int")]
        ),
    )


def frame_table(frame: pl.DataFrame, limit: int | None = None) -> dg.TableMetadataValue:
    """A small frame (its first `limit` rows) as a metadata table, its schema from the frame's
    types; a value that is not a number or a flag is shown as text, a missing one as ""."""
    kinds = {pl.Int64: "int", pl.Int32: "int", pl.UInt32: "int", pl.Float64: "float"}
    columns = [
        dg.TableColumn(name, kinds.get(dtype, "bool" if dtype == pl.Boolean else "string"))
        for name, dtype in frame.schema.items()
    ]

    def cell(v: Any) -> Any:
        return v if isinstance(v, int | float | bool) else ("" if v is None else str(v))

    rows = frame.head(limit) if limit is not None else frame
    return dg.MetadataValue.table(
        records=[dg.TableRecord({k: cell(v) for k, v in row.items()}) for row in rows.to_dicts()],
        schema=dg.TableSchema(columns=columns),
    )


def ui_metadata(plain: dict[str, Any]) -> dict[str, Any]:
    """A stage's metadata (stages/stage_run.py) as Dagster shows it: counts and frames as
    tables, markdown rendered, numbers and text as they are."""
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


def stage_result(
    context: dg.AssetExecutionContext, result: StageResult, prefix: Sequence[str] = ()
) -> dg.MaterializeResult:
    """A stage's table, validated against its schema (an invalid one fails the step: nothing is
    written), with its schema check, its invariants check when it has one, and its metadata."""
    table = result.frame()
    checks = [validate(result.table, table, prefix, context=context)]
    if result.violations is not None:
        examples = "\n".join(f"- {v}" for v in result.violations[:20]) or "none"
        checks.append(
            dg.AssetCheckResult(
                check_name="pipeline_invariants",
                asset_key=asset_key(result.table, prefix),
                passed=not result.violations,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={
                    "violations": len(result.violations),
                    "examples": dg.MetadataValue.md(examples),
                },
            )
        )
    return dg.MaterializeResult(
        value=table, metadata=ui_metadata(result.metadata), check_results=checks
    )
