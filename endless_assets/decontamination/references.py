"""The benchmark task sets a run is decontaminated against: the setting that lists them, and
their tasks read as `endless import` reads them, into words cached by content."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from endless_assets.decontamination.fields import FIELDS, TaskFields, Words, task_words
from endless_assets.decontamination.loose import read_loose
from endless_assets.interop.harbor_import import find_task_dirs, is_task_dir
from endless_assets.interop.import_files import DEFAULT_MAX_BINARY_BYTES, ImportProblem
from endless_assets.interop.imports import read_task_dir
from endless_assets.settings.references import ReferenceSource

log = logging.getLogger(__name__)

# Part of every cache key: a change to what is cached or to how words are made changes it.
CACHE_VERSION = "endless-decontamination-words-1"


@dataclass(frozen=True)
class ReferenceTask:
    """One benchmark task, as compared: its set, its directory's name and its words."""

    reference_set: str
    name: str
    words: Words


@dataclass(frozen=True)
class TaskProblem:
    """A reference task and what is wrong with it: why it cannot be read (left out), or why
    `endless import` refuses it (compared all the same)."""

    reference_set: str
    task: str
    reason: str

    def __str__(self) -> str:
        return f"{self.reference_set}/{self.task} ({self.reason})"


@dataclass(frozen=True)
class ReadStats:
    """What reading the reference sets took: tasks `parsed` or `cached` (of which `refused` were
    read loosely), subdirectories that are no task (`skipped`), tasks left out (`unreadable`)."""

    parsed: int = 0
    cached: int = 0
    skipped: int = 0
    unreadable: int = 0
    refused: int = 0

    @property
    def tasks(self) -> int:
        return self.parsed + self.cached


@dataclass(frozen=True)
class References:
    """The tasks read; those left out and why; those `endless import` refuses (e.g. multi-container
    ones), and why, compared all the same by their files as they are (loose.py)."""

    tasks: tuple[ReferenceTask, ...]
    unreadable: tuple[TaskProblem, ...]
    stats: ReadStats
    refused: tuple[TaskProblem, ...] = ()


def reference_task(reference_set: str, name: str, task: TaskFields) -> ReferenceTask:
    """A reference task made from a task in memory (a `HarborTask`, or one of ours)."""
    return ReferenceTask(reference_set, name, task_words(task))


def read_references(
    sources: Sequence[ReferenceSource],
    cache_dir: Path | None = None,
    *,
    max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
) -> References:
    """Every task directory of every set (Harbor or Terminal-Bench 1.x, as `endless import
    --format auto` tells them apart); unreadable ones left out and named in one warning. With
    `cache_dir`, a task's words are cached under the sha256 of its files. A task import refuses
    but whose files can be read is compared all the same, and listed in `refused`."""
    tasks: list[ReferenceTask] = []
    unreadable: list[TaskProblem] = []
    refused: list[TaskProblem] = []
    parsed = cached = skipped = 0
    for source in sources:
        try:
            directories = find_task_dirs(source.path)
        except (ImportProblem, OSError) as exc:
            unreadable.append(TaskProblem(source.name, ".", _reason(exc)))
            continue
        for directory in directories:
            if not is_task_dir(directory):
                skipped += 1
                continue
            try:
                key = content_key(directory, max_binary_bytes)
                found = _load(cache_dir / f"{key}.words") if cache_dir else None
                if found is None:
                    found = _read(directory, max_binary_bytes)
                    parsed += 1
                    if cache_dir:
                        _save(cache_dir, f"{key}.words", *found)
                else:
                    cached += 1
            except (ImportProblem, OSError, ValueError) as exc:
                unreadable.append(TaskProblem(source.name, directory.name, _reason(exc)))
                continue
            words, refusal = found
            if refusal:
                refused.append(TaskProblem(source.name, directory.name, refusal))
            tasks.append(ReferenceTask(source.name, directory.name, words))
    if unreadable:
        log.warning(
            "%d reference task(s) could not be read and are left out of decontamination: %s",
            len(unreadable),
            "; ".join(map(str, unreadable)),
        )
    if refused:
        log.info(
            "%d reference task(s) that endless import refuses are compared by their files: %s",
            len(refused),
            "; ".join(map(str, refused)),
        )
    stats = ReadStats(parsed, cached, skipped, len(unreadable), len(refused))
    return References(tuple(tasks), tuple(unreadable), stats, tuple(refused))


def _read(directory: Path, max_binary_bytes: int) -> tuple[Words, str]:
    """(words, "") as `endless import` reads the task; else (words, why import refuses it) read
    loosely; the import's ImportProblem when neither can read it."""
    try:
        return task_words(read_task_dir(directory, "auto", max_binary_bytes)), ""
    except (ImportProblem, ValueError) as refused:
        try:
            return task_words(read_loose(directory)), _reason(refused)
        except (ImportProblem, ValueError):
            raise refused from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, ImportProblem):
        return str(exc)
    return f"cannot read: {exc}"


def content_key(directory: Path, max_binary_bytes: int) -> str:
    """sha256 of a task directory: every file's path and bytes (a symbolic link's target, never
    followed; a special file's kind, never opened), and what else decides how it is read."""
    digest = hashlib.sha256(f"{CACHE_VERSION}\0{max_binary_bytes}\0".encode())
    entries: list[tuple[str, bytes]] = []
    prefix = len(str(directory)) + 1
    pending = [str(directory)]
    while pending:
        with os.scandir(pending.pop()) as found:
            for entry in found:
                rel = entry.path[prefix:].replace(os.sep, "/")
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    pending.append(entry.path)
                elif stat.S_ISLNK(mode):
                    entries.append((rel, b"link:" + os.fsencode(os.readlink(entry.path))))
                elif stat.S_ISREG(mode):
                    with open(entry.path, "rb") as fh:
                        entries.append((rel, b"file:" + fh.read()))
                else:
                    entries.append((rel, f"special:{stat.S_IFMT(mode)}".encode()))
    for rel, data in sorted(entries):
        for part in (rel.encode(), data):
            digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def _save(cache_dir: Path, name: str, words: Words, refused: str) -> None:
    """One file: a JSON line (each file's word count, field by field, the kept texts, why import
    refuses the task), then every word hash (uint64, little-endian); written whole or not at
    all (renamed into place)."""
    files = {field: words.files.get(field, ()) for field in FIELDS}  # in the order read back
    header = {
        "version": CACHE_VERSION,
        "files": {field: [len(w) for w in found] for field, found in files.items()},
        "texts": words.texts,
        "refused": refused,
    }
    hashes = [w.astype("<u8", copy=False).tobytes() for found in files.values() for w in found]
    temporary = cache_dir / f".{name}.{os.getpid()}.tmp"
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as fh:
            fh.write(json.dumps(header, ensure_ascii=True).encode() + b"\n")
            fh.writelines(hashes)
        os.replace(temporary, cache_dir / name)
    except OSError as exc:
        log.debug("decontamination cache not written (%s)", exc)
        temporary.unlink(missing_ok=True)


def _load(path: Path) -> tuple[Words, str] | None:
    """The cached words, and why import refuses the task (None when absent, or unreadable: the
    task is read again)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.debug("decontamination cache %s not used (%s)", path, exc)
        return None
    line, _, body = data.partition(b"\n")
    try:
        header = json.loads(line)
        counts: dict[str, list[int]] = header["files"]
        texts: dict[str, str] = header["texts"]
        refused = str(header["refused"])
        hashes = np.frombuffer(body, dtype="<u8").astype(np.uint64)
        if header["version"] != CACHE_VERSION or sum(map(sum, counts.values())) != len(hashes):
            raise ValueError("not this version's, or cut short")
    except (ValueError, KeyError, TypeError) as exc:
        log.debug("decontamination cache %s not used (%s)", path, exc)
        return None
    files: dict[str, tuple[np.ndarray, ...]] = {}
    at = 0
    for field in FIELDS:
        parts = []
        for count in counts.get(field, []):
            parts.append(hashes[at : at + count])
            at += count
        files[field] = tuple(parts)
    return Words(files, {f: t for f, t in texts.items() if f in FIELDS}), refused
