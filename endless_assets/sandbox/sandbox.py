"""One object holding what every stage needs from Docker: the client, the base image, limits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from endless_assets.sandbox.base_image import BaseImage, ensure_base_image
from endless_assets.sandbox.client import docker_client, sweep_containers
from endless_assets.sandbox.container import Limits, TaskContainer, task_container
from endless_assets.sandbox.images import BuildResult, build_task_image


@dataclass(frozen=True)
class SandboxConfig:
    docker_host: str | None = None  # None: DOCKER_HOST or the local socket
    limits: Limits = field(default_factory=Limits)
    build_network: bool = True  # RUN steps may reach package registries; run time never may
    build_timeout: float = 600
    test_timeout: float = 180


_swept: set[str | None] = set()


class Sandbox:
    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.client = docker_client(self.config.docker_host)
        self._base: BaseImage | None = None
        if self.config.docker_host not in _swept:
            # Containers of processes that died (a killed run) are removed once per process.
            _swept.add(self.config.docker_host)
            sweep_containers(self.client)

    @property
    def base(self) -> BaseImage:
        if self._base is None:
            self._base = ensure_base_image(self.client)
        return self._base

    def build(
        self,
        dockerfile: str,
        context_files: dict[str, str],
        labels: dict[str, str] | None = None,
        *,
        network: bool = True,
    ) -> BuildResult:
        """Build (or reuse) a task image. RUN steps get the host network only when the caller
        asks (`network`) and the configuration allows it (`build_network`)."""
        return build_task_image(
            self.client,
            dockerfile,
            context_files,
            base_image_id=self.base.image_id,
            labels=labels,
            network=network and self.config.build_network,
            timeout=self.config.build_timeout,
        )

    @contextmanager
    def container(
        self, image: str, labels: dict[str, str] | None = None
    ) -> Iterator[TaskContainer]:
        with task_container(self.client, image, limits=self.config.limits, labels=labels) as c:
            yield c
