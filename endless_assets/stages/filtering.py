"""Stage IV's arithmetic: the unbiased pass@k estimator, difficulty, and the keep rule."""

from __future__ import annotations

from dataclasses import dataclass
from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k from n attempts with c successes (Chen et al., 2021)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass(frozen=True)
class KeepRule:
    """Keep a task when its pass rate is inside [min_pass_rate, max_pass_rate] and it was solved.

    The default is the paper's rule: solved at least once. `max_pass_rate < 1` drops tasks solved
    in every attempt, which teach nothing under a binary reward.
    """

    min_pass_rate: float = 0.0
    max_pass_rate: float = 1.0

    def decide(self, scored: int, successes: int) -> tuple[bool, str]:
        if scored == 0:
            return False, "no_scored_attempts: every attempt was a harness error"
        if successes == 0:
            return False, f"unsolved: 0 of {scored} attempts passed"
        rate = successes / scored
        if rate < self.min_pass_rate:
            return False, f"too_hard: pass rate {rate:.2f} < {self.min_pass_rate:.2f}"
        if rate > self.max_pass_rate:
            return False, f"too_easy: pass rate {rate:.2f} > {self.max_pass_rate:.2f}"
        return True, ""
