"""What a task of logit-normal pass rate does over its attempts: the binomial integrated over the
task's logit by Gauss-Hermite quadrature, its derivatives in the cell's logit, and the same mixed
with dead tasks (every attempt fails: broken or impossible) and trivial ones (every attempt
passes: a test too weak to fail), whose shares are estimated from rows of outcomes."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

NODES = 24
_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(NODES)
Z = _NODES * math.sqrt(2.0)  # E[f(z)], z ~ N(0, 1), is sum(W * f(Z))
W = _WEIGHTS / math.sqrt(math.pi)
LOG_W = np.log(W)
_SPREAD_NODES, _SPREAD_WEIGHTS = np.polynomial.hermite.hermgauss(7)
SPREAD_Z, SPREAD_W = _SPREAD_NODES * math.sqrt(2.0), _SPREAD_WEIGHTS / math.sqrt(math.pi)
# The dead and trivial shares: the tasks of neither kind they are shrunk by, and the most they
# may take together.
MIX_PRIOR = 10.0
MIX_MOST = 0.8


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


@functools.cache
def _log_choose(k: int) -> np.ndarray:
    return np.array(
        [math.lgamma(k + 1) - math.lgamma(s + 1) - math.lgamma(k - s + 1) for s in range(k + 1)]
    )


def outcome_pmf(
    mean: np.ndarray, var: np.ndarray, k: int, dead: float = 0.0, trivial: float = 0.0
) -> np.ndarray:
    """Per row, the probability of 0..k successes in k attempts of a task whose logit pass rate
    is N(mean, var), or which is `dead` (0 successes) or `trivial` (k) with those probabilities:
    shape (rows, k + 1)."""
    z = mean[:, None] + np.sqrt(np.maximum(var, 0.0))[:, None] * Z[None, :]
    s = np.arange(k + 1)
    logs = (
        _log_choose(k)[None, None, :]
        + s[None, None, :] * log_sigmoid(z)[:, :, None]
        + (k - s)[None, None, :] * log_sigmoid(-z)[:, :, None]
    )
    pmf = (1.0 - dead - trivial) * np.einsum("q,rqs->rs", W, np.exp(logs))
    pmf[:, 0] += dead
    pmf[:, k] += trivial
    return pmf


def live_rows(
    eta: np.ndarray, s: np.ndarray, n: np.ndarray, tau: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (`s` successes of `n` attempts, a task of a cell of logit `eta`, tasks spread by
    `tau`): its log probability (without the binomial coefficient), and its first and second
    derivatives in `eta`."""
    z = eta[:, None] + tau * Z[None, :]
    passes = log_sigmoid(z)  # and log_sigmoid(-z) is passes - z
    logs = LOG_W[None, :] + n[:, None] * passes - (n - s)[:, None] * z
    top = logs.max(axis=1, keepdims=True)
    mass = np.exp(logs - top)
    total = mass.sum(axis=1, keepdims=True)
    post = mass / total
    p = np.exp(passes)
    resid = s[:, None] - n[:, None] * p
    first = (post * resid).sum(axis=1)
    second = (post * (resid**2 - n[:, None] * p * (1 - p))).sum(axis=1) - first**2
    return np.log(total[:, 0]) + top[:, 0], first, second


def mixed_rows(
    live: np.ndarray, s: np.ndarray, n: np.ndarray, dead: float, trivial: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, from its live log probability: its log probability with `dead` and `trivial`
    shares, and the log probabilities of it from a dead and from a trivial task."""
    from_dead = np.where(s == 0, _log(dead), -np.inf)
    from_trivial = np.where(s == n, _log(trivial), -np.inf)
    other = np.logaddexp(from_dead, from_trivial)
    return np.logaddexp(np.log1p(-(dead + trivial)) + live, other), from_dead, from_trivial


def mixed_terms(
    eta: np.ndarray, s: np.ndarray, n: np.ndarray, tau: float, dead: float, trivial: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`live_rows` with `dead` and `trivial` shares: the log probability of each row and its
    first and second derivatives in `eta`."""
    live, first, second = live_rows(eta, s, n, tau)
    mixed, from_dead, from_trivial = mixed_rows(live, s, n, dead, trivial)
    r = 1.0 - np.exp(from_dead - mixed) - np.exp(from_trivial - mixed)  # the task was live
    return mixed, r * first, r * second + r * (1 - r) * first**2


def shares(
    lives: Sequence[tuple[float, np.ndarray]],
    s: np.ndarray,
    n: np.ndarray,
    t: np.ndarray,
    start: tuple[float, float],
) -> tuple[float, float]:
    """The dead and trivial shares that best explain rows of outcomes (`t` tasks each) given
    their live log probabilities under several fits (`lives`: (weight, per row)), by
    expectation-maximisation from `start`, shrunk towards none by `MIX_PRIOR` tasks and at most
    `MIX_MOST` together."""
    total = sum(weight for weight, _ in lives)
    found = start
    for _ in range(500):
        counts = np.zeros(2)
        for weight, live in lives:
            mixed, *kinds = mixed_rows(live, s, n, *found)
            counts += [weight / total * float((t * np.exp(k - mixed)).sum()) for k in kinds]
        new = counts / (t.sum() + MIX_PRIOR)
        new *= min(1.0, MIX_MOST / max(new.sum(), 1e-12))
        moved = float(np.abs(new - found).max())
        found = (float(new[0]), float(new[1]))
        if moved < 1e-5:
            break
    return found


def mix_prior(dead: float, trivial: float) -> float:
    """The log prior density (up to a constant) that shrinks the shares towards none."""
    return MIX_PRIOR * math.log1p(-(dead + trivial))


def _log(share: float) -> float:
    return math.log(share) if share > 0 else -math.inf
