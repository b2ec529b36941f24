"""Who the agent is in a task container: its user, uid, gid, home and starting directory.

Our own tasks run the agent as `user` (uid 1000) in /home/user. An imported task runs it the way
Harbor and Terminal-Bench do: as its task.toml's `[agent] user`, else the image's USER (root when
the image sets none), in the image's WORKDIR. The agent, the oracle and the do-nothing control
all run as that identity, so relative paths in reference solutions work.

The identity travels with the image, so that every stage that rebuilds a task from its
Dockerfile finds it: the build stage appends two labels to the Dockerfile it builds when the task's
identity is not ours (`identity_dockerfile`); a container reads them when it starts (`resolve`).
An image without them is one of our own tasks' (the default identity). Labels are part of the
image's configuration, which nothing inside a container can change.

A labelled image's identity is read in the first container of it on each engine and kept for
the next (per engine and image id): reading /etc/passwd and /etc/group through the engine costs
two of its archive helpers, ~0.1 CPU-s, at every container otherwise.
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass, field

import docker.errors

from endless_assets.models import AGENT_HOME, AGENT_USER
from endless_assets.sandbox.engine.client import engine_address

USER_LABEL = "endless.agent.user"
WORKDIR_LABEL = "endless.agent.workdir"
_TRAILER = "# endless: the agent's user and working directory (\"\": the image's own)"
MAX_PASSWD_BYTES = 4 * 1024 * 1024
_RESOLVED: dict[tuple[str, str], AgentIdentity] = {}
_RESOLVED_KEPT = 4096


@dataclass(frozen=True)
class AgentIdentity:
    user: str  # what `docker exec --user` gets: a name, a uid, or uid:gid
    uid: int
    gid: int
    home: str
    workdir: str
    name: str = ""  # the user's name ("" for a uid without a passwd entry)
    ours: bool = True  # our own tasks' identity (no labels on the image)
    image_user: str = ""  # the image's own USER ("" when it sets none)
    # The image's /etc/passwd and /etc/group as the first container of it had them, before any
    # agent command: names are looked up there, never in files an agent may have edited.
    passwd: str = field(default="", repr=False, compare=False)
    group: str = field(default="", repr=False, compare=False)

    @property
    def is_root(self) -> bool:
        return self.uid == 0

    @property
    def exec_user(self) -> str:
        """What every `docker exec` and container of this agent gets: numbers, never a name the
        engine would look up in the container's /etc/passwd (which a root agent may rename or
        delete). A uid alone keeps the user's supplementary groups; uid:gid where the task
        named a group."""
        return f"{self.uid}:{self.gid}" if ":" in self.user else str(self.uid)

    def lookup(self, user: str) -> tuple[int, int, str]:
        """uid, gid and home of a Docker user spec, from the image's own files (`passwd`);
        root needs none. ValueError if the image has no such user."""
        if user in ("", "root", "0", "0:0"):
            entry = next(
                (e for e in (ln.split(":") for ln in self.passwd.splitlines()) if e[2:3] == ["0"]),
                None,
            )
            home = entry[5] if entry is not None and len(entry) > 5 and entry[5] else "/root"
            return 0, 0, home
        uid, gid, home, _ = _lookup(user, self.passwd, self.group)
        return uid, gid, home


DEFAULT = AgentIdentity(AGENT_USER, 1000, 1000, AGENT_HOME, AGENT_HOME, AGENT_USER, ours=True)


def is_default(agent_user: str, workdir: str) -> bool:
    return (agent_user, workdir) == (AGENT_USER, AGENT_HOME)


def strip_identity(dockerfile: str) -> str:
    """The Dockerfile without the identity trailer `identity_dockerfile` appended (unchanged if
    it has none)."""
    at = dockerfile.rfind("\n" + _TRAILER + "\n")
    if at < 0:
        return dockerfile
    return dockerfile[: at + 1]


def identity_dockerfile(dockerfile: str, agent_user: str, workdir: str) -> str:
    """The Dockerfile the build stage builds: the task's own, plus the identity labels when the
    task's agent is not ours (the same text for the same task, so images stay cached)."""
    base = strip_identity(dockerfile)
    if is_default(agent_user, workdir):
        return base
    if not base.endswith("\n"):
        base += "\n"
    return (
        f"{base}{_TRAILER}\n"
        f"LABEL {USER_LABEL}={json.dumps(agent_user)} {WORKDIR_LABEL}={json.dumps(workdir)}\n"
    )


def identity_of_dockerfile(dockerfile: str) -> tuple[str, str] | None:
    """(agent user, workdir) named by a Dockerfile's identity trailer, None without one."""
    at = dockerfile.rfind("\n" + _TRAILER + "\n")
    if at < 0:
        return None
    line = dockerfile[at + len(_TRAILER) + 2 :].strip()
    found: dict[str, str] = {}
    for key in (USER_LABEL, WORKDIR_LABEL):
        start = line.find(key + "=")
        if start < 0:
            return None
        decoder = json.JSONDecoder()
        value, _ = decoder.raw_decode(line[start + len(key) + 1 :])
        found[key] = str(value)
    return found[USER_LABEL], found[WORKDIR_LABEL]


def resolve(client, container_id: str, attrs: dict | None = None) -> AgentIdentity:
    """The identity of the agent in a started container, from its image's labels and config;
    DEFAULT without labels. Reads /etc/passwd and /etc/group from the container (no process is
    started), before any agent command ran, in the first container of its image on its engine;
    the next ones get what that one read."""
    attrs = attrs or client.api.inspect_container(container_id)
    config = attrs.get("Config") or {}
    labels = config.get("Labels") or {}
    if USER_LABEL not in labels and WORKDIR_LABEL not in labels:
        return DEFAULT
    key = (engine_address(client), str(attrs.get("Image") or ""))
    known = _RESOLVED.get(key) if key[1] else None
    if known is None:
        known = _resolve(client, container_id, attrs, labels)
        if len(_RESOLVED) >= _RESOLVED_KEPT:
            _RESOLVED.clear()
        _RESOLVED[key] = known
    return known


def _resolve(client, container_id: str, attrs: dict, labels: dict) -> AgentIdentity:
    config = attrs.get("Config") or {}
    # The image's USER (the container itself is always created as root).
    image = client.api.inspect_image(attrs.get("Image") or config.get("Image"))
    image_user = (image.get("Config") or {}).get("User") or ""
    user = labels.get(USER_LABEL) or image_user or "root"
    workdir = labels.get(WORKDIR_LABEL) or config.get("WorkingDir") or "/"
    passwd = _read(client, container_id, "/etc/passwd")
    groups = _read(client, container_id, "/etc/group")
    uid, gid, home, name = _lookup(user, passwd, groups)
    return AgentIdentity(
        user, uid, gid, home, workdir, name, False, image_user, passwd=passwd, group=groups
    )


def image_environment(attrs: dict) -> dict[str, str]:
    """A container's environment as its image declares it (Config.Env: its ENV lines)."""
    env: dict[str, str] = {}
    for item in (attrs.get("Config") or {}).get("Env") or []:
        key, sep, value = item.partition("=")
        if sep and key:
            env[key] = value
    return env


def _lookup(user: str, passwd: str, groups: str) -> tuple[int, int, str, str]:
    """uid, gid, home and name of a Docker user spec (name, uid, name:group, uid:gid)."""
    who, _, group = user.partition(":")
    entries = [line.split(":") for line in passwd.splitlines() if line.count(":") >= 6]
    entry = next((e for e in entries if e[0] == who), None)
    if entry is None and who.isdigit():
        entry = next((e for e in entries if e[2] == who), None)
    if entry is not None:
        uid, gid, home, name = int(entry[2]), int(entry[3]), entry[5] or "/", entry[0]
    elif who.isdigit():
        uid, gid, home, name = int(who), int(who), "/", ""
    else:
        raise ValueError(f"the agent user {who!r} does not exist in the image (/etc/passwd)")
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            rows = [line.split(":") for line in groups.splitlines() if line.count(":") >= 3]
            match = next((r for r in rows if r[0] == group), None)
            if match is None:
                raise ValueError(f"the agent group {group!r} does not exist in the image")
            gid = int(match[2])
    return uid, gid, home, name


def _read(client, container_id: str, path: str) -> str:
    """A small text file of the container, read through the engine (no exec); "" if absent."""
    try:
        stream, stat = client.api.get_archive(container_id, path)
    except docker.errors.NotFound:
        return ""
    if int(stat.get("size", 0)) > MAX_PASSWD_BYTES:
        return ""
    data = b"".join(stream)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = next((m for m in tar.getmembers() if m.isfile()), None)
        if member is None:
            return ""
        extracted = tar.extractfile(member)
        return extracted.read().decode("utf-8", "replace") if extracted else ""
