"""The Docker client and the labels every object carries (leftovers.py sweeps what dead
processes left)."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import time
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import docker.utils
from docker import DockerClient

from endless_assets import processes

PROJECT_LABEL = "endless.project"
PROJECT = "endless"
OWNER_LABEL = "endless.owner"  # host:pid of the process that created a container
KIND_LABEL = "endless.kind"
TASK_KIND = "task-container"  # the kind of the containers task_container() starts


class SandboxError(RuntimeError):
    """Infrastructure failure (daemon unreachable, API error): a harness error, not a verdict."""


class ImageMissing(SandboxError):
    """An image that was there is not (another process removed it): tried again once it is back."""


@contextlib.contextmanager
def engine_failure(what: str) -> Iterator[None]:
    """What the engine, or the connection to it, raises in the block: SandboxError("what: ...")."""
    try:
        yield
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxError(f"{what}: {exc}") from exc


class RetriesExhausted(SandboxError):
    """An engine failure already tried again where it happened (a build): not to retry again."""


PING_SECONDS = 5.0  # an engine that does not answer a ping within this is down
WORK_SECONDS = 300.0  # a request of real work (a build step's stream, a container's start)


class EngineConfigError(SandboxError):
    """An engine URL this machine cannot use at all (an ssh:// engine without `ssh`, say)."""


def tls_for(base_url: str) -> Any:
    """Client TLS for a `tcp://` engine as docker-py reads it for DOCKER_HOST, or None."""
    if not base_url.startswith(("tcp://", "https://")):
        return None
    return docker.utils.kwargs_from_env().get("tls")


def client_for(base_url: str, timeout: float, version: str | None = None) -> DockerClient:
    """A client for one engine URL ("" = DOCKER_HOST or the local socket); without `version`,
    docker-py asks the engine for it. ssh:// goes through the system's `ssh`, as the CLI does."""
    url = base_url or os.environ.get("DOCKER_HOST", "")
    if not base_url and not url.startswith("ssh://"):
        return docker.from_env(timeout=timeout, version=version)
    if url.startswith("ssh://"):
        if shutil.which("ssh") is None:
            raise EngineConfigError(
                f"ssh:// engines need the OpenSSH client (ssh) on PATH, for {url}: install it "
                "(e.g. the openssh-client package)"
            )
        try:
            return DockerClient(base_url=url, timeout=timeout, version=version, use_ssh_client=True)
        except docker.errors.DockerException as exc:
            if "paramiko" not in str(exc):
                raise
            raise EngineConfigError(
                f"ssh:// engines need docker-py's ssh support, for {url}: "
                "pip install 'docker[ssh]' (it brings paramiko)"
            ) from exc
    tls = tls_for(url)
    return DockerClient(base_url=url, timeout=timeout, version=version, tls=tls if tls else False)


def connect(base_url: str, timeout: float = WORK_SECONDS) -> DockerClient:
    """A client for real work (requests may take `timeout`) to an engine that has just answered a
    short ping: one that never answers costs seconds, not minutes. Else SandboxError, saying why."""
    where = base_url or os.environ.get("DOCKER_HOST") or "the local socket"
    try:
        probe = client_for(base_url, PING_SECONDS)
        try:
            probe.ping()
            version = probe.api.api_version
        finally:
            probe.close()
        return client_for(base_url, timeout, version=version)
    except EngineConfigError:
        raise
    except (docker.errors.DockerException, OSError, ValueError) as exc:
        raise SandboxError(f"cannot reach a Docker engine at {where}: {why_down(exc)}") from exc


def why_down(exc: BaseException) -> str:
    """Why an engine did not answer, in a few words (not docker-py's whole chain)."""
    text = str(exc).removeprefix("Error while fetching server API version: ")
    if "timed out" in text.lower():
        return f"no answer within {PING_SECONDS:g} s"
    for known, words in (
        ("No such file or directory", "no such socket"),
        ("Connection refused", "connection refused"),
        ("Permission denied", "permission denied"),
    ):
        if known in text:
            return words
    return text


def socket_path(client: DockerClient) -> str:
    """The unix socket `client` talks to ("" for a tcp or ssh engine)."""
    adapter = getattr(client.api, "_custom_adapter", None)  # docker-py's UnixHTTPAdapter
    return str(getattr(adapter, "socket_path", "") or "")


def engine_address(client: DockerClient) -> str:
    """Which engine `client` talks to: its unix socket's path (docker-py gives every unix socket
    the same base URL), else its URL."""
    return socket_path(client) or str(client.api.base_url)


@functools.cache
def docker_client(base_url: str | None = None) -> DockerClient:
    """A client for `base_url`, else DOCKER_HOST, else the local socket; cached per process."""
    try:
        return connect(base_url or "")
    except EngineConfigError:
        raise
    except SandboxError as exc:
        raise SandboxError(f"{exc}. Run scripts/ensure-docker.sh or set DOCKER_HOST.") from exc


ENGINE_WAIT_SECONDS = 60.0


def wait_for_engine(client: DockerClient, seconds: float = ENGINE_WAIT_SECONDS) -> None:
    """Return once the engine answers a ping; SandboxError if it does not within `seconds`."""
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


def owner_alive(owner: str) -> bool:
    """Whether the process an owner label (host:pid) names may run (another host's: it may)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's container: not ours to judge
    return processes.running(int(pid))
