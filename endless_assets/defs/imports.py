"""Imported batches: tasks brought in from elsewhere (e.g. Harbor task directories), stored as
their own named partitions and then validated, rolled out and filtered by the same stage code as
generated batches (see stage_spec.py)."""

import dagster as dg

from endless_assets.defs.completion_tests import build_completion_tests
from endless_assets.defs.dataset import build_filtered_dataset
from endless_assets.defs.environments import build_task_environments
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.rollouts import build_solver_rollouts
from endless_assets.defs.stage_spec import IMPORTED


class ImportConfig(dg.Config):
    source_dir: str
    format: str = "harbor"
    base_image_map: dict[str, str] = {}  # noqa: RUF012 (pydantic copies defaults)


@dg.asset(
    key=IMPORTED.key("task_descriptions"),
    partitions_def=IMPORTED.partitions_def,
    group_name=IMPORTED.group_name,
    kinds={"python", "parquet"},
    io_manager_key="lake_io_manager",
    description="Stage I for an imported batch: one row per task directory found in the "
    "source, carrying its own environment, tests and solution; unreadable ones keep a row with "
    "the reason.",
)
def imported_task_descriptions(
    context: dg.AssetExecutionContext, pipeline: PipelineSettings, config: ImportConfig
):
    raise dg.Failure(f"importing {config.format} tasks is not implemented yet")


imported_task_environments = build_task_environments(IMPORTED)
imported_completion_tests = build_completion_tests(IMPORTED)
imported_solver_rollouts = build_solver_rollouts(IMPORTED)
imported_filtered_dataset = build_filtered_dataset(IMPORTED)

IMPORTED_ASSETS = [
    imported_task_descriptions,
    imported_task_environments,
    imported_completion_tests,
    imported_solver_rollouts,
    imported_filtered_dataset,
]

imported_batch = dg.define_asset_job(
    name="imported_batch",
    selection=dg.AssetSelection.groups(IMPORTED.group_name),
    description="Validate, roll out and filter an imported batch (a named partition).",
)
