"""A build's network: the package registries through a proxy of ours, never this host's
services nor another container.

A build with a network runs its RUN steps in the network namespace of a gateway container of
its own (the build API's `networkmode=container:<id>`; Podman's: the namespace's path). The
gateway has no network but loopback: it listens on 127.0.0.1:PORT and hands every connection
to a unix socket of a relay in this process (build_relay.py), bind-mounted into it; the relay is
an HTTP(S) proxy that connects only where a build may go. RUN steps get the standard proxy
variables (`http_proxy`, `https_proxy`, ..., Docker's predefined build arguments: they are not
kept in the image), so apt, pip, uv, npm, curl, wget and git reach the registries; a program
that ignores them, or a raw socket to any address, reaches nothing (there is no route and no
DNS server). A build step cannot reach a service on this host's loopback or its other
addresses, another machine of its LAN, nor a container of the engine (no task container has a
network anyway).

The gateway runs our base image's python3 as this process's uid, read-only, without
capabilities; it holds a lifeline to the relay and exits when it closes (when the build ends,
or this process dies: the engine then removes it, `auto_remove`). Where the engine cannot see
the relay's socket (a remote engine, or one in another mount namespace: a run worker in a
container without the runtime directory shared with the engine's host), the gateway cannot
connect and the build gets no network (a warning says so once per engine).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import docker.errors
from docker import DockerClient

from endless_assets import processes
from endless_assets.sandbox.engine import podman
from endless_assets.sandbox.engine.client import base_labels
from endless_assets.sandbox.engine.provider import provider_for
from endless_assets.sandbox.image.build_relay import Policy, Relay, engine_networks

log = logging.getLogger(__name__)

PORT = 3128
READY_SECONDS = 60.0  # for the gateway to start and hold its lifeline
REMOVE_SECONDS = 60.0  # for the engine to finish removing a gateway that exited
PROXY = f"http://127.0.0.1:{PORT}"
PROXY_ARGS = {
    name: PROXY
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
} | {"no_proxy": "", "NO_PROXY": ""}

# The gateway's program (the base image's python3, isolated mode): the loopback port to the
# relay's unix socket, until the relay closes the lifeline.
GATEWAY = rf"""
import os, socket, sys, threading
relay, alive = (os.path.join(sys.argv[1], n + ".sock") for n in ("relay", "alive"))
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", {PORT}))
server.listen(64)
life = socket.socket(socket.AF_UNIX)
life.connect(alive)
def watch():
    while life.recv(1):
        pass
    os._exit(0)
def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(conn):
    up = socket.socket(socket.AF_UNIX)
    try:
        up.connect(relay)
        back = threading.Thread(target=pump, args=(up, conn), daemon=True)
        back.start()
        pump(conn, up)
        back.join()
    except (OSError, RuntimeError):
        pass
    conn.close()
    up.close()
threading.Thread(target=watch, daemon=True).start()
while True:
    conn, _ = server.accept()
    try:
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
    except RuntimeError:
        conn.close()
"""


@dataclass(frozen=True)
class BuildNetwork:
    """What a build's request says about its network: Docker's `networkmode`, or for Podman
    the path of the namespace to join; the proxy variables for its RUN steps."""

    mode: str
    namespace: str
    build_args: dict[str, str]
    relay: Relay


class GatewayFault(Exception):
    """The engine broke while a build's gateway started (not the build's fault: tried again)."""


_warned: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def runtime_dir() -> str:
    """Where relays' sockets live: a directory of this host the engine's host shares."""
    if os.geteuid() == 0:
        return "/run/endless/build-relay"
    runtime = os.environ.get("XDG_RUNTIME_DIR") or os.path.expanduser("~/.cache")
    return os.path.join(runtime, "endless", "build-relay")


@contextlib.contextmanager
def build_network(
    client: DockerClient, image: str, allow: tuple[str, ...] = ()
) -> Iterator[BuildNetwork | None]:
    """A network for one build, from a gateway of `image` (one with python3: our base image);
    None where the engine cannot run the gateway against this process's relay (said once).
    `allow`: `host:port` it may reach although they are this host's or its LAN's (a mirror)."""
    base = runtime_dir()
    os.makedirs(base, mode=0o755, exist_ok=True)
    _sweep(base)
    # (mode 700: ours and the gateway's, which runs as our uid)
    directory = tempfile.mkdtemp(prefix=f"{os.getpid()}-{_pid_namespace()}-", dir=base)
    relay = None
    started: list[str] = []  # the gateway's id, once created
    try:
        relay = Relay(directory, Policy(engine_networks(_subnets(client)), frozenset(allow)))
        why = _start_gateway(client, image, directory, relay, started)
        if why:
            _warn(client, why)
            yield None
            return
        gateway = started[0]
        namespace = provider_for(client).network_namespace(gateway)
        yield BuildNetwork(f"container:{gateway}", namespace, dict(PROXY_ARGS), relay)
    finally:
        if relay is not None:
            relay.close()  # the lifeline with it: the gateway exits, the engine removes it
        for gateway in started:
            _remove(client, gateway)
        shutil.rmtree(directory, ignore_errors=True)


def _start_gateway(
    client: DockerClient, image: str, directory: str, relay: Relay, started: list[str]
) -> str:
    """Start the gateway (its id into `started` once created): "" once it holds its lifeline,
    else why it cannot (the engine refused it, or it cannot reach the relay). Raises
    GatewayFault where the connection to the engine broke."""
    api = client.api
    host_config = api.create_host_config(
        network_mode="none",
        binds={directory: {"bind": "/relay", "mode": "rw"}},
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="128m",
        pids_limit=200,
        auto_remove=True,
        log_config={"type": "none", "config": {}},
        ulimits=provider_for(client).ulimits(),
    )
    try:
        created = api.create_container(
            image,
            command=["python3", "-I", "-c", GATEWAY, "/relay"],
            user=f"{os.getuid()}:{os.getgid()}",
            labels=base_labels(role="build-gateway"),
            network_disabled=True,
            host_config=host_config,
        )
        started.append(created["Id"])
        api.start(created["Id"])
    except docker.errors.APIError as exc:
        return f"its gateway container did not start: {exc}"
    except (docker.errors.DockerException, OSError) as exc:
        raise GatewayFault(f"the engine broke while a build gateway started: {exc}") from exc
    deadline = time.monotonic() + READY_SECONDS
    while not relay.ready.wait(0.2):
        try:
            running = api.inspect_container(started[0])["State"]["Running"]
        except docker.errors.NotFound:
            running = False
        except (docker.errors.DockerException, OSError) as exc:
            raise GatewayFault(f"the engine broke while a build gateway started: {exc}") from exc
        if not running or time.monotonic() > deadline:
            return (
                "its gateway container could not reach this process's relay socket "
                f"under {runtime_dir()} (the engine does not share this host's files with "
                "this process)"
            )
    return ""


def _remove(client: DockerClient, cid: str) -> None:
    """The gateway gone: removed here, or (exiting already, its lifeline closed) removed by the
    engine, which may refuse a removal meanwhile (Docker: 409, Podman: 500 "state improper").
    An engine that does not answer is left to remove it (its `auto_remove`)."""
    deadline = time.monotonic() + REMOVE_SECONDS
    while True:
        try:
            client.api.remove_container(cid, force=True)
            return
        except docker.errors.NotFound:
            return
        except (docker.errors.DockerException, OSError) as exc:
            if not isinstance(exc, docker.errors.APIError) or time.monotonic() > deadline:
                log.warning("build gateway %s not removed: %s", cid[:12], exc)
                return
        time.sleep(0.2)


def _sweep(base: str) -> None:
    """Remove the relay directories of processes that are gone (killed mid-build); only those of
    this process's PID namespace, where a process id means the same process (a run worker in a
    container may share the directory)."""
    ours = _pid_namespace()
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            pid, namespace, _ = [*name.split("-", 2), "", ""][:3]
            if pid.isdigit() and namespace == ours and not processes.running(int(pid)):
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _subnets(client: DockerClient) -> list[str]:
    """The subnets of the engine's networks (where its containers have addresses)."""
    found = []
    with contextlib.suppress(docker.errors.DockerException, OSError):
        for network in client.api.networks():
            for config in (network.get("IPAM") or {}).get("Config") or []:
                if config.get("Subnet"):
                    found.append(config["Subnet"])
    return found


def _warn(client: DockerClient, why: str) -> None:
    with _guard:
        if client in _warned:
            return
        _warned[client] = True
    log.warning("builds on %s get no network: %s", podman.describe(client), why)
