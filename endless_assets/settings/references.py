"""The format of the `decontamination_references` setting: comma-separated directories of
benchmark tasks, each `name=path` or a bare path named by its base name."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class ReferenceSource:
    """A reference set: its name (in rejection reasons) and its directory of tasks."""

    name: str
    path: Path


def parse_references(value: str) -> tuple[ReferenceSource, ...]:
    """The setting's value: comma-separated directories, each `name=path` or a bare path named
    by its base name. ValueError, one line, naming the entry that is wrong and how."""
    sources: list[ReferenceSource] = []
    seen: dict[str, str] = {}
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, path_text = (part.strip() for part in entry.partition("="))
        if not sep:
            name, path_text = Path(entry).expanduser().resolve().name, entry
        where = f"reference set {entry!r}"
        if not name:
            hint = "before its '='" if sep else "(its path has no base name: write name=path)"
            raise ValueError(f"{where} has no name {hint}")
        if not path_text:
            raise ValueError(f"{where} has no path after its '='")
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"{where}: the name {name!r} may hold only letters, digits, '.', '_' and '-' "
                "(and starts with a letter or digit)"
            )
        if name in seen:
            raise ValueError(f"{where}: the name {name!r} is given twice ({seen[name]!r} too)")
        path = Path(path_text).expanduser()
        if not path.is_dir():
            problem = "does not exist" if not os.path.lexists(path) else "is not a directory"
            raise ValueError(f"{where}: {path_text} {problem}")
        seen[name] = entry
        sources.append(ReferenceSource(name, path.resolve()))
    return tuple(sources)
