"""Which process owns a run or a container, and whether it still runs: a process killed with
SIGKILL is dead at once (even before its parent reaps it), a process id the kernel handed to
another process is not the owner, and another host's process is never judged here."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

from endless_assets import processes


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "600"])


def test_a_running_process_is_alive_and_named_by_host_pid_and_start():
    proc = _sleeper()
    try:
        owner = processes.Owner(socket.gethostname(), proc.pid, processes.start_of(proc.pid))
        assert processes.alive(owner) is True
        assert processes.alive(str(owner)) is True
        assert processes.parse(str(owner)) == owner
        assert str(processes.me()).startswith(f"{socket.gethostname()}:{os.getpid()}:")
    finally:
        proc.kill()
        proc.wait()


def test_a_process_killed_with_sigkill_is_dead_before_its_parent_reaps_it():
    proc = _sleeper()
    owner = processes.Owner(socket.gethostname(), proc.pid, processes.start_of(proc.pid))
    os.kill(proc.pid, signal.SIGKILL)
    try:
        # Not reaped yet: a zombie, which `kill(pid, 0)` alone takes for a live process.
        for _ in range(1000):
            with open(f"/proc/{proc.pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        assert processes.alive(owner) is False
    finally:
        proc.wait()
    assert processes.alive(owner) is False


def test_a_process_id_the_kernel_gave_to_another_process_is_not_the_owner():
    proc = _sleeper()
    try:
        start = processes.start_of(proc.pid)
        machine, boot, ticks = start.split(".")
        host = socket.gethostname()
        earlier = processes.Owner(host, proc.pid, f"{machine}.{boot}.{ticks}0")
        before_reboot = processes.Owner(host, proc.pid, f"{machine}.0{boot}.{ticks}")
        assert processes.alive(earlier) is False
        assert processes.alive(before_reboot) is False
    finally:
        proc.kill()
        proc.wait()


def test_another_hosts_process_is_not_judged_here():
    me = processes.me()
    assert processes.alive(processes.Owner("another-host", me.pid, me.start)) is None
    machine, boot, ticks = me.start.split(".")
    twin = processes.Owner(me.host, me.pid, f"x{machine}.{boot}.{ticks}")  # same name, other id
    assert processes.alive(twin) is None
    assert processes.alive("") is None
    assert processes.alive("not an owner") is None


def test_an_older_owner_without_a_start_is_judged_by_its_process_id():
    proc = _sleeper()
    owner = f"{socket.gethostname()}:{proc.pid}"
    assert processes.alive(owner) is True
    proc.kill()
    proc.wait()
    assert processes.alive(owner) is False
