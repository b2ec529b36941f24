"""Writing an export directory all at once, and only where an export may go.

An export is written into a hidden staging directory beside its destination and renamed into
place only when every file is written, so a failed export never leaves a half-written directory
and never touches the previous export. Every export directory holds a marker, `.endless-export`
(JSON: format, time), and an existing destination is replaced (`overwrite`) only when it is
empty or holds that marker: whatever else is there is not ours to delete.

Some directories are never a destination, marker or not, empty or not: `/`, the home directory,
the working directory and every directory above them; the data directory, every directory above
it and everything inside it except under `<data_dir>/exports/` (where the `dataset_exports` asset
writes). `export_dataset` checks the destination against the data directory before it reads
anything; `staged_directory` checks the rest again when it writes.

A destination that cannot be written (under a regular file, on /proc, read-only, full) is an
`OutputError` naming the path and the reason; nothing already there is lost.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = ".endless-export"


class OutputError(Exception):
    pass


def _absolute(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _home() -> Path:
    try:
        return Path.home().resolve()
    except RuntimeError:  # no HOME and no password entry: / is protected anyway
        return Path("/")


def _protected(out: Path, data_dirs: Iterable[Path]) -> str | None:
    """Why `out` may never be an export destination, or None."""
    for name, place in (("/", Path("/")), ("the home directory", _home())):
        if out in (place, *place.parents):
            return f"it is {name}" if out == place else f"it holds {name}"
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        return "it is the working directory" if out == cwd else "it holds the working directory"
    for data in data_dirs:
        if out == data or out in data.parents:
            return f"it {'is' if out == data else 'holds'} the data directory {data}"
        if data in out.parents and (data / "exports") not in out.parents:
            return f"it is inside the data directory {data} (exports go in {data}/exports/NAME)"
    return None


def _is_export(directory: Path) -> bool:
    try:
        marker = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and "format" in marker


def adopt_earlier_export(directory: Path, fmt: str) -> bool:
    """Mark `<data_dir>/exports/<fmt>`, written by the `dataset_exports` asset before exports
    carried a marker, as the export it is (only that place is ever adopted)."""
    if not directory.is_dir() or _is_export(directory) or not any(directory.iterdir()):
        return False
    marker = {"format": fmt, "time": "", "adopted": True}
    (directory / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return True


def _writable_ancestor(out: Path) -> None:
    """The nearest existing directory at or above `out` must be a directory."""
    for place in (out, *out.parents):
        if place.exists() or place.is_symlink():
            if not place.is_dir():
                raise OutputError(f"cannot export to {out}: {place} is not a directory")
            return


def check_destination(
    out: str | Path, *, overwrite: bool = False, data_dirs: Iterable[str | Path] = ()
) -> Path:
    """`out`, absolute, if an export may be written there now; else OutputError saying why."""
    out = _absolute(out)
    reason = _protected(out, [_absolute(d) for d in data_dirs])
    if reason:
        raise OutputError(f"refusing to export to {out}: {reason}")
    _writable_ancestor(out)
    try:
        busy = out.is_dir() and any(out.iterdir())
    except OSError as exc:
        raise OutputError(f"cannot export to {out}: {exc.strerror or exc}") from None
    if busy and not overwrite:
        raise OutputError(f"{out} already exists and is not empty (use --overwrite to replace it)")
    if busy and not _is_export(out):
        raise OutputError(
            f"refusing to replace {out}: it is not empty and holds no {MARKER} marker, so no "
            "export wrote it (remove it yourself, or choose another --out)"
        )
    return out


@contextmanager
def staged_directory(out: Path, *, fmt: str, overwrite: bool = False) -> Iterator[Path]:
    """A staging directory, marked as an export of `fmt`, that replaces `out` when complete."""
    out = check_destination(out, overwrite=overwrite)
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    stage = out.with_name(f".{out.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage.mkdir()
        marker = {"format": fmt, "time": dt.datetime.now(dt.UTC).isoformat()}
        (stage / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
        yield stage
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(out, old)
        try:
            os.replace(stage, out)
        except OSError:
            if old is not None:
                os.replace(old, out)  # the previous export stays where it was
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        where = f" (writing {exc.filename})" if exc.filename not in (None, str(stage)) else ""
        raise OutputError(f"cannot export to {out}: {exc.strerror or exc}{where}") from None
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
        for directory in made:  # the parents this export made, if it failed
            if not out.exists():
                try:
                    directory.rmdir()
                except OSError:
                    break


def write_text(path: Path, text: str, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755 if executable else 0o644)
