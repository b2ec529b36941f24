"""Task images: built from an in-memory context on the base image, cached by content hash."""

from __future__ import annotations

import base64
import contextlib
import io
import re
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import docker.errors
import requests.exceptions
import urllib3.exceptions
from docker import DockerClient

from endless_assets.models import content_hash
from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.engine.client import RetriesExhausted, SandboxError, wait_for_engine
from endless_assets.sandbox.engine.podman import short_name
from endless_assets.sandbox.engine.provider import provider_for
from endless_assets.sandbox.image import build_cgroup, build_limits
from endless_assets.sandbox.image.build_limits import Budget, BuildLimits
from endless_assets.sandbox.image.build_network import BuildNetwork, GatewayFault, build_network

REPOSITORY = "endless-task"
BUILD_LOG_LIMIT = 6000
BUILD_BUDGET = 1800.0  # seconds a whole build may take (its steps print or not)
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


# A step's first line: Docker's (`Step 2/5 : RUN ...`), Podman's (`STEP 2/5: RUN ...`).
_STEP = re.compile(r"^(?:Step \d+/\d+ : |STEP \d+/\d+: )", re.MULTILINE)
_HOUSEKEEPING = re.compile(
    r"^ ---> (?:Running in [0-9a-f]+|Using cache|[0-9a-f]{12})$\n?"
    r"|^Removing intermediate container [0-9a-f]+$\n?"
    r"|^--> (?:Using cache )?[0-9a-f]{11,64}$\n?",  # Podman's
    re.MULTILINE,
)
_RUNNING = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})$", re.MULTILINE)  # Docker's


def failing_step_log(text: str) -> str:
    """The part of a failed build's log that explains the failure, the same on every run.

    Only the last step (the one that failed) is kept: earlier steps read differently depending
    on the engine's layer cache ("Using cache" the second time), which would make the same failure
    look new to a repair prompt and to the reply cache. Docker's housekeeping lines (container
    and layer ids) go too.
    """
    starts = [m.start() for m in _STEP.finditer(text)]
    section = text[starts[-1] :] if starts else text
    return _HOUSEKEEPING.sub("", section).strip()[-BUILD_LOG_LIMIT:]


# A build-context value that stands for bytes (a task's binary file, or any of its executable
# files): a prefix, then their base64; the second prefix gives the file mode 755 in the image.
# No text value starts with a NUL (importers store any file with a NUL as binary).
BINARY_PREFIX = "\x00endless-base64:"
EXECUTABLE_PREFIX = "\x00endless-base64+x:"


def encode_context(
    text_files: dict[str, str], binary_files: dict[str, str], executable: list[str] | tuple = ()
) -> dict[str, str]:
    """A task's build context as build_task_image takes it: text files as they are, binary
    files (path -> base64) and executable files encoded (see the prefixes)."""
    marked = set(executable)
    context: dict[str, str] = {}
    for path, text in text_files.items():
        if path in marked and not text.startswith(BINARY_PREFIX[:1]):
            text = EXECUTABLE_PREFIX + base64.b64encode(text.encode()).decode()
        context[path] = text
    for path, data in binary_files.items():
        context[path] = (EXECUTABLE_PREFIX if path in marked else BINARY_PREFIX) + data
    return context


def decode_context(value: str) -> tuple[bytes, bool]:
    """The bytes a build-context value stands for, and whether the file is executable."""
    for prefix, executable in ((EXECUTABLE_PREFIX, True), (BINARY_PREFIX, False)):
        if value.startswith(prefix):
            return base64.b64decode(value[len(prefix) :]), executable
    return value.encode(), False


def image_tag_for(dockerfile: str, context_files: dict[str, str], base_image_id: str) -> str:
    parts: list[str] = [base_image_id, dockerfile]
    for path in sorted(context_files):
        parts += [path, context_files[path]]
    return f"{REPOSITORY}:{content_hash(*parts)}"


def build_context(dockerfile: str, context_files: dict[str, str]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in [("Dockerfile", dockerfile), *sorted(context_files.items())]:
            data, executable = decode_context(text)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if executable else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


@contextlib.contextmanager
def _network(
    client: DockerClient, gateway: tuple[str, tuple[str, ...]] | None
) -> Iterator[BuildNetwork | None]:
    if gateway is None:
        yield None
        return
    try:
        with build_network(client, *gateway) as network:
            yield network
    except GatewayFault as exc:
        raise _EngineFault(str(exc)) from exc


def _lock_for(tag: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(tag, threading.Lock())


BUILD_ATTEMPTS = 3  # tries of a build that the engine, not the Dockerfile, broke
# What the engine says when it fails, whatever the Dockerfile: the build context or a layer
# could not be unpacked or stored, the daemon or containerd went away mid-build, the host's
# disk failed. (Not "failed to copy files" alone: a COPY onto a path that is a file says that.)
_ENGINE_FAULT = re.compile(
    r"Error processing tar file|failed to register layer|error creating overlay mount"
    r"|context canceled|context deadline exceeded|transport is closing|ttrpc: closed"
    r"|Cannot connect to the Docker daemon|daemon is shutting down"
    r"|no space left on device|input/output error|read-only file system"
    r"|connection reset by peer|broken pipe|unexpected EOF",
    re.IGNORECASE,
)


# Podman's word for a RUN step's exit code (Docker's errorDetail carries a `code` instead); its
# error quotes the step, which may say anything.
_RUN_EXIT = re.compile(r"^building at STEP .*: while running runtime: exit status (\d+)\s*$", re.S)


class _EngineFault(Exception):
    """A build that the engine broke: tried again, then a harness error."""


def is_engine_fault(message: str) -> bool:
    return bool(_ENGINE_FAULT.search(message))


def build_task_image(
    client: DockerClient,
    dockerfile: str,
    context_files: dict[str, str],
    *,
    base_image_id: str,
    network: bool = True,
    network_allow: tuple[str, ...] = (),
    timeout: float = 600,
    limits: Limits | None = None,
    budget: float = BUILD_BUDGET,
) -> BuildResult:
    """Build (or reuse) the image for a Dockerfile. A failed build is a result, not an exception.

    A build is rejected (`ok=False`) only for what the Dockerfile did: a step that failed (a RUN
    step's non-zero exit, a COPY of a missing file, a base image that cannot be pulled, a
    malformed file). A build the engine broke (an API error 5xx, a dropped connection, a context
    or layer it could not unpack: see `_ENGINE_FAULT`) is tried again once the engine answers,
    at most BUILD_ATTEMPTS times, then raises SandboxError: a harness error, never a rejection.

    `network=True` lets RUN steps reach the package registries during the build, through a
    proxy of ours that never connects to this host or a container (build_network.py: a gateway
    of the base image `base_image_id`; no network where the engine cannot run one; but for the
    `host:port` in `network_allow`); containers started from the image at run time never get a
    network. Every RUN step gets the memory, CPU and process limits of a task container
    (`limits`, see build_limits.py): a step that reaches one fails the build, which says so. A
    build still running after `budget` seconds is cancelled and rejected (`timeout` is how long
    a step may print nothing).

    The image carries no labels of ours (its repository name, `endless-task`, says what it is;
    containers get the labels): Docker's legacy builder adds build labels as one more step,
    which doubled the cost of a one-COPY build (0.29 -> 0.60 CPU-s here).
    """
    tag = image_tag_for(dockerfile, context_files, base_image_id)
    started = time.monotonic()
    with _lock_for(tag):
        try:
            image = client.images.get(tag)
            return BuildResult(True, tag, image.id, time.monotonic() - started, True, "")
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            raise SandboxError(f"the Docker engine failed to look up {tag}: {exc}") from exc
        fault = ""
        for attempt in range(1, BUILD_ATTEMPTS + 1):
            if attempt > 1:
                wait_for_engine(client)
            try:
                ok, image_id, log = _build_once(
                    client,
                    tag,
                    dockerfile,
                    context_files,
                    (base_image_id, network_allow) if network else None,
                    timeout,
                    limits,
                    budget,
                )
            except _EngineFault as exc:
                fault = str(exc)
                continue
            return BuildResult(ok, tag, image_id, time.monotonic() - started, False, log)
        raise RetriesExhausted(
            f"docker build failed {BUILD_ATTEMPTS} times on an engine fault (not the "
            f"Dockerfile's): {fault}"
        )


def _build_once(
    client: DockerClient,
    tag: str,
    dockerfile: str,
    context_files: dict[str, str],
    gateway: tuple[str, tuple[str, ...]] | None,
    timeout: float,
    limits: Limits | None,
    budget: float,
) -> tuple[bool, str, str]:
    """One build: (ok, image id, log); with a network through a gateway of an image, with
    destinations allowed on this host (`gateway`; none if None). Raises _EngineFault for what
    the engine broke."""
    caps = BuildLimits.of(limits or Limits())
    deadline = time.monotonic() + budget
    steps = _StepLog()
    with (
        build_cgroup.build_cgroup(client, caps) as group,
        _network(client, gateway) as network,
    ):
        params = caps.params()
        if group is not None:
            params["cgroupparent"] = group.parent
        context = build_context(dockerfile, context_files)
        error, code, over = _stream(client, tag, context, network, timeout, params, steps, deadline)
        reached = group.reached() if group is not None else set()
        refused = list(network.relay.refused) if network is not None else []
    text = _ANSI.sub("", steps.text())
    if over:
        cut = f"the build ran past its budget of {budget:g} s and was cancelled"
        return False, "", "\n".join(filter(None, [failing_step_log(text), cut]))
    if error:
        reason = caps.reason(reached, code, measured=group is not None)
        refusals = [f"the build network did not connect to {r}" for r in refused[:3]]
        return False, "", "\n".join(filter(None, [failing_step_log(text), reason, *refusals]))
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound as exc:
        # A build that succeeded made its tag: another process removed it since (`endless
        # prune`), which says nothing about the Dockerfile.
        raise _EngineFault(f"the built image {tag} was removed before it was used") from exc
    except (docker.errors.DockerException, OSError) as exc:
        raise _EngineFault(f"looking up the built image failed: {exc}") from exc
    return True, image.id, ""


def _stream(
    client: DockerClient,
    tag: str,
    context: io.BytesIO,
    network: BuildNetwork | None,
    timeout: float,
    params: dict[str, str],
    steps: _StepLog,
    deadline: float,
) -> tuple[str, int | None, bool]:
    """Run one build, its output into `steps`: (its error, the failed step's exit code if it
    says one, whether it ran out of budget). Raises _EngineFault for what the engine broke. A
    build cut short leaves no step's container behind."""
    error, code = "", None
    running: list[str] = []  # the build containers it started (Docker names them)
    finished = False
    try:
        how = (network.mode, network.namespace, network.build_args) if network else ("none", "", {})
        response = provider_for(client).build(context, tag, timeout, params, how)
        with Budget(response, deadline) as clock:
            try:
                for chunk in client.api._stream_helper(response, decode=True):
                    if clock.over():
                        break
                    if "stream" in chunk:
                        steps.add(chunk["stream"])
                        running += _RUNNING.findall(chunk["stream"])
                    if "error" in chunk:
                        error = chunk.get("error", "")
                        steps.add(error)
                        detail = chunk.get("errorDetail") or {}
                        run_exit = _RUN_EXIT.search(error)
                        code = detail.get("code", int(run_exit.group(1)) if run_exit else None)
                        # A RUN step's own exit code: the Dockerfile's failure, whatever it says.
                        if code is None and is_engine_fault(error):
                            raise _EngineFault(error)
            except Exception:
                if not clock.expired.is_set():
                    raise
                # Whatever the read raised once the budget closed it: the budget's doing.
            finally:
                response.close()  # (before the end of its output: the engine cancels the build)
        finished = not clock.expired.is_set()
        return error, code, clock.expired.is_set()
    except docker.errors.APIError as exc:
        message = str(exc.explanation or exc)
        if exc.is_server_error() or is_engine_fault(message):
            raise _EngineFault(f"{exc.status_code}: {message}") from exc
        # A malformed Dockerfile is reported by the API (4xx) before any step runs.
        finished = True
        return message, None, False
    except (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError) as exc:
        # A step silent for that long (or an engine that hangs): not tried again.
        raise SandboxError(f"docker build sent nothing for {timeout:.0f} s: {exc}") from exc
    except (docker.errors.DockerException, OSError, urllib3.exceptions.HTTPError) as exc:
        # The connection to the engine broke (requests' errors are OSErrors).
        raise _EngineFault(f"the connection to the engine broke: {exc}") from exc
    finally:
        if not finished:  # the engine removes a cancelled build's container in its own time
            build_limits.ensure_gone(client, running[-1:])  # (the others' steps ended)


class _StepLog:
    """A build's output as far as a rejection needs it: the current step, from its first line,
    with at most KEEP characters of its tail (a step that prints forever costs no memory)."""

    KEEP = 4 * BUILD_LOG_LIMIT

    def __init__(self) -> None:
        self.head = ""
        self.body: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        starts = [m.start() for m in _STEP.finditer(text)]
        if starts:
            self.head, self.body, self.size = text[starts[-1] :], [], 0
            return
        self.body.append(text)
        self.size += len(text)
        if self.size > 2 * self.KEEP:
            tail = "".join(self.body)[-self.KEEP :]
            self.body, self.size = [tail], len(tail)

    def text(self) -> str:
        return self.head + "".join(self.body)


def prune_task_images(
    client: DockerClient, keep: set[str], *, among: set[str] | None = None
) -> int:
    """Remove cached task images whose tag is not in `keep` (only tags in `among`, if given);
    returns how many.

    Task images are a cache: any of them is rebuilt from its Dockerfile when needed again.
    """
    removed = 0
    for image in client.images.list(name=REPOSITORY):
        tags = [t for t in map(short_name, image.tags) if t.startswith(f"{REPOSITORY}:")]
        if among is not None:
            tags = [t for t in tags if t in among]
        if not tags or any(t in keep for t in tags):
            continue
        try:
            for tag in tags:
                client.images.remove(tag, noprune=False)
            removed += 1
        except docker.errors.APIError:
            continue  # in use by a running container: keep it
    return removed
