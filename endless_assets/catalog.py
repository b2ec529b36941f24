"""The DuckDB catalog: views over the Parquet lake plus the stats views.

`data/endless.duckdb` holds no data, only views with absolute paths to the lake, so it is
rebuilt in a temporary file and swapped in with `os.replace`: readers that hold the old file keep
working, and parallel Dagster steps never fight over DuckDB's single-writer lock. Views over
tables with no data yet are typed and empty, so every query works from the first run.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import duckdb
import polars as pl

from endless_assets.lake import Lake
from endless_assets.schemas import TABLES, polars_schema

_DUCK_TYPES = {
    pl.String: "VARCHAR",
    pl.Int64: "BIGINT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
}

# The funnel: how many tasks entered and survived each stage, per batch.
STATS_VIEWS: dict[str, str] = {
    "funnel": """
        with stages as (
            select batch, 1 as stage_order, 'I. describe' as stage,
                   count(*) as entered,
                   count(*) filter (where status = 'ok') as survived,
                   count(*) filter (where status = 'rejected') as rejected,
                   count(*) filter (where status = 'harness_error') as harness_errors
            from task_descriptions group by batch
            union all
            select batch, 2, 'II. environment', count(*),
                   count(*) filter (where status = 'ok'),
                   count(*) filter (where status = 'rejected'),
                   count(*) filter (where status = 'harness_error')
            from task_environments group by batch
            union all
            select batch, 3, 'III. completion test', count(*),
                   count(*) filter (where status = 'ok'),
                   count(*) filter (where status = 'rejected'),
                   count(*) filter (where status = 'harness_error')
            from completion_tests group by batch
            union all
            select batch, 4, 'IV. solver filter', count(*),
                   count(*) filter (where kept),
                   count(*) filter (where not kept and k > 0),
                   count(*) filter (where k = 0)
            from filtered_dataset group by batch
        )
        select * from stages order by batch, stage_order
    """,
    "funnel_overall": """
        select stage_order, stage, sum(entered)::BIGINT as entered,
               sum(survived)::BIGINT as survived, sum(rejected)::BIGINT as rejected,
               sum(harness_errors)::BIGINT as harness_errors
        from funnel group by stage_order, stage order by stage_order
    """,
    "funnel_reasons": """
        select batch, stage_order, stage, reason, count(*) as tasks, any_value(detail) as example
        from (
            select batch, 1 as stage_order, 'I. describe' as stage,
                   split_part(reject_reason, ': ', 1) as reason, reject_reason as detail
            from task_descriptions where status <> 'ok'
            union all
            select batch, 2, 'II. environment', split_part(reject_reason, ': ', 1), reject_reason
            from task_environments where status <> 'ok'
            union all
            select batch, 3, 'III. completion test', split_part(reject_reason, ': ', 1),
                   reject_reason
            from completion_tests where status <> 'ok'
            union all
            select batch, 4, 'IV. solver filter', split_part(drop_reason, ': ', 1), drop_reason
            from filtered_dataset where not kept
        )
        group by all order by batch, stage_order, tasks desc
    """,
}


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _empty_view_sql(table: str) -> str:
    columns = []
    for name, dtype in polars_schema(table).items():
        if isinstance(dtype, pl.Datetime):
            duck = "TIMESTAMPTZ"
        else:
            duck = _DUCK_TYPES.get(type(dtype), _DUCK_TYPES.get(dtype, "VARCHAR"))
        columns.append(f'CAST(NULL AS {duck}) AS "{name}"')
    return f"select {', '.join(columns)} where false"


def table_view_sql(lake: Lake, table: str) -> str:
    if lake.has_data(table):
        return (
            f"select * from read_parquet({_sql_string(lake.table_glob(table))}, "
            "union_by_name = true, hive_partitioning = false)"
        )
    return _empty_view_sql(table)


def create_views(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    for table in TABLES:
        con.execute(f"create or replace view {table} as {table_view_sql(lake, table)}")
    for name, sql in STATS_VIEWS.items():
        con.execute(f"create or replace view {name} as {sql}")


def rebuild_catalog(lake: Lake) -> Path:
    """Write the catalog to a temporary file and atomically swap it in."""
    lake.data_dir.mkdir(parents=True, exist_ok=True)
    target = lake.catalog_path
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        con = duckdb.connect(str(tmp))
        try:
            create_views(con, lake)
            con.execute("checkpoint")
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            if leftover.exists():
                leftover.unlink()
    return target


def connect(lake: Lake, *, rebuild: bool = False) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the catalog (rebuilt first if missing or asked)."""
    if rebuild or not lake.catalog_path.exists():
        rebuild_catalog(lake)
    return duckdb.connect(str(lake.catalog_path), read_only=True)


def query(lake: Lake, sql: str) -> pl.DataFrame:
    """Run a query against the catalog and return a polars frame."""
    con = connect(lake)
    try:
        try:
            return _frame(con, sql)
        except duckdb.IOException:
            # A partition disappeared since the catalog was built: rebuild once and retry.
            con.close()
            con = connect(lake, rebuild=True)
            return _frame(con, sql)
    finally:
        con.close()


def _frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    relation = con.sql(sql)
    return relation.pl() if relation is not None else pl.DataFrame()
