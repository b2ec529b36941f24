"""Which process owns something (a run, a container, a lock), and whether it is still alive.

An owner is `host:pid:start`: the host name, the process id and where and when the process
started (the machine's id, this boot's id and the kernel's start time of the process), so that
a process id the kernel gave to another process since (after the owner died, or after a reboot)
is not taken for the owner, and a machine of the same host name is not taken for this one.
Older owners without the start (`host:pid`) are judged by the process id alone.
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str = ""  # "<machine id>.<boot id>.<start time in clock ticks>"; "": not recorded

    def __str__(self) -> str:
        tail = f":{self.start}" if self.start else ""
        return f"{self.host}:{self.pid}{tail}"

    @property
    def local(self) -> bool:
        """On this host: whether it is alive can be told here."""
        if self.host != socket.gethostname():
            return False
        machine = self.start.split(".")[0] if self.start.count(".") == 2 else ""
        return not machine or machine == _machine_id()


def parse(text: str) -> Owner | None:
    """The owner `text` names (`host:pid` or `host:pid:start`), or None if it names none."""
    parts = (text or "").strip().split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1].isdigit():
        return None
    return Owner(parts[0], int(parts[1]), parts[2] if len(parts) == 3 else "")


def _first_line(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.readline().strip().replace("-", "")[:12]
    except OSError:
        return ""


@functools.cache
def _boot_id() -> str:
    return _first_line("/proc/sys/kernel/random/boot_id")


@functools.cache
def _machine_id() -> str:
    return _first_line("/etc/machine-id") or "-"


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first), or []."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    # The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    return stat[stat.rfind(")") + 2 :].split()


def start_of(pid: int) -> str:
    """Where and when process `pid` started ("<machine>.<boot>.<ticks>"), or "" if it is gone
    or this system does not say."""
    fields = _stat(pid)
    return f"{_machine_id()}.{_boot_id()}.{fields[19]}" if len(fields) >= 20 else ""


def me() -> Owner:
    """This process."""
    pid = os.getpid()
    return Owner(socket.gethostname(), pid, start_of(pid))


def running(pid: int) -> bool:
    """Whether a process `pid` exists on this host (a zombie included; another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def alive(owner: Owner | str | None) -> bool | None:
    """Whether the owner is still running: True or False for a process of this host, None when
    this host cannot tell (another host's process, or no owner named)."""
    found = parse(owner) if isinstance(owner, str) else owner
    if found is None or not found.local:
        return None
    if not running(found.pid):
        return False
    fields = _stat(found.pid)
    if not fields:  # no /proc here: the process id is all there is
        return True
    if fields[0] in ("Z", "X"):  # killed, not yet reaped by its parent: it runs nothing
        return False
    return not found.start or start_of(found.pid) == found.start
