"""The checks the stage assets share, and a stage's result as a materialization."""

from collections.abc import Sequence

import dagster as dg
import pandera.polars as pa
import polars as pl

from endless_assets.defs.metadata import ui_metadata
from endless_assets.stages.stage_run import StageResult
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
    the stored partition stays as it was, and the check is recorded as failed with the errors."""
    key = asset_key(table, prefix)
    try:
        TABLES[table].validate(frame, lazy=True)
    except pa.errors.SchemaErrors as exc:
        errors = dg.MetadataValue.md(f"```\n{str(exc)[:8000]}\n```")
        if context is not None:  # (severity ERROR, the default)
            failed = {"errors": errors, "rows": len(frame)}
            context.log_event(dg.AssetCheckEvaluation(key, "matches_schema", False, failed))
        raise dg.Failure(
            description=f"{table} does not match its schema; nothing was written",
            metadata={"errors": errors},
        ) from exc
    return dg.AssetCheckResult(
        check_name="matches_schema", asset_key=key, passed=True, metadata={"rows": len(frame)}
    )


def stage_result(
    context: dg.AssetExecutionContext, result: StageResult, prefix: Sequence[str] = ()
) -> dg.MaterializeResult:
    """A stage's table, validated against its schema (an invalid one fails the step), with its
    schema check, its invariants check when it has one, and its metadata."""
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
