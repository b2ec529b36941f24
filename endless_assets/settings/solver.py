"""Settings of the solver stage (the solver, its episodes) and of the keep rule over its pass
rates."""

from __future__ import annotations

from dataclasses import dataclass

from endless_assets.models import EpisodeLimits, KeepRule
from endless_assets.settings.declare import endpoint, setting


@dataclass(frozen=True)
class SolverSettings:
    policy: str = setting(
        "oracle",
        "ENDLESS_SOLVER",
        "the solver stage policy",
        choices=("oracle", "noop", "chat"),
        name="solver",
    )
    model: str = setting(
        "", "ENDLESS_SOLVER_MODEL", "model name for the chat solver", name="solver_model"
    )
    base_url: str = endpoint(  # (its key: ENDLESS_SOLVER_API_KEY, else OPENAI_API_KEY)
        "ENDLESS_SOLVER_BASE_URL",
        "OpenAI-compatible endpoint of the solver (empty: the generator's)",
        fallback_env="OPENAI_BASE_URL",
        name="solver_base_url",
    )
    temperature: float = setting(
        1.0, "ENDLESS_SOLVER_TEMPERATURE", "solver temperature", name="solver_temperature"
    )
    k: int = setting(
        0, "ENDLESS_K", "attempts per task in the solver stage (0: 1 for oracle, 16 for chat)"
    )
    max_turns: int = setting(16, "ENDLESS_MAX_TURNS", "agent turns per episode")
    command_timeout: float = setting(60.0, "ENDLESS_COMMAND_TIMEOUT", "seconds per agent command")
    episode_seconds: float = setting(900.0, "ENDLESS_EPISODE_SECONDS", "wall clock per episode")
    output_cap: int = setting(50000, "ENDLESS_OUTPUT_CAP", "characters of output per observation")
    turn_tokens: int = setting(4096, "ENDLESS_TURN_TOKENS", "max tokens per solver reply")
    context_tokens: int = setting(32768, "ENDLESS_CONTEXT_TOKENS", "solver context budget")
    rollout_workers: int = setting(
        0,
        "ENDLESS_ROLLOUT_WORKERS",
        "episodes in parallel (0: workers for oracle/noop, 16 for chat)",
        operational=True,
    )

    @property
    def attempts(self) -> int:
        """k, with 0 meaning the policy's default: 1 for deterministic policies, 16 for chat."""
        if self.k:
            return self.k
        return 16 if self.policy == "chat" else 1

    def episode_workers(self, workers: int) -> int:
        """Episodes in parallel in the solver stage (`workers`: the run's): a chat model waits on
        the network, so more."""
        if self.rollout_workers:
            return self.rollout_workers
        return 16 if self.policy == "chat" else workers

    def limits(self) -> EpisodeLimits:
        """What one episode may take: turns, seconds per command and in all, output per
        observation."""
        return EpisodeLimits(
            max_turns=self.max_turns,
            command_timeout=self.command_timeout,
            episode_seconds=self.episode_seconds,
            output_cap=self.output_cap,
        )


@dataclass(frozen=True)
class KeepSettings:
    min_pass_rate: float = setting(0.0, "ENDLESS_MIN_PASS_RATE", "keep band: lowest pass rate")
    max_pass_rate: float = setting(1.0, "ENDLESS_MAX_PASS_RATE", "keep band: highest pass rate")
    min_mutation_score: float = setting(
        0.0, "ENDLESS_MIN_MUTATION_SCORE", "keep band: lowest share of ablations the test rejects"
    )

    def rule(self) -> KeepRule:
        """The keep band over pass rates (the mutation score is the soundness stage's)."""
        return KeepRule(self.min_pass_rate, self.max_pass_rate)
