"""An engine pool places a task's services on the engine of its agent's container: two episodes
at once on a pool of two engines, one slot each, land on both, and each engine holds the
services and the network of the episode it runs."""

from __future__ import annotations

import os
from contextlib import ExitStack

from endless_assets.models import Service
from endless_assets.sandbox.engine.client import engine_address
from endless_assets.sandbox.engine.engines import EngineSpec
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.testing.engines import ExtraEngine

LOCAL = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
PROBE = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/', timeout=2)"
FETCH = "import urllib.request; print(urllib.request.urlopen('http://web:8080/').status)"


def test_each_episodes_services_run_on_the_engine_of_its_agent_container(tmp_path_factory, sandbox):
    # (a short root: its containerd's socket path must fit in 107 bytes)
    with ExtraEngine(tmp_path_factory.mktemp("sp") / "e") as extra:
        pool = Sandbox(SandboxConfig(engines=(EngineSpec(LOCAL, 1), EngineSpec(extra.url, 1))))
        assert len(pool.ensure_base()) == 2
        web = Service(
            name="web",
            dockerfile=f"FROM {sandbox.base.tag}\n",
            command=["python3", "-m", "http.server", "8080", "--directory", "/srv"],
            ready=f'python3 -c "{PROBE}"',
        )
        built = pool.build(f"FROM {sandbox.base.tag}\n", {}, services=[web])
        assert built.ok, built.log
        with ExitStack() as stack:
            boxes = [stack.enter_context(pool.container(built.tag)) for _ in range(2)]
            engines = {engine_address(box.client) for box in boxes}
            assert len(engines) == 2  # one episode on each engine
            for box in boxes:
                service = box.services.services["web"]
                assert service.client is box.client
                box.client.api.inspect_container(service.container_id)  # there, on its engine
                box.client.api.inspect_network(box.network)
                reply = box.exec_root(["python3", "-c", FETCH], user="1000")
                assert reply.output.strip() == "200"
