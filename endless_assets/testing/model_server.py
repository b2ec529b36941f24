"""A real OpenAI-compatible server on 127.0.0.1: `transformers serve` over a local model.

It generates one reply at a time (no continuous batching on CPU), answers errors the way FastAPI
does (`{"detail": ...}`, or a bare 500 for an exception in a chat template) and lists the one
model it is pinned to at `/v1/models`: the kind of server the scripted one cannot stand in for.

    with ModelServer(build(TinyModel(), tmp / "tiny"), tmp / "server.log") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused")

Nothing is fetched: the Hub is switched off (offline, no update check, a private HF_HOME).
Readiness is polled on `/health`; the process is stopped (and waited for) on exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

START_POLLS = 1200  # polls of /health, 0.25 s apart: loading torch on a busy 2-core machine


class ServerFailed(RuntimeError):
    pass


def _die_with_parent() -> None:
    """In the child: SIGKILL when the process that started it dies (even by SIGKILL), so a
    killed test run does not leave a server computing abandoned requests."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ModelServer:
    def __init__(self, model_dir: Path, log_path: Path) -> None:
        self.model_dir = Path(model_dir)
        self.log_path = Path(log_path)
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def model(self) -> str:
        """The name it answers for (and lists): the path it was pinned to."""
        return str(self.model_dir)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ModelServer:
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HOME": str(self.log_path.parent / "hf_home"),
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",  # the access log as it happens
        }
        command = [
            sys.executable,
            "-m",
            "transformers.cli.transformers",
            "serve",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--device",
            "cpu",
            "--log-level",
            "warning",
        ]
        log = open(self.log_path, "ab")  # handed to the child process, closed here
        try:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        assert self._process is not None
        for _ in range(START_POLLS):
            if self._process.poll() is not None:
                raise ServerFailed(
                    f"transformers serve exited with {self._process.returncode}: {self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.25)  # a poll interval, not synchronisation: readiness is polled
        raise ServerFailed(f"transformers serve never became ready: {self.log_tail()}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"
