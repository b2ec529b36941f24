"""Every setting in one place: its default, its environment variable, its meaning.

Resolution order: an explicit value (Dagster resource config, or a CLI flag) wins, then the
environment variable, then the default. The README's settings table is generated from `FIELDS`
(`endless settings`), so code and docs cannot drift apart. Secrets (API keys) are not settings:
they are read from the environment at the moment a client is made and never stored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from endless_assets.sandbox.disk import check_budget, parse_size


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Field:
    name: str
    env: str
    default: Any
    kind: type
    help: str
    choices: tuple[str, ...] = ()
    fallback_env: str = ""  # read when `env` is unset (e.g. a solver endpoint -> the generator's)


FIELDS: tuple[Field, ...] = (
    Field("data_dir", "ENDLESS_DATA_DIR", "data", str, "where the lake and the catalog live"),
    Field("tasks", "ENDLESS_TASKS", 24, int, "tasks per batch (stage I samples this many)"),
    Field("seed", "ENDLESS_SEED", 0, int, "salt for the batch's seeds; change it to redraw a day"),
    Field("workers", "ENDLESS_WORKERS", 6, int, "tasks processed in parallel within a stage"),
    Field(
        "generator",
        "ENDLESS_GENERATOR",
        "procedural",
        str,
        "who writes tasks",
        ("procedural", "llm"),
    ),
    Field(
        "generator_model", "ENDLESS_GENERATOR_MODEL", "", str, "model name for the llm generator"
    ),
    Field("solver", "ENDLESS_SOLVER", "oracle", str, "stage IV policy", ("oracle", "noop", "chat")),
    Field("solver_model", "ENDLESS_SOLVER_MODEL", "", str, "model name for the chat solver"),
    Field("k", "ENDLESS_K", 0, int, "attempts per task in stage IV (0: 1 for oracle, 16 for chat)"),
    Field("max_turns", "ENDLESS_MAX_TURNS", 16, int, "agent turns per episode"),
    Field("command_timeout", "ENDLESS_COMMAND_TIMEOUT", 60.0, float, "seconds per agent command"),
    Field("episode_seconds", "ENDLESS_EPISODE_SECONDS", 900.0, float, "wall clock per episode"),
    Field("output_cap", "ENDLESS_OUTPUT_CAP", 50_000, int, "characters of output per observation"),
    Field("docker_host", "DOCKER_HOST", "", str, "Docker engine URL (empty: the local socket)"),
    Field("memory", "ENDLESS_MEMORY", "1g", str, "memory limit per task container"),
    Field("cpus", "ENDLESS_CPUS", 1.0, float, "CPU limit per task container"),
    Field("pids", "ENDLESS_PIDS", 512, int, "process limit per task container"),
    Field(
        "disk",
        "ENDLESS_DISK",
        "2g",
        str,
        "disk an agent may write per task container (writes past it: 'No space left on device'; "
        "0: no budget)",
    ),
    Field(
        "build_network",
        "ENDLESS_BUILD_NETWORK",
        True,
        bool,
        "let RUN steps of LLM-written and imported Dockerfiles reach the network during builds "
        "(host network; procedural builds never get one; containers never do)",
    ),
    # The LLM generator (stages I-III). The API key is read from OPENAI_API_KEY when a client is
    # made; it is never a setting and never stored.
    Field(
        "generator_base_url",
        "OPENAI_BASE_URL",
        "",
        str,
        "OpenAI-compatible endpoint of the generator (empty: api.openai.com)",
    ),
    Field("task_temperature", "ENDLESS_TASK_TEMPERATURE", 1.0, float, "temperature, stage I"),
    Field(
        "test_temperature",
        "ENDLESS_TEST_TEMPERATURE",
        0.6,
        float,
        "temperature for environments and tests (stages II-III)",
    ),
    Field("max_tokens", "ENDLESS_MAX_TOKENS", 4096, int, "max tokens per generator reply"),
    Field("repair_rounds", "ENDLESS_REPAIR_ROUNDS", 3, int, "LLM tries per stage II/III task"),
    Field("llm_concurrency", "ENDLESS_LLM_CONCURRENCY", 32, int, "LLM requests in flight"),
    Field("llm_timeout", "ENDLESS_LLM_TIMEOUT", 300.0, float, "seconds per LLM request"),
    Field("llm_retries", "ENDLESS_LLM_RETRIES", 6, int, "retries on 429/5xx/connection errors"),
    Field("llm_cache", "ENDLESS_LLM_CACHE", True, bool, "reuse cached replies on re-runs"),
    Field(
        "llm_backoff",
        "ENDLESS_LLM_BACKOFF",
        0.5,
        float,
        "seconds before the first retry; doubles per retry, at most 30",
    ),
    Field(
        "dedupe_threshold",
        "ENDLESS_DEDUPE_THRESHOLD",
        0.4,
        float,
        "stage I rejects a task sharing this share of word 3-grams with a kept one (0-1]",
    ),
    # The chat solver (stage IV). Its key: ENDLESS_SOLVER_API_KEY, else OPENAI_API_KEY.
    Field(
        "solver_base_url",
        "ENDLESS_SOLVER_BASE_URL",
        "",
        str,
        "OpenAI-compatible endpoint of the solver (empty: the generator's)",
        fallback_env="OPENAI_BASE_URL",
    ),
    Field("solver_temperature", "ENDLESS_SOLVER_TEMPERATURE", 1.0, float, "solver temperature"),
    Field("turn_tokens", "ENDLESS_TURN_TOKENS", 4096, int, "max tokens per solver reply"),
    Field("context_tokens", "ENDLESS_CONTEXT_TOKENS", 32768, int, "solver context budget"),
    Field(
        "rollout_workers",
        "ENDLESS_ROLLOUT_WORKERS",
        0,
        int,
        "episodes in parallel (0: workers for oracle/noop, 16 for chat)",
    ),
    Field("min_pass_rate", "ENDLESS_MIN_PASS_RATE", 0.0, float, "keep band: lowest pass rate"),
    Field("max_pass_rate", "ENDLESS_MAX_PASS_RATE", 1.0, float, "keep band: highest pass rate"),
)
_BY_NAME = {f.name: f for f in FIELDS}


@dataclass(frozen=True)
class Settings:
    data_dir: str
    tasks: int
    seed: int
    workers: int
    generator: str
    generator_model: str
    solver: str
    solver_model: str
    k: int
    max_turns: int
    command_timeout: float
    episode_seconds: float
    output_cap: int
    docker_host: str
    memory: str
    cpus: float
    pids: int
    disk: str
    build_network: bool
    generator_base_url: str
    task_temperature: float
    test_temperature: float
    max_tokens: int
    repair_rounds: int
    llm_concurrency: int
    llm_timeout: float
    llm_retries: int
    llm_cache: bool
    llm_backoff: float
    dedupe_threshold: float
    solver_base_url: str
    solver_temperature: float
    turn_tokens: int
    context_tokens: int
    rollout_workers: int
    min_pass_rate: float
    max_pass_rate: float

    @classmethod
    def resolve(cls, **explicit: Any) -> Settings:
        """Explicit values (None means unset) over environment variables over defaults."""
        unknown = set(explicit) - set(_BY_NAME)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for f in FIELDS:
            raw = explicit.get(f.name)
            source = "config"
            if raw is None:
                raw, source = os.environ.get(f.env), f.env
            if (raw is None or raw == "") and f.fallback_env:
                raw, source = os.environ.get(f.fallback_env), f.fallback_env
            if raw is None or (raw == "" and f.kind is not str):
                values[f.name] = f.default
                continue
            try:
                value = _parse_bool(raw) if f.kind is bool else f.kind(raw)
            except (TypeError, ValueError):
                raise SettingsError(
                    f"{f.name} ({source}) must be {f.kind.__name__}, got {raw!r}"
                ) from None
            if f.choices and value not in f.choices:
                raise SettingsError(
                    f"{f.name} ({source}) must be one of {', '.join(f.choices)}, got {value!r}"
                )
            values[f.name] = value
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        positive = (
            "tasks",
            "workers",
            "max_turns",
            "output_cap",
            "pids",
            "max_tokens",
            "repair_rounds",
            "llm_concurrency",
            "turn_tokens",
            "context_tokens",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise SettingsError(f"{name} must be at least 1, got {getattr(self, name)}")
        try:
            if parse_size(self.memory, what="memory") < 6 * 2**20:
                raise ValueError(f"memory must be at least 6m, got {self.memory!r}")
            check_budget(self.disk)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        if self.k < 0:
            raise SettingsError(f"k must be 0 (automatic) or more, got {self.k}")
        for name in ("command_timeout", "episode_seconds", "cpus", "llm_timeout"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{name} must be positive, got {getattr(self, name)}")
        if self.llm_backoff < 0:
            raise SettingsError(f"llm_backoff must be 0 or more, got {self.llm_backoff}")
        if not 0 < self.dedupe_threshold <= 1:
            raise SettingsError(
                f"dedupe_threshold must be above 0 and at most 1, got {self.dedupe_threshold}"
            )
        for name in ("llm_retries", "rollout_workers"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if not 0 <= self.min_pass_rate <= self.max_pass_rate <= 1:
            raise SettingsError(
                "need 0 <= min_pass_rate <= max_pass_rate <= 1, got "
                f"{self.min_pass_rate} and {self.max_pass_rate}"
            )

    @property
    def attempts(self) -> int:
        """k, with 0 meaning the policy's default: 1 for deterministic policies, 16 for chat."""
        if self.k:
            return self.k
        return 16 if self.solver == "chat" else 1

    @property
    def episode_workers(self) -> int:
        """Episodes in parallel in stage IV: a chat model waits on the network, so more."""
        if self.rollout_workers:
            return self.rollout_workers
        return 16 if self.solver == "chat" else self.workers

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def settings_table() -> str:
    """Markdown table of every setting, for the README."""
    rows = ["| setting | environment variable | default | meaning |", "|---|---|---|---|"]
    for f in FIELDS:
        default = f"`{f.default}`" if f.default != "" else "(empty)"
        choices = f" ({' / '.join(f.choices)})" if f.choices else ""
        env = f"`{f.env}`" + (f" (else `{f.fallback_env}`)" if f.fallback_env else "")
        rows.append(f"| `{f.name}` | {env} | {default} | {f.help}{choices} |")
    return "\n".join(rows)
