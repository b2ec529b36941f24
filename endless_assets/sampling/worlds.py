"""Worlds of hidden skill with structure, for the simulation: a cell's logit pass rate is a level
effect plus a category effect plus noise, in several shapes, so a sampler is not tuned to one.

- `additive`: each level 2.5 logits harder than the one below, categories spread by 1 logit, a
  little noise per cell (0.4) and per task (0.5);
- `nonmonotone`: the same, but in a third of the categories the middle levels run backwards
  (their level 5 is their level 2's difficulty, and so on);
- `interaction`: every category its own offset and its own step per level (1.5 to 3.5 logits);
- `noisy`: a noisier solver: the cell's tasks spread by 1.5 logits (most of a cell's tasks pass
  every attempt or none), the cells by 0.8;
- `steps`: the pipeline test's solver: each category has a frontier level (2 to 5); below it
  every attempt passes, at it and the level above half of them, higher none (no noise);
- `imprecise`: `steps` with a generator that misses the level it is asked for: a task asked at
  level l is of level l - 1, l or l + 1 (a quarter, a half, a quarter; within 1-6);
- `unstructured`: `simulation.hidden_skill_world`, every cell on its own (half out of reach, 30%
  mastered), nothing shared to learn from.
"""

from __future__ import annotations

import math
import random

from endless_assets.sampling.cells import LEVELS, Cell, family_cells
from endless_assets.sampling.simulation import World, hidden_skill_world

SHAPES = ("additive", "nonmonotone", "interaction", "noisy", "steps", "imprecise", "unstructured")
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
    if shape not in SHAPES:
        raise ValueError(f"a world's shape is one of {', '.join(SHAPES)}, got {shape!r}")
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
