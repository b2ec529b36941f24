"""The describe stage of an imported batch (no Dagster here; defs/imports.py is the asset): a row
per task directory of the source, carrying its own environment, tests and solution; unreadable
ones keep a row with the reason."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from endless_assets.interop.harbor_import import ImportProblem
from endless_assets.interop.imports import import_tasks
from endless_assets.models import OK, task_seed
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.stages.describe import TABLE, Description
from endless_assets.stages.runner import Log
from endless_assets.stages.stage_run import Markdown, StageResult, status_metadata, task_markdown

IMPORTER = ("imported", "", "")  # the generator a row that failed to import names


class ImportFailed(ValueError):
    """Nothing could be imported from the source (one line saying why)."""


def run_import(
    settings: Settings,
    sandbox: Sandbox,
    source: Path,
    batch: str,
    *,
    fmt: str,
    base_image_map: Mapping[str, str],
    log: Log,
) -> StageResult:
    """Import the task directories of `source` in format `fmt` as `batch`'s descriptions, on
    our base image of each task's recipe (built if this engine lacks it)."""
    started = time.monotonic()

    def base_image(recipe: str) -> str:
        return sandbox.base_for(recipe or settings.imports.base_recipe).tag

    try:
        outcomes = import_tasks(
            source,
            batch,
            fmt=fmt,
            base_image_map=dict(base_image_map),
            base_image=base_image(settings.imports.base_recipe),
            recipes=base_image,
            max_binary_bytes=int(settings.imports.max_binary_file_mb * 2**20),
        )
    except (ImportProblem, ValueError) as exc:
        raise ImportFailed(f"cannot import from {source}: {exc}") from exc
    if not outcomes:
        raise ImportFailed(f"no task directories in {source}: nothing to import")
    rows = []
    for outcome in outcomes:
        if outcome.draft is not None:
            rows.append(Description(outcome.draft).row())
            continue
        log.warning(f"{outcome.directory}: not imported: {outcome.reason}")
        reason = f"import_failed: {outcome.directory}: {outcome.reason}"
        seed = task_seed(batch, outcome.index)
        rows.append(
            Description.failed(batch, outcome.index, seed, reason, generator=IMPORTER).row()
        )
    notes = Counter(note for outcome in outcomes for note in outcome.notes)
    failed = [o for o in outcomes if o.draft is None]
    metadata = {
        "funnel_step": "describe (import)",
        "source_dir": source,
        "format": fmt,
        "imported": len(outcomes) - len(failed),
        "not_imported": len(failed),
        **status_metadata(rows),
        **{f"tasks_with_{note.replace(' ', '_')}": n for note, n in notes.items()},
        "wall_seconds": round(time.monotonic() - started, 2),
    }
    if failed:
        lines = "\n".join(f"| {o.directory} | {o.reason} |" for o in failed[:50])
        metadata["not_imported_dirs"] = Markdown(f"| directory | reason |\n|---|---|\n{lines}")
    imported = [r for r in rows if r["status"] == OK]
    if imported:
        metadata["sample_task"] = task_markdown(imported[0])
    return StageResult(TABLE, rows, metadata=metadata)
