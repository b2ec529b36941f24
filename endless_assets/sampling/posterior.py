"""A cell's per-task pass rates as a Beta distribution over a grid of (mean, concentration),
updated exactly by each task's beta-binomial likelihood, and what it predicts for a new task."""

from __future__ import annotations

import bisect
import functools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

# A task's pass probability p ~ Beta(mean·c, (1−mean)·c), its attempts Binomial(n, p); a small
# concentration c makes the cell U-shaped. The posterior is a weight per grid point under a flat
# prior; means are evenly spaced in logit space from about 0.007 to 0.993.
MEANS: tuple[float, ...] = tuple(1 / (1 + math.exp(-(-5 + i * 0.5))) for i in range(21))
CONCENTRATIONS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
GRID: tuple[tuple[float, float], ...] = tuple((m, c) for m in MEANS for c in CONCENTRATIONS)
# Survival (a described task of the cell reaching the solver with a score), on a grid of its own.
SURVIVAL: tuple[float, ...] = tuple((i + 0.5) / 40 for i in range(40))


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@functools.cache
def log_likelihood(successes: int, attempts: int) -> tuple[float, ...]:
    """Per grid point, the log probability of one task's `successes` in `attempts`."""
    if not 0 <= successes <= attempts:
        raise ValueError(f"need 0 <= successes <= attempts, got {successes} of {attempts}")
    log_choose = (
        math.lgamma(attempts + 1)
        - math.lgamma(successes + 1)
        - math.lgamma(attempts - successes + 1)
    )
    out = []
    for mean, conc in GRID:
        a, b = mean * conc, (1 - mean) * conc
        fails = attempts - successes
        out.append(log_choose + _log_beta(a + successes, b + fails) - _log_beta(a, b))
    return tuple(out)


def utility(rate: float, target: float, closeness: float) -> float:
    """What one outcome of a new task is worth: 0 at either end (no learning signal), 1 at the
    target, falling linearly by at most `closeness` towards the ends."""
    if rate <= 0 or rate >= 1:
        return 0.0
    return 1 - closeness * abs(rate - target) / max(target, 1 - target)


@functools.cache
def predictive(k: int, target: float, closeness: float) -> tuple[tuple[float, float], ...]:
    """Per grid point, for a new task given `k` attempts: (the probability that it is learnable,
    0 < successes < k; its expected utility)."""
    out = []
    for index in range(len(GRID)):
        pmf = [math.exp(log_likelihood(s, k)[index]) for s in range(k + 1)]
        expected = sum(pmf[s] * utility(s / k, target, closeness) for s in range(k + 1))
        out.append((sum(pmf[1:k]), expected))
    return tuple(out)


def _normalise(logs: list[float]) -> tuple[float, ...]:
    top = max(logs)
    weights = [math.exp(x - top) for x in logs]
    total = sum(weights)
    return tuple(w / total for w in weights)


def _cumulative(weights: tuple[float, ...]) -> tuple[float, ...]:
    out, running = [], 0.0
    for w in weights:
        running += w
        out.append(running)
    return tuple(out)


def pick(rng: random.Random, cumulative: tuple[float, ...]) -> int:
    """An index drawn by its weight, from cumulative weights; only `rng.random()` is used, the
    one sequence Python keeps stable across versions for a seed."""
    index = bisect.bisect_right(cumulative, rng.random() * cumulative[-1])
    return min(index, len(cumulative) - 1)


@dataclass(frozen=True)
class Posterior:
    """A cell's posterior: weights over `GRID` and over `SURVIVAL`, and what they predict for a
    new task given `k` attempts."""

    weights: tuple[float, ...]
    survival_weights: tuple[float, ...]
    k: int
    target: float
    closeness: float

    @functools.cached_property
    def _cumulative(self) -> tuple[float, ...]:
        return _cumulative(self.weights)

    @functools.cached_property
    def _survival_cumulative(self) -> tuple[float, ...]:
        return _cumulative(self.survival_weights)

    def _expect(self, values: list[float]) -> float:
        return sum(w * v for w, v in zip(self.weights, values, strict=True))

    @property
    def mean_pass_rate(self) -> float:
        """The posterior mean of the cell's mean per-task pass rate."""
        return self._expect([mean for mean, _ in GRID])

    @property
    def learnable(self) -> float:
        """The posterior probability that a new task of the cell is learnable over k attempts."""
        return self._expect([p for p, _ in predictive(self.k, self.target, self.closeness)])

    @property
    def survival(self) -> float:
        return sum(w * s for w, s in zip(self.survival_weights, SURVIVAL, strict=True))

    @property
    def score(self) -> float:
        """The posterior mean score: survival times the expected utility of a new task."""
        utilities = [u for _, u in predictive(self.k, self.target, self.closeness)]
        return self.survival * self._expect(utilities)

    def outcome_pmf(self) -> list[float]:
        """The posterior predictive probability of 0..k successes of a new task in k attempts."""
        return [
            self._expect([math.exp(x) for x in log_likelihood(s, self.k)])
            for s in range(self.k + 1)
        ]

    @property
    def utility_sd(self) -> float:
        """The posterior standard deviation of a new task's expected utility."""
        utilities = [u for _, u in predictive(self.k, self.target, self.closeness)]
        centre = self._expect(utilities)
        return math.sqrt(max(self._expect([(u - centre) ** 2 for u in utilities]), 0.0))

    def sample(self, rng: random.Random) -> tuple[float, float]:
        """One Thompson sample: (its score, the sampled grid point's mean pass rate)."""
        index = pick(rng, self._cumulative)
        survival = SURVIVAL[pick(rng, self._survival_cumulative)]
        return survival * predictive(self.k, self.target, self.closeness)[index][1], GRID[index][0]


def posterior(
    outcomes: Mapping[tuple[int, int], int],
    *,
    generated: int,
    scored: int,
    k: int,
    target: float = 0.5,
    closeness: float = 0.5,
) -> Posterior:
    """A cell's posterior from its scored tasks (`outcomes`: (successes, scored attempts) ->
    tasks) and from how many of its `generated` tasks were `scored` (its survival)."""
    if k < 1:
        raise ValueError(f"k (attempts per task) must be at least 1, got {k}")
    logs = [0.0] * len(GRID)
    for (successes, attempts), tasks in sorted(outcomes.items()):
        if attempts < 1 or tasks < 1:
            continue
        row = log_likelihood(successes, attempts)
        logs = [x + tasks * y for x, y in zip(logs, row, strict=True)]
    failed = max(generated - scored, 0)
    survival_logs = [scored * math.log(s) + failed * math.log(1 - s) for s in SURVIVAL]
    return Posterior(_normalise(logs), _normalise(survival_logs), k, target, closeness)
