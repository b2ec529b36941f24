"""Every stats view on a materialized batch (real Dagster runs, Docker, Parquet, DuckDB): a batch
with tasks broken at each stage, filtered by the oracle, then rolled out again by the no-op
solver so two solvers sit side by side. Then `endless stats`."""

from __future__ import annotations

import json

import broken_families as bf
import dagster as dg
import pytest
from typer.testing import CliRunner

import endless_assets.definitions as definitions
import endless_assets.generation.procedural as procedural
from endless_assets.cli.app import app
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.jobs import asset_selection
from endless_assets.defs.resources import PipelineSettings
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.store.stats_views import STATS_VIEWS

BATCH = "2026-07-01"
FAMILIES = [
    bf.Good,
    bf.BuildFails,
    bf.InitialFails,
    bf.PassesOnInitial,
    bf.ReferenceFails,
    bf.PassesWithNoop,
]
TASKS = 2 * len(FAMILIES)
ORACLE = "oracle/reference-solution"
NOOP = "noop/noop"
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


def _materialize(data_dir, selection: list[str] | None, **config) -> None:
    result = dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        partition_key=BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), tasks=TASKS, **config),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        selection=None if selection is None else asset_selection(selection),
    )
    assert result.success


@pytest.fixture(scope="module")
def lake(tmp_path_factory, sandbox) -> Lake:
    data_dir = tmp_path_factory.mktemp("stats-lake")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(procedural, "ALL_FAMILIES", FAMILIES)
        _materialize(data_dir, None)
    # A second solver on the same batch: only the rollouts, the dataset stays the oracle's.
    _materialize(data_dir, ["solver_rollouts"], solver="noop")
    return Lake(data_dir)


def rows(lake: Lake, sql: str) -> list[tuple]:
    return query(lake, sql).rows()


def test_every_stats_view_exists_and_answers(lake):
    assert set(STATS_VIEWS) >= {
        "funnel",
        "funnel_overall",
        "funnel_reasons",
        "category_mix",
        "task_pass_rates",
        "difficulty",
        "pass_rate_histogram",
        "failure_modes",
        "turns_per_episode",
        "token_cost",
        "generator_models",
        "solver_models",
        "model_matrix",
        "soundness",
        "soundness_probes",
        "contamination",
        "decontamination",
        "learnable",
        "cell_batches",
        "frontier_batches",
    }
    # No task of this batch has a hackable test, so no shortcut probe passed one; no reference
    # set was configured, so nothing was checked for contamination; the batch is the
    # generator's own deal (the uniform sampler), whose unleveled tasks are in no cell and
    # which no frontier draw made.
    empty = {"soundness_probes", "contamination", "decontamination", "cell_batches"}
    empty |= {"frontier_batches"}
    for view in STATS_VIEWS:
        rows = len(query(lake, f"select * from {view}"))
        assert rows == 0 if view in empty else rows > 0, view


def test_funnel_per_batch_and_overall(lake):
    expected = [
        ("describe", 12, 12, 0, 0),
        ("environment", 12, 8, 4, 0),
        ("completion test", 8, 2, 6, 0),
        ("soundness", 2, 2, 0, 0),
        ("solver filter", 2, 2, 0, 0),
    ]
    assert (
        rows(
            lake,
            "select stage, entered, survived, rejected, harness_errors from funnel "
            f"where batch = '{BATCH}' order by stage_order",
        )
        == expected
    )
    assert (
        rows(
            lake,
            "select stage, entered, survived, rejected, harness_errors from funnel_overall "
            "order by stage_order",
        )
        == expected
    )
    reasons = rows(lake, "select stage_order, reason, tasks from funnel_reasons order by 1, 2")
    assert reasons == [  # (order 2 is decontamination: no reference set here)
        (3, "build_failed", 2),
        (3, "initial_test_failed", 2),
        (4, "passes_on_initial", 2),
        (4, "passes_with_noop", 2),
        (4, "reference_fails", 2),
    ]


def test_category_mix(lake):
    assert rows(
        lake,
        "select category, complexity, described, reached_filter, kept, mean_pass_rate "
        "from category_mix",
    ) == [("testing", "easy", 12, 2, 2, 1.0)]


def test_pass_rates_and_difficulty_per_solver(lake):
    per_task = rows(
        lake,
        "select solver, attempts, successes, pass_rate, difficulty from task_pass_rates "
        "order by solver, task_id",
    )
    assert per_task == [(NOOP, 1, 0, 0.0, "unsolved")] * 2 + [(ORACLE, 1, 1, 1.0, "easy")] * 2
    assert rows(lake, "select solver, difficulty, tasks from difficulty order by solver") == [
        (NOOP, "unsolved", 2),
        (ORACLE, "easy", 2),
    ]
    assert rows(lake, "select solver, bin_low, tasks from pass_rate_histogram order by solver") == [
        (NOOP, 0.0, 2),
        (ORACLE, 1.0, 2),
    ]


def test_failure_modes_and_turns(lake):
    assert rows(
        lake,
        "select solver, failure_mode, rollouts, tasks, loop_share from failure_modes "
        "order by solver",
    ) == [(NOOP, "wrong_done", 2, 2, 0.0), (ORACLE, "solved", 2, 2, 0.0)]
    turns = rows(
        lake, "select solver, n_turns, rollouts, successes from turns_per_episode order by 1"
    )
    assert [(s, r, ok) for s, _, r, ok in turns] == [(NOOP, 2, 0), (ORACLE, 2, 2)]
    noop_turns = next(t for s, t, _, _ in turns if s == NOOP)
    oracle_turns = next(t for s, t, _, _ in turns if s == ORACLE)
    assert noop_turns < oracle_turns  # the oracle runs its solution, then says done


def test_token_cost(lake):
    cost = query(lake, "select * from token_cost order by stage_order")
    assert cost["stage"].to_list() == [
        "describe",
        "environment",
        "completion test",
        "soundness",
        "solver rollouts",
    ]
    # Procedural tasks and the oracle/no-op solvers call no model: zero tokens, zero requests.
    assert set(cost["tokens"]) == {0} and set(cost["requests"]) == {0}
    assert set(cost["kept_tasks"]) == {2} and set(cost["tokens_per_kept_task"]) == {0.0}


def test_models_side_by_side(lake):
    assert rows(
        lake,
        "select generator, sampled, described, built, validated, kept from generator_models",
    ) == [("procedural", 12, 12, 8, 2, 2)]
    assert rows(
        lake,
        "select solver, tasks, solved_tasks, rollouts, scored, successes, success_rate "
        "from solver_models order by solver",
    ) == [(NOOP, 2, 0, 2, 2, 0, 0.0), (ORACLE, 2, 2, 2, 2, 2, 1.0)]
    assert rows(
        lake,
        "select generator, solver, tasks, solved_tasks, mean_pass_rate from model_matrix "
        "order by solver",
    ) == [("procedural", NOOP, 2, 0, 0.0), ("procedural", ORACLE, 2, 2, 1.0)]


def test_endless_stats_prints_the_same_figures(lake, monkeypatch):
    monkeypatch.setenv("ENDLESS_DATA_DIR", str(lake.data_dir))
    runner = CliRunner()
    result = runner.invoke(app, ["stats", "--batch", BATCH, "--format", "json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["headline"]["tasks_sampled"] == 12
    assert payload["headline"]["tasks_kept"] == 2
    assert payload["headline"]["keep_rate"] == round(2 / 12, 4)
    assert [r["survived"] for r in payload["funnel"]] == [12, 8, 2, 2, 2]
    assert {(r["solver"], r["failure_mode"]) for r in payload["failure_modes"]} == {
        (NOOP, "wrong_done"),
        (ORACLE, "solved"),
    }
    table = runner.invoke(app, ["stats"], terminal_width=200)
    assert table.exit_code == 0, table.output
    for title in ("Funnel", "Category x complexity", "Failure modes per solver", "Solver models"):
        assert title in table.stdout
    assert "2 kept" in table.stdout
    missing = runner.invoke(app, ["stats", "--batch", "1999-01-01"])
    assert missing.exit_code == 2
    assert "no batch 1999-01-01" in missing.output
