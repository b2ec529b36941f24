"""The image's own version of some paths, put back in a new container's overlay layer before it
starts: what a verifier sees where the agent's changes are not to be seen (its configuration,
grading/system_paths.py).

A verifier container is a snapshot of the agent's (verifier.py): its lower layers are the image's
plus the agent's changes. Its own upper directory is empty until it starts; whatever is written
there first wins over every lower layer. So, for each path, on this host (the engine's overlay
directories, as root: where containers.changes reads the agent's layer):

- the image had it (a file, a link, a directory whose entries the agent changed): its copy, with
  its mode, owner and times, read from the image's layers (the agent container's `LowerDir`, top
  first) the way the overlay itself resolves a path: a whiteout hides what is below it, an opaque
  directory hides the lower layers' entries; a directory the agent replaced comes back whole, as
  an opaque directory;
- the image had nothing there: a whiteout (a 0:0 character device), which hides the agent's.

Missing parents are made as the image has them.
"""

from __future__ import annotations

import os
import shutil
import stat

OPAQUE_XATTR = ("trusted.overlay.opaque", "user.overlay.opaque")
WHITEOUT, OPAQUE_FILE = ".wh.", ".wh..wh..opq"


def lower_dirs(inspect: dict) -> list[str]:
    """A container's overlay lower directories, top first, when this host can read them."""
    data = (inspect.get("GraphDriver") or {}).get("Data") or {}
    found = [d for d in str(data.get("LowerDir") or "").split(":") if d]
    return found if found and all(os.path.isdir(d) for d in found) else []


def restore(upper: str, lowers: list[str], paths: list[str] | tuple[str, ...]) -> None:
    """Make each of `paths` in the container whose (empty, not yet mounted) upper directory is
    `upper` what it is in the image of layers `lowers` (module docstring). Raises OSError."""
    done: list[str] = []
    for path in sorted(set(paths)):
        if any(path == d or path.startswith(d.rstrip("/") + "/") for d in done):
            continue
        _parents(upper, lowers, path)
        target = os.path.join(upper, path.lstrip("/"))
        found = _lookup(lowers, path)
        if os.path.lexists(target):
            _remove(target)
        if found is None:
            os.mknod(target, stat.S_IFCHR | 0o600, 0)  # a whiteout
        elif stat.S_ISDIR(os.lstat(found[0]).st_mode):
            _copy_tree(lowers, found[1], path, target)
            done.append(path)
        else:
            _copy_entry(found[0], target)
        if found is None:
            done.append(path)


def _layers_of(lowers: list[str], path: str) -> list[int] | None:
    """The layers (indexes) whose directory at `path` make up the merged directory, or None
    where `path` is not a directory in the image."""
    layers = list(range(len(lowers)))
    for depth, name in enumerate([p for p in path.strip("/").split("/") if p]):
        parent = "/".join(path.strip("/").split("/")[:depth])
        below: list[int] = []
        for index in layers:
            entry = os.path.join(lowers[index], parent, name)
            if _whiteout(lowers[index], parent, name):
                break
            try:
                info = os.lstat(entry)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                if not below:
                    return None
                break
            below.append(index)
            if _opaque(entry):
                break
        if not below:
            return None
        layers = below
    return layers


def _lookup(lowers: list[str], path: str) -> tuple[str, list[int]] | None:
    """(where the image's entry at `path` is, the layers of a directory there) or None."""
    parent, name = os.path.split(path.rstrip("/"))
    layers = _layers_of(lowers, parent)
    if layers is None or not name:
        return None
    for index in layers:
        if _whiteout(lowers[index], parent.strip("/"), name):
            return None
        entry = os.path.join(lowers[index], parent.strip("/"), name)
        if os.path.lexists(entry):
            is_dir = stat.S_ISDIR(os.lstat(entry).st_mode)
            return entry, (_layers_of(lowers, path) or []) if is_dir else []
    return None


def _whiteout(layer: str, parent: str, name: str) -> bool:
    entry = os.path.join(layer, parent, name)
    try:
        info = os.lstat(entry)
        if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
            return True
    except FileNotFoundError:
        pass
    return os.path.lexists(os.path.join(layer, parent, WHITEOUT + name))


def _opaque(directory: str) -> bool:
    if os.path.lexists(os.path.join(directory, OPAQUE_FILE)):
        return True
    for name in OPAQUE_XATTR:
        try:
            if os.getxattr(directory, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _parents(upper: str, lowers: list[str], path: str) -> None:
    parts = [p for p in path.strip("/").split("/") if p][:-1]
    for depth in range(1, len(parts) + 1):
        rel = "/".join(parts[:depth])
        target = os.path.join(upper, rel)
        if os.path.isdir(target) and not os.path.islink(target):
            continue
        found = _lookup(lowers, "/" + rel)
        os.mkdir(target)
        if found is not None:
            _metadata(found[0], target)


def _copy_entry(source: str, target: str) -> None:
    info = os.lstat(source)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(source), target)
    elif stat.S_ISREG(info.st_mode):
        shutil.copyfile(source, target, follow_symlinks=False)
    elif stat.S_ISDIR(info.st_mode):
        os.mkdir(target)
    else:  # a device, FIFO or socket the image has
        os.mknod(target, info.st_mode, info.st_rdev)
    _metadata(source, target)


def _copy_tree(lowers: list[str], layers: list[int], path: str, target: str) -> None:
    """The merged directory `path` of the image (its `layers`), as an opaque directory."""
    top = os.path.join(lowers[layers[0]], path.strip("/"))
    os.mkdir(target)
    os.setxattr(target, OPAQUE_XATTR[0], b"y", follow_symlinks=False)
    names: set[str] = set()
    for index in layers:
        directory = os.path.join(lowers[index], path.strip("/"))
        with os.scandir(directory) as entries:
            names |= {e.name for e in entries if not e.name.startswith(WHITEOUT)}
    for name in sorted(names):
        child = f"{path.rstrip('/')}/{name}"
        found = _lookup(lowers, child)
        if found is None:
            continue
        if stat.S_ISDIR(os.lstat(found[0]).st_mode):
            _copy_tree(lowers, found[1], child, os.path.join(target, name))
        else:
            _copy_entry(found[0], os.path.join(target, name))
    _metadata(top, target)


def _metadata(source: str, target: str) -> None:
    info = os.lstat(source)
    os.chown(target, info.st_uid, info.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(info.st_mode):
        os.chmod(target, stat.S_IMODE(info.st_mode))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


def _remove(target: str) -> None:
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target)
    else:
        os.unlink(target)
