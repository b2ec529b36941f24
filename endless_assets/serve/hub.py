"""What every session of one server shares: the sandbox and its engine pool, the served tasks and
their images, the episode limits, the bound on sessions, the live sessions, the episode log.

An episode whose session made no call for the server's idle time is abandoned by the hub's
reaper (its container removed); the session itself stays until its client closes it or its
connection drops, so that a trainer busy generating for longer than that loses an episode (told
so at its next step), never its session.

Sessions are bounded twice: OpenEnv's server refuses a WebSocket session past
`max_concurrent_envs` (its CAPACITY_REACHED error), and a session takes one of the hub's session
places at its first reset (so that OpenEnv's stateless HTTP routes, which make an environment per
request, are bounded too). A session holds its place until it closes; an episode holds a
container of the engine pool (the engine with the most free capacity, the image built there if
it is not) from its reset until it ends.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Protocol

from endless_assets.agent.episode import EpisodeLimits
from endless_assets.models import Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.engine.engines import answers
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.serve.episode import ServedEpisode
from endless_assets.serve.errors import Unavailable
from endless_assets.serve.record import EpisodeLog
from endless_assets.serve.tasks import TaskSet
from endless_assets.stages.attempts import ImageCache

log = logging.getLogger(__name__)


class Session(Protocol):
    def close(self) -> None: ...

    def reap_if_idle(self, idle_seconds: float) -> bool:
        """Abandon the session's episode if it made no call for `idle_seconds`."""
        ...


class ServerBusy(Unavailable):
    """Every session place is taken."""


class Hub:
    def __init__(
        self,
        sandbox: Sandbox,
        tasks: TaskSet,
        limits: EpisodeLimits,
        *,
        max_sessions: int,
        episodes: EpisodeLog | None = None,
    ) -> None:
        """Container starts and verdicts at once are bounded by the sandbox's CPU slots (the
        `workers` setting, as in the solver stage)."""
        self.sandbox, self.tasks, self.limits = sandbox, tasks, limits
        self.max_sessions = max_sessions
        self.episodes = episodes
        self._images = ImageCache(sandbox)
        self._places = threading.BoundedSemaphore(max_sessions)  # one per open session
        self._sessions: set[Session] = set()
        self._running: set[ServedEpisode] = set()  # episodes whose container is not gone yet
        self._lock = threading.Lock()
        self.closing = False
        self._stop = threading.Event()  # the reaper's
        self.counts = {"graded": 0, "infra_error": 0, "abandoned": 0}

    # -- sessions ------------------------------------------------------------------------------
    def open_session(self, session: Session) -> None:
        """Take a place for `session`; ServerBusy when every one is taken, or when stopping."""
        if self.closing:
            raise ServerBusy("the server is stopping: no new episode starts")
        if not self._places.acquire(blocking=False):
            raise ServerBusy(
                f"the server holds its limit of {self.max_sessions} session(s) (endless serve "
                "--max-sessions): close one, or retry later"
            )
        with self._lock:
            self._sessions.add(session)

    def close_session(self, session: Session) -> None:
        with self._lock:
            if session not in self._sessions:
                return
            self._sessions.discard(session)
        self._places.release()

    def start_reaper(self, idle_seconds: float) -> threading.Thread:
        """A thread that abandons the episodes of sessions idle for `idle_seconds`, checked every
        quarter of that (at least every 5 s), until `close`."""
        interval = min(max(idle_seconds / 4, 0.05), 5.0)

        def reap() -> None:
            while not self._stop.wait(interval):
                with self._lock:
                    live = list(self._sessions)
                for session in live:
                    try:
                        session.reap_if_idle(idle_seconds)
                    except Exception as exc:  # (one session's trouble stops no other reaping)
                        log.warning(f"reaping an idle session failed: {exc}")

        thread = threading.Thread(target=reap, name="idle-reaper", daemon=True)
        thread.start()
        return thread

    def image(self, task: Task) -> str:
        """The task's image (built, or found cached by its tag); SandboxError if it no longer
        builds or no engine answers."""
        return self._images.tag(task)

    def episode_started(self, episode: ServedEpisode) -> None:
        with self._lock:
            self._running.add(episode)

    def episode_ended(self, episode: ServedEpisode) -> None:
        """Called from the episode's thread once its container is gone."""
        outcome = episode.termination
        key = "graded" if episode.reward is not None else outcome
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            self._running.discard(episode)
        if self.episodes is not None:
            self.episodes.add(episode)
        if outcome == "infra_error":
            self._drain_dead_engines()

    def _drain_dead_engines(self) -> None:
        """An engine of a pool that stopped answering gets no more episodes (a pool of one keeps
        its engine: the next reset says what is wrong with it)."""
        pool = self.sandbox.pool
        for engine in pool.up:
            if not answers(engine.spec.url):
                pool.drain(engine, "stopped answering")

    def close(self) -> None:
        """Server stop: every live session's episode is abandoned and its container removed,
        then the episode log is written."""
        self.closing = True
        self._stop.set()
        with self._lock:
            live = list(self._sessions)
        for session in live:
            with contextlib.suppress(SandboxError):
                session.close()
        with self._lock:  # (those whose session another thread is closing, too)
            running = list(self._running)
        for episode in running:
            episode.abandon()
        if self.episodes is not None:
            self.episodes.close()

    def summary(self) -> str:
        with self._lock:
            counts = dict(self.counts)
        total = sum(counts.values())
        return (
            f"{total} episode(s): {counts['graded']} graded, {counts['infra_error']} infra "
            f"error(s), {counts['abandoned']} abandoned"
        )
