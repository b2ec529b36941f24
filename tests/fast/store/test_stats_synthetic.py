"""Stats views against figures computed independently with polars, on a synthetic lake with
model tokens, several categories, two solvers and failures of every kind; and on partitions
written before newer columns existed. No Docker needed."""

from __future__ import annotations

import polars as pl
import pytest
from synthetic_lake import Spec, write_synthetic_lake

from endless_assets.report.tables import headline, stats_query, stats_tables
from endless_assets.store.catalog import query, rebuild_catalog
from endless_assets.store.lake import Lake

SPEC = Spec(batches=3, tasks_per_batch=60, k=4)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("synthetic"))
    write_synthetic_lake(lake, SPEC)
    rebuild_catalog(lake)
    return lake


def table(lake: Lake, name: str) -> pl.DataFrame:
    return lake.read_all(name)


def test_token_cost_per_stage_and_per_kept_task(lake):
    kept = table(lake, "filtered_dataset").group_by("batch").agg(pl.col("kept").sum())
    kept_by_batch = dict(kept.iter_rows())
    view = query(lake, "select * from token_cost")
    assert len(view) == 4 * SPEC.batches
    # (no task_soundness here: the synthetic lake has none, so no 'soundness' row, 4)
    for stage_order, name in [
        (1, "task_descriptions"),
        (2, "task_environments"),
        (3, "completion_tests"),
        (5, "solver_rollouts"),
    ]:
        sums = (
            table(lake, name)
            .group_by("batch")
            .agg((pl.col("tokens_in") + pl.col("tokens_out")).sum())
        )
        for batch, tokens in sums.iter_rows():
            row = view.filter((pl.col("batch") == batch) & (pl.col("stage_order") == stage_order))
            assert row["tokens"].item() == tokens > 0
            assert row["tokens_per_kept_task"].item() == pytest.approx(
                tokens / kept_by_batch[batch]
            )
    # Over every batch: the headline divides all tokens by all kept tasks.
    total = sum(
        int((table(lake, n)["tokens_in"] + table(lake, n)["tokens_out"]).sum())
        for n in ("task_descriptions", "task_environments", "completion_tests", "solver_rollouts")
    )
    figures = headline(lake)
    assert figures["tokens"] == total
    assert figures["tokens_per_kept_task"] == pytest.approx(
        total / sum(kept_by_batch.values()), abs=0.1
    )


def test_failure_modes_and_solvers_match_a_polars_count(lake):
    rollouts = table(lake, "solver_rollouts").with_columns(
        solver=pl.col("policy") + "/" + pl.col("model")
    )
    expected = sorted(
        rollouts.group_by("solver", "failure_mode").len().rows(), key=lambda r: (r[0], r[1])
    )
    got = stats_query(lake, "failure_modes").select("solver", "failure_mode", "rollouts")
    assert sorted(got.rows()) == expected
    assert {mode for _, mode, _ in expected} >= {"solved", "loop", "turn_exhaustion", "wrong_done"}
    solvers = stats_query(lake, "solver_models")
    for solver, success in rollouts.group_by("solver").agg(pl.col("reward").mean()).iter_rows():
        row = solvers.filter(pl.col("solver") == solver)
        assert row["success_rate"].item() == pytest.approx(success)
    strong, weak = sorted(solvers.rows(named=True), key=lambda r: -r["success_rate"])
    assert strong["solver"] == "chat/model-a" and weak["solver"] == "chat/model-b"


def test_category_mix_and_difficulty_match_a_polars_count(lake):
    filtered = table(lake, "filtered_dataset")
    expected = filtered.group_by("category", "complexity").agg(pl.col("kept").sum())
    got = stats_query(lake, "category_mix").select("category", "complexity", "kept")
    assert sorted(got.rows()) == sorted(expected.rows())
    assert got["category"].n_unique() == 12
    per_task = query(lake, "select * from task_pass_rates")
    rollouts = table(lake, "solver_rollouts")
    n_tasks = rollouts.select(pl.struct("task_id", "policy", "model").n_unique()).item()
    assert len(per_task) == n_tasks
    difficulty = stats_query(lake, "difficulty")
    assert int(difficulty["tasks"].sum()) == n_tasks
    assert set(difficulty["difficulty"]) <= {"easy", "medium", "hard", "unsolved", "unknown"}
    histogram = stats_query(lake, "pass_rate_histogram")
    assert int(histogram["tasks"].sum()) == len(per_task.filter(pl.col("attempts") > 0))


def test_summing_batches_equals_the_per_batch_views(lake):
    funnel = query(lake, "select stage_order, sum(survived) s from funnel group by 1 order by 1")
    assert stats_query(lake, "funnel")["survived"].to_list() == funnel["s"].to_list()
    batch = query(lake, "select min(batch) b from funnel")["b"].item()
    one = stats_query(lake, "funnel", [batch])
    per_batch = query(lake, f"select * from funnel where batch = '{batch}' order by stage_order")
    assert one["entered"].to_list() == per_batch["entered"].to_list()
    titles = [t.title for t in stats_tables(lake, [batch])]
    assert titles[0] == "Funnel" and "Generator x solver" in titles


def test_views_work_on_partitions_written_before_newer_columns(lake, tmp_path):
    """An old partition lacks the failure-analysis columns: the catalog adds them as NULL and
    failure_modes classifies those rows from the columns they have, the same way."""
    old = Lake(tmp_path)
    write_synthetic_lake(old, Spec(batches=1, tasks_per_batch=40, k=4, seed=3))
    batch = old.batches("solver_rollouts")[0]
    stored = old.read("solver_rollouts", batch)
    old.write(
        "solver_rollouts",
        batch,
        stored.drop("failure_mode", "invalid_turns", "command_timeouts", strict=False),
    )
    rebuild_catalog(old)
    derived = stats_query(old, "failure_modes").select("solver", "failure_mode", "rollouts")
    expected = stored.with_columns(solver=pl.col("policy") + "/" + pl.col("model"))
    expected = expected.group_by("solver", "failure_mode").len()
    assert sorted(derived.rows()) == sorted(expected.rows())
    assert query(old, "select count(*) n from solver_rollouts where failure_mode is null")[
        "n"
    ].item() == len(stored)
