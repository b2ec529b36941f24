"""A task's services (models.Service) beside the agent's container, on a network of the episode's.

Each episode gets its own bridge network, `internal` (no route out) and without an address on
this host's side of the bridge (`inhibit_ipv4`: nothing of the host's is reachable from it, even
where the engine runs without iptables), with the owner and project labels every container
carries. The services start on it in parallel (in waves where one comes `after` others: it
starts once they are ready), each reached by its name and its `aliases` (network aliases), with
its own limits, all capabilities dropped but the few a service needs to drop its own privileges,
`no-new-privileges` and our seccomp profile; every container on the network resolves names
through the engine's resolver, whose upstream is the container's own loopback (nothing outside
answers, so no name lookup leaves the network). A service is ready once its `ready` command
exits 0 in it; one that exits, or is not ready within `ready_seconds`, is `ServiceFailed` with
the tail of its log. Everything is removed when the block ends, whatever happened: the services,
then the network; `endless sweep` removes what a dead process left (leftovers.py).
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass

import docker.errors
from docker import DockerClient

from endless_assets.models import Service, start_order
from endless_assets.sandbox.containers.seccomp import confined_host_config
from endless_assets.sandbox.containers.startup import ContainerExited, limit_disk, remove_by_name
from endless_assets.sandbox.engine import disk, podman
from endless_assets.sandbox.engine.client import (
    TASK_KIND,
    SandboxError,
    base_labels,
    engine_failure,
)
from endless_assets.sandbox.engine.provider import provider_for

NETWORK_KIND = "episode-network"
SERVICE_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "NET_BIND_SERVICE"]
RESOLVER = ["127.0.0.1"]  # the engine's resolver forwards outside names here: nowhere
READY_POLL = 0.25  # seconds between two runs of a `ready` command
READY_EXEC_SECONDS = 10  # one run of it at most
LOG_TAIL = 3000  # characters of a failed service's log in its error


class ServiceFailed(ContainerExited):
    """A service that exited or never became ready: the task's fault where its environment is
    checked (a rejection with the log's tail, what a repair needs), a harness error later."""


@dataclass(frozen=True)
class RunningService:
    name: str
    container_id: str
    client: DockerClient

    def running(self) -> bool:
        try:
            state = self.client.api.inspect_container(self.container_id).get("State") or {}
        except (docker.errors.DockerException, OSError):
            return False
        return bool(state.get("Running"))

    def exec(self, command: str, user: str = "") -> tuple[int, str]:
        """Run a shell command in the service (the harness's own: checks, tests of the runtime)."""
        with engine_failure(f"exec in service {self.name}"):
            code, out = self.client.containers.get(self.container_id).exec_run(
                ["timeout", str(READY_EXEC_SECONDS), "sh", "-c", command], user=user
            )
        return int(code if code is not None else -1), (out or b"").decode(errors="replace")

    def log_tail(self) -> str:
        try:
            raw = self.client.api.logs(self.container_id, tail=60)
        except (docker.errors.DockerException, OSError) as exc:
            return f"(no log: {exc})"
        return raw.decode(errors="replace")[-LOG_TAIL:]


@dataclass(frozen=True)
class ServiceSet:
    """The services of one episode, by name, and the network they share with its containers."""

    network: str
    services: dict[str, RunningService]

    def dead(self) -> list[str]:
        """The services that no longer run."""
        return [name for name, s in self.services.items() if not s.running()]


@contextmanager
def episode_network(client: DockerClient, labels: dict[str, str]) -> Iterator[str]:
    """A private network for one episode (see the module docstring), removed afterwards."""
    if podman.engine_kind(client) == podman.PODMAN:
        raise SandboxError("tasks with services need a Docker engine; this one is Podman")
    name = f"endless-net-{os.getpid()}-{secrets.token_hex(5)}"
    with engine_failure("creating an episode's network"):
        client.networks.create(
            name,
            driver="bridge",
            internal=True,
            options={"com.docker.network.bridge.inhibit_ipv4": "true"},
            labels=base_labels(kind=NETWORK_KIND, **labels),
        )
    try:
        yield name
    finally:
        remove_network(client, name)


def remove_network(client: DockerClient, name: str) -> None:
    with suppress(docker.errors.NotFound):
        with engine_failure(f"removing network {name}"):
            client.api.remove_network(name)


@contextmanager
def running_services(
    client: DockerClient,
    services: Sequence[tuple[Service, str]],
    labels: dict[str, str],
) -> Iterator[ServiceSet]:
    """The services (each with its image's tag) started in parallel on a new network and
    ready; ServiceFailed naming the first that is not. All removed when the block ends."""
    with ExitStack() as stack:
        network = stack.enter_context(episode_network(client, labels))
        names = {s.name: f"endless-{uuid.uuid4().hex[:12]}" for s, _ in services}
        stack.callback(_remove_all, client, list(names.values()))  # a partial start too
        tags = {s.name: tag for s, tag in services}
        started: list[RunningService] = []
        # In waves: a service starts once those it comes `after` are ready.
        for wave in start_order([s for s, _ in services]):
            with ThreadPoolExecutor(len(wave)) as pool:
                futures = [
                    pool.submit(_start, client, network, names[s.name], s, tags[s.name], labels)
                    for s in wave
                ]
                started += [f.result() for f in futures]  # (every start has ended by then)
        yield ServiceSet(network, {s.name: s for s in started})


def _remove_all(client: DockerClient, names: list[str]) -> None:
    with ThreadPoolExecutor(max(1, len(names))) as pool:
        list(pool.map(lambda name: remove_by_name(client, name), names))


def _start(
    client: DockerClient,
    network: str,
    container_name: str,
    service: Service,
    image: str,
    labels: dict[str, str],
) -> RunningService:
    api = client.api
    engine = provider_for(client)
    host_config = confined_host_config(
        client,
        service,
        caps=SERVICE_CAPS,
        network_mode=network,
        dns=RESOLVER,
        log_config={"type": "json-file", "config": {"max-size": "1m", "max-file": "1"}},
        ulimits=list(engine.ulimits()),
    )
    endpoint = api.create_endpoint_config(aliases=[service.name, *service.aliases])
    with engine_failure(f"starting service {service.name}"):
        created = api.create_container(
            image,
            command=list(service.command),
            name=container_name,
            environment=dict(service.environment),
            detach=True,
            labels=base_labels(kind=TASK_KIND, **{**labels, "service": service.name}),
            host_config=host_config,
            networking_config=api.create_networking_config({network: endpoint}),
        )
        # (released with the container: startup.remove_by_name)
        limit_disk(client, created["Id"], disk.check_budget(service.disk))
        api.start(created["Id"])
    running = RunningService(service.name, created["Id"], client)
    _await_ready(running, service)
    return running


def _await_ready(running: RunningService, service: Service) -> None:
    """Run `ready` until it exits 0; ServiceFailed once the service exits or the time is up."""
    deadline = time.monotonic() + service.ready_seconds
    code, out = -1, ""
    while True:
        try:
            alive = running.running()
            code, out = running.exec(service.ready) if alive else (code, out)
        except SandboxError:  # the exec found it stopped (it exited since we looked), or not
            alive = running.running()
            if alive:
                raise
        if not alive:
            raise ServiceFailed(
                f"service {service.name} exited before it was ready; its log:\n{running.log_tail()}"
            )
        if code == 0:
            return
        if time.monotonic() > deadline:
            raise ServiceFailed(
                f"service {service.name} was not ready within {service.ready_seconds:g} s "
                f"(`{service.ready}` exits {code}: {out.strip()[-300:]}); its log:\n"
                f"{running.log_tail()}"
            )
        time.sleep(READY_POLL)
