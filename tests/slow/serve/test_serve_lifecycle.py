"""`endless serve` from start to stop, each test with a server of its own, driven by OpenEnv's
client from PyPI: every episode lands in the lake, a stop (SIGINT) removes every container, an
idle session is reaped, a `kill -9` leaves containers that the next start removes, and an engine
killed mid-episode is an `infra_error` with no reward, never a 0."""

from __future__ import annotations

import signal
import socket
import time

import pytest
from docker import DockerClient
from serve_helpers import Driver, Server, openenv_python, served_containers, wait_removed

from endless_assets.sandbox.engine.engines import EngineSpec
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.engines import ExtraEngine
from endless_assets.testing.kept_lake import procedural_tasks, write_kept

BATCH = "2026-07-03"


def kept_lake(directory, sandbox: Sandbox, count: int = 2) -> tuple[Lake, list]:
    lake = Lake(directory / "data")
    tasks = write_kept(lake, procedural_tasks(sandbox.base.tag, BATCH, count))
    for task in tasks:
        assert sandbox.build(task.dockerfile or "", task.context_files, network=False).ok
    return lake, tasks


def owner(server: Server) -> str:
    return f"{socket.gethostname()}:{server.pid}"


def test_every_episode_lands_in_the_lake_and_a_stop_leaves_no_container(
    sandbox, tmp_path, tmp_path_factory
):
    lake, (task, other) = kept_lake(tmp_path, sandbox)
    server = Server(lake.data_dir)
    try:
        with Driver(openenv_python(tmp_path_factory), server.url) as client:
            for name in ("a", "b", "c"):
                client.ok("open", name)
            solved = client.episode([task.reference_solution], "a", task_id=task.task_id)
            assert solved["reward"] == 1.0
            assert client.episode([], "b", task_id=other.task_id, model="m", seed=5)["done"]
            client.ok("reset", "c", kwargs={"task_id": task.task_id})
            client.ok("step", "c", action={"command": "touch /home/user/started"})
            assert served_containers(sandbox.client, owner=owner(server))  # c's, mid-episode
            assert server.stop(signal.SIGINT) == 0, server.stderr()
    finally:
        server.stop()
    assert not served_containers(sandbox.client, owner=owner(server))
    assert "3 episode(s): 2 graded, 0 infra error(s), 1 abandoned" in server.stderr()
    rows = query(
        lake,
        "select e.task_id, e.reward, e.termination, e.steps, e.model, e.seed, e.session_id, "
        "e.verdict, e.infra_error, d.kept from served_episodes e "
        "join filtered_dataset d using (task_id, batch) order by e.started_at",
    ).to_dicts()
    assert [(r["reward"], r["termination"], r["steps"]) for r in rows] == [
        (1, "done", 1),
        (0, "done", 0),
        (None, "abandoned", 1),
    ]
    assert [r["task_id"] for r in rows] == [task.task_id, other.task_id, task.task_id]
    assert (rows[1]["model"], rows[1]["seed"]) == ("m", 5)
    assert len({r["session_id"] for r in rows}) == 3 and all(r["kept"] for r in rows)
    assert rows[0]["verdict"].startswith("passed") and rows[2]["verdict"] == ""
    assert all(r["infra_error"] == "" for r in rows)


def test_a_server_killed_with_sigkill_leaves_containers_the_next_start_removes(
    sandbox, tmp_path, tmp_path_factory
):
    lake, (task, _) = kept_lake(tmp_path, sandbox)
    first = Server(lake.data_dir)
    try:
        with Driver(openenv_python(tmp_path_factory), first.url) as client:
            for name in ("a", "b"):
                client.ok("open", name)
                client.ok("reset", name, kwargs={"task_id": task.task_id})
            assert len(served_containers(sandbox.client, owner=owner(first))) == 2
            first.kill()  # its containers stay (until any sandbox of this machine sweeps)
    finally:
        first.stop()
    second = Server(lake.data_dir)  # its sandbox sweeps before it says it serves
    try:
        assert not served_containers(sandbox.client, owner=owner(first))
    finally:
        assert second.stop() == 0, second.stderr()


def test_an_idle_episode_is_reaped_and_its_session_lives_on(sandbox, tmp_path, tmp_path_factory):
    lake, (task, _) = kept_lake(tmp_path, sandbox)
    server = Server(lake.data_dir, "--idle-seconds=1")
    try:
        with Driver(openenv_python(tmp_path_factory), server.url) as client:
            client.ok("open")
            client.ok("reset", kwargs={"task_id": task.task_id})
            # a step that runs for longer than the idle time is no idleness
            slow = client.ok("step", action={"command": "sleep 3; echo awake"})
            assert slow["observation"]["output"] == "awake\n" and not slow["done"], slow
            since = time.time() - 1
            session = slow["observation"]["session_id"]
            wait_removed(sandbox.client, since, session=session)  # no call: idle, reaped
            state = client.ok("state")
            assert (state["status"], state["termination"]) == ("over", "abandoned"), state
            later = client.ok("step", action={"command": "true"})  # (a trainer, done generating)
            assert later["done"] and later["reward"] is None, later
            seen = later["observation"]
            assert seen["termination"] == "abandoned" and seen["infra_error"] is None
            assert (
                "--idle-seconds" in seen["text"]
                and "--idle-seconds" in later["metadata"]["abandoned"]
            )
            again = client.episode([task.reference_solution], task_id=task.task_id)  # same session
            assert again["reward"] == 1.0 and again["observation"]["session_id"] == session
        assert server.stop() == 0, server.stderr()
    finally:
        server.stop()
    assert "2 episode(s): 1 graded, 0 infra error(s), 1 abandoned" in server.stderr()
    rows = query(lake, "select termination, reward, steps from served_episodes order by started_at")
    assert rows.to_dicts() == [
        {"termination": "abandoned", "reward": None, "steps": 1},
        {"termination": "done", "reward": 1, "steps": 1},
    ]


def test_the_time_budget_grades_the_episode_on_the_step_that_reaches_it(
    sandbox, tmp_path, tmp_path_factory
):
    lake, (task, _) = kept_lake(tmp_path, sandbox)
    # A budget that outlasts the client's reset-to-step gap on a loaded machine, so the step
    # starts inside it and the budget is reached while its command runs.
    server = Server(lake.data_dir, "--episode-seconds=15")
    try:
        with Driver(openenv_python(tmp_path_factory), server.url) as client:
            client.ok("open")
            client.ok("reset", kwargs={"task_id": task.task_id})
            late = client.ok("step", action={"command": "sleep 300; echo never"})
            assert late["done"] and late["reward"] == 0.0, late
            seen = late["observation"]
            assert seen["termination"] == "time_limit" and seen["timed_out"]
            assert "[command timed out" in seen["text"] and "time_limit" in seen["text"]
            assert seen["infra_error"] is None
        assert server.stop() == 0, server.stderr()
    finally:
        server.stop()


@pytest.fixture
def engine(tmp_path_factory, sandbox):
    """A Docker engine of its own with the base image, to kill."""
    with ExtraEngine(tmp_path_factory.mktemp("eng") / "e") as extra:
        local = sandbox.pool.engines[0].spec.url
        pool = Sandbox(SandboxConfig(engines=(EngineSpec(local, 1), EngineSpec(extra.url, 1))))
        assert len(pool.ensure_base()) == 2
        yield extra


def test_an_engine_killed_mid_episode_is_an_infra_error_not_a_zero(
    sandbox, engine, tmp_path, tmp_path_factory
):
    lake, (task, _) = kept_lake(tmp_path, sandbox)
    on_engine = Sandbox(SandboxConfig(docker_host=engine.url))
    assert on_engine.build(task.dockerfile or "", task.context_files, network=False).ok
    server = Server(lake.data_dir, docker_host=engine.url)
    try:
        with Driver(openenv_python(tmp_path_factory), server.url) as client:
            client.ok("open")
            client.ok("reset", kwargs={"task_id": task.task_id})
            before = client.ok("step", action={"command": "echo before"})
            assert before["observation"]["output"] == "before\n"
            assert DockerClient(base_url=engine.url).containers.list()  # the episode's
            engine.kill()  # SIGKILL, mid-episode
            after = client.ok("step", action={"command": "echo after"})
            assert after["done"] and after["reward"] is None, after
            seen = after["observation"]
            assert seen["termination"] == "infra_error" and seen["infra_error"]
            assert after["metadata"]["infra_error"] == seen["infra_error"]
            state = client.ok("state")
            assert state["reward"] is None and state["termination"] == "infra_error"
            again = client.ok("reset", kwargs={"task_id": task.task_id})  # the engine is gone
            assert again["done"] and again["reward"] is None
            assert again["observation"]["infra_error"]
        assert server.stop() == 0, server.stderr()
    finally:
        server.stop()
    rows = query(lake, "select reward, termination, infra_error from served_episodes").to_dicts()
    assert [(r["reward"], r["termination"]) for r in rows] == [(None, "infra_error")] * 2
    assert all(r["infra_error"] for r in rows)


@pytest.mark.parametrize("then", ["reset", "close"])
def test_an_infra_error_is_recorded_as_the_client_saw_it_when_the_client_moves_on_at_once(
    sandbox, tmp_path, tmp_path_factory, then
):
    """The grader dies with its container (killed under the episode); the client is told
    infra_error and at once resets or disconnects, while the server still removes the container:
    the ledger and the stop summary say infra_error with the reason the client read."""
    lake, (task, _) = kept_lake(tmp_path, sandbox)
    server = Server(lake.data_dir)
    try:
        with Driver(openenv_python(tmp_path_factory), server.url) as client:
            client.ok("open")
            session = client.ok("reset", kwargs={"task_id": task.task_id})["observation"]
            assert client.ok("step", action={"command": "echo before"})["observation"]["output"]
            (container,) = served_containers(sandbox.client, session=session["session_id"])
            sandbox.client.containers.get(container).kill()
            failed = client.ok("step", action={"command": "echo after"})
            if then == "reset":
                client.ok("reset", kwargs={"task_id": task.task_id})
            else:
                client.ok("close")
            seen = failed["observation"]
            assert failed["done"] and failed["reward"] is None, failed
            assert seen["termination"] == "infra_error" and seen["infra_error"], seen
        assert server.stop() == 0, server.stderr()
    finally:
        server.stop()
    rows = query(
        lake, "select termination, infra_error, reward from served_episodes order by started_at"
    ).to_dicts()
    told = {"termination": "infra_error", "infra_error": seen["infra_error"], "reward": None}
    assert rows[0] == told
    if then == "reset":  # the second episode: abandoned by the stop
        assert rows[1:] == [{"termination": "abandoned", "infra_error": "", "reward": None}]
    else:
        assert rows[1:] == []
    abandoned = len(rows) - 1
    summary = f"{len(rows)} episode(s): 0 graded, 1 infra error(s), {abandoned} abandoned"
    assert summary in server.stderr()
