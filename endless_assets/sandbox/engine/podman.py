"""Which engine answers a client (Docker or Podman), and how Podman differs.

Podman serves Docker's API on its own socket (scripts/ensure-podman.sh). The engine's kind is
asked once per client (`engine_kind`) and chooses its provider (provider.py); `PodmanProvider`
says at each method how Podman differs. Elsewhere: Podman names local images
`localhost/<name>` (`short_name`), may unmount its whole overlay directory
(disk.check_attached), and names its cgroups differently (snapshot.container_cpu_seconds)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import resource
import socket
import struct
import tempfile
import threading
import weakref
from collections.abc import Callable

import docker
import docker.errors
import docker.types
import requests
from docker import DockerClient

from endless_assets.sandbox.engine.client import SandboxError, engine_failure, socket_path

DOCKER = "docker"
PODMAN = "podman"
LOCAL_DOCKER = "unix:///var/run/docker.sock"  # where a Docker engine on this host answers
# How Podman qualifies the names of local images: loaded or imported ones, and those its Docker
# API built (which it files under Docker Hub's library, as Docker would name them in full).
QUALIFIERS = ("localhost/", "docker.io/library/")
DOCKER_FORMAT = "application/vnd.docker.distribution.manifest.v2+json"  # Podman's default: OCI
# What rootful Podman gives a container by default (open files, processes of one uid).
PODMAN_RLIMITS = (
    ("nofile", resource.RLIMIT_NOFILE, 1048576),
    ("nproc", resource.RLIMIT_NPROC, 4194304),
)

# What each client's engine is, and whether it enforces the limits: asked once per client.
_kinds: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_limits: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def _once(cache: weakref.WeakKeyDictionary, client: DockerClient, ask: Callable[[], str]) -> str:
    """`ask()`, asked once per client."""
    with _guard:
        known = cache.get(client)
    if known is None:
        known = ask()
        with _guard:
            cache[client] = known
    return known


def engine_kind(client: DockerClient) -> str:
    """DOCKER or PODMAN: the engine `client` talks to. SandboxError if it does not answer."""

    def ask() -> str:
        with engine_failure("the engine does not say what it is"):
            version = client.version()
        names = [str(c.get("Name", "")) for c in version.get("Components") or []]
        return PODMAN if any(name.startswith("Podman") for name in names) else DOCKER

    return _once(_kinds, client, ask)


def check_limits(client: DockerClient) -> None:
    """Refuse (EngineUnsupported) an engine that says it cannot enforce a container's memory or
    process limit (rootless Podman on cgroup v1). Asked once per client."""

    def ask() -> str:
        with engine_failure("the engine does not describe itself"):
            info = client.info()
        missing = [k for k in ("MemoryLimit", "PidsLimit") if info.get(k) is False]
        if not missing:
            return ""
        rootless = any("rootless" in str(o) for o in info.get("SecurityOptions") or [])
        return (
            f"the engine ({engine_kind(client)}{', rootless' if rootless else ''}, cgroup "
            f"v{info.get('CgroupVersion', '?')}) cannot enforce containers' "
            f"{' and '.join(missing)}: task containers need them (rootless Podman needs "
            "cgroup v2 with the memory, pids and cpu controllers delegated to the user)"
        )

    if problem := _once(_limits, client, ask):
        raise EngineUnsupported(problem)


def short_name(tag: str) -> str:
    """An image tag as Docker lists it: without Podman's qualifier (QUALIFIERS)."""
    for prefix in QUALIFIERS:
        if tag.startswith(prefix):
            return tag[len(prefix) :]
    return tag


class EngineUnsupported(SandboxError):
    """What this engine cannot do for the sandbox, said in one sentence."""


def profile_file(profile_json: str) -> str:
    """A file holding `profile_json`, named by its hash, written once (atomically) into a
    directory only its owner can write (nobody can swap the profile under its name)."""
    digest = hashlib.sha256(profile_json.encode()).hexdigest()[:16]
    if os.geteuid() == 0:
        directory = "/run/endless"
    else:
        runtime = os.environ.get("XDG_RUNTIME_DIR") or os.path.expanduser("~/.cache")
        directory = os.path.join(runtime, "endless")
    os.makedirs(directory, mode=0o755, exist_ok=True)
    path = os.path.join(directory, f"seccomp-{digest}.json")
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == profile_json:
                return path
    except OSError:
        pass
    fd, staging = tempfile.mkstemp(dir=directory, prefix=".seccomp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(profile_json)
        os.chmod(staging, 0o644)
        os.replace(staging, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging)
    return path


def engine_pid(client: DockerClient) -> int:
    """The pid of the process serving the engine's unix socket (SO_PEERCRED); 0 if unknown."""
    path = socket_path(client)
    if not path:
        return 0
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return 0
    return struct.unpack("3i", creds)[0]


def local_docker() -> DockerClient | None:
    """A client of the Docker (not Podman) engine on this host: DOCKER_HOST's if a unix socket,
    else LOCAL_DOCKER's; None if no Docker engine answers there."""
    env = os.environ.get("DOCKER_HOST", "")
    for url in dict.fromkeys([env if env.startswith("unix://") else "", LOCAL_DOCKER]):
        if not url:
            continue
        try:
            client = DockerClient(base_url=url, timeout=300)
            client.ping()
            if engine_kind(client) == DOCKER:
                return client
        except (docker.errors.DockerException, OSError, SandboxError):
            continue
        client.close()
    return None


def has_image(client: DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def copy_image(source: DockerClient, target: DockerClient, tag: str) -> str:
    """Copy image `tag` from `source` to `target` (`docker save` streamed into its load API); its
    id there (the same). Raises docker.errors.DockerException or OSError."""
    stream = source.api.get_image(tag, chunk_size=1 << 20)
    reply = target.api.load_image(stream)
    for chunk in reply or []:
        if isinstance(chunk, dict) and chunk.get("error"):
            raise docker.errors.APIError(f"loading {tag}: {chunk['error']}")
    return target.images.get(tag).id


def describe(client: DockerClient) -> str:
    """A few words naming the engine, for messages ("podman 4.3.1")."""
    try:
        return f"{engine_kind(client)} {client.version().get('Version', '?')}"
    except (docker.errors.DockerException, OSError, SandboxError):
        return "an engine that does not answer"


class PodmanProvider:
    """Podman's side of provider.Provider (see the module's docstring)."""

    kind, remounts_read_only, build_steps_own_cgroup = PODMAN, True, True

    def __init__(self, client: DockerClient) -> None:
        self.client = client

    def seccomp_option(self, profile_json: str) -> str:
        """Podman's API reads `seccomp=<path>` as a file on the engine's host."""
        if not socket_path(self.client):
            raise EngineUnsupported(
                "Podman reads the seccomp profile from a file on its own host, and this Podman "
                "engine is not on this host (a unix socket): run endless on the engine's host"
            )
        return f"seccomp={profile_file(profile_json)}"

    def ulimits(self) -> list[docker.types.Ulimit]:
        """The engine's own hard limits (of the process behind its socket), at most Podman's
        defaults: rootful Podman raises every container's to those unless told otherwise, which
        fails where the engine's are lower ("error setting rlimit type 7"). (Limits.pids still caps
        a container's processes.)"""
        pid = engine_pid(self.client)
        found = []
        for name, which, default in PODMAN_RLIMITS:
            try:
                hard = resource.prlimit(pid, which)[1] if pid else resource.getrlimit(which)[1]
            except OSError:
                hard = resource.getrlimit(which)[1]
            if hard == resource.RLIM_INFINITY or hard > default:
                hard = default
            found.append(docker.types.Ulimit(name=name, soft=hard, hard=hard))
        return found

    def build(self, context, tag, timeout, params, network) -> requests.Response:
        """Through Podman's own build endpoint: its Docker API runs every RUN step in the host's
        network namespace whatever `networkmode` says (4.3); this one disables the network, or
        joins the namespace `network` names (a build gateway's, image/build_network.py). OCI
        isolation, Docker's image format, `ulimits`, and `params` (build_limits.py)."""
        _, namespace, build_args = network
        api = self.client.api
        rlimits = [f"{u['Name']}={u['Soft']}:{u['Hard']}" for u in self.ulimits()]
        query = {
            "t": tag,
            "dockerfile": json.dumps(["Dockerfile"]),
            "rm": "1",
            "forcerm": "1",
            "layers": "1",
            "isolation": "1",  # buildah's IsolationOCI
            "networkmode": "2" if namespace else "1",  # buildah's NetworkEnabled, NetworkDisabled
            "nsoptions": json.dumps([{"Name": "network", "Host": False, "Path": namespace}]),
            "outputformat": DOCKER_FORMAT,
            "ulimits": json.dumps(rlimits),
            **params,
        }
        if build_args:
            query["buildargs"] = json.dumps(build_args)
        return api._post(  # docker-py has no call for it; its own plumbing, as api.build does
            api._url("/libpod/build"),
            params=query,
            data=context,
            headers={"Content-Type": "application/x-tar"},
            stream=True,
            timeout=timeout,
        )

    def network_namespace(self, gateway: str) -> str:
        return f"/proc/{self.client.api.inspect_container(gateway)['State']['Pid']}/ns/net"

    def base_from_elsewhere(self, tag: str, progress: Callable[[str], None]) -> str:
        """Image `tag` copied from the Docker engine on this host, if it has it: its id; else ""."""
        source = local_docker()
        if source is None:
            return ""
        try:
            if not has_image(source, tag):
                return ""
            progress(f"base image: copying {tag} from Docker into {describe(self.client)}")
            return copy_image(source, self.client, tag)
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"copying the base image {tag} from Docker failed: {exc}") from exc
        finally:
            source.close()

    def tag_imported(self, reply: object, tag: str) -> None:
        """Podman's import API ignores the tag it is given: tag the id its reply names."""
        if has_image(self.client, tag):
            return
        found = re.findall(r"sha256:[0-9a-f]{64}", str(reply))
        if not found:
            raise docker.errors.APIError(f"the import named no image: {str(reply)[:300]}")
        repository, _, version = tag.rpartition(":")
        self.client.api.tag(found[-1], repository, version)
