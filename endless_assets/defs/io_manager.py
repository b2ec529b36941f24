"""The Dagster IO manager over the Parquet lake: each partition of a table asset is one file."""

from __future__ import annotations

from typing import IO

import dagster as dg
import polars as pl
from pydantic import PrivateAttr

from endless_assets.defs.columns import column_schema
from endless_assets.store import batch_lock, shards
from endless_assets.store.lake import Lake, LakeError
from endless_assets.store.lake_io import (
    clear_journals,
    lock_run,
    read_step_input,
    write_step_output,
)
from endless_assets.store.schemas import TABLES
from endless_assets.store.shards import Shard


class ParquetLakeIOManager(dg.ConfigurableIOManager):
    """Writes each partition of a table asset to the lake and reads it back for downstream steps;
    a run of one batch holds the batch's lock from its start to its end (store/lake_io.py)."""

    data_dir: str | None = None
    _lock: IO[str] | None = PrivateAttr(default=None)
    _written: set[tuple[str, str]] = PrivateAttr(default_factory=set)  # (table, batch)

    def _lake(self) -> Lake:
        return Lake(self.data_dir)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if context.run is not None:
            try:
                self._lock = lock_run(self._lake(), context.run.tags, context.run.run_id)
            except batch_lock.BatchBusy as exc:
                raise dg.Failure(str(exc)) from None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """The journals of the partitions this run wrote go once the run ended without a failure;
        after a failure they stay, so that the rerun redoes nothing they hold (store/journal.py).
        A run killed outright never gets here: its journals stay too."""
        try:
            if self._written and _ended_well(context):
                clear_journals(self._lake(), self._written)
        finally:
            self._written.clear()
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        if obj is None:
            return
        if not isinstance(obj, pl.DataFrame):
            raise LakeError(f"{context.asset_key.to_user_string()} must return a polars DataFrame")
        table = context.asset_key.path[-1]
        batch = context.partition_key if context.has_partition_key else "all"
        shard = run_shard(context)
        path, metadata = write_step_output(self._lake(), table, batch, obj, shard)
        metadata["path"] = dg.MetadataValue.path(str(path))
        if "shard" not in metadata:
            self._written.add((table, batch))  # its journal goes if the run ends well
            metadata["dagster/row_count"] = obj.height
            if table in TABLES:
                metadata["dagster/column_schema"] = column_schema(table)
        context.add_output_metadata(metadata)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        table = context.upstream_output.asset_key.path[-1] if context.upstream_output else None
        if table is None:
            raise LakeError("cannot tell which table to load")
        batch = context.asset_partition_key if context.has_asset_partitions else "all"
        return read_step_input(self._lake(), table, batch, run_shard(context))


_FAILED = {
    dg.DagsterEventType.STEP_FAILURE,
    dg.DagsterEventType.RUN_FAILURE,
    dg.DagsterEventType.RUN_CANCELING,
    dg.DagsterEventType.RUN_CANCELED,
}


def _ended_well(context: dg.InitResourceContext) -> bool:
    """No step of the run failed and nobody stopped it (what its event log says so far)."""
    if context.instance is None or context.run is None:
        return False
    found = context.instance.get_records_for_run(context.run.run_id, of_type=_FAILED, limit=1)
    return not found.records


def run_shard(context: dg.OutputContext | dg.InputContext) -> Shard | None:
    """The shard of the run this step belongs to (its `endless/shard` tag), or None."""
    try:
        tags = context.step_context.dagster_run.tags
    except Exception:  # no step context: a direct call of the IO manager, outside a run
        return None
    return shards.parse(tags.get(shards.TAG))
