"""The verifier container's read-only system locations (verifier.py): what a test, a task's script
or any program they run cannot change while grading, whoever runs it."""

from __future__ import annotations

import os

# Docker's own read-only paths, which a container's ReadonlyPaths replaces (so: kept).
ENGINE_DEFAULTS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
# Files the loader reads if they exist: where the image has none, a read-only empty file is
# mounted at its path, so that nothing creates one while grading (a preload library would then
# load into every program started after).
EMPTY_WHERE_ABSENT = ("/etc/ld.so.preload",)
EMPTY_FILE = "/run/endless/empty"


def apply(host_config: dict, paths: list[str], absent: list[str], local: bool) -> None:
    """Make `paths` read-only in the container `host_config` creates; mount the empty file over
    each of EMPTY_WHERE_ABSENT that the image lacks (`absent`), where the engine runs on this
    host (`local`: the file's path is the engine's)."""
    host_config["ReadonlyPaths"] = [*ENGINE_DEFAULTS, *paths]
    missing = [p for p in EMPTY_WHERE_ABSENT if p in absent]
    if local and missing:
        source = empty_file()
        mounts = host_config.setdefault("Mounts", [])
        for target in missing:
            mounts.append({"Type": "bind", "Source": source, "Target": target, "ReadOnly": True})


def volumes(agent_id: str, shared: list[str] | None) -> dict:
    """How a verifier mounts its agent's volumes: all of them (`volumes_from`), or only
    `shared` ("name:destination"; the image's other VOLUMEs get fresh ones, from the image)."""
    if shared is None:
        return {"volumes_from": [agent_id]}
    return {"binds": list(shared)}


def empty_file() -> str:
    """A root-owned empty file, read-only for everyone, on this host."""
    if not os.path.isfile(EMPTY_FILE) or os.path.getsize(EMPTY_FILE):
        os.makedirs(os.path.dirname(EMPTY_FILE), mode=0o755, exist_ok=True)
        staging = f"{EMPTY_FILE}.{os.getpid()}"
        with open(staging, "w"):
            pass
        os.chmod(staging, 0o444)
        os.replace(staging, EMPTY_FILE)
    return EMPTY_FILE


# Run on this host in a process of its own (setns needs a single thread): enters the container's
# mount namespace and root through its PID 1, and makes each path a read-only bind of itself
# (Docker's runc does the same for ReadonlyPaths). Only system calls: nothing of the container's
# runs, and the paths resolve inside its root.
_REMOUNT = r"""
import ctypes, json, os, sys
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, CLONE_NEWNS = 32, 4096, 16384, 0x20000
libc = ctypes.CDLL(None, use_errno=True)
pid, paths = int(sys.argv[1]), json.loads(sys.argv[2])
root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
if libc.setns(namespace, CLONE_NEWNS) != 0:
    raise SystemExit(f"setns: errno {ctypes.get_errno()}")
os.fchdir(root)
os.chroot(".")
os.chdir("/")
for path in paths:
    if not os.path.exists(path):
        continue
    if libc.mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None) != 0:
        raise SystemExit(f"bind {path}: errno {ctypes.get_errno()}")
    flags = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if libc.mount(None, path.encode(), None, flags | MS_BIND | MS_REMOUNT | MS_RDONLY, None):
        raise SystemExit(f"read-only {path}: errno {ctypes.get_errno()}")
"""


def remount(pid: int, paths: list[str]) -> None:
    """Make `paths` read-only in the running container whose PID 1 is `pid` on this host (for
    an engine that ignores ReadonlyPaths: Podman's Docker API). Raises OSError if it fails."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-I", "-c", _REMOUNT, str(pid), json.dumps(paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(f"making the verifier's system locations read-only: {done.stderr[-300:]}")
