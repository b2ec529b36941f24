"""The Parquet lake: the storage of record, and the Dagster IO manager over it.

Layout: `<data_dir>/lake/<table>/batch=<key>/part.parquet` (zstd). One file per table and
partition, written to a temporary name in the same directory and renamed over the old one, so a
crash never leaves half a partition and re-materializing replaces, never duplicates. The batch key
is also a column in the data. After every write the DuckDB catalog is rebuilt (catalog.py).
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import dagster as dg
import polars as pl

from endless_assets.schemas import TABLES, empty_frame

DEFAULT_DATA_DIR = "data"
_BATCH_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class LakeError(Exception):
    pass


def resolve_data_dir(configured: str | None = None) -> Path:
    """The data directory: explicit config, else ENDLESS_DATA_DIR, else ./data. Absolute."""
    raw = configured or os.environ.get("ENDLESS_DATA_DIR") or DEFAULT_DATA_DIR
    return Path(raw).expanduser().resolve()


def check_batch_key(batch: str) -> str:
    if not _BATCH_KEY.match(batch):
        raise LakeError(
            f"batch key {batch!r} is not usable as a partition: use letters, digits, '.', '_' "
            "and '-' (at most 100 characters, starting with a letter or digit)"
        )
    return batch


class Lake:
    def __init__(self, data_dir: str | Path | None = None) -> None:
        self.data_dir = resolve_data_dir(str(data_dir) if data_dir else None)

    @property
    def root(self) -> Path:
        return self.data_dir / "lake"

    @property
    def catalog_path(self) -> Path:
        return self.data_dir / "endless.duckdb"

    def partition_path(self, table: str, batch: str) -> Path:
        return self.root / table / f"batch={check_batch_key(batch)}" / "part.parquet"

    def table_glob(self, table: str) -> str:
        return str(self.root / table / "batch=*" / "part.parquet")

    def has_data(self, table: str) -> bool:
        return any((self.root / table).glob("batch=*/part.parquet"))

    def batches(self, table: str) -> list[str]:
        return sorted(
            p.parent.name.removeprefix("batch=")
            for p in (self.root / table).glob("batch=*/part.parquet")
        )

    def write(self, table: str, batch: str, frame: pl.DataFrame) -> Path:
        path = self.partition_path(table, batch)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".part-{uuid.uuid4().hex}.parquet.tmp")
        try:
            frame.write_parquet(tmp, compression="zstd", statistics=True)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return path

    def read(self, table: str, batch: str) -> pl.DataFrame:
        path = self.partition_path(table, batch)
        if not path.exists():
            raise LakeError(
                f"{table} has no partition {batch!r} in {self.root}: materialize it first"
            )
        return pl.read_parquet(path)

    def read_or_empty(self, table: str, batch: str) -> pl.DataFrame:
        path = self.partition_path(table, batch)
        if path.exists():
            return pl.read_parquet(path)
        return empty_frame(table) if table in TABLES else pl.DataFrame()

    def read_all(self, table: str) -> pl.DataFrame:
        if not self.has_data(table):
            return empty_frame(table) if table in TABLES else pl.DataFrame()
        return pl.read_parquet(
            self.table_glob(table), missing_columns="insert", hive_partitioning=False
        )


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
        from endless_assets.catalog import rebuild_catalog

        rebuild_catalog(lake)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        table = context.upstream_output.asset_key.path[-1] if context.upstream_output else None
        if table is None:
            raise LakeError("cannot tell which table to load")
        batch = context.asset_partition_key if context.has_asset_partitions else "all"
        return self._lake().read(table, batch)
