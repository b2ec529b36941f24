"""The pooled posterior: one additive logistic model of every cell's pass rate, fitted to the
history window, so one batch's evidence moves every cell it informs.

A task of cell (group g, level l) passes an attempt with probability sigmoid(mu + a_l + b_g + u_gl
+ e): a level effect, a group effect, the cell's residual and the task's own e ~ N(0, tau^2)
(large tau: a U-shaped cell). Any task may also be dead (every attempt fails) or trivial (every
attempt passes), in shares common to all cells, lest dead tasks pass for a wide tau. mu, a, b and
u have Gaussian priors; the posterior is a Laplace approximation at its mode (Newton) for each
tau and residual sd on a grid, fits weighted by their evidence, the shares estimated between
fits (EM, shrunk towards none). A new task's outcomes over k attempts are the binomial
integrated over the posterior and e (Gauss-Hermite), mixed with the shares.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from endless_assets.sampling.binomial import (
    SPREAD_W,
    SPREAD_Z,
    live_rows,
    mix_prior,
    mixed_terms,
    outcome_pmf,
    shares,
)
from endless_assets.sampling.cells import Cell

# Prior standard deviations on the logit scale: the intercept, a level's and a group's effect.
# Ranked levels are the one below plus a step (`STEP_SD`, either way), so a level no task reached
# yet lies between its neighbours.
MEAN_SD = 3.0
LEVEL_SD = 3.0
STEP_SD = 4.0
GROUP_SD = 1.5
# The grids the data weigh: tau (how a cell's tasks spread) and the sd of a cell's residual.
TASK_SPREADS = (0.3, 0.7, 1.2, 2.0, 3.0)
CELL_SDS = (0.5, 1.0, 2.0, 4.0)
# Where the dead and trivial shares' estimates start (few or many; the better explanation wins),
# and the rounds of refitting that settle each.
MIX_STARTS = ((0.05, 0.05), (0.3, 0.3))
MIX_ROUNDS = 8
MIX_TOLERANCE = 2e-3


@dataclass(frozen=True)
class _Fit:
    """The Laplace fit for one task spread: per cell, the posterior mean and variance of its
    logit, how its mean moves with a Thompson draw of the level effects (mu, a), and the variance
    the rest (b, u) leaves."""

    tau: float
    log_evidence: float
    mean: np.ndarray
    var: np.ndarray
    chol: np.ndarray  # of the posterior covariance of (mu, a)
    moves: np.ndarray  # (cells, 1 + levels)
    rest_var: np.ndarray


class Pooled:
    """The pooled posterior over `cells` from `outcomes` (per cell: (successes, scored attempts)
    -> tasks). `ranks` orders the levels, simplest first (None: integer levels in order, named
    ones unranked). The residuals u, each in one cell only, are solved for in closed form (a
    Schur complement): the linear algebra stays the size of mu, a and b."""

    def __init__(
        self,
        cells: Sequence[Cell],
        outcomes: Mapping[Cell, Mapping[tuple[int, int], int]],
        *,
        ranks: Sequence | None = None,
        spreads: Sequence[float] = TASK_SPREADS,
        cell_sds: Sequence[float] = CELL_SDS,
        group_sd: float = GROUP_SD,
    ) -> None:
        self.cells = sorted(set(cells))
        groups = sorted({c.key[0] for c in self.cells})
        grades = {c.key[1] for c in self.cells}
        ranked = ranks is not None or all(isinstance(g, int) for g in grades)
        levels = [g for g in ranks if g in grades] if ranks is not None else sorted(grades, key=str)
        if ranked and ranks is None:
            levels = sorted(grades)
        if set(levels) != grades:
            raise ValueError(f"ranks {list(ranks or ())} do not order the levels {sorted(grades)}")
        self.levels = 1 + len(levels)  # mu and a come first, then b
        self.design = np.zeros((len(self.cells), self.levels + len(groups)))
        self.design[:, 0] = 1.0
        for i, cell in enumerate(self.cells):
            rank = levels.index(cell.key[1])
            # Ranked: a level's effect is the sum of the steps up to it; else its own.
            self.design[i, 1 + (np.arange(rank + 1) if ranked else rank)] = 1.0
            self.design[i, self.levels + groups.index(cell.key[0])] = 1.0
        level_sd = [LEVEL_SD] + [STEP_SD if ranked else LEVEL_SD] * (len(levels) - 1)
        prior_sd = [MEAN_SD, *level_sd] + [group_sd] * len(groups)
        self._precision = 1.0 / np.array(prior_sd) ** 2
        self.observed = [i for i, c in enumerate(self.cells) if _useful(outcomes.get(c, {}))]
        rows = [
            (j, s, n, t)
            for j, i in enumerate(self.observed)
            for (s, n), t in sorted(outcomes[self.cells[i]].items())
            if n > 0 and t > 0
        ]
        self._rows = np.array(rows, dtype=float).reshape(-1, 4)
        self._x = self.design[self.observed]
        # The dead and trivial shares: none, then from each of `MIX_STARTS` refitted until they
        # settle; the best evidence (with the shares' prior) wins. Every refit starts from the
        # modes without the shares (else a mastered cell's logit sticks where nothing moves it).
        self.dead = self.trivial = 0.0
        live: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}
        self.fits, self.weights, best = self._fits(spreads, cell_sds, live)
        found = (self.fits, self.weights, (0.0, 0.0))
        for start in MIX_STARTS if len(self._rows) else ():
            self.dead, self.trivial = start
            for round_ in range(MIX_ROUNDS):
                fits, weights, evidence = self._fits(spreads, cell_sds, dict(live))
                mix = self._shares(fits, weights)
                moved = max(abs(mix[0] - self.dead), abs(mix[1] - self.trivial))
                if moved < MIX_TOLERANCE or round_ == MIX_ROUNDS - 1:
                    break
                self.dead, self.trivial = mix
            if evidence + mix_prior(self.dead, self.trivial) > best:
                best = evidence + mix_prior(self.dead, self.trivial)
                found = (fits, weights, (self.dead, self.trivial))
        self.fits, self.weights, (self.dead, self.trivial) = found

    def _fits(
        self, spreads: Sequence[float], cell_sds: Sequence[float], starts: dict
    ) -> tuple[list[_Fit], np.ndarray, float]:
        """A fit per task spread and residual sd, each from where it was (`starts`, updated) or
        the spread before it; their weights by evidence, and the log evidence of them all."""
        fits = []
        for cell_sd in cell_sds:
            start = (np.zeros(self.design.shape[1]), np.zeros(len(self.observed)))
            for tau in spreads:
                fit, start = self._fit(tau, 1.0 / cell_sd**2, starts.get((cell_sd, tau), start))
                starts[(cell_sd, tau)] = start
                fits.append(fit)
        evidence = np.array([f.log_evidence for f in fits])
        weights = np.exp(evidence - evidence.max())
        total = float(evidence.max() + math.log(weights.mean()))  # a uniform prior on the grid
        return fits, weights / weights.sum(), total

    def _shares(self, fits: list[_Fit], weights: np.ndarray) -> tuple[float, float]:
        """The dead and trivial shares that best explain the rows given `fits`' modes."""
        j, s, n, t = (self._rows[:, c] for c in range(4))
        lives = [
            (w, live_rows(fit.mean[self.observed][j.astype(int)], s, n, fit.tau)[0])
            for w, fit in zip(weights, fits, strict=True)
            if w >= 1e-6
        ]
        return shares(lives, s, n, t, (self.dead, self.trivial))

    # -- fitting ---------------------------------------------------------------------------
    def _cell_terms(self, eta: np.ndarray, tau: float) -> tuple[float, np.ndarray, np.ndarray]:
        """The log likelihood, and its first and second derivatives per observed cell."""
        j, s, n, t = (self._rows[:, c] for c in range(4))
        mixed, first, second = mixed_terms(eta[j.astype(int)], s, n, tau, *self.mix)
        loglik = float((t * mixed).sum())
        size = len(self.observed)
        grad = np.bincount(j.astype(int), weights=t * first, minlength=size)
        curv = np.bincount(j.astype(int), weights=t * second, minlength=size)
        return loglik, grad, np.minimum(curv, 0.0)  # concave exactly; quadrature may wobble

    def _penalty(self, shared: np.ndarray, resid: np.ndarray, cp: float) -> float:
        """Minus the log prior density of the effects and residuals (up to a constant)."""
        return 0.5 * float((self._precision * shared**2).sum() + cp * (resid**2).sum())

    def _schur(self, weight: np.ndarray, cp: float) -> np.ndarray:
        """The precision of (mu, a, b) with the residuals (prior precision `cp`) integrated out,
        at the likelihood's curvature `weight` (one per observed cell)."""
        shrink = weight * cp / (weight + cp)
        return (self._x.T * shrink) @ self._x + np.diag(self._precision)

    def _fit(
        self, tau: float, cp: float, start: tuple[np.ndarray, np.ndarray]
    ) -> tuple[_Fit, tuple[np.ndarray, np.ndarray]]:
        """The fit for task spread `tau` and residual precision `cp`, from `start`."""
        shared, resid = start[0].copy(), start[1].copy()
        terms = self._cell_terms(self._x @ shared + resid, tau)
        value = terms[0] - self._penalty(shared, resid, cp)
        for _ in range(100):
            _, grad, curv = terms
            weight = -curv
            g_shared = self._x.T @ grad - self._precision * shared
            g_resid = grad - cp * resid
            inv = 1.0 / (weight + cp)  # the residuals' block is diagonal
            rhs = g_shared - self._x.T @ (weight * inv * g_resid)
            step_shared = np.linalg.solve(self._schur(weight, cp), rhs)
            step_resid = inv * (g_resid - weight * (self._x @ step_shared))
            size = 1.0
            while True:  # halve the step until it climbs (the mixture may bend the objective)
                new_shared, new_resid = shared + size * step_shared, resid + size * step_resid
                terms = self._cell_terms(self._x @ new_shared + new_resid, tau)
                new = terms[0] - self._penalty(new_shared, new_resid, cp)
                if new >= value - 1e-12 or size < 1e-6:
                    break
                size /= 2
            moved = size * max(np.abs(step_shared).max(), np.abs(step_resid).max(initial=0.0))
            shared, resid, value = new_shared, new_resid, new
            if moved < 1e-7:
                break
        weight = -terms[2]
        schur = self._schur(weight, cp)
        cov = np.linalg.inv(schur)
        cov = (cov + cov.T) / 2
        _, logdet = np.linalg.slogdet(schur)
        logdet += float(np.log(weight + cp).sum())
        prior_logdet = float(np.log(self._precision).sum()) + len(self.observed) * math.log(cp)
        log_evidence = value - 0.5 * logdet + 0.5 * prior_logdet
        # Given (mu, a, b), a cell's u is normal with variance `left` and moves by `keep` of the
        # change in x.(mu, a, b) (an unseen cell's: its prior).
        cells = len(self.cells)
        keep, left, eta = np.ones(cells), np.full(cells, 1 / cp), np.zeros(cells)
        keep[self.observed] = cp / (weight + cp)
        left[self.observed] = 1.0 / (weight + cp)
        eta[self.observed] = resid
        x, a = self.design, self.levels
        q = ((x @ cov) * x).sum(axis=1)
        gain = np.linalg.solve(cov[:a, :a], cov[:a, a:]).T  # E[b | mu, a] moves by gain
        rest = cov[a:, a:] - gain @ cov[:a, a:]
        rest_q = ((x[:, a:] @ rest) * x[:, a:]).sum(axis=1)
        fit = _Fit(
            tau=tau,
            log_evidence=log_evidence,
            mean=x @ shared + eta,
            var=left + keep**2 * q,
            chol=np.linalg.cholesky(cov[:a, :a]),
            moves=keep[:, None] * (x[:, :a] + x[:, a:] @ gain),
            rest_var=left + keep**2 * rest_q,
        )
        return fit, (shared, resid)

    # -- what it predicts ------------------------------------------------------------------
    @functools.cached_property
    def marginal(self) -> tuple[np.ndarray, np.ndarray]:
        """Per cell, the posterior mean and standard deviation of its logit pass rate (the
        cell's, not a task's: without tau), over the fits by weight."""
        m = np.array([fit.mean for fit in self.fits])
        v = np.array([fit.var for fit in self.fits])
        mean = self.weights @ m
        var = self.weights @ (v + m**2) - mean**2
        return mean, np.sqrt(np.maximum(var, 0.0))

    def predictive(self, k: int) -> np.ndarray:
        """Per cell, the posterior predictive probability of 0..k successes of a new task in k
        attempts: shape (cells, k + 1)."""
        out = np.zeros((len(self.cells), k + 1))
        for fit, weight in zip(self.fits, self.weights, strict=True):
            out += weight * outcome_pmf(fit.mean, fit.var + fit.tau**2, k, *self.mix)
        return out

    def spread(self, k: int, values: np.ndarray) -> np.ndarray:
        """Per cell, the posterior sd of a new task's expected `values` (one per 0..k successes):
        how unsure the model is of the cell's worth, not of its logit."""
        first, second = np.zeros(len(self.cells)), np.zeros(len(self.cells))
        used = self.weights >= 1e-6
        for fit, weight in zip(self.fits, self.weights / self.weights[used].sum(), strict=True):
            if weight < 1e-6:
                continue
            for z, w in zip(SPREAD_Z, SPREAD_W, strict=True):
                mean = fit.mean + np.sqrt(fit.var) * z
                value = outcome_pmf(mean, np.full(len(mean), fit.tau**2), k, *self.mix) @ values
                first += weight * w * value
                second += weight * w * value**2
        return np.sqrt(np.maximum(second - first**2, 0.0))

    def sample(self, rng: random.Random, k: int) -> np.ndarray:
        """One Thompson draw of a fit (by weight) and its level effects (mu, a): per cell, the
        probability of 0..k successes of a new task, the group's effect and the residual
        averaged over (sampled, the luckiest of hundreds of cells would win on noise)."""
        fit = self.fits[_pick(rng, self.weights)]
        normal = NormalDist()
        z = np.array(
            [normal.inv_cdf(min(max(rng.random(), 1e-12), 1 - 1e-12)) for _ in range(self.levels)]
        )
        mean = fit.mean + fit.moves @ (fit.chol @ z)
        return outcome_pmf(mean, fit.rest_var + fit.tau**2, k, *self.mix)

    @property
    def mix(self) -> tuple[float, float]:
        """The dead and trivial shares of a cell's tasks."""
        return self.dead, self.trivial


def _useful(outcomes: Mapping[tuple[int, int], int]) -> bool:
    return any(n > 0 and t > 0 for (_, n), t in outcomes.items())


def _pick(rng: random.Random, weights: np.ndarray) -> int:
    u, running = rng.random(), 0.0
    for i, w in enumerate(weights):
        running += float(w)
        if u < running:
            return i
    return len(weights) - 1
