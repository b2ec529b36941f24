"""What a build's RUN step reaches with a network (real Docker, real builds, real sockets): the
package registries through the build network's proxy (build_network.py, build_relay.py), never a
service on this host (on its loopback, or on all of its addresses) nor a container of the engine.
The same build on the host's network, as builds ran before, reaches all three."""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
from build_probe import host_address, probe, recorder
from project import ROOT

from endless_assets.sandbox.engine.client import base_labels
from endless_assets.sandbox.image import build_network as network_module
from endless_assets.sandbox.image.images import build_task_image

# A container of the engine with an address, serving HTTP (its log lists the requests).
SERVE = (
    "import http.server, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        print('GOT', self.path, flush=True)\n"
    "        self.send_response(200); self.end_headers(); self.wfile.write(b'container')\n"
    "http.server.HTTPServer(('0.0.0.0', 8080), H).serve_forever()\n"
)


@contextlib.contextmanager
def engine_container(sandbox):
    """A container on the engine's default bridge serving HTTP on 8080: (its address, a
    function returning its log). Skipped where the engine has no bridge network."""
    if not sandbox.client.api.networks(names=["bridge"]):
        pytest.skip("the engine has no bridge network (dockerd --bridge=none)")
    box = sandbox.client.containers.run(
        sandbox.base.tag,
        ["python3", "-u", "-c", SERVE],
        detach=True,
        network_mode="bridge",
        labels=base_labels(role="build-network-target"),
    )
    try:
        for _ in range(600):
            box.reload()
            address = box.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
            with contextlib.suppress(OSError), socket.create_connection((address, 8080), 1):
                break
        else:
            pytest.fail("the engine's container does not serve")
        yield address, lambda: box.logs().decode()
    finally:
        box.remove(force=True)


def naive_build(sandbox, dockerfile: str) -> None:
    """The build as it ran before: RUN steps on the host's network."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    buffer.seek(0)
    tag = f"endless-task:naive-{secrets.token_hex(6)}"
    stream = sandbox.client.api.build(
        fileobj=buffer, custom_context=True, tag=tag, network_mode="host", rm=True, decode=True
    )
    output = [chunk for chunk in stream]
    assert not any("error" in chunk for chunk in output), output
    sandbox.client.images.remove(tag, force=True)


def test_a_build_step_reaches_no_host_service_nor_container_it_reached_on_the_host_network(
    sandbox,
):
    with (
        recorder("127.0.0.1") as loopback,
        recorder("0.0.0.0") as everywhere,
        engine_container(sandbox) as (container_address, container_log),
    ):
        urls = {
            "loopback": f"http://127.0.0.1:{loopback.server_address[1]}",
            "localhost": f"http://localhost:{loopback.server_address[1]}",
            "uplink": f"http://{host_address()}:{everywhere.server_address[1]}",
            "gateway": f"http://172.17.0.1:{everywhere.server_address[1]}",
            "container": f"http://{container_address}:8080",
        }
        dockerfile = f"FROM {sandbox.base.tag}\n{probe(urls)}"
        naive_build(sandbox, dockerfile)
        assert {"/loopback-direct", "/localhost-direct"} <= set(loopback.seen)
        assert {"/uplink-direct", "/gateway-direct"} <= set(everywhere.seen)
        assert "GOT /container-direct" in container_log()
        loopback.seen.clear()
        everywhere.seen.clear()
        before = container_log()

        build = sandbox.build(dockerfile, {}, network=True)
        assert build.ok, build.log
        assert loopback.seen == [] and everywhere.seen == []
        assert container_log() == before
    sandbox.remove_image(build.tag)


def apt_source_reachable(sandbox) -> str:
    """Why this machine cannot reach the base image's Debian mirror ("" if it can)."""
    listing = sandbox.client.containers.run(
        sandbox.base.tag,
        ["sh", "-c", "cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null; true"],
        remove=True,
        network_mode="none",
    ).decode()
    hosts = {w.split("/")[2] for w in listing.split() if w.startswith(("http://", "https://"))}
    for host in sorted(hosts):
        try:
            socket.create_connection((host, 80), timeout=10).close()
            return ""
        except OSError as exc:
            why = f"the base image's Debian mirror is out of reach: {exc}"
    return why if hosts else "the base image names no Debian mirror"


def test_two_builds_at_once_install_a_debian_package_through_the_build_network(sandbox):
    why = apt_source_reachable(sandbox)
    if why:
        pytest.skip(why)
    dockerfiles = [
        f"FROM {sandbox.base.tag}\nRUN echo {secrets.token_hex(4)} && apt-get update "
        "&& apt-get install -y --no-install-recommends tree && tree --version\n"
        for _ in range(2)
    ]
    results: list = [None, None]

    def build(index: int) -> None:
        results[index] = sandbox.build(dockerfiles[index], {}, network=True)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        assert result.ok, result.log
        sandbox.remove_image(result.tag)


PIP = "pip install --break-system-packages --no-cache-dir --retries 0 --timeout 30"
DIRECT = "env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u all_proxy -u ALL_PROXY"


def test_a_build_step_pip_installs_from_the_registry_through_the_proxy_only(sandbox):
    """pip as a task's Dockerfile runs it (its default index, the proxy variables) installs a
    package; the same install with the proxy variables unset reaches nothing. The build gets
    this host's CA certificates, as this host's own pip has them (a machine behind an egress
    that inspects TLS needs them; elsewhere they change nothing)."""
    why = apt_source_reachable(sandbox)
    if why:
        pytest.skip(why)
    ca = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    cert = "--cert /tmp/host-ca.crt" if ca.is_file() else ""
    dockerfile = (
        f"FROM {sandbox.base.tag}\nCOPY host-ca.crt /tmp/host-ca.crt\n"
        f"RUN echo {secrets.token_hex(4)} && apt-get update -qq && apt-get install -y -qq "
        "--no-install-recommends python3-pip\n"
        f"RUN ! {DIRECT} {PIP} {cert} six==1.16.0\n"
        f"RUN {PIP} {cert} six==1.16.0 && python3 -c 'import six; print(six.__version__)'\n"
    )
    context = {"host-ca.crt": ca.read_text() if ca.is_file() else ""}
    build = sandbox.build(dockerfile, context, network=True)
    assert build.ok, build.log
    with sandbox.container(build.tag, labels={"role": "build-network"}) as box:
        assert box.exec_root(["python3", "-c", "import six; print(six.__version__)"]).output == (
            "1.16.0\n"
        )
    sandbox.remove_image(build.tag)


HOLDER = """
import sys
from endless_assets.sandbox.sandbox import Sandbox
Sandbox().build(sys.argv[1], {}, network=True)
"""


def gateways(sandbox, owner: str) -> list:
    filters = {"label": ["endless.role=build-gateway", f"endless.owner={owner}"]}
    return sandbox.client.containers.list(all=True, filters=filters)


def test_a_build_whose_process_is_killed_leaves_no_gateway_nor_relay_behind(sandbox):
    token = secrets.token_hex(6)
    dockerfile = f"FROM {sandbox.base.tag}\nRUN sleep 900 && echo {token}\n"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, dockerfile], cwd=ROOT)
    owner = f"{socket.gethostname()}:{holder.pid}"
    relay_dirs = lambda: [  # noqa: E731
        n for n in os.listdir(network_module.runtime_dir()) if n.startswith(f"{holder.pid}-")
    ]
    try:
        for _ in range(1200):  # the gateway is up, and the step that holds the build runs
            listed = sandbox.client.containers.list(sparse=True)
            steps = [c for c in listed if token in c.attrs.get("Command", "")]
            if gateways(sandbox, owner) and steps:
                break
            assert holder.poll() is None, "the build ended before it was killed"
            time.sleep(0.1)
        else:
            pytest.fail("the build did not start")
        assert relay_dirs()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    for _ in range(1200):
        if not gateways(sandbox, owner):
            break
        time.sleep(0.1)
    assert not gateways(sandbox, owner), "the killed build's gateway is still there"
    with network_module.build_network(sandbox.client, sandbox.base.tag) as network:
        assert network is not None
    assert not relay_dirs(), "the killed build's relay directory is still there"


def test_a_mirror_on_this_host_is_reached_only_where_the_operator_allows_it(sandbox):
    with recorder("127.0.0.1") as mirror, recorder("127.0.0.1") as other:
        allowed = f"127.0.0.1:{mirror.server_address[1]}"
        urls = {
            "mirror": f"http://{allowed}",
            "other": f"http://127.0.0.1:{other.server_address[1]}",
        }
        build = build_task_image(
            sandbox.client,
            f"FROM {sandbox.base.tag}\n{probe(urls)}",
            {},
            base_image_id=sandbox.base.image_id,
            network=True,
            network_allow=(allowed,),
        )
        assert build.ok, build.log
        assert mirror.seen == ["/mirror-proxy"]  # through the proxy only: no route otherwise
        assert other.seen == []
    sandbox.remove_image(build.tag)


def test_a_build_whose_gateway_cannot_reach_the_relay_gets_no_network_and_says_so(sandbox, caplog):
    """A gateway that never holds its lifeline (here its python3 is `true`; in the field, an
    engine that cannot see this process's relay socket) leaves the build without a network,
    never the host's."""
    broken = sandbox.build(
        f"FROM {sandbox.base.tag}\nRUN echo {secrets.token_hex(4)} && ln -sf /bin/true "
        "/usr/bin/python3\n",
        {},
        network=False,
    )
    assert broken.ok, broken.log
    network_module._warned.clear()
    with recorder("127.0.0.1") as loopback:
        steps = probe({"loopback": f"http://127.0.0.1:{loopback.server_address[1]}"})
        build = build_task_image(
            sandbox.client,
            f"FROM {sandbox.base.tag}\n{steps}RUN cut -d: -f1 /proc/net/dev | tail -n +3 > /ifs\n",
            {},
            base_image_id=broken.image_id,  # (the gateway's image)
            network=True,
        )
        assert build.ok, build.log
        assert loopback.seen == []
    with sandbox.container(build.tag, labels={"role": "build-network"}) as box:
        assert box.exec_root(["cat", "/ifs"]).output.split() == ["lo"]
    assert "get no network: its gateway container could not reach" in caplog.text
    assert not gateways(sandbox, f"{socket.gethostname()}:{os.getpid()}")
    sandbox.remove_image(build.tag)
    sandbox.remove_image(broken.tag)


TWO = """
import sys
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.sandbox.image.images import build_task_image
box = Sandbox()
build = build_task_image(box.client, sys.argv[1], {}, base_image_id=box.base.image_id,
                         network=True, network_allow=(sys.argv[2],))
print(build.tag if build.ok else build.log)
"""


def test_two_processes_building_at_once_each_get_their_network(sandbox):
    """Each has its own gateway and relay directory (the next build sweeps only dead ones')."""
    with recorder("127.0.0.1") as mirror:
        allowed = f"127.0.0.1:{mirror.server_address[1]}"
        runs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    TWO,
                    f"FROM {sandbox.base.tag}\n{probe({n: f'http://{allowed}'})}",
                    allowed,
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in ("first", "second")
        ]
        tags = [run.communicate(timeout=600)[0].strip() for run in runs]
        assert sorted(mirror.seen) == ["/first-proxy", "/second-proxy"]
    for tag in tags:
        assert tag.startswith("endless-task:"), tag
        sandbox.remove_image(tag)


def test_a_step_that_fails_on_a_refused_address_is_rejected_saying_what_was_refused(sandbox):
    with recorder("127.0.0.1") as loopback:
        port = loopback.server_address[1]
        step = f"python3 -c \"import urllib.request; urllib.request.urlopen('http://localhost:{port}/')\""
        build = sandbox.build(
            f"FROM {sandbox.base.tag}\nRUN echo {secrets.token_hex(4)} && {step}\n", {}
        )
        assert loopback.seen == []
    assert not build.ok
    assert "HTTP Error 403: Forbidden" in build.log
    assert build.log.endswith(
        f"the build network did not connect to localhost:{port}: 127.0.0.1 is this host's loopback"
    ) or build.log.endswith(
        f"the build network did not connect to localhost:{port}: ::1 is this host's loopback"
    ), build.log
