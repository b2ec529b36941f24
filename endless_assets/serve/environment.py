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
- `close` (disconnect, idle reaping, server stop) abandons the episode and removes its container.
"""

from __future__ import annotations

import importlib.metadata
import threading
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from endless_assets.agent.episode import observation_text
from endless_assets.agent.policies import Action
from endless_assets.sandbox.containers.shell import CommandResult
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.serve.episode import Finished, Ready, ServedEpisode
from endless_assets.serve.hub import Hub
from endless_assets.serve.models import TerminalAction, TerminalObservation, TerminalState
from endless_assets.serve.tasks import SPLIT, SelectionError

ENV_NAME = "endless"


class EnvironmentClosed(RuntimeError):
    """The session was closed (reaped when idle, or the server is stopping)."""


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
        self._lock = threading.Lock()

    # -- the protocol --------------------------------------------------------------------------
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        index: int | None = None,
        split: str | None = None,
        model: str = "",
        **kwargs: Any,
    ) -> TerminalObservation:
        self._check_open()
        self._end_episode()
        if split not in (None, SPLIT):
            raise SelectionError(f"unknown split {split!r}: this server has {SPLIT!r}")
        task = self.hub.tasks.pick(task_id, seed, index)
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
            model=str(model or ""),
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
        self._check_open()
        episode = self.episode
        if episode is None:
            raise RuntimeError("no episode in this session yet: call reset first")
        if episode.result is not None:
            raise RuntimeError(
                f"episode {episode.episode_id} is over ({episode.termination}): call reset"
            )
        if action.done:
            return self._observe(episode.send(Action("done")))
        return self._observe(episode.send(Action("command", command=action.command)))

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
        self.hub.close_session(self)  # first: a session waiting for the slot need not wait more
        self._end_episode()

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
        self._check_split(split)
        return len(self.hub.tasks)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self.get_task_range(split)

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        self._check_split(split)
        if not 0 <= index < len(self.hub.tasks):
            raise IndexError(f"index {index} is outside 0..{len(self.hub.tasks) - 1}")
        return self.hub.tasks.describe(index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        self._check_split(split)
        return [self.hub.tasks.describe(i) for i in range(len(self.hub.tasks))[start:stop]]

    # -- helpers -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentClosed(
                "this session was closed (idle for longer than the server's --idle-seconds, or "
                "the server is stopping): open a new one"
            )

    def _check_split(self, split: str) -> None:
        if split != SPLIT:
            raise ValueError(f"unknown split {split!r}: this server has {SPLIT!r}")

    def _end_episode(self) -> None:
        episode = self.episode
        if episode is not None and not episode.ended.is_set():
            episode.abandon()

    def _status(self, episode: ServedEpisode | None) -> str:
        if self._closed:
            return "closed"
        if episode is None:
            return "idle"
        return "over" if episode.result is not None else "running"

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
            result = CommandResult(
                last.output,
                last.exit_code,
                last.timed_out,
                last.original_bytes,
                last.truncated,
                last.seconds,
                note=last.note,
            )
            before = observation_text(result, self.hub.limits.output_cap) + "\n"
            fields.update(
                output=last.output,
                exit_code=last.exit_code,
                timed_out=last.timed_out,
                truncated=last.truncated,
                original_bytes=last.original_bytes,
                note=last.note,
            )
        if isinstance(event, Ready):
            text = episode.task.instruction if event.turn is None else event.observation or ""
            return TerminalObservation(text=text, done=False, reward=None, **fields)
        termination, reward = episode.termination, episode.reward
        if reward is None:  # (abandoned under a pending step: the server stopped)
            reason = episode.infra_error or "the session closed before the episode ended"
            return TerminalObservation(
                text=f"[infra error, no reward: {reason}]",
                done=True,
                reward=None,
                termination=termination,
                infra_error=reason,
                metadata={"infra_error": reason},
                **fields,
            )
        verdict = episode.record.verdict.summary() if episode.record.verdict else ""
        return TerminalObservation(
            text=f"{before}[episode over ({termination}); verdict: {verdict}; reward {reward}]",
            done=True,
            reward=float(reward),
            termination=termination,
            verdict=verdict,
            **fields,
        )
