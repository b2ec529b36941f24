"""The pacer's growth against servers simulated on a clock of their own (pacing.py).

Each case is a closed loop: `callers` threads of work each send a request as soon as the pacer
grants a slot, and the simulated server answers after a seeded time. Nothing sleeps: the pacer is
told how long each reply took, as the client tells it after a real request.
"""

from __future__ import annotations

import heapq
import random
import statistics

import pytest

from endless_assets.llm.pacing import Pacer

TOKENS = 100  # per reply: a pace is seconds per token


def simulate(server: str, seed: int, *, jitter: float, callers: int = 16, requests: int = 240):
    """Returns (the simulated seconds until the limit first reached `callers`, or None; the
    limits after each answer; the pacer)."""
    pacer, rng = Pacer(cap=32), random.Random(seed)
    now, in_flight, sent, answered, free_at = 0.0, 0, 0, 0, 0.0
    pending: list[tuple[float, int, object, float]] = []
    reached, limits = None, []
    while answered < requests:
        while in_flight < min(callers, int(pacer.limit)) and sent < requests:
            ticket = pacer.acquire()
            sent, in_flight = sent + 1, in_flight + 1
            work = rng.uniform(1 - jitter, 1 + jitter)
            if server == "batching":  # every request computed at once
                done = now + work
            else:  # "serial": one at a time, first come first served
                done = free_at = max(now, free_at) + work
            heapq.heappush(pending, (done, ticket.seq, ticket, now))
        done, _, ticket, sent_at = heapq.heappop(pending)
        now, in_flight, answered = done, in_flight - 1, answered + 1
        pacer.answered(ticket, done - sent_at, TOKENS, timeout=0)
        limits.append(pacer.limit)
        if reached is None and pacer.limit >= callers:
            reached = now
    return reached, limits, pacer


def test_a_batching_server_is_opened_up_by_doubling():
    reached, _, pacer = simulate("batching", 0, jitter=0.0)
    assert reached == pytest.approx(6.0)  # 1, 2, 4, 8, 16: a round trip each, the first slow
    assert pacer.decreases == 0


@pytest.mark.parametrize("jitter", [0.0, 0.5])
def test_a_server_that_computes_one_reply_at_a_time_is_not_opened_up(jitter):
    # Every extra request in flight only queues in the server: the limit stays near where
    # replies come back 3x slower than alone, well below the 16 callers.
    reached, limits, pacer = simulate("serial", 3, jitter=jitter)
    assert reached is None
    assert statistics.mean(limits[len(limits) // 2 :]) < 6
    assert pacer.decreases > 0
