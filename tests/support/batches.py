"""One Dagster run of some of the pipeline's assets over a lake in a directory: what the pipeline
tests materialize, each with its own settings (the `pipeline` resource's fields)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

import endless_assets.definitions as definitions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.jobs import asset_selection
from endless_assets.defs.resources import PipelineSettings


def materialize_batch(
    data_dir: Path | str,
    assets: list,
    batch: str,
    *,
    selection=None,
    instance: dg.DagsterInstance | None = None,
    run_config: dict | None = None,
    raise_on_error: bool = True,
    **settings,
) -> dg.ExecuteInProcessResult:
    """Materialize `assets` (names in endless_assets.definitions, or asset definitions) for the
    partition `batch`, on an ephemeral instance unless one is given. A `selection` of names
    brings the describe stage's draw tables along with it (they are outputs of one asset)."""
    if selection is not None and not isinstance(selection, dg.AssetSelection):
        selection = asset_selection(selection)
    return dg.materialize(
        [getattr(definitions, a) if isinstance(a, str) else a for a in assets],
        selection=selection,
        partition_key=batch,
        instance=instance or dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), **settings),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        run_config=run_config,
        raise_on_error=raise_on_error,
    )
