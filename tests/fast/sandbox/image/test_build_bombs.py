"""A batch whose Dockerfiles fork-bomb or allocate without bound in a RUN step: those tasks are
rejected as build failures naming the limit, and the rest of the batch is kept (real Dagster,
real Docker, the limits of the run's settings)."""

from __future__ import annotations

import broken_families as bf
import dagster as dg

import endless_assets.definitions as definitions
import endless_assets.generation.procedural as procedural
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake

ASSETS = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
]


def test_a_batch_with_a_fork_bomb_and_a_memory_bomb_keeps_its_other_tasks(
    tmp_path, sandbox, monkeypatch
):
    families = [bf.Good, bf.ForkBombs, bf.MemoryBombs]
    monkeypatch.setattr(procedural, "ALL_FAMILIES", families)
    settings = PipelineSettings(
        data_dir=str(tmp_path), tasks=6, pids=128, memory="512m", soundness="off"
    )
    result = dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        partition_key="2026-03-16",
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": settings,
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(tmp_path)),
        },
    )
    assert result.success
    lake = Lake(tmp_path)
    rows = query(
        lake,
        "select d.family, e.status, e.reject_reason from task_environments e "
        "join task_descriptions d using (task_id) order by d.family",
    ).rows()
    by_family: dict[str, list[tuple[str, str]]] = {}
    for family, status, reason in rows:
        by_family.setdefault(family, []).append((status, reason))
    assert [s for s, _ in by_family["test_good"]] == ["ok", "ok"]
    for status, reason in by_family["test_fork_bombs"]:
        assert status == "rejected" and reason.startswith("build_failed"), reason
        assert "reached their limit (128)" in reason, reason
    for status, reason in by_family["test_memory_bombs"]:
        assert status == "rejected" and reason.startswith("build_failed"), reason
        assert "memory limit (512m)" in reason, reason
    tests = lake.read("completion_tests", "2026-03-16")
    assert tests["status"].to_list() == ["ok", "ok"]  # the good ones go on
