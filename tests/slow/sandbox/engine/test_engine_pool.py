"""A pool of sandbox engines: work spreads over every engine, a task image is built on
the engine that runs it, and an engine lost mid-batch costs nothing but time.

Real parts: extra `dockerd` processes on this machine (each with its own socket, data root, exec
root, pid file and containerd namespaces), a real Dagster run, the real lake, the scripted
OpenAI-compatible server as the solver. The engine is SIGKILLed from inside the server's reply
handler at the first request of an episode running on it, so the kill lands mid-episode without
any timing guess.
"""

from __future__ import annotations

import os
import threading
from contextlib import ExitStack
from pathlib import Path

import broken_families as bf
import dagster as dg
import polars as pl
import pytest
from docker import DockerClient

import endless_assets.definitions as definitions
import endless_assets.generation.procedural as procedural
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.jobs import PIPELINE_ASSETS
from endless_assets.defs.resources import PipelineSettings
from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.engine.engines import EngineSpec, parse_hosts
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.store.lake import Lake
from endless_assets.testing.engines import ExtraEngine
from endless_assets.testing.scripted_server import Reply, ScriptedServer

BATCH = "2026-05-21"
SOLVE = "<command>tr a-z A-Z < /home/user/in.txt > /home/user/out.txt</command>"
DONE = "<action>done</action>"


@pytest.fixture(scope="module")
def engines(tmp_path_factory, sandbox):
    """Two extra engines beside the test session's own, with its base image (as `endless
    setup` leaves a pool: copied, id intact)."""
    root = tmp_path_factory.mktemp("eng")
    with ExitStack() as stack:
        extra = [stack.enter_context(ExtraEngine(root / f"e{i}")) for i in (2, 3)]
        specs = tuple(EngineSpec(url, 1) for url in [LOCAL, *(e.url for e in extra)])
        assert len(Sandbox(SandboxConfig(engines=specs)).ensure_base()) == 3
        for engine in extra:
            assert DockerClient(base_url=engine.url).images.get(sandbox.base.tag).id == (
                sandbox.base.image_id
            )
        yield extra


LOCAL = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def test_engine_lists_are_read_with_their_slots_and_refused_with_the_entry_named():
    specs = parse_hosts(" unix:///a.sock=4, tcp://10.0.0.2:2376 ,ssh://me@node=8", 6)
    assert specs == (
        EngineSpec("unix:///a.sock", 4),
        EngineSpec("tcp://10.0.0.2:2376", 6),
        EngineSpec("ssh://me@node", 8),
    )
    for bad, named in [
        ("unix:///a.sock=0", "'unix:///a.sock=0'"),
        ("unix:///a.sock,unix:///a.sock", "listed twice"),
        ("tcp://host:notaport", "tcp://host:notaport"),
    ]:
        with pytest.raises(ValueError, match=named):
            parse_hosts(bad, 1)


def test_containers_spread_over_the_engines_and_each_builds_the_image_it_runs(engines, sandbox):
    specs = tuple(EngineSpec(e.url, 2) for e in engines)
    pool_box = Sandbox(SandboxConfig(engines=specs, limits=Limits(disk="0")))
    dockerfile = f"FROM {pool_box.base.tag}\nRUN echo spread > /home/user/where\n"
    build = pool_box.build(dockerfile, {})
    assert build.ok, build.log
    with ExitStack() as stack:
        boxes = [stack.enter_context(pool_box.container(build.tag)) for _ in range(4)]
        outputs = {box.exec_root(["cat", "/home/user/where"]).output for box in boxes}
        clients = {id(box.client) for box in boxes}
    assert outputs == {"spread\n"}
    assert len(clients) == 2  # two containers on each engine
    assert [e["placed"] for e in pool_box.pool.report()] == [3, 2]  # the build, then 2 + 2
    for engine in engines:  # the image is on both, with the same tag
        assert DockerClient(base_url=engine.url).images.get(build.tag)


class KillingSolver:
    """Solves each attempt in two replies; at the first request that arrives while an episode
    runs on `victim`, SIGKILLs that engine (a lost node), before answering."""

    def __init__(self, victim: ExtraEngine) -> None:
        self.victim = victim
        self.client = DockerClient(base_url=victim.url, timeout=10)
        self.requests = 0
        self.killed_at: int | None = None
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> Reply:
        with self._lock:
            self.requests += 1
            if self.killed_at is None and self._episode_on_victim():
                self.victim.kill()
                self.killed_at = self.requests
        return Reply(DONE if len(request["messages"]) > 2 else SOLVE)

    def _episode_on_victim(self) -> bool:
        running = self.client.containers.list(filters={"label": "endless.project=endless"})
        return any(c.labels.get("endless.role", "").startswith("rollout-") for c in running)


def test_a_batch_spreads_over_three_engines_and_keeps_every_task_when_one_dies_mid_batch(
    engines, sandbox, tmp_path, monkeypatch
):
    monkeypatch.setattr(procedural, "ALL_FAMILIES", [bf.Good])
    hosts = ",".join(f"{url}=2" for url in [LOCAL, *(e.url for e in engines)])
    solver = KillingSolver(engines[1])
    with ScriptedServer(solver) as server:
        settings = {
            "data_dir": str(tmp_path),
            "tasks": 6,
            "workers": 6,
            "docker_hosts": hosts,
            "disk": "0",
            "soundness": "off",
            "solver": "chat",
            "sampler": "uniform",  # the generator's deal: one task per family
            "solver_model": "model-a",
            "solver_base_url": server.base_url,
            "llm_retries": 0,
            "k": 2,
            "rollout_workers": 6,
        }
        result = dg.materialize(
            [getattr(definitions, name) for name in PIPELINE_ASSETS],
            partition_key=BATCH,
            instance=dg.DagsterInstance.ephemeral(),
            resources={
                "pipeline": PipelineSettings(**settings),
                "lake_io_manager": ParquetLakeIOManager(data_dir=str(tmp_path)),
            },
        )
    assert result.success
    assert solver.killed_at is not None, "no episode ever ran on the third engine"
    assert solver.requests > solver.killed_at  # the batch went on after the loss

    lake = Lake(tmp_path)
    rollouts = lake.read("solver_rollouts", BATCH)
    assert len(rollouts) == 12
    assert rollouts["termination"].to_list() == ["done"] * 12  # nothing recorded for the loss
    assert rollouts["reward"].to_list() == [1] * 12
    dataset = lake.read("filtered_dataset", BATCH)
    assert dataset.filter(pl.col("kept")).height == 6

    rollout_step = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == "solver_rollouts"
    ]
    table = rollout_step[0].materialization.metadata["sandbox_engines"].records
    placed = {r.data["engine"]: (r.data["placed"], r.data["up"]) for r in table}
    assert all(n > 0 for n, _ in placed.values())  # every engine ran work, the victim too
    assert placed[engines[1].url][1] is False  # drained
    assert [up for _, up in placed.values()].count(True) == 2


def test_an_extra_engine_leaves_the_host_engines_bridge_in_place(tmp_path_factory):
    # A dockerd started with --bridge=none deletes any interface called docker0 it can see:
    # in the host's network namespace, the host engine's bridge (its builds then fail with
    # "could not find bridge docker0").
    bridge = Path("/sys/class/net/docker0")
    if not bridge.exists():
        pytest.skip("the host engine has no docker0 bridge")
    # (a short root: its containerd's socket path must fit in 107 bytes)
    with ExtraEngine(tmp_path_factory.mktemp("br") / "e") as engine:
        assert DockerClient(base_url=engine.url).ping()
        assert bridge.exists()
    assert bridge.exists()
