"""The Dagster IO manager over the Parquet lake: each partition of a table asset is one file."""

from __future__ import annotations

import dagster as dg
import polars as pl

from endless_assets.catalog import rebuild_catalog
from endless_assets.lake import Lake, LakeError


class ParquetLakeIOManager(dg.ConfigurableIOManager):
    """Writes each partition of a table-asset to the lake and reads it back for downstream steps."""

    data_dir: str | None = None

    def _lake(self) -> Lake:
        return Lake(self.data_dir)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        if obj is None:
            return
        if not isinstance(obj, pl.DataFrame):
            raise LakeError(f"{context.asset_key.to_user_string()} must return a polars DataFrame")
        table = context.asset_key.path[-1]
        batch = context.partition_key if context.has_partition_key else "all"
        lake = self._lake()
        path = lake.write(table, batch, obj)
        rebuild_catalog(lake)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        table = context.upstream_output.asset_key.path[-1] if context.upstream_output else None
        if table is None:
            raise LakeError("cannot tell which table to load")
        batch = context.asset_partition_key if context.has_asset_partitions else "all"
        return self._lake().read(table, batch)
