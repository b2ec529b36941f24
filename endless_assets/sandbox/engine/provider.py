"""What differs between the engines the sandbox drives (Docker, Podman), behind one interface.

The provider of a client is chosen once (`provider_for`, by the engine's kind, podman.py) and
asked; callers never branch on the engine's kind. Docker's is the plain Docker API; Podman's
(podman.py) differs in the seccomp profile, rlimits, builds, read-only paths, base images and
imports, each said where it is implemented.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Protocol

import docker.types
import requests
from docker import DockerClient

from endless_assets.sandbox.engine import podman

Progress = Callable[[str], None]


class Provider(Protocol):
    """One engine kind's way of doing what the sandbox needs."""

    kind: str  # podman.DOCKER or podman.PODMAN
    # Its API ignores HostConfig's ReadonlyPaths: the sandbox remounts them once started.
    remounts_read_only: bool
    # A build step runs in the cgroup it is given, not beneath it, and removes it afterwards.
    build_steps_own_cgroup: bool

    def seccomp_option(self, profile_json: str) -> str:
        """The `security_opt` entry that gives containers `profile_json`."""

    def ulimits(self) -> list[docker.types.Ulimit]:
        """The rlimits containers need set explicitly."""

    def build(
        self,
        context: io.BytesIO,
        tag: str,
        timeout: float,
        params: dict[str, str],
        network: tuple[str, str, dict[str, str]],
    ) -> requests.Response:
        """Build `context` (a tar with a Dockerfile) as `tag` with the limits in `params`;
        `network`: (Docker's network mode, Podman's network namespace, proxy build arguments).
        The response streams JSON chunks."""

    def network_namespace(self, gateway: str) -> str:
        """What a build joins of container `gateway`'s network ("": its network mode)."""

    def base_from_elsewhere(self, tag: str, progress: Progress) -> str:
        """Base image `tag` brought from another engine on this host: its id; "" if none."""

    def tag_imported(self, reply: object, tag: str) -> None:
        """Make sure the image an import made (its API reply `reply`) is tagged `tag`."""


class DockerProvider:
    kind = podman.DOCKER
    remounts_read_only = False
    build_steps_own_cgroup = False

    def __init__(self, client: DockerClient) -> None:
        self.client = client

    def seccomp_option(self, profile_json: str) -> str:
        return f"seccomp={profile_json}"  # inline

    def ulimits(self) -> list[docker.types.Ulimit]:
        return []  # containers inherit the engine's

    def build(self, context, tag, timeout, params, network) -> requests.Response:
        """Docker's build endpoint (its legacy builder), asked as docker-py's `api.build` asks
        it (the registry credentials for FROM, the client's proxy settings as build arguments)
        with what `api.build` cannot pass: a cgroup parent and a CPU quota (`params`). The
        network mode: `none` (a loopback interface only) or `container:<id>` (a build
        gateway's, build_network.py, whose proxy variables are the build arguments)."""
        api = self.client.api
        mode, _, build_args = network
        query = {"t": tag, "rm": "1", "forcerm": "1", "networkmode": mode, **params}
        proxies = {**api._proxy_configs.get_environment(), **build_args}
        if proxies:
            query["buildargs"] = json.dumps(proxies)
        headers = {"Content-Type": "application/tar"}
        api._set_auth_headers(headers)
        url = api._url("/build")
        return api._post(
            url, params=query, data=context, headers=headers, stream=True, timeout=timeout
        )

    def network_namespace(self, gateway: str) -> str:
        return ""

    def base_from_elsewhere(self, tag: str, progress: Progress) -> str:
        return ""  # built here

    def tag_imported(self, reply: object, tag: str) -> None:
        return None  # its import tags the image as asked


class PodmanProvider:
    kind = podman.PODMAN
    remounts_read_only = True
    build_steps_own_cgroup = True

    def __init__(self, client: DockerClient) -> None:
        self.client = client

    def seccomp_option(self, profile_json: str) -> str:
        return podman.seccomp_option(self.client, profile_json)

    def ulimits(self) -> list[docker.types.Ulimit]:
        return podman.ulimits(self.client)

    def build(self, context, tag, timeout, params, network) -> requests.Response:
        _, namespace, args = network
        return podman.build(self.client, context, tag, namespace, timeout, params, args)

    def network_namespace(self, gateway: str) -> str:
        pid = self.client.api.inspect_container(gateway)["State"]["Pid"]
        return f"/proc/{pid}/ns/net"

    def base_from_elsewhere(self, tag: str, progress: Progress) -> str:
        return podman.copy_from_docker(self.client, tag, progress)

    def tag_imported(self, reply: object, tag: str) -> None:
        podman.tag_imported(self.client, reply, tag)


def provider_for(client: DockerClient) -> Provider:
    """The provider of `client`'s engine (its kind is asked once per client). SandboxError if
    the engine does not answer."""
    podman_engine = podman.engine_kind(client) == podman.PODMAN
    return PodmanProvider(client) if podman_engine else DockerProvider(client)
