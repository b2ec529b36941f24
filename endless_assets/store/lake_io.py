"""A pipeline step's tables in the lake, as the IO manager (defs/io_manager.py) moves them: each
partition one file; a shard run's rows staged for its next stage instead, the journal keeping them
for the run that writes the partition (store/shards.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO

import polars as pl

from endless_assets.store import batch_lock, shards
from endless_assets.store.catalog import rebuild_catalog
from endless_assets.store.journal import Journal
from endless_assets.store.lake import Lake
from endless_assets.store.shards import Shard


def lock_run(lake: Lake, tags: Mapping[str, str], run_id: str) -> IO[str] | None:
    """The lock of the batch a run makes (its `dagster/partition` tag), held until closed: two
    runs of a batch at once would mix their rows; a sharded batch's shard runs share it. None for
    a run of no batch; BatchBusy while another run holds it."""
    batch = tags.get("dagster/partition")
    if not batch:
        return None
    shared = shards.parse(tags.get(shards.TAG)) is not None
    return batch_lock.acquire(lake.data_dir, batch, holder=f"run {run_id}", shared=shared)


def owned(frame: pl.DataFrame, shard: Shard) -> pl.DataFrame:
    """The rows of a shard's tasks (all of a table without tasks)."""
    if "task_id" not in frame.columns:
        return frame
    return frame.filter(pl.col("task_id").map_elements(shard.owns, return_dtype=pl.Boolean))


def write_step_output(
    lake: Lake, table: str, batch: str, frame: pl.DataFrame, shard: Shard | None
) -> tuple[Path, dict]:
    """Write a step's table: the partition (the catalog rebuilt), or a shard's staged rows.
    Returns the path and what was written, as metadata (`shard`, `shard_rows`) for a shard."""
    if shard is not None and "task_id" in frame.columns:
        mine = owned(frame, shard)
        return lake.write_shard(table, batch, shard, mine), {
            "shard": shard.tag,
            "shard_rows": mine.height,
        }
    path = lake.write(table, batch, frame)
    rebuild_catalog(lake)
    return path, {}


def read_step_input(lake: Lake, table: str, batch: str, shard: Shard | None) -> pl.DataFrame:
    """A table as a step reads it: the partition, or in a shard run the rows of the shard's
    tasks, staged by its earlier stage where it has run."""
    if shard is None:
        return lake.read(table, batch)
    staged = lake.read_shard(table, batch, shard)
    return owned(staged if staged is not None else lake.read(table, batch), shard)


def clear_journals(lake: Lake, written: set[tuple[str, str]]) -> None:
    """The journals of partitions (table, batch) a run wrote and ended well: they hold that work."""
    for table, batch in written:
        Journal(lake.data_dir, table, batch).clear()
