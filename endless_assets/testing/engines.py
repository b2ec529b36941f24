"""Extra Docker engines on this machine, for tests and benchmarks of the engine pool.

Each engine is a `dockerd` of its own: its own socket, data root, exec root (and so its own
containerd), pid file and containerd namespaces, and its own network namespace; no bridge
network and no iptables (task containers never have a network, and the tests' builds need none).
Started and stopped by the caller:

    with ExtraEngine(tmp_path / "e2") as engine:
        ... DockerClient(base_url=engine.url) ...
        engine.kill()  # SIGKILL, as a lost node
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from endless_assets.sandbox.engine.engines import answers

START_SECONDS = 60.0


class ExtraEngine:
    def __init__(self, root: Path, name: str | None = None) -> None:
        # A unix socket path is limited to 107 bytes: keep it short.
        self.root = Path(root)
        self.name = name or f"x{os.getpid()}{self.root.name}"[-12:]
        self.socket = self.root / "d.sock"
        self.url = f"unix://{self.socket}"
        self.process: subprocess.Popen | None = None

    def start(self) -> ExtraEngine:
        if shutil.which("dockerd") is None:
            raise RuntimeError("dockerd is not installed (scripts/ensure-docker.sh installs it)")
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115  (closed with the process)
        self.process = subprocess.Popen(
            [
                # A network namespace of its own: a dockerd started with --bridge=none deletes
                # any interface named docker0 it sees, which would be the host engine's bridge.
                "unshare",
                "--net",
                "dockerd",
                f"--data-root={self.root / 'data'}",
                f"--exec-root={self.root / 'exec'}",
                f"--pidfile={self.root / 'dockerd.pid'}",
                f"-H={self.url}",
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
                f"--containerd-namespace={self.name}",
                f"--containerd-plugins-namespace={self.name}p",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + START_SECONDS
        while not answers(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = (self.root / "dockerd.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"dockerd at {self.url} did not start:\n{tail}")
            time.sleep(0.2)
        return self

    def kill(self) -> None:
        """SIGKILL the daemon (its containers' processes stay, as on a lost node)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """Stop the daemon and everything it started. After kill(): restart it on the same data
        root so that it removes the containers it left, then stop it."""
        killed = self.process is not None and (self.process.poll() or 0) < 0
        if killed and (self.root / "data").exists():
            self.process = None
            with contextlib.suppress(RuntimeError):
                self.start()
        if self.process and self.process.poll() is None:
            self._remove_containers()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._kill_containerd()
        self._unmount()

    def _remove_containers(self) -> None:
        env = {**os.environ, "DOCKER_HOST": self.url}
        ids = subprocess.run(
            ["docker", "ps", "-aq"], capture_output=True, text=True, env=env, check=False
        ).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, env=env, check=False)

    def _kill_containerd(self) -> None:
        pid_file = self.root / "exec" / "containerd" / "containerd.pid"
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            pass

    def _unmount(self) -> None:
        """What the daemon left mounted under its root (its data root, network namespaces)."""
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts]
        inside = [p for p in points if p == str(self.root) or p.startswith(f"{self.root}/")]
        for point in sorted(inside, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)

    def __enter__(self) -> ExtraEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
