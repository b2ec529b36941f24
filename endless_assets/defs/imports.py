"""Imported batches: tasks brought in from elsewhere (e.g. Harbor task directories), stored as
their own named partitions and then validated, rolled out and filtered by the same stage code as
generated batches (see stage_spec.py).

`endless import harbor DIR --batch NAME` (or `terminal-bench`) adds the partition and launches
the `imported_batch` job with the source directory in the run config of
`imported/task_descriptions`.
"""

import time
from collections import Counter
from pathlib import Path

import dagster as dg

from endless_assets.defs.columns import table_asset
from endless_assets.defs.common import schema_check_spec, status_metadata, task_markdown, validate
from endless_assets.defs.completion_tests import build_completion_tests
from endless_assets.defs.dataset import build_filtered_dataset
from endless_assets.defs.decontamination import (
    imported_contamination_recheck,
    imported_task_decontamination,
)
from endless_assets.defs.environments import build_task_environments
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.rollouts import build_solver_rollouts
from endless_assets.defs.stage_spec import IMPORTED
from endless_assets.generation import Usage
from endless_assets.interop.harbor_import import ImportProblem
from endless_assets.interop.imports import import_tasks
from endless_assets.models import REJECTED, task_seed
from endless_assets.stages.rows import description_row, failed_description_row
from endless_assets.store.columns import frame

TABLE = "task_descriptions"
IMPORT_OP = "imported__task_descriptions"


class ImportConfig(dg.Config):
    source_dir: str
    format: str = "harbor"  # harbor | terminal-bench | auto (each directory by its layout)
    base_image_map: dict[str, str] = {}  # noqa: RUF012 (pydantic copies defaults)


@dg.asset(
    key=IMPORTED.key(TABLE),
    partitions_def=IMPORTED.partitions_def,
    group_name=IMPORTED.group_name,
    kinds={"python", "parquet"},
    io_manager_key="lake_io_manager",
    check_specs=[schema_check_spec(TABLE, IMPORTED.prefix)],
    description="Stage I for an imported batch: one row per task directory found in the "
    "source, carrying its own environment, tests and solution; unreadable ones keep a row with "
    "the reason.",
    **table_asset(TABLE),
)
def imported_task_descriptions(
    context: dg.AssetExecutionContext, pipeline: PipelineSettings, config: ImportConfig
):
    batch = context.partition_key
    started = time.monotonic()
    source = Path(config.source_dir).expanduser()
    if not source.is_absolute():
        raise dg.Failure(f"source_dir must be an absolute path, got {config.source_dir!r}")
    settings = pipeline.resolve()
    try:
        base_images = BaseImages(pipeline, settings.imports.base_recipe)
        outcomes = import_tasks(
            source,
            batch,
            fmt=config.format,
            base_image_map=dict(config.base_image_map),
            base_image=base_images(settings.imports.base_recipe),
            recipes=base_images,
            max_binary_bytes=int(settings.imports.max_binary_file_mb * 2**20),
        )
    except (ImportProblem, ValueError) as exc:
        raise dg.Failure(f"cannot import from {source}: {exc}") from exc
    if not outcomes:
        raise dg.Failure(f"no task directories in {source}: nothing to import")
    rows = []
    for outcome in outcomes:
        if outcome.draft is not None:
            rows.append(description_row(outcome.draft, Usage(), 0.0))
            continue
        context.log.warning(f"{outcome.directory}: not imported: {outcome.reason}")
        rows.append(
            failed_description_row(
                batch,
                outcome.index,
                task_seed(batch, outcome.index),
                "imported",
                "",
                "",
                f"import_failed: {outcome.directory}: {outcome.reason}",
                Usage(),
                0.0,
                REJECTED,
            )
        )
    table = frame(TABLE, rows)
    check = validate(TABLE, table, IMPORTED.prefix)
    notes = Counter(note for outcome in outcomes for note in outcome.notes)
    failed = [o for o in outcomes if o.draft is None]
    metadata = {
        "funnel_step": "describe (import)",
        "source_dir": dg.MetadataValue.path(str(source)),
        "format": config.format,
        "imported": len(outcomes) - len(failed),
        "not_imported": len(failed),
        **status_metadata(table),
        **{f"tasks_with_{note.replace(' ', '_')}": n for note, n in notes.items()},
        "wall_seconds": round(time.monotonic() - started, 2),
    }
    if failed:
        lines = "\n".join(f"| {o.directory} | {o.reason} |" for o in failed[:50])
        metadata["not_imported_dirs"] = dg.MetadataValue.md(
            f"| directory | reason |\n|---|---|\n{lines}"
        )
    imported = [r for r in rows if r["status"] == "ok"]
    if imported:
        metadata["sample_task"] = dg.MetadataValue.md(task_markdown(imported[0]))
    return dg.MaterializeResult(value=table, metadata=metadata, check_results=[check])


class BaseImages:
    """Our base image of a recipe, built if this engine lacks it (a map may name either)."""

    def __init__(self, pipeline: PipelineSettings, default: str) -> None:
        self.pipeline, self.default = pipeline, default

    def __call__(self, recipe: str) -> str:
        sandbox = self.pipeline.sandbox()
        return sandbox.base_for(recipe or self.default).tag


imported_task_environments = build_task_environments(IMPORTED)
imported_completion_tests = build_completion_tests(IMPORTED)
imported_solver_rollouts = build_solver_rollouts(IMPORTED)
imported_filtered_dataset = build_filtered_dataset(IMPORTED)

IMPORTED_ASSETS = [
    imported_task_descriptions,
    imported_task_decontamination,
    imported_task_environments,
    imported_completion_tests,
    imported_solver_rollouts,
    imported_filtered_dataset,
    imported_contamination_recheck,
]
