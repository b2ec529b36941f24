"""What the families with services share: the clients the agent's image installs (one layer
for all of them), and the services themselves, each a Dockerfile without its FROM line (the
generator puts the base image's): PostgreSQL with its data loaded at build time, Redis with its
keys, and a small HTTP application in Python."""

from __future__ import annotations

import random

from endless_assets.generation.procedural.base import apt_install, dedent
from endless_assets.models import Service

# The clients of every family's services in the agent's image: the same RUN line, so one layer.
AGENT_PACKAGES = ["postgresql-client", "redis-tools", "nginx-light", "curl"]


def secret(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


PG_SETUP = """
set -e
bin=$(ls -d /usr/lib/postgresql/*/bin)
install -d -o postgres -g postgres -m 700 /srv/pg
su postgres -s /bin/sh -c "$bin/initdb -D /srv/pg/data -U postgres --auth-local=peer \\
    --auth-host=scram-sha-256 >/dev/null"
echo "listen_addresses = '*'" >> /srv/pg/data/postgresql.conf
echo "host all all 0.0.0.0/0 scram-sha-256" >> /srv/pg/data/pg_hba.conf
su postgres -s /bin/sh -c "$bin/pg_ctl -D /srv/pg/data -w -o '-c listen_addresses=' start \\
    >/dev/null && psql -q -v ON_ERROR_STOP=1 -f /tmp/init.sql \\
    && $bin/pg_ctl -D /srv/pg/data -w stop >/dev/null"
ln -s "$bin/postgres" /usr/local/bin/postgres
rm /tmp/init.sql /tmp/pg-setup.sh
"""


def postgres(init_sql: str, name: str = "db") -> Service:
    """PostgreSQL (Debian's) with `init_sql` run by the superuser at build time; the agent and
    the tests reach it over the network with a password (scram-sha-256)."""
    dockerfile = "\n".join(
        [
            apt_install(["postgresql"]),
            "COPY init.sql pg-setup.sh /tmp/",
            "RUN sh /tmp/pg-setup.sh",
            "USER postgres",
        ]
    )
    return Service(
        name=name,
        dockerfile=dockerfile + "\n",
        context_files={"init.sql": init_sql, "pg-setup.sh": dedent(PG_SETUP)},
        command=["postgres", "-D", "/srv/pg/data"],
        ready="pg_isready -q -h 127.0.0.1 -U postgres",
        ready_seconds=90,
    )


REDIS_CONF = """
bind 0.0.0.0
protected-mode no
port 6379
dir /srv/redis
dbfilename dump.rdb
save ""
appendonly no
maxmemory 64mb
maxmemory-policy noeviction
"""
REDIS_SETUP = """
set -e
install -d -o redis -g redis /srv/redis
cp /tmp/redis.conf /srv/redis/redis.conf
su redis -s /bin/sh -c "redis-server /srv/redis/redis.conf --daemonize yes --save '' \\
    && until redis-cli ping >/dev/null 2>&1; do sleep 0.1; done \\
    && redis-cli --pipe < /tmp/seed.resp >/dev/null && redis-cli save >/dev/null \\
    && redis-cli shutdown nosave"
rm /tmp/seed.resp /tmp/redis-setup.sh /tmp/redis.conf
"""


def resp(*commands: list[str]) -> str:
    """Redis commands in its wire protocol (what `redis-cli --pipe` reads)."""
    out = []
    for command in commands:
        out.append(f"*{len(command)}\r\n")
        for arg in command:
            out.append(f"${len(arg.encode())}\r\n{arg}\r\n")
    return "".join(out)


def redis(commands: list[list[str]], name: str = "queue") -> Service:
    """Redis (Debian's) holding what `commands` wrote, loaded from its dump at start; 64 MiB of
    data at most (past it, writes fail)."""
    dockerfile = "\n".join(
        [
            apt_install(["redis-server"]),
            "COPY seed.resp redis.conf redis-setup.sh /tmp/",
            "RUN sh /tmp/redis-setup.sh",
            "USER redis",
        ]
    )
    return Service(
        name=name,
        dockerfile=dockerfile + "\n",
        context_files={
            "seed.resp": resp(*commands),
            "redis.conf": dedent(REDIS_CONF),
            "redis-setup.sh": dedent(REDIS_SETUP),
        },
        command=["redis-server", "/srv/redis/redis.conf"],
        ready="redis-cli ping | grep -q PONG",
        memory="256m",
    )


APP = """
import hashlib
import hmac
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

SECRET = os.environ["APP_SECRET"].encode()
KEY = os.environ.get("APP_KEY", "")
PREFIX = os.environ.get("APP_PREFIX", "/")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/health":
            return self.reply(200, "ok")
        if not url.path.startswith(PREFIX):
            return self.reply(404, "no such path")
        if KEY and self.headers.get("X-Upstream-Key", "") != KEY:
            return self.reply(403, "missing or wrong X-Upstream-Key")
        nonce = parse_qs(url.query).get("n", [""])[0]
        return self.reply(200, hmac.new(SECRET, nonce.encode(), hashlib.sha256).hexdigest())

    def reply(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("0.0.0.0", int(os.environ["APP_PORT"])), Handler).serve_forever()
"""


def http_app(port: int, environment: dict[str, str], name: str = "app") -> Service:
    """An HTTP application (Python's standard library) answering GET PREFIX...?n=NONCE with the
    HMAC of the nonce under a secret only it holds; /health for readiness."""
    return Service(
        name=name,
        dockerfile="COPY app.py /srv/app.py\nUSER nobody\n",
        context_files={"app.py": dedent(APP)},
        command=["python3", "/srv/app.py"],
        environment={"APP_PORT": str(port), **environment},
        ready=f"python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/health')\"",
        memory="128m",
        pids=64,
    )
