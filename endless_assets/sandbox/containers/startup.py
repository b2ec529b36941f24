"""How a started task container is judged: running its command (PID 1 sleeps, work happens
through exec), or stopped, by itself (the task's fault) or by something else (the engine's)."""

from __future__ import annotations

import json
import time
from contextlib import suppress

import docker.errors
from docker import DockerClient

from endless_assets.sandbox.engine import disk
from endless_assets.sandbox.engine.client import SandboxError

# PID 1 (under the engine's init) of every task container: it sleeps, the work happens through
# exec.
COMMAND = ["sleep", "infinity"]
# How long an image's ENTRYPOINT may take before it runs COMMAND (or shows it runs something
# else for good, e.g. a service).
START_SECONDS = 10.0


class ContainerExited(SandboxError):
    """The container stopped by itself: its image's ENTRYPOINT (or CMD) exits instead of running
    the command it is given. The task's fault, not the engine's: the build stage rejects the task
    (`container_failed`); later stages, which never see such an image, call it a harness error."""


class AgentUnknown(ContainerExited):
    """The task names an agent user (or group) its image does not have: the task's fault."""


def await_command(client: DockerClient, container_id: str) -> dict:
    """Return (its inspection) once the started container runs COMMAND; ContainerExited if it
    stopped by itself.

    Without an ENTRYPOINT, the engine's init runs COMMAND itself: one look suffices. With one, the
    entrypoint gets COMMAND as its arguments: wait until COMMAND runs (`exec "$@"`, the usual
    ending of an entrypoint script), or the container stops (e.g. `ENTRYPOINT ["/bin/false"]`),
    or START_SECONDS pass with it running (an entrypoint that runs a service instead)."""
    api = client.api
    attrs = api.inspect_container(container_id)
    _raise_if_stopped(attrs)
    if not (attrs.get("Config") or {}).get("Entrypoint"):
        return attrs
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            top = api.top(container_id)
        except (docker.errors.APIError, ValueError):  # (Podman's reply is not JSON then)
            top = {}  # it stopped meanwhile: the inspect below says how
        if " ".join(COMMAND) in commands(top):
            return attrs
        _raise_if_stopped(api.inspect_container(container_id))
        time.sleep(0.05)
    return attrs


def commands(top: dict) -> list[str]:
    """The command lines of a `top` reply: Docker's (a column per field) or Podman's (one
    string per process, and one for the titles)."""
    titles = top.get("Titles") or []
    rows = top.get("Processes") or []
    if len(titles) == 1:  # Podman: ps's own lines, the command last
        fields = len(titles[0].split())
        return [" ".join(row).split(None, fields - 1)[-1] for row in rows if row]
    column = titles.index("CMD") if "CMD" in titles else -1
    return [row[column] for row in rows if row]


def _raise_if_stopped(attrs: dict) -> None:
    state = attrs.get("State") or {}
    if state.get("Running"):
        return
    reason = exited_by_itself(attrs)
    if reason:
        raise ContainerExited(reason)
    raise SandboxError(
        f"the container stopped at start ({state.get('Status')}, exit code "
        f"{state.get('ExitCode')}, {state.get('Error') or 'no error'})"
    )


def exited_by_itself(attrs: dict) -> str:
    """Why the container stopped, if its own process ended (an exit code below 128); "" if it
    runs, or a signal or the OOM killer stopped it (the engine going down, a restart, us)."""
    state = attrs.get("State") or {}
    code = state.get("ExitCode")
    # ("stopped": Podman's word for a container whose process ended, until its cleanup ran)
    if state.get("Running") or state.get("Status") not in ("exited", "dead", "stopped"):
        return ""
    if state.get("OOMKilled") or not isinstance(code, int) or not 0 <= code < 128:
        return ""
    config = attrs.get("Config") or {}
    entrypoint, cmd = config.get("Entrypoint"), config.get("Cmd") or COMMAND
    if entrypoint:
        return (
            f"the container exits at start (exit code {code}): its ENTRYPOINT "
            f"{json.dumps(entrypoint)} does not run the command it is given "
            f'({" ".join(cmd)}); remove the ENTRYPOINT, or end it with exec "$@"'
        )
    return (
        f"the container exits at start (exit code {code}): its command ({' '.join(cmd)}) "
        "does not keep running (does the image have `sleep`?)"
    )


def limit_disk(client: DockerClient, container_id: str, size: int) -> str | None:
    """Mount the disk budget over the created container's layer; its path, "" without a budget,
    None when this engine's layer is out of our reach (then its storage_opt is the way)."""
    if not size:
        return ""
    layer = disk.layer_dir(client.api.inspect_container(container_id))
    if layer is None:
        return None
    disk.attach(layer, size)
    return layer


def remove_by_name(client: DockerClient, name: str) -> None:
    with suppress(docker.errors.DockerException, OSError):
        found = client.containers.get(name)
        found.kill()
        found.wait(timeout=60)
    with suppress(docker.errors.DockerException, OSError):
        disk.release(disk.layer_dir(client.api.inspect_container(name)) or "")
        client.containers.get(name).remove(force=True, v=True)
