"""What a build step reaches: a recorder on an address of this host and a probe of URLs
(test_build_network, test_build_relay, test_podman)."""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder(BaseHTTPRequestHandler):
    """Writes down the path of every request it gets (the server's `seen`)."""

    def do_GET(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"you reached this host\n")

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def recorder(address: str):
    server = ThreadingHTTPServer((address, 0), Recorder)
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def probe(urls: dict[str, str]) -> str:
    """A RUN step that asks every URL twice: through the proxy variables, if any (urllib's
    default) and directly (no proxy), whatever happens."""
    lines = [f"echo {secrets.token_hex(4)}"]
    for name, url in urls.items():
        for how, opener in (
            ("proxy", "urllib.request.build_opener()"),
            ("direct", "urllib.request.build_opener(urllib.request.ProxyHandler({}))"),
        ):
            ask = f"{opener}.open('{url}/{name}-{how}', timeout=5).read()"
            code = f"import urllib.request; print({ask})"
            lines.append(f'python3 -c "{code}" 2>&1 | tail -n 1')
    return "RUN " + " ; ".join(lines) + " ; true\n"


def host_address() -> str:
    """This host's address on its uplink (where its services on 0.0.0.0 listen too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
        probe_socket.connect(("198.51.100.1", 9))  # (no packet is sent)
        return probe_socket.getsockname()[0]
