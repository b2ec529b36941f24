"""The Dagster IO manager over the Parquet lake: each partition of a table asset is one file."""

from __future__ import annotations

from typing import IO

import dagster as dg
import polars as pl
from pydantic import PrivateAttr

from endless_assets.defs.columns import column_schema
from endless_assets.store import batch_lock, shards
from endless_assets.store.catalog import rebuild_catalog
from endless_assets.store.journal import Journal
from endless_assets.store.lake import Lake, LakeError
from endless_assets.store.schemas import TABLES
from endless_assets.store.shards import Shard


class ParquetLakeIOManager(dg.ConfigurableIOManager):
    """Writes each partition of a table asset to the lake and reads it back for downstream steps.

    A run of one batch holds the batch's lock from its start to its end (batch_lock.py): two
    runs of a batch at once would mix their rows."""

    data_dir: str | None = None
    _lock: IO[str] | None = PrivateAttr(default=None)
    _written: set[tuple[str, str]] = PrivateAttr(default_factory=set)  # (table, batch)

    def _lake(self) -> Lake:
        return Lake(self.data_dir)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run = context.run
        batch = run.tags.get("dagster/partition") if run is not None else None
        if run is None or not batch:
            return  # (not a run of one batch: nothing it writes is a batch's)
        shared = shards.parse(run.tags.get(shards.TAG)) is not None
        try:
            self._lock = batch_lock.acquire(
                self._lake().data_dir, batch, holder=f"run {run.run_id}", shared=shared
            )
        except batch_lock.BatchBusy as exc:
            raise dg.Failure(str(exc)) from None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """The journals of the partitions this run wrote go once the run ended without a failure
        (the partitions hold that work); after a failure they stay, so that the rerun redoes
        nothing they hold, in the stages that failed or in those before (store/journal.py). A
        run killed outright never gets here: its journals stay too."""
        try:
            if self._written and _ended_well(context):
                for table, batch in self._written:
                    Journal(self._lake().data_dir, table, batch).clear()
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
        lake = self._lake()
        shard = run_shard(context)
        if shard is not None and "task_id" in obj.columns:
            # A shard run: its rows are staged for the run's next stage; the journal keeps them
            # for the run that writes the partition (store/shards.py).
            mine = obj.filter(pl.col("task_id").map_elements(shard.owns, return_dtype=pl.Boolean))
            path = lake.write_shard(table, batch, shard, mine)
            context.add_output_metadata(
                {
                    "shard": shard.tag,
                    "path": dg.MetadataValue.path(str(path)),
                    "shard_rows": mine.height,
                }
            )
            return
        path = lake.write(table, batch, obj)
        self._written.add((table, batch))  # its journal goes if the run ends well
        rebuild_catalog(lake)
        metadata: dict = {"path": dg.MetadataValue.path(str(path)), "dagster/row_count": obj.height}
        if table in TABLES:
            metadata["dagster/column_schema"] = column_schema(table)
        context.add_output_metadata(metadata)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        table = context.upstream_output.asset_key.path[-1] if context.upstream_output else None
        if table is None:
            raise LakeError("cannot tell which table to load")
        batch = context.asset_partition_key if context.has_asset_partitions else "all"
        lake = self._lake()
        shard = run_shard(context)
        if shard is None:
            return lake.read(table, batch)
        staged = lake.read_shard(table, batch, shard)  # written by this shard's earlier stage
        frame = staged if staged is not None else lake.read(table, batch)
        if "task_id" not in frame.columns:
            return frame
        return frame.filter(pl.col("task_id").map_elements(shard.owns, return_dtype=pl.Boolean))


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
