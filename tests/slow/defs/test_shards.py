"""A batch run in shards ends with the same lake as one run: shard runs work on
their own tasks only, stage their rows beside the lake, and the final run finds every row in the
journals and writes the partitions without running anything again.

Real Dagster runs (in-process, tagged as `endless run` tags them), the real lake, real Docker.
"""

from __future__ import annotations

import broken_families as bf
import dagster as dg
import golden_rows
import pytest

import endless_assets.definitions as definitions
import endless_assets.generation.procedural as procedural
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.jobs import (
    FINISH_ASSETS,
    PIPELINE_ASSETS,
    SHARD_ASSETS,
    STAGE_ONE_ASSETS,
    asset_selection,
)
from endless_assets.defs.resources import PipelineSettings
from endless_assets.store import shards
from endless_assets.store.lake import Lake
from endless_assets.store.shards import Shard

BATCH = "2026-05-23"
TASKS = 6
SHARDS = 3
TABLES = PIPELINE_ASSETS[1:]


def test_every_task_belongs_to_exactly_one_shard_and_bad_tags_are_refused():
    ids = [f"task-{i}" for i in range(200)]
    owners = [[s for s in range(5) if Shard(s, 5).owns(t)] for t in ids]
    assert all(len(o) == 1 for o in owners)
    assert {o[0] for o in owners} == set(range(5))  # no shard left empty by the hash
    assert shards.parse("2/5") == Shard(2, 5) and shards.parse("") is None
    for bad in ("5/5", "a/b", "1-3"):
        with pytest.raises(ValueError):
            shards.parse(bad)
    assert shards.count_for(10_000, 1000) == 10 and shards.count_for(24, 1000) == 1


def run(data_dir, names, tags=None) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        [getattr(definitions, name) for name in PIPELINE_ASSETS],
        selection=asset_selection(names),
        partition_key=BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        tags=tags,
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), tasks=TASKS, soundness="off"),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
    )
    assert result.success
    return result


def test_a_batch_run_in_shards_writes_the_same_rows_as_one_run(tmp_path, monkeypatch, sandbox):
    monkeypatch.setattr(procedural, "ALL_FAMILIES", [bf.Good])
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    run(whole, PIPELINE_ASSETS)

    run(sharded, STAGE_ONE_ASSETS)
    lake = Lake(sharded)
    staged: dict[int, set[str]] = {}
    for index in range(SHARDS):
        result = run(sharded, SHARD_ASSETS, tags={shards.TAG: f"{index}/{SHARDS}"})
        shard = Shard(index, SHARDS)
        rows = lake.read_shard("solver_rollouts", BATCH, shard)
        assert rows is not None
        staged[index] = set(rows["task_id"])
        assert all(shard.owns(t) for t in staged[index])
        (event,) = result.asset_materializations_for_node("solver_rollouts")
        assert event.metadata["shard"].value == f"{index}/{SHARDS}"
        # Nothing of the batch is in the lake's views yet: only the describe stage's partition.
        assert not lake.partition_path("solver_rollouts", BATCH).exists()
    assert set().union(*staged.values()) == set(lake.read("task_descriptions", BATCH)["task_id"])

    final = run(sharded, FINISH_ASSETS)
    (event,) = final.asset_materializations_for_node("solver_rollouts")
    assert event.metadata["ran_now"].value == 0  # every attempt came from the shards' journal
    assert event.metadata["recovered_from_journal"].value == TASKS
    assert lake.read_shard("solver_rollouts", BATCH, Shard(0, SHARDS)) is None  # staged: gone

    for table in TABLES:
        expected = golden_rows.digest(table, Lake(whole).read(table, BATCH))
        actual = golden_rows.digest(table, lake.read(table, BATCH))
        assert actual == expected, table
