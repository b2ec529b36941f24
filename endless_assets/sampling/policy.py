"""The frontier sampler: which cell each task of a batch is drawn from, steered by the solver's
history towards the tasks that teach most per token (solved in some attempts, not all, near the
target pass rate), above an exploration floor that goes to the cells known least."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from endless_assets.sampling.cells import Cell
from endless_assets.sampling.history import History
from endless_assets.sampling.scorers import Aim, CellView, scorer
from endless_assets.store.schemas import polars_schema

MODES = ("cold_start", "degraded", "targeting")
SOURCES = ("uniform", "floor", "exploit", "explore", "evolve")
EXPLORATION = 0.2  # the default floor, as a share of the batch spread evenly over the cells
CAP = 0.1  # the most of the Thompson draws one cell may take (diversity within a batch)
CLOSENESS = 0.5  # the per-cell model: a learnable outcome at either end counts half
MIN_EVIDENCE = 30  # scored tasks with none learnable before the sampler gives up targeting
# A Thompson draw whose cell's expected score is below this share of the best cell's won on its
# uncertainty, not its expectation: it is recorded as `explore`.
EXPLORE_BELOW = 0.5
# The floor's weight of a cell the posterior holds hopeless, next to its hope (score +
# uncertainty, about 1 at best), among cells drawn as often and as lately.
HOPE_FLOOR = 0.1
# What a slot's row says of its cell's view (None: the draw had none).
VIEWED = ("mean_pass_rate", "learnable_prob", "kept_prob", "survival", "signal", "tokens")
VIEWED = (*VIEWED, "score", "uncertainty")


def batch_rng(batch: str, seed: int = 0) -> random.Random:
    """The draw's random generator for `batch` (and the seed setting): the same every time."""
    return random.Random(f"frontier:{batch}:{seed}")


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
    model: str = "pooled"
    shares: tuple[float, float] | None = None  # the model's dead and trivial task shares

    def counts(self) -> Counter[Cell]:
        return Counter(slot.cell for slot in self.slots)

    def rows(self) -> list[dict[str, Any]]:
        """One row per slot, by index: the `task_draws` table's columns."""
        rows = []
        for slot in sorted(self.slots, key=lambda s: s.index):
            view = self.views.get(slot.cell)
            seen = {name: getattr(view, name) if view else None for name in VIEWED}
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
                    **seen,
                    "model": self.model,
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
        """The rows of the `task_draws` table for this batch."""
        return pl.DataFrame(self.rows(), schema=polars_schema("task_draws"))

    def summary(self) -> dict[str, Any]:
        """A compact account for a materialization's metadata."""
        sources = Counter(slot.source for slot in self.slots)
        counts = self.counts()
        expected = self.expected()
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
            "model": self.model,
            "dead_share": round(self.shares[0], 4) if self.shares else None,
            "trivial_share": round(self.shares[1], 4) if self.shares else None,
            **{f"expected_{name}": value for name, value in expected.items()},
            "top_cells": top,
        }

    def expected(self) -> dict[str, float | None]:
        """What the draw expects of its batch (None at a cold start): `learnable_share` of its
        kept tasks (as the `learnable` view measures it after), `learnable` of its scored
        tasks, and the mean `signal` and `pass_rate` of a scored task."""
        views = [self.views[s.cell] for s in self.slots if s.cell in self.views]
        if not views:
            return dict.fromkeys(("learnable_share", "learnable", "signal", "pass_rate"))
        reach = sum(v.survival for v in views)
        kept = sum(v.survival * v.kept_prob for v in views)
        learnable = sum(v.survival * v.learnable_prob for v in views)

        def mean(values: Iterable[float]) -> float:
            return round(sum(values) / reach, 4)

        return {
            "learnable_share": round(learnable / kept, 4) if kept > 0 else None,
            "learnable": mean([learnable]),
            "signal": mean(v.survival * v.signal for v in views),
            "pass_rate": mean(v.survival * v.mean_pass_rate for v in views),
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


def _spread(
    cells: list[Cell],
    n: int,
    history: History,
    rng: random.Random,
    views: dict[Cell, CellView] | None = None,
) -> list[Cell]:
    """`n` draws spread evenly; the remainder goes to the cells the window drew least, of those
    the ones drawn longest ago (never first), so the floor goes round every cell; among equals in
    a seeded order that, given `views`, favours the cells that may prove worth most (expected
    score plus its uncertainty, `HOPE_FLOOR` added)."""
    base, extra = divmod(n, len(cells))
    views = views or {}

    def order(cell: Cell) -> tuple[int, str, float]:
        u = max(rng.random(), 1e-12)
        view = views.get(cell)
        hope = view.score + view.uncertainty if view else 0.0
        last = history.last_drawn.get(cell, "")
        # A draw by weight without replacement: the largest u^(1/weight) first.
        return (history.get(cell).generated, last, -math.log(u) / (HOPE_FLOOR + hope))

    keys = {cell: order(cell) for cell in cells}  # drawn in the cells' order: reproducible
    least = sorted(cells, key=keys.__getitem__)
    return [cell for cell in cells for _ in range(base)] + least[:extra]


def draw(
    cells: Iterable[Cell],
    history: History,
    n: int,
    *,
    target_pass_rate: float = 0.5,
    band: tuple[float, float] = (0.0, 1.0),
    floor: float | None = None,
    rng: random.Random,
    k: int | None = None,
    model: str = "pooled",
    ranks: Sequence | None = None,
    closeness: float = CLOSENESS,
    cap: float = CAP,
    min_evidence: int = MIN_EVIDENCE,
) -> Draw:
    """Draw `n` tasks over `cells` for the batch `history.before`.

    Every cell gets at least `floor` of the draws (None: `EXPLORATION` / cells; below one draw a
    batch, over consecutive batches, the least drawn and least known first). The rest go one at a
    time by Thompson sampling of the posterior (`model`: `pooled` or `per_cell`): the best sampled
    score (survival x training signal per token, scorers.py) wins, no cell taking more than `cap`.
    The signal peaks at `target_pass_rate`, 0 outside the keep `band`; `ranks` orders the levels,
    simplest first. A cold start, 1 attempt per task, or `min_evidence` scored tasks none
    learnable: a uniform draw, `reason` saying why. `k` defaults to the attempts most scored tasks
    had; `rng` should be `batch_rng(batch)`."""
    cells = sorted(set(cells))
    if not cells:
        raise ValueError("draw needs at least one cell")
    if n < 0:
        raise ValueError(f"n must be 0 or more, got {n}")
    if not 0 < target_pass_rate < 1:
        raise ValueError(f"target_pass_rate must be strictly between 0 and 1: {target_pass_rate}")
    if not 0 <= band[0] <= band[1] <= 1:
        raise ValueError(f"the keep band must be within 0 and 1, low first: {band}")
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
        "model": model,
    }
    if k is None or history.scored(cells) == 0:
        picks = _spread(cells, n, history, rng)
        return Draw(mode="cold_start", slots=_assign(picks, "uniform", rng), **common)
    reason = degrade_reason(history, cells, k, min_evidence)
    scores = scorer(model, cells, history, Aim(k, target_pass_rate, band, closeness), ranks)
    views = scores.views
    if reason:
        slots = _assign(_spread(cells, n, history, rng), "uniform", rng)
        known = {"views": views, "k": k, "shares": scores.shares}
        return Draw(mode="degraded", slots=slots, reason=reason, **known, **common)
    floor_total = min(n, math.ceil(floor * len(cells) * n - 1e-9))
    # The pooled model's floor goes to the cells it knows least; the per-cell one's, as before
    # pooling, in a seeded order.
    floor_picks = _spread(cells, floor_total, history, rng, views if model == "pooled" else None)
    thompson = n - floor_total
    limit = max(math.ceil(cap * thompson), math.ceil(thompson / len(cells)))
    best_score = max(view.score for view in views.values())
    taken: Counter[Cell] = Counter()
    picks: list[tuple[Cell, str, float | None, float | None]] = [
        (cell, "floor", None, None) for cell in floor_picks
    ]
    for _ in range(thompson):
        eligible = [cell for cell in cells if taken[cell] < limit]
        sampled = scores.sample(rng, eligible)
        cell = max(eligible, key=lambda c: sampled[c][0])  # the first of equals
        taken[cell] += 1
        source = "explore" if views[cell].score < EXPLORE_BELOW * best_score else "exploit"
        picks.append((cell, source, *sampled[cell]))
    order = sorted(range(len(picks)), key=lambda _: rng.random())
    slots = tuple(Slot(index, *picks[i]) for index, i in enumerate(order))
    return Draw(mode="targeting", slots=slots, views=views, k=k, shares=scores.shares, **common)


def _assign(picks: list[Cell], source: str, rng: random.Random) -> tuple[Slot, ...]:
    """The picks in a seeded order, so every part of a batch mixes the cells."""
    order = sorted(range(len(picks)), key=lambda _: rng.random())
    return tuple(Slot(index, picks[i], source) for index, i in enumerate(order))
