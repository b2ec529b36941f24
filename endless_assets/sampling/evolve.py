"""Variants of past tasks at the solver's edge: a harder one of a task solved in every attempt and
an easier one of a sound task never solved, as data a generator can honour."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from endless_assets.sampling.cells import LEVELS, Cell
from endless_assets.sampling.history import DAY, task_cells
from endless_assets.sampling.policy import Draw, Slot

BUDGET = 0.1  # the default share of a batch given to variants


@dataclass(frozen=True)
class Proposal:
    """One variant to generate: the target `cell`, from `parent_task_id`, and why."""

    parent_task_id: str
    parent_batch: str
    parent_cell: Cell
    cell: Cell
    direction: str
    seed: int
    why: str

    def row(self) -> dict:
        return {
            "parent_task_id": self.parent_task_id,
            "parent_batch": self.parent_batch,
            "parent_cell": self.parent_cell.id,
            **self.cell.columns(),
            "direction": self.direction,
            "seed": self.seed,
            "why": self.why,
        }


def child_seed(parent_seed: int, cell: Cell) -> int:
    """The variant's seed: the same parent and target give the same seed (its lineage), in the
    range of `models.task_seed`."""
    digest = hashlib.sha256(f"evolve:{parent_seed}:{cell.id}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def candidates(
    descriptions: pl.DataFrame, filtered: pl.DataFrame, *, before: str, window: int = 14
) -> pl.DataFrame:
    """The tasks that reached the solver in the `window` daily batches before `before`, with
    their seed, cell columns, solver_model, successes, scored_attempts and kept."""
    past = filtered.filter(
        (pl.col("batch") < before) & pl.col("batch").str.contains(DAY.pattern)
    ).select("task_id", "batch", "solver_model", "successes", "scored_attempts", "kept")
    batches = sorted(past["batch"].unique().to_list())[-window:]
    seeds = descriptions.select("task_id", "seed")
    return (
        past.filter(pl.col("batch").is_in(batches))
        .join(task_cells(descriptions).drop("batch", "status"), on="task_id", how="inner")
        .join(seeds, on="task_id", how="inner")
        .sort("batch", "task_id")
    )


def _move(cell: Cell, step: int, complexities: Sequence[str]) -> Cell | None:
    """The cell `step` levels up or down, None past either end (a variant the clamp to the
    levels would leave where its parent is is not proposed)."""
    name, grade = cell.key
    if cell.kind == "family":
        level = min(max(grade + step, LEVELS[0]), LEVELS[-1])
        return None if level == grade else Cell.family(name, level)
    if grade not in complexities:
        return None
    index = min(max(complexities.index(grade) + step, 0), len(complexities) - 1)
    return None if complexities[index] == grade else Cell.taxonomy(name, complexities[index])


def propose(
    candidates: pl.DataFrame,
    *,
    batch: str,
    n: int,
    budget: float = BUDGET,
    complexities: Sequence[str] = (),
    scores: Mapping[Cell, float] | None = None,
    exclude: Collection[str] = (),
) -> list[Proposal]:
    """At most `budget` x `n` variants from `candidates`: a harder one of a task solved in every
    scored attempt (the next level, or complexity in `complexities`), an easier one of a task
    solved in none; one per parent, none of `exclude`. The best `scores` of the targets first,
    then the most recent parents, then an order seeded by `batch`."""
    if not 0 <= budget <= 1:
        raise ValueError(f"budget is a share of the batch, within 0 and 1: {budget}")
    found: list[tuple[float, str, str, Proposal]] = []
    seen: set[str] = set(exclude)
    for row in candidates.sort("batch", "task_id").to_dicts():
        s, attempts = row["successes"], row["scored_attempts"]
        if row["task_id"] in seen or attempts < 1 or 0 < s < attempts:
            continue
        parent = Cell.from_columns(row)
        harder = s == attempts
        target = _move(parent, 1 if harder else -1, complexities)
        if target is None:
            continue
        seen.add(row["task_id"])
        grade = "level" if parent.kind == "family" else "complexity"
        direction = "harder" if harder else "easier"
        why = (
            f"solved in {s} of {attempts} attempts at {grade} {parent.key[1]}: "
            f"{direction} at {target.key[1]}"
        )
        seed = child_seed(row["seed"], target)
        proposal = Proposal(row["task_id"], row["batch"], parent, target, direction, seed, why)
        tie = hashlib.sha256(f"{batch}:{row['task_id']}".encode()).hexdigest()
        found.append(((scores or {}).get(target, 0.0), row["batch"], tie, proposal))
    found.sort(key=lambda f: f[2])  # stable sorts: the last one decides first
    found.sort(key=lambda f: f[1], reverse=True)
    found.sort(key=lambda f: f[0], reverse=True)
    return [proposal for *_, proposal in found[: int(budget * n)]]


def combine(draw: Draw, proposals: Sequence[Proposal]) -> Draw:
    """The draw with the proposals appended as `evolve` slots after its own indices (draw
    n - len(proposals) tasks, then combine)."""
    start = len(draw.slots)
    extra = tuple(
        Slot(start + i, p.cell, "evolve", parent_task_id=p.parent_task_id, seed=p.seed, why=p.why)
        for i, p in enumerate(proposals)
    )
    return dataclasses.replace(draw, slots=draw.slots + extra)
