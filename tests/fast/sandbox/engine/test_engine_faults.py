"""The engine failing is never the task's fault, and processes started together do not trip over
each other: two launches on a fresh DAGSTER_HOME, and a real Docker engine behind a proxy that
breaks a build, a start or an exec the way a failing engine does (no mocks: every answer that
reaches the harness comes from the engine, or is a connection that really closed)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from project import ROOT

from endless_assets.generation.carried import CarriedGenerator
from endless_assets.interop.imports import import_tasks
from endless_assets.sandbox.image import images
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.stages.environment import build_environment
from endless_assets.stages.runner import ENGINE_RETRIES

# What `launch_job` does before it runs anything, once per line ("a fresh DAGSTER_HOME") read
# from stdin; a process blocks on that read until the test writes to every process at once.
OPENER = r"""
import os, sys
import dagster as dg
from endless_assets.launch import ensure_dagster_home
print("ready", flush=True)
for line in sys.stdin:
    os.environ["DAGSTER_HOME"] = line.strip()
    try:
        ensure_dagster_home()
        with dg.DagsterInstance.get() as instance:
            instance.get_runs(limit=1)
        print("ok", flush=True)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}"[:300].replace("\n", " "), flush=True)
"""
PROCESSES, ROUNDS = 3, 3  # before the lock, most rounds failed in some process


def test_launches_started_at_once_on_a_fresh_dagster_home_all_open_the_instance(tmp_path):
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(PROCESSES)
    ]
    try:
        assert [p.stdout.readline().strip() for p in openers] == ["ready"] * PROCESSES
        failures = []
        for round_no in range(ROUNDS):
            home = tmp_path / f"home-{round_no}"
            for opener in openers:  # the barrier: all of them wait on this line
                opener.stdin.write(f"{home}\n")
                opener.stdin.flush()
            answers = [p.stdout.readline().strip() for p in openers]
            failures += [(home.name, a) for a in answers if a != "ok"]
    finally:
        for opener in openers:
            opener.stdin.close()
            opener.wait()
    assert not failures, failures
    assert [p.returncode for p in openers] == [0] * PROCESSES


# A real engine behind a proxy --------------------------------------------------------------


def _engine_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        pytest.skip("the proxy speaks to a local engine's socket")
    return host.removeprefix("unix://") or "/var/run/docker.sock"


class FaultyEngine:
    """A Unix socket in front of the real engine. Requests pass through (one per connection),
    except: `drop` (a regex of request targets) closes the connection without an answer, as an
    engine that goes away does (only the first `drops` of them, when given: an engine hiccup);
    `truncate_builds` forwards only half of a build's context, so the engine itself fails to
    unpack it and answers with its own error."""

    def __init__(
        self, path: Path, *, drop: str = "", drops: int = -1, truncate_builds: bool = False
    ) -> None:
        self.path, self.drop, self.truncate_builds = path, drop, truncate_builds
        self.drops = drops
        self.dropped = 0
        self.guard = threading.Lock()
        self.upstream = _engine_socket()
        self.requests: list[str] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    return
                head += chunk
            head, _, body = head.partition(b"\r\n\r\n")
            request, *fields = head.decode("latin-1").split("\r\n")
            method, target, _ = request.split(" ", 2)
            self.requests.append(f"{method} {target}")
            if self.drop and re.search(self.drop, target) and self._drop_one():
                return  # closed without an answer
            headers = {}
            for field in fields:
                name, _, value = field.partition(":")
                headers[name.strip().lower()] = (name.strip(), value.strip())
            upgrade = "upgrade" in headers.get("connection", ("", ""))[1].lower()
            if not upgrade:  # one request per connection: its end is the answer's end
                headers["connection"] = ("Connection", "close")
            length = int(headers.get("content-length", ("", "-1"))[1])
            forward = length
            if self.truncate_builds and re.search(r"/build\b", target) and length > 0:
                forward = length // 2
                headers["content-length"] = ("Content-Length", str(forward))
            head = "\r\n".join([request, *(f"{n}: {v}" for n, v in headers.values())])
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as engine:
                engine.connect(self.upstream)
                if length >= 0:
                    while len(body) < length:
                        chunk = client.recv(65536)
                        if not chunk:
                            break
                        body += chunk
                    body = body[:forward]
                # The engine may answer and close before it reads a body: its answer still
                # goes back below.
                with contextlib.suppress(OSError):
                    engine.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
                if upgrade or length < 0:
                    threading.Thread(target=_pump, args=(client, engine), daemon=True).start()
                _pump(engine, client)

    def _drop_one(self) -> bool:
        with self.guard:
            if 0 <= self.drops <= self.dropped:
                return False
            self.dropped += 1
            return True


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def harbor_task(root: Path, dockerfile: str, extra: dict[str, str] | None = None) -> None:
    files = {
        "instruction.md": "Write ok to /home/user/out.txt\n",
        "environment/Dockerfile": dockerfile,
        "tests/test_final_state.py": "def test_done():\n    assert False\n",
        "solution/solve.sh": "echo ok > /home/user/out.txt\n",
        **(extra or {}),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def imported_draft(tmp_path: Path, base: str, dockerfile: str, extra: dict[str, str] | None = None):
    harbor_task(tmp_path / "task", dockerfile, extra)
    (outcome,) = import_tasks(tmp_path / "task", f"faults-{tmp_path.name}", base_image=base)
    assert outcome.draft is not None, outcome.reason
    return outcome.draft


@pytest.fixture
def engine(tmp_path, request, sandbox):
    proxy = FaultyEngine(tmp_path / "engine.sock", **request.param)
    yield proxy, Sandbox(SandboxConfig(docker_host=proxy.url))
    proxy.close()


def containers_of(sandbox, draft) -> list:
    return sandbox.client.containers.list(
        all=True, filters={"label": f"endless.task_id={draft.task_id}"}
    )


def built_through(engine, tmp_path: Path, sandbox):
    """The build stage of a fresh task through the faulty engine: (proxy, draft, outcome)."""
    proxy, box = engine
    draft = imported_draft(
        tmp_path, sandbox.base.tag, unique_dockerfile(sandbox.base.tag, tmp_path)
    )
    return proxy, draft, build_environment(draft, CarriedGenerator(), box)


def unique_dockerfile(base: str, tmp_path: Path, extra: str = "") -> str:
    # A line of its own per test, so that no earlier build is a cache hit.
    return (
        f"FROM {base}\nRUN mkdir -p /home/user && echo '{tmp_path.name}' > /home/user/id\n{extra}"
    )


@pytest.mark.parametrize("engine", [{"truncate_builds": True}], indirect=True)
def test_a_build_context_the_engine_cannot_unpack_is_a_harness_error_after_bounded_retries(
    engine, tmp_path, sandbox
):
    proxy, box = engine
    # Half of the context ends inside this file's data: a tar file that ends too soon.
    data = {"environment/data.txt": "x" * 65536}
    dockerfile = unique_dockerfile(sandbox.base.tag, tmp_path, "COPY data.txt /home/user/\n")
    draft = imported_draft(tmp_path, sandbox.base.tag, dockerfile, data)
    outcome = build_environment(draft, CarriedGenerator(), box)
    assert outcome.status == "harness_error", outcome.reject_reason
    assert "Error processing tar file" in outcome.reject_reason
    builds = [r for r in proxy.requests if re.search(r"/build\b", r)]
    assert len(builds) == images.BUILD_ATTEMPTS


@pytest.mark.parametrize(
    "engine",
    [{"drop": r"/containers/[0-9a-f]+/start"}, {"drop": r"/exec\b"}],
    indirect=True,
    ids=["start", "exec"],
)
def test_an_engine_that_drops_a_start_or_an_exec_is_a_harness_error(engine, tmp_path, sandbox):
    proxy, draft, outcome = built_through(engine, tmp_path, sandbox)
    assert outcome.status == "harness_error", outcome.reject_reason
    assert outcome.reject_reason.startswith("harness: ")
    assert proxy.dropped == ENGINE_RETRIES + 1  # tried again a bounded number of times
    assert containers_of(sandbox, draft) == []  # and its container is gone


@pytest.mark.parametrize(
    "engine",
    [
        {"drop": r"/containers/[0-9a-f]+/start", "drops": 1},
        {"drop": r"/exec\b", "drops": 1},
    ],
    indirect=True,
    ids=["start", "exec"],
)
def test_an_engine_that_drops_one_start_or_exec_is_retried_and_the_task_passes(
    engine, tmp_path, sandbox
):
    proxy, draft, outcome = built_through(engine, tmp_path, sandbox)
    assert (outcome.status, outcome.attempts, proxy.dropped) == ("ok", 1, 1)
    assert [e["stage"] for e in outcome.attempt_log] == ["engine", "initial_test"]
    assert containers_of(sandbox, draft) == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("RUN echo 'Error processing tar file' && exit 3\n", "returned a non-zero code: 3"),
        ("COPY Dockerfile /etc/passwd/x\n", "failed to copy files"),
    ],
)
def test_what_the_dockerfile_itself_does_wrong_stays_a_rejection(extra, message, tmp_path, sandbox):
    draft = imported_draft(
        tmp_path, sandbox.base.tag, unique_dockerfile(sandbox.base.tag, tmp_path, extra)
    )
    outcome = build_environment(draft, CarriedGenerator(), sandbox)
    assert outcome.status == "rejected"
    assert outcome.reject_reason.startswith("build_failed: ")
    assert message in outcome.reject_reason
