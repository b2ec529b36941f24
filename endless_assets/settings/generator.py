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


def _transport(default: Any, name: str, help: str) -> Any:
    """An operational setting `llm_<name>` (ENDLESS_LLM_<NAME>)."""
    return setting(
        default, f"ENDLESS_LLM_{name.upper()}", help, operational=True, name=f"llm_{name}"
    )


@dataclass(frozen=True)
class LLMSettings:
    """Every LLM client's transport (generator, solver, auditor, judge alike)."""

    concurrency: int = _transport(32, "concurrency", "LLM requests in flight")
    timeout: float = _transport(300.0, "timeout", "seconds per LLM request")
    retries: int = _transport(6, "retries", "retries on 429/5xx/connection errors")
    cache: bool = _transport(True, "cache", "reuse cached replies on re-runs")
    backoff: float = _transport(
        0.5, "backoff", "seconds before the first retry; doubles per retry, at most 30"
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
