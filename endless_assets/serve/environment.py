"""The served environment: OpenEnv's `Environment` with reset, step, state and close, and its task
API (splits, tasks), over the hub's tasks and engine pool.

OpenEnv's server makes one instance per WebSocket session (EnvClient's) and runs its calls on a
thread of that session's own; its stateless HTTP routes make one per request. An instance runs
one episode at a time (serve/episode.py):

- `reset(task_id=..., index=..., seed=..., episode_id=..., model=...)` ends the session's
  episode if one is running (abandoned), picks a task (named, by index, drawn with the seed, or
  by the server's sampler), starts its container and returns the instruction;
- `step({"command": ...})` runs one command in the persistent shell; `step({"done": true})`,
  the step budget or the time budget ends the episode and the grader's reward comes back;
- an infrastructure failure comes back as `infra_error` (done, no reward);
- an episode whose session made no call for the server's idle time is abandoned and its
  container removed (`reap_if_idle`, called by the hub's reaper); the session stays, and its next
  step says so;
- `close` (disconnect, server stop) abandons the episode and removes its container.

A request the environment refuses raises one of serve/errors.py's errors, which name what is
wrong: over HTTP a 4xx (or 503), over the WebSocket OpenEnv's EXECUTION_ERROR.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from endless_assets.agent.episode import RESULT_FIELDS, observation_text
from endless_assets.agent.policies import Action
from endless_assets.models import Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.serve.episode import Finished, Ready, ServedEpisode
from endless_assets.serve.errors import BadRequest, NotNow, Unavailable
from endless_assets.serve.hub import Hub
from endless_assets.serve.models import TerminalAction, TerminalObservation, TerminalState
from endless_assets.serve.tasks import SPLIT, SelectionError

ENV_NAME = "endless"


class EnvironmentClosed(Unavailable):
    """The session was closed (the server is stopping)."""


def _check_reset(**fields: Any) -> None:
    """A reset's fields, each of its type (the WebSocket passes them as the client sent them)."""
    kinds = {"seed": int, "index": int, "task_id": str, "split": str, "episode_id": str}
    for name, kind in kinds.items():
        value = fields[name]
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise BadRequest(f"reset's {name} must be {kind.__name__}, got {value!r}")
    if fields["model"] is not None and not isinstance(fields["model"], str):
        raise BadRequest(f"reset's model must be a string, got {fields['model']!r}")
    if fields["split"] is not None:
        _check_split(fields["split"])


def _check_split(split: str) -> None:
    if split != SPLIT:
        raise SelectionError(f"unknown split {split!r}: this server has {SPLIT!r}")


class NoEpisode(NotNow):
    """A step before any reset (over HTTP: OpenEnv's /step makes an environment per request)."""


class TerminalEnvironment(Environment[TerminalAction, TerminalObservation, TerminalState]):
    SUPPORTS_CONCURRENT_SESSIONS = True  # one container and one shell per session, no sharing

    def __init__(self, hub: Hub) -> None:
        super().__init__()
        self.hub = hub
        self.session_id = uuid.uuid4().hex
        self.episode: ServedEpisode | None = None
        self._reported = 0  # turns whose result went to the client
        self._opened = False
        self._closed = False
        self._calls = 0  # reset and step calls running now
        self._last_call = time.monotonic()  # when the last one ended
        self._lock = threading.Lock()

    # -- the protocol --------------------------------------------------------------------------
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        index: int | None = None,
        split: str | None = None,
        model: str | None = "",
        **kwargs: Any,
    ) -> TerminalObservation:
        _check_reset(
            seed=seed, episode_id=episode_id, task_id=task_id, index=index, split=split, model=model
        )
        with self._call():
            task = self.hub.tasks.pick(task_id, seed, index)  # (a bad one ends no episode)
            self._end_episode("the client reset the session")
            return self._start(task, seed, episode_id, model or "")

    def _start(
        self, task: Task, seed: int | None, episode_id: str | None, model: str
    ) -> TerminalObservation:
        if not self._opened:
            self.hub.open_session(self)
            self._opened = True
        image, unbuilt = "", None
        try:
            image = self.hub.image(task)
        except SandboxError as exc:  # the engine, or a task image that no longer builds
            unbuilt = exc
        episode = ServedEpisode(
            self.hub.sandbox,
            image,
            task,
            self.hub.limits,
            session_id=self.session_id,
            episode_id=episode_id or uuid.uuid4().hex,
            model=model,
            seed=seed,
            labels={"role": "serve", "task_id": task.task_id, "session": self.session_id},
            on_end=self.hub.episode_ended,
        )
        self.episode, self._reported = episode, 0
        if unbuilt is not None:
            return self._observe(episode.fail_before_start(unbuilt))
        self.hub.episode_started(episode)
        return self._observe(episode.start())

    def step(
        self, action: TerminalAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TerminalObservation:
        with self._call():
            episode = self.episode
            if episode is None:
                raise NoEpisode("no episode in this session yet: call reset first")
            if episode.result is not None:
                raise NotNow(
                    f"episode {episode.episode_id} is over ({episode.termination}): call reset"
                )
            if action.done:
                return self._observe(episode.send(Action("done")))
            return self._observe(episode.send(Action("command", command=action.command)))

    def reap_if_idle(self, idle_seconds: float) -> bool:
        """Abandon the running episode (its container removed) when the session made no call for
        `idle_seconds`: the hub's reaper. The session stays open: its next step is told the
        episode is over, its next reset starts another. True if it was abandoned."""
        with self._lock:
            episode = self.episode
            if self._closed or self._calls or episode is None:
                return False
            if episode.graded.is_set() or episode.abandoned:
                return False
            idle = time.monotonic() - self._last_call
            if idle <= idle_seconds:
                return False
            episode.abandon(
                wait=False,
                reason=f"the session made no call for {idle:.0f} s (endless serve --idle-seconds "
                f"{idle_seconds:g}): the episode was abandoned and its container removed",
            )
            return True

    @property
    def state(self) -> TerminalState:
        episode = self.episode
        if episode is None:
            return TerminalState(session_id=self.session_id, status=self._status(None))
        return TerminalState(
            episode_id=episode.episode_id,
            step_count=episode.steps,
            session_id=self.session_id,
            task_id=episode.task.task_id,
            batch=episode.task.batch,
            status=self._status(episode),
            steps_left=self._steps_left(episode),
            reward=None if episode.reward is None else float(episode.reward),
            termination=episode.termination,
            infra_error=episode.infra_error,
        )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.hub.close_session(self)  # first: a session waiting for the place need not wait more
        self._end_episode(
            "the server is stopping" if self.hub.closing else "the client closed its session"
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=ENV_NAME,
            description=(
                f"{len(self.hub.tasks)} verified terminal tasks: a shell command per step, "
                "graded by the task's completion test when the agent is done"
            ),
            version=importlib.metadata.version("endless"),
        )

    # -- OpenEnv's task API (metadata only: never a test or a solution) ------------------------
    def list_splits(self) -> list[str]:
        return [SPLIT]

    def num_tasks(self, split: str) -> int:
        _check_split(split)
        return len(self.hub.tasks)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self.get_task_range(split)

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        _check_split(split)
        if not 0 <= index < len(self.hub.tasks):
            raise SelectionError(f"index {index} is outside 0..{len(self.hub.tasks) - 1}")
        return self.hub.tasks.describe(index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        _check_split(split)
        return [self.hub.tasks.describe(i) for i in range(len(self.hub.tasks))[start:stop]]

    # -- helpers -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _call(self) -> Iterator[None]:
        """A reset or step: the session is busy (never idle) until it returns."""
        with self._lock:
            if self._closed:
                raise EnvironmentClosed("this session was closed: the server is stopping")
            self._calls += 1
        try:
            yield
        finally:
            with self._lock:
                self._calls -= 1
                self._last_call = time.monotonic()

    def _end_episode(self, reason: str) -> None:
        episode = self.episode
        if episode is not None and not episode.ended.is_set():
            episode.abandon(reason=reason)

    def _status(self, episode: ServedEpisode | None) -> str:
        if self._closed:
            return "closed"
        if episode is None:
            return "idle"
        return "over" if episode.termination else "running"  # (reaped: over before it is read)

    def _steps_left(self, episode: ServedEpisode) -> int:
        return max(0, self.hub.limits.max_turns - episode.record.n_turns)

    def _common(self, episode: ServedEpisode) -> dict[str, Any]:
        return {
            "task_id": episode.task.task_id,
            "episode_id": episode.episode_id,
            "session_id": self.session_id,
            "steps": episode.steps,
            "steps_left": self._steps_left(episode),
            "seconds_left": round(episode.seconds_left, 3),
            "command_timeout": self.hub.limits.command_timeout,
        }

    def _observe(self, event: Ready | Finished) -> TerminalObservation:
        episode = self.episode
        assert episode is not None
        fields = self._common(episode)
        turns = episode.record.turns
        last = turns[-1] if len(turns) > self._reported else None
        self._reported = len(turns)
        shown = isinstance(event, Ready) or episode.reward is not None  # (not a failed one)
        before = ""  # what the command just sent showed, when a budget then ended the episode
        if shown and last is not None and last.kind == "command":
            before = observation_text(last.result(), self.hub.limits.output_cap) + "\n"
            fields.update(
                {name: getattr(last, name) for name in RESULT_FIELDS if name != "seconds"}
            )
        if isinstance(event, Ready):
            text = episode.task.instruction if event.turn is None else event.observation or ""
            return TerminalObservation(text=text, done=False, reward=None, **fields)
        termination, reward = episode.termination, episode.reward
        if termination == "abandoned":  # (idle, or the server stopped under a pending step)
            reason = episode.abandon_reason or "the session closed before the episode ended"
            text = f"[episode abandoned, no reward: {reason}. Reset to start another.]"
            reward, fields["metadata"] = None, {"abandoned": reason}
        elif reward is None:
            reason = fields["infra_error"] = episode.infra_error or "unknown"
            text, fields["metadata"] = (
                f"[infra error, no reward: {reason}]",
                {"infra_error": reason},
            )
        else:
            verdict = fields["verdict"] = (
                episode.record.verdict.summary() if episode.record.verdict else ""
            )
            text = f"{before}[episode over ({termination}); verdict: {verdict}; reward {reward}]"
        return TerminalObservation(
            text=text,
            done=True,
            reward=None if reward is None else float(reward),
            termination=termination,
            **fields,
        )
