"""The grader's fence: nothing a verdict's test or a task's script runs can signal the grader.

A part of the grader's source (grader_source.py), and of the pytest stand-in's (offline_keep.py).
A root agent's program, run by the test or by git from a hook, has the test's uid, in a verifier
the grader's: it could kill the grader (a retry: a second chance the agent controls) or PID 1's
child. So the test and the script first enter a Landlock domain scoped for signals (`fence`,
Linux 6.12, ABI 6), which no process in it can leave or signal out of. Where the kernel lacks
it, the hello says so (`fence`), and a grader lost once the test started (`announce`) is still
scored 0 (verdict.py), never retried."""

import contextlib
import ctypes
import json
import os
import select
import signal
import struct
import sys

LANDLOCK_CREATE_RULESET, LANDLOCK_RESTRICT_SELF = 444, 446  # (every architecture's numbers)
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_SCOPE_SIGNAL = 2
SCOPED_ABI = 6
REQUEST = {"id": None}  # the request being answered (grader.main sets it)


def _syscall(*args):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(*args), ctypes.get_errno()


def landlock_abi():
    """The kernel's Landlock ABI version (0: none)."""
    code, _ = _syscall(
        ctypes.c_long(LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
    )  # fmt: skip
    return max(int(code), 0)


def fence():
    """Put this process and all it starts in a new Landlock domain that may not signal outside
    it. False where the kernel lacks it or the process may not restrict itself (no
    no_new_privs: an exported task's grader under another harness, say)."""
    if landlock_abi() < SCOPED_ABI:
        return False
    attr = ctypes.create_string_buffer(struct.pack("QQQ", 0, 0, LANDLOCK_SCOPE_SIGNAL))
    fd, _ = _syscall(
        ctypes.c_long(LANDLOCK_CREATE_RULESET), attr, ctypes.c_size_t(len(attr.raw)),
        ctypes.c_uint32(0),
    )  # fmt: skip
    if fd < 0:
        return False
    try:
        return _syscall(ctypes.c_long(LANDLOCK_RESTRICT_SELF), ctypes.c_long(fd), 0)[0] == 0
    finally:
        os.close(fd)


def guard_pipes():
    """(go: read, write, done: read, write): the grader holds go's write end while a test runs."""
    return (*os.pipe(), *os.pipe())


def fence_and_guard(go_read, go_write, done_read, done_write):
    """In the child about to run a test or a script: fence it, leaving a guard in that domain,
    then fence it again (nothing in the inner domain can signal the guard). Once `go` closes
    (the test is over, or the grader died) the guard kills every process of both domains at
    once (kill(-1): no fork slips past it) and exits. Unfenced, no guard: kill(-1) would reach
    the grader."""
    if fence() and os.fork() == 0:
        os.close(go_write)
        os.close(done_read)
        with contextlib.suppress(OSError):
            while os.read(go_read, 1):
                pass
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
        os._exit(0)
    for fd in (go_read, go_write, done_read, done_write):
        os.close(fd)
    fence()


def guard_kept(pipes):
    """The grader's side, after the fork."""
    os.close(pipes[0])
    os.close(pipes[3])


def guard_released(pipes, timeout=10.0):
    """The test is over: let its guard end whatever it left, and wait until it has."""
    os.close(pipes[1])
    with contextlib.suppress(OSError):
        while select.select([pipes[2]], [], [], timeout)[0] and os.read(pipes[2], 64):
            pass
    os.close(pipes[2])


def announce():
    """Tell the harness that the test (or script) of the current request starts now."""
    if REQUEST["id"] is not None:
        sys.stdout.write(json.dumps({"id": REQUEST["id"], "running": True}) + "\n")
        sys.stdout.flush()
