"""A solver of fixed, hidden skill per cell, run over consecutive daily batches with the uniform
draw or the frontier sampler, writing the lake's frames the history reads back (worlds.py has
worlds of other shapes)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import polars as pl

from endless_assets.models import task_seed
from endless_assets.sampling.cells import Cell, family_cells
from endless_assets.sampling.history import CellHistory, History, history_from_lake
from endless_assets.sampling.measures import learnable_share, task_costs
from endless_assets.sampling.policy import Draw, batch_rng, draw
from endless_assets.solver_id import SolverId

SOLVER = ("chat", "hidden-skill")
# What a task costs in tokens: writing it, then each attempt alike (episodes have no length here).
TOKENS_TO_WRITE = 12_000
TOKENS_PER_ATTEMPT = 4_000


@dataclass(frozen=True)
class World:
    """Each cell's hidden pass probability; a task's own is the cell's moved by `jitter` on the
    logit scale, so the tasks of a cell differ, or drawn from the cell's `mixture` of (weight,
    pass probability) when it has one."""

    skill: dict[Cell, float]
    jitter: float = 0.5
    mixture: dict[Cell, tuple[tuple[float, float], ...]] = field(default_factory=dict)

    @property
    def cells(self) -> list[Cell]:
        return sorted(self.skill)

    def task_pass_probability(self, cell: Cell, rng: random.Random) -> float:
        if cell in self.mixture:
            u, running = rng.random(), 0.0
            for weight, p in self.mixture[cell]:
                running += weight
                if u < running:
                    return p
            return self.mixture[cell][-1][1]
        p = self.skill[cell]
        if p <= 0 or p >= 1:
            return p
        logit = math.log(p / (1 - p)) + rng.gauss(0, self.jitter)
        return 1 / (1 + math.exp(-logit))


def hidden_skill_world(
    families: int = 16,
    *,
    seed: int = 0,
    out_of_reach: float = 0.5,
    mastered: float = 0.3,
    edge: float = 0.01,
    jitter: float = 0.5,
) -> World:
    """`families` x 6 levels, each cell's skill drawn once: `out_of_reach` of them near 0,
    `mastered` near 1 (within `edge`), the rest from 0.1 to 0.9 (as in the paper, a uniform draw
    is then half unsolvable, a quarter always solved, a quarter learnable)."""
    rng = random.Random(f"world:{seed}")
    skill = {}
    for cell in family_cells(f"family_{i:02d}" for i in range(families)):
        u = rng.random()
        if u < out_of_reach:
            skill[cell] = edge * rng.random()
        elif u < out_of_reach + mastered:
            skill[cell] = 1 - edge * rng.random()
        else:
            skill[cell] = 0.1 + 0.8 * rng.random()
    return World(skill, jitter)


def constant_world(cells: Sequence[Cell], pass_probability: float) -> World:
    """A solver that passes with the same probability everywhere (1: always, 0: never)."""
    return World(dict.fromkeys(cells, pass_probability))


@dataclass
class Run:
    """What a simulated run made: a draw per batch and the three tables' frames."""

    draws: list[Draw] = field(default_factory=list)
    descriptions: list[pl.DataFrame] = field(default_factory=list)
    rollouts: list[pl.DataFrame] = field(default_factory=list)
    filtered: list[pl.DataFrame] = field(default_factory=list)

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        return pl.concat(self.descriptions), pl.concat(self.rollouts), pl.concat(self.filtered)

    def costs(self) -> pl.DataFrame:
        """task_id, batch, tokens and container_seconds of making each task (`task_costs`)."""
        return task_costs([pl.concat(self.descriptions)], [])

    def history(self, before: str, window: int = 14) -> History:
        """The history a draw for `before` reads from what the run made."""
        if not self.descriptions:
            return History(before)
        return history_from_lake(
            *self.frames(),
            before=before,
            window=window,
            solver=str(SolverId(*SOLVER)),
            costs=self.costs(),
        )

    def shares(self) -> pl.DataFrame:
        """Per batch: scored, kept, learnable, learnable_share, learnable_per_scored."""
        return learnable_share(pl.concat(self.filtered))


Policy = Callable[[list[Cell], History, int, random.Random], Draw]


def frontier(cells: list[Cell], history: History, n: int, rng: random.Random) -> Draw:
    """The frontier sampler as the describe stage runs it: the pooled posterior."""
    return draw(cells, history, n, rng=rng)


def per_cell(cells: list[Cell], history: History, n: int, rng: random.Random) -> Draw:
    """The frontier sampler before pooling: each cell's posterior on its own."""
    return draw(cells, history, n, rng=rng, model="per_cell")


def uniform(cells: list[Cell], history: History, n: int, rng: random.Random) -> Draw:
    """The draw without targeting: the cold start's even spread, whatever the history."""
    return draw(cells, History(history.before, history.solver), n, rng=rng)


def oracle(world: World, k: int, tasks: int = 400) -> Policy:
    """A draw that knows the world (each cell scored as if `tasks` of its tasks had been seen at
    `k` attempts) under the same rules: what the world allows a draw to reach, for reference."""
    rng = random.Random(f"oracle:{k}")
    known = {}
    for cell in world.cells:
        outcomes: dict[tuple[int, int], int] = {}
        for _ in range(tasks):
            p = world.task_pass_probability(cell, rng)
            s = sum(rng.random() < p for _ in range(k))
            outcomes[(s, k)] = outcomes.get((s, k), 0) + 1
        kept = sum(t for (s, _), t in outcomes.items() if s > 0)
        spent = {
            "tokens": TOKENS_TO_WRITE * tasks,
            "rollout_tokens": TOKENS_PER_ATTEMPT * k * tasks,
        }
        counts = dict.fromkeys(("generated", "described", "reached", "scored"), tasks)
        known[cell] = CellHistory(cell, **counts, kept=kept, outcomes=outcomes, **spent)

    def policy(cells: list[Cell], history: History, n: int, rng: random.Random) -> Draw:
        told = History(history.before, history.solver, history.batches, known, history.last_drawn)
        return draw(cells, told, n, rng=rng, model="per_cell")

    return policy


def simulate(
    world: World,
    policy: Policy,
    *,
    batches: int = 12,
    n: int = 48,
    k: int = 16,
    start: str = "2026-03-01",
    window: int = 14,
    seed: int = 0,
) -> Run:
    """`batches` consecutive daily batches of `n` tasks, `k` attempts each: every batch drawn
    by `policy` from the history of the batches before it, as the describe stage would."""
    run = Run()
    first = date.fromisoformat(start)
    cells = world.cells
    for b in range(batches):
        key = (first + timedelta(days=b)).isoformat()
        chosen = policy(cells, run.history(key, window), n, batch_rng(key, seed))
        run.draws.append(chosen)
        _run_batch(run, world, chosen, key, k, seed)
    return run


def _run_batch(run: Run, world: World, chosen: Draw, key: str, k: int, seed: int) -> None:
    described, attempts, scored = [], [], []
    for slot in chosen.slots:
        task_id = f"et-{key}-{slot.index}"
        cell = slot.cell
        rng = random.Random(f"solver:{seed}:{key}:{slot.index}")
        p = world.task_pass_probability(cell, rng)
        rewards = [int(rng.random() < p) for _ in range(k)]
        described.append(
            {
                "task_id": task_id,
                "batch": key,
                "status": "ok",
                "seed": task_seed(key, slot.index, seed),
                "generator": "procedural" if cell.kind == "family" else "llm",
                "category": cell.key[0],
                "complexity": str(cell.key[1]),
                "family": cell.key[0] if cell.kind == "family" else "llm",
                "truth": f'{{"level": {cell.key[1]}}}' if cell.kind == "family" else "{}",
                "tokens_in": TOKENS_TO_WRITE,
                "tokens_out": 0,
            }
        )
        attempts += [
            {
                "task_id": task_id,
                "batch": key,
                "policy": SOLVER[0],
                "model": SOLVER[1],
                "reward": r,
                "tokens_in": TOKENS_PER_ATTEMPT,
                "tokens_out": 0,
            }
            for r in rewards
        ]
        scored.append(
            {
                "task_id": task_id,
                "batch": key,
                "solver_model": str(SolverId(*SOLVER)),
                "scored_attempts": k,
                "successes": sum(rewards),
                "pass_rate": sum(rewards) / k,
                "kept": sum(rewards) > 0,
            }
        )
    run.descriptions.append(pl.DataFrame(described))
    run.rollouts.append(pl.DataFrame(attempts, schema_overrides={"reward": pl.Int64}))
    run.filtered.append(pl.DataFrame(scored))
