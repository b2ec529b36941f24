"""The DuckDB catalog: views over the Parquet lake plus the stats views (stats_views.py).

`data/endless.duckdb` holds only views: it is rebuilt in a temporary file and swapped in with
`os.replace`, so readers keep working and parallel steps never fight over DuckDB's writer lock.
Views over tables with no data yet are typed and empty. The views name the lake relative to the
data directory (`lake/<table>/...`), so a moved data directory answers with its own files. A
catalog that is missing, unreadable or of an older format is rebuilt when opened.

Every connection handed out is read-only and locked to the lake's files (no extensions, the
configuration locked), and `query` runs one SELECT and nothing else.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from endless_assets.store.lake import Lake, first_line
from endless_assets.store.schemas import TABLES, polars_schema
from endless_assets.store.stats_views import STATS_VIEWS

STORAGE_VERSION = "v1.0.0"
# Bumped when the catalog's shape changes (2: relative paths): older catalogs are rebuilt.
CATALOG_FORMAT = 2
INFO_VIEW = "endless_catalog"
# For the DuckDB CLI, started in the data directory: `duckdb -readonly -init duckdb-init.sql
# endless.duckdb`. The CLI sets options after its init file, so the configuration is not locked;
# external access, once disabled, cannot be enabled again in the session anyway.
CLI_INIT = "duckdb-init.sql"
CLI_INIT_SQL = """\
-- Written by endless with the catalog: the DuckDB CLI reads the lake and nothing else.
set allowed_directories = ['lake/'];
set enable_external_access = false;
set autoinstall_known_extensions = false;
set autoload_known_extensions = false;
"""

_DUCK_TYPES = {
    pl.String: "VARCHAR",
    pl.Int64: "BIGINT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
}


class CatalogError(Exception):
    """A query that failed or was refused, in one line."""


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _duck_type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ"
    return _DUCK_TYPES.get(type(dtype), _DUCK_TYPES.get(dtype, "VARCHAR"))


def _nulls(table: str, present: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The table's columns but `present` as typed NULLs."""
    schema = polars_schema(table).items()
    return [
        f'CAST(NULL AS {_duck_type(t)}) AS "{name}"' for name, t in schema if name not in present
    ]


def relative_glob(table: str) -> str:
    """A table's partitions, relative to the data directory."""
    return f"lake/{table}/batch=*/part.parquet"


def table_view_sql(lake: Lake, table: str, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """A view over every partition of a table. Columns of the table's schema that no stored
    partition has yet (written before the column existed) are added as typed NULLs, so every
    stats view can name every schema column whatever the age of the data."""
    if not lake.has_data(table):
        return f"select {', '.join(_nulls(table))} where false"
    source = (
        f"read_parquet({_sql_string(relative_glob(table))}, "
        "union_by_name = true, hive_partitioning = false)"
    )
    missing: list[str] = []
    if con is not None:
        present = {row[0] for row in con.execute(f"describe select * from {source}").fetchall()}
        missing = _nulls(table, present)
    return f"select *{''.join(', ' + m for m in missing)} from {source}"


def create_views(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    for table in TABLES:
        con.execute(f"create or replace view {table} as {table_view_sql(lake, table, con)}")
    for name, sql in STATS_VIEWS.items():
        con.execute(f"create or replace view {name} as {sql}")
    con.execute(f"create or replace view {INFO_VIEW} as select {CATALOG_FORMAT} as format")


def rebuild_catalog(lake: Lake) -> Path:
    """Move unreadable partitions aside, write the catalog to a temporary file and atomically
    swap it in. A partition that disappears meanwhile (another process moved it) means: again."""
    for attempt in range(3):
        lake.quarantine_unreadable()
        try:
            return _write_catalog(lake)
        except duckdb.IOException:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _write_catalog(lake: Lake) -> Path:
    lake.data_dir.mkdir(parents=True, exist_ok=True)
    target = lake.catalog_path
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        con = duckdb.connect()
        try:
            con.execute(f"set file_search_path = {_sql_string(str(lake.data_dir))}")
            # An older storage format, so the DuckDB CLI (`duckdb endless.duckdb`, which lags
            # the Python package by a major version) opens the catalog too.
            con.execute(
                f"attach {_sql_string(str(tmp))} as catalog (storage_version '{STORAGE_VERSION}')"
            )
            con.execute("use catalog")
            create_views(con, lake)
            con.execute("checkpoint catalog")
            con.execute("use memory")
            con.execute("detach catalog")
        finally:
            con.close()
        os.replace(tmp, target)
        init = lake.data_dir / CLI_INIT
        if not init.exists() or init.read_text(encoding="utf-8") != CLI_INIT_SQL:
            init.write_text(CLI_INIT_SQL, encoding="utf-8")
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            if leftover.exists():
                leftover.unlink()
    return target


def _lock(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """Only the lake's files are readable, nothing is installed or loaded, nothing changes it."""
    allowed = ", ".join(_sql_string(p) for p in (f"{lake.root}/", "lake/"))
    con.execute(f"set file_search_path = {_sql_string(str(lake.data_dir))}")
    con.execute(f"set allowed_directories = [{allowed}]")
    con.execute("set enable_external_access = false")
    con.execute("set autoinstall_known_extensions = false")
    con.execute("set autoload_known_extensions = false")
    con.execute("set lock_configuration = true")


def _open(lake: Lake) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(lake.catalog_path), read_only=True)
    try:
        _lock(con, lake)
        found = con.execute(f"select format from {INFO_VIEW}").fetchall()
        if found != [(CATALOG_FORMAT,)]:
            raise duckdb.CatalogException(f"catalog format {found} is not {CATALOG_FORMAT}")
    except BaseException:
        con.close()
        raise
    return con


def connect(lake: Lake, *, rebuild: bool = False) -> duckdb.DuckDBPyConnection:
    """A read-only, locked connection to the catalog. Rebuilt first if asked, missing,
    unreadable (not a DuckDB file) or of an older format."""
    if not rebuild and lake.catalog_path.exists():
        try:
            return _open(lake)
        except duckdb.Error:
            pass
    rebuild_catalog(lake)
    return _open(lake)


def check_query(sql: str) -> None:
    """One SELECT (with, from, describe, show, summarize, values, ...) and nothing else."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise CatalogError(f"query failed: {first_line(exc)}") from None
    if len(statements) != 1:
        raise CatalogError(f"one statement per query, not {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise CatalogError(
            f"refused: {kind.name} statements are not allowed; the catalog is read-only "
            "and answers SELECT queries only"
        )


def query(lake: Lake, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
    """Run one SELECT against the catalog; a polars frame, or CatalogError in one line."""
    check_query(sql)
    try:
        con = connect(lake)
    except duckdb.Error as exc:
        raise CatalogError(f"the catalog cannot be opened: {first_line(exc)}") from None
    try:
        try:
            return _frame(con, sql, params)
        except (duckdb.IOException, duckdb.InvalidInputException) as exc:
            # A partition disappeared since the catalog was built, or one cannot be read (it is
            # moved aside): rebuild once and retry. Anything else is the query's own error.
            if not isinstance(exc, duckdb.IOException) and not lake.quarantine_unreadable():
                raise
            con.close()
            con = connect(lake, rebuild=True)
            return _frame(con, sql, params)
    except duckdb.Error as exc:
        raise CatalogError(f"query failed: {first_line(exc)}") from None
    finally:
        con.close()


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None) -> pl.DataFrame:
    relation = con.sql(sql, params=params)
    if relation is None:
        return pl.DataFrame()
    try:
        return relation.pl()
    except (duckdb.Error, pl.exceptions.PolarsError, TypeError, ValueError):
        # A type polars cannot hold (interval, union, bignum) or repeated column names: every
        # column as text, named as DuckDB named it (numbered when repeated).
        names = _unique(relation.columns)
        columns = ", ".join(f'#{i + 1}::VARCHAR AS "{n}"' for i, n in enumerate(names))
        return con.sql(f"select {columns} from ({sql})", params=params).pl()


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name] - 1}")
    return [n.replace('"', '""') for n in out]
