"""What differs between the engines the sandbox drives (Docker, Podman), behind one interface.

A client's provider is chosen by the engine's kind (`provider_for`; the kind is asked once per
client, podman.py) and asked; callers never branch on the kind. Docker's is the plain Docker
API; Podman's differs where podman.py says why.
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
from endless_assets.sandbox.engine.podman import PodmanProvider

# A build's RUN steps' network: (Docker's network mode, Podman's network namespace to join,
# the proxy build arguments); ("none", "", {}): none.
BuildNetworkOptions = tuple[str, str, dict[str, str]]


class Provider(Protocol):
    kind: str  # podman.DOCKER or podman.PODMAN
    remounts_read_only: bool  # its API ignores ReadonlyPaths: remounted once started
    build_steps_own_cgroup: bool  # a build step runs in (and removes) the cgroup it is given

    def seccomp_option(self, profile_json: str) -> str: ...  # containers' `security_opt` entry

    def ulimits(self) -> list[docker.types.Ulimit]: ...  # rlimits containers need set

    def build(
        self,
        context: io.BytesIO,
        tag: str,
        timeout: float,
        params: dict[str, str],
        network: BuildNetworkOptions,
    ) -> requests.Response: ...  # a build of `context` (a tar), streaming JSON chunks

    def network_namespace(self, gateway: str) -> str: ...  # what a build joins of `gateway`

    def base_from_elsewhere(self, tag: str, progress: Callable[[str], None]) -> str: ...

    def tag_imported(self, reply: object, tag: str) -> None: ...  # after an image import


class DockerProvider:
    kind, remounts_read_only, build_steps_own_cgroup = podman.DOCKER, False, False

    def __init__(self, client: DockerClient) -> None:
        self.client = client

    def seccomp_option(self, profile_json: str) -> str:
        return f"seccomp={profile_json}"  # inline

    def ulimits(self) -> list[docker.types.Ulimit]:
        return []  # containers inherit the engine's

    def build(self, context, tag, timeout, params, network) -> requests.Response:
        """Docker's build endpoint, asked as docker-py's `api.build` asks it, with what that cannot
        pass: a cgroup parent and a CPU quota (`params`)."""
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
        return ""  # the network mode `container:<gateway>` does it

    def base_from_elsewhere(self, tag: str, progress: Callable[[str], None]) -> str:
        return ""  # built here

    def tag_imported(self, reply: object, tag: str) -> None:
        return None  # its import tags the image as asked


def provider_for(client: DockerClient) -> Provider:
    """The provider of `client`'s engine. SandboxError if the engine does not answer."""
    is_podman = podman.engine_kind(client) == podman.PODMAN
    return PodmanProvider(client) if is_podman else DockerProvider(client)
