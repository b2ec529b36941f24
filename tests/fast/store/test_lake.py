"""The Parquet lake and the DuckDB catalog over it."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from endless_assets.store.catalog import connect, query, rebuild_catalog
from endless_assets.store.lake import Lake, LakeError, check_batch_key
from endless_assets.store.schemas import TABLES, empty_frame
from endless_assets.store.stats_views import STATS_VIEWS


def rows(n: int, batch: str) -> pl.DataFrame:
    frame = empty_frame("task_environments")
    data = {name: [] for name in frame.columns}
    for i in range(n):
        for name, dtype in frame.schema.items():
            if name == "task_id":
                value = f"et-{batch}-{i}"
            elif name == "batch":
                value = batch
            elif name == "status":
                value = "ok" if i % 2 == 0 else "rejected"
            elif name == "reject_reason":
                value = "" if i % 2 == 0 else "build_failed: boom"
            elif dtype == pl.Int64:
                value = 1
            elif dtype == pl.Float64:
                value = 0.5
            elif isinstance(dtype, pl.Datetime):
                value = datetime.now(UTC)
            else:
                value = "x"
            data[name].append(value)
    return pl.DataFrame(data, schema=frame.schema)


def test_write_replaces_the_partition_atomically(tmp_path):
    lake = Lake(tmp_path)
    lake.write("task_environments", "2026-01-01", rows(4, "2026-01-01"))
    lake.write("task_environments", "2026-01-01", rows(2, "2026-01-01"))
    directory = lake.partition_path("task_environments", "2026-01-01").parent
    assert [p.name for p in directory.iterdir()] == ["part.parquet"]
    assert len(lake.read("task_environments", "2026-01-01")) == 2


def test_a_failed_write_keeps_the_old_partition(tmp_path):
    lake = Lake(tmp_path)
    lake.write("task_environments", "2026-01-01", rows(3, "2026-01-01"))

    class Exploding(pl.DataFrame):
        def write_parquet(self, *args, **kwargs):
            raise OSError("disk full")

    with pytest.raises(OSError):
        lake.write("task_environments", "2026-01-01", Exploding(rows(1, "2026-01-01")))
    directory = lake.partition_path("task_environments", "2026-01-01").parent
    assert [p.name for p in directory.iterdir()] == ["part.parquet"]
    assert len(lake.read("task_environments", "2026-01-01")) == 3


def test_reading_a_missing_partition_names_it(tmp_path):
    with pytest.raises(LakeError, match="task_environments has no partition '2026-02-02'"):
        Lake(tmp_path).read("task_environments", "2026-02-02")


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "with space", ".hidden", "x" * 101])
def test_batch_keys_are_checked(bad):
    with pytest.raises(LakeError, match="batch key"):
        check_batch_key(bad)


def test_catalog_has_typed_empty_views_before_any_data(tmp_path):
    lake = Lake(tmp_path)
    rebuild_catalog(lake)
    con = connect(lake)
    try:
        for table in [*TABLES, *STATS_VIEWS]:
            assert con.execute(f"select count(*) from {table}").fetchone() == (0,)
        columns = [c[0] for c in con.execute("describe filtered_dataset").fetchall()]
    finally:
        con.close()
    assert columns == list(TABLES["filtered_dataset"].to_schema().columns)


def test_views_span_every_batch_and_see_new_ones_without_rebuild(tmp_path):
    lake = Lake(tmp_path)
    lake.write("task_environments", "2026-01-01", rows(4, "2026-01-01"))
    rebuild_catalog(lake)
    lake.write("task_environments", "2026-01-02", rows(6, "2026-01-02"))
    counts = query(lake, "select batch, count(*) n from task_environments group by 1 order by 1")
    assert counts.rows() == [("2026-01-01", 4), ("2026-01-02", 6)]
    funnel = query(lake, "select batch, entered, survived, rejected from funnel order by 1")
    assert funnel.rows() == [("2026-01-01", 4, 2, 2), ("2026-01-02", 6, 3, 3)]
    reasons = query(lake, "select reason, sum(tasks) from funnel_reasons group by 1")
    assert reasons.rows() == [("build_failed", 5)]


def test_the_catalog_swap_does_not_disturb_an_open_reader(tmp_path):
    lake = Lake(tmp_path)
    lake.write("task_environments", "2026-01-01", rows(2, "2026-01-01"))
    rebuild_catalog(lake)
    reader = connect(lake)
    try:
        rebuild_catalog(lake)  # replaced underneath the open connection
        assert reader.execute("select count(*) from task_environments").fetchone() == (2,)
    finally:
        reader.close()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_duckdb_command_line_opens_the_catalog(tmp_path):
    """Plain `cd data && duckdb endless.duckdb` works: the catalog is written in a storage format
    the DuckDB CLI (which lags the Python package) reads, and every view answers."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    cli = shutil.which("duckdb") or str(Path(sys.executable).with_name("duckdb"))
    lake = Lake(tmp_path)
    lake.write("task_environments", "2026-01-01", rows(3, "2026-01-01"))
    rebuild_catalog(lake)
    views = [*TABLES, *STATS_VIEWS]
    sql = "".join(f"select '{v}', count(*) from {v};\n" for v in views)
    proc = subprocess.run(
        [cli, "-csv", "-noheader", "endless.duckdb"],
        cwd=tmp_path,
        input=sql,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    counts = dict(line.split(",") for line in proc.stdout.split())
    assert set(counts) == set(views)
    assert counts["task_environments"] == "3"


def test_a_column_a_partition_was_written_without_reads_as_nulls(tmp_path):
    lake = Lake(tmp_path)
    lake.write("task_soundness", "2026-11-30", pl.DataFrame({"task_id": ["a"], "batch": ["x"]}))
    lake.write(
        "task_soundness",
        "2026-12-03",
        pl.DataFrame({"task_id": ["b"], "batch": ["y"], "tokens_in": [7]}),
    )
    columns = {"task_id": pl.Utf8(), "tokens_in": pl.Int64()}
    read = lake.read_columns("task_soundness", ["2026-11-30", "2026-12-03", "2026-12-09"], columns)
    assert read.rows() == [("a", None), ("b", 7)] and read.schema == pl.Schema(columns)
