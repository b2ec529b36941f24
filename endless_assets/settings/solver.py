"""Settings of stage IV (the solver, its episodes) and of the keep rule over its pass rates."""

from __future__ import annotations

from dataclasses import dataclass

from endless_assets.settings.declare import setting


@dataclass(frozen=True)
class SolverSettings:
    solver: str = setting(
        "oracle", "ENDLESS_SOLVER", "stage IV policy", choices=("oracle", "noop", "chat")
    )
    solver_model: str = setting("", "ENDLESS_SOLVER_MODEL", "model name for the chat solver")
    # Its key: ENDLESS_SOLVER_API_KEY, else OPENAI_API_KEY.
    solver_base_url: str = setting(
        "",
        "ENDLESS_SOLVER_BASE_URL",
        "OpenAI-compatible endpoint of the solver (empty: the generator's)",
        fallback_env="OPENAI_BASE_URL",
        operational=True,
    )
    solver_temperature: float = setting(1.0, "ENDLESS_SOLVER_TEMPERATURE", "solver temperature")
    k: int = setting(0, "ENDLESS_K", "attempts per task in stage IV (0: 1 for oracle, 16 for chat)")
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


@dataclass(frozen=True)
class KeepSettings:
    min_pass_rate: float = setting(0.0, "ENDLESS_MIN_PASS_RATE", "keep band: lowest pass rate")
    max_pass_rate: float = setting(1.0, "ENDLESS_MAX_PASS_RATE", "keep band: highest pass rate")
    min_mutation_score: float = setting(
        0.0, "ENDLESS_MIN_MUTATION_SCORE", "keep band: lowest share of ablations the test rejects"
    )
