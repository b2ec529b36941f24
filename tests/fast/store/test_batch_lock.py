"""One run at a time makes a batch in a data directory (batch_lock.py): a second run of a batch
that a run holds fails at its start, naming the holder, and writes nothing; the shard runs of
one batch hold it together; `endless run` refuses, in one line, a batch being made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from project import ROOT

import endless_assets.definitions as definitions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
from endless_assets.store import batch_lock
from endless_assets.store.lake import Lake
from endless_assets.store.shards import TAG as SHARD_TAG

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
BATCH = "2026-05-21"


def describe(data_dir: Path, tags: dict[str, str] | None = None) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [definitions.base_image, definitions.task_descriptions],
        partition_key=BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), tasks=2),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        tags=tags,
        raise_on_error=False,
    )


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    events = [e for e in result.all_events if e.is_failure]
    return " ".join(str(e.event_specific_data) for e in events)


def test_a_run_of_a_batch_another_run_holds_fails_at_its_start_and_writes_nothing(
    tmp_path, sandbox
):
    with batch_lock.held(tmp_path, BATCH, holder="run 1234abcd"):
        result = describe(tmp_path)
        assert not result.success
        assert f"batch {BATCH} is being made by run 1234abcd" in failure_message(result)
        assert not Lake(tmp_path).has_data("task_descriptions")
    assert describe(tmp_path).success  # once the holder is gone
    assert Lake(tmp_path).read("task_descriptions", BATCH).height == 2


def test_the_shard_runs_of_a_batch_hold_it_together_and_nothing_else_beside_them(tmp_path, sandbox):
    with batch_lock.held(tmp_path, BATCH, holder="shard 0/2", shared=True):
        assert describe(tmp_path, tags={SHARD_TAG: "1/2"}).success  # another shard: together
        assert not describe(tmp_path).success  # a run that writes the batch: not beside them
        with pytest.raises(batch_lock.BatchBusy):
            batch_lock.check_free(tmp_path, BATCH)
    batch_lock.check_free(tmp_path, BATCH)


def test_a_lock_dies_with_its_process(tmp_path):
    """A run killed with `kill -9` leaves no lock behind (the kernel's flock)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from endless_assets.store import batch_lock; "
            f"h = batch_lock.acquire({str(tmp_path)!r}, {BATCH!r}, holder='run x'); "
            "print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(batch_lock.BatchBusy, match="run x"):
        batch_lock.check_free(tmp_path, BATCH)
    holder.kill()
    holder.wait()
    batch_lock.check_free(tmp_path, BATCH)


def endless_run(tmp_path: Path, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "ENDLESS_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [*ENDLESS, "run", "--date", BATCH, "--tasks", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )


def test_endless_run_refuses_a_batch_being_made_in_one_line(tmp_path, sandbox):
    data = tmp_path / "data"
    with batch_lock.held(data, BATCH, holder="run 99ff"):
        proc = endless_run(tmp_path, data)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"batch {BATCH} is being made by run 99ff" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (data / "lake").exists()

    with batch_lock.held(data, BATCH, holder="endless run", kind="launch"):
        proc = endless_run(tmp_path, data)
    assert proc.returncode == 2 and "is being made by endless run (pid" in proc.stderr

    proc = endless_run(tmp_path, Path("/proc/endless-data"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "the data directory /proc/endless-data cannot be written" in proc.stderr
