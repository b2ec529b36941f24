"""Task containers: no network, resource limits, no privilege, always removed afterwards."""

from __future__ import annotations

import io
import tarfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import docker.errors
import docker.types
from docker import DockerClient
from docker.models.containers import Container

from endless_assets.sandbox.client import TASK_KIND, SandboxError, base_labels

ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Capabilities root keeps inside the container (for the grader): enough to read and chown files
# and signal processes, nothing that reaches the host or the network.
KEEP_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"]


@dataclass(frozen=True)
class Limits:
    memory: str = "1g"
    cpus: float = 1.0
    pids: int = 512
    # overlay2 on ext4 has no disk quota, so a runaway `yes > f` could fill the host's disk
    # within one command timeout; every process in the container gets this per-file size cap.
    file_size_mb: int = 1024


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str
    seconds: float


class TaskContainer:
    """A running container of a task image. Use `task_container(...)` to get one."""

    def __init__(self, container: Container, client: DockerClient) -> None:
        self.container = container
        self.client = client

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

    def remove(self) -> None:
        grader = getattr(self, "_grader", None)
        if grader is not None:
            grader.close()
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
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
            security_opt=["no-new-privileges"],
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
        created = api.create_container(
            image,
            command=["sleep", "infinity"],
            name=name,
            user="root",
            detach=True,
            labels=base_labels(kind=TASK_KIND, **(labels or {})),
            host_config=host_config,
            network_disabled=True,
        )
        container = client.containers.prepare_model({"Id": created["Id"], "Name": name})
        api.start(created["Id"])
    except docker.errors.ImageNotFound as exc:
        _remove_by_name(client, name)
        raise SandboxError(f"image {image} not found: {exc}") from exc
    except docker.errors.APIError as exc:
        _remove_by_name(client, name)
        raise SandboxError(f"starting a container of {image} failed: {exc}") from exc
    handle = TaskContainer(container, client)
    try:
        yield handle
    finally:
        handle.remove()


def _remove_by_name(client: DockerClient, name: str) -> None:
    with suppress(docker.errors.DockerException):
        client.containers.get(name).remove(force=True)
