"""Settings of the task generator (the describe, build and validation stages) and of every LLM
client's transport."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from endless_assets.settings.declare import endpoint, setting


@dataclass(frozen=True)
class GeneratorSettings:
    kind: str = setting(
        "procedural",
        "ENDLESS_GENERATOR",
        "who writes tasks",
        choices=("procedural", "llm"),
        name="generator",
    )
    model: str = setting(
        "", "ENDLESS_GENERATOR_MODEL", "model name for the llm generator", name="generator_model"
    )
    base_url: str = endpoint(  # (its key: OPENAI_API_KEY)
        "OPENAI_BASE_URL",
        "OpenAI-compatible endpoint of the generator (empty: api.openai.com)",
        name="generator_base_url",
    )
    task_temperature: float = setting(
        1.0, "ENDLESS_TASK_TEMPERATURE", "temperature, the describe stage"
    )
    test_temperature: float = setting(
        0.6,
        "ENDLESS_TEST_TEMPERATURE",
        "temperature for environments and tests (the build and validation stages)",
    )
    max_tokens: int = setting(4096, "ENDLESS_MAX_TOKENS", "max tokens per generator reply")
    repair_rounds: int = setting(
        3, "ENDLESS_REPAIR_ROUNDS", "LLM tries per build or validation stage task"
    )
    dedupe_threshold: float = setting(
        0.4,
        "ENDLESS_DEDUPE_THRESHOLD",
        "the describe stage rejects a task sharing this share of word 3-grams with a kept one "
        "(0-1]",
    )


@dataclass(frozen=True)
class LLMSettings:
    """Every LLM client's transport (generator, solver, auditor, judge alike)."""

    concurrency: int = setting(
        32,
        "ENDLESS_LLM_CONCURRENCY",
        "LLM requests in flight",
        operational=True,
        name="llm_concurrency",
    )
    timeout: float = setting(
        300.0,
        "ENDLESS_LLM_TIMEOUT",
        "seconds per LLM request",
        operational=True,
        name="llm_timeout",
    )
    retries: int = setting(
        6,
        "ENDLESS_LLM_RETRIES",
        "retries on 429/5xx/connection errors",
        operational=True,
        name="llm_retries",
    )
    cache: bool = setting(
        True,
        "ENDLESS_LLM_CACHE",
        "reuse cached replies on re-runs",
        operational=True,
        name="llm_cache",
    )
    backoff: float = setting(
        0.5,
        "ENDLESS_LLM_BACKOFF",
        "seconds before the first retry; doubles per retry, at most 30",
        operational=True,
        name="llm_backoff",
    )

    def client_options(self) -> dict[str, Any]:
        """A client endpoint's limits (llm.client.Endpoint's keywords): timeout, retries,
        backoff, concurrency."""
        return {
            "timeout": self.timeout,
            "retries": self.retries,
            "backoff": self.backoff,
            "concurrency": self.concurrency,
        }
