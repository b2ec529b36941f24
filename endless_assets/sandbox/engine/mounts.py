"""The disk budgets (disk.py) mounted on this host, as the kernel lists them, and their release.

A budget is an ext4 filesystem in `<layer>/endless-disk.img`, loop-mounted over `<layer>`: found
from the loop devices' backing files and the mount table, whatever the engine still says of its
container. Hidden budgets: a budget mounted while a Docker engine that bind-mounts its data root
over itself was down is hidden by that bind once it is back (its removal of the container then
fails, "device or resource busy", and `umount <layer>` reaches the bind's view). Such a budget
is reached through the mount it hangs on: a handle of its parent directory (name_to_handle_at)
opened on that mount (open_by_handle_at)."""

from __future__ import annotations

import ctypes
import os
import re
import struct
from dataclasses import dataclass
from glob import glob

IMAGE_NAME = "endless-disk.img"  # the budget's filesystem image, in the layer it covers
_ESCAPE = re.compile(r"\\([0-7]{3})")  # mountinfo writes space, tab, newline, \ as \ooo
_DELETED = " (deleted)"  # how the kernel names a backing file that was unlinked
_MNT_DETACH = 2
_AT_FDCWD = -100
_HANDLE_BYTES = 128  # MAX_HANDLE_SZ
_LOOP_CLR_FD = 0x4C01
_LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    id: int
    parent: int
    device: str  # major:minor
    point: str
    fstype: str


@dataclass(frozen=True)
class Budget:
    """A budget's loop device, its layer directory and where it is mounted over it (if at all)."""

    loop: str  # /dev/loopN
    device: str  # major:minor
    layer: str
    mounts: tuple[Mount, ...]


def mount_table() -> list[Mount]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        lines = fh.read().splitlines()
    table = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 7 or "-" not in fields:
            continue
        fstype = fields[fields.index("-") + 1]
        point = _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
        table.append(Mount(int(fields[0]), int(fields[1]), fields[2], point, fstype))
    return table


def budgets(overlay_dir: str) -> list[Budget]:
    """Every budget whose layer is a directory of `overlay_dir` (an engine's overlay2 or
    overlay directory), mounted or not."""
    table = mount_table()
    found = []
    for backing_path in glob("/sys/block/loop*/loop/backing_file"):
        block = os.path.dirname(os.path.dirname(backing_path))
        try:
            backing, device = _backing(backing_path), _backing(os.path.join(block, "dev"))
        except OSError:  # detached meanwhile
            continue
        layer = os.path.dirname(backing)
        if os.path.basename(backing) != IMAGE_NAME or os.path.dirname(layer) != overlay_dir:
            continue
        mounted = tuple(m for m in table if m.device == device and m.point == layer)
        found.append(Budget(f"/dev/{os.path.basename(block)}", device, layer, mounted))
    return found


def _backing(path: str) -> str:
    """A loop device's backing file (or another line of sysfs), as named when it was attached."""
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read().strip().removesuffix(_DELETED)


def still_mounted(mount: Mount) -> bool:
    return mount in mount_table()


def unmount(mount: Mount) -> bool:
    """Detach `mount` lazily, visible or hidden; False if it cannot be reached (another mount is
    stacked on it) or is gone already."""
    table = {m.id: m for m in mount_table()}
    if table.get(mount.id) != mount:
        return False
    fd = _open_mount(mount, table)
    if fd < 0:
        return False
    try:
        if _LIBC.umount2(f"/proc/self/fd/{fd}".encode(), _MNT_DETACH) != 0:
            return False
    finally:
        os.close(fd)
    return True


def unmount_all(mounts: list[Mount]) -> int:
    """Detach every mount of `mounts` that can be reached, those stacked on others first (one
    pass per level); how many were detached."""
    left, done = list(mounts), 0
    while left:
        progress = [m for m in left if unmount(m)]
        if not progress:
            break
        done += len(progress)
        left = [m for m in left if m not in progress and still_mounted(m)]
    return done


def detach_loop(budget: Budget) -> bool:
    """Detach the loop device of a budget nothing mounts (its image's blocks are freed with it).
    False if it is still there (a lazily detached filesystem of it is still held) or is no
    longer that budget's."""
    sysfs = f"/sys/block/{os.path.basename(budget.loop)}/loop/backing_file"
    try:
        fd = os.open(budget.loop, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            backing = _backing(sysfs)
        except OSError:
            return False
        mounted = any(m.device == budget.device for m in mount_table())
        if mounted or backing != os.path.join(budget.layer, IMAGE_NAME):
            return False
        if _LIBC.ioctl(fd, _LOOP_CLR_FD, 0) != 0:
            return False
    finally:
        os.close(fd)  # the last close of a device cleared with no other opener detaches it
    return not os.path.exists(sysfs)


def _open_mount(mount: Mount, table: dict[int, Mount]) -> int:
    """An O_PATH descriptor of `mount`'s root, or -1. Through its mount point's path when that
    leads to it; else (hidden) from the mount it hangs on."""
    fd = _root_of(mount.id, mount.point, os.O_NOFOLLOW)
    parent = table.get(mount.parent)
    if fd >= 0 or parent is None:
        return fd
    if parent.device != _device_at(os.path.dirname(mount.point), table):
        return -1
    try:
        directory = _open_on(parent, os.path.dirname(mount.point))
    except OSError:
        return -1
    try:
        return _root_of(mount.id, os.path.basename(mount.point), dir_fd=directory)
    finally:
        os.close(directory)


def _root_of(mount_id: int, path: str, flags: int = 0, dir_fd: int | None = None) -> int:
    """An O_PATH descriptor of directory `path` if it is the root of mount `mount_id`, else -1."""
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | flags, dir_fd=dir_fd)
    except OSError:
        return -1
    if _mount_id(fd) == mount_id:
        return fd
    os.close(fd)
    return -1


def _open_on(parent: Mount, path: str) -> int:
    """`path`'s directory as it is on the mount `parent` (not on whatever covers it there)."""
    anchor = os.open(parent.point, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _mount_id(anchor) != parent.id:
            raise OSError(f"the mount at {parent.point} is covered")
        handle = ctypes.create_string_buffer(8 + _HANDLE_BYTES)
        struct.pack_into("Ii", handle, 0, _HANDLE_BYTES, 0)
        mount_id = ctypes.c_int()
        if _LIBC.name_to_handle_at(_AT_FDCWD, path.encode(), handle, ctypes.byref(mount_id), 0):
            raise OSError(ctypes.get_errno(), f"name_to_handle_at {path}")
        fd = _LIBC.open_by_handle_at(anchor, handle, os.O_PATH | os.O_DIRECTORY)
        if fd < 0:
            raise OSError(ctypes.get_errno(), f"open_by_handle_at {path}")
    finally:
        os.close(anchor)
    if _mount_id(fd) != parent.id:
        os.close(fd)
        raise OSError(f"{path} is not on the mount at {parent.point}")
    return fd


def _device_at(path: str, table: dict[int, Mount]) -> str:
    """The device of the filesystem `path` is on (major:minor), "" if it cannot be told."""
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return ""
    try:
        found = table.get(_mount_id(fd))
    finally:
        os.close(fd)
    return found.device if found else ""


def _mount_id(fd: int) -> int:
    with open(f"/proc/self/fdinfo/{fd}") as fh:
        for line in fh:
            if line.startswith("mnt_id:"):
                return int(line.split()[1])
    return -1
