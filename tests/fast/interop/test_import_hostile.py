"""Imported tasks are someone else's files and Dockerfiles: what a hostile or careless task
directory can do to the importer, the engine and the build host, and what it gets instead (real
files, real Docker, a real Dagster run)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import dagster as dg
import docker.errors
import pytest

from endless_assets.defs.imports import (
    IMPORT_OP,
    imported_task_decontamination,
    imported_task_descriptions,
    imported_task_environments,
)
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.partitions import imported_batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.generation.carried import CarriedGenerator
from endless_assets.interop.imports import import_tasks
from endless_assets.stages.environment import build_environment
from endless_assets.store.lake import Lake

BASE = "endless-base:test"


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def harbor_task(root: Path, dockerfile: str = "FROM ubuntu:22.04\n") -> None:
    write(root, "instruction.md", "Write ok to /home/user/out.txt\n")
    write(root, "environment/Dockerfile", dockerfile)
    write(root, "tests/test_final_state.py", "def test_done():\n    assert False\n")
    write(root, "solution/solve.sh", "echo ok > /home/user/out.txt\n")


def only_outcome(source: Path):
    (outcome,) = import_tasks(source, "hostile", base_image=BASE)
    return outcome


# Files that are not what they seem ------------------------------------------------------------


@pytest.mark.parametrize("part", ["environment", "tests", "solution"])
def test_a_task_directory_part_that_is_a_symlink_out_of_the_task_is_refused_naming_it(
    tmp_path, part
):
    outside = tmp_path / "outside"
    harbor_task(outside)
    write(outside, "environment/secret.txt", "not the task's\n")
    task = tmp_path / "source" / "task"
    harbor_task(task)
    for path in sorted((task / part).rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (task / part).rmdir()
    os.symlink(outside / part, task / part)
    outcome = only_outcome(tmp_path / "source")
    assert outcome.draft is None
    assert outcome.reason == f"{part} is a symbolic link (not supported)"


@contextlib.contextmanager
def fifo(path: Path):
    """A FIFO at `path`, with a writer waiting for a reader: an importer that opens it reads a
    line (instead of blocking forever); one that does not leaves the writer to us to release."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), open(path, "w") as fh:
            fh.write("from a fifo\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield
    finally:
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # lets a waiting writer through
        writer.join()
        os.close(reader)


@pytest.mark.parametrize(
    "rel",
    ["environment/data.txt", "tests/test_final_state.py", "solution/solve.sh", "instruction.md"],
)
def test_a_fifo_in_a_task_is_refused_with_its_path_without_being_opened(tmp_path, rel):
    task = tmp_path / "task"
    harbor_task(task)
    with contextlib.suppress(FileNotFoundError):
        (task / rel).unlink()
    with fifo(task / rel):
        outcome = only_outcome(task)
    assert outcome.draft is None
    assert outcome.reason == f"{rel} is a FIFO (only regular files are supported)"


def test_a_socket_under_environment_is_refused_with_its_path(tmp_path):
    task = tmp_path / "task"
    harbor_task(task)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(task / "environment" / "app.sock"))
        outcome = only_outcome(task)
    assert outcome.draft is None
    assert outcome.reason == "environment/app.sock is a socket (only regular files are supported)"


# Dockerfiles that break the harness's assumptions ---------------------------------------------


def imported_draft(tmp_path: Path, base: str, dockerfile: str):
    harbor_task(tmp_path / "task", dockerfile)
    (outcome,) = import_tasks(
        tmp_path / "task",
        f"hostile-{tmp_path.name}",
        base_image_map={"ubuntu:22.04": base},
        base_image=base,
    )
    assert outcome.draft is not None, outcome.reason
    return outcome.draft


def test_an_entrypoint_that_exits_at_start_rejects_the_task_with_a_reason(sandbox, tmp_path):
    dockerfile = f'FROM ubuntu:22.04\nRUN echo "{tmp_path.name}" > /id\nENTRYPOINT ["/bin/false"]\n'
    draft = imported_draft(tmp_path, sandbox.base.tag, dockerfile)
    outcome = build_environment(draft, CarriedGenerator(), sandbox)
    assert outcome.status == "rejected", outcome.reject_reason
    assert outcome.reject_reason.startswith(
        "container_failed: the container exits at start (exit code 1): "
        'its ENTRYPOINT ["/bin/false"]'
    )
    assert outcome.attempt_log[-1]["stage"] == "container"


def test_an_entrypoint_that_runs_the_command_it_is_given_is_fine(sandbox, tmp_path):
    dockerfile = (
        "FROM ubuntu:22.04\n"
        f"RUN printf '#!/bin/sh\\n# {tmp_path.name}\\nexec \"$@\"\\n' > /entry && chmod +x /entry\n"
        'ENTRYPOINT ["/entry"]\n'
    )
    draft = imported_draft(tmp_path, sandbox.base.tag, dockerfile)
    outcome = build_environment(draft, CarriedGenerator(), sandbox)
    assert outcome.status == "ok", outcome.reject_reason


def test_the_anonymous_volumes_of_a_volume_line_go_with_the_container(sandbox, tmp_path):
    build = sandbox.build(f"FROM {sandbox.base.tag}\nRUN echo {tmp_path.name}\nVOLUME /data\n", {})
    assert build.ok, build.log
    with sandbox.container(build.tag, labels={"role": "volume-test"}) as box:
        mounts = sandbox.client.api.inspect_container(box.id)["Mounts"]
        volumes = [m["Name"] for m in mounts if m["Type"] == "volume"]
    assert len(volumes) == 1
    with pytest.raises(docker.errors.NotFound):
        sandbox.client.volumes.get(volumes[0])


# What a build may reach -----------------------------------------------------------------------


class Witness(BaseHTTPRequestHandler):
    """A service on the build host's loopback that writes down every request it gets."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"you reached the build host\n")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def loopback_service():
    Witness.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Witness)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], Witness.seen
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("build_network", [None, True])
def test_an_imported_build_never_reaches_services_on_the_build_host_network_or_not(
    sandbox, tmp_path, monkeypatch, loopback_service, build_network
):
    """Without a network (imports' default) and with one (build_network.py: the registries
    through a proxy that never connects to this host; test_build_network.py shows the
    same build on the host's network reaching it)."""
    monkeypatch.delenv("ENDLESS_BUILD_NETWORK", raising=False)
    port, seen = loopback_service
    url = f"http://127.0.0.1:{port}/from-a-build/{tmp_path.name}"
    harbor_task(
        tmp_path / "source" / "task",
        "FROM ubuntu:22.04\n"
        f"RUN python3 -c \"import urllib.request; urllib.request.urlopen('{url}')\" "
        "|| echo unreachable\n",
    )
    batch = f"net-{tmp_path.name[-12:]}"
    data_dir = tmp_path / "lake"
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(imported_batches.name, [batch])
    result = dg.materialize(
        [imported_task_descriptions, imported_task_decontamination, imported_task_environments],
        partition_key=batch,
        instance=instance,
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), build_network=build_network),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        run_config={
            "ops": {
                IMPORT_OP: {
                    "config": {
                        "source_dir": str(tmp_path / "source"),
                        "base_image_map": {"ubuntu:22.04": "endless-base"},
                    }
                }
            }
        },
    )
    assert result.success
    environments = Lake(data_dir).read("task_environments", batch).to_dicts()
    assert [row["status"] for row in environments] == ["ok"], environments
    assert seen == []
