"""A cgroup parent per build, with the build's process and memory limits, where the engine runs
on this host and names cgroups by path (cgroupfs), and we are root.

The build API has no process limit. Docker's legacy builder creates each RUN step's container
under the build's cgroup parent (`<parent>/<container id>`, in every hierarchy), so a parent made
here with `pids.max` (and the memory limit) set holds every step to them, whatever a step forks.
Podman (buildah) runs a step in the cgroup it is given, and removes it after the step, so it is
given a child of the parent (`BuildCgroup.parent`). cgroup v1 (a hierarchy per controller: the
parent is made in the pids and memory ones, the engine makes it in the others) and v2 (one
hierarchy; the controllers enabled for the root's children, as the engine does).

Once the build is over, the containers under the parent are made sure gone and any process left
in it is killed (Podman goes on running the step of a build whose connection closed); then the
parent is removed (a cgroup that holds a process or a child cannot be). One left behind is
removed by a later build once the process that made it has exited (`sweep`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import docker.errors
from docker import DockerClient

from endless_assets import processes
from endless_assets.sandbox.engine import podman
from endless_assets.sandbox.engine.provider import provider_for
from endless_assets.sandbox.image.build_limits import BuildLimits, ensure_gone

log = logging.getLogger(__name__)

CGROUP_ROOT = "/sys/fs/cgroup"
PREFIX = "endless-build"
REMOVE_SECONDS = 10.0  # how long a parent may still hold the processes of a removed container

_usable: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_guard = threading.Lock()
_leftovers: set[str] = set()  # parents of ours that could not be removed yet


@dataclass(frozen=True)
class Hierarchies:
    """Where this host's cgroups are mounted (only mounts of a hierarchy's root count)."""

    unified: bool  # cgroup v2: one hierarchy, at CGROUP_ROOT
    pids: str  # the mount point of the hierarchy with the pids controller
    memory: str
    mounts: tuple[str, ...]  # every cgroup mount: the engine makes the parent in each


def read_hierarchies(mountinfo: str = "/proc/self/mountinfo") -> Hierarchies | None:
    """This host's cgroup hierarchies; None without a pids and a memory controller."""
    mounts: list[str] = []
    pids = memory = ""
    unified = False
    with open(mountinfo, encoding="utf-8") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, kind = left.split(), right.split()
            if len(fields) < 5 or len(kind) < 3 or kind[0] not in ("cgroup", "cgroup2"):
                continue
            root, point = fields[3], fields[4].replace("\\040", " ")
            if root != "/":
                continue
            mounts.append(point)
            if kind[0] == "cgroup2" and point == CGROUP_ROOT:
                unified = True
                with open(os.path.join(point, "cgroup.controllers"), encoding="utf-8") as ctl:
                    controllers = ctl.read().split()
                pids = point if "pids" in controllers else pids
                memory = point if "memory" in controllers else memory
            elif kind[0] == "cgroup":
                options = kind[2].split(",")
                pids = point if "pids" in options else pids
                memory = point if "memory" in options else memory
    if not pids or not memory:
        return None
    return Hierarchies(unified, pids, memory, tuple(mounts))


def hierarchies_for(client: DockerClient) -> Hierarchies | None:
    """This host's hierarchies if builds on `client`'s engine can be given a cgroup parent here:
    we are root, the engine serves a unix socket from a process we can see, in our cgroup
    namespace, and names cgroups by path (cgroupfs, the cgroup version we see). Asked once per
    client; None otherwise (the build then has memory and CPU limits only)."""
    with _guard:
        if client in _usable:
            return _usable[client]
    found, why = _find(client)
    if found is None:
        log.warning("builds on %s get no process limit: %s", podman.describe(client), why)
    with _guard:
        _usable[client] = found
    return found


def _find(client: DockerClient) -> tuple[Hierarchies | None, str]:
    """This host's hierarchies, or None and why they cannot serve `client`'s builds."""
    if os.geteuid() != 0:
        return None, "only root can make a cgroup"
    pid = podman.engine_pid(client)
    try:
        ours = os.stat("/proc/self/ns/cgroup").st_ino
        if not pid or os.stat(f"/proc/{pid}/ns/cgroup").st_ino != ours:
            return None, "the engine is not a process of this host's cgroup namespace"
        found = read_hierarchies()
        info = client.info()
    except (OSError, docker.errors.DockerException) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if found is None:
        return None, "this host has no pids or no memory cgroup controller"
    if str(info.get("CgroupDriver")) != "cgroupfs":
        return None, f"the engine's cgroup driver is {info.get('CgroupDriver')}, not cgroupfs"
    if str(info.get("CgroupVersion") or "1") != ("2" if found.unified else "1"):
        return None, "the engine sees another cgroup version than this process"
    return found, ""


class BuildCgroup:
    """One build's cgroup parent: `pids.max` and the memory limit set where the engine will put
    the build's containers. Use `build_cgroup(...)`."""

    def __init__(self, hierarchies: Hierarchies, limits: BuildLimits, *, own_cgroup: bool) -> None:
        self.hierarchies = hierarchies
        self.limits = limits
        self.own_cgroup = own_cgroup  # each step runs in its own (Podman's buildah)
        self.name = f"{PREFIX}-{_namespace()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"

    @property
    def parent(self) -> str:
        """The cgroup parent to give the engine (an absolute cgroup path). Podman (buildah)
        runs each step in the cgroup it is given, not beneath it, and removes that cgroup after
        the step (the next step would then run in a new one, without our limits): it gets a
        child of ours."""
        return f"/{self.name}/step" if self.own_cgroup else f"/{self.name}"

    def _path(self, mount: str, *names: str) -> str:
        return os.path.join(mount, self.name, *names)

    def create(self) -> None:
        """Make the parent and set its limits; OSError (and nothing left behind) if the kernel
        refuses any of it."""
        h = self.hierarchies
        try:
            if h.unified:  # the controllers our parent needs, as the engine enables them
                _enable(h.pids, ("pids", "memory"))
            for mount in dict.fromkeys([h.pids, h.memory]):
                os.mkdir(self._path(mount))
            memory = str(self.limits.memory_bytes)
            _write(self._path(h.pids, "pids.max"), str(self.limits.pids))
            if h.unified:
                _write(self._path(h.memory, "memory.max"), memory)
                _write(self._path(h.memory, "memory.swap.max"), "0", optional=True)
            else:
                _write(self._path(h.memory, "memory.limit_in_bytes"), memory)
                _write(self._path(h.memory, "memory.memsw.limit_in_bytes"), memory, optional=True)
        except OSError:
            self.remove(None, wait=False)
            raise

    def reached(self) -> set[str]:
        """Which limits the build's processes reached: "pids", "memory" (as far as the kernel
        tells: a pids peak or event; an OOM kill, or a peak at the limit)."""
        h = self.hierarchies
        found: set[str] = set()
        pids_peak = _number(self._path(h.pids, "pids.peak"))
        if _keyed(self._path(h.pids, "pids.events")).get("max", 0) > 0 or (
            pids_peak is not None and pids_peak >= self.limits.pids
        ):
            found.add("pids")
        if h.unified:
            hit = _keyed(self._path(h.memory, "memory.events")).get("oom_kill", 0) > 0
        else:
            peak = _number(self._path(h.memory, "memory.max_usage_in_bytes"))
            limit = _number(self._path(h.memory, "memory.limit_in_bytes"))
            hit = peak is not None and limit is not None and peak >= limit
        if hit:
            found.add("memory")
        return found

    def containers(self) -> list[str]:
        """The ids of the containers still under the parent (Docker names each child so; a
        Podman build's steps are no containers of the engine's)."""
        if self.own_cgroup:
            return []
        with contextlib.suppress(OSError):
            top = self._path(self.hierarchies.pids)
            return [e.name for e in os.scandir(top) if e.is_dir()]
        return []

    def remove(self, client: DockerClient | None, *, wait: bool) -> bool:
        """Remove the parent from every hierarchy once the build is over: the containers under
        it removed if the engine has not yet, and any process still in it killed (Podman goes
        on running a step whose build was cancelled). False if some part is still busy
        (`wait`: for up to REMOVE_SECONDS in all): a later build's sweep removes it."""
        if client is not None:
            ensure_gone(client, self.containers())
            self.kill()
        give_up = time.monotonic() + (REMOVE_SECONDS if wait else 0.0)
        done = all([_remove_tree(self._path(m), give_up) for m in self.hierarchies.mounts])
        with _guard:
            if done:
                _leftovers.discard(self.name)
            else:
                _leftovers.add(self.name)
        return done

    def kill(self) -> None:
        """SIGKILL every process left under the parent, until none is (a process may fork as
        it is killed; the pids limit bounds how many it can). Only the build's own processes
        are ever there."""
        top = self._path(self.hierarchies.pids)
        if self.hierarchies.unified and os.path.exists(os.path.join(top, "cgroup.kill")):
            with contextlib.suppress(OSError):
                _write(os.path.join(top, "cgroup.kill"), "1")
            return
        for _ in range(100):
            pids = _processes(top)
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def build_cgroup(client: DockerClient, limits: BuildLimits) -> Iterator[BuildCgroup | None]:
    """A cgroup parent for one build on `client`'s engine, where one can be made (see
    `hierarchies_for`), else None; removed afterwards, with any container still under it."""
    found = hierarchies_for(client)
    if found is None:
        yield None
        return
    sweep(found)
    group = BuildCgroup(found, limits, own_cgroup=provider_for(client).build_steps_own_cgroup)
    try:
        group.create()
    except OSError as exc:
        log.warning("no cgroup parent for a build (%s): it runs without a pids limit", exc)
        yield None
        return
    try:
        yield group
    finally:
        group.remove(client, wait=True)


def sweep(hierarchies: Hierarchies) -> None:
    """Remove parents left behind by processes (of our pid namespace) that have exited, and
    those of this process that could not be removed before. Never waits, never kills."""
    namespace = f"{PREFIX}-{_namespace()}-"
    names: set[str] = set()
    for mount in hierarchies.mounts:  # (a parent may be gone from some hierarchies only)
        with contextlib.suppress(OSError):
            names.update(n for n in os.listdir(mount) if n.startswith(namespace))
    with _guard:
        retry = set(_leftovers)
    for name in names:
        owner = name[len(namespace) :].split("-")[0]
        if name in retry or (owner.isdigit() and not processes.running(int(owner))):
            now = time.monotonic()
            done = all([_remove_tree(os.path.join(m, name), now) for m in hierarchies.mounts])
            if done:
                with _guard:
                    _leftovers.discard(name)


def _processes(path: str) -> list[int]:
    """The processes in a cgroup and all of its children."""
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as fh:
            found += [int(line) for line in fh if line.strip().isdigit()]
        for entry in os.scandir(path):
            if entry.is_dir():
                found += _processes(entry.path)
    return found


def _remove_tree(path: str, give_up: float) -> bool:
    """rmdir a cgroup and its children; True once it is gone. A cgroup whose processes are
    still exiting is busy (EBUSY): tried again until `give_up` (time.monotonic())."""
    try:
        children = [e.path for e in os.scandir(path) if e.is_dir()]
    except FileNotFoundError:
        return True
    except OSError:
        return False
    done = all([_remove_tree(child, give_up) for child in children])
    pause = 0.01
    while done:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= give_up:
                break
            time.sleep(pause)  # the kernel frees an exited container's cgroup shortly after
            pause = min(pause * 2, 0.5)
    log.warning("cgroup %s not removed yet: a later build removes it", path)
    return False


def _enable(mount: str, controllers: tuple[str, ...]) -> None:
    """Enable `controllers` for the children of cgroup v2's root (where they are not yet)."""
    control = os.path.join(mount, "cgroup.subtree_control")
    with open(control, encoding="ascii") as fh:
        enabled = fh.read().split()
    missing = [f"+{c}" for c in controllers if c not in enabled]
    if missing:
        _write(control, " ".join(missing))


def _write(path: str, value: str, *, optional: bool = False) -> None:
    if optional and not os.path.exists(path):
        return  # swap accounting is off: there is no swap to limit
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


def _number(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _keyed(path: str) -> dict[str, int]:
    """A flat-keyed cgroup file ("max 3\\noom_kill 1")."""
    try:
        with open(path, encoding="ascii") as fh:
            pairs = [line.split() for line in fh]
    except OSError:
        return {}
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


def _namespace() -> int:
    """Our pid namespace (parents name the pid of their owner, which only means something in
    it)."""
    return os.stat("/proc/self/ns/pid").st_ino
