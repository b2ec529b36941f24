"""Driving `endless serve` from the outside, as a trainer does: the server is an `endless serve`
process; the client is OpenEnv's own `GenericEnvClient`, installed from PyPI into a virtualenv
of its own (once per test session), run as a small driver program that takes one JSON request
per line on stdin (open, reset, step, state, close a named session) and answers one JSON line
on stdout. Nothing between them is ours: real WebSocket frames over real TCP.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient

from endless_assets.sandbox.engine.client import PROJECT_LABEL

SERVE_LABEL = "endless.role=serve"

DRIVER = r"""
import json, sys
from openenv.core.generic_client import GenericEnvClient

url, clients = sys.argv[1], {}


def result(r):
    return {"observation": r.observation, "reward": r.reward, "done": r.done,
            "metadata": r.metadata}


print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    op, name = request["op"], request.get("session", "a")
    try:
        if op == "open":
            clients[name] = GenericEnvClient(base_url=url, message_timeout_s=600).sync()
            clients[name].connect()
            answer = {}
        elif op == "reset":
            answer = result(clients[name].reset(**request.get("kwargs", {})))
        elif op == "step":
            answer = result(clients[name].step(request["action"]))
        elif op == "state":
            answer = clients[name].state()
        elif op == "close":
            clients.pop(name).close()
            answer = {}
        else:
            raise ValueError(op)
        reply = {"ok": True, "result": answer}
    except Exception as exc:
        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(reply), flush=True)
"""


def openenv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a virtualenv holding OpenEnv from PyPI (the version endless depends on),
    made once per test session; the test is skipped when the registry cannot be reached."""
    version = importlib.metadata.version("openenv")
    home = tmp_path_factory.getbasetemp() / f"openenv-client-{version}"
    home.mkdir(parents=True, exist_ok=True)
    python = home / "venv" / "bin" / "python"
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another module of this session may be making it
        if not (home / "ready").exists():
            subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
            pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            install = subprocess.run(
                [*pip, f"openenv=={version}"],
                capture_output=True,
                text=True,
                check=False,
            )
            if install.returncode != 0:
                last = (install.stderr.strip().splitlines() or ["?"])[-1]
                pytest.skip(f"OpenEnv's client could not be installed from PyPI: {last}")
            (home / "ready").write_text(version)
    (home / "driver.py").write_text(DRIVER)
    return python


class Driver:
    """OpenEnv's client in its own virtualenv, one request at a time."""

    def __init__(self, python: Path, url: str) -> None:
        self.process = subprocess.Popen(
            [str(python), str(python.parents[2] / "driver.py"), url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self._line()) == {"ready": True}

    def _line(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the OpenEnv client driver died: {self.process.stderr.read()}")
        return line

    def call(self, op: str, session: str = "a", **fields: Any) -> dict[str, Any]:
        self.process.stdin.write(json.dumps({"op": op, "session": session, **fields}) + "\n")
        self.process.stdin.flush()
        return json.loads(self._line())

    def ok(self, op: str, session: str = "a", **fields: Any) -> dict[str, Any]:
        reply = self.call(op, session, **fields)
        assert reply["ok"], reply["error"]
        return reply["result"]

    def episode(self, commands: list[str], session: str = "a", **reset: Any) -> dict[str, Any]:
        """Reset, send each command as a step, then the final action (unless a budget ended the
        episode first); the last step's result."""
        result = self.ok("reset", session, kwargs=reset)
        for command in commands:
            result = self.ok("step", session, action={"command": command})
            if result["done"]:
                return result
        return self.ok("step", session, action={"done": True})

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        self.process.wait(timeout=120)

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Server:
    """`endless serve` in a process of its own, on a free port, over `data_dir`."""

    def __init__(self, data_dir: Path, *args: str, docker_host: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
        env["ENDLESS_DATA_DIR"] = str(data_dir)
        if docker_host is not None:
            env["DOCKER_HOST"] = docker_host
        self.log = data_dir.parent / f"serve-{time.monotonic_ns()}.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "endless_assets.cli", "serve", "--port", "0", *args],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=data_dir.parent,
                env=env,
            )
        line = self.process.stdout.readline()  # the one line it prints once it listens
        if "serving" not in line:
            self.process.wait(timeout=60)
            raise RuntimeError(f"endless serve did not start: {line}{self.log.read_text()}")
        self.url = line.split(" at ", 1)[1].split()[0]

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=300)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=60)

    def stderr(self) -> str:
        return self.log.read_text()


def served_containers(client: DockerClient, **labels: str) -> list[str]:
    filters = [f"{PROJECT_LABEL}=endless", SERVE_LABEL]
    filters += [f"endless.{k}={v}" for k, v in labels.items()]
    found = client.containers.list(all=True, filters={"label": filters}, ignore_removed=True)
    return [c.id for c in found]


def wait_removed(client: DockerClient, since: float, **labels: str) -> None:
    """Return once no served container with `labels` exists: each one still there is waited
    for through the engine's own destroy events (replayed from `since`, so none is missed)."""
    left = set(served_containers(client, **labels))
    if not left:
        return
    events = client.events(
        since=int(since),
        until=int(time.time()) + 300,
        decode=True,
        filters={"type": "container", "event": "destroy"},
    )
    try:
        for event in events:
            left.discard(event.get("id") or event.get("Actor", {}).get("ID"))
            if not left:
                return
    finally:
        events.close()
    assert not served_containers(client, **labels), f"containers left behind: {left}"
