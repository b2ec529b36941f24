"""The pooled posterior and what the draw aims at: one batch's evidence at a level moves every
category's cell of that level, a cell that breaks the pattern is learnt from its own tasks, the
training signal per token decides between cells, the draw says what it expects of a batch and
what it explores, and at the paper's taxonomy size it learns within one batch."""

from __future__ import annotations

import math
from collections import Counter

import duckdb
import numpy as np
import polars as pl
import pytest

from endless_assets.sampling.cells import Cell, family_cells
from endless_assets.sampling.history import CellHistory, History
from endless_assets.sampling.policy import EXPLORE_BELOW, batch_rng, draw
from endless_assets.sampling.pooled import Pooled
from endless_assets.sampling.posterior import posterior
from endless_assets.sampling.simulation import frontier, per_cell, simulate, uniform
from endless_assets.sampling.worlds import shaped_world
from endless_assets.sampling.worth import signal, signals
from endless_assets.store.frontier_views import FRONTIER_BATCHES_SQL

CATEGORIES = [f"c{i}" for i in range(8)]
CELLS = family_cells(CATEGORIES)  # 8 categories x 6 levels


def learnable_share(frame: pl.DataFrame) -> float:
    return frame["learnable"].sum() / frame["kept"].sum()


def seen(cell: Cell, outcomes: dict[tuple[int, int], int], tokens: int = 0) -> CellHistory:
    """A cell's window: `tokens` to make its tasks, 1,000 a scored attempt at them."""
    tasks = sum(outcomes.values())
    counts = {"generated": tasks, "described": tasks, "reached": tasks, "scored": tasks}
    kept = sum(t for (s, _), t in outcomes.items() if s > 0)
    attempts = sum(n * t for (_, n), t in outcomes.items())
    return CellHistory(
        cell, **counts, kept=kept, tokens=tokens, rollout_tokens=1000 * attempts, outcomes=outcomes
    )


def one_batch() -> dict[Cell, dict[tuple[int, int], int]]:
    """Six of the eight categories seen once at each level: level 1 always solved, level 3
    about half the time, level 6 never, the others between."""
    rates = {1: 8, 2: 7, 3: 4, 4: 2, 5: 1, 6: 0}
    return {Cell.family(c, lv): {(s, 8): 1} for c in CATEGORIES[:6] for lv, s in rates.items()}


def test_one_batch_at_a_level_moves_every_category_at_that_level():
    model = Pooled(CELLS, one_batch())
    pmf = model.predictive(8)
    rate = pmf @ (np.arange(9) / 8)
    index = {cell: i for i, cell in enumerate(model.cells)}
    unseen = [Cell.family("c7", lv) for lv in range(1, 7)]
    rates = [rate[index[cell]] for cell in unseen]
    assert rates == sorted(rates, reverse=True)  # the levels' order, learnt from the others
    assert rates[0] > 0.85 and rates[5] < 0.15 and 0.3 < rates[2] < 0.7
    # Each cell's own posterior knows nothing of c7: every level alike.
    alone = posterior({}, generated=0, scored=0, k=8)
    assert alone.mean_pass_rate == pytest.approx(0.5, abs=0.01)
    # What is learnt is shared, not copied: an unseen category is less certain than a seen one.
    _, sd = model.marginal
    assert sd[index[Cell.family("c7", 3)]] > sd[index[Cell.family("c0", 3)]]


def test_a_cell_that_breaks_the_pattern_is_learnt_from_its_own_tasks():
    outcomes = one_batch()
    for _ in range(3):  # more batches of the same, and c0's level 5 solved every time
        for cell, seen_ in one_batch().items():
            for key, tasks in seen_.items():
                outcomes[cell][key] = outcomes[cell].get(key, 0) + tasks
    outcomes[Cell.family("c0", 5)] = {(8, 8): 4}
    model = Pooled(CELLS, outcomes)
    rate = model.predictive(8) @ (np.arange(9) / 8)
    index = {cell: i for i, cell in enumerate(model.cells)}
    assert rate[index[Cell.family("c0", 5)]] > 0.8
    assert rate[index[Cell.family("c1", 5)]] < 0.3  # seen, as the others: still hard
    # Unseen, it is less sure (a world where a cell can break the pattern), still hard.
    assert rate[index[Cell.family("c7", 5)]] < 0.4


def test_a_third_of_broken_tasks_in_every_cell_is_read_as_broken_not_as_a_wide_spread():
    # The same batches, each cell with two tasks more that failed every attempt (a third): the
    # model takes them for dead tasks; a mastered level stays mastered (nothing learnable), the
    # middle one learnable, and a cell's tasks still spread little.
    outcomes = {}
    for cell, seen_ in one_batch().items():
        (s, n), _ = next(iter(seen_.items()))
        outcomes[cell] = {(s, n): 4}
        outcomes[cell][(0, n)] = outcomes[cell].get((0, n), 0) + 2
    model = Pooled(CELLS, outcomes)
    assert 0.2 < model.dead < 0.4 and model.trivial < 0.02
    spreads = zip(model.weights, model.fits, strict=True)
    assert sum(w for w, fit in spreads if fit.tau <= 0.7) > 0.9
    pmf = model.predictive(8)
    learnable = pmf[:, 1:8].sum(axis=1)
    index = {cell: i for i, cell in enumerate(model.cells)}
    assert learnable[index[Cell.family("c7", 1)]] < 0.1  # unseen, mastered: a dead task or 8/8
    assert learnable[index[Cell.family("c0", 3)]] > 0.6
    assert pmf[index[Cell.family("c0", 1)], 0] == pytest.approx(model.dead, abs=0.05)
    # The draw says what it found, in its summary (the materialization's metadata).
    history = History(
        "2026-03-01", "chat/m", ("2026-02-28",), {c: seen(c, o) for c, o in outcomes.items()}
    )
    summary = draw(CELLS, history, 40, rng=batch_rng("2026-03-01")).summary()
    assert summary["dead_share"] == pytest.approx(model.dead, abs=1e-3)
    assert summary["trivial_share"] == pytest.approx(model.trivial, abs=1e-3)
    per_cell = draw(CELLS, history, 40, rng=batch_rng("2026-03-01"), model="per_cell")
    assert per_cell.summary()["dead_share"] is None  # each cell's own posterior has no such share


def test_the_signal_peaks_at_the_target_and_is_nothing_outside_the_band_or_at_the_ends():
    assert signal(4, 8, 0.5, (0.0, 1.0)) == 1.0
    assert signal(2, 8, 0.5, (0.0, 1.0)) == pytest.approx(4 * 0.25 * 0.75)
    assert signal(0, 8, 0.5, (0.0, 1.0)) == signal(8, 8, 0.5, (0.0, 1.0)) == 0.0
    assert signal(7, 8, 0.5, (0.0, 0.8)) == 0.0  # dropped by the keep band: teaches nothing
    low = signals(8, 0.25, (0.0, 1.0))
    assert int(np.argmax(low)) == 2 and low[2] == pytest.approx(1.0)


def test_the_draw_follows_the_training_signal_per_token_spent():
    cheap, dear = Cell.family("fam", 2), Cell.family("fam", 3)
    half = {(4, 8): 20}
    history = History(
        "2026-03-01",
        "chat/m",
        ("2026-02-28",),
        {cheap: seen(cheap, half, tokens=20 * 10_000), dear: seen(dear, half, tokens=20 * 40_000)},
    )
    chosen = draw([cheap, dear], history, 40, floor=0, cap=1.0, rng=batch_rng("2026-03-01"))
    assert chosen.views[cheap].signal == pytest.approx(chosen.views[dear].signal, rel=1e-3)
    assert chosen.views[cheap].tokens < chosen.views[dear].tokens
    assert chosen.counts()[cheap] >= 36


def test_a_kept_task_solved_every_time_costs_its_training_for_nothing():
    # Both cells give the same signal: a quarter of their tasks in neither; but a task solved in
    # every attempt is kept and trained on, one solved in none is dropped.
    solved, unsolved = Cell.family("fam", 2), Cell.family("fam", 3)
    cells = {
        solved: seen(solved, {(8, 8): 5, (4, 8): 15}, tokens=20 * 10_000),
        unsolved: seen(unsolved, {(0, 8): 5, (4, 8): 15}, tokens=20 * 10_000),
    }
    history = History("2026-03-01", "chat/m", ("2026-02-28",), cells)
    chosen = draw([solved, unsolved], history, 40, floor=0, cap=1.0, rng=batch_rng("2026-03-01"))
    assert chosen.views[solved].signal == pytest.approx(chosen.views[unsolved].signal, rel=0.05)
    assert chosen.views[unsolved].score > chosen.views[solved].score
    assert chosen.counts()[unsolved] > chosen.counts()[solved]


@pytest.fixture(scope="module")
def taxonomy_runs():
    """The paper's taxonomy size: 62 categories x 6 levels, batches of 48, k = 8; the three draws
    on the same world."""
    world = shaped_world("additive", 62, seed=0)
    settings = {"batches": 5, "n": 48, "k": 8, "seed": 0}
    return {
        name: simulate(world, policy, **settings)
        for name, policy in (("uniform", uniform), ("per_cell", per_cell), ("pooled", frontier))
    }


def test_at_the_papers_taxonomy_size_the_pooled_draw_learns_within_one_batch(taxonomy_runs):
    shares = {name: run.shares() for name, run in taxonomy_runs.items()}
    pooled = shares["pooled"]
    assert all(share >= 0.7 for share in pooled["learnable_share"].to_list()[1:])
    late = {name: learnable_share(frame.tail(3)) for name, frame in shares.items()}
    assert late["pooled"] >= 0.8
    assert late["pooled"] > late["per_cell"] and late["pooled"] > late["uniform"] + 0.15
    second = {name: frame["learnable_share"][1] for name, frame in shares.items()}
    assert second["pooled"] > second["per_cell"] and second["pooled"] > second["uniform"]


def test_the_draw_says_what_it_expects_and_the_batch_bears_it_out(taxonomy_runs):
    run = taxonomy_runs["pooled"]
    assert run.draws[0].expected()["learnable_share"] is None  # a cold start knows nothing
    expected = [d.expected()["learnable_share"] for d in run.draws[1:]]
    measured = run.shares()["learnable_share"].to_list()[1:]
    assert abs(sum(expected) / 4 - sum(measured) / 4) < 0.08
    for d in run.draws[1:]:
        assert d.summary()["expected_learnable_share"] == d.expected()["learnable_share"]
        assert 0 < d.expected()["signal"] < 1 and d.model == "pooled"


def test_the_draw_explores_the_cells_it_knows_least_and_records_how_unsure_it_is(taxonomy_runs):
    run = taxonomy_runs["pooled"]
    d = run.draws[2]
    history = run.history(d.batch)
    frame = d.frame()
    assert frame["uncertainty"].null_count() == 0
    floor = frame.filter(pl.col("source") == "floor")
    assert floor.height == math.ceil(0.2 * 48)
    # The floor goes to cells no batch drew yet, and favours those that may prove worth most.
    assert not {Cell.from_columns(row) for row in floor.to_dicts()} & set(history.last_drawn)
    never = [view for cell, view in d.views.items() if cell not in history.last_drawn]
    hope = [row["score"] + row["uncertainty"] for row in floor.to_dicts()]
    assert sum(hope) / len(hope) > sum(v.score + v.uncertainty for v in never) / len(never)
    # A Thompson draw that won on its uncertainty, not its expected score, is `explore`.
    best = max(view.score for view in d.views.values())
    for row in frame.filter(pl.col("source").is_in(["explore", "exploit"])).to_dicts():
        assert (row["source"] == "explore") == (row["score"] < EXPLORE_BELOW * best)


def test_the_floor_goes_to_the_cells_drawn_least_and_longest_ago():
    world = shaped_world("additive", 2, seed=1)
    cells = world.cells  # 12 cells, 2 floor draws a batch
    run = simulate(world, frontier, batches=8, n=10, k=8, seed=1)
    floors = [[s.cell for s in d.slots if s.source == "floor"] for d in run.draws[1:]]
    assert all(len(f) == 2 for f in floors)
    drawn = set().union(*(d.counts() for d in run.draws))
    assert drawn == set(cells)  # 10 + 2 a batch: every cell within the first batches
    for d, floor in zip(run.draws[1:], floors, strict=True):
        history = run.history(d.batch)

        def key(cell: Cell, history: History = history) -> tuple[int, str]:
            return history.get(cell).generated, history.last_drawn.get(cell, "")

        assert sorted(map(key, floor)) == sorted(map(key, cells))[:2]


def test_a_generator_of_the_pipeline_tests_shape_reaches_seventy_percent_at_k_four():
    # Each category solved below its frontier level, half the time at it and the level above,
    # never higher; five daily batches of 40 over 60 cells, 4 attempts a task.
    run = simulate(shaped_world("steps", 10, seed=0), frontier, batches=5, n=40, k=4, seed=0)
    assert learnable_share(run.shares().tail(2)) >= 0.7


def test_the_frontier_batches_view_sets_each_expectation_next_to_its_measurement(taxonomy_runs):
    run = taxonomy_runs["pooled"]
    con = duckdb.connect()
    con.register("task_draws", pl.concat([d.frame() for d in run.draws]))
    con.register("filtered_dataset", pl.concat(run.filtered))
    view = con.sql(FRONTIER_BATCHES_SQL).pl()
    measured = run.shares()
    assert view["batch"].to_list() == measured["batch"].to_list()
    assert view["learnable_share"].to_list() == pytest.approx(measured["learnable_share"].to_list())
    expected = [d.expected()["learnable_share"] for d in run.draws]
    assert view["expected_learnable_share"].to_list() == pytest.approx(expected, abs=1e-4)
    assert view["expected_signal"].to_list()[1:] == pytest.approx(
        [d.expected()["signal"] for d in run.draws[1:]], abs=1e-4
    )
    # The measured signal: each scored task's worth.signal, averaged.
    last = pl.concat(run.filtered).filter(pl.col("batch") == run.draws[-1].batch)
    signals_ = [
        signal(s, n, 0.5, (0.0, 1.0)) for s, n in last.select("successes", "scored_attempts").rows()
    ]
    assert view["signal"][-1] == pytest.approx(sum(signals_) / len(signals_))
    sources = Counter(s.source for s in run.draws[-1].slots)
    assert view.row(-1, named=True)["explore"] == sources["explore"]
    assert view.row(-1, named=True)["floor"] == sources["floor"]
