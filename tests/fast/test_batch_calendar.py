"""The daily partitions start at the instance's first batch: recorded in DAGSTER_HOME by
`endless run` (the earliest day it made, or an earlier batch already in the lake), read by every
process that loads the definitions."""

from __future__ import annotations

import os
import subprocess
import sys

from endless_assets.batch_calendar import FLOOR, RECORD, first_batch_day, record_batch_day


def test_without_a_record_the_partitions_start_at_the_floor(tmp_path):
    assert first_batch_day(str(tmp_path)) == FLOOR
    assert first_batch_day("") == FLOOR


def test_the_first_batch_is_the_earliest_made_and_only_moves_earlier(tmp_path):
    assert record_batch_day(tmp_path, "2026-12-03") == "2026-12-03"
    assert record_batch_day(tmp_path, "2026-12-04") == "2026-12-03"
    assert record_batch_day(tmp_path, "2026-11-20") == "2026-11-20"
    assert first_batch_day(str(tmp_path)) == "2026-11-20"


def test_batches_already_in_the_lake_count_and_imported_names_do_not(tmp_path):
    first = record_batch_day(tmp_path, "2026-12-03", ["2026-03-14", "my-import", "2025-01-01"])
    assert first == "2026-03-14"  # (a day before the floor is not a batch)


def test_a_record_that_does_not_say_a_day_is_the_floor(tmp_path):
    (tmp_path / RECORD).write_text("yesterday\n")
    assert first_batch_day(str(tmp_path)) == FLOOR
    assert record_batch_day(tmp_path, "2026-12-03") == FLOOR


def test_the_definitions_partitions_start_at_the_recorded_day(tmp_path):
    record_batch_day(tmp_path, "2026-12-01")
    script = (
        "from endless_assets.defs.partitions import batches\n"
        "print(batches.get_first_partition_key())\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "2026-12-01"
