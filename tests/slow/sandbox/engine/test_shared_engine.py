"""Processes of different projects on one engine: set-up, runs and `endless serve` started at
once on an engine without the base image, a holder of the engine's lock killed with SIGKILL, and
`endless prune` racing a run. Every batch keeps what it keeps alone, with no harness error.

Real parts: a `dockerd` started here (a fresh engine: no image at all, so the first of the
processes builds the base image with debootstrap while the others wait; the base image removed
again before the four processes start, its root filesystem kept), the
`endless` command line in processes of their own, each with its own data directory and Dagster
instance (real Dagster runs), `endless serve` answering real HTTP, SIGKILL.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import docker.errors
import pytest
from docker import DockerClient
from serve_helpers import Server

from endless_assets.sandbox.engine import lock
from endless_assets.sandbox.image.base_image import base_image_tag, recipe_hash
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.engines import ExtraEngine
from endless_assets.testing.kept_lake import procedural_tasks, write_kept

BATCH = "2026-12-04"
TASKS = "2"
BOUND = 1800.0  # seconds a process may take before the test calls it a hang
SETTINGS = {"ENDLESS_SOUNDNESS": "controls", "ENDLESS_SOUNDNESS_REPEATS": "1"}
LOCAL = os.environ.get("DOCKER_HOST", "")


class Project:
    """A checkout's data directory and Dagster instance, working on one engine."""

    def __init__(self, root: Path, engine_url: str, **settings: str) -> None:
        self.root, self.url, self.settings = root, engine_url, settings
        self.data = root / "data"
        (root / "home").mkdir(parents=True, exist_ok=True)
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
        env.update(SETTINGS)
        env.pop("DOCKER_HOST", None)
        if self.url:
            env["DOCKER_HOST"] = self.url
        env.update(
            ENDLESS_DATA_DIR=str(self.data),
            DAGSTER_HOME=str(self.root / "home"),
            **self.settings,
        )
        return env

    def start(self, *args: str) -> subprocess.Popen:
        log = self.root / f"{args[0]}-{len(self.processes)}.log"
        with open(log, "w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "endless_assets.cli", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env=self.env(),
                start_new_session=True,  # its own process group: a hang is killed whole
            )
        self.processes.append((process, log))
        return process

    def run(self) -> subprocess.Popen:
        return self.start("run", "--tasks", TASKS, "--date", BATCH, "--quiet")

    def finish(self, process: subprocess.Popen) -> str:
        """Wait for `process` (a hang fails the test); its output. It must exit 0."""
        log = dict((id(p), path) for p, path in self.processes)[id(process)]
        try:
            code = process.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"{process.args[3:]} hung:\n{log.read_text()[-3000:]}")
        text = log.read_text()
        assert code == 0, f"{process.args[3:]} exited {code}:\n{text[-3000:]}"
        return text

    def outcome(self) -> tuple[set[str], list[tuple]]:
        """The batch's kept tasks, and its funnel (stage, entered, survived, harness errors)."""
        lake = Lake(self.data)
        kept = query(lake, "select task_id from filtered_dataset where kept")
        funnel = query(
            lake, "select stage, entered, survived, harness_errors from funnel order by stage_order"
        )
        return set(kept["task_id"].to_list()), [tuple(r) for r in funnel.iter_rows()]


def no_harness_errors(funnel: list[tuple]) -> bool:
    return bool(funnel) and all(row[3] == 0 for row in funnel)


@pytest.fixture(scope="module")
def alone(tmp_path_factory, sandbox) -> tuple[set[str], list[tuple]]:
    """What the batch keeps when its run is alone (on the test session's engine)."""
    project = Project(tmp_path_factory.mktemp("alone"), LOCAL)
    project.finish(project.run())
    kept, funnel = project.outcome()
    assert len(kept) == int(TASKS) and no_harness_errors(funnel), funnel
    return kept, funnel


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("procs")


@pytest.fixture(scope="module")
def engine_one(tmp_path_factory):
    with ExtraEngine(tmp_path_factory.mktemp("se") / "a") as engine:
        yield engine


def serve_lake(root: Path) -> list[str]:
    """A project that serves two kept tasks (written as the solver stage writes them); their ids."""
    tasks = procedural_tasks(base_image_tag(), "2026-06-01", 2)
    write_kept(Lake(root / "data"), tasks)
    return [t.task_id for t in tasks]


def http_resets(server: Server, task_ids: list[str], answers: list) -> threading.Thread:
    """A client that resets each task over HTTP (each reset starts a container: the image
    built, and the base image first, when absent); the answers land in `answers`."""

    def client() -> None:
        for task_id in task_ids:
            body = json.dumps({"task_id": task_id}).encode()
            request = urllib.request.Request(
                f"{server.url}/reset", data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=BOUND) as answer:
                    answers.append(json.loads(answer.read()))
            except Exception as exc:  # recorded, asserted by the test
                answers.append({"error": repr(exc)})

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    return thread


def served_well(answers: list, count: int) -> bool:
    return len(answers) == count and all(
        "error" not in a and not a["observation"].get("infra_error") and not a["done"]
        for a in answers
    )


def test_endless_serve_beside_endless_run_on_an_engine_without_the_base_image(
    alone, engine_one, scratch
):
    client = DockerClient(base_url=engine_one.url)
    assert not client.images.list()  # nothing yet: whoever comes first builds the base
    run = Project(scratch / "one-run", engine_one.url)
    served = scratch / "one-serve"
    task_ids = serve_lake(served)
    started = run.run()
    server = Server(served / "data", docker_host=engine_one.url)
    answers: list = []
    try:
        resets = http_resets(server, task_ids, answers)
        run.finish(started)
        resets.join(BOUND)
        assert not resets.is_alive(), "endless serve never answered its resets"
    finally:
        server.stop()
    assert served_well(answers, 2), answers
    assert run.outcome() == alone
    assert client.images.get(base_image_tag())
    assert not client.containers.list(all=True, filters={"label": "endless.kind=lock"})


def test_prune_racing_a_run_does_not_break_it(alone, engine_one, scratch):
    run = Project(scratch / "prune-run", engine_one.url)
    pruner = Project(scratch / "pruner", engine_one.url)
    started = run.run()
    removed = 0
    while started.poll() is None:  # prune everything it can, again and again, meanwhile
        output = pruner.finish(pruner.start("prune", "--all"))
        removed += int(output.split("removed ", 1)[1].split()[0])
    run.finish(started)
    assert removed > 0, "prune never removed an image of the run: nothing raced"
    assert run.outcome() == alone


def test_a_base_another_process_built_from_the_same_recipe_is_used_and_never_removed(
    engine_one,
):
    client = DockerClient(base_url=engine_one.url)
    tag = base_image_tag()
    ours = Sandbox(SandboxConfig(docker_host=engine_one.url))
    assert ours.base.image_id == client.images.get(tag).id
    # Another process builds the base again meanwhile (its own build: another image id) and
    # tags it: the tag moves under this process.
    dockerfile = f"FROM {tag}\nLABEL endless.rebuilt=elsewhere\n".encode()
    theirs, _ = client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)
    assert theirs.id != ours.base.image_id
    build = ours.build(f"FROM {tag}\nRUN echo shared > /home/user/f\n", {})
    assert build.ok, build.log
    with ours.container(build.tag) as box:
        assert box.exec_root(["cat", "/home/user/f"]).output == "shared\n"
    assert client.images.get(tag).id == theirs.id  # theirs, still: nothing of theirs removed


HOLDER = r"""
import sys
from docker import DockerClient
from endless_assets.sandbox.engine import lock

lock.acquire(DockerClient(base_url=sys.argv[1]), sys.argv[2])
print("held", flush=True)
sys.stdin.readline()
"""


def test_four_processes_at_once_after_a_lock_holder_was_killed_each_keep_their_batch(
    alone, engine_one, scratch
):
    client = DockerClient(base_url=engine_one.url)
    tag = base_image_tag()
    with contextlib.suppress(docker.errors.ImageNotFound):  # no base image again (its root
        client.images.remove(tag)  # filesystem stays: the build is the user layer's alone)
    # A process that held the engine's lock of the base image's build, killed with SIGKILL:
    # the lock stays behind.
    name = f"base-{recipe_hash()}"
    victim = subprocess.Popen(
        [sys.executable, "-c", HOLDER, engine_one.url, name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert victim.stdout.readline().strip() == "held"
    victim.kill()
    victim.wait()
    assert client.containers.list(all=True, filters={"name": lock.lock_name(name)})

    setup = Project(scratch / "four-setup", engine_one.url)
    runs = [Project(scratch / f"four-run-{i}", engine_one.url) for i in range(2)]
    served = scratch / "four-serve"
    task_ids = serve_lake(served)
    started = [setup.start("setup"), *(r.run() for r in runs)]
    server = Server(served / "data", docker_host=engine_one.url)
    answers: list = []
    try:
        resets = http_resets(server, task_ids, answers)
        assert f"base image {tag}" in setup.finish(started[0])
        for project, process in zip(runs, started[1:], strict=True):
            project.finish(process)
        resets.join(BOUND)
        assert not resets.is_alive(), "endless serve never answered its resets"
    finally:
        server.stop()
    assert served_well(answers, 2), answers
    for project in runs:
        assert project.outcome() == alone
    assert client.images.get(tag)
    assert not client.containers.list(all=True, filters={"name": lock.lock_name(name)})


def test_two_set_ups_of_a_pool_at_once_copy_the_base_image_to_an_engine_once(
    engine_one, scratch, tmp_path_factory
):
    tag = base_image_tag()
    source = DockerClient(base_url=engine_one.url).images.get(tag).id
    with ExtraEngine(tmp_path_factory.mktemp("se") / "c") as empty:
        client = DockerClient(base_url=empty.url)
        since = int(time.time()) - 1  # (an engine of this host: this clock)
        hosts = f"{engine_one.url},{empty.url}"
        setups = [
            Project(scratch / f"pool-setup-{i}", engine_one.url, ENDLESS_DOCKER_HOSTS=hosts)
            for i in range(2)
        ]
        started = [p.start("setup") for p in setups]
        for project, process in zip(setups, started, strict=True):
            assert empty.url in project.finish(process)
        assert client.images.get(tag).id == source  # a copy, id intact
        loads = client.events(
            since=since,
            until=int(time.time()) + 1,
            decode=True,
            filters={"type": "image", "event": "load"},
        )
        copies = [e for e in loads if e.get("id") == source]
        assert len(copies) == 1  # one copy: the other set-up waited, then found it there
