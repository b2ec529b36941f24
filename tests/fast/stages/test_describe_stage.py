"""The describe stage as its stage function and as its asset: the outcome makes the rows its table
accepts, a failed slot keeps its row, and the asset writes the draw and the history it read as its
own outputs (a real Dagster run and a real lake; no Docker: the describe stage builds nothing)."""

from __future__ import annotations

import logging

import dagster as dg

from endless_assets.defs.descriptions import task_descriptions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
from endless_assets.generation import Usage
from endless_assets.models import HARNESS_ERROR, OK
from endless_assets.settings import Settings
from endless_assets.stages.describe import Description, run_describe
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import TABLES

BATCH = "2026-06-01"
LOG = logging.getLogger(__name__)
DRAW_TABLES = ("task_draws", "cell_history")


def test_the_stage_function_returns_rows_its_tables_accept_and_plain_metadata(tmp_path):
    settings = Settings.resolve(data_dir=str(tmp_path), tasks=4, sampler="frontier")
    run = run_describe(settings, Lake(tmp_path), BATCH, log=LOG)
    TABLES["task_descriptions"].validate(run.frame(), lazy=True)
    TABLES["task_draws"].validate(run.draws, lazy=True)
    TABLES["cell_history"].validate(run.history, lazy=True)
    assert [r["status"] for r in run.rows] == [OK] * 4
    assert len(run.draws) == 4  # a cold start draws every slot
    assert run.metadata["ok"] == 4 and run.metadata["sampler"] == "frontier"
    assert run.metadata["draw_cells"].counts.total() == 4
    assert not any(type(v).__module__.startswith("dagster") for v in run.metadata.values())


def test_a_slot_with_no_task_keeps_its_row_with_the_reason_and_its_cell(tmp_path):
    failed = Description.failed(
        BATCH,
        3,
        17,
        "harness: boom",
        generator=("llm", "m", "v1"),
        usage=Usage(requests=2, tokens_in=5, tokens_out=7),
        status=HARNESS_ERROR,
        slot={"category": "text", "complexity": "hard", "parent_task_id": "et-parent"},
    )
    row = failed.row()
    TABLES["task_descriptions"].validate(frame("task_descriptions", [row]), lazy=True)
    assert (row["index"], row["seed"], row["status"]) == (3, 17, HARNESS_ERROR)
    assert row["reject_reason"] == "harness: boom" and row["draft"] == ""
    assert (row["category"], row["complexity"], row["parent_task_id"]) == (
        "text",
        "hard",
        "et-parent",
    )
    assert (row["generator"], row["generator_model"], row["requests"]) == ("llm", "m", 2)
    again = Description.failed(BATCH, 3, 99, "other", generator=("llm", "m", "v1")).row()
    assert again["task_id"] == row["task_id"]  # a failed slot's id is its batch and index


def test_the_asset_writes_the_draw_tables_as_its_outputs_with_their_checks(tmp_path):
    result = dg.materialize(
        [task_descriptions],
        partition_key=BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": PipelineSettings(data_dir=str(tmp_path), tasks=3, sampler="frontier"),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(tmp_path)),
        },
    )
    assert result.success
    written = {
        m.asset_key.to_user_string(): m.metadata
        for m in result.asset_materializations_for_node("task_descriptions")
    }
    assert set(written) == {"task_descriptions", *DRAW_TABLES}
    assert written["task_descriptions"]["ok"].value == 3
    assert written["task_draws"]["dagster/row_count"].value == 3
    checks = {
        (c.asset_key.to_user_string(), c.passed) for c in result.get_asset_check_evaluations()
    }
    assert checks == {(table, True) for table in ("task_descriptions", *DRAW_TABLES)}
    lake = Lake(tmp_path)
    assert len(lake.read("task_draws", BATCH)) == 3
    assert lake.read("task_draws", BATCH)["index"].to_list() == [0, 1, 2]
