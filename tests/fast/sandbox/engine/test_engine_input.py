"""Engine settings a user gets wrong, and engines that do not answer: the pool's set-up pings
briefly and leaves a silent engine out with one warning; a wrong `docker_hosts` entry, an engine
that cannot be reached and an ssh:// engine without `ssh` each get one line naming the cause
and the setting to fix, exit 2.

Real parts: the `endless` CLI in a subprocess, this machine's Docker engine, a unix socket that
accepts connections and never answers (a listening socket nobody accepts from: the kernel
completes the connection, no reply ever comes), and for ssh:// a stand-in `ssh` executable that
runs the remote command (`docker system dial-stdio`) here, against the real engine."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from project import ROOT

from endless_assets.sandbox.engine.client import PING_SECONDS, WORK_SECONDS, connect
from endless_assets.sandbox.engine.engines import EnginePool, EngineSpec, parse_hosts

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
LOCAL = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def endless(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    environ.update(
        DAGSTER_HOME=str(tmp_path / "dagster_home"),
        ENDLESS_DATA_DIR=str(tmp_path / "data"),
        COLUMNS="60",  # a narrow terminal must not fold a line
    )
    environ.update(env)
    return subprocess.run(
        [*ENDLESS, *args], capture_output=True, text=True, env=environ, cwd=ROOT, check=False
    )


def one_line(proc: subprocess.CompletedProcess, code: int) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, proc.stderr[-2000:]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture
def silent_engine(tmp_path):
    """The URL of a unix socket that takes connections and never answers."""
    path = tmp_path / "hang.sock"
    assert len(str(path)) < 100, path  # a unix socket path fits in 107 bytes
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    yield f"unix://{path}"
    listener.close()


def test_a_pool_engine_that_never_answers_is_left_out_after_the_short_ping_warned_once(
    tmp_path, silent_engine
):
    proc = endless(tmp_path, "sweep", ENDLESS_DOCKER_HOSTS=f"{LOCAL},{silent_engine}")
    warning = one_line(proc, 0)
    assert warning.startswith("warning: sandbox engine ") and silent_engine in warning
    assert f"no answer within {PING_SECONDS:g} s" in warning
    assert "container(s)" in proc.stdout


def test_the_pool_pings_briefly_and_keeps_the_long_timeout_for_work(silent_engine):
    pool = EnginePool((EngineSpec(LOCAL, 1), EngineSpec(silent_engine, 1)))
    assert [e.name for e in pool.engines] == [LOCAL]
    assert f"no answer within {PING_SECONDS:g} s" in pool.unused[silent_engine]
    assert pool.engines[0].client.api.timeout == WORK_SECONDS
    report = [(r["engine"], r["up"]) for r in pool.report()]
    assert report == [(LOCAL, True), (silent_engine, False)]  # (the run's metadata)
    pool.engines[0].client.close()


WRONG_POOLS = [
    (
        "unix:///var/run/docker.sock,unix://var/run/docker.sock",
        "'unix:///var/run/docker.sock' and 'unix://var/run/docker.sock' are one engine",
    ),
    ("ssh://me@node,ssh://me@node:22", "are one engine, listed twice"),
    ("unix:///a.sock,unix:///a.sock", "'unix:///a.sock' is listed twice"),
    ("=4", "'=4' has no engine URL before its '='"),
    ("unix:///a.sock=4=5", "has more than one '='"),
    ("unix:///a.sock=99999999999999999999", "a whole number from 1 to 1024"),
    ("unix:///a.sock=0", "a whole number from 1 to 1024"),
    (" , ", "it lists no engine URL"),
]


@pytest.mark.parametrize(("hosts", "reason"), WRONG_POOLS)
def test_a_wrong_engine_list_is_refused_with_the_reason_in_one_line(tmp_path, hosts, reason):
    with pytest.raises(ValueError, match=reason.replace("(", r"\(")):
        parse_hosts(hosts, 1)
    line = one_line(endless(tmp_path, "sweep", ENDLESS_DOCKER_HOSTS=hosts), 2)
    for needle in ("docker_hosts", "ENDLESS_DOCKER_HOSTS", repr(hosts), reason):
        assert needle in line, (needle, line)


@pytest.mark.parametrize(
    "command", [("sweep",), ("prune", "--all"), ("setup",), ("run", "--tasks", "1")]
)
def test_an_unreachable_engine_exits_2_naming_the_setting_in_use(tmp_path, command):
    missing = f"unix://{tmp_path}/no-engine.sock"
    proc = endless(tmp_path, *command, ENDLESS_DOCKER_HOSTS=missing)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]  # (`run` says first what it is about to run)
    assert line.startswith("error: cannot reach a Docker engine at " + missing), line
    assert "ENDLESS_DOCKER_HOSTS" in line and "DOCKER_HOST." not in line
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "data").exists()


def test_an_unreachable_single_engine_points_at_docker_host(tmp_path):
    line = one_line(endless(tmp_path, "sweep", DOCKER_HOST=f"unix://{tmp_path}/none.sock"), 2)
    assert "cannot reach a Docker engine" in line and "DOCKER_HOST" in line
    assert "ENDLESS_DOCKER_HOSTS" not in line


def test_an_ssh_engine_without_the_ssh_client_on_path_is_refused_in_one_line(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = endless(tmp_path, "sweep", PATH=str(empty), ENDLESS_DOCKER_HOSTS="ssh://me@node")
    line = one_line(proc, 2)
    assert "ssh:// engines need the OpenSSH client (ssh) on PATH" in line, line


def test_an_ssh_engine_is_reached_through_the_system_ssh_client(tmp_path, monkeypatch):
    pytest.importorskip(
        "paramiko", reason="docker-py's ssh transport imports paramiko: depend on docker[ssh]"
    )
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI (for `docker system dial-stdio`) is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    ssh = bin_dir / "ssh"  # ssh [-l user] [-p port] -- host command: runs the command here
    ssh.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        'while [ "$1" != "--" ]; do shift; done\n'
        "shift 2\n"
        'exec sh -c "$*"\n'
    )
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    client = connect("ssh://me@node:2222")
    try:
        assert client.ping()
        assert client.api.timeout == WORK_SECONDS
    finally:
        client.close()
    assert "-l me -p 2222 -- node docker system dial-stdio" in calls.read_text()
