"""One served episode: the solver stage's episode loop (agent/episode.py) in a thread of its own,
with the client as its policy.

`run_episode_in` asks its policy for the next action and waits for it. Here the policy hands the
loop's observation to the client's pending call (the reset, or the step before) and waits for the
client's next step. So everything is the solver stage's, unchanged: a container of the task's image
with the sandbox's identity, limits and no network; the grader resident before the first command;
the persistent shell, its output cap and command timeout; the turn and time budget; the verdict (a
root agent's in a verifier container, with its tamper checks); the container removed whatever
happened.

What the engine or the harness did wrong ends the episode as `infra_error`, with its reason and
no reward. A client that leaves (it closes or disconnects, its session is reaped, the server
stops) abandons the episode: nothing is graded, the container is removed.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import docker.errors

from endless_assets.agent.episode import EpisodeLimits, PolicyUnavailable, Rollout, Turn
from endless_assets.agent.episode import run_episode_in as run_loop
from endless_assets.agent.policies import Action, EpisodeTask
from endless_assets.models import Task
from endless_assets.sandbox.sandbox import Sandbox

log = logging.getLogger(__name__)
START_SECONDS = 300.0  # a container's start, its identity and its grader, at most
ERROR_CHARS = 500
GRADED = ("done", "turn_limit", "time_limit")


@dataclass(frozen=True)
class Ready:
    """The loop waits for the next action. `turn`: the command just run (None at the start)."""

    observation: str | None
    turn: Turn | None


@dataclass(frozen=True)
class Finished:
    """The episode is over: graded, or an infra error, or abandoned."""

    rollout: Rollout


class ClientGone(PolicyUnavailable):
    """The client left before the episode ended."""


class _Client:
    """The policy of a served episode: the remote client, reached through two queues."""

    name = "served"
    prompt_version = ""

    def __init__(self, model: str, record: Rollout) -> None:
        self.model = model
        self.record = record
        self.actions: queue.Queue[Action | None] = queue.Queue()
        self.events: queue.Queue[Ready | Finished] = queue.Queue()
        self.waiting = False  # the loop is blocked on the client's next action

    def reset(self, task: EpisodeTask) -> None:
        pass

    def act(self, observation: str | None) -> Action:
        turn = self.record.turns[-1] if observation is not None and self.record.turns else None
        self.waiting = True
        self.events.put(Ready(observation, turn))
        action = self.actions.get()
        self.waiting = False
        if action is None:
            raise ClientGone("the client left before the episode ended")
        return action

    def messages(self) -> list[dict]:
        return []  # the client's model talks to the client, not to us


class ServedEpisode:
    """A task's episode for one client session. `start` runs until the agent's first action is
    due; `send` gives the loop an action and returns what came of it; `abandon` ends it."""

    def __init__(
        self,
        sandbox: Sandbox,
        image: str,
        task: Task,
        limits: EpisodeLimits,
        *,
        session_id: str,
        episode_id: str,
        model: str = "",
        seed: int | None = None,
        labels: dict[str, str] | None = None,
        on_end: Callable[[ServedEpisode], None] | None = None,
    ) -> None:
        """`on_end`: called from the episode's thread once its container is gone.
        The sandbox takes its CPU slot while the container starts and while the verdict runs, as
        in the solver stage (a small machine stays responsive when many resets come at once)."""
        self.on_end = on_end
        self.sandbox, self.image, self.task, self.limits = sandbox, image, task, limits
        self.session_id, self.episode_id = session_id, episode_id
        self.model, self.seed = model, seed
        self.labels = dict(labels or {})
        self.record = Rollout(task.task_id, _Client.name, model, reward=None, termination="done")
        self.client = _Client(model, self.record)
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC)
        self.reset_seconds = 0.0
        self.abandoned = False  # the client left before the episode's outcome was known
        self.abandon_reason = ""
        self.result: Finished | None = None
        self._outcome = threading.Lock()  # orders the outcome and the client's leaving
        self.graded = threading.Event()  # the loop's result is known (the container may remain)
        self.ended = threading.Event()  # ... and the container is gone
        self._stuck = ""  # why the episode was given up on, when it stopped answering
        self._box = None
        self._box_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"episode-{episode_id}", daemon=True)

    # -- what the environment calls ------------------------------------------------------------
    def start(self) -> Ready | Finished:
        self._thread.start()
        event = self._next(START_SECONDS + self.limits.test_timeout)
        self.reset_seconds = time.monotonic() - self.started
        return event

    def send(self, action: Action) -> Ready | Finished:
        self.client.actions.put(action)
        return self._next(self.limits.command_timeout + self.limits.test_timeout + START_SECONDS)

    def fail_before_start(self, exc: Exception) -> Finished:
        """The episode cannot start (its image did not build): an infra error, recorded."""
        self._fail(exc)
        with self._outcome:
            self.graded.set()
        self.result = Finished(self.record)
        self._ended()
        return self.result

    def abandon(self, *, wait: bool = True, reason: str = "") -> None:
        """The client left: the loop ends without a verdict (a running command or verdict is
        stopped by killing the container); with `wait`, once the container is removed.

        An episode whose outcome is already known (graded, or an infra error: what the client was
        or is being told) keeps it: a client that resets or disconnects as soon as it reads an
        infra error has not abandoned that episode, only the removal of its container."""
        with self._outcome:
            if not self.graded.is_set():
                self.abandoned = True
                self.abandon_reason = self.abandon_reason or reason
        self.client.actions.put(None)
        if not self.client.waiting and not self.graded.is_set():
            self._kill()
        if wait:
            self.ended.wait()

    @property
    def steps(self) -> int:
        return sum(1 for t in self.record.turns if t.kind == "command")

    @property
    def termination(self) -> str:
        """done, turn_limit, time_limit (graded), infra_error, abandoned, or "" (running)."""
        if self._stuck:
            return "infra_error"
        if not self.graded.is_set():
            return ""
        if self.record.reward is not None:
            return self.record.termination
        return "abandoned" if self.abandoned else "infra_error"

    @property
    def reward(self) -> int | None:
        """1 or 0 when graded; None otherwise (never a 0 for what the agent did not do)."""
        return self.record.reward if self.termination in GRADED else None

    @property
    def infra_error(self) -> str | None:
        if self.termination != "infra_error":
            return None
        return (self._stuck or self.record.error or "unknown")[:ERROR_CHARS]

    @property
    def seconds_left(self) -> float:
        return max(0.0, self.limits.episode_seconds - (time.monotonic() - self.started))

    # -- the episode's thread ------------------------------------------------------------------
    def _next(self, patience: float) -> Ready | Finished:
        try:
            event = self.client.events.get(timeout=patience)
        except queue.Empty:  # the engine hangs: an infra error, whatever the loop does later
            self._stuck = f"the episode gave no answer within {patience:.0f} s"
            self.abandon(wait=False)
            event = Finished(self.record)
        if isinstance(event, Finished):
            self.result = event
        return event

    def _run(self) -> None:
        task = self.task
        try:
            with self.sandbox.container(self.image, self.labels) as box:
                with self._box_lock:
                    self._box = box
                if self.abandoned:  # left while the container started
                    raise ClientGone("the client left before the episode started")
                try:
                    run_loop(
                        box,
                        EpisodeTask(task.task_id, task.instruction),
                        self.client,
                        task.completion_test or "",
                        self.limits,
                        self.started,
                        rollout=self.record,
                    )
                except Exception as exc:  # what the loop does not turn into a harness error
                    self._fail(exc)
                self._finish()  # the reward goes out before the container's removal
                with self._box_lock:
                    self._box = None
        except Exception as exc:  # the container's start or removal: the engine's doing
            if self.graded.is_set():
                log.warning(f"episode {self.episode_id}: removing its container failed: {exc}")
            else:
                self._fail(exc)
                self._finish()
        finally:
            self.record.seconds = time.monotonic() - self.started
            self._ended()

    def _ended(self) -> None:
        try:
            if self.on_end is not None:
                self.on_end(self)
        finally:
            self.ended.set()

    def _fail(self, exc: BaseException) -> None:
        self.record.termination, self.record.reward = "harness_error", None
        self.record.verdict = None
        if not self.record.error:
            self.record.error = f"{type(exc).__name__}: {exc}"

    def _finish(self) -> None:
        self.record.seconds = time.monotonic() - self.started
        with self._outcome:
            self.graded.set()
        self.client.events.put(Finished(self.record))

    def _kill(self) -> None:
        """Kill the container's processes (a command, the verdict): the loop fails at once, and
        the container's removal follows as usual."""
        with self._box_lock:
            box = self._box
        if box is not None:
            with contextlib.suppress(docker.errors.DockerException, OSError):
                box.container.kill()
