"""Served episodes to the lake: the `served_episodes` table, beside the dataset they came from.

One row per episode, in the partition of its task's batch. Rows are queued as episodes end and
written by one thread: it takes whatever is queued, appends it to each partition it belongs to
(read, add, validate, write atomically as every partition is written) under a file lock, so
that several servers sharing a data directory never lose each other's rows, and goes back to
waiting for more. `flush` returns once everything queued before it is written; `close` flushes
and stops. A server killed with `kill -9` loses the rows it had not written yet (those of the
last moment), never a partition.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import polars as pl

from endless_assets.sandbox.engine.client import owner_tag
from endless_assets.serve.episode import ServedEpisode
from endless_assets.store.catalog import rebuild_catalog
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import TABLES, polars_schema

TABLE = "served_episodes"
log = logging.getLogger(__name__)


def episode_row(episode: ServedEpisode) -> dict[str, Any]:
    record = episode.record
    graded = record.verdict is not None and episode.reward is not None
    return {
        "episode_id": episode.episode_id,
        "session_id": episode.session_id,
        "task_id": episode.task.task_id,
        "batch": episode.task.batch,
        "model": episode.model,
        "seed": episode.seed,
        "reward": episode.reward,
        "termination": episode.termination or "abandoned",
        "infra_error": episode.infra_error or "",
        "verdict": record.verdict.summary() if graded and record.verdict else "",
        "steps": episode.steps,
        "n_turns": record.n_turns,
        "trajectory": json.dumps(record.trajectory(), ensure_ascii=False),
        "reset_seconds": episode.reset_seconds,
        "seconds": record.seconds,
        "server": owner_tag(),
        "started_at": episode.started_at,
        "created_at": datetime.now(UTC),
    }


@contextlib.contextmanager
def _table_lock(lake: Lake) -> Iterator[None]:
    path = lake.data_dir / "locks" / f"{TABLE}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # held for one append; released if we die
        yield


def append_rows(lake: Lake, rows: list[dict[str, Any]]) -> None:
    """Add `rows` to their batches' partitions (under the table's lock)."""
    by_batch: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_batch[row["batch"]].append(row)
    with _table_lock(lake):
        new_table = not lake.has_data(TABLE)
        for batch, added in by_batch.items():
            stored = lake.read_or_empty(TABLE, batch)
            table = pl.concat([stored, frame(TABLE, added)], how="diagonal_relaxed")
            table = table.select(polars_schema(TABLE).names())
            TABLES[TABLE].validate(table, lazy=True)
            lake.write(TABLE, batch, table)
        if new_table:  # the catalog's view of an empty table is not a glob yet
            rebuild_catalog(lake)


class EpisodeLog:
    """Rows of ended episodes, written to the lake by a thread of its own."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self._queued: list[dict[str, Any]] = []
        self._added = 0  # rows queued so far
        self._written = 0  # rows written (or given up on) so far
        self._closing = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._write, name="served-episodes", daemon=True)
        self._thread.start()

    def add(self, episode: ServedEpisode) -> None:
        row = episode_row(episode)
        with self._changed:
            if not self._closing:
                self._queued.append(row)
                self._added += 1
                self._changed.notify_all()
                return
        append_rows(self.lake, [row])  # (an episode that ended after the log was closed)

    def flush(self) -> None:
        with self._changed:
            target = self._added
            self._changed.wait_for(lambda: self._written >= target or not self._thread.is_alive())

    def close(self) -> None:
        self.flush()
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join()

    def _write(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queued or self._closing)
                if not self._queued:
                    return
                rows, self._queued = self._queued, []
            try:
                append_rows(self.lake, rows)
            except Exception as exc:  # a full disk, a bad row: said, never silent
                log.error(f"{len(rows)} served episode(s) could not be written to the lake: {exc}")
            with self._changed:
                self._written += len(rows)
                self._changed.notify_all()
