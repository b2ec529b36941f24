"""The conventions directory imported as one batch through Dagster (test_import_conventions and
bench/import_validation_cost.py)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from conventions import source_tasks

from endless_assets.defs.imports import IMPORT_OP
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.partitions import imported_batches
from endless_assets.defs.resources import PipelineSettings

BATCH = "conventions-1"


def import_conventions(work: Path, assets: list, **settings) -> dg.ExecuteInProcessResult:
    """The directory of `source_tasks`, written under `work`, imported as BATCH through `assets`
    (also bench/import_validation_cost.py's run)."""
    source_tasks(work / "tasks")
    data_dir = work / "lake"
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(imported_batches.name, [BATCH])
    image_map = {"ubuntu:22.04": "endless-base", "python:3.13-slim": "endless-base-trixie"}
    config = {"source_dir": str(work / "tasks"), "format": "auto", "base_image_map": image_map}
    return dg.materialize(
        assets,
        partition_key=BATCH,
        instance=instance,
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), workers=2, **settings),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        run_config={"ops": {IMPORT_OP: {"config": config}}},
        raise_on_error=False,
    )
