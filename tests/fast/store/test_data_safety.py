"""Nothing lost, nothing leaked: the SQL surface reads the lake and nothing else, a bad partition
is moved aside (never deleted) and stops nothing else, the catalog heals itself and follows its
data directory, and `endless check` says what is wrong. Real DuckDB files, real Parquet, the real
CLI in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from synthetic_lake import Spec, write_synthetic_lake

from endless_assets.store.catalog import CatalogError, connect, query, rebuild_catalog
from endless_assets.store.lake import Lake, LakeError

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
FIRST, SECOND = "2026-10-01", "2026-10-02"
KEPT = "select count(*) as n from filtered_dataset where kept and batch = '{}'"


@pytest.fixture
def lake(tmp_path) -> Lake:
    lake = Lake(tmp_path / "data")
    write_synthetic_lake(lake, Spec(batches=2, tasks_per_batch=12, k=2))
    rebuild_catalog(lake)
    return lake


def endless(lake: Lake, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENDLESS_DATA_DIR": str(lake.data_dir), "COLUMNS": "200"}
    return subprocess.run([*ENDLESS, *args], capture_output=True, text=True, env=env, check=False)


def kept(lake: Lake, batch: str = FIRST) -> int:
    return int(query(lake, KEPT.format(batch))["n"][0])


def naive(lake: Lake) -> duckdb.DuckDBPyConnection:
    """How the catalog used to be opened: read-only, nothing else."""
    con = duckdb.connect(str(lake.catalog_path), read_only=True)
    con.execute(f"set file_search_path = '{lake.data_dir}'")
    return con


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# -- the SQL surface -------------------------------------------------------------------------------
def test_a_copy_to_a_partition_rewrites_it_on_a_naive_connection_and_is_refused_by_ours(lake):
    target = lake.partition_path("filtered_dataset", FIRST)
    before = kept(lake)
    assert before > 0
    attack = f"copy (select * from filtered_dataset where false) to '{target}' (format parquet)"
    scratch = Lake(lake.data_dir.parent / "scratch")
    shutil.copytree(lake.data_dir, scratch.data_dir)
    con = naive(scratch)
    con.execute(attack.replace(str(lake.data_dir), str(scratch.data_dir)))
    con.close()
    assert kept(scratch) == 0  # the attack works on the naive connection
    with pytest.raises(CatalogError, match="refused: COPY"):
        query(lake, attack)
    assert kept(lake) == before


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("select * from read_text('/etc/passwd')", "/etc/passwd"),
        ("select * from read_csv('/etc/os-release')", "/etc/os-release"),
        ("select * from read_text('lake/" + "../" * 12 + "etc/passwd')", "etc/passwd"),
        ("select * from read_parquet('endless.duckdb')", "endless.duckdb"),
    ],
)
def test_a_select_reads_the_lake_and_nothing_else(lake, sql, refused):
    con = naive(lake)
    with pytest.raises(duckdb.Error):  # (the parquet reader refuses the DuckDB file by itself)
        if "endless.duckdb" not in sql:
            assert con.execute(sql).fetchall()  # the naive connection reads the host
            raise duckdb.Error("read")
        con.execute(sql)
    con.close()
    with pytest.raises(CatalogError, match="Permission Error") as refusal:
        query(lake, sql)
    assert refused in str(refusal.value) and "\n" not in str(refusal.value)


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("attach '{other}' as other", "ATTACH"),
        ("install httpfs", "LOAD"),
        ("load httpfs", "LOAD"),
        ("export database '{out}'", "EXPORT"),
        ("copy (select 1) to '{out}.csv'", "COPY"),
        ("explain analyze copy (select 1 as a) to '{out}.csv'", "EXPLAIN"),
        ("set enable_external_access = true", "SET"),
        ("create table t as select 1", "CREATE"),
        ("select 1; copy (select 1) to '{out}.csv'", "statement"),
        ("checkpoint", "CALL"),
    ],
)
def test_statements_other_than_select_are_refused_in_one_line(lake, tmp_path, sql, kind):
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    out = tmp_path / "out"
    with pytest.raises(CatalogError, match=kind) as refusal:
        query(lake, sql.format(other=other, out=out))
    assert "\n" not in str(refusal.value)
    assert not any(tmp_path.glob("out*"))


def test_the_locked_configuration_cannot_be_unlocked(lake):
    con = connect(lake)
    try:
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("set enable_external_access = true")
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("set allowed_directories = ['/']")
    finally:
        con.close()


def test_the_cli_refuses_a_copy_in_one_line_and_the_data_stays(lake):
    before = kept(lake)
    target = lake.partition_path("filtered_dataset", FIRST)
    proc = endless(lake, "sql", f"copy (select 1 as x) to '{target}' (format parquet)")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "refused: COPY" in proc.stderr
    assert kept(lake) == before


ODD_TYPES = (
    "select interval 1 day as i, union_value(u := 7) as u, 1 as a, 2 as a, [1, 2] as l, "
    "{'k': 1} as s, map {'m': 2} as m, 'ab'::blob as b, 170141183460469231731687303715884105727 "
    "as h, varint '12' as v"
)


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_any_result_type_prints(lake, fmt):
    proc = endless(lake, "sql", ODD_TYPES, "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    assert "1 day" in proc.stdout and "a_1" in proc.stdout and "Traceback" not in proc.stderr


# -- bad partitions -------------------------------------------------------------------------------
def test_a_truncated_partition_is_moved_aside_and_every_other_batch_answers(lake):
    bad = lake.partition_path("filtered_dataset", FIRST)
    truncate(bad)
    other = kept(lake, SECOND)  # the catalog was built before: the query meets the bad file
    assert other > 0
    assert not bad.exists()
    moved = lake.quarantined()
    assert len(moved) == 1 and moved[0].read_bytes()  # kept, not deleted
    assert str(bad) in moved[0].with_suffix(".reason.txt").read_text()
    assert kept(lake, FIRST) == 0


def test_a_rerun_of_the_batch_writes_the_partition_again(lake):
    bad = lake.partition_path("task_descriptions", FIRST)
    truncate(bad)
    rebuild_catalog(lake)
    assert not bad.exists()
    lake.write("task_descriptions", FIRST, lake.read("task_descriptions", SECOND).head(3))
    rebuild_catalog(lake)
    assert lake.read("task_descriptions", FIRST).height == 3


def test_reading_a_bad_partition_names_it_and_moves_it_aside(lake):
    bad = lake.partition_path("completion_tests", SECOND)
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(LakeError, match=r"completion_tests/batch=2026-10-02/part\.parquet"):
        lake.read("completion_tests", SECOND)
    assert not bad.exists() and lake.quarantined()
    assert lake.read_all("completion_tests")["batch"].unique().to_list() == [FIRST]


def test_stats_warns_in_one_line_about_a_bad_partition_and_prints_the_rest(lake):
    truncate(lake.partition_path("solver_rollouts", FIRST))
    proc = endless(lake, "stats")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "solver_rollouts/batch=2026-10-01" in warnings[0]
    assert "Traceback" not in proc.stderr and "funnel" in proc.stdout.lower()


# -- the catalog -----------------------------------------------------------------------------------
def test_a_catalog_full_of_garbage_is_rebuilt(lake):
    before = kept(lake)
    lake.catalog_path.write_bytes(os.urandom(5000))
    assert kept(lake) == before
    connect(lake).close()


def test_a_catalog_of_the_old_format_with_absolute_paths_is_rebuilt(lake, tmp_path):
    con = duckdb.connect(str(lake.catalog_path))
    con.execute("drop view endless_catalog")
    con.close()
    assert kept(lake) > 0
    assert connect(lake).execute("select format from endless_catalog").fetchall() == [(2,)]


def test_a_copied_data_directory_answers_with_its_own_files(lake):
    copy = Lake(lake.data_dir.parent / "copy")
    shutil.copytree(lake.data_dir, copy.data_dir)
    shutil.rmtree(copy.root / "filtered_dataset" / f"batch={FIRST}")
    before = kept(lake)
    assert query(copy, "select distinct batch from filtered_dataset")["batch"].to_list() == [SECOND]
    shutil.rmtree(lake.data_dir)  # the original is gone: the copy still answers
    assert kept(copy, SECOND) > 0 and before > 0


# -- endless check ---------------------------------------------------------------------------------
def corrupt_a_page(path: Path) -> None:
    """Damage the data, not the footer: only a full read notices."""
    data = bytearray(path.read_bytes())
    for i in range(100, min(len(data) - 2000, 4000)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def test_check_reads_every_partition_in_full_and_fix_moves_the_bad_ones_aside(lake):
    page = lake.partition_path("solver_rollouts", SECOND)
    corrupt_a_page(page)
    pl.read_parquet_schema(page)  # the footer still reads
    (lake.root / "filtered_dataset" / "stray.txt").write_text("x")
    proc = endless(lake, "check")
    assert proc.returncode == 1
    assert str(page) in proc.stdout.replace("\n", "") or "solver_rollouts" in proc.stdout
    assert "stray_file" in proc.stdout
    assert page.exists()  # check alone changes nothing
    fixed = endless(lake, "check", "--fix", "--format", "json")
    assert fixed.returncode == 1  # the stray file is still there (it is reported, not moved)
    assert not page.exists() and len(lake.quarantined()) == 1
    (lake.root / "filtered_dataset" / "stray.txt").unlink()
    again = endless(lake, "check", "--format", "json")
    assert again.returncode == 0, again.stdout
    assert '"quarantined"' in again.stdout


def test_check_on_a_sound_lake_says_so(lake):
    proc = endless(lake, "check")
    assert proc.returncode == 0
    assert "sound" in proc.stdout
