"""The frontier sampler against solvers of fixed, hidden skill: consecutive daily batches drawn
uniformly, by the per-cell sampler (each cell's own posterior, as before pooling) and by the pooled
sampler (the describe stage's: one model over categories and levels), each batch from the history of
the batches before it, all three on the same world.

Worlds (`sampling/worlds.py`): the paper's taxonomy size, 62 categories x 6 levels (372 cells),
and 16 x 6 (96 cells), a cell's logit pass rate a level effect plus a category effect plus noise
(`additive`), and other shapes so the sampler is not tuned to one: levels running backwards in a
third of the categories, a step per level of each category's own, a noisier solver, the pipeline
test's step-shaped solver, a generator that misses the level it is asked for, and cells with
nothing in common; and held-out shapes the model was not built around (levels backwards, levels
that mean nothing, a third of the tasks broken, ...). Prints the learnable share of kept tasks
(solved in some attempts, not all) per batch with what the pooled draw expected; per shape over
several worlds (seeds) the worst batch from the second on and the share pooled over batches 3-5
(batches of 48, k = 8), and over the last two of five daily batches of 40 at k = 4 on 60 cells
and on 372 (the held-out set-up; for the held-out shapes next to a draw that knows the world,
`simulation.oracle`); how the draws spread over the cells; cost per learnable task; the degraded
draw of a solver that always passes or never does; and the variants evolve proposes.

    .venv/bin/python bench/frontier_simulation.py [--seeds 4] [--shapes additive,steps]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import polars as pl

from endless_assets.sampling.evolve import candidates, propose
from endless_assets.sampling.measures import cost_per_learnable
from endless_assets.sampling.simulation import (
    Run,
    World,
    constant_world,
    frontier,
    oracle,
    per_cell,
    simulate,
    uniform,
)
from endless_assets.sampling.worlds import CAPPED, HELD_OUT, SHAPES, shaped_world

SAMPLERS = {"uniform": uniform, "per-cell": per_cell, "pooled": frontier}
MAIN = {"batches": 5, "n": 48, "k": 8}  # the set-up at the paper's taxonomy size
HELD_OUT_SETUP = {"batches": 5, "n": 40, "k": 4}  # five daily batches of 40, 4 attempts a task


def share(frame: pl.DataFrame) -> float:
    kept = frame["kept"].sum()
    return frame["learnable"].sum() / kept if kept else 0.0


def runs(world: World, seed: int, settings: dict, known: bool = False) -> dict[str, Run]:
    """The samplers' runs on `world`; `known`: also the draw that knows the world."""
    samplers = {**SAMPLERS, "oracle": oracle(world, settings["k"])} if known else SAMPLERS
    return {name: simulate(world, p, seed=seed, **settings) for name, p in samplers.items()}


def per_batch(world: World, seed: int) -> dict[str, Run]:
    made = runs(world, seed, MAIN)
    print(f"{'batch':<11} {'uniform':>8} {'per-cell':>9} {'pooled':>7}  pooled: mode, expected")
    shares = {name: run.shares()["learnable_share"].to_list() for name, run in made.items()}
    for i, d in enumerate(made["pooled"].draws):
        expected = d.expected()["learnable_share"]
        row = " ".join(f"{shares[name][i]:>8.2f}" for name in SAMPLERS)
        print(
            f"{d.batch:<11} {row}   {d.mode:<10} {'-' if expected is None else f'{expected:.2f}'}"
        )
    for name, run in made.items():
        frame = run.shares()
        print(
            f"  {name:<8}: from the second batch at least {min(shares[name][1:]):.2f}; "
            f"batches 3-5 pooled {share(frame.tail(3)):.2f}"
        )
    return made


def over_seeds(
    shape: str, categories: int, settings: dict, seeds: int, late: int, known: bool = False
) -> str:
    """Per sampler, over `seeds` worlds of the shape: the worst batch from the second on and
    the share pooled over the last `late` batches (mean, and the worst world's)."""
    worst: dict[str, list[float]] = {}
    pooled: dict[str, list[float]] = {}
    for seed in range(seeds):
        world = shaped_world(shape, categories, seed=seed)
        for name, run in runs(world, seed, settings, known).items():
            frame = run.shares()
            worst.setdefault(name, []).append(min(frame["learnable_share"].to_list()[1:]))
            pooled.setdefault(name, []).append(share(frame.tail(late)))
    return "  ".join(
        f"{name} {statistics.mean(pooled[name]):.2f} (>= {min(pooled[name]):.2f}; "
        f"worst batch {min(worst[name]):.2f})"
        for name in pooled
    )


def floor_report(world: World, n: int, batches: int) -> None:
    run = simulate(world, frontier, batches=batches, n=n, k=8)
    counts: Counter = Counter()
    sources: Counter = Counter()
    for d in run.draws:
        counts.update(d.counts())
        sources.update(slot.source for slot in d.slots)
    cells = world.cells
    least = min(counts.get(c, 0) for c in cells)
    print(
        f"  {sum(counts.values())} draws over {len(cells)} cells in {batches} batches: "
        + ", ".join(f"{source} {count}" for source, count in sorted(sources.items()))
    )
    print(
        f"  cells drawn: {sum(1 for c in cells if counts.get(c))} of {len(cells)}; the "
        f"least-drawn has {least}, the most {max(counts.values())}"
    )
    last = run.draws[-1]
    explored = [last.views[s.cell].uncertainty for s in last.slots if s.source != "exploit"]
    exploited = [last.views[s.cell].uncertainty for s in last.slots if s.source == "exploit"]
    print(
        f"  last batch ({last.batch}): {len(explored)} explored, mean uncertainty "
        f"{statistics.mean(explored):.3f} (exploited {statistics.mean(exploited):.3f}); top cells:"
    )
    for cell, count in sorted(last.counts().items(), key=lambda kv: (-kv[1], kv[0]))[:4]:
        view = last.views[cell]
        print(
            f"    {cell.id:<28} x{count:<2} hidden skill {world.skill[cell]:.2f}, expected pass "
            f"rate {view.mean_pass_rate:.2f}, P(learnable) {view.learnable_prob:.2f}"
        )


def cost_report(made: dict[str, Run]) -> None:
    for name, run in made.items():
        filtered = pl.concat(run.filtered)
        costs = run.costs().join(
            pl.concat(run.rollouts).group_by("task_id").agg(pl.col("tokens_in").sum()),
            on="task_id",
        )
        costs = costs.with_columns(tokens=pl.col("tokens") + pl.col("tokens_in"))
        table = cost_per_learnable(filtered, costs).tail(len(run.draws) - 1)
        tokens = table["tokens"].sum() / table["learnable"].sum()
        print(f"  {name:<8}: {tokens:,.0f} tokens per learnable task (batches 2-5)")


def degrade_report(world: World, p: float) -> None:
    run = simulate(constant_world(world.cells, p), frontier, batches=3, n=48, k=8)
    said = False
    for d in run.draws:
        counts = d.counts().values()
        print(
            f"  {d.batch}: {d.mode:<10} {len(d.counts())} cells, {min(counts)}-{max(counts)} each"
        )
        if d.reason and not said:  # one line, said once
            said = True
            print(f"    reason: {d.reason}")


def evolve_report(run: Run, n: int) -> None:
    descriptions, _, filtered = run.frames()
    last = run.draws[-1]
    found = candidates(descriptions, filtered, before=last.batch, window=7)
    scores = {cell: view.score for cell, view in last.views.items()}
    proposals = propose(found, batch=last.batch, n=n, budget=0.1, scores=scores)
    directions = Counter(p.direction for p in proposals)
    print(
        f"  from {found.height} scored tasks before {last.batch}: {len(proposals)} variants "
        f"within a budget of 10% of {n} ({dict(directions)}), the best-scored targets first"
    )
    for p in proposals[:2]:
        print(f"    {p.parent_task_id} -> {p.cell.id} (score {scores[p.cell]:.2f}): {p.why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=4, help="worlds per shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    started = time.monotonic()
    title = "cells (additive, seed 0), batches of 48, k = 8: learnable share of kept tasks"
    print(f"\n372 {title}")
    made = per_batch(shaped_world("additive", 62, seed=0), 0)
    print(f"\n96 {title}")
    per_batch(shaped_world("additive", 16, seed=0), 0)
    print(f"\nover {args.seeds} worlds a shape: batches 3-5 pooled, mean (>= worst world)")
    for shape in args.shapes.split(","):
        for categories in (62, 16):
            line = over_seeds(shape, categories, MAIN, args.seeds, late=3)
            print(f"  {shape:<12} {categories * 6:>3} cells, 48 x k=8: {line}")
    print(f"\nheld-out set-up, five batches of 40 at k = 4: the last two pooled, over {args.seeds}")
    for shape in args.shapes.split(","):
        for categories in (10, 62):
            line = over_seeds(shape, categories, HELD_OUT_SETUP, args.seeds, late=2)
            print(f"  {shape:<12} {categories * 6:>3} cells, 40 x k=4: {line}")
    print(f"\nheld-out shapes, the same set-up on 60 cells, over {args.seeds}, with the oracle:")
    for shape in HELD_OUT + CAPPED:
        line = over_seeds(shape, 10, HELD_OUT_SETUP, args.seeds, late=2, known=True)
        print(f"  {shape:<13} 60 cells, 40 x k=4: {line}")
    print("\ndraws per cell, pooled, 14 batches of 48 (k = 8):")
    for categories in (16, 62):
        floor_report(shaped_world("additive", categories, seed=0), 48, 14)
    print("\ncost per learnable task (a task costs 12,000 tokens to write, 4,000 an attempt):")
    cost_report(made)
    for label, p in (("always passes", 1.0), ("never passes", 0.0)):
        print(f"\na solver that {label} (372 cells):")
        degrade_report(shaped_world("additive", 62, seed=0), p)
    print("\nevolve, from the pooled run at 372 cells:")
    evolve_report(made["pooled"], 48)
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
