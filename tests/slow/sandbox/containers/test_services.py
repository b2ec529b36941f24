"""A task's services on real Docker: reached by name from the agent's container on a network of
the episode's own, nothing outside it (not the host, whose listener a naive internal network
reaches), each episode with its own; a service that exits or is never ready fails with its log;
everything is removed when the episode ends, and what a process killed with SIGKILL left is
removed by the next sweep."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from contextlib import ExitStack

import docker.errors
import pytest
from project import ROOT

from endless_assets.models import Service
from endless_assets.sandbox.containers.services import ServiceFailed
from endless_assets.sandbox.engine.client import OWNER_LABEL, PROJECT_LABEL, owner_tag
from endless_assets.sandbox.engine.leftovers import sweep

SERVE = ["python3", "-m", "http.server", "8080", "--directory", "/srv"]
PROBE = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/', timeout=2)"
FETCH = (
    "import sys, urllib.request; "
    "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"
)
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()\n"
    "    print('connected')\n"
    "except OSError as exc:\n"
    "    print('refused', exc)\n"
)


def web(base: str, **changes) -> Service:
    fields = {
        "name": "web",
        "dockerfile": f"FROM {base}\nRUN echo hello-from-web > /srv/index.html\n",
        "command": SERVE,
        "ready": f'python3 -c "{PROBE}"',
        "ready_seconds": 30,
    }
    return Service(**{**fields, **changes})


def build(sandbox, *services: Service) -> str:
    result = sandbox.build(f"FROM {sandbox.base.tag}\n", {}, services=list(services))
    assert result.ok, result.log
    return result.tag


@pytest.fixture(scope="module")
def image(sandbox) -> str:
    return build(sandbox, web(sandbox.base.tag))


def ours(client, role: str) -> tuple[list, list]:
    """This process's containers of `role` and its networks."""
    labels = [f"{OWNER_LABEL}={owner_tag()}", f"endless.role={role}"]
    containers = client.containers.list(all=True, filters={"label": labels})
    networks = client.networks.list(filters={"label": [f"{OWNER_LABEL}={owner_tag()}"]})
    return containers, [n for n in networks if n.attrs["Labels"].get("endless.role") == role]


def as_agent(box, *argv: str) -> str:
    return box.exec_root(["python3", *argv], user="1000").output.strip()


def test_the_agent_reaches_its_service_by_name_and_everything_goes_with_the_episode(sandbox, image):
    with sandbox.container(image, labels={"role": "svc-reach"}) as box:
        assert box.network and set(box.services.services) == {"web"}
        assert as_agent(box, "-c", FETCH, "http://web:8080/") == "hello-from-web"
        assert box.services.dead() == []
        containers, networks = ours(sandbox.client, "svc-reach")
        assert len(containers) == 2 and len(networks) == 1
    assert ours(sandbox.client, "svc-reach") == ([], [])


def test_the_episode_network_reaches_neither_the_host_nor_outside(sandbox, image):
    """A listener on every address of this host: a container on a naive internal network
    reaches it through the bridge's address; the episode's network has none to reach."""
    client = sandbox.client
    listener = socket.create_server(("0.0.0.0", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=lambda: listener.accept(), daemon=True).start()
    naive = client.networks.create("endless-naive-internal", internal=True)
    try:
        gateway = naive.attrs["IPAM"]["Config"][0]["Gateway"]
        out = client.containers.run(
            sandbox.base.tag,
            ["python3", "-c", CONNECT, gateway, str(port)],
            network=naive.name,
            remove=True,
        )
        assert out.decode().strip() == "connected"  # the attack, against a naive network
    finally:
        naive.remove()
        listener.close()
    listener = socket.create_server(("0.0.0.0", port))
    try:
        with sandbox.container(image, labels={"role": "svc-reach"}) as box:
            attrs = client.api.inspect_network(box.network)
            ours_gateway = attrs["IPAM"]["Config"][0]["Gateway"]
            for address in (ours_gateway, "172.17.0.1", "1.1.1.1"):
                assert as_agent(box, "-c", CONNECT, address, str(port)).startswith("refused")
            lookup = "import socket; print(socket.getaddrinfo('example.com', 443))"
            assert "Errno" in box.exec_root(["python3", "-c", lookup], user="1000").output
    finally:
        listener.close()


def test_two_episodes_at_once_each_reach_only_their_own_service(sandbox, image):
    with ExitStack() as stack:
        boxes = [
            stack.enter_context(sandbox.container(image, labels={"role": "svc-two"}))
            for _ in range(2)
        ]
        assert boxes[0].network != boxes[1].network
        for number, box in enumerate(boxes):
            service = box.services.services["web"]
            assert service.exec(f"echo episode-{number} > /srv/mine.html", user="0")[0] == 0
        for number, box in enumerate(boxes):
            assert as_agent(box, "-c", FETCH, "http://web:8080/mine.html") == f"episode-{number}"
    assert ours(sandbox.client, "svc-two") == ([], [])


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"command": ["sh", "-c", "echo boom-at-start; exit 3"]}, "exited before it was ready"),
        ({"ready": "echo not-yet; exit 1", "ready_seconds": 1}, "was not ready within 1 s"),
    ],
)
def test_a_service_that_exits_or_is_never_ready_fails_with_its_log_and_leaves_nothing(
    sandbox, changes, said
):
    command = ["sh", "-c", "echo boom-at-start; exec python3 -m http.server 8080"]
    broken = build(sandbox, web(sandbox.base.tag, **{"command": command, **changes}))
    with pytest.raises(ServiceFailed, match=said) as failed:
        with sandbox.container(broken, labels={"role": "svc-broken"}):
            pytest.fail("the episode started without its service")
    assert "boom-at-start" in str(failed.value)
    assert ours(sandbox.client, "svc-broken") == ([], [])


# A process holding two episodes with services, killed with SIGKILL once they are up.
HOLD = r"""
import sys
from contextlib import ExitStack
from endless_assets.models import Service
from endless_assets.sandbox.sandbox import Sandbox
box = Sandbox()
service = Service.model_validate_json(sys.argv[1])
tag = box.build(f"FROM {box.base.tag}\n", {}, services=[service]).tag
with ExitStack() as stack:
    for _ in range(2):
        stack.enter_context(box.container(tag, labels={"role": "svc-crash"}))
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_a_process_killed_with_its_services_up_leaves_nothing_after_the_next_sweep(sandbox):
    run = subprocess.Popen(
        [sys.executable, "-c", HOLD, web(sandbox.base.tag).model_dump_json()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    owner = f"{socket.gethostname()}:{run.pid}"
    try:
        assert run.stdout.readline().strip() == "ready"
        left = sandbox.client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
        nets = sandbox.client.api.networks(filters={"label": [f"{OWNER_LABEL}={owner}"]})
        assert len(left) == 4 and len(nets) == 2
    finally:
        run.kill()
        run.wait()
    swept = sweep(sandbox.client)
    assert swept.networks >= 2
    left = sandbox.client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
    assert left == []
    assert sandbox.client.api.networks(filters={"label": [f"{OWNER_LABEL}={owner}"]}) == []
    assert sandbox.client.api.networks(filters={"label": [f"{PROJECT_LABEL}=endless"]}) is not None
    with pytest.raises(docker.errors.NotFound):
        sandbox.client.networks.get("endless-net-never-made")


def test_a_service_after_another_starts_once_it_is_ready_and_aliases_resolve(sandbox):
    # db serves only after 3 s; app exits at once if db does not answer when it starts.
    db = web(
        sandbox.base.tag,
        name="db",
        aliases=["my_db"],
        command=["sh", "-c", "sleep 3; exec " + " ".join(SERVE)],
    )
    check = "import socket; socket.create_connection(('my_db', 8080), timeout=2).close()"
    app = web(
        sandbox.base.tag,
        name="app",
        after=["db"],
        command=["sh", "-c", f'python3 -c "{check}" && exec ' + " ".join(SERVE)],
    )
    with sandbox.container(build(sandbox, app, db), labels={"role": "svc-order"}) as box:
        assert box.services.dead() == []
        assert as_agent(box, "-c", FETCH, "http://my_db:8080/") == "hello-from-web"
        assert as_agent(box, "-c", FETCH, "http://app:8080/") == "hello-from-web"
