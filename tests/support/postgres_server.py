"""A real PostgreSQL server for tests (Debian's, started as the `postgres` user in a temporary
directory, stopped afterwards): the `postgres` fixture, and `Postgres.database` for a fresh
database's URL."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD = f"pw-{secrets.token_hex(12)}"


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Postgres:
    root: Path
    port: int

    def database(self, name: str, scheme: str = "postgresql") -> str:
        """A fresh database; its URL with the password (what a team puts in DAGSTER_PG_URL), in
        the standard form psql and managed databases give, or with `scheme` (e.g.
        postgresql+psycopg2)."""
        import psycopg2

        conn = psycopg2.connect(host=str(self.root), port=self.port, user="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'create database "{name}"')
        conn.close()
        return f"{scheme}://postgres:{PASSWORD}@127.0.0.1:{self.port}/{name}"


@pytest.fixture(scope="module")
def postgres():
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed")
    # initdb refuses to run as root: the server runs as `postgres`, in a directory it owns.
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="endless-pg-"))
    (root / "pw").write_text(PASSWORD)
    if as_postgres:
        for path in (root, root / "pw"):
            shutil.chown(path, "postgres", "postgres")
    port = free_port()

    def ctl(*args: str) -> None:
        subprocess.run(
            [*as_postgres, pg_ctl, "-D", str(root / "data"), *args], check=True, capture_output=True
        )

    subprocess.run(
        [
            *as_postgres,
            initdb,
            "-D",
            str(root / "data"),
            "-U",
            "postgres",
            "--pwfile",
            str(root / "pw"),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
    options = f"-k {root} -p {port} -c listen_addresses=127.0.0.1"
    ctl("-o", options, "-l", str(root / "server.log"), "-w", "-t", "60", "start")
    try:
        yield Postgres(root, port)
    finally:
        ctl("-m", "fast", "-w", "-t", "60", "stop")
        shutil.rmtree(root, ignore_errors=True)
