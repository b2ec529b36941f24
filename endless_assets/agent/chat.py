"""The chat policy: any OpenAI-compatible model as a terminal agent.

Each turn the model sees the conversation so far (older turns folded into a summary when it
would not fit, see context.py), thinks, and emits exactly one `<command>` or
`<action>done</action>` (replies.py). An unusable reply becomes an `invalid` action: it costs the
turn and the episode loop answers with a corrective observation.

Failures are classified where they happen: the endpoint unreachable after the client's retries
(or refusing the request for a reason other than its length, or refusing the first request of
the episode, before the agent did anything) raises `PolicyUnavailable`, so the rollout is a
`harness_error` with no reward; a conversation that does not fit even with every earlier turn
folded raises `ContextExhausted` (`context_limit`).

Replies are never cached: k attempts of one task must be independent samples.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from endless_assets.agent.context import (
    Message,
    TokenEstimator,
    choose_fold,
    fold,
    turns_in,
)
from endless_assets.agent.episode import ContextExhausted, PolicyUnavailable
from endless_assets.agent.policies import Action, EpisodeTask
from endless_assets.agent.replies import reply_action
from endless_assets.llm.client import ChatClient, ChatReply, LLMRequestError, LLMUnavailable
from endless_assets.llm.preflight import require_model
from endless_assets.settings import Settings, SettingsError

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
# How endpoints word "the prompt does not fit" (OpenAI and its error code, vLLM, llama.cpp,
# Anthropic, ...). A refusal without such wording, e.g. "max_tokens is too large" for a
# turn_tokens the model does not support, is not the conversation's length: folding cannot help.
_CONTEXT_WORDING = (
    "context length",
    "context_length",
    "context size",
    "context window",
    "maximum context",
    "too many tokens in the prompt",
    "prompt is too long",
    "reduce the length",
)


@dataclass(frozen=True)
class SolverPrompts:
    """The system prompt and the first user message, from prompts/solver_*.md."""

    system: str
    task: str

    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR) -> SolverPrompts:
        try:
            return cls(
                system=(directory / "solver_system.md").read_text(encoding="utf-8"),
                task=(directory / "solver_task.md").read_text(encoding="utf-8"),
            )
        except OSError as exc:
            raise SettingsError(f"cannot read the solver prompts in {directory}: {exc}") from exc

    @property
    def version(self) -> str:
        """A hash of both templates: rows record which prompts produced them."""
        digest = hashlib.sha256(f"{self.system}\0{self.task}".encode()).hexdigest()
        return f"solver-{digest[:12]}"

    def render_system(self, config: ChatConfig) -> str:
        return _fill(
            self.system,
            max_turns=config.max_turns,
            output_cap=config.output_cap,
            command_timeout=f"{config.command_timeout:g}",
        ).strip()

    def render_task(self, instruction: str) -> str:
        return _fill(self.task, instruction=instruction.strip()).strip()


def _fill(template: str, **values: Any) -> str:
    # `{{name}}` placeholders: shell snippets in prompts keep their own braces and dollars.
    for name, value in values.items():
        template = template.replace("{{" + name + "}}", str(value))
    return template


@dataclass(frozen=True)
class ChatConfig:
    model: str
    temperature: float = 1.0
    turn_tokens: int = 4096  # max tokens per reply
    context_tokens: int = 32768  # prompt + reply must fit in this
    max_turns: int = 16  # told to the model; the episode loop enforces it
    output_cap: int = 50_000
    command_timeout: float = 60.0

    @property
    def prompt_budget(self) -> int:
        return self.context_tokens - self.turn_tokens


class ChatPolicy:
    """One episode's conversation with a chat model. Not thread-safe: one per episode."""

    name = "chat"

    def __init__(
        self, client: ChatClient, config: ChatConfig, prompts: SolverPrompts | None = None
    ) -> None:
        if config.prompt_budget < 1:
            raise SettingsError(
                f"context_tokens ({config.context_tokens}) must be larger than turn_tokens "
                f"({config.turn_tokens}): the reply has to fit in the context too"
            )
        self.client = client
        self.config = config
        self.prompts = prompts or SolverPrompts.load()
        self._transcript: list[Message] = []
        self._folded = 0
        self._estimator = TokenEstimator()

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def prompt_version(self) -> str:
        return self.prompts.version

    @classmethod
    def factory_from_settings(cls, settings: Settings) -> Callable[[], ChatPolicy]:
        """One client (thread-safe, shared pacing) for all the episodes of a run. The model is
        checked against the endpoint's listing first (llm/preflight.py), and the context the
        endpoint enforces, where it says, replaces `context_tokens`."""
        endpoint, check = require_model(settings, "solver")
        config = ChatConfig(
            model=settings.solver.model,
            temperature=settings.solver.temperature,
            turn_tokens=settings.solver.turn_tokens,
            context_tokens=check.context_tokens or settings.solver.context_tokens,
            max_turns=settings.solver.max_turns,
            output_cap=settings.solver.output_cap,
            command_timeout=settings.solver.command_timeout,
        )
        client = ChatClient(endpoint)  # no reply cache: attempts must be independent samples
        prompts = SolverPrompts.load()
        cls(client, config, prompts)  # fail now on a bad configuration, not in every episode
        return lambda: cls(client, config, prompts)

    # -- the Policy protocol -----------------------------------------------------------------
    def reset(self, task: EpisodeTask) -> None:
        self._transcript = [
            {"role": "system", "content": self.prompts.render_system(self.config)},
            {"role": "user", "content": self.prompts.render_task(task.instruction)},
        ]
        self._folded = 0
        self._estimator = TokenEstimator()

    def act(self, observation: str | None) -> Action:
        if not self._transcript:
            raise RuntimeError("ChatPolicy.act before reset")
        if observation is not None:
            self._transcript.append({"role": "user", "content": observation})
        reply, folded = self._complete()
        action = reply_action(reply, folded)
        self._transcript.append({"role": "assistant", "content": action.raw})
        return action

    def messages(self) -> list[dict[str, Any]]:
        """The transcript: every message exactly as sent and received (context.py)."""
        return [dict(m) for m in self._transcript]

    # -- internals -----------------------------------------------------------------------------
    def _complete(self) -> tuple[ChatReply, int]:
        """Send the next request, folded to fit; returns the reply and the turns folded."""
        budget = self.config.prompt_budget
        while True:
            folded = choose_fold(self._transcript, self._folded, budget, self._estimator)
            if folded is None:
                need = self._estimator.tokens(fold(self._transcript, turns_in(self._transcript)))
                raise ContextExhausted(
                    f"the conversation needs about {need} tokens even with every earlier turn "
                    f"folded, more than context_tokens - turn_tokens = {budget}"
                )
            request = fold(self._transcript, folded)
            try:
                reply = self.client.complete(
                    request,
                    temperature=self.config.temperature,
                    max_tokens=self.config.turn_tokens,
                    use_cache=False,
                )
            except LLMUnavailable as exc:
                raise PolicyUnavailable(self._scrub(str(exc))) from exc
            except LLMRequestError as exc:
                text = self._scrub(str(exc))
                if not any(words in text.lower() for words in _CONTEXT_WORDING):
                    raise PolicyUnavailable(text) from exc
                total = turns_in(self._transcript)
                if total == 0:
                    # Nothing the agent did yet: the endpoint refuses what every episode starts
                    # with, so the settings do not fit this model (a harness error, rerun).
                    raise PolicyUnavailable(
                        f"the endpoint refused the first request of the episode (check "
                        f"context_tokens and turn_tokens against the model): {text}"
                    ) from exc
                if folded >= total:
                    raise ContextExhausted(
                        f"the endpoint refused the prompt as too long with every earlier turn "
                        f"folded: {text}"
                    ) from exc
                # Our estimate was low: trust it less and fold at least half of what is left.
                self._estimator.distrust()
                self._folded = folded + max(1, math.ceil((total - folded) / 2))
                continue
            self._folded = folded
            self._estimator.calibrate(request, reply.tokens_in)
            return reply, folded

    def _scrub(self, text: str) -> str:
        """Error texts end up in rows and logs: never let a key a server echoed get there."""
        key = self.client.endpoint.api_key()
        if len(key) >= 8:
            text = text.replace(key, "[api key]")
        return text
