"""A persistent shell session inside a task container.

One `bash` per episode, started with a single `docker exec` whose stdin and stdout stay open.
Each command is framed as `__endless_run <bytes> <nonce>\\n<command>`: the shell reads exactly
that many bytes (in the C locale, whatever the agent sets) into a variable and `eval`s it, so
`cd`, variables, functions and background jobs persist, and a command with a syntax error cannot
swallow the framing. Its stdin is /dev/null, stderr is merged into stdout, and an end marker
carrying a fresh random nonce, the exit code and the working directory follows it. Per-command
overhead is a few hundred microseconds (bench/shell_overhead.py).

Every process a command starts carries ENDLESS_CMD=<nonce> in its environment. On timeout the
harness interrupts (SIGINT, then SIGKILL) exactly those processes from a root exec; background
jobs of earlier commands survive. If the shell itself is stuck (a busy loop in a builtin), or the
command ends the shell (`exit`), a new shell is started in the last known working directory and
the observation says so.
"""

from __future__ import annotations

import contextlib
import secrets
import select
import shlex
import socket
import struct
import time
from dataclasses import dataclass

import docker.errors

from endless_assets.models import AGENT_HOME, AGENT_USER
from endless_assets.sandbox.client import SandboxError
from endless_assets.sandbox.container import TaskContainer

AGENT_PATH = "/home/user/.local/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
DEFAULT_OUTPUT_CAP = 50_000
_PRELUDE = r"""
exec 2>&1
__endless_run() {
  LC_ALL=C IFS= builtin read -r -N "$1" __endless_cmd
  builtin export ENDLESS_CMD="$2"
  builtin eval "$__endless_cmd" </dev/null
  builtin printf '\n%s %d %s\n' "$2" "$?" "$PWD"
}
printf 'ready-%s\n' "$1"
"""


@dataclass(frozen=True)
class CommandResult:
    output: str  # decoded, capped at the session's output cap
    exit_code: int | None  # None when the command was interrupted by the timeout
    timed_out: bool
    original_bytes: int  # size of the full output before capping
    truncated: bool
    seconds: float
    shell_restarted: bool = False
    note: str = ""  # what the harness did (interrupted, restarted), for the observation


class ShellSession:
    """A persistent bash as the agent user. Not thread-safe; one per episode."""

    def __init__(
        self,
        container: TaskContainer,
        *,
        user: str = AGENT_USER,
        cwd: str = AGENT_HOME,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        env: dict[str, str] | None = None,
    ) -> None:
        self.container = container
        self.user = user
        self.cwd = cwd
        self.output_cap = output_cap
        self.env = {
            "HOME": AGENT_HOME,
            "USER": user,
            "LOGNAME": user,
            "PATH": AGENT_PATH,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            **(env or {}),
        }
        self._sock: socket.socket | None = None
        self._raw = None
        self._pending = b""  # stdout bytes read past the previous marker
        self.restarts = 0
        self._start()

    # -- lifecycle -----------------------------------------------------------------------------
    def _start(self) -> None:
        api = self.container.client.api
        token = secrets.token_hex(8)
        try:
            exec_id = api.exec_create(
                self.container.id,
                ["bash", "--noprofile", "--norc", "-s", token],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                user=self.user,
                workdir=self.cwd,
                environment=self.env,
            )["Id"]
            raw = api.exec_start(exec_id, socket=True, detach=False, tty=False)
        except docker.errors.APIError as exc:
            raise SandboxError(f"starting the shell failed: {exc}") from exc
        self._raw = raw
        self._sock = getattr(raw, "_sock", raw)
        self._sock.setblocking(True)
        self._pending = b""
        self._send(_PRELUDE.encode())
        ready = f"ready-{token}\n".encode()
        data = self._read_until(lambda buf: ready in buf, time.monotonic() + 30)
        if data is None or ready not in data:
            raise SandboxError("the shell did not start in the container")
        self._pending = data.split(ready, 1)[1]

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = None

    def __enter__(self) -> ShellSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- I/O -------------------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise _ShellGone(str(exc)) from exc

    def _read_frames(self, deadline: float) -> bytes | None:
        """Read what is available of the multiplexed exec stream; None at EOF, b"" on timeout."""
        assert self._sock is not None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b""
        ready, _, _ = select.select([self._sock], [], [], remaining)
        if not ready:
            return b""
        try:
            chunk = self._sock.recv(262_144)
        except OSError:
            return None
        if not chunk:
            return None
        return chunk

    def _read_until(self, done, deadline: float) -> bytes | None:
        """Accumulate demultiplexed stdout until done(buffer) or the deadline (small outputs)."""
        frames = _FrameDecoder()
        buffer = b""
        while True:
            chunk = self._read_frames(deadline)
            if chunk is None:
                return buffer or None
            if chunk == b"":
                return buffer
            buffer += frames.feed(chunk)
            if done(buffer):
                return buffer

    # -- commands --------------------------------------------------------------------------------
    def run(self, command: str, timeout: float = 60.0) -> CommandResult:
        """Run one command; returns its merged output, exit code and what the harness had to do."""
        if self._sock is None:
            raise SandboxError("the shell session is closed")
        command = command.replace("\x00", "")
        nonce = "__ENDLESS_END_" + secrets.token_hex(12)
        started = time.monotonic()
        collector = _OutputCollector(self.output_cap, nonce.encode())
        collector.feed(self._pending)
        self._pending = b""
        body = command.encode("utf-8", errors="surrogateescape")
        payload = f"__endless_run {len(body)} {nonce}\n".encode() + body
        try:
            self._send(payload)
            finished = self._collect(collector, started + timeout)
        except _ShellGone:
            finished = False
            return self._after_shell_died(collector, started, "")
        if finished:
            return self._result(collector, started, timed_out=False)
        if collector.eof:
            return self._after_shell_died(collector, started, "")
        # Timed out: interrupt what this command started, then kill it, then give up on the shell.
        self._signal_command(nonce, "INT")
        if self._collect(collector, time.monotonic() + 1.0):
            return self._result(collector, started, timed_out=True, note="interrupted (SIGINT)")
        self._signal_command(nonce, "KILL")
        if self._collect(collector, time.monotonic() + 1.0):
            return self._result(collector, started, timed_out=True, note="killed (SIGKILL)")
        self._restart()
        return self._result(
            collector,
            started,
            timed_out=True,
            note="the shell itself was stuck and was restarted in "
            f"{self.cwd}; shell variables and functions were lost",
            restarted=True,
        )

    def _collect(self, collector: _OutputCollector, deadline: float) -> bool:
        frames = collector.frames
        while not collector.done:
            chunk = self._read_frames(deadline)
            if chunk is None:
                collector.eof = True
                return False
            if chunk == b"":
                return False
            collector.feed(frames.feed(chunk))
        return True

    def _result(
        self,
        collector: _OutputCollector,
        started: float,
        *,
        timed_out: bool,
        note: str = "",
        restarted: bool = False,
    ) -> CommandResult:
        if collector.done:
            self._pending = collector.after_marker
            if collector.cwd:
                self.cwd = collector.cwd
        output, original, truncated = collector.text()
        return CommandResult(
            output=output,
            exit_code=None if timed_out else collector.exit_code,
            timed_out=timed_out,
            original_bytes=original,
            truncated=truncated,
            seconds=time.monotonic() - started,
            shell_restarted=restarted,
            note=note,
        )

    def _after_shell_died(
        self, collector: _OutputCollector, started: float, _: str
    ) -> CommandResult:
        self._restart()
        return self._result(
            collector,
            started,
            timed_out=False,
            note=f"the shell exited; a new shell was started in {self.cwd}",
            restarted=True,
        )

    def _restart(self) -> None:
        self.close()
        self.restarts += 1
        # Kill whatever is left of the old shell's foreground work, then start afresh.
        try:
            self._start()
        except SandboxError:
            self.cwd = AGENT_HOME
            self._start()

    def _signal_command(self, nonce: str, signal: str) -> None:
        script = (
            "for p in /proc/[0-9]*; do "
            f"if grep -qsxzF {shlex.quote('ENDLESS_CMD=' + nonce)} $p/environ; then "
            f"kill -{signal} ${{p#/proc/}} 2>/dev/null; fi; done; true"
        )
        # As the agent's own uid: root here lacks CAP_SYS_PTRACE, so it cannot read the agent's
        # /proc/<pid>/environ, while the agent's uid can read and signal its own processes.
        self.container.exec_root(["sh", "-c", script], user=self.user)


class _ShellGone(Exception):
    pass


class _FrameDecoder:
    """Docker's multiplexed stream: 8-byte header (stream, 0, 0, 0, big-endian size) + payload."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= 8:
            size = struct.unpack(">I", self._buf[4:8])[0]
            if len(self._buf) < 8 + size:
                break
            out.append(self._buf[8 : 8 + size])
            self._buf = self._buf[8 + size :]
        return b"".join(out)


class _OutputCollector:
    """Keeps the head of the output up to a cap, counts the rest, and finds the end marker."""

    TAIL = 512

    def __init__(self, cap_chars: int, nonce: bytes) -> None:
        self.cap_bytes = cap_chars * 4 + 4  # UTF-8 worst case; trimmed to characters at the end
        self.cap_chars = cap_chars
        self.marker = b"\n" + nonce + b" "
        self.head = bytearray()
        self.tail = b""  # unconsumed bytes that may hold a split marker
        self.total = 0
        self.done = False
        self.eof = False
        self.exit_code: int | None = None
        self.cwd = ""
        self.after_marker = b""
        self.frames = _FrameDecoder()

    def feed(self, data: bytes) -> None:
        if self.done or not data:
            if self.done:
                self.after_marker += data
            return
        buf = self.tail + data
        at = buf.find(self.marker)
        if at >= 0:
            end = buf.find(b"\n", at + len(self.marker))
            if end < 0:
                self.tail = buf  # marker line incomplete: wait for more
                return
            self._keep(buf[:at])
            line = buf[at + len(self.marker) : end].decode("utf-8", errors="replace")
            code, _, cwd = line.partition(" ")
            self.exit_code = int(code) if code.lstrip("-").isdigit() else None
            self.cwd = cwd
            self.after_marker = buf[end + 1 :]
            self.tail = b""
            self.done = True
            return
        keep = len(self.marker) + 4096
        if len(buf) > keep:
            self._keep(buf[:-keep])
            self.tail = buf[-keep:]
        else:
            self.tail = buf

    def _keep(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap_bytes - len(self.head)
        if room > 0:
            self.head += data[:room]

    def text(self) -> tuple[str, int, bool]:
        if not self.done and self.tail:
            self._keep(self.tail)
            self.tail = b""
        decoded = bytes(self.head).decode("utf-8", errors="replace")
        truncated = self.total > len(self.head) or len(decoded) > self.cap_chars
        return decoded[: self.cap_chars], self.total, truncated
