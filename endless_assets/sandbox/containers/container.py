"""Task containers: no network, resource limits, no privilege, always removed afterwards."""

from __future__ import annotations

import functools
import io
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Protocol

import docker.errors
import docker.types
from docker import DockerClient
from docker.models.containers import Container

from endless_assets.sandbox.containers import changes, identity, pristine, read_only
from endless_assets.sandbox.containers.identity import DEFAULT, AgentIdentity
from endless_assets.sandbox.containers.seccomp import confined_host_config
from endless_assets.sandbox.containers.services import RESOLVER, ServiceSet
from endless_assets.sandbox.containers.startup import (
    COMMAND,
    AgentUnknown,
    ContainerExited,
    await_command,
    exited_by_itself,
    limit_disk,
    remove_by_name,
)
from endless_assets.sandbox.engine import disk, podman
from endless_assets.sandbox.engine.client import (
    TASK_KIND,
    ImageMissing,
    SandboxError,
    base_labels,
    engine_failure,
)
from endless_assets.sandbox.engine.provider import provider_for

ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Capabilities root keeps inside the container (for the grader and the harness's own commands):
# enough to read and chown files, signal processes and drop to the agent's uid, nothing that
# reaches the host or the network. The agent (uid 1000 under no-new-privileges) holds none.
KEEP_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"]
# The grader's scratch space: in memory (a full disk does not stop grading), searchable but not
# listable by anyone but root.
VERIFIER_TMPFS = {"/verifier": "rw,nosuid,nodev,noexec,size=256m,mode=0711"}


class Closeable(Protocol):
    def close(self) -> None: ...


@dataclass(frozen=True)
class Limits:
    memory: str = "1g"
    cpus: float = 1.0
    pids: int = 512
    # Total disk the container may write (disk.py), "0" for no budget; and a per-file size cap
    # for every process in it.
    disk: str = "2g"
    file_size_mb: int = 1024

    @property
    def disk_bytes(self) -> int:
        return disk.check_budget(self.disk)


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str
    seconds: float


class TaskContainer:
    """A running container of a task image. Use `task_container(...)` to get one."""

    def __init__(
        self,
        container: Container,
        client: DockerClient,
        disk_layer: str = "",
        agent: AgentIdentity = DEFAULT,
        image_env: dict[str, str] | None = None,
    ) -> None:
        self.container = container
        self.client = client
        self.disk_layer = disk_layer  # where the disk budget's filesystem is mounted, if it is
        # Held while grading here (grade.run_pytest): its sandbox's CPU slot (sandbox.CpuSlot).
        self.cpu_slot: AbstractContextManager = nullcontext()
        # The container's resident grader (verdict.py), once started; closed with the container.
        self.grader: Closeable | None = None
        # Who the agent is here (identity.py), and the image's own environment (its ENV lines:
        # the tests' environment at grading; nothing in the container can change it).
        self.agent = agent
        self.image_env = dict(image_env or {})
        # What grading runs and loads, as the first grader described it before any agent
        # command (verifier.py refuses to grade a root agent that changed any of it).
        self.grading_programs: dict[str, str] = {}
        self.protected: list[str] | None = None
        # The first grader's interpreter: its prefixes and sys.path (a later one must match).
        self.interpreter: list[str] | None = None
        # The system locations the first grader named (grader_describe.py): what a root agent
        # must leave as the task's reference solution does, read-only in its verifier; and
        # which of the loader's files the image lacks.
        self.system: list[str] = []
        self.absent: list[str] = []
        self.read_only: list[str] = []  # what the engine was asked to make read-only here
        # What the engine itself had changed in the container's files when it started, before
        # any command (changes.change_key of each): not the agent's doing (Podman
        # touches /etc, Docker adds its init); verifier.tampering leaves them out.
        self.engine_changes: set[tuple] = set()
        # Its overlay upper directory when this process can read it (changes.py): what changed
        # is then read there instead of asked of the engine (`docker diff`).
        self.upper_dir = ""
        self.lower_dirs: list[str] = []  # (and the image's layers under it: pristine.py)
        self.homes: list[str] = []  # root's home (the first grader's), whose dot-entries are
        # configuration (system_paths.is_config)
        self.fenced = False  # the first grader's kernel fences tests off (grader_fence.py)
        self.volumes: list[tuple[str, str, bool]] = []  # (name, destination, writable)
        self.limits = Limits()
        self.halted = False  # stopped by `halt`: started again before anything runs in it
        self.network = ""  # the episode's network with its services (services.py), if any
        self.services: ServiceSet | None = None

    @property
    def id(self) -> str:
        return self.container.id

    def exec_root(
        self,
        cmd: list[str],
        *,
        environment: dict[str, str] | None = None,
        workdir: str = "/",
        user: str = "0",
    ) -> ExecResult:
        """Run a trusted harness command (as root unless `user` says otherwise: a uid, never a
        name, which the engine would look up in the container's /etc/passwd), clean env."""
        self.awake()
        started = time.monotonic()
        env = {"PATH": ROOT_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
        env.update(environment or {})
        with engine_failure(f"docker exec failed in {self.container.short_id}"):
            code, out = self.container.exec_run(
                cmd, user=user, environment=env, workdir=workdir, demux=False
            )
        text = (out or b"").decode("utf-8", errors="replace")
        return ExecResult(int(code if code is not None else -1), text, time.monotonic() - started)

    def put_files(
        self,
        directory: str,
        files: dict[str, str | bytes],
        *,
        uid: int = 0,
        gid: int = 0,
        mode: int = 0o644,
        dir_mode: int = 0o755,
    ) -> None:
        """Copy files into `directory` (which must exist) with the given owner and mode."""
        buffer = io.BytesIO()
        now = int(time.time())
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            made: set[str] = set()
            for name, content in files.items():
                data = content.encode() if isinstance(content, str) else content
                parts = name.split("/")
                for depth in range(1, len(parts)):
                    sub = "/".join(parts[:depth])
                    if sub not in made:
                        made.add(sub)
                        dinfo = tarfile.TarInfo(sub)
                        dinfo.type = tarfile.DIRTYPE
                        dinfo.mode = dir_mode
                        dinfo.uid, dinfo.gid, dinfo.mtime = uid, gid, now
                        tar.addfile(dinfo)
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = mode
                info.uid, info.gid, info.mtime = uid, gid, now
                tar.addfile(info, io.BytesIO(data))
        buffer.seek(0)
        with engine_failure(f"copying files into {directory} failed"):
            ok = self.container.put_archive(directory, buffer.getvalue())
        if not ok:
            raise SandboxError(f"copying files into {directory} failed")

    def restart(self) -> None:
        """Kill every process in the container and start its PID 1 again; files stay."""
        if self.grader is not None:
            self.grader.close()
            self.grader = None
        with engine_failure(f"restarting container {self.container.short_id}"):
            self.container.restart(timeout=0)
            if self.disk_layer:  # its overlay was mounted again, through the budget's filesystem
                disk.check_attached(self.disk_layer)
        self.halted = False

    def awake(self) -> None:
        """Start a halted container's PID 1 again; nothing if it was not halted. Whatever runs
        something in the container (a command, a shell, a grader) calls this first."""
        if self.halted:
            self.restart()

    def halt(self) -> None:
        """Kill every process in the container; it stays stopped (files and volumes stay) until
        something is to run in it (`awake`): a container removed next never starts again."""
        if self.grader is not None:
            self.grader.close()
            self.grader = None
        with engine_failure(f"stopping container {self.container.short_id}"):
            with suppress(docker.errors.APIError):  # (not running already)
                self.container.kill()
            self.container.wait(timeout=60)
        self.halted = True

    def raise_if_exited(self) -> None:
        """Raise ContainerExited if the container stopped by itself (see that class); nothing if
        it runs, was stopped by a signal (the engine, a restart, us), or cannot be asked."""
        try:
            attrs = self.client.api.inspect_container(self.id)
        except (docker.errors.DockerException, OSError):
            return
        reason = exited_by_itself(attrs)
        if reason:
            raise ContainerExited(reason)

    def running(self) -> bool:
        try:
            self.container.reload()
        except docker.errors.DockerException:
            return False
        return self.container.status == "running"

    def remove(self) -> None:
        if self.grader is not None:
            self.grader.close()
        try:
            if self.disk_layer:  # stopped, so that the budget's filesystem can be unmounted
                with suppress(docker.errors.APIError):
                    self.container.kill()
                self.container.wait(timeout=60)
                disk.release(self.disk_layer)
            # v: with the anonymous volumes of the image's VOLUME lines.
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except (docker.errors.DockerException, OSError) as exc:
            if "already in progress" not in str(exc):
                raise SandboxError(f"removing container {self.container.short_id}: {exc}") from exc


@contextmanager
def task_container(
    client: DockerClient,
    image: str,
    *,
    limits: Limits = Limits(),
    labels: dict[str, str] | None = None,
    verifier_of: TaskContainer | None = None,
    command: list[str] | None = None,
    read_only_paths: list[str] | None = None,
    shared_volumes: list[str] | None = None,
    prepare: Callable[[str], None] | None = None,
    network: str = "",
) -> Iterator[TaskContainer]:
    """Start a container of `image` (PID 1 sleeps; work happens through exec); always remove it.

    `verifier_of`: a verifier for that (agent's) container, from a snapshot of it (verifier.py):
    no ENTRYPOINT runs, that container's volumes are mounted (`shared_volumes`: only these,
    "name:destination"), its agent and environment hold; `read_only_paths` are read-only in it
    (read_only.py); `prepare` gets its overlay upper directory before it starts (pristine.py).
    `network`: the episode's network of its services (services.py); else none at all."""
    name = f"endless-{uuid.uuid4().hex[:12]}"
    api = client.api
    extra: dict = {}
    engine_changes: list[dict] | None = None
    upper, lowers = "", []
    if verifier_of is not None:
        extra = read_only.volumes(verifier_of.id, shared_volumes)
    try:
        podman.check_limits(client)
        engine = provider_for(client)
        host_config = confined_host_config(
            client,
            limits,
            caps=KEEP_CAPS,
            network_mode=network or "none",
            **({"dns": RESOLVER} if network else {}),
            tmpfs=VERIFIER_TMPFS,
            log_config={"type": "none", "config": {}},
            ulimits=[
                docker.types.Ulimit(
                    name="fsize",
                    soft=limits.file_size_mb * 1024 * 1024,
                    hard=limits.file_size_mb * 1024 * 1024,
                ),
                *engine.ulimits(),
            ],
            **extra,
        )
        if verifier_of is not None and read_only_paths is not None:
            local = bool(verifier_of.upper_dir)
            read_only.apply(host_config, read_only_paths, verifier_of.absent, local)
        create = functools.partial(
            api.create_container,
            image,
            command=command or COMMAND,
            name=name,
            user="0",  # (a name would be looked up in the container's own /etc/passwd)
            detach=True,
            labels=base_labels(kind=TASK_KIND, **(labels or {})),
            network_disabled=not network,
            **({"entrypoint": [""]} if verifier_of is not None else {}),
        )
        created = create(host_config=host_config)
        layer = limit_disk(client, created["Id"], limits.disk_bytes)
        if layer is None:  # the engine's own quota, where it has one
            api.remove_container(created["Id"], force=True, v=True)
            host_config["StorageOpt"] = {"size": str(limits.disk_bytes)}
            created = create(host_config=host_config)
        container = client.containers.prepare_model({"Id": created["Id"], "Name": name})
        if prepare is not None:
            prepare(disk.upper_dir(api.inspect_container(created["Id"])))
        api.start(created["Id"])
        if layer:
            disk.check_attached(layer)
        attrs = await_command(client, created["Id"])
        if read_only_paths and engine.remounts_read_only:
            read_only.remount(int((attrs.get("State") or {}).get("Pid") or 0), read_only_paths)
        if verifier_of is None:
            agent = _identity(client, created["Id"], attrs)
            image_env = identity.image_environment(attrs)
            # A verifier's check of the agent's changes (verifier.py) leaves these out: a root
            # agent's, and an imported task's, whose own script may grade it there.
            if agent.is_root or not agent.ours:
                upper = disk.upper_dir(attrs)
                engine_changes = changes.engine_changes(client, created["Id"], attrs, upper)
                lowers = pristine.lower_dirs(attrs) if upper else []
        else:
            agent, image_env = verifier_of.agent, verifier_of.image_env
    except SandboxError:  # it stopped at start (ContainerExited: by itself)
        remove_by_name(client, name)
        raise
    except docker.errors.ImageNotFound as exc:
        remove_by_name(client, name)
        raise ImageMissing(f"image {image} not found: {exc}") from exc
    except docker.errors.APIError as exc:
        remove_by_name(client, name)
        if "storage-opt" in str(exc).lower() or "storageopt" in str(exc).lower():
            raise SandboxError(
                f"the engine ({podman.describe(client)}) cannot limit a container's disk "
                f"({exc.explanation}); run endless as root on the engine's host (Docker's "
                "overlay2 or rootful Podman's overlay), or set disk=0 (ENDLESS_DISK=0) to run "
                "without a disk budget"
            ) from exc
        raise SandboxError(f"starting a container of {image} failed: {exc}") from exc
    except (docker.errors.DockerException, OSError) as exc:
        # The engine's connection broke (requests' errors are OSErrors), or the disk budget's
        # mount failed.
        remove_by_name(client, name)
        raise SandboxError(f"starting a container of {image} failed: {exc}") from exc
    handle = TaskContainer(container, client, layer or "", agent, image_env)
    handle.limits = limits
    handle.upper_dir, handle.lower_dirs = upper, lowers
    mounts = [m for m in attrs.get("Mounts") or [] if m.get("Type") == "volume"]
    handle.volumes = [(m["Name"], m["Destination"], bool(m.get("RW", True))) for m in mounts]
    handle.read_only = list(read_only_paths or [])
    handle.network = network
    if verifier_of is None:
        handle.engine_changes = {changes.change_key(c) for c in engine_changes or []}
    try:
        yield handle
    finally:
        handle.remove()


def _identity(client: DockerClient, container_id: str, attrs: dict) -> AgentIdentity:
    try:
        return identity.resolve(client, container_id, attrs)
    except ValueError as exc:
        raise AgentUnknown(str(exc)) from exc
