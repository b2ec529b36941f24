"""The asset graph materialized by Dagster on real Docker and a real lake."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import broken_families as bf
import dagster as dg
import golden_rows
import pytest
from batches import materialize_batch

import endless_assets.generation.procedural as procedural
from endless_assets.definitions import defs
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import TABLES

BATCH = "2026-03-14"
ASSETS = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
    "task_soundness",
    "solver_rollouts",
    "filtered_dataset",
]


def materialize(
    data_dir, tasks: int, batch: str = BATCH, selection: list[str] | None = None, **config
) -> dg.ExecuteInProcessResult:
    return materialize_batch(data_dir, ASSETS, batch, selection=selection, tasks=tasks, **config)


@pytest.fixture(scope="module")
def full_batch(tmp_path_factory, sandbox):
    data_dir = tmp_path_factory.mktemp("lake")
    tasks = 2 * len(ALL_FAMILIES)
    first = materialize(data_dir, tasks)
    ids_first = query(Lake(data_dir), "select task_id from task_descriptions order by 1")
    # The rerun redoes every stage but soundness, whose rerun (a minute here) is
    # test_soundness_pipeline's: filtered_dataset reads the stored soundness partition.
    second = materialize(data_dir, tasks, selection=[a for a in ASSETS if a != "task_soundness"])
    return data_dir, tasks, first, second, ids_first


def test_the_batch_matches_the_golden_rows(full_batch):
    """Same seeds, same rows: refactors of the stages change nothing a user stores."""
    data_dir = full_batch[0]
    lake = Lake(data_dir)
    actual = {t: golden_rows.digest(t, lake.read(t, BATCH)) for t in ASSETS[1:]}
    if os.environ.get("ENDLESS_UPDATE_GOLDEN"):
        golden_rows.GOLDEN.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
    expected = json.loads(golden_rows.GOLDEN.read_text())
    assert not golden_rows.differences(expected, actual)


def test_every_table_the_batch_stored_holds_to_its_model(full_batch):
    """What users read back, not only what the assets checked before writing: each table's
    stored rows against its pandera model, the draw's tables (empty here) included."""
    lake = Lake(full_batch[0])
    stored = [t for t in TABLES if lake.partition_path(t, BATCH).exists()]
    assert set(ASSETS[1:]) | {"task_draws", "cell_history"} <= set(stored)
    for table in stored:
        TABLES[table].validate(lake.read(table, BATCH), lazy=True)


def test_every_table_asset_reports_its_row_count_and_column_schema(full_batch):
    _, tasks, first, _, _ = full_batch
    for name in ASSETS[1:]:
        node = first.asset_materializations_for_node(
            name
        )  # the describe stage's also writes its draw
        (materialization,) = [m for m in node if m.asset_key == dg.AssetKey(name)]
        metadata = materialization.metadata
        assert metadata["dagster/row_count"].value >= tasks
        columns = metadata["dagster/column_schema"].schema.columns
        assert columns[0].name == "task_id" and "batch" in [c.name for c in columns]
        assert all(c.description for c in columns)  # as declared on the asset, readable types
        assert columns[0].type == "string" and columns[-1].type == "timestamp[UTC]"


def test_the_filtered_dataset_carries_the_batchs_funnel_with_an_empty_reason_where_none_dropped(
    full_batch,
):
    _, tasks, first, _, _ = full_batch
    (materialization,) = first.asset_materializations_for_node("filtered_dataset")
    funnel = materialization.metadata["funnel"]
    assert [c.name for c in funnel.schema.columns] == [
        "stage",
        "entered",
        "survived",
        "rejected",
        "harness_errors",
        "top_reason",
        "top_reason_tasks",
    ]
    rows = [(r.data["stage"], r.data["entered"], r.data["survived"]) for r in funnel.records]
    assert [r[0] for r in rows] == [
        "describe",
        "environment",
        "completion test",
        "soundness",
        "solver filter",
    ]
    assert {(r[1], r[2]) for r in rows} == {(tasks, tasks)}
    assert {(r.data["top_reason"], r.data["top_reason_tasks"]) for r in funnel.records} == {("", 0)}


def test_every_procedural_task_survives_to_the_dataset(full_batch):
    data_dir, tasks, first, _, _ = full_batch
    assert first.success
    funnel = query(
        Lake(data_dir), "select stage, entered, survived from funnel order by stage_order"
    )
    assert funnel["entered"].to_list() == [tasks] * 5
    assert funnel["survived"].to_list() == [tasks] * 5, query(
        Lake(data_dir), "select * from funnel_reasons"
    )


def test_every_family_appears_and_is_kept(full_batch):
    data_dir, _, _, _, _ = full_batch
    kept = query(
        Lake(data_dir), "select family, count(*) n from filtered_dataset where kept group by 1"
    )
    assert set(kept["family"]) == {f.name for f in ALL_FAMILIES}
    assert set(kept["n"]) == {2}


def test_rematerializing_reproduces_the_batch_without_duplicates(full_batch):
    data_dir, tasks, _, second, ids_first = full_batch
    assert second.success
    lake = Lake(data_dir)
    ids_second = query(lake, "select task_id from task_descriptions order by 1")
    assert ids_first["task_id"].to_list() == ids_second["task_id"].to_list()
    for table in (
        "task_descriptions",
        "task_decontamination",
        "task_environments",
        "completion_tests",
        "filtered_dataset",
    ):
        count = query(lake, f"select count(*) n, count(distinct task_id) d from {table}")
        assert count.row(0) == (tasks, tasks), table
    assert len(list((lake.root / "task_descriptions").glob("batch=*/*.parquet"))) == 1


def test_the_oracle_rollouts_are_rewarded_and_reused_on_rerun(full_batch):
    data_dir, tasks, _, second, _ = full_batch
    rollouts = query(Lake(data_dir), "select * from solver_rollouts")
    assert len(rollouts) == tasks
    assert rollouts["reward"].to_list() == [1] * tasks
    assert set(rollouts["termination"]) == {"done"}
    meta = second.asset_materializations_for_node("solver_rollouts")[0].metadata
    assert meta["reused"].value == tasks and meta["ran_now"].value == 0


def test_asset_checks_pass_and_metadata_is_reported(full_batch):
    _, tasks, first, _, _ = full_batch
    checks = first.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)
    names = {(c.asset_key.to_user_string(), c.check_name) for c in checks}
    assert ("completion_tests", "pipeline_invariants") in names
    assert ("filtered_dataset", "matches_schema") in names
    meta = first.asset_materializations_for_node("filtered_dataset")[0].metadata
    assert meta["kept"].value == tasks
    assert "Instruction" in meta["sample_task"].value


def test_a_batch_with_broken_tasks_rejects_each_with_its_reason(tmp_path, sandbox, monkeypatch):
    families = [
        bf.Good,
        bf.BuildFails,
        bf.InitialFails,
        bf.PassesOnInitial,
        bf.ReferenceFails,
        bf.PassesWithNoop,
    ]
    monkeypatch.setattr(procedural, "ALL_FAMILIES", families)
    result = materialize(tmp_path, len(families) * 2, batch="2026-03-15")
    assert result.success
    lake = Lake(tmp_path)
    funnel = query(
        lake, "select stage, entered, survived, rejected from funnel order by stage_order"
    )
    assert funnel.rows() == [
        ("describe", 12, 12, 0),
        ("environment", 12, 8, 4),
        ("completion test", 8, 2, 6),
        ("soundness", 2, 2, 0),
        ("solver filter", 2, 2, 0),
    ]
    reasons = query(lake, "select reason, tasks from funnel_reasons order by stage_order, reason")
    assert dict(reasons.rows()) == {
        "build_failed": 2,
        "initial_test_failed": 2,
        "passes_on_initial": 2,
        "passes_with_noop": 2,
        "reference_fails": 2,
    }
    kept = query(lake, "select family from filtered_dataset where kept")
    assert set(kept["family"]) == {"test_good"}
    # The last asset's materialization carries the same funnel, with the top reason per step.
    (materialization,) = result.asset_materializations_for_node("filtered_dataset")
    funnel = materialization.metadata["funnel"].records
    assert [
        (r.data["stage"], r.data["entered"], r.data["survived"], r.data["top_reason_tasks"])
        for r in funnel
    ] == [
        ("describe", 12, 12, 0),
        ("environment", 12, 8, 2),
        ("completion test", 8, 2, 2),
        ("soundness", 2, 2, 0),
        ("solver filter", 2, 2, 0),
    ]
    assert funnel[1].data["top_reason"] in ("build_failed", "initial_test_failed")
    assert funnel[2].data["top_reason"] in (
        "passes_on_initial",
        "passes_with_noop",
        "reference_fails",
    )
    assert funnel[0].data["top_reason"] == funnel[4].data["top_reason"] == ""


def test_the_daily_schedule_requests_the_days_batch():
    schedule = defs.resolve_schedule_def("daily_batch_schedule")
    with dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    ) as context:
        result = schedule.evaluate_tick(context)
    keys = [r.partition_key for r in result.run_requests or []]
    assert keys == ["2026-11-30"]
