"""What differs in a container's files from its image, as `docker diff` lists it: a list of
{"Path", "Kind"} (0 changed, 1 added, 2 deleted).

`docker diff` walks the container's whole file tree on these machines (Docker 20.10's overlay2
compares it with the image's: ~29,000 entries of our base image, 0.3-0.5 s, more for larger
images), however few files changed. When the engine runs on this host with an overlay driver
and we are root (`disk.upper_dir`: what the disk budget needs too), the container's own overlay
layer, its upper directory, holds exactly what changed, and reading it costs little. It lists:

- every entry in the upper directory (a file, link or device written, created or copied up);
- a whiteout (a 0:0 character device, or a `.wh.NAME` file where whiteouts are files, as
  fuse-overlayfs makes them) as its path deleted (Kind 2);
- a directory that replaced what was there (an opaque or redirected directory: an overlay
  xattr, or a `.wh..wh..opq` entry) as deleted (Kind 2), whatever it holds now;
- any other directory as changed (Kind 0): a directory copied up because something under it
  changed, or one the agent created where nothing was.

It is not `docker diff`'s list entry for entry (a new directory is Kind 0 here, a replaced one
Kind 2, and a file is listed if it was copied up, even unchanged: by a `chmod` to the mode it
had, or a hard link to it), so what a container's start changed and what an agent changed later
are taken the same way (`TaskContainer.upper_dir`), and compared with each other only. What
verifier.tampering needs holds either way: every path written is listed, and a directory listed
as changed (Kind 0) never hides that what was at its path was replaced.
"""

from __future__ import annotations

import os
import stat

from endless_assets.sandbox.engine.client import (
    DockerClient,
    engine_address,
    engine_failure,
)

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
# The overlay xattrs that mark a directory as replacing the lower one (trusted.overlay.* for the
# kernel's overlay as root, user.overlay.* with userxattr, user.fuseoverlayfs.* for fuse).
_REPLACED = ("opaque", "redirect")
LIMIT = 2_000_000  # entries: past this, the engine's own walk (a disk budget holds far fewer)


def change_key(change: dict) -> tuple:
    """What tells one change from another: path, kind and (read in the upper directory) stamp."""
    return (change.get("Path"), change.get("Kind"), change.get("Stamp"))


def container_changes(client: DockerClient, container_id: str, upper: str = "") -> list[dict]:
    """The container's changes: from its upper directory when we can read it (`upper`),
    else the engine's `docker diff`."""
    if upper:
        try:
            return upper_changes(upper)
        except (OSError, OverflowError):
            pass  # (gone, or too large to walk here): the engine's own answer
    with engine_failure(f"docker diff of {container_id[:12]}"):
        return client.api.diff(container_id) or []


def upper_changes(upper: str) -> list[dict]:
    """The changes an overlay upper directory holds (module docstring). Raises OSError if it
    cannot be read, OverflowError past LIMIT entries. Each entry also has a "Stamp" (inode and
    change time): a file the engine wrote at start and the agent rewrote later is not the
    engine's change any more."""
    if not os.path.isdir(upper):
        raise FileNotFoundError(upper)
    found: list[dict] = []
    pending = [("", upper)]
    while pending:
        rel, directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if len(found) >= LIMIT:
                    raise OverflowError(f"more than {LIMIT} changed entries")
                path = _text(f"{rel}/{entry.name}")
                if entry.name == OPAQUE:
                    if not rel:  # (the root cannot be replaced; listed all the same)
                        found.append({"Path": "/", "Kind": 2, "Stamp": ""})
                    continue  # its directory is listed as replaced (below)
                if entry.name.startswith(WHITEOUT):
                    gone = _text(f"{rel}/{entry.name[len(WHITEOUT) :]}")
                    found.append({"Path": gone, "Kind": 2, "Stamp": ""})
                    continue
                info = entry.stat(follow_symlinks=False)
                stamp = f"{info.st_ino}:{info.st_ctime_ns}"
                if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                    kind = 2
                elif stat.S_ISDIR(info.st_mode):
                    kind = 2 if _replaced(entry.path) else 0
                    pending.append((f"{rel}/{entry.name}", entry.path))
                else:
                    kind = 1
                found.append({"Path": path, "Kind": kind, "Stamp": stamp})
    return found


def _text(path: str) -> str:
    """A path as text that any writer takes (a name that is not UTF-8: U+FFFD for its bytes,
    as `docker diff` gives it)."""
    return os.fsencode(path).decode("utf-8", "replace")


def _replaced(directory: str) -> bool:
    """Whether an overlay xattr marks this directory as replacing (not merging with) what the
    image had at its path."""
    if os.path.lexists(os.path.join(directory, OPAQUE)):
        return True
    try:
        names = os.listxattr(directory, follow_symlinks=False)
    except OSError:
        return True  # cannot tell: say replaced (never hide a change)
    return any("overlay" in name and any(mark in name for mark in _REPLACED) for name in names)


# What an engine changes in a new container's files before any command (its mount points, its
# init, Podman's /etc), by engine and image: the same for every container of an image, so asked
# once (a `docker diff` costs 0.3-0.5 s on these machines). Not needed where the container's
# upper directory can be read (changes.py).
_ENGINE_CHANGES: dict[tuple[str, str], list[dict]] = {}
_ENGINE_CHANGES_KEPT = 4096


def engine_changes(client: DockerClient, container_id: str, attrs: dict, upper: str) -> list[dict]:
    """What the engine changed in a new container's files (its mount points, its init, Podman's
    /etc), before any command: asked once per engine and image where `upper` is not read."""
    if upper:  # read where they are, as the check will read the agent's (changes.py)
        return container_changes(client, container_id, upper)
    key = (engine_address(client), str(attrs.get("Image") or ""))
    found = _ENGINE_CHANGES.get(key)
    if found is None:
        found = container_changes(client, container_id)
        if len(_ENGINE_CHANGES) >= _ENGINE_CHANGES_KEPT:
            _ENGINE_CHANGES.clear()
        _ENGINE_CHANGES[key] = found
    return found
