"""The frontier sampler: cells and their history from lake frames, the draw (cold start, floor,
reproducibility, degrading), evolve proposals and the learnable share, against a simulated
solver of hidden skill over consecutive daily batches."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from endless_assets.sampling import (
    Cell,
    History,
    batch_rng,
    candidates,
    cell_batches,
    combine,
    cost_per_learnable,
    draw,
    family_cells,
    history_from_lake,
    learnable_share,
    propose,
    read_history,
    task_costs,
)
from endless_assets.sampling.evolve import child_seed
from endless_assets.sampling.history import CellHistory
from endless_assets.sampling.simulation import (
    constant_world,
    frontier,
    hidden_skill_world,
    simulate,
    uniform,
)
from endless_assets.store.frontier_views import CELL_BATCHES_SQL
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import TaskDraws, polars_schema

SOLVER = "chat/hidden-skill"
CELLS = family_cells(["alpha", "beta"])  # 12 cells


def spread(draw_counts, cells) -> tuple[int, int]:
    counts = [draw_counts.get(cell, 0) for cell in cells]
    return min(counts), max(counts)


def learnable_of(frame: pl.DataFrame, column: str) -> float:
    return frame["learnable"].sum() / frame[column].sum()


@pytest.fixture(scope="module")
def world():
    return hidden_skill_world(16, seed=3)


@pytest.fixture(scope="module")
def runs(world):
    """Ten daily batches of 48 tasks, 16 attempts each: uniform, and targeted by the sampler."""
    return (
        simulate(world, uniform, batches=10, n=48, k=16, seed=3),
        simulate(world, frontier, batches=10, n=48, k=16, seed=3),
    )


def test_a_cold_start_draws_every_cell_as_often_as_the_others():
    chosen = draw(CELLS, History("2026-03-01"), 36, rng=batch_rng("2026-03-01"))
    assert chosen.mode == "cold_start" and not chosen.reason
    assert spread(chosen.counts(), CELLS) == (3, 3)
    assert {slot.source for slot in chosen.slots} == {"uniform"}
    assert [slot.index for slot in chosen.slots] == list(range(36))
    uneven = draw(CELLS, History("2026-03-01"), 40, rng=batch_rng("2026-03-01"))
    assert spread(uneven.counts(), CELLS) == (3, 4)


def test_the_same_batch_key_and_history_give_the_same_draw(runs):
    frames = runs[1].frames()
    history = history_from_lake(*frames, before="2026-03-08", solver=SOLVER)
    cells = sorted(runs[1].draws[0].counts()) + family_cells(["family_00"])
    first = draw(cells, history, 48, rng=batch_rng("2026-03-08"))
    again = draw(list(reversed(cells)), history, 48, rng=batch_rng("2026-03-08"))
    assert first.mode == "targeting"
    assert_frame_equal(first.frame(), again.frame())
    other = draw(cells, history, 48, rng=batch_rng("2026-03-09"))
    assert [s.cell for s in other.slots] != [s.cell for s in first.slots]


def test_a_later_batch_does_not_change_an_earlier_batch_draw(world, runs):
    run = runs[1]
    descriptions, rollouts, filtered = run.frames()
    key = "2026-03-06"

    def before(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("batch") < key)

    costs = run.costs()
    as_then = history_from_lake(
        *(before(f) for f in run.frames()), before=key, solver=SOLVER, costs=before(costs)
    )
    # Later batches' results, and this batch's own, flipped: every attempt now passes.
    rewritten = rollouts.with_columns(
        reward=pl.when(pl.col("batch") >= key).then(1).otherwise(pl.col("reward"))
    )
    as_now = history_from_lake(
        descriptions, rewritten, filtered, before=key, solver=SOLVER, costs=costs
    )
    assert as_then == as_now
    assert as_now.batches == tuple(f"2026-03-0{d}" for d in range(1, 6))
    replayed = draw(world.cells, as_now, 48, rng=batch_rng(key, 3))  # the run's seed
    assert_frame_equal(replayed.frame(), run.draws[5].frame())


def test_every_cell_gets_at_least_the_floor_within_a_batch_and_over_batches(world, runs):
    history = history_from_lake(*runs[1].frames(), before="2026-03-11", solver=SOLVER)
    assert history.scored() == 480
    floor = 1 / (2 * len(world.cells))  # half the batch spread evenly
    chosen = draw(world.cells, history, 960, floor=floor, rng=batch_rng("2026-03-11"))
    assert chosen.mode == "targeting"
    assert spread(chosen.counts(), world.cells)[0] >= 5  # 960 x floor = 5 draws a cell
    assert sum(s.source == "floor" for s in chosen.slots) == 480
    # With fewer draws than cells, the floor rotates to the cells drawn least so far.
    counts: dict[Cell, int] = {}
    for d in runs[1].draws:
        for cell, count in d.counts().items():
            counts[cell] = counts.get(cell, 0) + count
    total = sum(counts.values())
    default_floor = runs[1].draws[-1].floor
    assert default_floor == pytest.approx(0.2 / 96)
    assert all(counts.get(c, 0) >= default_floor * total - 1 for c in world.cells)


def test_targeting_raises_the_learnable_share_past_one_half_while_uniform_stays_put(runs):
    uniform_shares, targeted_shares = (run.shares() for run in runs)
    start = learnable_of(uniform_shares.head(1), "kept")  # the same cold start in both runs
    assert learnable_of(targeted_shares.head(1), "kept") == start
    uniform_late = learnable_of(uniform_shares.tail(5), "kept")
    targeted_late = learnable_of(targeted_shares.tail(5), "kept")
    assert abs(learnable_of(uniform_shares.head(5), "kept") - uniform_late) < 0.1
    assert uniform_late < 0.6
    assert targeted_late >= 0.5 and targeted_late > uniform_late + 0.25
    assert learnable_of(targeted_shares.tail(5), "scored") > 2 * learnable_of(
        uniform_shares.tail(5), "scored"
    )
    late = [d.mode for d in runs[1].draws[1:]]
    assert late == ["targeting"] * 9


def test_the_target_pass_rate_steers_the_draw_to_cells_whose_tasks_land_near_it():
    low, high = Cell.family("fam", 5), Cell.family("fam", 2)
    seen = {"generated": 20, "described": 20, "reached": 20, "scored": 20, "kept": 20}
    cells = {
        low: CellHistory(low, **seen, outcomes={(3, 16): 20}),
        high: CellHistory(high, **seen, outcomes={(13, 16): 20}),
    }
    history = History("2026-03-01", "chat/m", ("2026-02-28",), cells)
    for target, favoured in ((0.2, low), (0.8, high)):
        chosen = draw(
            [low, high],
            history,
            40,
            target_pass_rate=target,
            floor=0,
            cap=1.0,
            rng=batch_rng("2026-03-01"),
        )
        assert chosen.counts()[favoured] >= 36
        assert chosen.views[low].mean_pass_rate == pytest.approx(3 / 16, abs=0.03)
    with pytest.raises(ValueError, match="floor must be within 0 and 1/cells"):
        draw([low, high], history, 40, floor=0.6, rng=batch_rng("2026-03-01"))


def test_the_keep_band_gives_no_worth_to_tasks_stage_four_would_drop():
    # Both cells teach alike at the default target; with the band cut at 0.5 the easier one's
    # tasks would be dropped, so the draw gives them nothing and goes to the harder one.
    easier, harder = Cell.family("fam", 2), Cell.family("fam", 3)
    seen = {"generated": 20, "described": 20, "reached": 20, "scored": 20, "kept": 20}
    cells = {
        easier: CellHistory(easier, **seen, outcomes={(10, 16): 20}),
        harder: CellHistory(harder, **seen, outcomes={(6, 16): 20}),
    }
    history = History("2026-03-01", "chat/m", ("2026-02-28",), cells)
    options = {"floor": 0, "cap": 1.0, "rng": batch_rng("2026-03-01")}
    both = draw([easier, harder], history, 40, **options)
    assert both.views[easier].signal == pytest.approx(both.views[harder].signal, rel=0.05)
    banded = draw([easier, harder], history, 40, band=(0.0, 0.5), **options)
    assert banded.views[easier].signal < 0.4 * banded.views[harder].signal
    assert banded.views[easier].kept_prob < 0.3
    assert banded.counts()[harder] >= 36


@pytest.mark.parametrize("pass_probability", [1.0, 0.0])
def test_a_solver_that_always_or_never_passes_degrades_to_uniform_with_one_reason(
    world, pass_probability
):
    run = simulate(constant_world(world.cells, pass_probability), frontier, batches=4, n=48)
    modes = [d.mode for d in run.draws]
    assert modes == ["cold_start", "degraded", "degraded", "degraded"]
    for d in run.draws[1:]:
        assert d.reason.startswith("degraded to the uniform draw: none of the ")
        assert "\n" not in d.reason and d.summary()["reason"] == d.reason
        assert {slot.source for slot in d.slots} == {"uniform"}
        assert max(d.counts().values()) == 1  # 48 draws, 96 cells: no cell twice
    assert ("48 solved in every attempt" in run.draws[1].reason) == (pass_probability == 1.0)
    drawn = set().union(*(d.counts() for d in run.draws[:2]))
    assert len(drawn) == 96  # the second batch drew the cells the first did not


def test_one_attempt_per_task_degrades_at_once_since_nothing_can_be_learnable():
    run = simulate(hidden_skill_world(2, seed=1), frontier, batches=2, n=12, k=1)
    assert run.draws[1].mode == "degraded"
    assert "with 1 attempt per task" in run.draws[1].reason


def test_history_counts_each_cell_from_the_three_tables():
    descriptions = pl.DataFrame(
        {
            "task_id": ["t1", "t2", "t3", "t4", "t5", "t6"],
            "batch": ["2026-02-01"] * 5 + ["2026-02-02"],
            "status": ["ok", "ok", "ok", "ok", "rejected", "ok"],
            "generator": ["procedural", "procedural", "llm", "imported", "procedural", "llm"],
            "category": ["files", "files", "logs", "logs", "files", "logs"],
            "complexity": ["easy", "easy", "hard", "hard", "easy", "hard"],
            "family": ["fam", "fam", "llm", "x", "fam", "llm"],
            "truth": ['{"level": 2}', "{}", "{}", "{}", '{"level": 2}', "{}"],
        }
    )
    attempts = [("t1", 1), ("t1", 0), ("t1", None), ("t2", 1), ("t3", 1), ("t3", 1)]
    attempts += [("t4", 0), ("t6", 0)]
    rollouts = pl.DataFrame(
        {
            "task_id": [t for t, _ in attempts],
            "batch": ["2026-02-02" if t == "t6" else "2026-02-01" for t, _ in attempts],
            "policy": ["chat"] * len(attempts),
            "model": ["m"] * len(attempts),
            "reward": [r for _, r in attempts],
        },
        schema_overrides={"reward": pl.Int64},
    )
    filtered = pl.DataFrame(
        {"task_id": ["t1", "t3"], "solver_model": ["chat/m", "chat/m"], "kept": [True, True]}
    )
    history = history_from_lake(descriptions, rollouts, filtered, before="2026-02-02")
    assert history.solver == "chat/m" and history.batches == ("2026-02-01",)
    rows = {row["cell"]: row for row in history.frame().to_dicts()}
    assert set(rows) == {"family:fam:2", "taxonomy:logs:hard"}  # unleveled, imported: no cell
    fam = rows["family:fam:2"]
    assert (fam["generated"], fam["described"], fam["reached"], fam["scored"]) == (2, 1, 1, 1)
    assert (fam["kept"], fam["learnable"], fam["attempts"], fam["successes"]) == (1, 1, 2, 1)
    assert json.loads(fam["outcomes"]) == [[1, 2, 1]] and fam["mean_pass_rate"] == 0.5
    logs = rows["taxonomy:logs:hard"]
    assert (logs["all_passed"], logs["learnable"], logs["category"], logs["level"]) == (
        1,
        0,
        "logs",
        None,
    )
    assert history.frame().schema == polars_schema("cell_history")
    per_batch = cell_batches(descriptions, rollouts.filter(pl.col("task_id") != "t6"), filtered)
    assert per_batch.filter(pl.col("batch") == "2026-02-02")["solver"].to_list() == [""]


def test_the_sql_view_gives_the_same_rows_as_the_frame_function(runs):
    descriptions, rollouts, filtered = runs[1].frames()
    con = duckdb.connect()
    con.register("task_descriptions", descriptions)
    con.register("solver_rollouts", rollouts)
    con.register("filtered_dataset", filtered)
    # What building, testing and probing each task cost (the soundness stage's, null for half).
    tasks = descriptions.select("task_id", "batch")
    stages = {
        "task_environments": tasks.with_columns(tokens_in=pl.lit(700), tokens_out=pl.lit(50)),
        "completion_tests": tasks.with_columns(tokens_in=pl.lit(300), tokens_out=pl.lit(20)),
        "task_soundness": tasks.with_columns(
            tokens_in=pl.when(pl.int_range(pl.len()) % 2 == 0).then(pl.lit(90)),
            tokens_out=pl.lit(None, dtype=pl.Int64),
        ),
    }
    for name, frame in stages.items():
        con.register(name, frame)
    costs = task_costs([descriptions, *stages.values()], [])
    expected = cell_batches(descriptions, rollouts, filtered, costs)
    assert expected["tokens"].sum() > descriptions["tokens_in"].sum()
    assert expected["rollout_tokens"].sum() == rollouts["tokens_in"].sum()
    assert_frame_equal(con.sql(CELL_BATCHES_SQL).pl(), expected)


def test_the_history_read_from_lake_partitions_is_the_one_from_frames(tmp_path, runs):
    lake = Lake(tmp_path)
    names = ("task_descriptions", "solver_rollouts", "filtered_dataset")
    for name, frame in zip(names, runs[1].frames(), strict=True):
        for (batch,), part in frame.partition_by("batch", as_dict=True).items():
            lake.write(name, batch, part)
    costs = runs[1].costs()
    expected = history_from_lake(*runs[1].frames(), before="2026-03-07", window=3, costs=costs)
    assert expected.get(sorted(expected.cells)[0]).tokens > 0
    assert read_history(lake, before="2026-03-07", window=3) == expected
    assert len(expected.batches) == 3


def test_the_draws_table_has_a_row_per_task_with_why_it_was_drawn(runs):
    d = runs[1].draws[-1]
    frame = d.frame()
    assert TaskDraws.validate(frame).height == 48
    assert frame["index"].to_list() == list(range(48))
    exploit = frame.filter(pl.col("source") == "exploit")
    assert exploit["sample"].null_count() == 0 and exploit.height > 24
    assert frame.filter(pl.col("source") == "floor")["sample"].null_count() == 10
    assert frame["score"].null_count() == 0 and frame["evidence"].min() >= 0
    summary = d.summary()
    assert summary["draws"] == 48 and summary["floor_draws"] == 10
    assert 0.5 < summary["expected_learnable"] <= 1


def test_evolve_moves_levels_the_right_way_and_carries_the_parent():
    found = pl.DataFrame(
        {
            "task_id": ["pass3", "fail3", "half3", "pass6", "fail1", "pass_easy"],
            "batch": ["2026-02-01"] * 6,
            "seed": [11, 12, 13, 14, 15, 16],
            "kind": ["family"] * 5 + ["taxonomy"],
            "category": [None] * 5 + ["logs"],
            "complexity": [None] * 5 + ["easy"],
            "family": ["fam"] * 5 + [None],
            "level": [3, 3, 3, 6, 1, None],
            "successes": [8, 0, 4, 8, 0, 8],
            "scored_attempts": [8, 8, 8, 8, 8, 8],
        }
    )
    proposals = propose(
        found, batch="2026-02-02", n=40, budget=0.5, complexities=("easy", "medium", "hard")
    )
    by_parent = {p.parent_task_id: p for p in proposals}
    assert set(by_parent) == {"pass3", "fail3", "pass_easy"}  # clamped at 6 and 1: none
    assert by_parent["pass3"].cell == Cell.family("fam", 4)
    assert by_parent["pass3"].direction == "harder"
    assert by_parent["fail3"].cell == Cell.family("fam", 2)
    assert by_parent["fail3"].direction == "easier"
    assert by_parent["pass_easy"].cell == Cell.taxonomy("logs", "medium")
    assert by_parent["pass3"].seed == child_seed(11, Cell.family("fam", 4)) != 11
    assert "8 of 8 attempts at level 3" in by_parent["pass3"].why
    assert len(propose(found, batch="2026-02-02", n=40, budget=0.05)) == 2
    favoured = propose(
        found, batch="2026-02-02", n=10, budget=0.1, scores={Cell.family("fam", 2): 0.9}
    )
    assert [p.parent_task_id for p in favoured] == ["fail3"]
    assert propose(found, batch="2026-02-02", n=40, budget=1.0, exclude={"pass3"}) == [
        by_parent["fail3"]
    ]


def test_evolve_reads_its_candidates_from_the_window_and_joins_the_draw(runs):
    descriptions, _, filtered = runs[1].frames()
    found = candidates(descriptions, filtered, before="2026-03-05", window=2)
    assert sorted(found["batch"].unique().to_list()) == ["2026-03-03", "2026-03-04"]
    proposals = propose(found, batch="2026-03-05", n=48, budget=0.1)
    assert len(proposals) == 4
    seeds = dict(descriptions.select("task_id", "seed").iter_rows())
    for p in proposals:
        assert p.seed == child_seed(seeds[p.parent_task_id], p.cell)
        assert abs(p.cell.key[1] - p.parent_cell.key[1]) == 1
    base = draw(CELLS, History("2026-03-05"), 44, rng=batch_rng("2026-03-05"))
    joined = combine(base, proposals).frame()
    assert joined.height == 48 and joined["index"].to_list() == list(range(48))
    variants = joined.filter(pl.col("source") == "evolve")
    assert variants["parent_task_id"].to_list() == [p.parent_task_id for p in proposals]


def test_the_learnable_share_counts_only_pass_rates_strictly_between_0_and_1():
    filtered = pl.DataFrame(
        {
            "task_id": [f"t{i}" for i in range(7)],
            "batch": ["b1"] * 5 + ["b2"] * 2,
            "successes": [0, 1, 7, 8, 4, 8, 0],
            "scored_attempts": [8, 8, 8, 8, 8, 8, 0],
            "kept": [False, True, True, True, False, True, False],
        }
    )
    shares = learnable_share(filtered).to_dicts()
    assert shares[0] == {
        "batch": "b1",
        "scored": 5,
        "kept": 3,
        "learnable": 2,
        "learnable_share": pytest.approx(2 / 3),
        "learnable_per_scored": pytest.approx(2 / 5),
    }
    assert (shares[1]["learnable"], shares[1]["learnable_share"]) == (0, 0.0)
    costs = task_costs(
        [filtered.select("task_id", "batch", tokens_in=pl.lit(100), tokens_out=pl.lit(20))],
        [filtered.select("task_id", "batch", seconds=pl.lit(30.0))],
    )
    per_batch = cost_per_learnable(filtered, costs).to_dicts()
    assert per_batch[0]["tokens_per_learnable"] == 5 * 120 / 2
    assert per_batch[0]["container_seconds_per_learnable"] == 5 * 30 / 2
    assert per_batch[1]["tokens_per_learnable"] is None
