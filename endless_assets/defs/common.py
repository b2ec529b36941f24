"""Helpers shared by the stage assets: the stage runner with the asset's log, checks, metadata."""

import contextlib
import json
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import dagster as dg
import pandera.polars as pa
import polars as pl

from endless_assets.defs.resources import PipelineSettings
from endless_assets.generation import TaskGenerator
from endless_assets.settings import Settings
from endless_assets.stages import runner
from endless_assets.stages.runner import ENGINE_RETRIES
from endless_assets.store.journal import Resumable
from endless_assets.store.schemas import TABLES

T = TypeVar("T")
R = TypeVar("R")


def run_parallel(
    context: dg.AssetExecutionContext,
    items: Sequence[T],
    work: Callable[[T], R],
    on_error: Callable[[T, BaseException], R],
    *,
    workers: int,
    label: str,
    engine_retries: int = ENGINE_RETRIES,
    recover: Callable[[], list[str]] | None = None,
) -> list[R]:
    """stages/runner.py's `run_parallel`, its progress in the asset's log."""
    return runner.run_parallel(
        items,
        work,
        on_error,
        log=context.log,
        workers=workers,
        label=label,
        engine_retries=engine_retries,
        recover=recover,
    )


def resumable(
    pipeline: PipelineSettings,
    settings: Settings,
    table: str,
    batch: str,
    generator: TaskGenerator,
    *,
    key: str = "task_id",
    made_from: object = None,
) -> Resumable:
    """stages/runner.py's `resumable`, journaled in the pipeline's lake."""
    return runner.resumable(
        pipeline.lake().data_dir, settings, table, batch, generator, key=key, made_from=made_from
    )


def asset_key(table: str, prefix: Sequence[str] = ()) -> dg.AssetKey:
    """The key of a table's asset: the table name, under a prefix for imported batches."""
    return dg.AssetKey([*prefix, table])


def schema_check_spec(table: str, prefix: Sequence[str] = ()) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        name="matches_schema",
        asset=asset_key(table, prefix),
        blocking=True,
        description=f"every row of {table} satisfies its pandera model (schemas.py)",
    )


def invariants_check_spec(
    table: str, description: str, prefix: Sequence[str] = ()
) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        name="pipeline_invariants",
        asset=asset_key(table, prefix),
        blocking=True,
        description=description,
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


def invariants(
    table: str, violations: list[str], prefix: Sequence[str] = ()
) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name="pipeline_invariants",
        asset_key=asset_key(table, prefix),
        passed=not violations,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "violations": len(violations),
            "examples": dg.MetadataValue.md("\n".join(f"- {v}" for v in violations[:20]) or "none"),
        },
    )


def status_metadata(frame: pl.DataFrame, *, status_col: str = "status") -> dict[str, Any]:
    """Row counts by status and the top rejection reasons."""
    statuses = Counter(frame[status_col].to_list()) if len(frame) else Counter()
    meta: dict[str, Any] = {
        "rows": len(frame),
        "ok": statuses.get("ok", 0),
        "rejected": statuses.get("rejected", 0),
        "harness_errors": statuses.get("harness_error", 0),
    }
    if "reject_reason" in frame.columns and len(frame):
        reasons = Counter(r.split(": ", 1)[0] for r in frame["reject_reason"].to_list() if r)
        if reasons:
            meta["reject_reasons"] = counts_table(reasons, "reason")
    return meta


def counts_table(counts: Counter, key: str, count: str = "tasks") -> dg.TableMetadataValue:
    """A count per key (most common first) as a metadata table the UI shows with its schema."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord({key: str(k), count: n}) for k, n in counts.most_common()],
        schema=dg.TableSchema(
            columns=[dg.TableColumn(key, "string"), dg.TableColumn(count, "int")]
        ),
    )


def frame_table(frame: pl.DataFrame) -> dg.TableMetadataValue:
    """A small frame as a metadata table, its schema from the frame's types."""
    kinds = {pl.Int64: "int", pl.Int32: "int", pl.UInt32: "int", pl.Float64: "float"}
    columns = [
        dg.TableColumn(name, kinds.get(dtype, "bool" if dtype == pl.Boolean else "string"))
        for name, dtype in frame.schema.items()
    ]
    return dg.MetadataValue.table(
        records=[dg.TableRecord(row) for row in frame.to_dicts()],
        schema=dg.TableSchema(columns=columns),
    )


def engines_table(report: list[dict[str, Any]]) -> dg.TableMetadataValue:
    """The sandbox engines (engines.EnginePool.report): slots, work placed, up or drained."""
    kinds = {"engine": "string", "slots": "int", "placed": "int", "up": "bool"}
    kinds["down_reason"] = "string"
    return dg.MetadataValue.table(
        records=[dg.TableRecord({k: r[k] for k in kinds}) for r in report],
        schema=dg.TableSchema(columns=[dg.TableColumn(k, t) for k, t in kinds.items()]),
    )


def timing_metadata(seconds: list[float], wall: float) -> dict[str, Any]:
    meta: dict[str, Any] = {"wall_seconds": round(wall, 2)}
    if seconds:
        meta["median_task_seconds"] = round(statistics.median(seconds), 3)
        meta["max_task_seconds"] = round(max(seconds), 3)
        if wall > 0:
            meta["tasks_per_minute"] = round(len(seconds) / wall * 60, 1)
    return meta


def usage_metadata(frame: pl.DataFrame) -> dict[str, Any]:
    if not len(frame) or "requests" not in frame.columns:
        return {}
    return {
        "llm_requests": int(frame["requests"].sum()),
        "tokens_in": int(frame["tokens_in"].sum()),
        "tokens_out": int(frame["tokens_out"].sum()),
    }


def task_markdown(row: dict[str, Any]) -> str:
    """A task rendered for the UI: instruction, truth, tests, solution."""
    truth = row.get("truth") or "{}"
    with contextlib.suppress(TypeError, ValueError):
        truth = json.dumps(json.loads(truth), indent=2, ensure_ascii=False)
    parts = [
        f"### {row.get('task_id', '')} — {row.get('category', '')} ({row.get('complexity', '')})",
        f"*{row.get('scenario', '')}* · family `{row.get('family', '')}`",
        "",
        "**Instruction**",
        "",
        str(row.get("instruction", "")),
        "",
        "**Truth (privileged)**",
        f"```json\n{truth[:3000]}\n```",
    ]
    for title, key, lang in (
        ("Dockerfile", "dockerfile", "dockerfile"),
        ("Completion test", "completion_test", "python"),
        ("Reference solution", "reference_solution", "bash"),
    ):
        if row.get(key):
            parts += [f"**{title}**", f"```{lang}\n{str(row[key])[:3000]}\n```"]
    return "\n".join(parts)
