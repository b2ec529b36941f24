"""The frontier sampler against a solver of fixed, hidden skill per (family, level): consecutive
daily batches drawn uniformly or by the sampler, each from the history of the batches before it.

The world (`sampling/simulation.py`): 16 families x 6 levels, each cell's pass probability drawn
once, half of the cells near 0, 30% near 1 and the rest between 0.1 and 0.9, each task's own
probability the cell's moved a little; k attempts per task, a task kept when solved at least once
(the paper's rule). Prints per batch the learnable share (0 < pass rate < 1) of the kept tasks
and of all scored tasks for both draws, how the draws spread over the cells (the floor), what a
learnable task costs at a fixed cost per task, then the sampler with a solver that always passes
and one that never does, and the variants `evolve` proposes from the targeting run.

    .venv/bin/python bench/frontier_simulation.py [--batches 14] [--tasks 48] [--k 16]
"""

from __future__ import annotations

import argparse
from collections import Counter

import polars as pl

from endless_assets.sampling.evolve import candidates, propose
from endless_assets.sampling.measures import cost_per_learnable
from endless_assets.sampling.policy import EXPLORATION
from endless_assets.sampling.simulation import (
    Run,
    World,
    constant_world,
    frontier,
    hidden_skill_world,
    simulate,
    uniform,
)

TOKENS_PER_TASK = 40_000  # an assumed, equal cost per generated task (what matters is the ratio)
CONTAINER_SECONDS_PER_TASK = 300.0


def outcome_shares(run: Run) -> tuple[float, float, float]:
    filtered = pl.concat(run.filtered)
    s, n = filtered["successes"], filtered["scored_attempts"]
    total = filtered.height
    return (
        (s == 0).sum() / total,
        (s == n).sum() / total,
        ((s > 0) & (s < n)).sum() / total,
    )


def per_batch(uniform_run: Run, frontier_run: Run) -> None:
    u, f = uniform_run.shares(), frontier_run.shares()
    print(
        f"{'batch':<11} {'kept: uniform':>14} {'targeting':>10} {'scored: uniform':>16} "
        f"{'targeting':>10}  mode        expected"
    )
    for i, d in enumerate(frontier_run.draws):
        expected = d.summary()["expected_learnable"]
        print(
            f"{d.batch:<11} {u['learnable_share'][i]:>14.2f} {f['learnable_share'][i]:>10.2f} "
            f"{u['learnable_per_scored'][i]:>16.2f} {f['learnable_per_scored'][i]:>10.2f}  "
            f"{d.mode:<11} {'-' if expected is None else f'{expected:.2f}'}"
        )
    half = len(frontier_run.draws) // 2
    for name, frame in (("uniform", u), ("targeting", f)):
        late = frame.tail(half)
        kept = late["learnable"].sum() / late["kept"].sum()
        scored = late["learnable"].sum() / late["scored"].sum()
        print(f"  last {half} batches, {name:<9}: {kept:.2f} of kept, {scored:.2f} of scored")


def floor_report(world: World, run: Run, n: int) -> None:
    counts: Counter = Counter()
    sources: Counter = Counter()
    for d in run.draws:
        counts.update(d.counts())
        sources.update(slot.source for slot in d.slots)
    total = sum(counts.values())
    cells = world.cells
    floor = EXPLORATION / len(cells)
    least = min(counts.get(c, 0) for c in cells)
    print(
        f"  {total} draws over {len(cells)} cells: uniform {sources['uniform']}, floor "
        f"{sources['floor']}, exploit {sources['exploit']}; floor {floor:.4f} a cell "
        f"({floor * total:.1f} draws each over the run)"
    )
    print(
        f"  every cell drawn: {all(counts.get(c, 0) for c in cells)}; the least-drawn cell "
        f"has {least} ({least / total:.4f}), the most {max(counts.values())}"
    )
    last = run.draws[-1]
    print(f"  last batch ({last.batch}): {len(last.counts())} cells for {n} tasks; top cells:")
    for cell, count in sorted(last.counts().items(), key=lambda kv: (-kv[1], kv[0]))[:6]:
        view = last.views[cell]
        print(
            f"    {cell.id:<22} x{count:<3} hidden skill {world.skill[cell]:.2f}, posterior "
            f"mean pass rate {view.mean_pass_rate:.2f}, P(learnable) {view.learnable_prob:.2f}"
        )


def cost_report(uniform_run: Run, frontier_run: Run) -> None:
    for name, run in (("uniform", uniform_run), ("targeting", frontier_run)):
        filtered = pl.concat(run.filtered)
        costs = filtered.select(
            "task_id",
            "batch",
            tokens=pl.lit(TOKENS_PER_TASK, dtype=pl.Int64),
            container_seconds=pl.lit(CONTAINER_SECONDS_PER_TASK),
        )
        table = cost_per_learnable(filtered, costs).tail(len(run.draws) // 2)
        tokens = table["tokens"].sum() / table["learnable"].sum()
        seconds = table["container_seconds"].sum() / table["learnable"].sum()
        print(
            f"  {name:<9}: {tokens:,.0f} tokens and {seconds:,.0f} container seconds per "
            f"learnable task (last {table.height} batches)"
        )


def degrade_report(world: World, args: argparse.Namespace, p: float) -> None:
    run = simulate(constant_world(world.cells, p), frontier, batches=6, n=args.tasks, k=args.k)
    said = False
    for d in run.draws:
        counts = d.counts().values()
        spread = f"{len(d.counts())} cells, {min(counts)}-{max(counts)} draws each"
        print(f"  {d.batch}: {d.mode:<10} {spread}")
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
        f"  from {found.height} scored tasks of the 7 batches before {last.batch}: "
        f"{len(proposals)} variants within a budget of 10% of {n} ({dict(directions)}), the "
        "targets the draw scored best first"
    )
    for p in proposals[:3]:
        score = scores[p.cell]
        print(f"    {p.parent_task_id} -> {p.cell.id} (score {score:.2f}): {p.why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=16)
    parser.add_argument("--batches", type=int, default=14)
    parser.add_argument("--tasks", type=int, default=48, help="tasks per batch")
    parser.add_argument("--k", type=int, default=16, help="attempts per task")
    parser.add_argument("--seed", type=int, default=0, help="the world's seed")
    args = parser.parse_args()
    world = hidden_skill_world(args.families, seed=args.seed)
    settings = {"batches": args.batches, "n": args.tasks, "k": args.k}
    uniform_run = simulate(world, uniform, **settings)
    frontier_run = simulate(world, frontier, **settings)
    failed, passed, learnable = outcome_shares(uniform_run)
    print(
        f"world: {len(world.cells)} cells; the uniform draw's tasks: {failed:.0%} fail every "
        f"attempt, {passed:.0%} pass every one, {learnable:.0%} learnable (k = {args.k})\n"
    )
    print("learnable share per batch (of kept tasks; of scored tasks):")
    per_batch(uniform_run, frontier_run)
    print("\ndraws per cell, targeting run:")
    floor_report(world, frontier_run, args.tasks)
    print("\ncost per learnable task, at a fixed cost per generated task:")
    cost_report(uniform_run, frontier_run)
    for label, p in (("always passes", 1.0), ("never passes", 0.0)):
        print(f"\na solver that {label}:")
        degrade_report(world, args, p)
    print("\nevolve, from the targeting run:")
    evolve_report(frontier_run, args.tasks)


if __name__ == "__main__":
    main()
