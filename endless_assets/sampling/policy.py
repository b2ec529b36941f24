"""The frontier sampler: which cell each task of a batch is drawn from, steered by the solver's
history towards tasks it solves in some attempts but not all, above an exploration floor."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from endless_assets.sampling.cells import CELL_COLUMNS, Cell, schema
from endless_assets.sampling.history import History
from endless_assets.sampling.posterior import Posterior, posterior

MODES = ("cold_start", "degraded", "targeting")
SOURCES = ("uniform", "floor", "exploit", "evolve")
EXPLORATION = 0.2  # the default floor, as a share of the batch spread evenly over the cells
CAP = 0.1  # the most of the exploit draws one cell may take (diversity within a batch)
CLOSENESS = 0.5  # a learnable outcome at either end counts half of one at the target
MIN_EVIDENCE = 30  # scored tasks with none learnable before the sampler gives up targeting

DRAW_COLUMNS: dict[str, tuple[pl.DataType, str]] = {
    "batch": (pl.Utf8(), "the batch drawn for (its history is the batches strictly before)"),
    "index": (pl.Int64(), "the task's position in its batch, from 0"),
    **CELL_COLUMNS,
    "source": (pl.Utf8(), "uniform (cold start or degraded), floor, exploit or evolve"),
    "mode": (pl.Utf8(), "the draw's mode: cold_start, degraded or targeting"),
    "solver": (pl.Utf8(), "the solver whose history steered the draw ('' at a cold start)"),
    "k": (pl.Int64(), "attempts per task the scores assume (null at a cold start)"),
    "target_pass_rate": (pl.Float64(), "the pass rate a drawn task should land near"),
    "evidence": (pl.Int64(), "the cell's scored tasks in the history window"),
    "learnable_seen": (pl.Int64(), "of which learnable (0 < successes < attempts)"),
    "mean_pass_rate": (pl.Float64(), "posterior mean of the cell's mean per-task pass rate"),
    "learnable_prob": (pl.Float64(), "posterior probability a new task of the cell is learnable"),
    "survival": (pl.Float64(), "posterior mean share of the cell's tasks that reach the solver"),
    "score": (pl.Float64(), "posterior mean score: survival x expected utility of a new task"),
    "sample": (pl.Float64(), "the Thompson-sampled score that won the slot (exploit only)"),
    "sampled_pass_rate": (pl.Float64(), "the sampled mean pass rate behind it (exploit only)"),
    "history_batches": (pl.Int64(), "batches in the history window"),
    "history_last": (pl.Utf8(), "the window's last batch ('' when empty)"),
    "parent_task_id": (pl.Utf8(), "the task an evolve slot is a variant of ('' otherwise)"),
    "seed": (pl.Int64(), "an evolve slot's child seed (null: the batch's own seed)"),
    "why": (pl.Utf8(), "an evolve slot's reason ('' otherwise)"),
}


def batch_rng(batch: str, seed: int = 0) -> random.Random:
    """The draw's random generator for `batch` (and the seed setting): the same every time."""
    return random.Random(f"frontier:{batch}:{seed}")


@dataclass(frozen=True)
class CellView:
    """What the draw knew of one cell: its evidence and its posterior's summaries."""

    evidence: int
    learnable_seen: int
    mean_pass_rate: float
    learnable_prob: float
    survival: float
    score: float


@dataclass(frozen=True)
class Slot:
    """One drawn task: its index, cell, and why it was drawn there."""

    index: int
    cell: Cell
    source: str
    sample: float | None = None
    sampled_pass_rate: float | None = None
    parent_task_id: str = ""
    seed: int | None = None
    why: str = ""


@dataclass(frozen=True)
class Draw:
    """A batch's draw: a slot per task index, the cells' views, and the mode with its reason
    (one line, set when the draw fell back to uniform after evidence; log it once)."""

    batch: str
    mode: str
    slots: tuple[Slot, ...]
    views: dict[Cell, CellView] = field(default_factory=dict)
    reason: str = ""
    solver: str = ""
    k: int | None = None
    target_pass_rate: float = 0.5
    floor: float = 0.0
    history_batches: tuple[str, ...] = ()

    def counts(self) -> Counter[Cell]:
        return Counter(slot.cell for slot in self.slots)

    def rows(self) -> list[dict[str, Any]]:
        """One row per slot, by index, with the columns of `DRAW_COLUMNS`."""
        rows = []
        for slot in sorted(self.slots, key=lambda s: s.index):
            view = self.views.get(slot.cell)
            rows.append(
                {
                    "batch": self.batch,
                    "index": slot.index,
                    **slot.cell.columns(),
                    "source": slot.source,
                    "mode": self.mode,
                    "solver": self.solver,
                    "k": self.k,
                    "target_pass_rate": self.target_pass_rate,
                    "evidence": view.evidence if view else 0,
                    "learnable_seen": view.learnable_seen if view else 0,
                    "mean_pass_rate": view.mean_pass_rate if view else None,
                    "learnable_prob": view.learnable_prob if view else None,
                    "survival": view.survival if view else None,
                    "score": view.score if view else None,
                    "sample": slot.sample,
                    "sampled_pass_rate": slot.sampled_pass_rate,
                    "history_batches": len(self.history_batches),
                    "history_last": self.history_batches[-1] if self.history_batches else "",
                    "parent_task_id": slot.parent_task_id,
                    "seed": slot.seed,
                    "why": slot.why,
                }
            )
        return rows

    def frame(self) -> pl.DataFrame:
        """The rows of the `draws` table for this batch (`DRAW_COLUMNS`)."""
        return pl.DataFrame(self.rows(), schema=schema(DRAW_COLUMNS))

    def summary(self) -> dict[str, Any]:
        """A compact account for a materialization's metadata."""
        sources = Counter(slot.source for slot in self.slots)
        counts = self.counts()
        known = [self.views[s.cell].learnable_prob for s in self.slots if s.cell in self.views]
        top = ", ".join(
            f"{cell.id} x{count}"
            + (f" (score {self.views[cell].score:.2f})" if cell in self.views else "")
            for cell, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        )
        return {
            "mode": self.mode,
            "reason": self.reason,
            "solver": self.solver,
            "draws": len(self.slots),
            "cells_drawn": len(counts),
            "floor": round(self.floor, 6),
            **{f"{source}_draws": sources.get(source, 0) for source in SOURCES},
            "k": self.k,
            "target_pass_rate": self.target_pass_rate,
            "history_batches": len(self.history_batches),
            "expected_learnable": round(sum(known) / len(known), 4) if known else None,
            "top_cells": top,
        }


def history_k(history: History, cells: Iterable[Cell]) -> int | None:
    """The attempts per task most of the cells' scored tasks had (the larger on a tie)."""
    attempts: Counter[int] = Counter()
    for (_, n), tasks in history.outcomes(cells).items():
        attempts[n] += tasks
    return max(attempts, key=lambda n: (attempts[n], n)) if attempts else None


def degrade_reason(history: History, cells: list[Cell], k: int, min_evidence: int) -> str:
    """Why targeting is hopeless ('' when it is not): no task can or did land strictly between
    0 and 1 after enough evidence, as with a solver that always passes or never does."""
    scored = history.scored(cells)
    count = len(history.batches)
    where = f"by {history.solver or 'the solver'} in the {count} batch{'es' * (count != 1)} "
    where += f"before {history.before}"
    if k == 1:
        return f"degraded to the uniform draw: with 1 attempt per task none is learnable ({where})"
    if scored < min_evidence or any(history.get(c).learnable for c in cells):
        return ""
    passed = sum(history.get(c).all_passed for c in cells)
    failed = sum(history.get(c).all_failed for c in cells)
    return (
        f"degraded to the uniform draw: none of the {scored} tasks scored {where} landed "
        f"strictly between 0 and 1 ({passed} solved in every attempt, {failed} in none)"
    )


def _ties(cells: list[Cell], rng: random.Random) -> dict[Cell, float]:
    return {cell: rng.random() for cell in cells}


def _spread(cells: list[Cell], n: int, history: History, rng: random.Random) -> list[Cell]:
    """`n` draws spread evenly; the remainder goes to the cells the window drew least."""
    base, extra = divmod(n, len(cells))
    ties = _ties(cells, rng)
    least = sorted(cells, key=lambda c: (history.get(c).generated, ties[c]))
    return [cell for cell in cells for _ in range(base)] + least[:extra]


def _view(cell: Cell, post: Posterior, history: History) -> CellView:
    h = history.get(cell)
    return CellView(
        h.scored, h.learnable, post.mean_pass_rate, post.learnable, post.survival, post.score
    )


def draw(
    cells: Iterable[Cell],
    history: History,
    n: int,
    *,
    target_pass_rate: float = 0.5,
    floor: float | None = None,
    rng: random.Random,
    k: int | None = None,
    closeness: float = CLOSENESS,
    cap: float = CAP,
    min_evidence: int = MIN_EVIDENCE,
) -> Draw:
    """Draw `n` tasks over `cells` for the batch `history.before`.

    Every cell gets at least `floor` of the draws (None: `EXPLORATION` / cells; a cell gets its
    whole share within the batch when it is at least one draw, else over consecutive batches,
    the cells the window drew least first). The rest go one at a time by Thompson sampling: each
    cell's posterior (`posterior.py`) is sampled and the best score wins, no cell taking more
    than `cap` of them. With no scored history (cold start), with 1 attempt per task, or when
    `min_evidence` scored tasks had none learnable, the draw is uniform and `reason` says why.
    `k` defaults to the attempts most scored tasks had; `rng` should be `batch_rng(batch)`."""
    cells = sorted(set(cells))
    if not cells:
        raise ValueError("draw needs at least one cell")
    if n < 0:
        raise ValueError(f"n must be 0 or more, got {n}")
    if not 0 < target_pass_rate < 1:
        raise ValueError(f"target_pass_rate must be strictly between 0 and 1: {target_pass_rate}")
    floor = EXPLORATION / len(cells) if floor is None else floor
    if not 0 <= floor <= 1 / len(cells):
        raise ValueError(f"floor must be within 0 and 1/cells = {1 / len(cells):.4f}: {floor}")
    if not 0 < cap <= 1:
        raise ValueError(f"cap must be within (0, 1], got {cap}")
    k = k or history_k(history, cells)
    common = {
        "batch": history.before,
        "solver": history.solver,
        "target_pass_rate": target_pass_rate,
        "floor": floor,
        "history_batches": history.batches,
    }
    if k is None or history.scored(cells) == 0:
        picks = _spread(cells, n, history, rng)
        return Draw(mode="cold_start", slots=_assign(picks, "uniform", rng), **common)
    views: dict[Cell, CellView] = {}
    posts: dict[Cell, Posterior] = {}
    for cell in cells:
        h = history.get(cell)
        posts[cell] = posterior(
            h.outcomes,
            generated=h.generated,
            scored=h.scored,
            k=k,
            target=target_pass_rate,
            closeness=closeness,
        )
        views[cell] = _view(cell, posts[cell], history)
    reason = degrade_reason(history, cells, k, min_evidence)
    if reason:
        slots = _assign(_spread(cells, n, history, rng), "uniform", rng)
        return Draw(mode="degraded", slots=slots, views=views, reason=reason, k=k, **common)
    floor_total = min(n, math.ceil(floor * len(cells) * n - 1e-9))
    floor_picks = _spread(cells, floor_total, history, rng)
    exploit = n - floor_total
    limit = max(math.ceil(cap * exploit), math.ceil(exploit / len(cells)))
    taken: Counter[Cell] = Counter()
    won: list[tuple[Cell, float, float]] = []
    for _ in range(exploit):
        best: tuple[float, float, Cell] | None = None
        for cell in cells:
            if taken[cell] >= limit:
                continue
            score, rate = posts[cell].sample(rng)
            if best is None or score > best[0]:
                best = (score, rate, cell)
        assert best is not None  # limit x cells >= exploit
        taken[best[2]] += 1
        won.append((best[2], best[0], best[1]))
    picks = [(cell, "floor", None, None) for cell in floor_picks]
    picks += [(cell, "exploit", score, rate) for cell, score, rate in won]
    order = sorted(range(len(picks)), key=lambda _: rng.random())
    slots = tuple(
        Slot(index, picks[i][0], picks[i][1], picks[i][2], picks[i][3])
        for index, i in enumerate(order)
    )
    return Draw(mode="targeting", slots=slots, views=views, k=k, **common)


def _assign(picks: list[Cell], source: str, rng: random.Random) -> tuple[Slot, ...]:
    """The picks in a seeded order, so every part of a batch mixes the cells."""
    order = sorted(range(len(picks)), key=lambda _: rng.random())
    return tuple(Slot(index, picks[i], source) for index, i in enumerate(order))
