"""Finished work survives a crash: each finished row of a stage is persisted as it finishes, as one
small Parquet file under `<data_dir>/journal/<table>/batch=<key>/` (fsynced, renamed), until the
stage writes its partition. The next run reads the journal back and runs only what is missing.
The IO manager removes a partition's journal once a run that wrote it ended without a failure.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import polars as pl

from endless_assets.store.schemas import polars_schema

log = logging.getLogger(__name__)
T = TypeVar("T")
Row = dict[str, Any]


def journal_dir(data_dir: Path, table: str, batch: str) -> Path:
    return Path(data_dir) / "journal" / table / f"batch={batch}"


def fingerprint(*parts: object) -> str:
    """What a stage's rows depend on besides their task (settings, generator version, base
    image): a journal written under another fingerprint is not reused."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Journal:
    """The finished rows of one table partition, one file per row, keyed by `key(row)`. `scope`
    (a fingerprint) keeps rows made under other settings apart."""

    def __init__(self, data_dir: Path, table: str, batch: str, scope: str = "") -> None:
        self.table = table
        self.directory = journal_dir(data_dir, table, batch)
        if scope:
            self.directory = self.directory / scope

    def record(self, key: str, row: dict[str, Any]) -> None:
        """Persist one finished row (a later record under the same key replaces it)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        final = self.directory / f"{name}.parquet"
        tmp = self.directory / f".{name}.{os.getpid()}.tmp"
        pl.DataFrame([row], schema=polars_schema(self.table)).write_parquet(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rows(self) -> list[dict[str, Any]]:
        """Every row recorded so far (a file that cannot be read is skipped, with a warning)."""
        rows: list[dict[str, Any]] = []
        if not self.directory.is_dir():
            return rows
        for path in sorted(self.directory.glob("*.parquet")):
            try:
                frame = pl.read_parquet(path)
            except Exception as exc:  # a damaged file: the work is redone, nothing else lost
                log.warning("journal file %s unreadable (%s): its work will be redone", path, exc)
                continue
            if frame.columns != list(polars_schema(self.table)):
                log.warning("journal file %s has other columns: its work will be redone", path)
                continue
            rows.extend(frame.to_dicts())
        return rows

    def clear(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class Resumable(Generic[T]):
    """A stage's per-item work made resumable: items whose row the journal holds are not redone;
    each finished row (`finished(row)`: not a harness error) is recorded as it finishes."""

    def __init__(
        self,
        journal: Journal,
        item_key: Callable[[T], str],
        row_key: Callable[[Row], str],
        finished: Callable[[Row], bool],
    ) -> None:
        self.journal = journal
        self.item_key = item_key
        self.finished = finished
        self.recovered = {row_key(row): row for row in journal.rows()}

    def wrap(self, work: Callable[[T], Row]) -> Callable[[T], Row]:
        def run(item: T) -> Row:
            key = self.item_key(item)
            if key in self.recovered:
                return self.recovered[key]
            row = work(item)
            if self.finished(row):
                self.journal.record(key, row)
            return row

        return run
