"""Run a pytest file inside a container through its grader (grader.py, which lists each measure)
and turn pytest's outcome into a verdict: reward 1 only if pytest exits 0 by itself *and*
reports at least one test, none failed, errored or was skipped.

A root agent's verdict, and that of a task graded by its own script (bundle.py), is given in a
verifier container instead (verifier.py); a script's verdict is its reward file: 1 passes,
anything else fails, none is an error."""

from __future__ import annotations

import contextlib
import json
import secrets
import select
import socket
import time
from dataclasses import dataclass, field

from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.containers.shell_stream import FrameDecoder
from endless_assets.sandbox.engine.client import SandboxError, engine_failure
from endless_assets.sandbox.grading import bundle, system_paths
from endless_assets.sandbox.grading.grader_source import GRADER_SOURCE

OUTPUT_TAIL = 8000
CLEAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
ROOT_HOME = "/root"  # the grader's HOME: set, so that nothing looks root up at its start (NSS)
PATH_DIRS = "ENDLESS_PATH_DIRS"  # the image's PATH, for the self-description's system locations
READ_ONLY = "ENDLESS_READ_ONLY"  # what the engine was asked to make read-only, checked
CODE_DIRS = "ENDLESS_CODE_DIRS"  # the paths the image's ENV loads code from (system_paths.py)
LOADS = "ENDLESS_LOADS"  # describe every library and configuration grading could load


@dataclass(frozen=True)
class Verdict:
    passed: bool
    status: str  # passed | failed | error | timeout | no_tests | skipped | tampered
    exit_code: int
    tests: int
    failures: int
    errors: int
    output: str  # tail of pytest's report, for repair feedback and debugging
    seconds: float
    script: str = ""  # the task's own script that graded ("": pytest, by our grader)
    reward: float | None = None  # what the script wrote
    needs_network: str = ""  # a grading step that needs the network (offline.py), if one failed
    detail: str = ""  # why there is no verdict of the test's own (no reward file, tampering)
    # (the reference solution's episode, learning) what it changed in the system locations
    system_changes: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        if self.script:
            reward = "no reward" if self.reward is None else f"reward {self.reward:g}"
            tests = f", {self.tests} tests, {self.failures} failures" if self.tests else ""
            text = f"{self.status}: {self.script} exit {self.exit_code}, {reward}{tests}"
        else:
            text = (
                f"{self.status}: exit {self.exit_code}, {self.tests} tests, "
                f"{self.failures} failures, {self.errors} errors"
            )
        return f"{text} ({self.detail})" if self.detail else text


def parse_verdict(
    exit_code: int,
    counts: dict[str, int] | None,
    output: str,
    seconds: float,
    *,
    timed_out: bool = False,
) -> Verdict:
    """pytest's exit code and totals -> a verdict (the reward rule: module docstring; a skip can
    hide an assertion behind a condition the agent controls)."""
    tests = failures = errors = skipped = 0
    if counts is not None:
        tests, failures = counts.get("tests", 0), counts.get("failures", 0)
        errors, skipped = counts.get("errors", 0), counts.get("skipped", 0)
    if timed_out:
        status = "timeout"
    elif counts is None and exit_code in (0, 1):
        status = "error"  # pytest ran but its report could not be read: never a pass
    elif exit_code == 5 or (exit_code == 0 and tests - skipped <= 0):
        status = "no_tests"
    elif exit_code == 0 and skipped:
        status = "skipped"
    elif exit_code == 0 and failures == 0 and errors == 0:
        status = "passed"
    elif exit_code == 1 and failures + errors > 0:
        status = "failed"
    else:
        status = "error"  # a usage or internal error, or pytest killed by a signal
    return Verdict(
        passed=status == "passed",
        status=status,
        exit_code=exit_code,
        tests=tests,
        failures=failures,
        errors=errors,
        output=output[-OUTPUT_TAIL:],
        seconds=seconds,
    )


def pytest_request(
    box: TaskContainer, filename: str, test: str, timeout: float, uid: int, **flags: bool
) -> dict:
    """What the grader gets to run `test` as `uid` (flags: `stop_agent`, `verifier`)."""
    return {
        "id": secrets.token_hex(6),
        "filename": filename,
        "test": test,
        "timeout": timeout,
        "agent_uid": uid,
        "env": box.image_env,
        **flags,
    }


def reply_verdict(reply: dict, started: float) -> Verdict:
    """The grader's reply to a pytest request -> a verdict (`parse_verdict`)."""
    return parse_verdict(
        int(reply.get("exit_code", -1)),
        reply.get("counts"),
        reply.get("output", ""),
        time.monotonic() - started,
        timed_out=bool(reply.get("timed_out")),
    )


class InterpreterMoved(SandboxError):
    """A later grader's interpreter has another prefix or path than the first one had."""


class GraderLost(SandboxError):
    """The grader gave no answer. `running`: it had said that the test started, so code of the
    agent's may have run since (grader_fence.py)."""

    running = False


class GraderGone(GraderLost):
    """The grader process died (its stream ended)."""


class GraderSilent(GraderLost):
    """The grader did not answer by its deadline (it enforces the test's own timeout)."""


DISTURBED = "grading was disturbed while the test ran"


def disturbed(exc: GraderLost) -> dict:
    """The reply a grader lost while the test ran stands for: reward 0, scored. Only what the test
    ran can have done it: a retry would be a second chance the agent's code decides."""
    return {"exit_code": 3, "counts": None, "output": f"{DISTURBED}: {exc}"}


class _Grader:
    """The client end of one container's grader process."""

    def __init__(
        self, container: TaskContainer, pycache_prefix: str = "", preload: bool = True
    ) -> None:
        self.container = container
        container.awake()
        api = container.client.api
        # The source goes on the command line: nothing of it is on disk for the agent to change.
        # In a verifier container, the programs are those the first grader named.
        programs = container.grading_programs
        env, python = programs.get("env", "env"), programs.get("python", "python3")
        image_path = container.image_env.get("PATH", "")
        code = system_paths.code_locations(container.image_env, container.agent.workdir)
        command = [env, "-i", f"PATH={CLEAN_PATH}", "LANG=C.UTF-8", f"HOME={ROOT_HOME}"]
        command += [f"{PATH_DIRS}={image_path}", f"{READ_ONLY}={':'.join(container.read_only)}"]
        command += [f"{CODE_DIRS}={':'.join(code)}"]
        if container.protected is None and (container.agent.is_root or not container.agent.ours):
            command.append(f"{LOADS}=1")  # (a snapshot of it may be graded: verifier.py)
        command += [python, "-I", "-B"]
        if pycache_prefix:
            command += ["-X", f"pycache_prefix={pycache_prefix}"]
        with engine_failure("starting the grader failed"):
            exec_id = api.exec_create(
                container.id,
                [*command, "-c", GRADER_SOURCE, *([] if preload else ["--no-preload"])],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                user="0",  # a uid: the engine looks a name up in the container's /etc/passwd
                workdir="/",
            )["Id"]
            raw = api.exec_start(exec_id, socket=True, detach=False, tty=False)
        self._raw = raw
        self._sock: socket.socket = getattr(raw, "_sock", raw)
        self._sock.setblocking(True)
        self._frames = FrameDecoder(streams=(1,))  # stdout: the grader's replies
        self._lines = b""
        first = self._read_line(time.monotonic() + 60)
        try:
            hello = json.loads(first)
        except ValueError:
            hello = {}
        if not isinstance(hello, dict) or hello.get("ready") is not True:
            self.close()
            raise GraderGone(f"the grader did not start: {first[:500]!r}")
        if hello.get("writable"):
            self.close()
            raise SandboxError(
                "the engine did not make the verifier's system locations read-only: "
                + ", ".join(hello["writable"][:5])
            )
        if container.protected is None:  # the first grader, before any agent command
            for name in ("protected", "system", "absent", "homes"):
                setattr(container, name, [str(p) for p in hello.get(name) or []])
            container.grading_programs = dict(hello.get("programs") or {})
            container.interpreter = hello.get("interpreter")
            container.fenced = bool(hello.get("fence"))
        elif container.interpreter not in (None, hello.get("interpreter")):
            self.close()  # (its prefix or path moved: e.g. a pyvenv.cfg or lib/ the agent made)
            raise InterpreterMoved(
                "the grader's interpreter finds its library elsewhere than before the agent's "
                f"first command: {hello.get('interpreter')!r:.300}"
            )

    def ask(self, request: dict, *, deadline: float) -> dict:
        """The grader's reply to `request`. Raises GraderLost (`running`: after the grader said
        the request's test started) when it dies or does not answer by `deadline`."""
        try:
            self._sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            raise GraderGone(f"the grader is gone: {exc}") from exc
        running = False
        while True:
            try:
                line = self._read_line(deadline)
            except GraderLost as exc:
                exc.running = running
                raise
            try:
                reply = json.loads(line)
            except ValueError as exc:
                raise SandboxError(f"the grader replied nonsense: {line[:500]!r}") from exc
            if reply.get("id") != request["id"]:
                raise SandboxError("the grader answered another request")
            if set(reply) != {"id", "running"}:
                return reply
            running = True

    def _read_line(self, deadline: float) -> str:
        while b"\n" not in self._lines:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GraderSilent("the grader did not answer in time")
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if not ready:
                continue
            chunk = self._sock.recv(262_144)
            if not chunk:
                tail = self._lines.decode("utf-8", "replace")[-2000:]
                raise GraderGone(f"the grader exited unexpectedly: {tail}")
            self._lines += self._frames.feed(chunk)
        line, _, self._lines = self._lines.partition(b"\n")
        return line.decode("utf-8", "replace")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


def stop_agent(container: TaskContainer, agent_uid: int | None = None) -> None:
    """Kill every process of the agent's uid through the container's grader (no fork needed: the
    way out when the agent fills the pids limit and no `docker exec` can start). A root agent's
    container is restarted instead (every process dies, the files stay)."""
    uid = container.agent.uid if agent_uid is None else agent_uid
    if uid == 0:
        container.restart()
        return
    stop_agent_processes(container, uid)


def stop_agent_processes(container: TaskContainer, uid: int) -> None:
    request = {"id": secrets.token_hex(6), "op": "stop", "agent_uid": uid}
    grader_for(container).ask(request, deadline=time.monotonic() + 60)


def in_verifier(spec: bundle.Verifier | None, uid: int, stop_agent: bool) -> bool:
    """Is this verdict given in a verifier container (a task's own script; a root agent's)?"""
    return (spec is not None and bool(spec.script)) or (uid == 0 and stop_agent)


def start_grader(container: TaskContainer, test_source: str | None = None) -> None:
    """Start the container's grader now (else the first verdict does); it imports pytest ahead
    unless `test_source`'s verdict is a verifier container's."""
    preload = True
    if test_source is not None:
        preload = not in_verifier(bundle.unpack(test_source), container.agent.uid, True)
    grader_for(container, preload=preload)


def grader_for(container: TaskContainer, pycache_prefix: str = "", preload: bool = True) -> _Grader:
    """The container's resident grader, started on first use (`preload`: importing pytest)."""
    if container.grader is None:
        container.grader = _Grader(container, pycache_prefix, preload)
    assert isinstance(container.grader, _Grader)
    return container.grader
