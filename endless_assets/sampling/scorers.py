"""How the draw scores a cell: what the posterior says of a new task of each cell (its view) and
Thompson samples of every cell's score, from the pooled posterior (pooled.py, the default) or
each cell's own (posterior.py, the sampler before pooling, kept to measure against)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from endless_assets.sampling.cells import Cell
from endless_assets.sampling.history import History
from endless_assets.sampling.pooled import Pooled
from endless_assets.sampling.posterior import Posterior, posterior
from endless_assets.sampling.worth import kept_outcomes, pooled_rates, signals

MODELS = ("pooled", "per_cell")


@dataclass(frozen=True)
class CellView:
    """What the draw knew of one cell: its evidence and its posterior's predictions for a new
    task (`score`: survival x signal per token, relative to the average task's cost;
    `uncertainty`: the posterior sd of its expected signal)."""

    evidence: int
    learnable_seen: int
    mean_pass_rate: float
    learnable_prob: float
    kept_prob: float
    survival: float
    signal: float
    tokens: float | None
    score: float
    uncertainty: float


class Scorer(Protocol):
    views: dict[Cell, CellView]
    # The shares of dead and trivial tasks the model found (None: it has no such notion).
    shares: tuple[float, float] | None

    def sample(
        self, rng: random.Random, eligible: Sequence[Cell]
    ) -> dict[Cell, tuple[float, float]]:
        """One Thompson draw: per eligible cell, (its sampled score, its sampled pass rate)."""
        ...


@dataclass(frozen=True)
class Aim:
    """What the draw aims at: k attempts a task, the target pass rate, the keep band."""

    k: int
    target: float
    band: tuple[float, float]
    closeness: float = 0.5  # the per-cell sampler's utility (posterior.py)


@dataclass(frozen=True)
class Costs:
    """Per cell, shrunk towards its level's (`worth.pooled_rates`): the share of its tasks that
    reach the solver scored, the tokens making and scoring one takes (None: none recorded), and
    the cost of a draw `making + P(kept) x training`, in units of the average task's."""

    survival: dict[Cell, float]
    tokens: dict[Cell, float | None]
    making: np.ndarray
    training: np.ndarray

    @classmethod
    def of(cls, cells: Sequence[Cell], history: History) -> Costs:
        levels = {c: c.key[1] for c in cells}
        counts = {c: history.get(c) for c in cells}
        generated = {c: float(h.generated) for c, h in counts.items()}
        scored = {c: float(min(h.scored, h.generated)) for c, h in counts.items()}
        survival = {
            c: r if r is not None else 1.0
            for c, r in pooled_rates(scored, generated, levels).items()
        }
        spent = {c: float(h.tokens + h.rollout_tokens) for c, h in counts.items()}
        rollouts = {c: float(h.rollout_tokens) for c, h in counts.items()}
        if not sum(spent.values()):  # no tokens recorded: a task is one unit to make and train
            ones = np.ones(len(cells))
            return cls(survival, dict.fromkeys(cells), ones, ones)
        tokens = pooled_rates(spent, generated, levels)
        per_scored = pooled_rates(rollouts, scored, levels)
        unit = sum(spent.values()) / max(sum(generated.values()), 1.0)
        making = np.array([tokens[c] / unit for c in cells])
        training = np.array([per_scored[c] / unit for c in cells])
        return cls(survival, tokens, making, training)

    def factor(self, cells: Sequence[Cell], kept: np.ndarray) -> np.ndarray:
        """Per cell, survival / cost, with `kept` the probability a new task of it is kept."""
        reach = np.array([self.survival[c] for c in cells])
        return reach / (self.making + kept * self.training)


class PooledScorer:
    """Scores from the pooled posterior: survival x expected signal / expected cost."""

    def __init__(
        self, cells: Sequence[Cell], history: History, aim: Aim, ranks: Sequence | None = None
    ) -> None:
        self.cells = sorted(set(cells))
        self.aim = aim
        outcomes = {c: history.get(c).outcomes for c in self.cells}
        self.model = Pooled(self.cells, outcomes, ranks=ranks)
        self.shares = self.model.mix
        self.costs = Costs.of(self.cells, history)
        k = aim.k
        self._signals = signals(k, aim.target, aim.band)
        self._rates = np.arange(k + 1) / k
        self._kept, learnable = kept_outcomes(k, aim.band)
        pmf = self.model.predictive(k)
        sd = self.model.spread(k, self._signals)
        expected = pmf @ self._signals
        kept = pmf @ self._kept
        score = expected * self.costs.factor(self.cells, kept)
        self.views = {
            cell: CellView(
                evidence=history.get(cell).scored,
                learnable_seen=history.get(cell).learnable,
                mean_pass_rate=float(pmf[i] @ self._rates),
                learnable_prob=float(pmf[i] @ learnable),
                kept_prob=float(kept[i]),
                survival=float(self.costs.survival[cell]),
                signal=float(expected[i]),
                tokens=self.costs.tokens[cell],
                score=float(score[i]),
                uncertainty=float(sd[i]),
            )
            for i, cell in enumerate(self.cells)
        }

    def sample(
        self, rng: random.Random, eligible: Sequence[Cell]
    ) -> dict[Cell, tuple[float, float]]:
        pmf = self.model.sample(rng, self.aim.k)
        scores = (pmf @ self._signals) * self.costs.factor(self.cells, pmf @ self._kept)
        rates = pmf @ self._rates
        allowed = set(eligible)
        return {
            cell: (float(scores[i]), float(rates[i]))
            for i, cell in enumerate(self.cells)
            if cell in allowed
        }


class PerCellScorer:
    """Scores from each cell's own posterior, as the sampler scored before pooling: survival x
    expected utility (posterior.py), each cell sampled on its own."""

    def __init__(self, cells: Sequence[Cell], history: History, aim: Aim) -> None:
        self.posts: dict[Cell, Posterior] = {}
        self.shares = None
        tokens = Costs.of(sorted(set(cells)), history).tokens
        k = aim.k
        kept, learnable = kept_outcomes(k, aim.band)
        rates = np.arange(k + 1) / k
        self.views = {}
        for cell in sorted(set(cells)):
            h = history.get(cell)
            post = posterior(
                h.outcomes,
                generated=h.generated,
                scored=h.scored,
                k=k,
                target=aim.target,
                closeness=aim.closeness,
            )
            self.posts[cell] = post
            pmf = np.array(post.outcome_pmf())
            self.views[cell] = CellView(
                evidence=h.scored,
                learnable_seen=h.learnable,
                mean_pass_rate=float(pmf @ rates),
                learnable_prob=float(pmf @ learnable),
                kept_prob=float(pmf @ kept),
                survival=post.survival,
                signal=float(pmf @ signals(k, aim.target, aim.band)),
                tokens=tokens[cell],
                score=post.score,
                uncertainty=post.utility_sd,
            )

    def sample(
        self, rng: random.Random, eligible: Sequence[Cell]
    ) -> dict[Cell, tuple[float, float]]:
        return {cell: self.posts[cell].sample(rng) for cell in eligible}


def scorer(
    model: str, cells: Sequence[Cell], history: History, aim: Aim, ranks: Sequence | None = None
) -> Scorer:
    """The scorer of `model`; `ranks` orders the cells' levels, simplest first (pooled only)."""
    if model == "pooled":
        return PooledScorer(cells, history, aim, ranks)
    if model == "per_cell":
        return PerCellScorer(cells, history, aim)
    raise ValueError(f"the sampler's model is one of {', '.join(MODELS)}, got {model!r}")
