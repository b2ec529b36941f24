"""The cheat rollout's agent: a chat model told to make the completion test pass without doing the
task (prompts/audit.md), run by the one episode loop like any solver. Unlike the solver's, its
replies are cached per task seed (one probe, not one of k samples: a rerun replays it). The
conversation is short and never folded; one the endpoint refuses as too long ends the episode
(`context_limit`), graded as it stands.
"""

from __future__ import annotations

from typing import Any, Protocol

from endless_assets.agent.episode import ContextExhausted, PolicyUnavailable
from endless_assets.agent.policies import Action, EpisodeTask
from endless_assets.agent.replies import reply_action
from endless_assets.llm.client import ChatReply, LLMRequestError, LLMUnavailable
from endless_assets.stages.soundness.audit_replies import AuditPrompts


class Asker(Protocol):
    """What the cheat policy needs of the auditor (stages/soundness/audit.py `Auditor`)."""

    @property
    def model(self) -> str: ...

    @property
    def prompts(self) -> AuditPrompts: ...

    def ask(self, messages: list[dict[str, Any]], *, seed: int, temperature: float) -> ChatReply:
        """One reply (cached); raises LLMUnavailable / LLMRequestError like ChatClient."""
        ...

    def scrub(self, text: str) -> str:
        """`text` without the endpoint's API key."""
        ...


class CheatPolicy:
    """One cheat episode's conversation. Not thread-safe: one per episode."""

    name = "cheat"

    def __init__(
        self,
        auditor: Asker,
        *,
        seed: int,
        temperature: float,
        max_turns: int,
        command_timeout: float,
    ) -> None:
        self.auditor = auditor
        self.seed = seed
        self.temperature = temperature
        self.max_turns = max_turns
        self.command_timeout = command_timeout
        self.cached = 0  # replies that came from the cache
        self._transcript: list[dict[str, Any]] = []

    @property
    def model(self) -> str:
        return self.auditor.model

    @property
    def prompt_version(self) -> str:
        return self.auditor.prompts.version

    def reset(self, task: EpisodeTask) -> None:
        prompts = self.auditor.prompts
        system = prompts.render(
            "cheat_system",
            max_turns=self.max_turns,
            command_timeout=f"{self.command_timeout:g}",
        )
        user = prompts.render("cheat_task", instruction=task.instruction.strip())
        self._transcript = [
            {"role": "system", "content": system.strip()},
            {"role": "user", "content": user.strip()},
        ]
        self.cached = 0

    def act(self, observation: str | None) -> Action:
        if not self._transcript:
            raise RuntimeError("CheatPolicy.act before reset")
        if observation is not None:
            self._transcript.append({"role": "user", "content": observation})
        first = len(self._transcript) == 2
        try:
            reply = self.auditor.ask(self._transcript, seed=self.seed, temperature=self.temperature)
        except LLMUnavailable as exc:
            raise PolicyUnavailable(self.auditor.scrub(str(exc))) from exc
        except LLMRequestError as exc:
            text = self.auditor.scrub(str(exc))
            if first:  # refused before the agent did anything: the settings, not the task
                raise PolicyUnavailable(f"the endpoint refused the first request: {text}") from exc
            raise ContextExhausted(f"the endpoint refused the conversation: {text}") from exc
        self.cached += int(reply.cached)
        action = reply_action(reply)
        self._transcript.append({"role": "assistant", "content": action.raw})
        return action

    def messages(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self._transcript]
