"""The base images a Dockerfile builds on, and rewriting them (export `--base-image`, import
`--base-image-map`).

Only `FROM` lines are touched. A later stage that builds on an earlier stage's name
(`FROM build AS final`) is not an image and is never rewritten.
"""

from __future__ import annotations

import re

_FROM = re.compile(
    r"^(?P<lead>\s*FROM\s+)(?P<flags>(?:--\S+\s+)*)(?P<image>\S+)(?P<rest>(?:\s+AS\s+\S+)?\s*)$",
    re.IGNORECASE,
)
_STAGE = re.compile(r"\s+AS\s+(\S+)", re.IGNORECASE)


class DockerfileError(ValueError):
    pass


def _from_lines(dockerfile: str) -> list[tuple[int, re.Match[str]]]:
    found = []
    for number, line in enumerate(dockerfile.splitlines()):
        if re.match(r"^\s*FROM\b", line, re.IGNORECASE):
            match = _FROM.match(line)
            if match is None:
                raise DockerfileError(f"line {number + 1} is not a FROM line we can read: {line!r}")
            found.append((number, match))
    return found


def base_images(dockerfile: str) -> list[str]:
    """The images named by FROM lines (stage names excluded), in order."""
    stages: set[str] = set()
    images = []
    for _, match in _from_lines(dockerfile):
        image = match.group("image")
        if image.lower() not in stages:
            images.append(image)
        stage = _STAGE.match(match.group("rest"))
        if stage:
            stages.add(stage.group(1).lower())
    return images


def replace_base_images(dockerfile: str, mapping: dict[str, str]) -> str:
    """Rewrite FROM images found in `mapping` (keys are exact image references)."""
    if not mapping:
        return dockerfile
    lines = dockerfile.splitlines(keepends=True)
    stages: set[str] = set()
    for number, match in _from_lines(dockerfile):
        image = match.group("image")
        if image.lower() not in stages and image in mapping:
            ending = "\n" if lines[number].endswith("\n") else ""
            lines[number] = (
                f"{match.group('lead')}{match.group('flags')}{mapping[image]}"
                f"{match.group('rest')}{ending}"
            )
        stage = _STAGE.match(match.group("rest"))
        if stage:
            stages.add(stage.group(1).lower())
    return "".join(lines)


def rebase(dockerfile: str, base_image: str) -> str:
    """Point every image FROM line at `base_image` (our tasks build on one base image)."""
    return replace_base_images(dockerfile, {image: base_image for image in base_images(dockerfile)})


def parse_image_map(pairs: list[str]) -> dict[str, str]:
    """`["ubuntu:22.04=endless-base:abc", ...]` -> mapping; a bad pair is a clear error."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        source, sep, target = pair.partition("=")
        if not sep or not source.strip() or not target.strip() or " " in pair.strip():
            raise DockerfileError(
                f"--base-image-map {pair!r} must look like IMAGE=REPLACEMENT "
                "(e.g. ubuntu:22.04=endless-base)"
            )
        mapping[source.strip()] = target.strip()
    return mapping
