"""A persistent shell session inside a task container.

One `bash` per episode, started with a single `docker exec` whose stdin and stdout stay open;
`cd`, variables, functions and background jobs persist across commands. The framing:

- The exec runs a wrapper shell that reads a fresh exit token from stdin (so the agent's shell
  never has it), runs the agent's `bash` on `/dev/stdin`, and when that shell ends (`exit 3`,
  `set -e`, a signal) prints `\n<exit token> <exit code>\n`, so the code is reported.
- The agent's bash reads its script on fd 255 (close-on-exec), so fd 0 is /dev/null for good and
  no command can read the framing. Its error messages therefore start `/dev/stdin: line N:`.
- A command is sent as the line `__endless_run <bytes>;builtin eval -- "$__endless_cmd" 2>&1;
  __endless_end`, then a fresh tag, the command's bytes and a fresh end marker. `__endless_run`
  reads the tag and exactly that many bytes (in the C locale, whatever the agent sets), so a
  syntax error cannot swallow the framing; the command runs at the top level, as typed.
  `__endless_end` restores stdout, reads the marker (in the pipe while the command ran, never in
  the environment, a variable or an argument, so no command can print it) and prints
  `\n<marker> <exit code> <cwd><marker>\n` (the marker ends the cwd: any byte but NUL may be in it).
- Fd 2 is closed between commands and a copy of stdout only during the `eval`, so `set -x`
  traces the command but not the framing. Per command the harness opens no file descriptor (it
  only dup2s into fds 1 and 2), so `ulimit -n 4` cannot brick the shell. A command's `exec >f`
  or `exec 2>f` lasts until it ends: the next command writes to the harness again.
Per-command overhead is a few hundred microseconds (bench/shell_overhead.py).

Every process a command starts carries ENDLESS_CMD=<tag> in its environment (the tag is not the
marker). On timeout the harness interrupts (SIGINT, then SIGKILL) exactly those processes from a
root exec; background jobs of earlier commands survive. If the shell itself is stuck (a busy loop
in a builtin) it is killed; if it ends, its exit code is reported. Either way a new shell starts
in the last known working directory and the observation says so.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import select
import shlex
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import docker.errors

from endless_assets.models import AGENT_HOME
from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.containers.shell_stream import FrameDecoder, OutputCollector, ShellGone
from endless_assets.sandbox.engine.client import SandboxError

AGENT_PATH = "/home/user/.local/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
DEFAULT_OUTPUT_CAP = 50_000
MARKER_CHARS = 24  # hex characters of a command's end marker
TAG_CHARS = 16  # hex characters of the ENDLESS_CMD tag of a command's processes
_WRAPPER = (
    'IFS= read -r t || exit; bash --noprofile --norc /dev/stdin; printf "\\n%s %d\\n" "$t" "$?"'
)
_PRELUDE = r"""exec 0</dev/null 254>&1 2>&-
BASH_ARGV0=bash
__endless_run() {
  builtin read -r -N TAG_CHARS -u 255 ENDLESS_CMD
  builtin export ENDLESS_CMD
  LC_ALL=C IFS= builtin read -r -N "$1" -u 255 __endless_cmd
}
__endless_end() {
  builtin local s=$? m
  exec 1>&254
  builtin read -r -N MARKER_CHARS -u 255 m
  builtin printf '\n%s %d %s%s\n' "$m" "$s" "${PWD-}" "$m"
}
builtin printf 'ready-%s %d\n' TOKEN "$$"
""".replace("MARKER_CHARS", str(MARKER_CHARS)).replace("TAG_CHARS", str(TAG_CHARS))
# Exit 0 unless the container's processes use 90% of its pids limit or more (cgroup v2 or v1;
# no limit, or no cgroup file to read: 0). Shell builtins only: it forks nothing.
_PIDS_LEFT = (
    "p=/sys/fs/cgroup/pids; [ -d $p ] || p=/sys/fs/cgroup; "
    "read -r n < $p/pids.current && read -r m < $p/pids.max || exit 0; "
    '[ "$m" = max ] || [ $((n * 10)) -lt $((m * 9)) ]'
)
_FRAME = '__endless_run {};builtin eval -- "$__endless_cmd" 2>&1;__endless_end\n'


@dataclass(frozen=True)
class CommandResult:
    output: str  # decoded, capped at the session's output cap
    exit_code: int | None  # None when interrupted by the timeout (or the stream just ended)
    timed_out: bool
    original_bytes: int  # size of the full output before capping
    truncated: bool
    seconds: float
    shell_restarted: bool = False
    note: str = ""  # what the harness did (interrupted, restarted), for the observation


class ShellSession:
    """A persistent bash as the agent user (the container's agent, identity.py, unless `user`
    says otherwise), in its working directory. Not thread-safe; one per episode."""

    def __init__(
        self,
        container: TaskContainer,
        *,
        user: str | None = None,
        cwd: str | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        env: dict[str, str] | None = None,
        stop_agent: Callable[[], None] | None = None,
        lazy: bool = False,
    ) -> None:
        """`lazy`: start the shell at the first command (an episode that runs none, the
        do-nothing control, then costs no `docker exec`)."""
        agent = container.agent
        self.container = container
        self.user = user or agent.exec_user
        # Kills every process of the agent without a fork (the container's grader does it): a
        # new shell cannot start while the agent's processes fill the pids limit.
        self.stop_agent = stop_agent
        self.home_dir = agent.workdir or "/"
        self.cwd = cwd or self.home_dir
        self.output_cap = output_cap
        # Our own agent gets our environment; an imported task's gets its image's (PATH
        # included: docker exec passes the image's ENV lines), as Harbor's and TB's agents do.
        names = {"USER": agent.name or self.user, "LOGNAME": agent.name or self.user}
        ours = {"HOME": AGENT_HOME, "PATH": AGENT_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        self.env = {
            **(ours if agent.ours else {"HOME": agent.home}),
            **names,
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            **(env or {}),
        }
        self._sock: socket.socket | None = None
        self._raw = None
        self._pending = b""  # stdout bytes read past the previous marker
        self._exit_token = b""  # what the wrapper prints when the shell ends
        self._pid = 0  # the agent's bash, to kill it when it is stuck
        self.restarts = 0
        self._closed = False
        if not lazy:
            self._start()

    # -- lifecycle -----------------------------------------------------------------------------
    def _start(self, wait: float = 30.0) -> None:
        self.container.awake()
        api = self.container.client.api
        token = secrets.token_hex(8)
        try:
            exec_id = api.exec_create(
                self.container.id,
                ["bash", "--noprofile", "--norc", "-c", _WRAPPER],
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
        self._exit_token = secrets.token_hex(12).encode()
        self._send(self._exit_token + b"\n" + _PRELUDE.replace("TOKEN", token).encode())
        ready = re.compile(rb"ready-" + token.encode() + rb" (\d+)\n")
        data = self._read_until(ready.search, time.monotonic() + wait)
        found = ready.search(data or b"")
        if not found:
            raise SandboxError("the shell did not start in the container")
        self._pid = int(found.group(1))
        self._pending = data[found.end() :]

    def close(self) -> None:
        self._closed = True
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
            raise ShellGone(str(exc)) from exc

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
        frames = FrameDecoder()
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
        if self._sock is None and not self._closed:
            self._start()
        if self._sock is None:
            raise SandboxError("the shell session is closed")
        marker = secrets.token_hex(MARKER_CHARS // 2).encode()
        tag = secrets.token_hex(TAG_CHARS // 2)
        started = time.monotonic()
        collector = OutputCollector(self.output_cap, marker, self._exit_token)
        collector.feed(self._pending)
        self._pending = b""
        body = command.replace("\x00", "").encode("utf-8", errors="surrogateescape")
        try:
            self._send(_FRAME.format(len(body)).encode() + tag.encode() + body + marker)
            finished = self._collect(collector, started + timeout)
        except ShellGone:
            finished, collector.eof = False, True
        if finished or collector.eof:
            return self._finish(collector, started)
        # Timed out: interrupt what this command started, then kill it, then give up on the shell.
        for signal, note in (("INT", "interrupted (SIGINT)"), ("KILL", "killed (SIGKILL)")):
            self._signal_command(tag, signal)
            if self._collect(collector, time.monotonic() + 1.0) or collector.eof:
                return self._finish(collector, started, timed_out=True, note=note)
        stopped = self._restart(kill=True)
        note = (
            f"the shell itself was stuck and was restarted in {self.cwd}; "
            "shell variables and functions were lost"
        ) + stopped
        return self._result(collector, started, timed_out=True, note=note, restarted=True)

    def _collect(self, collector: OutputCollector, deadline: float) -> bool:
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

    def _finish(
        self,
        collector: OutputCollector,
        started: float,
        *,
        timed_out: bool = False,
        note: str = "",
    ) -> CommandResult:
        """The result once the end line came, or the shell ended (then a new one is started)."""
        if collector.done and not collector.exited:
            self._pending = collector.after_marker
            if collector.cwd:
                self.cwd = collector.cwd
            return self._result(collector, started, timed_out=timed_out, note=note)
        stopped = self._restart()
        exited = f"the shell exited; a new shell was started in {self.cwd}{stopped}"
        note = f"{note}; {exited}" if note else exited
        return self._result(collector, started, timed_out=timed_out, note=note, restarted=True)

    def _result(
        self,
        collector: OutputCollector,
        started: float,
        *,
        timed_out: bool,
        note: str = "",
        restarted: bool = False,
    ) -> CommandResult:
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

    def _restart(self, *, kill: bool = False) -> str:
        """Start a new shell; returns a note for the agent when more than that had to be done."""
        if kill:  # a shell stuck in a builtin loop would go on burning the container's CPU
            with contextlib.suppress(SandboxError):
                self.container.exec_root(["kill", "-KILL", str(self._pid)], user=self.user)
        self.close()
        self.restarts += 1
        try:
            # With a way out, a shell that does not answer soon is not waited for long.
            self._start(wait=30.0 if self.stop_agent is None else 10.0)
            # The new shell may have taken the one pid the old one freed, in a container whose
            # pids limit the agent's processes fill: it could not run a single command.
            if self.stop_agent is None or self._agent_can_go_on():
                return ""
            self.close()
        except SandboxError:
            if self.stop_agent is None:
                self.cwd = self.home_dir
                self._start()
                return ""
        # Most likely the agent's processes fill the pids limit (a fork bomb): none may go on.
        self.stop_agent()
        try:
            self._start()
        except SandboxError:
            self.cwd = self.home_dir
            self._start()
        return "; a new shell could not start, so every process of yours was killed"

    def _agent_can_go_on(self) -> bool:
        """Whether the agent can go on: a process of its starts, and the container's processes
        do not (nearly) fill its pids limit. A fork bomb takes every pid as it is freed, but not
        always before our own start takes one: a start that succeeded says little by itself."""
        try:
            return self.container.exec_root(["sh", "-c", _PIDS_LEFT], user=self.user).exit_code == 0
        except SandboxError:
            return False

    def _signal_command(self, tag: str, signal: str) -> None:
        script = (
            "for p in /proc/[0-9]*; do "
            f"if grep -qsxzF {shlex.quote('ENDLESS_CMD=' + tag)} $p/environ; then "
            f"kill -{signal} ${{p#/proc/}} 2>/dev/null; fi; done; true"
        )
        # As the agent's own uid: root here lacks CAP_SYS_PTRACE, so it cannot read the agent's
        # /proc/<pid>/environ, while the agent's uid can read and signal its own processes.
        self.container.exec_root(["sh", "-c", script], user=self.user)
