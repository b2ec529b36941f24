"""Writing an export directory all at once.

An export is written into a hidden staging directory beside its destination and renamed into
place only when every file is written, so a failed export never leaves a half-written directory
and never touches the previous export. An existing, non-empty destination is replaced only when
asked (`overwrite`).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class OutputError(Exception):
    pass


@contextmanager
def staged_directory(out: Path, *, overwrite: bool = False) -> Iterator[Path]:
    out = out.expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out} exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise OutputError(f"{out} already exists and is not empty (use --overwrite to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.with_name(f".{out.name}.partial-{uuid.uuid4().hex[:8]}")
    stage.mkdir()
    try:
        yield stage
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(out, old)
        os.replace(stage, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def write_text(path: Path, text: str, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755 if executable else 0o644)
