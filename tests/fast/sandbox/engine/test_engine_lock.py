"""The engine's lock (sandbox/engine/lock.py): held by one process at a time, whichever process
asks, and never held for ever by a process that died.

Real parts: a `dockerd` of its own (no image at all on it, not even the lock's), holder
processes that are real processes, killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from docker import DockerClient

from endless_assets.sandbox.engine import leftovers, lock
from endless_assets.sandbox.engine.client import KIND_LABEL, OWNER_LABEL, PROJECT, PROJECT_LABEL
from endless_assets.testing.engines import ExtraEngine

HOLDER = r"""
import sys
from docker import DockerClient
from endless_assets.sandbox.engine import lock

client = DockerClient(base_url=sys.argv[1])
held = lock.acquire(client, sys.argv[2])
print("held", flush=True)
sys.stdin.readline()  # until told to let go (or killed)
lock.release(client, held)
"""

CONTENDER = r"""
import json, sys, time
from docker import DockerClient
from endless_assets.sandbox.engine import lock

url, name, log, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = DockerClient(base_url=url)
while not __import__("os").path.exists(log + ".go"):  # all start at once
    time.sleep(0.01)
for _ in range(rounds):
    with lock.engine_lock(client, name):
        with open(log, "a") as fh:
            fh.write(f"in {__import__('os').getpid()}\n")
        for _ in range(5):  # work inside, that takes the engine's time
            client.ping()
        with open(log, "a") as fh:
            fh.write(f"out {__import__('os').getpid()}\n")
"""

BOUND = 120.0  # seconds a waiter may take before the test calls it a hang


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    with ExtraEngine(tmp_path_factory.mktemp("lk") / "e") as extra:
        yield extra


@pytest.fixture
def client(engine):
    client = DockerClient(base_url=engine.url)
    yield client
    for container in client.containers.list(all=True, filters={"label": f"{KIND_LABEL}=lock"}):
        container.remove(force=True)
    client.close()


def holder(engine: ExtraEngine, name: str) -> subprocess.Popen:
    """A process that holds the lock `name` until a line on its stdin (or its death)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, engine.url, name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "held"
    return process


def acquire_in_thread(client: DockerClient, name: str, **kwargs) -> tuple[threading.Thread, dict]:
    """`lock.acquire` in a thread of its own: its result and what it said land in `got`."""
    got: dict = {"said": []}

    def take() -> None:
        got["id"] = lock.acquire(client, name, progress=got["said"].append, **kwargs)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread, got


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {BOUND:g} s"
        time.sleep(0.05)


def test_the_first_process_loads_the_lock_image_and_every_load_is_the_same_image(client):
    assert not client.images.list()  # a fresh engine: not even the lock's image
    held = lock.acquire(client, "first")
    lock.release(client, held)
    first = client.images.get(lock.LOCK_IMAGE).id
    client.images.remove(lock.LOCK_IMAGE)
    lock.release(client, lock.acquire(client, "again"))  # loaded again
    assert client.images.get(lock.LOCK_IMAGE).id == first
    assert lock.lock_image_archive("amd64") == lock.lock_image_archive("amd64")


def test_four_processes_that_take_the_lock_at_once_hold_it_one_at_a_time(engine, tmp_path):
    log = tmp_path / "log"
    rounds = 3
    contenders = [
        subprocess.Popen([sys.executable, "-c", CONTENDER, engine.url, "shared", str(log), "3"])
        for _ in range(4)
    ]
    Path(f"{log}.go").touch()
    for process in contenders:
        assert process.wait(timeout=BOUND) == 0
    lines = log.read_text().split()
    events = list(zip(lines[::2], lines[1::2], strict=True))
    assert len(events) == 2 * 4 * rounds
    for entered, left in zip(events[::2], events[1::2], strict=True):
        assert entered[0] == "in" and left == ("out", entered[1]), events  # never two inside


def test_a_holder_killed_with_sigkill_does_not_block_the_next_process(engine, client):
    dead = holder(engine, "base-x")
    waiter, got = acquire_in_thread(client, "base-x")
    wait_for(lambda: got["said"], "waiting message")
    assert f"process {socket.gethostname()}:{dead.pid} since" in got["said"][0]
    assert "docker rm -f endless-lock.base-x" in got["said"][0]  # how to free it by hand
    dead.send_signal(signal.SIGKILL)  # not reaped yet: a zombie is dead all the same
    waiter.join(BOUND)
    assert not waiter.is_alive(), "the lock of a killed process was never taken over"
    dead.wait()
    holders = client.containers.list(all=True, filters={"name": "endless-lock.base-x"})
    assert [c.id for c in holders] == [got["id"]]  # the new holder's, the dead one's removed
    lock.release(client, got["id"])


def test_a_live_holder_is_waited_for_until_it_lets_go(engine, client):
    live = holder(engine, "copy-y")
    waiter, got = acquire_in_thread(client, "copy-y")
    wait_for(lambda: got["said"], "waiting message")
    assert waiter.is_alive()  # a live holder's lock is never taken
    live.stdin.write("release\n")
    live.stdin.flush()
    assert live.wait(timeout=BOUND) == 0
    waiter.join(BOUND)
    assert not waiter.is_alive()
    lock.release(client, got["id"])


def fake_lock(client: DockerClient, name: str, owner: str, start: str) -> str:
    """A lock container as another process would have left it."""
    lock.release(client, lock.acquire(client, "load-the-image"))
    labels = {
        PROJECT_LABEL: PROJECT,
        KIND_LABEL: lock.LOCK_KIND,
        OWNER_LABEL: owner,
        lock.START_LABEL: start,
        lock.PURPOSE_LABEL: name,
    }
    made = client.api.create_container(
        lock.LOCK_IMAGE, command=["/x"], name=lock.lock_name(name), labels=labels
    )
    return made["Id"]


def test_a_reused_pid_is_not_the_holder(client):
    # This very process's pid, but another start: the process that took it is gone.
    fake_lock(client, "reused", f"{socket.gethostname()}:{os.getpid()}", "other-boot:1")
    waiter, got = acquire_in_thread(client, "reused")
    waiter.join(BOUND)
    assert not waiter.is_alive() and not got["said"]
    lock.release(client, got["id"])


def test_another_hosts_lock_is_waited_for_until_it_is_stale(client):
    stale = fake_lock(client, "remote", "elsewhere:123", "")
    waiter, got = acquire_in_thread(client, "remote")
    wait_for(lambda: got["said"], "waiting message")
    assert "process elsewhere:123" in got["said"][0] and waiter.is_alive()
    client.api.remove_container(stale, force=True)  # what its message says to do
    waiter.join(BOUND)
    assert not waiter.is_alive()
    lock.release(client, got["id"])

    fake_lock(client, "remote", "elsewhere:123", "")
    waiter, got = acquire_in_thread(client, "remote", stale_seconds=2)  # by the engine's clock
    waiter.join(BOUND)
    assert not waiter.is_alive(), "a stale lock of another host was never taken over"
    assert got["said"]  # it was waited for first: fresh, it was not stale yet
    lock.release(client, got["id"])


def test_a_sweep_removes_the_locks_of_dead_processes_and_keeps_the_live_ones(engine, client):
    live = holder(engine, "live")
    dead = holder(engine, "dead")
    dead.kill()
    dead.wait()
    swept = leftovers.sweep(client)
    assert swept.locks == 1
    names = [c.name for c in client.containers.list(all=True, filters={"label": "endless.lock"})]
    assert names == [lock.lock_name("live")]
    live.stdin.write("release\n")
    live.stdin.flush()
    assert live.wait(timeout=BOUND) == 0
