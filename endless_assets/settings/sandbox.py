"""Settings of the sandbox: the engines, and the limits every task container runs under."""

from __future__ import annotations

from dataclasses import dataclass

from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.engine.engines import EngineSpec, parse_hosts
from endless_assets.sandbox.sandbox import SandboxConfig
from endless_assets.settings.declare import setting


@dataclass(frozen=True)
class SandboxSettings:
    docker_host: str = setting(
        "", "DOCKER_HOST", "Docker engine URL (empty: the local socket)", operational=True
    )
    docker_hosts: str = setting(
        "",
        "ENDLESS_DOCKER_HOSTS",
        "sandbox engine pool: comma-separated Docker/Podman engine URLs (unix://, tcp://, "
        "ssh://), each with an optional =slots (default: workers); builds and containers go to "
        "the least-loaded engine. Empty: docker_host alone",
        operational=True,
    )
    memory: str = setting("1g", "ENDLESS_MEMORY", "memory limit per task container")
    cpus: float = setting(1.0, "ENDLESS_CPUS", "CPU limit per task container")
    pids: int = setting(512, "ENDLESS_PIDS", "process limit per task container")
    disk: str = setting(
        "2g",
        "ENDLESS_DISK",
        "disk an agent may write per task container (writes past it: 'No space left on "
        "device'; 0: no budget)",
    )
    build_network: bool = setting(
        True,
        "ENDLESS_BUILD_NETWORK",
        "let RUN steps of LLM-written Dockerfiles reach the network during builds (the "
        "registries, through a proxy that never connects to this host or a container; "
        "procedural builds never get one; containers never do); imported Dockerfiles only when "
        "set explicitly",
    )
    build_network_allow: str = setting(
        "",
        "ENDLESS_BUILD_NETWORK_ALLOW",
        "comma-separated host:port that builds with a network may reach although they are this "
        "host's, its LAN's or a container's (a package mirror or cache); empty: none",
        operational=True,
    )
    warm_containers: int = setting(
        0,
        "ENDLESS_WARM_CONTAINERS",
        "the solver stage starts up to this many task containers ahead of the attempts that will "
        "take "
        "them (grader resident, nothing run in them): for engines with cores to spare; 0: "
        "each attempt starts its own",
        operational=True,
    )

    def engine_specs(self, workers: int) -> tuple[EngineSpec, ...]:
        """The sandbox engines: `docker_hosts` (capacity defaults to `workers`), else `docker_host`
        alone with a capacity of `workers`."""
        if self.docker_hosts.strip():
            return parse_hosts(self.docker_hosts, workers)
        return (EngineSpec(self.docker_host, workers),)

    def config(self, *, workers: int) -> SandboxConfig:
        """The sandbox these settings describe, for every path that makes one (the pipeline's
        resource, the CLI, `endless serve`): its engines, container limits, build network and
        warm spares; `workers` (the run's) bounds its builds, starts and verdicts at once."""
        return SandboxConfig(
            docker_host=self.docker_host or None,
            engines=self.engine_specs(workers) if self.docker_hosts.strip() else (),
            limits=Limits(memory=self.memory, cpus=self.cpus, pids=self.pids, disk=self.disk),
            build_network=self.build_network,
            build_network_allow=tuple(
                a.strip() for a in self.build_network_allow.split(",") if a.strip()
            ),
            warm=self.warm_containers,
            cpu_slots=max(1, workers),
        )
