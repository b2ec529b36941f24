"""Stop starting episodes once the solver's endpoint is clearly down.

Each episode already retries the endpoint with backoff (llm/client.py). When several episodes in
a row still end with the endpoint unavailable, starting the remaining hundreds would only wait
through the same retries: the breaker opens and the caller records the rest as `harness_error`
without starting them. Re-materializing the partition runs exactly those again.
"""

from __future__ import annotations

import threading

from endless_assets.agent.episode import Rollout

UNAVAILABLE_PREFIX = "PolicyUnavailable"


def endpoint_unavailable(rollout: Rollout) -> bool:
    return rollout.termination == "harness_error" and rollout.error.startswith(UNAVAILABLE_PREFIX)


class EndpointBreaker:
    """Opens after `trip_after` consecutive rollouts ended by an unavailable endpoint."""

    def __init__(self, trip_after: int = 3) -> None:
        self.trip_after = max(1, trip_after)
        self._streak = 0
        self._open = False
        self.reason = ""
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._open

    def record(self, rollout: Rollout) -> None:
        with self._lock:
            if endpoint_unavailable(rollout):
                self._streak += 1
                if self._streak >= self.trip_after and not self._open:
                    self._open = True
                    self.reason = rollout.error
            elif rollout.termination != "harness_error":
                self._streak = 0

    def skipped_error(self) -> str:
        return (
            f"{UNAVAILABLE_PREFIX}: not started: the solver endpoint was unavailable for "
            f"{self.trip_after} episodes in a row (last: {self.reason[:300]})"
        )
