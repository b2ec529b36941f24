"""Task containers: no network, resource limits, no privilege, always removed afterwards."""

from __future__ import annotations

import functools
import io
import tarfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Protocol

import docker.errors
import docker.types
from docker import DockerClient
from docker.models.containers import Container

from endless_assets.sandbox import disk
from endless_assets.sandbox.client import TASK_KIND, SandboxError, base_labels
from endless_assets.sandbox.seccomp import SECURITY_OPT

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

    def __init__(self, container: Container, client: DockerClient, disk_layer: str = "") -> None:
        self.container = container
        self.client = client
        self.disk_layer = disk_layer  # where the disk budget's filesystem is mounted, if it is
        # The container's resident grader (verdict.py), once started; closed with the container.
        self.grader: Closeable | None = None

    @property
    def id(self) -> str:
        return self.container.id

    def exec_root(
        self,
        cmd: list[str],
        *,
        environment: dict[str, str] | None = None,
        workdir: str = "/",
        user: str = "root",
    ) -> ExecResult:
        """Run a trusted harness command (as root unless `user` says otherwise), clean env."""
        started = time.monotonic()
        env = {"PATH": ROOT_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
        env.update(environment or {})
        try:
            code, out = self.container.exec_run(
                cmd, user=user, environment=env, workdir=workdir, demux=False
            )
        except docker.errors.APIError as exc:
            raise SandboxError(f"docker exec failed in {self.container.short_id}: {exc}") from exc
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
        try:
            ok = self.container.put_archive(directory, buffer.getvalue())
        except docker.errors.APIError as exc:
            raise SandboxError(f"copying files into {directory} failed: {exc}") from exc
        if not ok:
            raise SandboxError(f"copying files into {directory} failed")

    def restart(self) -> None:
        """Kill every process in the container and start its PID 1 again; files stay."""
        if self.grader is not None:
            self.grader.close()
            self.grader = None
        try:
            self.container.restart(timeout=0)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"restarting container {self.container.short_id}: {exc}") from exc

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
            self.container.remove(force=True)
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
) -> Iterator[TaskContainer]:
    """Start a container of `image` (PID 1 sleeps; work happens through exec); always remove it."""
    name = f"endless-{uuid.uuid4().hex[:12]}"
    api = client.api
    try:
        host_config = api.create_host_config(
            init=True,
            network_mode="none",
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=limits.pids,
            cap_drop=["ALL"],
            cap_add=KEEP_CAPS,
            security_opt=["no-new-privileges", SECURITY_OPT],
            tmpfs=VERIFIER_TMPFS,
            privileged=False,
            log_config={"type": "none", "config": {}},
            ulimits=[
                docker.types.Ulimit(
                    name="fsize",
                    soft=limits.file_size_mb * 1024 * 1024,
                    hard=limits.file_size_mb * 1024 * 1024,
                )
            ],
        )
        create = functools.partial(
            api.create_container,
            image,
            command=["sleep", "infinity"],
            name=name,
            user="root",
            detach=True,
            labels=base_labels(kind=TASK_KIND, **(labels or {})),
            network_disabled=True,
        )
        created = create(host_config=host_config)
        layer = _limit_disk(client, created["Id"], limits.disk_bytes)
        if layer is None:  # the engine's own quota, where it has one
            api.remove_container(created["Id"], force=True)
            host_config["StorageOpt"] = {"size": str(limits.disk_bytes)}
            created = create(host_config=host_config)
        container = client.containers.prepare_model({"Id": created["Id"], "Name": name})
        api.start(created["Id"])
    except docker.errors.ImageNotFound as exc:
        _remove_by_name(client, name)
        raise SandboxError(f"image {image} not found: {exc}") from exc
    except docker.errors.APIError as exc:
        _remove_by_name(client, name)
        if "storage-opt" in str(exc).lower() or "storageopt" in str(exc).lower():
            raise SandboxError(
                f"the Docker engine cannot limit a container's disk ({exc.explanation}); "
                "run endless as root on the engine's host (overlay2), or set disk=0 "
                "(ENDLESS_DISK=0) to run without a disk budget"
            ) from exc
        raise SandboxError(f"starting a container of {image} failed: {exc}") from exc
    except OSError as exc:
        _remove_by_name(client, name)
        raise SandboxError(f"limiting the disk of a container of {image} failed: {exc}") from exc
    handle = TaskContainer(container, client, disk_layer=layer or "")
    try:
        yield handle
    finally:
        handle.remove()


def _limit_disk(client: DockerClient, container_id: str, size: int) -> str | None:
    """Mount the disk budget over the created container's layer; its path, "" without a budget,
    None when this engine's layer is out of our reach (then its storage_opt is the way)."""
    if not size:
        return ""
    layer = disk.layer_dir(client.api.inspect_container(container_id))
    if layer is None:
        return None
    disk.attach(layer, size)
    return layer


def _remove_by_name(client: DockerClient, name: str) -> None:
    with suppress(docker.errors.DockerException, OSError):
        found = client.containers.get(name)
        found.kill()
        found.wait(timeout=60)
    with suppress(docker.errors.DockerException, OSError):
        disk.release(disk.layer_dir(client.api.inspect_container(name)) or "")
        client.containers.get(name).remove(force=True)
