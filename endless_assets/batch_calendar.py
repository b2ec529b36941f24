"""Which days are batches: from the instance's first batch to today (UTC).

Daily batches may be made for any day from FLOOR on. The partitions the UI shows start at the
instance's first batch, not at FLOOR: a project that made two batches last week sees two of a
handful of days filled, not two of a year. `endless run` records the earliest day it makes (and
any earlier batch already in the lake) in DAGSTER_HOME/RECORD before it loads the definitions;
every process that loads them (the UI's code server, the daemon, run workers) reads the same file
through DAGSTER_HOME. Without the file, or without DAGSTER_HOME, the partitions start at FLOOR.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from pathlib import Path

FLOOR = "2026-01-01"
RECORD = "endless-first-batch"  # in DAGSTER_HOME: one line, YYYY-MM-DD


def _day(text: str) -> str | None:
    try:
        day = dt.date.fromisoformat(text.strip())
    except ValueError:
        return None
    return day.isoformat() if day.isoformat() >= FLOOR and len(text.strip()) == 10 else None


def first_batch_day(home: str | None = None) -> str:
    """The first day of the daily partitions: the day recorded in the instance's home (by
    default DAGSTER_HOME), else FLOOR."""
    home = home if home is not None else os.environ.get("DAGSTER_HOME", "")
    path = Path(home) / RECORD if home else None
    if path is None or not path.is_file():
        return FLOOR
    return _day(path.read_text()) or FLOOR


def record_batch_day(home: Path, day: str, lake_days: Iterable[str] = ()) -> str:
    """Make `day` (and any day-named batch in `lake_days`) a partition of this instance: lower the
    recorded first day to the earliest of them; return the first day. Call with the home locked."""
    path = home / RECORD
    days = [d for d in (day, *lake_days) if _day(d)]
    if path.is_file():
        days.append(first_batch_day(str(home)))
    if not days:
        return first_batch_day(str(home))
    first = min(days)
    if not path.is_file() or first != first_batch_day(str(home)):
        part = home / f".{RECORD}.{os.getpid()}.part"
        part.write_text(first + "\n")
        os.replace(part, path)
    return first


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()
