"""Worlds of hidden skill with structure, for the simulation: a cell's logit pass rate is a level
effect plus a category effect plus noise, in several shapes, so a sampler is not tuned to one.

`additive` (2.5 logits a level, categories spread by 1), `nonmonotone` (a third of the categories
run their middle levels backwards), `interaction` (each category its own step, 1.5-3.5),
`noisy` (tasks spread by 1.5 logits, cells by 0.8), `steps` (the pipeline test's solver: a
frontier level per category), `imprecise` (`steps` with levels missed by one a quarter of the
time each way), `unstructured` (`simulation.hidden_skill_world`).

Held out (`HELD_OUT`): `reversed`, `category_only`, `permuted`, `plateau` (1-3 easy, 4-6 hard),
`gentle` (0.8 a level), `hard` (3.5 logits harder), `named` (taxonomy cells), `broken` (a third
of the tasks fail every attempt); and `CAPPED`, where no draw under the sampler's rules reaches
70% learnable (`simulation.oracle` does no better): `steep`, `easy`, `trivial`.
"""

from __future__ import annotations

import math
import random

from endless_assets.sampling.cells import LEVELS, Cell, family_cells
from endless_assets.sampling.simulation import World, hidden_skill_world

SHAPES = ("additive", "nonmonotone", "interaction", "noisy", "steps", "imprecise", "unstructured")
HELD_OUT = ("reversed", "category_only", "permuted", "plateau", "gentle", "hard", "named", "broken")
CAPPED = ("steep", "easy", "trivial")  # held out too, but out of any draw's reach at 70%
NAMED_LEVELS = ("trivial", "simple", "moderate", "involved", "hard", "expert")
OFFSET = -1.5  # the logit of an average category's level 3.5: most levels out of reach or solved
STEP = 2.5


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _steps(names: list[str], rng: random.Random, *, imprecise: bool) -> World:
    edges = {name: rng.randint(2, 5) for name in names}

    def skill(name: str, level: int) -> float:
        return 1.0 if level < edges[name] else 0.5 if level <= edges[name] + 1 else 0.0

    mixture = {}
    for cell in family_cells(names):
        name, level = cell.key
        made = [(0.25, level - 1), (0.5, level), (0.25, level + 1)] if imprecise else [(1, level)]
        mixture[cell] = tuple(
            (w, skill(name, min(max(lv, LEVELS[0]), LEVELS[-1]))) for w, lv in made
        )
    means = {cell: sum(w * p for w, p in parts) for cell, parts in mixture.items()}
    return World(means, 0.0, mixture)


def shaped_world(shape: str, categories: int = 62, *, seed: int = 0) -> World:
    """`categories` x 6 levels of `shape` (see the module), drawn once from `seed`."""
    if shape == "unstructured":
        return hidden_skill_world(categories, seed=seed)
    if shape in HELD_OUT + CAPPED:
        return _held_out(shape, categories, seed)
    if shape not in SHAPES:
        every = ", ".join(SHAPES + HELD_OUT + CAPPED)
        raise ValueError(f"a world's shape is one of {every}, got {shape!r}")
    rng = random.Random(f"world:{shape}:{seed}")
    names = [f"category_{i:02d}" for i in range(categories)]
    if shape in ("steps", "imprecise"):
        return _steps(names, rng, imprecise=shape == "imprecise")
    spread, cell_noise, jitter = (0.8, 0.8, 1.5) if shape == "noisy" else (1.0, 0.4, 0.5)
    skill: dict[Cell, float] = {}
    for name in names:
        effect = rng.gauss(0, spread)
        step = rng.uniform(1.5, 3.5) if shape == "interaction" else STEP
        order = list(LEVELS)
        if shape == "nonmonotone" and rng.random() < 1 / 3:
            order = [1, 5, 4, 3, 2, 6]  # this category's level l is as hard as level order[l-1]
        for cell in family_cells([name]):
            rank = order[cell.key[1] - 1]
            logit = OFFSET + effect + step * (3.5 - rank) + rng.gauss(0, cell_noise)
            skill[cell] = _sigmoid(logit)
    return World(skill, jitter)


def _held_out(shape: str, categories: int, seed: int) -> World:
    rng = random.Random(f"held-out:{shape}:{seed}")
    skill: dict[Cell, float] = {}
    mixture: dict[Cell, tuple[tuple[float, float], ...]] = {}
    for i in range(categories):
        name, effect = f"category_{i:02d}", rng.gauss(0, 1)
        order = list(LEVELS)
        rng.shuffle(order)  # `permuted`: this category's level l is as hard as level order[l-1]
        for level in LEVELS:
            cell = Cell.family(name, level)
            logit = {
                "reversed": OFFSET + effect + STEP * (level - 3.5),
                "category_only": 3.0 * effect,
                "permuted": OFFSET + effect + STEP * (3.5 - order[level - 1]),
                "plateau": (3.0 if level <= 3 else -3.0) + 2.0 * effect,
                "gentle": -0.5 + 0.8 * (3.5 - level) + 1.5 * effect,
                "hard": OFFSET - 3.5 + effect + STEP * (3.5 - level),
                "steep": 5.0 * (3.5 - level) + 2.0 * effect,
                "easy": OFFSET + 5.5 + effect + STEP * (3.5 - level),
            }.get(shape, OFFSET + effect + STEP * (3.5 - level))
            logit += rng.gauss(0, 0.4)
            if shape == "named":
                cell = Cell.taxonomy(name, NAMED_LEVELS[level - 1])
            skill[cell] = _sigmoid(logit)
            if shape in ("broken", "trivial"):  # a third of the tasks fail, or pass, every time
                fixed = 0.0 if shape == "broken" else 1.0
                live = [(2 / 3 * w, _sigmoid(logit + d)) for w, d in ((0.25, -0.7), (0.5, 0.0))]
                mixture[cell] = ((1 / 3, fixed), *live, (2 / 3 * 0.25, _sigmoid(logit + 0.7)))
    return World(skill, 0.5, mixture)
