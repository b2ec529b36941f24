"""What processes that died left on an engine: their task containers (services included), the
episode networks of their services, the disk budgets (disk.py) mounted for them and the engine
locks (lock.py) they held; found and removed by
`sweep` (`endless sweep`, and every `Sandbox()` once per process and engine).

A container is removed once its budget is released: the budgets are found in the host's mount
table and loop devices (mounts.py), not through what the engine says of the container, which
may be dead, being removed, or no longer lead to its layer's upper directory (the engine's
failed removal deleted it). A budget whose layer belongs to no container of a live process is
released too (its container is gone); a loop device of a budget that nothing has mounted is
detached. Budgets and containers of processes that are alive (another run in progress: the
owner label says which) are never touched, unless `everything`. A removal the engine refuses is
tried again after the budgets are released again, a few times.

The mount table is read before the containers are listed: a budget is mounted after its
container is created, so every budget read there belongs to a container of that listing (or to
one that was removed since, whose budget its owner released first).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from dataclasses import dataclass, field

import docker.errors
from docker import DockerClient

from endless_assets.sandbox.engine import disk, lock, mounts, podman
from endless_assets.sandbox.engine.client import (
    KIND_LABEL,
    OWNER_LABEL,
    PROJECT,
    PROJECT_LABEL,
    TASK_KIND,
    owner_alive,
)

REMOVE_TRIES = 3  # removals of one container per sweep, budgets released again before each
STOP_SECONDS = 60  # how long a killed container may take to stop
RUNNING = ("running", "paused", "restarting")


@dataclass
class Swept:
    containers: int = 0  # removed
    mounts: int = 0  # budget mounts released
    loops: int = 0  # loop devices of budgets detached that nothing had mounted
    locks: int = 0  # engine locks (lock.py) of processes that are gone, removed
    networks: int = 0  # episode networks (services.py) of processes that are gone, removed
    left: list[str] = field(default_factory=list)  # "id: why" of containers the engine kept

    def add(self, other: Swept) -> None:
        self.containers += other.containers
        self.mounts += other.mounts
        self.loops += other.loops
        self.locks += other.locks
        self.networks += other.networks
        self.left += other.left


_totals = Swept()
_totals_lock = threading.Lock()


def totals() -> Swept:
    """What every sweep of this process has done so far (`endless sweep` reports it: the
    sandbox it sets up has swept once already)."""
    with _totals_lock:
        done = Swept()
        done.add(_totals)
        return done


def sweep(client: DockerClient, *, everything: bool = False) -> Swept:
    """Remove the task containers of processes that are gone (`everything`: of all processes)
    and release their disk budgets, and budgets whose container is gone. What was done."""
    swept = Swept()
    overlay = overlay_dir(client)
    found = mounts.budgets(overlay) if overlay else []
    # Only task containers: a container inherits its image's labels, so containers that others
    # start from images built on ours (e.g. exported tasks run by Harbor) carry the project
    # label too, with the image builder as owner; they are not ours to remove. Sparse: no
    # inspect, which would wait for a removal in progress (NotFound from the listing itself).
    listed = client.containers.list(
        all=True,
        sparse=True,
        filters={"label": [f"{PROJECT_LABEL}={PROJECT}", f"{KIND_LABEL}={TASK_KIND}"]},
    )
    doomed, kept = [], []
    for container in listed:
        owner = (container.attrs.get("Labels") or {}).get(OWNER_LABEL, "")
        (doomed if everything or not owner_alive(owner) else kept).append(container)
    _stop([c.id for c in doomed if c.attrs.get("State") in RUNNING], client)
    protected = _layers(client, [c.id for c in kept]) if found else set()
    releasable = [b for b in found if protected is not None and b.layer not in protected]
    swept.mounts, swept.loops = _release(releasable)
    for container in doomed:
        _remove(client, container.id, releasable, swept)
    swept.networks = _sweep_networks(client, everything)
    swept.locks = lock.sweep_locks(client)
    with _totals_lock:
        _totals.add(swept)
    return swept


def _sweep_networks(client: DockerClient, everything: bool) -> int:
    """Remove the episode networks of processes that are gone (their containers, services
    included, are removed first); how many. One the engine refuses is left for the next sweep."""
    try:
        found = client.api.networks(filters={"label": [f"{PROJECT_LABEL}={PROJECT}"]})
    except (docker.errors.DockerException, OSError):
        return 0
    removed = 0
    for network in found:
        owner = (network.get("Labels") or {}).get(OWNER_LABEL, "")
        if everything or not owner_alive(owner):
            with contextlib.suppress(docker.errors.DockerException, OSError):
                client.api.remove_network(network["Id"])
                removed += 1
    return removed


def overlay_dir(client: DockerClient) -> str:
    """The directory of the engine's container layers when this process can release budgets
    there: the engine runs on this host (its socket's peer, in this mount namespace, names this
    host) with an overlay driver, and we are root; else ""."""
    if os.geteuid() != 0:
        return ""
    pid = podman.engine_pid(client)
    try:
        if pid <= 0 or os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"):
            return ""
        info = client.info()
    except (docker.errors.DockerException, OSError):
        return ""
    driver, root = str(info.get("Driver") or ""), str(info.get("DockerRootDir") or "")
    if driver not in disk.OVERLAY_DRIVERS or not root or info.get("Name") != socket.gethostname():
        return ""
    return os.path.join(os.path.realpath(root), driver)


def _stop(ids: list[str], client: DockerClient) -> None:
    """Kill the containers and wait until they stopped, so that nothing writes to a budget that
    is released."""
    for container_id in ids:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            client.api.kill(container_id)
    for container_id in ids:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            client.api.wait(container_id, timeout=STOP_SECONDS)


def _layers(client: DockerClient, ids: list[str]) -> set[str] | None:
    """The layer directories of these containers (what their budgets cover); None when one of
    them cannot be told (then no budget is released: it might be theirs)."""
    layers = set()
    for container_id in ids:
        try:
            attrs = client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            continue  # removed meanwhile, its budget released first by its owner
        except (docker.errors.DockerException, OSError):
            return None
        data = (attrs.get("GraphDriver") or {}).get("Data") or {}
        for key in ("UpperDir", "WorkDir", "MergedDir"):
            if data.get(key):
                layers.add(os.path.dirname(os.path.realpath(str(data[key]))))
    return layers


def _release(budgets: list[mounts.Budget]) -> tuple[int, int]:
    """Unmount these budgets (visible or hidden) and detach the loop devices of those that
    nothing mounts; how many mounts were released and loop devices detached."""
    present = set(mounts.mount_table())
    released = mounts.unmount_all([m for b in budgets for m in b.mounts if m in present])
    detached = 0
    for budget in budgets:
        if budget.mounts:
            continue  # its loop device goes with its filesystem (mount's autoclear)
        detached += mounts.detach_loop(budget)
    return released, detached


def _remove(client: DockerClient, container_id: str, budgets: list, swept: Swept) -> None:
    """Remove the container; a removal the engine refuses (its layer busy) is tried again
    after the budgets are released again (one mounted meanwhile by what it did)."""
    for attempt in range(REMOVE_TRIES):
        try:
            client.api.remove_container(container_id, force=True, v=True)
            swept.containers += 1
            return
        except docker.errors.NotFound:
            return  # gone already
        except docker.errors.APIError as exc:
            if "already in progress" in str(exc):
                return  # someone else removes it
            why = str(exc.explanation or exc)
        except (docker.errors.DockerException, OSError) as exc:
            why = str(exc)
        if attempt + 1 < REMOVE_TRIES:
            swept.mounts += _release(budgets)[0]
    swept.left.append(f"{container_id[:12]}: {why[-300:]}")


def sweep_containers(client: DockerClient, *, everything: bool = False) -> int:
    """Remove the task containers of processes that are gone (or all of them), with the disk
    budgets mounted for them. Returns how many containers were removed."""
    return sweep(client, everything=everything).containers
