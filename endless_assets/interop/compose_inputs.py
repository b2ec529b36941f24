"""What a compose service takes from the task's own files, made part of its image on import:

- a bind mount of a file or directory inside the task (`./init.sql:/docker-entrypoint-initdb.d/
  init.sql:ro`, `./conf:/etc/nginx/conf.d`) -> those files in the service's build context and a
  `COPY` to the mount's target: the service starts with what the mount gave it, and nothing of
  this host is mounted (a source outside the task, an absolute path, `~` or a variable is
  refused naming the volume);
- `env_file` (a path, a list, or maps with `path` and `required`) inside the task -> environment
  (`K=V` lines; `#` comments, blank lines and an `export ` prefix skipped, one pair of quotes
  around a value removed), which the service's own `environment` overrides;
- `build.args` (a map or a `K=V` list) -> the value of the Dockerfile's `ARG` line of that name,
  in every stage that declares it.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from endless_assets.interop.import_files import ImportProblem, read_text, read_tree
from endless_assets.sandbox.image.images import encode_context

MOUNTS_DIR = ".compose-mounts"  # in a service's build context: its mounts' files, one per volume
_ARG = re.compile(
    r"""^(\s*ARG\s+)([A-Za-z_][A-Za-z0-9_]*)(?:=(?:"[^"]*"|'[^']*'|\S*))?\s*$""",
    re.IGNORECASE | re.MULTILINE,
)


def bind_of(volume: Any) -> tuple[str, str] | None:
    """(source, target) of a bind mount; None for a named or anonymous volume or a tmpfs."""
    if isinstance(volume, dict):
        if volume.get("type") in ("volume", "tmpfs"):
            return None
        return str(volume.get("source") or ""), str(volume.get("target") or "")
    source, sep, rest = str(volume).partition(":")
    if not sep or not source.startswith((".", "/", "~", "$")):
        return None  # anonymous (`/var/lib/x`) or named (`data:/var/lib/x`)
    return source, rest.split(":", 1)[0]


def _inside(name: str, what: str, source: str, base: Path, directory: Path) -> Path:
    path = (base / source).resolve()
    if source.startswith(("/", "~", "$")) or not path.is_relative_to(directory.resolve()):
        raise ImportProblem(
            f"service {name}: {what} {source} is not a path inside the task (refused: imported "
            "tasks get no access to the host)"
        )
    return path


def mounted(
    name: str, volumes: Any, base: Path, directory: Path, *, max_binary_bytes: int
) -> tuple[dict[str, str], list[str]]:
    """The build context files (encoded as images.py does) and the Dockerfile lines that put a
    service's bind mounts of task files in place; `base` is the compose file's directory."""
    text: dict[str, str] = {}
    binary: dict[str, str] = {}
    executable: list[str] = []
    lines: list[str] = []
    for index, volume in enumerate(volumes or []):
        bind = bind_of(volume)
        if bind is None:
            continue
        source, target = bind
        path = _inside(name, "volume", source, base, directory)
        if not path.exists() or not target.startswith("/"):
            problem = "does not exist" if not path.exists() else f"targets {target or 'nothing'}"
            raise ImportProblem(f"service {name}: volume {volume}: {source} {problem}")
        files = read_tree(path, directory, max_binary_bytes=max_binary_bytes)
        root = f"{MOUNTS_DIR}/{index}"

        def placed(rel: str, root: str = root, path: Path = path) -> str:
            return f"{root}/{path.name if rel == '.' else rel}"

        for part, into in ((files.text, text), (files.binary, binary)):
            into.update({placed(rel): value for rel, value in part.items()})
        executable += [placed(rel) for rel in files.executable]
        if path.is_dir() and not (files.text or files.binary):
            lines.append(f"RUN mkdir -p {shlex.quote(target)}")
        else:
            copied = placed(".") if path.is_file() else f"{root}/"
            lines.append(f"COPY {json.dumps([copied, target])}")
    return encode_context(text, binary, executable), lines


def env_files(name: str, value: Any, base: Path, directory: Path) -> dict[str, str]:
    """The environment a service's `env_file` entries give, in order (a later one wins)."""
    entries = value if isinstance(value, list) else [value] if value else []
    environment: dict[str, str] = {}
    for entry in entries:
        source, required = (
            (str(entry.get("path") or ""), bool(entry.get("required", True)))
            if isinstance(entry, dict)
            else (str(entry), True)
        )
        path = _inside(name, "env_file", source, base, directory)
        if not path.is_file():
            if required:
                raise ImportProblem(f"service {name}: env_file {source} does not exist")
            continue
        for line in read_text(path, directory).splitlines():
            key, sep, text = line.strip().removeprefix("export ").partition("=")
            if not sep or key.startswith("#") or not key.strip():
                continue
            text = text.strip()
            if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
                text = text[1:-1]
            environment[key.strip()] = text
    return environment


def with_build_args(dockerfile: str, args: dict[str, str]) -> str:
    """The Dockerfile with each `ARG NAME[=default]` line of a name in `args` given its value."""
    if not args:
        return dockerfile

    def given(match: re.Match[str]) -> str:
        name = match[2]
        return f"{match[1]}{name}={json.dumps(args[name])}" if name in args else match[0]

    return _ARG.sub(given, dockerfile)
