"""What a run that died leaves, and the sweep that frees it: its task containers and the disk
budgets (disk.py) mounted for them, whatever state the engine left the containers in.

Real parts only: a child process that opens task containers through the sandbox and is killed
with SIGKILL while it holds them (it prints a line once they are up); the `endless` CLI; an
engine of its own (testing/engines.py) that is stopped and started again around a container's
budget, as a fault battery's engine restarts do: a budget mounted while that engine was down is
hidden by the engine's mount of its data root at its next start, and the engine's removal of
the container fails on it ("device or resource busy") and leaves the container dead."""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
from glob import glob
from pathlib import Path

import docker.errors
import pytest
from docker import DockerClient
from project import ROOT

from endless_assets.sandbox.engine import disk, mounts
from endless_assets.sandbox.engine.client import (
    KIND_LABEL,
    OWNER_LABEL,
    PROJECT_LABEL,
    TASK_KIND,
    base_labels,
)
from endless_assets.sandbox.engine.leftovers import sweep_containers
from endless_assets.testing.engines import ExtraEngine

# A run with two task containers open (the default disk budget), stopped in the middle.
RUN = r"""
import sys
from contextlib import ExitStack
from endless_assets.sandbox.sandbox import Sandbox
box = Sandbox()
with ExitStack() as stack:
    for _ in range(2):
        held = stack.enter_context(box.container(sys.argv[1], labels={"role": "crash"}))
        print(held.id, held.disk_layer, flush=True)
    print("ready", flush=True)
    sys.stdin.read()
"""
BUDGET = disk.MIN_BUDGET


def loops_in(layers: set[str]) -> list[str]:
    """The loop devices whose backing file is in one of `layers` (deleted or not)."""
    found = []
    for path in glob("/sys/block/loop*/loop/backing_file"):
        try:
            backing = Path(path).read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if os.path.dirname(backing) in layers:
            found.append(path)
    return found


def mounted_at(layers: set[str]) -> list[mounts.Mount]:
    return [m for m in mounts.mount_table() if m.point in layers]


def mount_point(path: str) -> bool:
    """Whether something is mounted at `path` (os.path.ismount misses a directory's bind mount
    over itself: the same filesystem on both sides)."""
    return any(m.point == path for m in mounts.mount_table())


def containers_of(client: DockerClient, owner: str) -> list[str]:
    found = client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
    return [c.name for c in found]


def dead_owner() -> str:
    """An owner label naming a process that has exited."""
    process = subprocess.Popen(["true"])
    process.wait()
    return f"{socket.gethostname()}:{process.pid}"


def endless_sweep(tmp_path: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    environ.update(DAGSTER_HOME=str(tmp_path / "home"), ENDLESS_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run(
        [sys.executable, "-m", "endless_assets.cli", "sweep"],
        capture_output=True,
        text=True,
        env=environ,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.parametrize("sweeper", ["sweep_containers", "endless sweep"])
def test_a_run_killed_with_containers_open_leaves_nothing_after_sweep(sandbox, tmp_path, sweeper):
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, sandbox.base.tag],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    owner = f"{socket.gethostname()}:{run.pid}"
    try:
        lines = []
        while (line := run.stdout.readline().strip()) not in ("ready", ""):
            lines.append(line)
        assert line == "ready", f"the run stopped before its containers were up: {lines}"
        layers = {line.split()[1] for line in lines}
        assert len(layers) == 2 and all(os.path.ismount(layer) for layer in layers)
        assert len(loops_in(layers)) == 2
    finally:
        run.kill()
        run.wait()
    assert run.returncode == -signal.SIGKILL

    if sweeper == "sweep_containers":
        sweep_containers(sandbox.client)
    else:
        proc = endless_sweep(tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith("removed "), proc.stdout

    assert containers_of(sandbox.client, owner) == []
    assert mounted_at(layers) == []
    assert loops_in(layers) == []


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """An engine of its own (a stopped engine would stop every other test's containers), with
    a one-file image: the containers here are created, never started."""
    extra = ExtraEngine(tmp_path_factory.mktemp("crash") / "e").start()
    try:
        client = DockerClient(base_url=extra.url, timeout=120)
        tar = io.BytesIO()
        with tarfile.open(fileobj=tar, mode="w") as archive:
            archive.addfile(tarfile.TarInfo("x"), io.BytesIO(b""))
        client.api.import_image_from_data(tar.getvalue(), repository="endless-crash", tag="one")
        client.close()
        yield extra
    finally:
        extra.stop()


def task_container(client: DockerClient, owner: str) -> tuple[str, str]:
    """A created task container labelled as `owner`'s, and its layer directory."""
    labels = {**base_labels(kind=TASK_KIND), OWNER_LABEL: owner}
    assert labels[KIND_LABEL] == TASK_KIND and PROJECT_LABEL in labels
    created = client.api.create_container("endless-crash:one", command=["/x"], labels=labels)
    upper = client.api.inspect_container(created["Id"])["GraphDriver"]["Data"]["UpperDir"]
    return created["Id"], os.path.dirname(upper)


def old_sweep(client: DockerClient) -> int:
    """The sweep as it was before it read the mount table: the budget released where the
    engine's inspect leads (its upper directory's parent, if that directory exists and is a
    mount point), then the container removed; a refused removal left to the next sweep."""
    removed = 0
    for container in client.containers.list(all=True, sparse=True):
        try:
            layer = disk.layer_dir(client.api.inspect_container(container.id))
            if layer and os.path.ismount(layer):
                disk.release(layer)
            client.api.remove_container(container.id, force=True, v=True)
            removed += 1
        except (docker.errors.NotFound, OSError):
            pass
    return removed


def test_a_container_whose_removal_failed_on_its_budget_is_freed_by_the_next_sweep(engine):
    client = DockerClient(base_url=engine.url, timeout=120)
    container_id, layer = task_container(client, dead_owner())
    data_root = str(Path(layer).parents[1])
    try:
        engine.process.send_signal(signal.SIGTERM)  # the engine goes down, its container stays
        engine.process.wait(timeout=120)
        if mount_point(data_root):
            pytest.skip("this engine does not mount its data root over itself")
        disk.attach(layer, BUDGET)  # the run, between creating the container and starting it
        engine.start()
        client = DockerClient(base_url=engine.url, timeout=120)
        # Stuck: the budget is mounted at the layer's path, but not where that path now leads.
        assert mount_point(data_root) and not os.path.ismount(layer)
        assert len(mounted_at({layer})) == 1 and loops_in({layer})
        with pytest.raises(docker.errors.APIError, match="device or resource busy"):
            client.api.remove_container(container_id, force=True, v=True)
        assert client.api.inspect_container(container_id)["State"]["Status"] == "dead"
        assert disk.layer_dir(client.api.inspect_container(container_id)) is None  # no diff/
        assert old_sweep(client) == 0  # and so for good: the next sweep trips on it again
        assert client.api.inspect_container(container_id)["State"]["Status"] == "dead"
        assert len(mounted_at({layer})) == 1

        assert sweep_containers(client) == 1
        assert client.containers.list(all=True) == []
        assert mounted_at({layer}) == []
        assert loops_in({layer}) == []
    finally:
        mounts.unmount_all(mounted_at({layer}))
        client.close()


def test_a_sweep_frees_budgets_whose_container_is_gone_and_keeps_a_live_runs(engine, tmp_path):
    client = DockerClient(base_url=engine.url, timeout=120)
    live_id, live_layer = task_container(client, base_labels()[OWNER_LABEL])  # this process
    overlay = os.path.dirname(live_layer)
    orphan, loose = os.path.join(overlay, "orphan"), os.path.join(overlay, "loose")
    try:
        disk.attach(live_layer, BUDGET)
        os.mkdir(orphan)
        disk.attach(orphan, BUDGET)  # its container's record is gone
        os.mkdir(loose)  # a budget's loop device that nothing mounts
        image = os.path.join(loose, mounts.IMAGE_NAME)
        with open(image, "wb") as fh:
            fh.truncate(BUDGET)
        subprocess.run(["losetup", "-f", image], check=True)
        assert loops_in({loose}) and mounted_at({orphan})

        sweep_containers(client)

        assert mounted_at({orphan}) == [] and loops_in({orphan, loose}) == []
        assert os.path.ismount(live_layer), "the budget of a live run's container was released"
        assert [c.id for c in client.containers.list(all=True)] == [live_id]
    finally:
        disk.release(live_layer)
        client.api.remove_container(live_id, force=True, v=True)
        mounts.unmount_all(mounted_at({orphan}))
        for path in loops_in({loose, orphan}):
            subprocess.run(["losetup", "-d", f"/dev/{Path(path).parents[1].name}"], check=False)
        for directory in (orphan, loose):
            shutil.rmtree(directory, ignore_errors=True)
        client.close()
    assert loops_in({live_layer}) == []
