"""A lock the engine holds: work that processes sharing one engine must not do at once (the first
build of the base image, a copy of an image onto an engine), from whichever host or project.

The lock is a container `endless-lock.<name>`, created and never started: an engine creates a
name once (a second create is refused atomically: Docker's 409, Podman's "already in use").
Its labels name the holder (`host:pid` and the process's start, processes.py). A dead holder is
taken over: on this host once its pid runs no process or another one; on another host once the
lock is older than STALE_SECONDS by the engine's clock. Takeover removes that container by id,
never a newer holder's. Its image, `endless-lock:1`, is loaded from an archive made here, the
same bytes (so the same image id) every time."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime

import docker.errors
from docker import DockerClient

from endless_assets import processes
from endless_assets.sandbox.engine.client import (
    KIND_LABEL,
    OWNER_LABEL,
    PROJECT,
    PROJECT_LABEL,
    SandboxError,
    base_labels,
    engine_failure,
)

PREFIX = "endless-lock."
LOCK_KIND = "lock"
LOCK_IMAGE = "endless-lock:1"
START_LABEL = "endless.owner_start"
PURPOSE_LABEL = "endless.lock"
POLL_SECONDS = 0.5
LOAD_TRIES = 3  # loads of the lock image by one acquire (another process may remove it)
STALE_SECONDS = 1800.0  # a lock of another host's process older than this is taken over
_NAME = re.compile(r"[^a-zA-Z0-9_.-]+")


def lock_name(name: str) -> str:
    """The container name of the lock called `name` (anything: it is made a valid name)."""
    return PREFIX + _NAME.sub("-", name).strip("-.")


@contextmanager
def engine_lock(
    client: DockerClient,
    name: str,
    *,
    progress: Callable[[str], object] | None = None,
    stale_seconds: float = STALE_SECONDS,
) -> Iterator[None]:
    """Hold the engine's lock `name` for the block: wait while a live process holds it, take it
    over from a dead one. SandboxError when the engine fails."""
    held = acquire(client, name, progress=progress, stale_seconds=stale_seconds)
    try:
        yield
    finally:
        release(client, held)


def acquire(
    client: DockerClient,
    name: str,
    *,
    progress: Callable[[str], object] | None = None,
    stale_seconds: float = STALE_SECONDS,
) -> str:
    """Take the lock `name` (see engine_lock); the id of the lock's container."""
    container = lock_name(name)
    told, loads = False, 0
    while True:
        try:
            return _create(client, container, name)
        except docker.errors.NotFound as exc:  # no lock image (Podman: a plain 404)
            loads += 1
            if loads > LOAD_TRIES:
                raise SandboxError(f"the engine cannot create {container}: {exc}") from exc
            _load_image(client)
            continue
        except docker.errors.APIError as exc:
            if not _name_taken(exc):
                raise SandboxError(f"taking the engine lock {container} failed: {exc}") from exc
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"taking the engine lock {container} failed: {exc}") from exc
        holder = _holder(client, container)
        if holder is None:
            continue  # released meanwhile
        if not _alive(client, holder, stale_seconds):
            _remove(client, holder["Id"])  # that dead holder's, by id: never a newer one's
            continue
        if progress is not None and not told:
            told = True
            progress(describe(holder))
        time.sleep(POLL_SECONDS)


def release(client: DockerClient, container_id: str) -> None:
    """Give the lock back (its container removed; gone already: nothing to do)."""
    with engine_failure(f"releasing the engine lock {container_id[:12]}"):
        with suppress(docker.errors.NotFound):  # (a NotFound is a DockerException too)
            client.api.remove_container(container_id, force=True)


def describe(holder: dict) -> str:
    """Which lock, who holds it since when, and how to free it."""
    labels = (holder.get("Config") or {}).get("Labels") or {}
    name = str(holder.get("Name") or "").lstrip("/")
    since = str(holder.get("Created") or "")[:19].replace("T", " ")
    return (
        f"waiting for the engine lock {name} ({labels.get(PURPOSE_LABEL, '')}): held by "
        f"process {labels.get(OWNER_LABEL, '?')} since {since} UTC (if that process is gone for "
        f"good: docker rm -f {name})"
    )


def sweep_locks(client: DockerClient) -> int:
    """Remove the locks whose holder is gone (`endless sweep`, every sandbox's first); how many."""
    found = client.containers.list(
        all=True, sparse=True, filters={"label": [f"{KIND_LABEL}={LOCK_KIND}"]}
    )
    removed = 0
    for container in found:
        holder = _holder(client, container.id)
        if holder is not None and not _alive(client, holder, STALE_SECONDS):
            removed += _remove(client, holder["Id"])
    return removed


def _create(client: DockerClient, container: str, purpose: str) -> str:
    # (KIND_LABEL, START_LABEL and PURPOSE_LABEL: endless.kind, endless.owner_start, endless.lock)
    labels = base_labels(kind=LOCK_KIND, owner_start=processes.me().start, lock=purpose)
    created = client.api.create_container(
        LOCK_IMAGE,
        command=["/endless-lock"],
        name=container,
        labels=labels,
        network_disabled=True,
        host_config=client.api.create_host_config(network_mode="none"),
    )
    return str(created["Id"])


def _name_taken(exc: docker.errors.APIError) -> bool:
    """The create was refused because the name is taken (Docker: 409; Podman: 500, "... is already
    in use")."""
    return exc.status_code == 409 or "already in use" in str(exc.explanation or exc)


def _holder(client: DockerClient, container: str) -> dict | None:
    try:
        return client.api.inspect_container(container)
    except docker.errors.NotFound:
        return None
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxError(f"reading the engine lock {container} failed: {exc}") from exc


def _alive(client: DockerClient, holder: dict, stale_seconds: float) -> bool:
    labels = (holder.get("Config") or {}).get("Labels") or {}
    owner = processes.parse(labels.get(OWNER_LABEL, ""))
    if owner is not None:
        owner = processes.Owner(owner.host, owner.pid, labels.get(START_LABEL, ""))
    alive = processes.alive(owner)
    if alive is not None:  # this host's process (no start recorded: its pid alone)
        return alive
    return _age(client, holder) < stale_seconds


def _age(client: DockerClient, holder: dict) -> float:
    """Seconds since the lock was taken, by the engine's clock (hosts' clocks may differ)."""
    try:
        now = datetime.fromisoformat(str(client.info().get("SystemTime") or "").strip())
        created = datetime.fromisoformat(str(holder.get("Created") or "").strip())
        return (now - created).total_seconds()  # (RFC 3339, nanoseconds cut to microseconds)
    except (docker.errors.DockerException, OSError, ValueError, TypeError):
        return 0.0


def _remove(client: DockerClient, container_id: str) -> int:
    try:
        client.api.remove_container(container_id, force=True)
        return 1
    except docker.errors.NotFound:
        return 0  # another waiter took it over first
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxError(f"removing a dead engine lock failed: {exc}") from exc


_load_guard = threading.Lock()


def _load_image(client: DockerClient) -> None:
    """Load `endless-lock:1` (the same bytes, so the same image id, every time)."""
    with _load_guard:
        with engine_failure(f"loading {LOCK_IMAGE} failed"):
            for chunk in client.api.load_image(lock_image_archive(_arch(client))) or []:
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise SandboxError(f"loading {LOCK_IMAGE}: {chunk['error']}")


def _arch(client: DockerClient) -> str:
    machine = str(client.info().get("Architecture") or "")
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine or "amd64")


def lock_image_archive(arch: str) -> bytes:
    """`docker save`'s archive of the lock image (one empty file, no date): the same bytes for the
    same architecture."""
    layer = _tar({"endless-lock": b""})
    layer_digest = hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": arch,
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": {"Cmd": ["/endless-lock"], "Labels": {PROJECT_LABEL: PROJECT}},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
            "history": [{"created": "1970-01-01T00:00:00Z", "comment": "endless engine lock"}],
        },
        sort_keys=True,
    ).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    manifest = [
        {
            "Config": config_name,
            "RepoTags": [LOCK_IMAGE],
            "Layers": [f"{layer_digest}/layer.tar"],
        }
    ]
    return _tar(
        {
            f"{layer_digest}/layer.tar": layer,
            config_name: config,
            "manifest.json": json.dumps(manifest).encode(),
        }
    )


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
