"""A build's RUN steps get a task container's limits (memory without swap, CPU, processes), and
the whole build a wall-clock budget.

Memory and CPU go through the build API (`BuildLimits.params`), which every engine takes;
docker-py's `api.build` cannot pass a CPU quota or a cgroup parent, so each engine's endpoint
is asked by its provider (engine/provider.py). The API has no process limit:
that comes from a cgroup parent made for each build where the engine is on this host
(build_cgroup.py). A build past its budget is cut off (`Budget`): closing the connection makes
the engine cancel it, and the container of the step it was running is made sure gone
(`ensure_gone`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import docker.errors
import requests
from docker import DockerClient
from docker.utils import parse_bytes

from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.engine.client import WORK_SECONDS

log = logging.getLogger(__name__)

CPU_PERIOD = 100_000  # microseconds, the kernel's default CFS period


@dataclass(frozen=True)
class BuildLimits:
    """The limits of every container a build runs, from the sandbox's `Limits`."""

    memory: str  # as the setting says it ("1g"); RUN steps get no swap beyond it
    cpus: float
    pids: int

    @classmethod
    def of(cls, limits: Limits) -> BuildLimits:
        return cls(limits.memory, limits.cpus, limits.pids)

    @property
    def memory_bytes(self) -> int:
        return int(parse_bytes(self.memory))

    def params(self) -> dict[str, str]:
        """The build API's query parameters for them (Docker's and Podman's own alike)."""
        return {
            "memory": str(self.memory_bytes),
            "memswap": str(self.memory_bytes),
            "cpuperiod": str(CPU_PERIOD),
            "cpuquota": str(int(self.cpus * CPU_PERIOD)),
        }

    def reason(self, reached: set[str], code: int | None, *, measured: bool) -> str:
        """Which limit made a build fail, where that can be told: the kernel's account of the
        build's cgroup (`reached`, where there was one: `measured`), or a step killed by
        SIGKILL (exit 137) where there was none; "" if none can be named."""
        lines = []
        if "pids" in reached:
            lines.append(
                f"the build's processes reached their limit ({self.pids}): a step could not fork"
            )
        memory = f"the build's memory limit ({self.memory})"
        if code == 137 and "memory" in reached:
            lines.append(f"a step was killed (exit 137) at {memory}")
        elif code == 137 and not measured:
            lines.append(f"a step was killed (exit 137), most likely at {memory}")
        return "\n".join(lines)


def ensure_gone(client: DockerClient, ids: Iterable[str]) -> None:
    """Make sure the build containers `ids` no longer exist: removed (forced) here, or waited
    for where the engine is removing them already. Best effort: an engine that fails here
    leaves a cgroup parent for a later sweep, and its containers for the sweeper."""
    for cid in dict.fromkeys(ids):
        try:
            _remove(client, cid)
        except (docker.errors.DockerException, OSError) as exc:
            log.warning("build container %s not removed: %s", cid, exc)


def _remove(client: DockerClient, cid: str) -> None:
    try:
        client.api.remove_container(cid, force=True)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # not "removal already in progress"
            raise
        with contextlib.suppress(docker.errors.NotFound):
            client.api.wait(cid, timeout=WORK_SECONDS, condition="removed")


class Budget:
    """A build's wall-clock budget: when it runs out, reads of the build's response stop (from
    another thread, so a step that prints nothing is cut short too); the caller then closes the
    connection, which makes the engine cancel the build."""

    def __init__(self, response: requests.Response, deadline: float) -> None:
        self.response = response
        self.deadline = deadline
        self.expired = threading.Event()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self.expire)
        self._timer.daemon = True

    def __enter__(self) -> Budget:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def over(self) -> bool:
        """Whether the budget has run out (it expires here if the timer has not yet fired)."""
        if time.monotonic() >= self.deadline:
            self.expire()
        return self.expired.is_set()

    def expire(self) -> None:
        if self.expired.is_set():
            return
        self.expired.set()
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # already closed
            self.response.raw.shutdown()
