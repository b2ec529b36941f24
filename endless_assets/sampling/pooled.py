"""The pooled posterior: one additive logistic model of every cell's pass rate, fitted to the
history window, so one batch's evidence moves every cell it informs.

A task of the cell (group g, level l) — a taxonomy category or a procedural family, and its
complexity — passes an attempt with probability sigmoid(mu + a_l + b_g + u_gl + e): a level effect
shared by every group, a group effect shared by every level, a residual of the cell (what the sum
gets wrong there: a level that is hard in one category only) and one of the task,
e ~ N(0, tau^2), which makes a cell's tasks differ (U-shaped when tau is large). Its attempts are
Binomial(n, p). mu, a, b and u have Gaussian priors centred on 0; the posterior is approximated by
a Gaussian at its mode (Laplace), found by Newton's method, for each task spread tau on a grid,
and the fits are weighted by their approximate evidence. What a new task of a cell does over k
attempts is the binomial integrated over the posterior and e (Gauss-Hermite quadrature).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from endless_assets.sampling.cells import Cell

# Prior standard deviations on the logit scale: the intercept, a level's and a group's effect
# (wide: they are learnt from every task of the level or the group). When the levels are ranked
# (the taxonomy's complexities, the families' levels), a level's effect is the one below it plus
# a step (`STEP_SD`), so a level no task has reached yet lies between its neighbours; a step may
# go either way.
MEAN_SD = 3.0
LEVEL_SD = 3.0
STEP_SD = 4.0
GROUP_SD = 1.5
# The grids the data weigh: tau, how a cell's tasks spread, and the sd of a cell's residual (a
# world where cells follow their category and level, or one where each cell goes its own way).
TASK_SPREADS = (0.3, 0.7, 1.2, 2.0, 3.0)
CELL_SDS = (0.5, 1.0, 2.0, 4.0)
NODES = 24
_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(NODES)
Z = _NODES * math.sqrt(2.0)  # E[f(z)], z ~ N(0, 1), is sum(W * f(Z))
W = _WEIGHTS / math.sqrt(math.pi)
LOG_W = np.log(W)
_SPREAD_NODES, _SPREAD_WEIGHTS = np.polynomial.hermite.hermgauss(7)
SPREAD_Z, SPREAD_W = _SPREAD_NODES * math.sqrt(2.0), _SPREAD_WEIGHTS / math.sqrt(math.pi)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


@functools.cache
def _log_choose(k: int) -> np.ndarray:
    return np.array(
        [math.lgamma(k + 1) - math.lgamma(s + 1) - math.lgamma(k - s + 1) for s in range(k + 1)]
    )


def outcome_pmf(mean: np.ndarray, var: np.ndarray, k: int) -> np.ndarray:
    """Per row, the probability of 0..k successes in k attempts of a task whose logit pass rate
    is N(mean, var): shape (rows, k + 1)."""
    z = mean[:, None] + np.sqrt(np.maximum(var, 0.0))[:, None] * Z[None, :]
    s = np.arange(k + 1)
    logs = (
        _log_choose(k)[None, None, :]
        + s[None, None, :] * _log_sigmoid(z)[:, :, None]
        + (k - s)[None, None, :] * _log_sigmoid(-z)[:, :, None]
    )
    return np.einsum("q,rqs->rs", W, np.exp(logs))


@dataclass(frozen=True)
class _Fit:
    """The Laplace fit for one task spread: per cell, the posterior mean and variance of its
    logit pass rate, and what a Thompson draw of the level effects (mu, a) leaves of the rest
    (the group's effect b and the cell's residual u): how its mean moves with the draw, and the
    variance that remains."""

    tau: float
    log_evidence: float
    mean: np.ndarray
    var: np.ndarray
    chol: np.ndarray  # of the posterior covariance of (mu, a)
    moves: np.ndarray  # (cells, 1 + levels)
    rest_var: np.ndarray


class Pooled:
    """The pooled posterior over `cells` from `outcomes` (per cell: (successes, scored attempts)
    -> tasks). Cells are (group, level) by their key. `ranks` orders the levels, simplest first
    (None: integer levels in their order, named ones unranked, each level's effect on its own).

    The residuals u enter only their own cell, so they are solved for in closed form (a Schur
    complement) and the linear algebra stays the size of mu, a and b."""

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
        fits = []
        for cell_sd in cell_sds:
            start = (np.zeros(self.design.shape[1]), np.zeros(len(self.observed)))
            for tau in spreads:
                fit, start = self._fit(tau, 1.0 / cell_sd**2, start)
                fits.append(fit)
        evidence = np.array([f.log_evidence for f in fits])
        weights = np.exp(evidence - evidence.max())
        self.weights = weights / weights.sum()
        self.fits = fits

    # -- fitting ---------------------------------------------------------------------------
    def _cell_terms(self, eta: np.ndarray, tau: float) -> tuple[float, np.ndarray, np.ndarray]:
        """The log likelihood, and its first and second derivatives per observed cell."""
        j, s, n, t = (self._rows[:, c] for c in range(4))
        z = eta[j.astype(int)][:, None] + tau * Z[None, :]
        logs = LOG_W[None, :] + s[:, None] * _log_sigmoid(z) + (n - s)[:, None] * _log_sigmoid(-z)
        top = logs.max(axis=1, keepdims=True)
        mass = np.exp(logs - top)
        total = mass.sum(axis=1, keepdims=True)
        post = mass / total
        p = np.exp(_log_sigmoid(z))
        resid = s[:, None] - n[:, None] * p
        first = (post * resid).sum(axis=1)
        second = (post * (resid**2 - n[:, None] * p * (1 - p))).sum(axis=1) - first**2
        loglik = float((t * (np.log(total[:, 0]) + top[:, 0])).sum())
        size = len(self.observed)
        grad = np.bincount(j.astype(int), weights=t * first, minlength=size)
        curv = np.bincount(j.astype(int), weights=t * second, minlength=size)
        return loglik, grad, np.minimum(curv, 0.0)  # concave exactly; quadrature may wobble

    def _objective(self, shared: np.ndarray, resid: np.ndarray, tau: float, cp: float) -> float:
        prior = (self._precision * shared**2).sum() + cp * (resid**2).sum()
        return self._cell_terms(self._x @ shared + resid, tau)[0] - 0.5 * float(prior)

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
        value = self._objective(shared, resid, tau, cp)
        for _ in range(100):
            _, grad, curv = self._cell_terms(self._x @ shared + resid, tau)
            weight = -curv
            g_shared = self._x.T @ grad - self._precision * shared
            g_resid = grad - cp * resid
            inv = 1.0 / (weight + cp)  # the residuals' block is diagonal
            rhs = g_shared - self._x.T @ (weight * inv * g_resid)
            step_shared = np.linalg.solve(self._schur(weight, cp), rhs)
            step_resid = inv * (g_resid - weight * (self._x @ step_shared))
            size = 1.0
            while True:  # the objective is concave (a log-concave likelihood): halve to climb
                new_shared, new_resid = shared + size * step_shared, resid + size * step_resid
                new = self._objective(new_shared, new_resid, tau, cp)
                if new >= value - 1e-12 or size < 1e-6:
                    break
                size /= 2
            moved = size * max(np.abs(step_shared).max(), np.abs(step_resid).max(initial=0.0))
            shared, resid, value = new_shared, new_resid, new
            if moved < 1e-7:
                break
        weight = -self._cell_terms(self._x @ shared + resid, tau)[2]
        schur = self._schur(weight, cp)
        cov = np.linalg.inv(schur)
        cov = (cov + cov.T) / 2
        _, logdet = np.linalg.slogdet(schur)
        logdet += float(np.log(weight + cp).sum())
        prior_logdet = float(np.log(self._precision).sum()) + len(self.observed) * math.log(cp)
        log_evidence = value - 0.5 * logdet + 0.5 * prior_logdet
        # Per cell: its logit is x.(mu, a, b) + u. Given (mu, a, b), u is normal with variance
        # `left` and moves by `keep` of the change in x.(mu, a, b); an unseen cell's u is its
        # prior, moved by nothing.
        cells = len(self.cells)
        keep, left, eta = np.ones(cells), np.full(cells, 1 / cp), np.zeros(cells)
        keep[self.observed] = cp / (weight + cp)
        left[self.observed] = 1.0 / (weight + cp)
        eta[self.observed] = resid
        x, a = self.design, self.levels
        q = np.einsum("ij,jk,ik->i", x, cov, x)
        gain = np.linalg.solve(cov[:a, :a], cov[:a, a:]).T  # E[b | mu, a] moves by gain
        rest = cov[a:, a:] - gain @ cov[:a, a:]
        rest_q = np.einsum("ij,jk,ik->i", x[:, a:], rest, x[:, a:])
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
            out += weight * outcome_pmf(fit.mean, fit.var + fit.tau**2, k)
        return out

    def spread(self, k: int, values: np.ndarray) -> np.ndarray:
        """Per cell, the posterior standard deviation of a new task's expected `values` (one per
        0..k successes): how unsure the model is of what the cell is worth, not of its logit (a
        cell surely out of reach is surely worth nothing, however wide its logit's posterior)."""
        first, second = np.zeros(len(self.cells)), np.zeros(len(self.cells))
        used = self.weights >= 1e-6
        for fit, weight in zip(self.fits, self.weights / self.weights[used].sum(), strict=True):
            if weight < 1e-6:
                continue
            for z, w in zip(SPREAD_Z, SPREAD_W, strict=True):
                mean = fit.mean + np.sqrt(fit.var) * z
                value = outcome_pmf(mean, np.full(len(mean), fit.tau**2), k) @ values
                first += weight * w * value
                second += weight * w * value**2
        return np.sqrt(np.maximum(second - first**2, 0.0))

    def sample(self, rng: random.Random, k: int) -> np.ndarray:
        """One Thompson draw: a task spread by its fit's weight and the level effects (mu, a)
        from that fit; per cell, the probability of 0..k successes of a new task under that
        draw, its group's effect and its own residual averaged over (sampling them too would
        let the luckiest of hundreds of cells win on noise)."""
        fit = self.fits[_pick(rng, self.weights)]
        normal = NormalDist()
        z = np.array(
            [normal.inv_cdf(min(max(rng.random(), 1e-12), 1 - 1e-12)) for _ in range(self.levels)]
        )
        mean = fit.mean + fit.moves @ (fit.chol @ z)
        return outcome_pmf(mean, fit.rest_var + fit.tau**2, k)


def _useful(outcomes: Mapping[tuple[int, int], int]) -> bool:
    return any(n > 0 and t > 0 for (_, n), t in outcomes.items())


def _pick(rng: random.Random, weights: np.ndarray) -> int:
    u, running = rng.random(), 0.0
    for i, w in enumerate(weights):
        running += float(w)
        if u < running:
            return i
    return len(weights) - 1
