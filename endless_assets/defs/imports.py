"""Imported batches: tasks brought in from elsewhere (e.g. Harbor task directories), stored as
their own named partitions and then validated, rolled out and filtered by the same stage code as
generated batches (see stage_spec.py).

`endless import harbor DIR --batch NAME` (or `terminal-bench`) adds the partition and launches
the `imported_batch` job with the source directory in the run config of
`imported/task_descriptions`.
"""

from pathlib import Path

import dagster as dg

from endless_assets.defs.common import stage_result
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
from endless_assets.stages.imports import ImportFailed, run_import

TABLE = "task_descriptions"
IMPORT_OP = "imported__task_descriptions"


class ImportConfig(dg.Config):
    source_dir: str
    format: str = "harbor"  # harbor | terminal-bench | auto (each directory by its layout)
    base_image_map: dict[str, str] = {}  # noqa: RUF012 (pydantic copies defaults)


@IMPORTED.asset(
    TABLE,
    [],
    docker=False,
    description="The describe stage for an imported batch: one row per task directory found in the "
    "source, carrying its own environment, tests and solution; unreadable ones keep a row with "
    "the reason.",
)
def imported_task_descriptions(
    context: dg.AssetExecutionContext, pipeline: PipelineSettings, config: ImportConfig
):
    source = Path(config.source_dir).expanduser()
    if not source.is_absolute():
        raise dg.Failure(f"source_dir must be an absolute path, got {config.source_dir!r}")
    try:
        result = run_import(
            pipeline.resolve(),
            pipeline.sandbox(),
            source,
            context.partition_key,
            fmt=config.format,
            base_image_map=config.base_image_map,
            log=context.log,
        )
    except ImportFailed as exc:
        raise dg.Failure(str(exc)) from exc
    return stage_result(context, result, IMPORTED.prefix)


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
