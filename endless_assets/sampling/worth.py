"""What a drawn task is worth: the training signal of its group of attempts, zero outside the
keep band, per token its cell's tasks cost, and the share of them that reach the solver.

A group-relative update learns from the rewards' variance r(1 - r), r = successes / k; tilted to
peak at the target pass rate t and normalised to 1 there: (r / t)^(2t) ((1 - r) / (1 - t))^(2(1 -
t)), which is 4 r (1 - r) at t = 0.5.
"""

from __future__ import annotations

import functools

import numpy as np

PRIOR_TASKS = 2.0  # pseudo-tasks a cell's survival and cost are shrunk towards their level's by


def signal(successes: int, attempts: int, target: float, band: tuple[float, float]) -> float:
    """The training signal of `successes` of `attempts`: 0 unless strictly between none and all
    and inside `band`; 1 at the `target` pass rate."""
    if attempts < 1 or successes <= 0 or successes >= attempts:
        return 0.0
    rate = successes / attempts
    if not band[0] <= rate <= band[1]:
        return 0.0
    return (rate / target) ** (2 * target) * ((1 - rate) / (1 - target)) ** (2 * (1 - target))


@functools.cache
def signals(k: int, target: float, band: tuple[float, float]) -> np.ndarray:
    """`signal` of 0..k successes in k attempts."""
    return np.array([signal(s, k, target, band) for s in range(k + 1)])


@functools.cache
def kept_outcomes(k: int, band: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Masks over 0..k successes: kept (solved at least once, inside the band) and kept and
    learnable (also not solved every time)."""
    s = np.arange(k + 1)
    inside = (s / k >= band[0]) & (s / k <= band[1])
    kept = (s > 0) & inside
    return kept, kept & (s < k)


def shrunk(total: float, count: float, prior: float, weight: float = PRIOR_TASKS) -> float:
    """A rate over `count` observations pulled towards `prior` by `weight` pseudo-observations."""
    return (total + weight * prior) / (count + weight)


def pooled_rates(totals: dict, counts: dict, levels: dict, weight: float = PRIOR_TASKS) -> dict:
    """Per key, `totals[key] / counts[key]` shrunk towards its level's rate (`levels[key]`
    names it), which is shrunk towards the overall rate; None overall when nothing was counted."""
    count = sum(counts.values())
    if count <= 0:
        return dict.fromkeys(levels)
    overall = sum(totals.values()) / count
    by_level: dict = {}
    for key, level in levels.items():
        total, seen = by_level.get(level, (0.0, 0.0))
        by_level[level] = (total + totals.get(key, 0.0), seen + counts.get(key, 0.0))
    level_rate = {lv: shrunk(t, c, overall, weight) for lv, (t, c) in by_level.items()}
    return {
        key: shrunk(totals.get(key, 0.0), counts.get(key, 0.0), level_rate[level], weight)
        for key, level in levels.items()
    }
