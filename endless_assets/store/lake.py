"""The Parquet lake: the storage of record, `<data_dir>/lake/<table>/batch=<key>/part.parquet`.

One file per table and partition, written to a temporary name and renamed over the old one: a
crash never leaves half a partition, and re-materializing replaces. The catalog is rebuilt after
every write (catalog.py). A partition that cannot be read is never deleted: it is moved aside to
`<data_dir>/quarantine/...` with a note, named in a warning, and rewritten by its batch's next run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from endless_assets.store.schemas import TABLES, empty_frame, polars_schema
from endless_assets.store.shards import Shard

DEFAULT_DATA_DIR = "data"
_BATCH_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


LOG = logging.getLogger("endless.lake")


class LakeError(Exception):
    pass


@dataclass(frozen=True)
class BadPartition:
    """A partition file that cannot be read, and where it was moved (if it was)."""

    table: str
    batch: str
    path: Path
    reason: str
    moved_to: Path | None = None

    def describe(self) -> str:
        where = f"; moved to {self.moved_to}" if self.moved_to else ""
        return (
            f"{self.path} ({self.table}, batch {self.batch}) cannot be read: {self.reason}{where}"
            f"; run batch {self.batch} again to rewrite it"
        )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


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

    @property
    def quarantine_root(self) -> Path:
        return self.data_dir / "quarantine"

    def partitions(self, table: str) -> list[Path]:
        return sorted((self.root / table).glob("batch=*/part.parquet"))

    def has_data(self, table: str) -> bool:
        return any((self.root / table).glob("batch=*/part.parquet"))

    def batches(self, table: str) -> list[str]:
        return sorted(p.parent.name.removeprefix("batch=") for p in self.partitions(table))

    # -- unreadable partitions -------------------------------------------------------------------
    def problem(self, path: Path, *, deep: bool = False) -> str | None:
        """Why a partition file cannot be read, or None. The footer (schema) only, unless deep:
        then every row is read."""
        try:
            if deep:
                pl.read_parquet(path)
            else:
                pl.read_parquet_schema(path)
        except FileNotFoundError:
            return None  # replaced or moved meanwhile
        except Exception as exc:  # polars raises several types for a damaged file
            return first_line(exc)
        return None

    def quarantine(self, table: str, path: Path, reason: str) -> BadPartition:
        """Move an unreadable partition aside (never delete it) and say so in a warning."""
        batch = path.parent.name.removeprefix("batch=")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        target = self.quarantine_root / table / path.parent.name
        target.mkdir(parents=True, exist_ok=True)
        moved = target / f"part-{stamp}-{uuid.uuid4().hex[:6]}.parquet"
        try:
            os.replace(path, moved)
        except FileNotFoundError:  # another process moved or replaced it first
            bad = BadPartition(table, batch, path, reason)
        else:
            moved.with_suffix(".reason.txt").write_text(f"{path}\n{reason}\n", encoding="utf-8")
            with contextlib.suppress(OSError):  # the now empty batch directory
                path.parent.rmdir()
            bad = BadPartition(table, batch, path, reason, moved)
        LOG.warning(bad.describe())
        return bad

    def quarantine_unreadable(self, tables: Iterable[str] = tuple(TABLES)) -> list[BadPartition]:
        """Check every partition's footer; move the unreadable ones aside."""
        found = []
        for table in tables:
            for path in self.partitions(table):
                reason = self.problem(path)
                if reason is not None:
                    found.append(self.quarantine(table, path, reason))
        return found

    def quarantined(self) -> list[Path]:
        return sorted(self.quarantine_root.glob("*/batch=*/part-*.parquet"))

    def write(self, table: str, batch: str, frame: pl.DataFrame) -> Path:
        """The partition, whole (any staged shard rows of it are now in it: removed)."""
        path = _write_atomic(self.partition_path(table, batch), frame)
        self.clear_shards(table, batch)
        return path

    # -- staged shard rows (store/shards.py): beside the lake, never in its views ---------------
    def shard_path(self, table: str, batch: str, shard: Shard) -> Path:
        batch_dir = f"batch={check_batch_key(batch)}"
        return self.data_dir / "shards" / table / batch_dir / shard.file_name

    def write_shard(self, table: str, batch: str, shard: Shard, frame: pl.DataFrame) -> Path:
        return _write_atomic(self.shard_path(table, batch, shard), frame)

    def read_shard(self, table: str, batch: str, shard: Shard) -> pl.DataFrame | None:
        path = self.shard_path(table, batch, shard)
        return self._read_partition(table, path) if path.exists() else None

    def clear_shards(self, table: str, batch: str) -> None:
        directory = self.data_dir / "shards" / table / f"batch={check_batch_key(batch)}"
        for path in directory.glob("*.parquet") if directory.is_dir() else []:
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            directory.rmdir()

    def read(self, table: str, batch: str) -> pl.DataFrame:
        path = self.partition_path(table, batch)
        if not path.exists():
            raise LakeError(
                f"{table} has no partition {batch!r} in {self.root}: materialize it first"
            )
        return self._read_partition(table, path)

    def read_or_empty(self, table: str, batch: str) -> pl.DataFrame:
        path = self.partition_path(table, batch)
        return self._read_partition(table, path) if path.exists() else _empty(table)

    def read_all(self, table: str) -> pl.DataFrame:
        """Every readable partition of a table (unreadable ones are moved aside, with a warning)."""
        frames = []
        for path in self.partitions(table):
            try:
                frames.append(self._read_partition(table, path))
            except LakeError:
                continue
        return pl.concat(frames, how="diagonal_relaxed") if frames else _empty(table)

    def read_columns(
        self,
        table: str,
        batches: Iterable[str],
        columns: Mapping[str, pl.DataType] | Iterable[str],
    ) -> pl.DataFrame:
        """`columns` (cast to their types; names alone: the table's) of the partitions of
        `batches` that exist; a column a partition was written without reads as nulls."""
        if not isinstance(columns, Mapping):
            columns = {name: polars_schema(table)[name] for name in columns}
        parts = []
        for batch in batches:
            path = self.partition_path(table, batch)
            if not path.exists():
                continue
            schema = pl.read_parquet_schema(path)
            present = [name for name in columns if name in schema]
            part = pl.read_parquet(path, columns=present).with_columns(
                pl.lit(None, dtype=dtype).alias(name)
                for name, dtype in columns.items()
                if name not in present
            )
            parts.append(part.select(list(columns)).cast(dict(columns)))
        return pl.concat(parts) if parts else pl.DataFrame(schema=dict(columns))

    def _read_partition(self, table: str, path: Path) -> pl.DataFrame:
        try:
            return pl.read_parquet(path)
        except FileNotFoundError:
            raise LakeError(f"{path} disappeared while it was read: try again") from None
        except Exception as exc:
            bad = self.quarantine(table, path, first_line(exc))
            raise LakeError(bad.describe()) from None


def _empty(table: str) -> pl.DataFrame:
    return empty_frame(table) if table in TABLES else pl.DataFrame()


def _write_atomic(path: Path, frame: pl.DataFrame) -> Path:
    """Written to a temporary name in the same directory, then renamed over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".part-{uuid.uuid4().hex}.parquet.tmp")
    try:
        frame.write_parquet(tmp, compression="zstd", statistics=True)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
