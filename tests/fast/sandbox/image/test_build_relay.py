"""The build relay's policy and mechanics (build_relay.py), on real sockets: where a build's
network may connect (never this host, a network it is on, nor the engine's containers) and how
it relays HTTP(S) proxy requests."""

from __future__ import annotations

import os
import socket
import subprocess

from build_probe import host_address, recorder

from endless_assets.sandbox.image import build_network
from endless_assets.sandbox.image.build_relay import Policy, Relay, Routes, engine_networks


def test_the_relay_refuses_this_hosts_addresses_and_the_engines_networks():
    policy = Policy(engine_networks(["172.17.0.0/16", "fd00:abcd::/64"]))
    assert policy.refusal("127.0.0.1") == "this host's loopback"
    assert policy.refusal("::1") == "this host's loopback"
    assert policy.refusal("::ffff:127.0.0.1") == "this host's loopback"
    assert policy.refusal("0.0.0.0") == "this host's loopback"
    assert policy.refusal(host_address()) == "an address of this host"
    assert policy.refusal("172.17.0.9") == "in the engine's container network 172.17.0.0/16"
    assert policy.refusal("169.254.169.254") == "link-local or multicast"
    assert policy.refusal("fe80::1%1") == "link-local or multicast"
    for hop in Routes.read().next_hops:
        assert policy.refusal(str(hop)) == "the next hop of this host's default route"
    if Routes.read().uplinks:  # an address the default route takes: a registry's kind
        assert policy.refusal("198.51.100.7") == ""


class Open(Policy):
    def refusal(self, text: str) -> str:
        return ""


def ask(path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(30)
        client.connect(path)
        client.sendall(request)
        client.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    return data


HEADERS = "Host: x\r\nConnection: close\r\n\r\n"


def test_the_relay_speaks_connect_and_absolute_form_and_refuses_naming_why(tmp_path):
    (tmp_path / "ours").mkdir()
    (tmp_path / "open").mkdir()
    with recorder("127.0.0.1") as target:
        port = target.server_address[1]
        why = "127.0.0.1 is this host's loopback"
        ours = Relay(str(tmp_path / "ours"), Policy())
        try:
            path = str(tmp_path / "ours/relay.sock")
            reply = ask(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
            assert reply.startswith(b"HTTP/1.1 403 Forbidden")
            assert f"not connecting to 127.0.0.1:{port}: {why}".encode() in reply
            assert ask(path, b"hello\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request")
            assert ours.refused == [f"127.0.0.1:{port}: {why}"]
        finally:
            ours.close()
        relay = Relay(str(tmp_path / "open"), Open())  # the mechanics, where anything goes
        try:
            path = str(tmp_path / "open/relay.sock")
            plain = f"GET http://127.0.0.1:{port}/absolute HTTP/1.1\r\n{HEADERS}"
            reply = ask(path, plain.encode())
            assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(b"you reached this host\n")
            tunnel = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /tunnel HTTP/1.1\r\n{HEADERS}"
            reply = ask(path, tunnel.encode())
            assert reply.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200")
            assert target.seen == ["/absolute", "/tunnel"]
        finally:
            relay.close()


# A host on 192.0.2.0/24 (its default route through 192.0.2.1) with a VPN's 10.0.0.0/8 through
# 192.0.2.254: /proc/net/route's layout (little-endian hex addresses).
ROUTE = """Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
tun0\t0000000A\tFE0200C0\t0003\t0\t0\t0\t000000FF\t0\t0\t0
eth0\t000033C6\t00000000\t0201\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""


def test_only_what_leaves_through_the_default_route_is_reached(tmp_path):
    """Another machine of the host's LAN (an engine of a pool, a database) or behind a VPN's
    route is refused; what only the default route covers (a registry) is not; a rejecting
    route covers nothing."""
    (tmp_path / "route").write_text(ROUTE)
    routes = Routes.read(str(tmp_path))
    assert routes.uplinks == {"eth0"}
    policy = Policy(routes=routes)
    lan = "on a network of this host (its LAN, a bridge), not past its default route"
    assert policy.refusal("192.0.2.50") == lan
    assert policy.refusal("10.1.2.3") == lan
    assert policy.refusal("192.0.2.1") == "the next hop of this host's default route"
    assert policy.refusal("203.0.113.80") == ""
    assert policy.refusal("198.51.0.9") == ""  # (its route rejects: the default one covers it)
    assert Policy(routes=Routes((), frozenset(), frozenset())).refusal("203.0.113.80") == lan


def test_a_sweep_removes_relay_directories_of_dead_processes_of_its_own_pid_namespace(tmp_path):
    """A process id means a process only in its PID namespace: a run worker in a container that
    shares the directory has ids of its own, and its live relay is left alone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    ours = build_network._pid_namespace()
    names = {
        "dead": f"{gone.pid}-{ours}-a",
        "alive": f"{os.getpid()}-{ours}-b",
        "other namespace": f"{gone.pid}-{int(ours) + 1}-c",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
    build_network._sweep(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [names["alive"], names["other namespace"]]
    )
