"""The episode loop, the same for every policy: act, observe, repeat; then grade.

The container is fresh for every episode and removed afterwards whatever happened. The tests
are copied in only after the loop ends (see sandbox/grading/verdict.py). Infrastructure failures are
`harness_error` with no reward, never a reward of 0.
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from endless_assets.agent.policies import Action, EpisodeTask, Policy
from endless_assets.agent.replies import FORMAT_HINT
from endless_assets.llm.pacing import QueueClock, queue_clock
from endless_assets.models import EpisodeLimits
from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.containers.services import ServiceFailed
from endless_assets.sandbox.containers.shell import CommandResult, ShellSession
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.grading.verdict import Verdict, start_grader, stop_agent
from endless_assets.sandbox.sandbox import Sandbox

TERMINATIONS = ("done", "turn_limit", "time_limit", "context_limit", "harness_error")


class PolicyUnavailable(Exception):
    """The policy could not act for reasons outside the agent (endpoint down after retries)."""


class ContextExhausted(Exception):
    """The conversation no longer fits the model's context, even after folding old turns."""


# What a turn keeps of its command's result (sandbox/containers/shell.py's CommandResult).
RESULT_FIELDS = (
    "output",
    "exit_code",
    "timed_out",
    "original_bytes",
    "truncated",
    "note",
    "seconds",
)


@dataclass
class Turn:
    index: int
    kind: str  # command | done | invalid
    thought: str = ""
    command: str = ""
    output: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    original_bytes: int = 0
    truncated: bool = False
    note: str = ""
    error: str = ""
    seconds: float = 0.0  # the command's own time in the container
    policy_seconds: float = 0.0  # time the policy took to decide
    tokens_in: int = 0
    tokens_out: int = 0
    folded_turns: int = 0  # earlier turns folded into a summary in this turn's request
    finish_reason: str = ""

    def record(self, result: CommandResult) -> None:
        for name in RESULT_FIELDS:
            setattr(self, name, getattr(result, name))

    def result(self) -> CommandResult:
        return CommandResult(**{name: getattr(self, name) for name in RESULT_FIELDS})


@dataclass
class Rollout:
    task_id: str
    policy: str
    model: str
    reward: int | None
    termination: str
    turns: list[Turn] = field(default_factory=list)
    verdict: Verdict | None = None
    error: str = ""
    seconds: float = 0.0
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt_version: str = ""
    queue_seconds: float = 0.0  # waiting for a request slot in our own LLM client: not counted
    # A harness error the sandbox engine caused (not the policy's endpoint): worth a retry,
    # on another engine of a pool.
    engine_failed: bool = False

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    @property
    def tokens_in(self) -> int:
        return sum(t.tokens_in for t in self.turns)

    @property
    def tokens_out(self) -> int:
        return sum(t.tokens_out for t in self.turns)

    def trajectory(self) -> list[dict[str, Any]]:
        return [asdict(t) for t in self.turns]


def observation_text(result: CommandResult, output_cap: int) -> str:
    """What the agent sees after a command: output, exit code, and what the harness did."""
    parts = [result.output]
    if result.truncated:
        parts.append(
            f"\n[output truncated: showing the first {output_cap} characters of "
            f"{result.original_bytes} bytes]"
        )
    if result.timed_out:
        parts.append(f"\n[command timed out: {result.note or 'interrupted'}]")
    elif result.note:
        parts.append(f"\n[{result.note}]")
    if result.exit_code is not None:
        code = str(result.exit_code)
    else:
        code = "none (timed out)" if result.timed_out else "unknown"
    parts.append(f"\n[exit code: {code}]")
    return "".join(parts)


def invalid_observation(error: str) -> str:
    """What the agent sees after a reply that could not be used (the turn is spent)."""
    return (
        f"[your reply could not be used: {error}. {FORMAT_HINT} when the task is complete. "
        "This turn was spent.]"
    )


def run_episode(
    sandbox: Sandbox,
    image: str,
    task: EpisodeTask,
    policy: Policy,
    completion_test: str,
    limits: EpisodeLimits = EpisodeLimits(),
    labels: dict[str, str] | None = None,
    warm: bool = False,
) -> Rollout:
    """One episode in a fresh container of `image`, graded, and the container removed; `warm`:
    a container the sandbox started ahead (`Sandbox.expect`), when it has one.

    The sandbox's CPU slot (sandbox.CpuSlot, taken by the sandbox) bounds the CPU-heavy moments
    (starting the container, running pytest) across concurrent episodes, so many episodes can
    wait on a model while a small machine stays responsive.
    """
    started = time.monotonic()
    try:
        with sandbox.container(image, labels=labels, warm=warm) as container:
            return run_episode_in(container, task, policy, completion_test, limits, started)
    except SandboxError as exc:
        return _harness_error(task, policy, exc, started)


def run_episode_in(
    container: TaskContainer,
    task: EpisodeTask,
    policy: Policy,
    completion_test: str,
    limits: EpisodeLimits = EpisodeLimits(),
    started: float | None = None,
    *,
    learn: bool = False,
    rollout: Rollout | None = None,
) -> Rollout:
    """One episode in an existing container (the caller owns and removes it), then graded. `learn`:
    the reference solution's episode in the validation stage (grade.run_pytest). `rollout`: the
    record to fill in, when the caller reads its turns as they happen (a served episode)."""
    started = time.monotonic() if started is None else started
    if rollout is None:
        rollout = Rollout(task.task_id, policy.name, policy.model, reward=None, termination="done")
    rollout.prompt_version = policy.prompt_version
    queued = QueueClock()
    try:
        policy.reset(task)
        # The grader is resident before the agent's first command: at the verdict it can stop
        # every agent process without needing a new exec or a fork (a fork bomb or a memory hog
        # left behind cannot keep the grade from happening).
        start_grader(container, completion_test)
        if container.services and (dead := container.services.dead()):  # not the agent's doing
            raise ServiceFailed(f"service {', '.join(dead)} stopped before the agent began")
        stop = functools.partial(stop_agent, container)
        with (
            ShellSession(
                container, output_cap=limits.output_cap, stop_agent=stop, lazy=True
            ) as shell,
            queue_clock(queued),
        ):
            rollout.termination = _loop(shell, policy, rollout, limits, started, queued)
        verdict = run_pytest(container, completion_test, timeout=limits.test_timeout, learn=learn)
        rollout.verdict = verdict
        rollout.reward = 1 if verdict.passed else 0
    except (SandboxError, PolicyUnavailable) as exc:
        rollout.termination = "harness_error"
        rollout.reward = None
        rollout.error = f"{type(exc).__name__}: {exc}"
        rollout.engine_failed = isinstance(exc, SandboxError)
    rollout.messages = policy.messages()
    rollout.seconds = time.monotonic() - started
    rollout.queue_seconds = queued.seconds
    return rollout


def _harness_error(task: EpisodeTask, policy: Policy, exc: Exception, started: float) -> Rollout:
    return Rollout(
        task.task_id,
        policy.name,
        policy.model,
        reward=None,
        termination="harness_error",
        error=f"{type(exc).__name__}: {exc}",
        seconds=time.monotonic() - started,
        prompt_version=policy.prompt_version,
        engine_failed=isinstance(exc, SandboxError),
    )


def _loop(
    shell: ShellSession,
    policy: Policy,
    rollout: Rollout,
    limits: EpisodeLimits,
    started: float,
    queued: QueueClock,
) -> str:
    """The turns. The episode clock is the agent's time: waits for a slot in our own LLM client
    (`queued`) are not counted, and are recorded as `queue_seconds`."""

    def remaining() -> float:
        return limits.episode_seconds - (time.monotonic() - started - queued.seconds)

    observation: str | None = None
    for index in range(limits.max_turns):
        if remaining() <= 0:
            return "time_limit"
        t0 = time.monotonic()
        try:
            action: Action = policy.act(observation)
        except ContextExhausted as exc:
            rollout.error = str(exc)
            return "context_limit"
        turn = Turn(
            index=index,
            kind=action.kind,
            thought=action.thought,
            command=action.command,
            error=action.error,
            policy_seconds=time.monotonic() - t0,
            tokens_in=action.tokens_in,
            tokens_out=action.tokens_out,
            folded_turns=action.folded_turns,
            finish_reason=action.finish_reason,
        )
        rollout.turns.append(turn)
        if action.kind == "done":
            return "done"
        if action.kind == "invalid":
            observation = invalid_observation(action.error)
            continue
        left = remaining()
        if left <= 0:
            return "time_limit"
        result = shell.run(action.command, timeout=min(limits.command_timeout, left))
        turn.record(result)
        observation = observation_text(result, limits.output_cap)
    if remaining() <= 0:
        return "time_limit"
    return "turn_limit"
