"""The Docker client, the labels every object carries, and the sweeper for leftovers."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import time
from typing import Any

import docker
import docker.errors
import docker.utils
from docker import DockerClient

from endless_assets.sandbox import disk

PROJECT_LABEL = "endless.project"
PROJECT = "endless"
OWNER_LABEL = "endless.owner"  # host:pid of the process that created a container
KIND_LABEL = "endless.kind"
TASK_KIND = "task-container"  # the kind of the containers task_container() starts


class SandboxError(RuntimeError):
    """Infrastructure failure (daemon unreachable, API error): a harness error, not a verdict."""


class RetriesExhausted(SandboxError):
    """An engine failure already tried again where it happened (a build): trying the whole step
    again on the same engine would only repeat those tries."""


def tls_for(base_url: str) -> Any:
    """Client TLS for a `tcp://` engine, as docker-py reads it for DOCKER_HOST
    (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH); None where those are unset or the URL is not tcp."""
    if not base_url.startswith(("tcp://", "https://")):
        return None
    return docker.utils.kwargs_from_env().get("tls")


def client_for(base_url: str, timeout: float) -> DockerClient:
    """A client for one engine URL ("" = DOCKER_HOST or the local socket)."""
    if not base_url:
        return docker.from_env(timeout=timeout)
    tls = tls_for(base_url)
    return DockerClient(base_url=base_url, timeout=timeout, tls=tls if tls else False)


def engine_address(client: DockerClient) -> str:
    """Which engine `client` talks to: its unix socket's path, else its URL (docker-py gives
    every unix socket the same base URL)."""
    adapter = getattr(client.api, "_custom_adapter", None)  # docker-py's UnixHTTPAdapter
    return str(getattr(adapter, "socket_path", "") or client.api.base_url)


@functools.cache
def docker_client(base_url: str | None = None) -> DockerClient:
    """A client for `base_url`, else DOCKER_HOST, else the local socket. Cached per process."""
    try:
        client = client_for(base_url or "", 300)
        client.ping()
    except docker.errors.DockerException as exc:
        where = base_url or os.environ.get("DOCKER_HOST") or "the local socket"
        raise SandboxError(
            f"cannot reach a Docker engine at {where}: {exc}. "
            "Run scripts/ensure-docker.sh or set DOCKER_HOST."
        ) from exc
    return client


ENGINE_WAIT_SECONDS = 60.0


def wait_for_engine(client: DockerClient, seconds: float = ENGINE_WAIT_SECONDS) -> None:
    """Return once the engine answers a ping (at once, if it does); SandboxError if it does
    not within `seconds` (e.g. a daemon that is restarting)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            client.ping()
            return
        except (docker.errors.DockerException, OSError) as exc:
            if time.monotonic() >= deadline:
                raise SandboxError(f"the Docker engine does not answer: {exc}") from exc
        time.sleep(0.5)


def owner_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def base_labels(**extra: str) -> dict[str, str]:
    labels = {PROJECT_LABEL: PROJECT, OWNER_LABEL: owner_tag()}
    labels.update({f"endless.{k}": str(v) for k, v in extra.items()})
    return labels


def _owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's container: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_containers(client: DockerClient, *, everything: bool = False) -> int:
    """Remove project containers whose creating process is gone (or all of them). Returns count."""
    removed = 0
    # Only task containers: a container inherits its image's labels, so containers that others
    # start from images built on ours (e.g. exported tasks run by Harbor) carry the project
    # label too, with the image builder as owner; they are not ours to remove.
    # Sparse: no per-container inspect, which would race with containers that other processes
    # remove between the listing and the inspect (NotFound from the listing itself).
    containers = client.containers.list(
        all=True,
        sparse=True,
        filters={"label": [f"{PROJECT_LABEL}={PROJECT}", f"{KIND_LABEL}={TASK_KIND}"]},
    )
    for container in containers:
        owner = (container.attrs.get("Labels") or {}).get(OWNER_LABEL, "")
        if everything or not _owner_alive(owner):
            try:
                _release_disk(client, container.id)
                client.api.remove_container(container.id, force=True, v=True)
                removed += 1
            except (docker.errors.NotFound, OSError):
                pass  # gone already, or its disk still busy: the next sweep tries again
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc):
                    raise
    return removed


def _release_disk(client: DockerClient, container_id: str) -> None:
    """A container with a disk budget (disk.py) is stopped and its filesystem unmounted before
    Docker removes its layer."""
    layer = disk.layer_dir(client.api.inspect_container(container_id))
    if layer and os.path.ismount(layer):
        with contextlib.suppress(docker.errors.APIError):
            client.api.kill(container_id)
        client.api.wait(container_id, timeout=60)
        disk.release(layer)


def project_containers(client: DockerClient) -> list[str]:
    found = client.containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={PROJECT}"})
    return [c.name for c in found]
