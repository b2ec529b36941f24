"""What a build's network costs: one-RUN-step builds of the base image, each new (no cache hit),
alternating three ways: no network (`networkmode=none`), the build network (a gateway container
and the relay of build_network.py, as builds with a network get now), and the host's network
(as they ran before). Prints the median wall time of each. Then the relay's throughput: a file
from an HTTP server on this host through the relay (a policy that lets it through) into a
socket, as a RUN step's download goes. With `--installs N`, N alternated builds each way of a
step that installs from the registries (`apt-get update` and a Debian package, as task
Dockerfiles do): through the build network, and on the host's network.

    .venv/bin/python bench/build_network.py [--runs 8] [--megabytes 200] [--installs 0]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from endless_assets.sandbox.image.build_relay import Policy, Relay
from endless_assets.sandbox.image.images import build_context, build_task_image
from endless_assets.sandbox.sandbox import Sandbox


def host_build(client, dockerfile: str, tag: str) -> None:
    stream = client.api.build(
        fileobj=build_context(dockerfile, {}),
        custom_context=True,
        tag=tag,
        rm=True,
        forcerm=True,
        decode=True,
        network_mode="host",
    )
    for chunk in stream:
        assert "error" not in chunk, chunk


class Open(Policy):
    def refusal(self, text: str) -> str:
        return ""


def throughput(megabytes: int) -> float:
    """MB/s of one download through the relay."""
    body = b"x" * (1 << 20)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(megabytes * len(body)))
            self.end_headers()
            for _ in range(megabytes):
                self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as directory:
        relay = Relay(directory, Open())
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(f"{directory}/relay.sock")
                port = server.server_address[1]
                started = time.monotonic()
                client.sendall(f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                received = 0
                while received < megabytes * len(body):
                    chunk = client.recv(1 << 20)
                    if not chunk:
                        break
                    received += len(chunk)
                seconds = time.monotonic() - started
        finally:
            relay.close()
            server.shutdown()
            server.server_close()
    return received / (1 << 20) / seconds


def builds(sandbox: Sandbox, times: dict[str, list[float]], runs: int, step: str) -> None:
    """`runs` new builds of `FROM base` + `RUN step` each way of `times`, alternated."""
    base = sandbox.base
    client = sandbox.client
    for _ in range(runs):
        for way in times:
            dockerfile = f"FROM {base.tag}\nRUN echo {uuid.uuid4().hex} && {step}\n"
            started = time.monotonic()
            if way == "host (before)":
                tag = f"endless-task:bench-{uuid.uuid4().hex[:12]}"
                host_build(client, dockerfile, tag)
            else:
                result = build_task_image(
                    client,
                    dockerfile,
                    {},
                    base_image_id=base.image_id,
                    network=way != "none",
                )
                assert result.ok, result.log
                tag = result.tag
            times[way].append(time.monotonic() - started)
            client.images.remove(tag, force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--installs", type=int, default=0)
    args = parser.parse_args()
    sandbox = Sandbox()
    times: dict[str, list[float]] = {"none": [], "build network": [], "host (before)": []}
    builds(sandbox, times, args.runs, "true")
    print(f"one-RUN builds, median of {args.runs} (alternated):")
    for way, seconds in times.items():
        print(f"  {way:15s} {statistics.median(seconds):6.2f} s")
    print(f"relay throughput: {throughput(args.megabytes):.0f} MB/s ({args.megabytes} MB)")
    if args.installs:
        installs: dict[str, list[float]] = {"build network": [], "host (before)": []}
        step = "apt-get update -qq && apt-get install -y -qq --no-install-recommends tree"
        builds(sandbox, installs, args.installs, step)
        print(f"builds installing a Debian package, median of {args.installs} (alternated):")
        for way, seconds in installs.items():
            spread = ", ".join(f"{s:.1f}" for s in sorted(seconds))
            print(f"  {way:15s} {statistics.median(seconds):6.2f} s  ({spread})")


if __name__ == "__main__":
    main()
