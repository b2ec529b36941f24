"""The checks a generated Dockerfile must pass before it is built: it starts FROM the base image,
its instructions are ones we allow, and every COPY names a file of its build context."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

MAX_DOCKERFILE_CHARS = 50_000
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*['\"]?[A-Za-z_]\w*['\"]?")


class ParseError(ValueError):
    """A reply that cannot be used; the message says why."""


def first_instruction(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return stripped.split()[0].upper()
    return ""


def _instructions(dockerfile: str) -> list[tuple[int, str]]:
    """Logical instructions (continuation lines joined) with their first line number."""
    result: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(dockerfile.splitlines(), start=1):
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped by Docker
        if not current:
            start = number
        if stripped.endswith("\\"):
            current.append(stripped[:-1])
            continue
        current.append(stripped)
        result.append((start, " ".join(current).strip()))
        current = []
    if current:
        result.append((start, " ".join(current).strip()))
    return result


def check_dockerfile(dockerfile: str, base_image: str, files: dict[str, str]) -> str:
    """The Dockerfile, its FROM line normalised to the base image; or why it cannot build."""
    if len(dockerfile) > MAX_DOCKERFILE_CHARS:
        raise ParseError(
            f"the Dockerfile has {len(dockerfile)} characters; at most {MAX_DOCKERFILE_CHARS}"
        )
    instructions = _instructions(dockerfile)
    if not instructions:
        raise ParseError("the Dockerfile is empty")
    froms = [(n, text) for n, text in instructions if text.split()[0].upper() == "FROM"]
    first_line, first = instructions[0]
    if first.split()[0].upper() != "FROM":
        raise ParseError(
            f"the Dockerfile must start with `FROM {base_image}`; line {first_line} is "
            f"`{first[:80]}`"
        )
    if len(froms) > 1:
        raise ParseError(
            f"the Dockerfile has {len(froms)} FROM lines; multi-stage builds are not supported, "
            f"use a single `FROM {base_image}`"
        )
    words = first.split()[1:]
    if not words or words[0].startswith("--"):
        raise ParseError(f"line {first_line}: use exactly `FROM {base_image}` (no flags)")
    image = words[0]
    repository = base_image.rsplit(":", 1)[0]
    if image != base_image and image.split("@")[0].rsplit(":", 1)[0] != repository:
        raise ParseError(
            f"the Dockerfile must build on the base image: line {first_line} names {image!r}; "
            f"use `FROM {base_image}` (no other image is available)"
        )
    for number, text in instructions[1:]:
        keyword = text.split()[0].upper()
        if _HEREDOC.search(text) and keyword in ("RUN", "COPY", "ADD"):
            raise ParseError(
                f"line {number}: heredocs (<<EOF) are not supported by the image builder; put "
                'file contents in <file path="..."> blocks and COPY them, or use printf'
            )
        if keyword == "ENTRYPOINT":
            raise ParseError(
                f"line {number}: ENTRYPOINT is not allowed; the harness starts the container "
                "itself and nothing runs in the background"
            )
        if keyword in ("COPY", "ADD"):
            _check_copy(number, text, files)
    lines = dockerfile.strip("\n").splitlines()
    index = first_line - 1
    lines[index] = re.sub(r"(?i)^(\s*FROM\s+)\S+", lambda m: m.group(1) + base_image, lines[index])
    return "\n".join(lines) + "\n"


def _check_copy(number: int, text: str, files: dict[str, str]) -> None:
    words = text.split()[1:]
    if any(w.startswith("--from") for w in words):
        raise ParseError(f"line {number}: COPY --from needs another stage; there is only one")
    words = [w for w in words if not w.startswith("--")]
    if not words or words[0].startswith("["):
        return  # JSON form: left to the builder
    sources = words[:-1]
    for source in sources:
        if "://" in source or any(ch in source for ch in "*?[$"):
            continue
        wanted = str(PurePosixPath(source.removeprefix("./"))).rstrip("/")
        if wanted in ("", "."):
            if files:
                continue
        elif wanted in files or any(path.startswith(wanted + "/") for path in files):
            continue
        provided = ", ".join(sorted(files)) or "none"
        raise ParseError(
            f"line {number}: COPY/ADD source {source!r} is not among the files of the reply "
            f'(<file path="..."> blocks: {provided})'
        )
