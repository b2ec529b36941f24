"""`endless serve` with a task that has a service: a session's episode holds the service and its
network beside the agent's container and is graded on the service's state, and a server killed
with SIGKILL leaves them to the next start, which removes them."""

from __future__ import annotations

import socket
import time

from serve_helpers import Driver, Server, openenv_python

from endless_assets.generation.procedural import SERVICES_SINCE, ProceduralGenerator
from endless_assets.sandbox.engine.client import OWNER_LABEL
from endless_assets.store.lake import Lake
from endless_assets.testing.kept_lake import write_kept


def held(client, server: Server) -> tuple[int, int]:
    """How many containers and networks the server's process holds."""
    label = f"{OWNER_LABEL}={socket.gethostname()}:{server.pid}"
    containers = client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
    return len(containers), len(client.api.networks(filters={"label": [label]}))


def poll(condition, tries: int = 3000) -> bool:
    for _ in range(tries):
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_served_episode_holds_its_service_and_a_killed_server_leaves_none_to_the_next(
    sandbox, tmp_path, tmp_path_factory
):
    lake = Lake(tmp_path / "data")
    draft, _ = ProceduralGenerator(sandbox.base.tag).describe_cell(
        SERVICES_SINCE, 0, 11, "redis_queue", 1
    )
    (task,) = write_kept(lake, [draft])
    assert sandbox.build(task.dockerfile, task.context_files, services=task.services).ok
    first = Server(lake.data_dir)
    try:
        with Driver(openenv_python(tmp_path_factory), first.url) as client:
            client.ok("open", "a")
            solved = client.episode([task.reference_solution], "a", task_id=task.task_id)
            assert solved["reward"] == 1.0  # graded on what the queue holds
            client.ok("open", "b")
            client.ok("reset", "b", kwargs={"task_id": task.task_id})
            # b's agent container and its queue (a's went with its episode, removed by a thread
            # of the server's own: polled for, with a bound)
            assert poll(lambda: held(sandbox.client, first) == (2, 1))
            first.kill()
    finally:
        first.stop()
    assert held(sandbox.client, first) == (2, 1)  # (until a sandbox of this machine sweeps)
    second = Server(lake.data_dir)  # its sandbox sweeps before it says it serves
    try:
        assert held(sandbox.client, first) == (0, 0)
    finally:
        assert second.stop() == 0, second.stderr()
