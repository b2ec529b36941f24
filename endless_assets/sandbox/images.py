"""Task images: built from an in-memory context on the base image, cached by content hash."""

from __future__ import annotations

import io
import re
import tarfile
import threading
import time
from dataclasses import dataclass

import docker.errors
from docker import DockerClient

from endless_assets.models import content_hash
from endless_assets.sandbox.client import SandboxError, base_labels

REPOSITORY = "endless-task"
BUILD_LOG_LIMIT = 6000
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    tag: str
    image_id: str
    seconds: float
    cached: bool
    log: str  # tail of the build output; the error when not ok


_STEP = re.compile(r"^Step \d+/\d+ : ", re.MULTILINE)
_HOUSEKEEPING = re.compile(
    r"^ ---> (?:Running in [0-9a-f]+|Using cache|[0-9a-f]{12})$\n?"
    r"|^Removing intermediate container [0-9a-f]+$\n?",
    re.MULTILINE,
)


def failing_step_log(text: str) -> str:
    """The part of a failed build's log that explains the failure, the same on every run.

    Only the last step (the one that failed) is kept: earlier steps read differently depending
    on Docker's layer cache ("Using cache" the second time), which would make the same failure
    look new to a repair prompt and to the reply cache. Docker's housekeeping lines (container
    and layer ids) go too.
    """
    starts = [m.start() for m in _STEP.finditer(text)]
    section = text[starts[-1] :] if starts else text
    return _HOUSEKEEPING.sub("", section).strip()[-BUILD_LOG_LIMIT:]


def image_tag_for(dockerfile: str, context_files: dict[str, str], base_image_id: str) -> str:
    parts: list[str] = [base_image_id, dockerfile]
    for path in sorted(context_files):
        parts += [path, context_files[path]]
    return f"{REPOSITORY}:{content_hash(*parts)}"


def build_context(dockerfile: str, context_files: dict[str, str]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in [("Dockerfile", dockerfile), *sorted(context_files.items())]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def _lock_for(tag: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(tag, threading.Lock())


def build_task_image(
    client: DockerClient,
    dockerfile: str,
    context_files: dict[str, str],
    *,
    base_image_id: str,
    labels: dict[str, str] | None = None,
    network: bool = True,
    timeout: float = 600,
) -> BuildResult:
    """Build (or reuse) the image for a Dockerfile. A failed build is a result, not an exception.

    `network=True` lets RUN steps reach the package registries during the build (host network);
    containers started from the image at run time never get a network.
    """
    tag = image_tag_for(dockerfile, context_files, base_image_id)
    started = time.monotonic()
    with _lock_for(tag):
        try:
            image = client.images.get(tag)
            return BuildResult(True, tag, image.id, time.monotonic() - started, True, "")
        except docker.errors.ImageNotFound:
            pass
        context = build_context(dockerfile, context_files)
        chunks: list[str] = []
        try:
            stream = client.api.build(
                fileobj=context,
                custom_context=True,
                tag=tag,
                rm=True,
                forcerm=True,
                decode=True,
                labels=base_labels(kind="task-image", **(labels or {})),
                network_mode="host" if network else "none",
                timeout=timeout,
            )
            error = ""
            for chunk in stream:
                if "stream" in chunk:
                    chunks.append(chunk["stream"])
                if "error" in chunk:
                    error = chunk.get("error", "")
                    chunks.append(error)
        except docker.errors.APIError as exc:
            # A malformed Dockerfile is reported by the API before any step runs.
            message = exc.explanation or str(exc)
            return BuildResult(False, tag, "", time.monotonic() - started, False, str(message))
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"docker build failed to run: {exc}") from exc
        text = _ANSI.sub("", "".join(chunks))
        if error:
            return BuildResult(
                False, tag, "", time.monotonic() - started, False, failing_step_log(text)
            )
        try:
            image = client.images.get(tag)
        except docker.errors.ImageNotFound:
            return BuildResult(
                False,
                tag,
                "",
                time.monotonic() - started,
                False,
                "build finished without producing an image:\n" + text[-BUILD_LOG_LIMIT:],
            )
        return BuildResult(True, tag, image.id, time.monotonic() - started, False, "")


def prune_task_images(client: DockerClient, keep: set[str], *, label: str | None = None) -> int:
    """Remove cached task images whose tag is not in `keep` (only those carrying `label`, a
    `key=value` filter, if given); returns how many.

    Task images are a cache: any of them is rebuilt from its Dockerfile when needed again.
    """
    removed = 0
    filters = {"label": label} if label else None
    for image in client.images.list(name=REPOSITORY, filters=filters):
        tags = [t for t in image.tags if t.startswith(f"{REPOSITORY}:")]
        if not tags or any(t in keep for t in tags):
            continue
        try:
            for tag in tags:
                client.images.remove(tag, noprune=False)
            removed += 1
        except docker.errors.APIError:
            continue  # in use by a running container: keep it
    return removed
