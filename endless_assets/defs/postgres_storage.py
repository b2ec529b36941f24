"""The instance's PostgreSQL storage (dagster.yaml names this class when DAGSTER_PG_URL is set):
dagster-postgres's, with the URL given the driver dagster-postgres works with.

DAGSTER_PG_URL may be written the standard way, `postgresql://user:password@host:port/db` (what
psql, managed databases and Dagster's docs use), or `postgresql+psycopg2://...`. SQLAlchemy 2.1
reads a bare `postgresql://` as psycopg 3, with which dagster-postgres 0.29 does not work: it
sends every stored event with `NOTIFY channel, :id`, whose parameter psycopg 3 binds server-side
and PostgreSQL refuses (`syntax error at or near "$1"`: no event is ever written). So every process
that opens the instance (the UI, the daemon, run workers, `endless`) gives it the psycopg2 driver
here, from the URL in its own environment; the URL is never written down.
"""

from __future__ import annotations

from typing import Any

from dagster_postgres import DagsterPostgresStorage

from endless_assets.instance import driver_url


class PostgresStorage(DagsterPostgresStorage):
    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> PostgresStorage:  # ty: ignore[invalid-method-override]
        return cls(
            inst_data=inst_data,
            postgres_url=driver_url(config_value["postgres_url"]),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
        )
