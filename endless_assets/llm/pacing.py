"""How many requests an endpoint gets at once: learned from how it answers (AIMD).

A server that computes one reply at a time (transformers serve, Ollama and llama.cpp with their
default slot counts, a busy single-GPU endpoint) answers the n-th of n simultaneous requests after
n replies' worth of time. Keeping `llm_concurrency` (32) requests open against it only moves the
queue into the server, where requests pass the client's timeout, are retried and computed twice.

One `Pacer` per endpoint (base URL and model) and process, shared by every client of it:

- it starts at one request in flight and grows while the limit is what holds requests back:
  doubling per round trip while replies keep the pace of unqueued ones (a batching server), then
  one per round trip once they slow down (`EASE`) or it has had to shrink, up to the cap;
- it shrinks by a quarter when replies come back stretched: the median seconds per generated
  token (*pace*) of the last `WINDOW` replies more than `STRETCH` times the reference pace (the
  fastest seen; replies sent alone also move it up; the very first reply, which may include
  loading the model, is left out), or a reply that took more than half the timeout. A median,
  not one reply: replies vary by themselves (prompt lengths, sampling, a model's own pace), and
  one slow reply among fast ones is not a queue; a queueing server slows every reply;
- it halves on a timeout, a 429/503 or a refused connection;
- a request abandoned on a timeout keeps its slot, because the server is probably still
  computing it: until the server answers a request sent after it (it got past it) or for one
  more timeout. A retry therefore waits for the server instead of queueing behind its own ghost;
- only requests sent after the last decrease can cause the next one (one decrease per round).

Time spent waiting here for a free slot is not the agent's: `queue_clock()` collects it for
whoever asks (the episode loop stops its clock for it).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

STRETCH = 3.0  # median pace more than this times the fastest one seen: the server is queueing
EASE = 1.5  # above this, growth slows from doubling to one per round trip
SHRINK = 0.75  # on stretched replies
HALVE = 0.5  # on timeouts and overload
MIN_TOKENS = 8  # replies shorter than this say little about the pace
WINDOW = 5  # the last replies whose median pace is compared with the reference
ALONE_WEIGHT = 0.2  # how fast a reply sent alone moves the reference pace


@dataclass
class QueueClock:
    """Seconds this thread's requests waited for a free slot while the clock was open."""

    seconds: float = 0.0


_clock: ContextVar[QueueClock | None] = ContextVar("endless_llm_queue_clock", default=None)


@contextlib.contextmanager
def queue_clock(clock: QueueClock | None = None) -> Iterator[QueueClock]:
    """Collect the time requests made in this context wait for a slot (nested: innermost)."""
    clock = clock if clock is not None else QueueClock()
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


@dataclass(frozen=True)
class Ticket:
    """One request's slot: how long it waited and what was in flight when it was granted."""

    seq: int
    waited: float
    busy: int  # requests in flight (abandoned ones included) when it was granted
    limit: int  # the limit when it was granted


@dataclass(frozen=True)
class PacerStats:
    limit: float
    cap: int
    peak_in_flight: int
    timeouts: int
    decreases: int
    queue_seconds: float


class Pacer:
    def __init__(self, cap: int, initial: int = 1) -> None:
        self.cap = max(1, int(cap))
        self.limit = float(min(self.cap, max(1, initial)))
        self._threshold = float(self.cap)  # slow start below it
        self._cond = threading.Condition()
        self._in_flight = 0
        self._ghosts: dict[int, float] = {}  # seq of an abandoned request -> when to forget it
        self._seq = 0
        self._last_decrease = 0
        self._reference: float | None = None  # seconds per token of unqueued replies
        self._recent: deque[float] = deque(maxlen=WINDOW)  # paces since the last decrease
        self._answers = 0
        self.peak_in_flight = 0
        self.timeouts = 0
        self.decreases = 0
        self.queue_seconds = 0.0

    # -- slots ---------------------------------------------------------------------------------
    def acquire(self) -> Ticket:
        """Wait for a free slot (charged to the open `queue_clock`)."""
        asked = time.monotonic()
        with self._cond:
            while True:
                now = time.monotonic()
                busy = self._busy(now)
                if busy < self._slots():
                    break
                expiries = list(self._ghosts.values())
                self._cond.wait(timeout=max(0.0, min(expiries) - now) if expiries else None)
            self._seq += 1
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight + len(self._ghosts))
            ticket = Ticket(self._seq, now - asked, busy, self._slots())
            self.queue_seconds += ticket.waited
        clock = _clock.get()
        if clock is not None:
            clock.seconds += ticket.waited
        return ticket

    def answered(self, ticket: Ticket, seconds: float, tokens_out: int, timeout: float) -> None:
        """The request of `ticket` was answered after `seconds` with `tokens_out` tokens."""
        with self._cond:
            self._in_flight -= 1
            # A FIFO server that answered this request is past every request sent before it.
            for seq in [s for s in self._ghosts if s < ticket.seq]:
                del self._ghosts[seq]
            self._learn(ticket, seconds, tokens_out, timeout)
            self._cond.notify_all()

    def failed(self, ticket: Ticket, *, timed_out: bool, overloaded: bool, timeout: float) -> None:
        """The request of `ticket` failed; a timed-out one stays on the server for a while."""
        with self._cond:
            self._in_flight -= 1
            if timed_out:
                self.timeouts += 1
                self._ghosts[ticket.seq] = time.monotonic() + timeout
            if timed_out or overloaded:
                self._decrease(ticket, HALVE)
            self._cond.notify_all()

    def released(self, ticket: Ticket) -> None:
        """The request of `ticket` ended without saying anything about the server's load."""
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def stats(self) -> PacerStats:
        with self._cond:
            return PacerStats(
                limit=round(self.limit, 2),
                cap=self.cap,
                peak_in_flight=self.peak_in_flight,
                timeouts=self.timeouts,
                decreases=self.decreases,
                queue_seconds=round(self.queue_seconds, 3),
            )

    # -- internals (under the lock) ------------------------------------------------------------
    def _slots(self) -> int:
        return max(1, int(self.limit))

    def _busy(self, now: float) -> int:
        for seq in [s for s, until in self._ghosts.items() if until <= now]:
            del self._ghosts[seq]
        return self._in_flight + len(self._ghosts)

    def _learn(self, ticket: Ticket, seconds: float, tokens_out: int, timeout: float) -> None:
        if timeout > 0 and seconds > timeout / 2:
            self._decrease(ticket, SHRINK)
            return
        self._answers += 1
        if tokens_out >= MIN_TOKENS and self._answers > 1:  # the first may include a cold start
            pace = seconds / tokens_out
            if self._reference is None or pace < self._reference:
                self._reference = pace
            elif ticket.busy == 0:  # nothing else was in flight: the server's own pace now
                self._reference += ALONE_WEIGHT * (pace - self._reference)
            if ticket.seq > self._last_decrease:
                self._recent.append(pace)
            typical = statistics.median(self._recent) if self._recent else pace
            if len(self._recent) >= 3 and typical > STRETCH * self._reference:  # (3: a median)
                self._decrease(ticket, SHRINK)
                return
            if typical > EASE * self._reference:
                self._threshold = min(self._threshold, self.limit)
        if ticket.busy + 1 >= ticket.limit:  # the limit was what held requests back: grow
            step = 1.0 if self.limit < self._threshold else 1.0 / self.limit
            self.limit = min(float(self.cap), self.limit + step)

    def _decrease(self, ticket: Ticket, factor: float) -> None:
        if ticket.seq <= self._last_decrease:
            return  # sent before the last decrease: its fate says nothing about the new limit
        self.limit = max(1.0, self.limit * factor)
        self._threshold = self.limit
        self._last_decrease = self._seq
        self._recent.clear()
        self.decreases += 1


_pacers: dict[tuple[str, str], Pacer] = {}
_pacers_guard = threading.Lock()


def pacer_for(base_url: str, model: str, cap: int) -> Pacer:
    """The one pacer of an endpoint in this process (the first caller's cap applies)."""
    key = (base_url, model)
    with _pacers_guard:
        if key not in _pacers:
            _pacers[key] = Pacer(cap)
        return _pacers[key]
