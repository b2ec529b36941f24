"""Reading the files of someone else's task directory, safely.

Only regular files are read: a symbolic link (it may point outside the task) or a special file
(a FIFO blocks its reader forever) is refused without being followed or opened. A file that is
not UTF-8 text, or holds a NUL byte, is kept as bytes (base64), up to a size cap per file; past
it, or past a cap on all of a directory's files, the task is refused naming the file.

Nothing here runs what it reads.
"""

from __future__ import annotations

import base64
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_DIRECTORY_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_BINARY_BYTES = 10 * 1024 * 1024


class ImportProblem(Exception):
    """A task directory that cannot be imported; the message says why."""


@dataclass
class Files:
    """A directory's files: text (relative path -> text) and bytes (relative path -> base64),
    and which of them are executable (by anyone: mode 755 in the image)."""

    text: dict[str, str] = field(default_factory=dict)
    binary: dict[str, str] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)

    def pop(self, rel: str) -> str | None:
        return self.text.pop(rel, None)


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def checked(path: Path, where: Path) -> os.stat_result:
    """`path`'s own status (lstat: a link is not followed, nothing is opened); ImportProblem if it
    is a symbolic link (it may point outside the task) or a special file (reading a FIFO blocks
    forever, a device never ends)."""
    info = path.lstat()
    name = relative(path, where)
    if stat.S_ISLNK(info.st_mode):
        raise ImportProblem(f"{name} is a symbolic link (not supported)")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        kind = next((k for test, k in _SPECIAL if test(info.st_mode)), "a special file")
        raise ImportProblem(f"{name} is {kind} (only regular files are supported)")
    return info


def relative(path: Path, where: Path) -> str:
    return path.relative_to(where).as_posix() if path != where else path.name


def regular_files(path: Path, where: Path) -> list[Path]:
    """`path` if it is a file, else every file under it: a symbolic link or a special file, the
    directory itself or anywhere under it, is refused, never followed or opened."""
    files: list[Path] = []
    pending = [path]
    while pending:  # not recursive: a task may nest directories deeper than Python's stack
        current = pending.pop()
        if not stat.S_ISDIR(checked(current, where).st_mode):
            files.append(current)
            continue
        with os.scandir(current) as entries:
            pending += sorted((Path(entry.path) for entry in entries), reverse=True)
    return files


def read_text(path: Path, where: Path) -> str:
    """A file that must be text (an instruction, a test, a script)."""
    checked(path, where)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ImportProblem(f"{relative(path, where)} is not UTF-8 text") from exc
    if "\x00" in text:
        raise ImportProblem(f"{relative(path, where)} is not text (it holds a NUL byte)")
    return text


def read_tree(
    directory: Path,
    where: Path,
    *,
    max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
    skip: tuple[str, ...] = (),
    drop_pycache: bool = False,
) -> Files:
    """Every file under `directory` (relative to it), text or bytes; `skip`: top-level names
    left out (another part of the task). `drop_pycache`: leave out `__pycache__` directories
    (in tests/, what a local pytest run left; in a build context they are the task's own files,
    as a COPY would take them)."""
    found = Files()
    total = 0
    for path in regular_files(directory, where):
        rel = path.relative_to(directory).as_posix()
        if rel.split("/", 1)[0] in skip or (drop_pycache and "__pycache__" in rel.split("/")):
            continue
        info = path.lstat()
        size = info.st_size
        total += size
        if info.st_mode & 0o111:
            found.executable.add(rel)
        if total > MAX_DIRECTORY_BYTES:
            raise ImportProblem(
                f"{relative(directory, where)}/ holds more than "
                f"{MAX_DIRECTORY_BYTES // (1024 * 1024)} MiB of files"
            )
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and "\x00" not in text:
            found.text[rel] = text
            continue
        if size > max_binary_bytes:
            raise ImportProblem(
                f"{relative(path, where)} is a binary file of {size / 2**20:.1f} MiB, over the "
                f"{max_binary_bytes / 2**20:g} MiB limit (setting max_binary_file_mb)"
            )
        found.binary[rel] = base64.b64encode(data).decode("ascii")
    return found
