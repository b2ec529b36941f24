"""The only way out of a build's network namespace: an HTTP(S) proxy in this process, on a unix
socket that the build's gateway container (build_network.py) forwards its loopback port to.

It serves `CONNECT host:port` (HTTPS, anything over TLS) and absolute-form requests
(`GET http://host/path`, plain HTTP as apt asks through a proxy), and connects only where a
build may go: the host name is resolved here, once, and an address is refused if it is this
host's (loopback, any of its interfaces' addresses, the next hop of its default route), in one
of the engine's container networks, link-local or multicast, or on a network this host is on
rather than past its default route (a more specific route covers it: its LAN, where other
machines of its own may listen, such as engines of a pool or a database; a bridge or a veth,
other containers; a VPN's networks). What is left is what this machine reaches through its
default route: the package registries. The resolved address is the one connected to, so a name
cannot be re-pointed after the check.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

CONNECTIONS = 64  # at once, per build
HEAD_LIMIT = 65536
HEAD_SECONDS = 60.0  # for a client to send its request head
CONNECT_SECONDS = 30.0
IDLE_SECONDS = 600.0  # a connection with no byte either way for this long is closed
RTF_UP, RTF_GATEWAY, RTF_REJECT = 0x1, 0x2, 0x200

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Routes:
    """This host's main routing table: (network, interface) pairs, the default routes'
    interfaces and their next hops."""

    routes: tuple[tuple[Network, str], ...]
    uplinks: frozenset[str]
    next_hops: frozenset[Address]

    @classmethod
    def read(cls, proc: str = "/proc/net") -> Routes:
        routes: list[tuple[Network, str]] = []
        uplinks: set[str] = set()
        hops: set[Address] = set()

        def add(net: Network, iface: str, flags: int, hop: Address) -> None:
            if not flags & RTF_UP or flags & RTF_REJECT:
                return
            routes.append((net, iface))
            if net.prefixlen == 0:
                uplinks.add(iface)
                if flags & RTF_GATEWAY:
                    hops.add(hop)

        with contextlib.suppress(OSError), open(os.path.join(proc, "route")) as fh:
            for line in fh.readlines()[1:]:
                f = line.split()
                if len(f) < 8:
                    continue
                v4 = [ipaddress.IPv4Address(bytes.fromhex(h)[::-1]) for h in (f[1], f[2], f[7])]
                prefix = bin(int(v4[2])).count("1")
                net = ipaddress.ip_network(f"{v4[0]}/{prefix}", strict=False)
                add(net, f[0], int(f[3], 16), v4[1])
        with contextlib.suppress(OSError), open(os.path.join(proc, "ipv6_route")) as fh:
            for line in fh:
                f = line.split()
                if len(f) < 10:
                    continue
                dest, hop = (ipaddress.IPv6Address(bytes.fromhex(h)) for h in (f[0], f[4]))
                net = ipaddress.ip_network(f"{dest}/{int(f[1], 16)}", strict=False)
                add(net, f[9], int(f[8], 16), hop)
        return cls(tuple(routes), frozenset(uplinks), frozenset(hops))

    def by_default(self, address: Address) -> bool:
        """Whether the longest route that covers `address` is a default route: it leaves through
        a router, not onto a network this host is on (its LAN, a bridge, a VPN's routes)."""
        best, default = -1, False
        for net, _ in self.routes:
            if net.version == address.version and address in net and net.prefixlen > best:
                best, default = net.prefixlen, net.prefixlen == 0
        return default


def is_local(address: Address) -> bool:
    """Whether `address` is one of this host's own (binding to it works only then)."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class Policy:
    """Where a build may connect: see the module's docstring. `engine_networks`: the subnets
    of the engine's networks (its containers' addresses); `allowed`: `host:port` a build may
    reach whatever its addresses (the operator's: a package mirror on this host)."""

    engine_networks: tuple[Network, ...] = ()
    allowed: frozenset[str] = frozenset()
    routes: Routes = field(default_factory=Routes.read)

    def refusal(self, text: str) -> str:
        """Why a build may not connect to the address `text`; "" if it may."""
        address: Address = ipaddress.ip_address(text.split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if address.is_loopback or address.is_unspecified:
            return "this host's loopback"
        if address.is_link_local or address.is_multicast:
            return "link-local or multicast"
        if is_local(address):
            return "an address of this host"
        if address in self.routes.next_hops:
            return "the next hop of this host's default route"
        for net in self.engine_networks:
            if net.version == address.version and address in net:
                return f"in the engine's container network {net}"
        if not self.routes.by_default(address):
            return "on a network of this host (its LAN, a bridge), not past its default route"
        return ""


def engine_networks(subnets: Iterable[str]) -> tuple[Network, ...]:
    found = []
    for subnet in subnets:
        with contextlib.suppress(ValueError):
            found.append(ipaddress.ip_network(subnet, strict=False))
    return tuple(found)


class Relay:
    """The proxy of one build, listening on `directory`/relay.sock; `directory`/alive.sock
    takes the gateway's lifeline (the gateway exits when it closes: this process is gone).
    `ready` is set once the gateway holds its lifeline (its loopback port is listening)."""

    def __init__(self, directory: str, policy: Policy) -> None:
        self.policy = policy
        self.ready = threading.Event()
        self.refused: list[str] = []  # "host:port: why" of every connection it did not make
        self._connections = threading.BoundedSemaphore(CONNECTIONS)
        self._open: set[socket.socket] = set()
        self._guard = threading.Lock()
        self._closed = False
        self._listeners = [self._listen(os.path.join(directory, n)) for n in ("relay", "alive")]
        for listener, serve in zip(self._listeners, (self._serve, self._hold), strict=True):
            threading.Thread(target=self._accept, args=(listener, serve), daemon=True).start()

    def _listen(self, path: str) -> socket.socket:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path + ".sock")
        listener.listen(CONNECTIONS)
        return listener

    def close(self) -> None:
        """Stop listening and close every connection (the gateway's lifeline with them)."""
        with self._guard:
            self._closed = True
            doomed = [*self._listeners, *self._open]
            self._open.clear()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _track(self, sock: socket.socket) -> bool:
        with self._guard:
            if self._closed:
                sock.close()
                return False
            self._open.add(sock)
            return True

    def _forget(self, *socks: socket.socket) -> None:
        with self._guard:
            self._open.difference_update(socks)
        for sock in socks:
            sock.close()

    def _accept(self, listener: socket.socket, serve) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            if self._track(conn):
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        self.ready.set()  # (closed with everything else by close())

    def _serve(self, conn: socket.socket) -> None:
        if not self._connections.acquire(blocking=False):
            self._answer(conn, "503 Service Unavailable", f"more than {CONNECTIONS} at once")
            self._forget(conn)
            return
        upstream = None
        try:
            upstream = self._open_upstream(conn)
            if upstream is not None:
                _splice(conn, upstream)
        except OSError:
            pass
        finally:
            self._connections.release()
            self._forget(conn, *([upstream] if upstream is not None else []))

    def _open_upstream(self, conn: socket.socket) -> socket.socket | None:
        conn.settimeout(HEAD_SECONDS)
        head, rest = _read_head(conn)
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split()
        if len(parts) != 3:
            self._answer(conn, "400 Bad Request", "not an HTTP proxy request")
            return None
        method, target, version = parts
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            forward = b""
        elif target.startswith("http://"):
            authority, _, path = target[len("http://") :].partition("/")
            host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "")
            port = port or "80"
            first = f"{method} /{path} {version}".encode("latin-1")
            forward = first + head[len(line) :]
        else:
            self._answer(conn, "400 Bad Request", "only CONNECT and http:// requests are relayed")
            return None
        host = host.strip("[]")
        if not port.isdigit() or not host:
            self._answer(conn, "400 Bad Request", f"no host and port in {target!r}")
            return None
        upstream, why = self._connect(host, int(port))
        if upstream is None:
            self.refused.append(f"{host}:{port}: {why}")
            self._answer(conn, "403 Forbidden", f"not connecting to {host}:{port}: {why}")
            return None
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        upstream.sendall(forward + rest)
        return upstream

    def _connect(self, host: str, port: int) -> tuple[socket.socket | None, str]:
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            return None, f"{host} does not resolve ({exc})"
        why = f"{host} has no address"
        allowed = f"{host}:{port}" in self.policy.allowed
        for family, kind, proto, _, address in found:
            refusal = "" if allowed else self.policy.refusal(str(address[0]))
            if refusal:
                why = f"{address[0]} is {refusal}"
                continue
            sock = socket.socket(family, kind, proto)
            if not self._track(sock):
                return None, "the build is over"
            try:
                sock.settimeout(CONNECT_SECONDS)
                sock.connect(address)
                return sock, ""
            except OSError as exc:
                self._forget(sock)
                why = f"{address[0]} is unreachable ({exc})"
        return None, why

    @staticmethod
    def _answer(conn: socket.socket, status: str, text: str) -> None:
        body = f"endless build network: {text}\n".encode()
        head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        with contextlib.suppress(OSError):
            conn.sendall(head.encode() + body)


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    """A request head (through its blank line) and whatever came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > HEAD_LIMIT:
            raise OSError("no complete request head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def _splice(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both have ended (or one side is idle for IDLE_SECONDS)."""
    a.settimeout(IDLE_SECONDS)
    b.settimeout(IDLE_SECONDS)
    back = threading.Thread(target=_pump, args=(b, a), daemon=True)
    back.start()
    _pump(a, b)
    back.join()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
