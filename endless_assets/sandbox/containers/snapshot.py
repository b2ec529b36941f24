"""A task container's agent-writable state: listed, snapshotted, restored, and diffed.

The soundness stage (stages/soundness/stage.py) grades many end states of one task in few
containers. The agent (not root, no capabilities, no-new-privileges) can only change what it may
write: directories and files it owns, or that its group or everyone may write. Those are the
container's *writable roots*. `take_snapshot` finds them with one `find` per mount that skips
the trees an image never hands to the agent (/usr/lib, /usr/share, ...: 0.02 CPU-s instead of
the 0.2 of a full walk), copies them into a root-only tar and lists them. `restore_script` puts
them back (contents, modes, owners, times; whatever was added is removed); a lane runs it, and
the next probe, through one persistent root shell (`RootShell`), so a probe costs no `docker
exec` at all, only its verdict. `list_changes` says what a run changed since a marker was
touched (by inode change time, which the agent cannot set back, unlike a modification time);
`content_hashes` hashes files now and as the snapshot holds them.

Everything here runs as root inside the container: only the container's own tools (find, tar,
python3, setpriv, timeout) read task text, never the host.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from endless_assets.models import AGENT_HOME, AGENT_USER
from endless_assets.sandbox.containers.container import ROOT_PATH, ExecResult, TaskContainer
from endless_assets.sandbox.containers.shell import AGENT_PATH, ShellSession
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.engine.usage import cgroup_cpu

AGENT_UID = 1000  # our tasks' agent (`user`); a container that knows another says so
STATE_DIR = "/root/.endless-snapshot"  # root-only (/root is 0700): the agent cannot read it
SNAPSHOT = f"{STATE_DIR}/initial.tar"
ROOTS_FILE = f"{STATE_DIR}/roots"
MARKER = f"{STATE_DIR}/marker"
# Trees the scan does not enter: kernel and engine mounts, the grader's tmpfs, and the bulk of
# the system that images do not hand to the agent.
PRUNED = (
    "/proc",
    "/sys",
    "/dev",
    "/verifier",
    "/root",
    "/usr/share",
    "/usr/lib",
    "/usr/include",
    "/usr/bin",
    "/usr/sbin",
    "/usr/libexec",
    "/var/lib/dpkg",
    "/var/cache",
)
# What the agent's shell gets (sandbox/containers/shell.py): a probe that runs as the agent runs
# like it.
AGENT_ENV = {
    "PATH": AGENT_PATH,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}
_SECTION = "\0--endless-section--\0"  # between the parts of a listing's output
_PRINT_SECTION = "printf '\\0--endless-section--\\0'"
# One entry per path: type (find's %y), mode (octal), uid, size, path; NUL-terminated.
_LIST = "-printf '%y %m %U %s %p\\0'"


@dataclass(frozen=True)
class Agent:
    """Who the agent is in a container: what its probes run as and what it may write."""

    uid: int = AGENT_UID
    gid: int = AGENT_UID
    home: str = AGENT_HOME
    workdir: str = AGENT_HOME
    name: str = AGENT_USER


def agent_of(box: TaskContainer) -> Agent:
    """The container's agent: the identity the container carries, if the sandbox gives it one,
    else our tasks' `user` (uid 1000) in /home/user."""
    identity = getattr(box, "agent", None)
    if identity is None:
        return Agent()
    return Agent(
        int(identity.uid),
        int(identity.gid),
        str(identity.home),
        str(identity.workdir),
        str(getattr(identity, "name", "") or identity.uid),
    )


@dataclass(frozen=True)
class Entry:
    kind: str  # f (file), d (directory), l (symlink), ...
    mode: int
    uid: int
    size: int
    path: str


@dataclass
class Snapshot:
    """The writable roots of a container and what was in them when the snapshot was taken."""

    roots: list[str] = field(default_factory=list)
    listing: dict[str, Entry] = field(default_factory=dict)
    ok: bool = False
    error: str = ""
    agent: Agent = field(default_factory=Agent)

    def under_roots(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in self.roots)


@dataclass
class Changes:
    """What a run changed under the writable roots since the marker."""

    changed: dict[str, Entry] = field(default_factory=dict)  # created or modified, by path
    deleted: list[str] = field(default_factory=list)  # in the snapshot's listing, gone now
    final: dict[str, Entry] = field(default_factory=dict)  # everything there now
    # sha256 of files now and in the snapshot, where asked (`content_hashes`); None: too large
    final_hashes: dict[str, str | None] = field(default_factory=dict)
    initial_hashes: dict[str, str | None] = field(default_factory=dict)


def take_snapshot(box: TaskContainer) -> Snapshot:
    """Find the container's writable roots, tar them into a root-only file, list them.

    A snapshot that cannot be taken (the agent is root and may write anywhere, or the disk
    budget is too small for a copy of the agent's files) is returned with `ok=False`: callers
    then use a fresh container instead of a restore. An engine failure raises SandboxError."""
    agent = agent_of(box)
    if agent.uid == 0:
        return Snapshot(ok=False, error="the agent is root: it may write anywhere", agent=agent)
    agent_uid, agent_gid = agent.uid, agent.gid
    pruned = " -o ".join(f"-path {shlex.quote(p)}" for p in PRUNED)
    writable = f"-uid {agent_uid} -o -perm -0002 -o -gid {agent_gid} -perm -0020"
    find = f"-xdev \\( {pruned} \\) -prune -o ! -type l \\( {writable} \\) -print0 -prune"
    script = f"""
set -u
umask 077
mkdir -p {STATE_DIR} && chmod 700 {STATE_DIR} || exit 90
{{ find / {find}
  while read -r _ mount _; do
    case "$mount" in
      /|/proc|/proc/*|/sys|/sys/*|/dev|/dev/pts|/dev/mqueue|/verifier|/verifier/*|/etc/*) ;;
      *) [ -d "$mount" ] && find "$mount" {find} ;;
    esac
  done < /proc/mounts; }} 2>/dev/null | sort -zu > {ROOTS_FILE}
sed -z 's|^/||' {ROOTS_FILE} | tar -C / --numeric-owner --null -T - -cpf {SNAPSHOT} \\
  2>{STATE_DIR}/tar.err || {{ cat {STATE_DIR}/tar.err >&2; rm -f {SNAPSHOT}; exit 91; }}
mapfile -d '' roots < {ROOTS_FILE}
cat {ROOTS_FILE}
{_PRINT_SECTION}
if [ ${{#roots[@]}} -gt 0 ]; then find "${{roots[@]}}" {_LIST} 2>/dev/null; fi
true
"""
    result = _sh(box, script)
    roots_part, _, listing_part = result.output.partition(_SECTION)
    if result.exit_code != 0 or not _:
        error = f"exit {result.exit_code}: {result.output[-500:]}"
        return Snapshot(ok=False, error=error, agent=agent)
    roots = [r for r in roots_part.split("\0") if r]
    return Snapshot(roots=roots, listing=_entries(listing_part), ok=True, agent=agent)


def restore_script(snapshot: Snapshot, *, mark: bool = False) -> str:
    """Shell (run as root) that puts the writable roots back as they were in the snapshot:
    everything in a root directory is removed, then the tar is extracted over them. `mark`
    touches the change marker afterwards (for `list_changes`). Exits 97 if it fails."""
    if not snapshot.ok:
        raise ValueError("no snapshot to restore")
    lines = [
        f"mapfile -d '' roots < {ROOTS_FILE} || exit 97",
        'for r in "${roots[@]}"; do',
        '  if [ -d "$r" ] && [ ! -L "$r" ]; then',
        # (what cannot go, e.g. a mount point inside a root, is left; tar rewrites the rest)
        '    find "$r" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + 2>/dev/null',
        "  fi",
        "done",
        f"tar -C / --numeric-owner -xpf {SNAPSHOT} 2>/dev/null || exit 97",
    ]
    if mark:
        lines.append(f"touch {MARKER} || exit 97")
    return "\n".join(lines) + "\n"


MARK_SCRIPT = f"touch {MARKER}\n"  # `list_changes` reports what changes after this


class RootShell:
    """A persistent root bash in a container for the harness's own scripts (restores, probes):
    one `docker exec` for the container's life instead of one per script, which is most of what
    a probe costs the engine (runc starts for every exec). Each script runs in a subshell, so
    its `exit` ends only the script. The agent cannot reach it: it is root's, and its stream is
    the harness's."""

    def __init__(self, box: TaskContainer) -> None:
        env = {"HOME": "/root", "USER": "root", "LOGNAME": "root", "PATH": ROOT_PATH}
        self.session = ShellSession(box, user="0", cwd="/", output_cap=200_000, env=env)

    def run(self, script: str, *, timeout: float) -> ExecResult:
        result = self.session.run(f"(\n{script}\n)", timeout=timeout)
        if result.timed_out or result.exit_code is None:
            raise SandboxError(f"a harness script did not finish: {result.note or 'timed out'}")
        return ExecResult(result.exit_code, result.output, result.seconds)

    def close(self) -> None:
        self.session.close()


def list_changes(box: TaskContainer, snapshot: Snapshot) -> Changes:
    """Entries under the writable roots whose inode changed after the marker was touched,
    the snapshot's entries that are gone, and everything there now."""
    script = f"""
mapfile -d '' roots < {ROOTS_FILE}
if [ ${{#roots[@]}} -gt 0 ]; then find "${{roots[@]}}" -cnewer {MARKER} {_LIST} 2>/dev/null; fi
{_PRINT_SECTION}
if [ ${{#roots[@]}} -gt 0 ]; then find "${{roots[@]}}" {_LIST} 2>/dev/null; fi
true
"""
    result = _sh(box, script)
    changed_part, found, final_part = result.output.partition(_SECTION)
    if not found:
        raise SandboxError(f"listing the container's changes failed: {result.output[-300:]}")
    final = _entries(final_part)
    changed = {p: e for p, e in _entries(changed_part).items() if p not in snapshot.roots}
    deleted = sorted(p for p in snapshot.listing if p not in final)
    return Changes(changed=changed, deleted=deleted, final=final)


_HASHER = """
import hashlib, json, sys, tarfile
final, initial, snapshot, cap = json.loads(sys.argv[1])
def digest(fh):
    h, left = hashlib.sha256(), cap
    while left > 0:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            return h.hexdigest()
        h.update(chunk)
        left -= len(chunk)
    return None
out = {"final": {}, "initial": {}}
for path in final:
    try:
        with open(path, "rb") as fh:
            out["final"][path] = digest(fh)
    except OSError:
        pass
wanted = {p.lstrip("/"): p for p in initial}
with tarfile.open(snapshot) as tar:
    for member in tar:
        if member.isfile() and member.name.rstrip("/") in wanted:
            out["initial"][wanted[member.name]] = digest(tar.extractfile(member))
print(json.dumps(out))
"""


def content_hashes(
    box: TaskContainer, final: list[str], initial: list[str], *, cap: int = 256 * 2**20
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """sha256 of files as they are now (`final`) and as the snapshot holds them (`initial`),
    read in the container by its own python3; None for a file larger than `cap` bytes, absent
    for one that cannot be read."""
    arg = json.dumps([final[:1000], initial[:1000], SNAPSHOT, cap])
    result = box.exec_root(["python3", "-I", "-c", _HASHER, arg])
    try:
        out = json.loads(result.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}, {}
    return out.get("final", {}), out.get("initial", {})


def as_agent(command: str, agent: Agent, *, timeout: float) -> str:
    """Shell (run as root) that runs `command` (one shell command line) as the agent, in its
    working directory with its shell's environment, output discarded, killed after `timeout`
    seconds. Whatever the command's exit status, the script's is 0 (98 if the image lacks the
    tools to run it: then it did not run)."""
    env = {"HOME": agent.home, "USER": agent.name, "LOGNAME": agent.name, **AGENT_ENV}
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    groups = "--clear-groups" if agent.name.isdigit() else "--init-groups"
    drop = f"setpriv --reuid={agent.uid} --regid={agent.gid} {groups}"
    inner = f"cd {shlex.quote(agent.workdir)} && exec env -i {assignments} "
    inner += f"bash --noprofile --norc -c {shlex.quote(command)}"
    return (
        "command -v setpriv >/dev/null && command -v timeout >/dev/null || exit 98\n"
        f"timeout -k 5 {max(1, int(timeout))} {drop} bash --noprofile --norc -c "
        f"{shlex.quote(inner)} </dev/null >/dev/null 2>&1\ntrue\n"
    )


def container_cpu_seconds(box: TaskContainer) -> float | None:
    """CPU time the container's processes have used so far (its cgroup's), or None when this
    host cannot see the engine's cgroups (a remote engine)."""
    cid = box.id
    for path, scale in (
        (f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage", 1e-9),
        (f"/sys/fs/cgroup/cpu,cpuacct/docker/{cid}/cpuacct.usage", 1e-9),
        (f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat", 1e-6),
        (f"/sys/fs/cgroup/docker/{cid}/cpu.stat", 1e-6),
        # Podman's (cgroupfs, then systemd as its cgroup manager)
        (f"/sys/fs/cgroup/cpuacct/libpod_parent/libpod-{cid}/cpuacct.usage", 1e-9),
        (f"/sys/fs/cgroup/cpu,cpuacct/libpod_parent/libpod-{cid}/cpuacct.usage", 1e-9),
        (f"/sys/fs/cgroup/libpod_parent/libpod-{cid}/cpu.stat", 1e-6),
        (f"/sys/fs/cgroup/machine.slice/libpod-{cid}.scope/cpu.stat", 1e-6),
    ):
        seconds = cgroup_cpu(path, scale)
        if seconds is not None:
            return seconds
    return None


def _sh(box: TaskContainer, script: str) -> ExecResult:
    return box.exec_root(["bash", "--noprofile", "--norc", "-c", script])


def _entries(text: str) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for record in text.split("\0"):
        parts = record.split(" ", 4)
        if len(parts) != 5:
            continue
        kind, mode, uid, size, path = parts
        try:
            out[path] = Entry(kind, int(mode, 8), int(uid), int(size), path)
        except ValueError:
            continue
    return out
