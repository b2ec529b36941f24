"""The Dagster instance endless keeps in DAGSTER_HOME: SQLite on one machine, or, with
DAGSTER_PG_URL set, PostgreSQL shared by a team.

With DAGSTER_PG_URL, `dagster.yaml` keeps runs, event logs and schedules in PostgreSQL
(dagster-postgres) and queues every run (the queued run coordinator; the daemon launches them),
with the `docker` concurrency pool sized to the sandbox engines' slots. The URL is a secret: the
yaml names the variable (Dagster's `env:` indirection) and every process that opens the instance
(the UI, the daemon, run workers, `endless`) reads it from its own environment; messages show it
with the password hidden.

`dagster.yaml` is endless's when its first line is MARK (or when it says exactly what an older
endless wrote, unmarked): endless rewrites it when the environment asks for another instance. A
file without the mark is the user's and is left alone (with a one-line note when DAGSTER_PG_URL
is set and the file does not use PostgreSQL).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

PG_ENV = "DAGSTER_PG_URL"
STORAGE_MODULE = "endless_assets.defs.postgres_storage"
STORAGE_CLASS = "PostgresStorage"
# The schemes DAGSTER_PG_URL may start with: the standard ones (given the driver dagster-postgres
# works with) and the explicit psycopg2 one.
SCHEMES = ("postgresql", "postgres", "postgresql+psycopg2")
DRIVER_SCHEME = "postgresql+psycopg2"
MARK = "# Written by endless (endless_assets/instance.py)."
CONNECT_TIMEOUT = 5  # seconds for the check that the server answers
# pg_advisory_lock key held while a process opens a PostgreSQL instance (creates its schemas the
# first time): the home's file lock cannot serialise processes on different machines.
SCHEMA_LOCK_KEY = 0x656E646C  # "endl"

# What an older endless wrote (launch.INSTANCE_YAML, and the repository's dagster_home/dagster.yaml,
# whose comments do not change what it says): still endless's own.
LEGACY = {"telemetry": {"enabled": False}, "concurrency": {"runs": {"max_concurrent_runs": 1}}}

MONITORING = """\
# Runs the UI and the daemon launch start beside the code server; the daemon's run monitoring
# asks the launcher whether each run's process still runs: a run whose process is gone (killed,
# out of memory) is marked failed, and its pool slots are freed (endless_assets/runs/dead_runs.py).
run_launcher:
  module: endless_assets.runs.launcher
  class: OwnedRunLauncher
run_monitoring:
  enabled: true
  poll_interval_seconds: 5
  free_slots_after_run_end_seconds: 5
"""

SQLITE_YAML = f"""\
{MARK}
# Rewritten when the environment asks for another instance (DAGSTER_PG_URL set: PostgreSQL) or
# the sandbox engines change; delete the line above to keep your own edits.
# SQLite storage, the default, lives beside this file.
telemetry:
  enabled: false
{MONITORING}concurrency:
  runs:
    # A 2-core machine builds and runs containers for one batch at a time; backfills queue.
    max_concurrent_runs: 1
  pools:
    granularity: op
    # The pool `docker` (the Docker stages): {{engines}} sandbox engine(s), {{slots}} slots in
    # all, {{workers}} containers per Docker step (`workers`); the Docker steps of every run,
    # `endless run`'s included, share it.
    default_limit: {{docker_pool}}
"""

POSTGRES_YAML = f"""\
{MARK}
# Rewritten when DAGSTER_PG_URL is unset or the sandbox engines change; delete the line above to
# keep your own edits.
telemetry:
  enabled: false
# Runs, event logs and schedules in PostgreSQL: dagster-postgres's storage, given the psycopg2
# driver whether the URL says postgresql:// or postgresql+psycopg2://. The URL is read from the
# environment of every process that opens this instance (UI, daemon, run workers, endless), never
# written here.
storage:
  custom:
    module: {STORAGE_MODULE}
    class: {STORAGE_CLASS}
    config:
      postgres_url:
        env: {PG_ENV}
# Every run (UI, schedule, backfill, `endless run --submit`) waits in the queue; the daemon
# (`dagster-daemon run`, or `dg dev`) launches them.
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
{MONITORING}concurrency:
  runs:
    # Twice the Docker steps the engines take at once: while one run's Docker stage holds an
    # engine, another run generates its tasks or filters its dataset.
    max_concurrent_runs: {{max_concurrent_runs}}
  pools:
    # Steps wait for a slot inside their run (which may then start its other steps).
    granularity: op
    # The pool `docker` (task_environments, completion_tests, solver_rollouts; the only pool):
    # {{engines}} sandbox engine(s), {{slots}} slots in all, {{workers}} containers per Docker
    # step (`workers`). A limit set by `dagster instance concurrency set docker N` overrides it.
    default_limit: {{docker_pool}}
"""


class InstanceError(ValueError):
    """A one-line reason the instance cannot be used (bad DAGSTER_PG_URL, unusable yaml)."""


@dataclass(frozen=True)
class Sizing:
    engines: int
    slots: int
    workers: int
    docker_pool: int  # Docker steps at once, over every run of the instance
    max_concurrent_runs: int


def engine_slots(settings: Any) -> list[int]:
    """Slots of each sandbox engine: the pool of `docker_hosts` (each with its own slot count),
    else the one engine (`docker_host`, else the local socket) with `workers` slots: one Docker
    step keeps it as busy as it should be."""
    return [spec.capacity for spec in settings.engine_specs]


def sizing(settings: Any) -> Sizing:
    slots = engine_slots(settings)
    docker_pool = max(1, sum(slots) // max(1, settings.run.workers))
    return Sizing(len(slots), sum(slots), settings.run.workers, docker_pool, 2 * docker_pool)


def pg_url() -> str | None:
    return os.environ.get(PG_ENV, "").strip() or None


def sqlite_yaml(size: Sizing) -> str:
    return SQLITE_YAML.format(**asdict(size))


def postgres_yaml(size: Sizing) -> str:
    return POSTGRES_YAML.format(**asdict(size))


def driver_url(url: str) -> str:
    """The URL as dagster-postgres is given it: a standard `postgresql://` (or `postgres://`)
    with psycopg2 named (SQLAlchemy 2.1 would read it as psycopg 3; postgres_storage.py says
    why that does not do); any other URL as it is."""
    scheme, sep, rest = url.strip().partition("://")
    return f"{DRIVER_SCHEME}://{rest}" if sep and scheme.lower() in SCHEMES[:2] else url.strip()


def _url(url: str) -> Any:
    """The URL parsed as SQLAlchemy (what dagster-postgres hands it to) reads it, with its driver
    named: `postgresql://user:password@host:port/database` (also `postgres://`) or
    `postgresql+psycopg2://...`; InstanceError, in one line and without the password, if not."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    authority = url.split("://", 1)[1].split("/", 1)[0] if "://" in url else ""
    if authority.count("@") > 1:  # (said without the URL: the password is in it)
        raise InstanceError(
            f"{PG_ENV} has more than one '@' before its host: write an '@' in the user or the "
            "password as %40"
        )
    scheme = url.split("://")[0].strip().lower() if "://" in url else ""
    if scheme.startswith("postgresql+") and scheme not in SCHEMES:
        raise InstanceError(
            f"{PG_ENV} names the driver {scheme.partition('+')[2][:24]!r}, which dagster-postgres "
            "does not work with: write postgresql:// (or postgresql+psycopg2://)"
        )
    if scheme not in SCHEMES:
        said = f"its scheme is {scheme[:24]!r}" if scheme else "no scheme://"
        raise InstanceError(
            f"{PG_ENV} does not parse as postgresql://user:password@host:port/database ({said}; "
            "postgresql+psycopg2:// is taken too)"
        )
    try:
        return make_url(driver_url(url))
    except (ArgumentError, ValueError):
        port = authority.rsplit("@", 1)[-1].rpartition("]")[2].partition(":")[2]
        if port and not port.isdigit():
            raise InstanceError(f"{PG_ENV}'s port is not a number ({port[:24]!r})") from None
        raise InstanceError(
            f"{PG_ENV} does not parse as postgresql://user:password@host:port/database"
        ) from None


def shown(url: str) -> str:
    """The URL as it may appear in a message, with the scheme it was written with: the password
    replaced by ***."""
    try:
        parsed = _url(url)
        written = url.split("://")[0].strip()
        return parsed.set(drivername=written).render_as_string(hide_password=True)
    except InstanceError:
        return f"<{PG_ENV}>"


def hidden(text: str, url: str) -> str:
    """`text` with the URL's password (as written, and decoded) replaced by ***."""
    from urllib.parse import quote

    password = _url(url).password
    for form in {password, quote(password, safe="")} if password else ():
        text = text.replace(form, "***")
    return text


@contextmanager
def postgres_session(url: str) -> Iterator[None]:
    """Check that the server answers (InstanceError naming the URL, password hidden, if not),
    and hold the schema lock while the caller opens the instance."""
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    parsed = _url(url)
    engine = sa.create_engine(
        parsed, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT}
    )
    try:
        try:
            conn = engine.connect()
        except sa.exc.DBAPIError as exc:
            reason = " ".join(str(exc.orig or exc).split())
            raise InstanceError(
                f"{PG_ENV} ({shown(url)}) does not answer: {hidden(reason, url)[:300]}"
            ) from None
        with conn:
            conn.execute(sa.text("select pg_advisory_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(sa.text("select pg_advisory_unlock(:key)"), {"key": SCHEMA_LOCK_KEY})
    finally:
        engine.dispose()


def _is_ours(text: str, parsed: Any) -> bool:
    return text.startswith(MARK) or parsed == LEGACY


def _uses_postgres(parsed: Any) -> bool:
    return isinstance(parsed, dict) and "postgres" in yaml.safe_dump(parsed)


def sync_instance_yaml(home: Path, url: str | None, settings: Any) -> str | None:
    """Write `home/dagster.yaml` for this environment when it is missing or endless's own and
    says something else; return a one-line note for the user, if any. Call with the home locked."""
    path = home / "dagster.yaml"
    wanted = postgres_yaml(sizing(settings)) if url else sqlite_yaml(sizing(settings))
    if not path.exists():
        path.write_text(wanted)
        return None
    text = path.read_text()
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InstanceError(f"{path} is not YAML: {' '.join(str(exc).split())[:200]}") from None
    if not _is_ours(text, parsed):
        if url and not _uses_postgres(parsed):
            return (
                f"{path} was not written by endless and is left as is: this instance does not "
                f"use {PG_ENV} (delete the file to let endless write a PostgreSQL one)"
            )
        return None
    if parsed == yaml.safe_load(wanted):
        return None
    if not url and _uses_postgres(parsed):
        raise InstanceError(
            f"{path} is a PostgreSQL instance but {PG_ENV} is unset: set it, or delete the file "
            "to go back to SQLite here"
        )
    _write_atomically(path, wanted)
    if url and not _uses_postgres(parsed):
        return (
            f"{path} now keeps runs in PostgreSQL ({PG_ENV}); the runs recorded in SQLite "
            f"under {home} stay there but are no longer shown"
        )
    return None


def _write_atomically(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(text)
    os.replace(part, path)
