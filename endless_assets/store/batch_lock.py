"""One run at a time makes a batch in a data directory (two at once would mix their rows).

A run that writes a batch's partitions holds an exclusive `flock` on
`<data_dir>/locks/batch=<key>.lock` from start to end (the IO manager takes it); a shard run,
which writes only to its staging area, holds it shared. A killed run holds nothing afterwards; a
run that finds the batch locked fails at once, naming the holder. `endless run` also holds
`batch=<key>.launch.lock` while it launches the batch's runs, so another is refused up front.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import IO


class BatchBusy(Exception):
    """Another run holds the batch (the message names it and says what to do)."""


def lock_path(data_dir: str | Path, batch: str, kind: str = "") -> Path:
    suffix = f".{kind}" if kind else ""
    return Path(data_dir) / "locks" / f"batch={batch}{suffix}.lock"


def acquire(
    data_dir: str | Path, batch: str, *, holder: str, shared: bool = False, kind: str = ""
) -> IO[str]:
    """The open lock file, locked (exclusive, or `shared`); closing it releases the lock.
    BatchBusy if another process holds it in a conflicting mode."""
    path = lock_path(data_dir, batch, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 (kept open: the lock lives as long as the file)
    try:
        fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        who = handle.read().strip() or "another run"
        handle.close()
        raise BatchBusy(
            f"batch {batch} is being made by {who} in {Path(data_dir).resolve()}: wait for it to "
            "end (or stop it), or use another --date or data directory"
        ) from None
    except BaseException:
        handle.close()
        raise
    if not shared:  # (shared holders leave the exclusive holder's words alone: there is none)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder} (pid {os.getpid()} on {socket.gethostname()})\n")
        handle.flush()
    return handle


@contextlib.contextmanager
def held(
    data_dir: str | Path, batch: str, *, holder: str, shared: bool = False, kind: str = ""
) -> Iterator[None]:
    handle = acquire(data_dir, batch, holder=holder, shared=shared, kind=kind)
    try:
        yield
    finally:
        handle.close()


def check_free(data_dir: str | Path, batch: str) -> None:
    """BatchBusy if a run holds the batch now (the lock is taken and let go at once)."""
    with held(data_dir, batch, holder="a check"):
        pass
