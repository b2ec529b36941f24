"""`endless check`: every partition read in full and held against its table's schema, the
catalog opened and every view queried; what is wrong, one line each (and, with `fix`, bad
partitions moved aside and the catalog rebuilt)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from endless_assets.store.catalog import INFO_VIEW, connect, rebuild_catalog
from endless_assets.store.lake import Lake, first_line
from endless_assets.store.schemas import TABLES, polars_schema
from endless_assets.store.stats_views import STATS_VIEWS


@dataclass(frozen=True)
class Finding:
    kind: str  # partition, stray_file, catalog, view, quarantined
    path: str
    problem: str
    fixed: str = ""


def partition_problem(lake: Lake, table: str, path: Path) -> str | None:
    """Why a partition is unusable: unreadable, a column of the wrong type, rows of another
    batch. Columns it lacks are fine (written before they existed; the views add NULLs)."""
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:
        return first_line(exc)
    expected = polars_schema(table)
    for name, dtype in frame.schema.items():
        want = expected.get(name)
        if want is None or dtype == want or dtype == pl.Null:
            continue
        if isinstance(want, pl.Datetime) and isinstance(dtype, pl.Datetime):
            continue
        return f"column {name} is {dtype}, the schema says {want}"
    batch = path.parent.name.removeprefix("batch=")
    if "batch" in frame.columns:
        others = frame.filter(pl.col("batch") != batch)["batch"].unique().to_list()
        if others:
            return f"rows of batch(es) {', '.join(map(str, others[:3]))} in batch {batch}"
    return None


def stray_files(lake: Lake) -> list[Finding]:
    found = []
    if not lake.root.exists():
        return found
    for path in sorted(lake.root.rglob("*")):
        relative = path.relative_to(lake.root).parts
        if path.is_dir():
            ok = len(relative) == 1 and relative[0] in TABLES
            ok = ok or (len(relative) == 2 and relative[1].startswith("batch="))
        else:
            ok = len(relative) == 3 and relative[0] in TABLES and relative[2] == "part.parquet"
        if not ok:
            found.append(Finding("stray_file", str(path), "not part of the lake's layout"))
    return found


def check_catalog(lake: Lake) -> list[Finding]:
    path = str(lake.catalog_path)
    try:
        con = duckdb.connect(path, read_only=True)
    except duckdb.Error as exc:
        return [Finding("catalog", path, first_line(exc))]
    try:
        try:
            con.execute(f"select format from {INFO_VIEW}").fetchall()
        except duckdb.Error:
            return [Finding("catalog", path, "written by an older version: rebuild it")]
    finally:
        con.close()
    findings = []
    con = connect(lake)
    try:
        for view in (*TABLES, *STATS_VIEWS):
            try:
                con.execute(f"select count(*) from {view}").fetchall()
            except duckdb.Error as exc:
                findings.append(Finding("view", f"{path}:{view}", first_line(exc)))
    finally:
        con.close()
    return findings


def check_lake(lake: Lake, *, fix: bool = False) -> list[Finding]:
    """Everything wrong with the data directory; with fix, bad partitions are moved aside and
    the catalog rebuilt (nothing is deleted)."""
    findings: list[Finding] = []
    for table in TABLES:
        for path in lake.partitions(table):
            problem = partition_problem(lake, table, path)
            if problem is None:
                continue
            fixed = ""
            if fix:
                bad = lake.quarantine(table, path, problem)
                fixed = f"moved to {bad.moved_to}" if bad.moved_to else ""
            findings.append(Finding("partition", str(path), problem, fixed))
    findings += stray_files(lake)
    if not lake.catalog_path.exists():
        findings.append(Finding("catalog", str(lake.catalog_path), "missing"))
    else:
        findings += check_catalog(lake)
    if fix and any(f.kind in ("partition", "catalog", "view") for f in findings):
        rebuild_catalog(lake)
        rebuilt = ("catalog", "view")
        findings = [
            Finding(f.kind, f.path, f.problem, "rebuilt") if f.kind in rebuilt else f
            for f in findings
        ]
    for path in lake.quarantined():
        reason = path.with_suffix(".reason.txt")
        why = reason.read_text(encoding="utf-8").splitlines()[-1] if reason.exists() else ""
        findings.append(Finding("quarantined", str(path), why or "moved aside earlier"))
    return findings
