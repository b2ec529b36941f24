"""Every setting in one place: its default, its environment variable, its meaning.

Resolution order: an explicit value (Dagster resource config, or a CLI flag) wins, then the
environment variable, then the default. The README's settings table is generated from `FIELDS`
(`endless settings`), so code and docs cannot drift apart. Secrets (API keys) are not settings:
they are read from the environment at the moment a client is made and never stored.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from dataclasses import field as dataclass_field
from typing import Any

from endless_assets.sandbox.engine.engines import EngineSpec, parse_hosts
from endless_assets.settings_rules import RULES


class SettingsError(ValueError):
    pass


def setting(
    default: Any, env: str, help: str, *, choices: tuple[str, ...] = (), fallback_env: str = ""
) -> Any:
    """A Settings field: its default, environment variable, meaning (and allowed values)."""
    meta = {"env": env, "help": help, "choices": choices, "fallback_env": fallback_env}
    return dataclass_field(default=default, metadata=meta)


@dataclass(frozen=True)
class Field:
    name: str
    env: str
    default: Any
    kind: type
    help: str
    choices: tuple[str, ...] = ()
    fallback_env: str = ""  # read when `env` is unset (e.g. a solver endpoint -> the generator's)


_KINDS = {"str": str, "int": int, "float": float, "bool": bool}


@dataclass(frozen=True)
class Settings:
    """Every setting, declared once: type, default, environment variable, meaning. FIELDS, the
    Dagster resource (defs/resources.py, with these meanings on the launchpad) and the README's
    settings table are derived from it."""

    data_dir: str = setting("data", "ENDLESS_DATA_DIR", "where the lake and the catalog live")
    tasks: int = setting(24, "ENDLESS_TASKS", "tasks per batch (stage I samples this many)")
    seed: int = setting(0, "ENDLESS_SEED", "salt for the batch's seeds; change it to redraw a day")
    workers: int = setting(6, "ENDLESS_WORKERS", "tasks processed in parallel within a stage")
    generator: str = setting(
        "procedural", "ENDLESS_GENERATOR", "who writes tasks", choices=("procedural", "llm")
    )
    generator_model: str = setting(
        "", "ENDLESS_GENERATOR_MODEL", "model name for the llm generator"
    )
    solver: str = setting(
        "oracle", "ENDLESS_SOLVER", "stage IV policy", choices=("oracle", "noop", "chat")
    )
    solver_model: str = setting("", "ENDLESS_SOLVER_MODEL", "model name for the chat solver")
    k: int = setting(0, "ENDLESS_K", "attempts per task in stage IV (0: 1 for oracle, 16 for chat)")
    max_turns: int = setting(16, "ENDLESS_MAX_TURNS", "agent turns per episode")
    command_timeout: float = setting(60.0, "ENDLESS_COMMAND_TIMEOUT", "seconds per agent command")
    episode_seconds: float = setting(900.0, "ENDLESS_EPISODE_SECONDS", "wall clock per episode")
    output_cap: int = setting(50000, "ENDLESS_OUTPUT_CAP", "characters of output per observation")
    docker_host: str = setting("", "DOCKER_HOST", "Docker engine URL (empty: the local socket)")
    docker_hosts: str = setting(
        "",
        "ENDLESS_DOCKER_HOSTS",
        "sandbox engine pool: comma-separated Docker/Podman engine URLs (unix://, tcp://, "
        "ssh://), each with an optional =slots (default: workers); builds and containers go to "
        "the least-loaded engine. Empty: docker_host alone",
    )
    memory: str = setting("1g", "ENDLESS_MEMORY", "memory limit per task container")
    cpus: float = setting(1.0, "ENDLESS_CPUS", "CPU limit per task container")
    pids: int = setting(512, "ENDLESS_PIDS", "process limit per task container")
    disk: str = setting(
        "2g",
        "ENDLESS_DISK",
        "disk an agent may write per task container (writes past it: 'No space left on "
        "device'; 0: no budget)",
    )
    build_network: bool = setting(
        True,
        "ENDLESS_BUILD_NETWORK",
        "let RUN steps of LLM-written Dockerfiles reach the network during builds (host "
        "network; procedural builds never get one; containers never do); imported Dockerfiles "
        "only when set explicitly",
    )
    warm_containers: int = setting(
        0,
        "ENDLESS_WARM_CONTAINERS",
        "stage IV starts up to this many task containers ahead of the attempts that will take "
        "them (grader resident, nothing run in them): for engines with cores to spare; 0: "
        "each attempt starts its own",
    )
    shard_tasks: int = setting(
        1000,
        "ENDLESS_SHARD_TASKS",
        "`endless run` splits a larger batch into shard runs of about this many tasks (a "
        "task's shard is a hash of its id; stages II-IV per shard; one partition in the end)",
    )
    # The LLM generator (stages I-III). The API key is read from OPENAI_API_KEY when a client is
    # made; it is never a setting and never stored.
    generator_base_url: str = setting(
        "", "OPENAI_BASE_URL", "OpenAI-compatible endpoint of the generator (empty: api.openai.com)"
    )
    task_temperature: float = setting(1.0, "ENDLESS_TASK_TEMPERATURE", "temperature, stage I")
    test_temperature: float = setting(
        0.6, "ENDLESS_TEST_TEMPERATURE", "temperature for environments and tests (stages II-III)"
    )
    max_tokens: int = setting(4096, "ENDLESS_MAX_TOKENS", "max tokens per generator reply")
    repair_rounds: int = setting(3, "ENDLESS_REPAIR_ROUNDS", "LLM tries per stage II/III task")
    llm_concurrency: int = setting(32, "ENDLESS_LLM_CONCURRENCY", "LLM requests in flight")
    llm_timeout: float = setting(300.0, "ENDLESS_LLM_TIMEOUT", "seconds per LLM request")
    llm_retries: int = setting(6, "ENDLESS_LLM_RETRIES", "retries on 429/5xx/connection errors")
    llm_cache: bool = setting(True, "ENDLESS_LLM_CACHE", "reuse cached replies on re-runs")
    llm_backoff: float = setting(
        0.5, "ENDLESS_LLM_BACKOFF", "seconds before the first retry; doubles per retry, at most 30"
    )
    dedupe_threshold: float = setting(
        0.4,
        "ENDLESS_DEDUPE_THRESHOLD",
        "stage I rejects a task sharing this share of word 3-grams with a kept one (0-1]",
    )
    # Decontamination (decontamination/, stages/decontamination.py).
    decontamination_references: str = setting(
        "",
        "ENDLESS_DECONTAMINATION_REFERENCES",
        "benchmarks kept out of the dataset: comma-separated directories of Harbor or "
        "Terminal-Bench tasks, each name=path or a bare path (its base name names the set); a "
        "task sharing text with one of theirs is rejected as contaminated (empty: no check)",
    )
    decontamination_ngrams: str = setting(
        "13,8", "ENDLESS_DECONTAMINATION_NGRAMS", "decontamination: word n-gram sizes compared"
    )
    decontamination_fuzzy: float = setting(
        0.8,
        "ENDLESS_DECONTAMINATION_FUZZY",
        "decontamination: the normalised fuzzy ratio from which two short instructions are one",
    )
    # The chat solver (stage IV). Its key: ENDLESS_SOLVER_API_KEY, else OPENAI_API_KEY.
    solver_base_url: str = setting(
        "",
        "ENDLESS_SOLVER_BASE_URL",
        "OpenAI-compatible endpoint of the solver (empty: the generator's)",
        fallback_env="OPENAI_BASE_URL",
    )
    solver_temperature: float = setting(1.0, "ENDLESS_SOLVER_TEMPERATURE", "solver temperature")
    turn_tokens: int = setting(4096, "ENDLESS_TURN_TOKENS", "max tokens per solver reply")
    context_tokens: int = setting(32768, "ENDLESS_CONTEXT_TOKENS", "solver context budget")
    rollout_workers: int = setting(
        0,
        "ENDLESS_ROLLOUT_WORKERS",
        "episodes in parallel (0: workers for oracle/noop, 16 for chat)",
    )
    min_pass_rate: float = setting(0.0, "ENDLESS_MIN_PASS_RATE", "keep band: lowest pass rate")
    max_pass_rate: float = setting(1.0, "ENDLESS_MAX_PASS_RATE", "keep band: highest pass rate")
    # Imports (issue 11).
    base_recipe: str = setting(
        "bookworm",
        "ENDLESS_BASE_RECIPE",
        "the base image `endless-base` means in an import's --base-image-map: Debian bookworm "
        "(Python 3.11) or trixie (Python 3.13); either is also named endless-base-<recipe>",
        choices=("bookworm", "trixie"),
    )
    max_binary_file_mb: float = setting(
        10.0,
        "ENDLESS_MAX_BINARY_FILE_MB",
        "largest non-text file an imported task may carry (MiB); a larger one refuses the task "
        "with its path and size",
    )
    # Soundness (issue 12).
    soundness: str = setting(
        "full",
        "ENDLESS_SOUNDNESS",
        "soundness stage: full (repeated controls, shortcut probes, ablations), controls (the "
        "repeated controls only) or off (every task passes, with no evidence)",
        choices=("full", "controls", "off"),
    )
    soundness_repeats: int = setting(
        3, "ENDLESS_SOUNDNESS_REPEATS", "soundness: runs of each control (disagreeing: flaky)"
    )
    min_mutation_score: float = setting(
        0.0, "ENDLESS_MIN_MUTATION_SCORE", "keep band: lowest share of ablations the test rejects"
    )
    # Key: ENDLESS_AUDITOR_API_KEY, else the solver's (ENDLESS_SOLVER_API_KEY, OPENAI_API_KEY).
    auditor_model: str = setting(
        "", "ENDLESS_AUDITOR_MODEL", "soundness: cheat rollout and judge model (empty: skipped)"
    )
    auditor_base_url: str = setting(
        "", "ENDLESS_AUDITOR_BASE_URL", "endpoint of auditor_model (empty: the solver's)"
    )
    # Key: ENDLESS_REFERENCE_JUDGE_API_KEY, else the auditor's.
    reference_judge_model: str = setting(
        "",
        "ENDLESS_REFERENCE_JUDGE_MODEL",
        "soundness: a stronger model that judges the same requests as auditor_model, to "
        "measure the judge's agreement with it (empty: no calibration)",
    )
    reference_judge_base_url: str = setting(
        "",
        "ENDLESS_REFERENCE_JUDGE_BASE_URL",
        "endpoint of reference_judge_model (empty: the auditor's)",
    )

    @classmethod
    def resolve(cls, **explicit: Any) -> Settings:
        """Explicit values (None means unset) over environment variables over defaults.

        Every value is checked here, so nothing runs on a bad one: a SettingsError names the
        setting, where its value came from (its environment variable), the value and what is
        expected, in one line."""
        unknown = set(explicit) - set(_BY_NAME)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        sources: dict[str, tuple[str, Any]] = {}
        for f in FIELDS:
            raw = explicit.get(f.name)
            source = "config"
            if raw is None:
                raw, source = os.environ.get(f.env), f.env
            if (raw is None or raw == "") and f.fallback_env:
                raw, source = os.environ.get(f.fallback_env), f.fallback_env
            if raw is None or (raw == "" and (f.kind is not str or f.name in _EMPTY_IS_DEFAULT)):
                values[f.name] = f.default
                continue
            values[f.name] = _parse(f, raw, source)
            sources[f.name] = (source, raw)
        settings = cls(**values)
        settings.check(sources)
        return settings

    @classmethod
    def environment_values(cls) -> dict[str, Any]:
        """Each setting as this process's environment gives it (else its default), each read on
        its own: one whose variable holds a bad value is None (unset), so that whatever runs
        with it reports it in its own words. What the UI shows as the resource's values."""
        values: dict[str, Any] = {}
        for f in FIELDS:
            try:
                values[f.name] = getattr(cls.resolve_field(f.name), f.name)
            except SettingsError:
                values[f.name] = None
        return values

    @classmethod
    def resolve_field(cls, name: str) -> Settings:
        """The settings with only `name` read from the environment (the rest defaults)."""
        f = _BY_NAME[name]
        raw, source = os.environ.get(f.env), f.env
        if (raw is None or raw == "") and f.fallback_env:
            raw, source = os.environ.get(f.fallback_env), f.fallback_env
        if raw is None or (raw == "" and (f.kind is not str or f.name in _EMPTY_IS_DEFAULT)):
            return cls()
        value = _parse(f, raw, source)
        if name in RULES and not RULES[name][0](value):
            raise SettingsError(f"{name} is out of range")
        return cls(**{name: value})

    def check(self, sources: dict[str, tuple[str, Any]] | None = None) -> None:
        """Every rule of `settings_rules.RULES` and the rules between settings; `sources`
        (setting -> where its value came from, and the value as given) only makes the messages
        more precise."""
        sources = sources or {}

        def bad(name: str, expected: str) -> SettingsError:
            source, raw = sources.get(name, (_BY_NAME[name].env, getattr(self, name)))
            return SettingsError(
                f"{name} must be {expected}, got {raw!r} ({_origin(_BY_NAME[name], source)})"
            )

        for name, (ok, expected) in RULES.items():
            if not ok(getattr(self, name)):
                raise bad(name, expected)
        if self.min_pass_rate > self.max_pass_rate:
            raise bad("min_pass_rate", f"at most max_pass_rate ({self.max_pass_rate})")
        if self.solver == "chat" and self.context_tokens <= self.turn_tokens:
            raise bad(
                "context_tokens",
                f"larger than turn_tokens ({self.turn_tokens}, ENDLESS_TURN_TOKENS): the "
                "chat solver's reply has to fit in its context",
            )
        cores = os.cpu_count() or 1  # an engine on this machine has no more
        hosts = [s.url for s in self.engine_specs]
        local = all(not url or url.startswith("unix://") for url in hosts)
        if local and self.cpus > cores:
            raise bad("cpus", f"at most {cores} (the cores of this machine, which runs Docker)")

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

    @property
    def engine_specs(self) -> tuple[EngineSpec, ...]:
        """The sandbox engines: `docker_hosts` (slots default to `workers`), else `docker_host`
        alone with `workers` slots."""
        if self.docker_hosts.strip():
            return parse_hosts(self.docker_hosts, self.workers)
        return (EngineSpec(self.docker_host, self.workers),)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


FIELDS: tuple[Field, ...] = tuple(
    Field(
        f.name,
        f.metadata["env"],
        f.default,
        _KINDS[f.type],
        f.metadata["help"],
        f.metadata["choices"],
        f.metadata["fallback_env"],
    )
    for f in fields(Settings)
)
_BY_NAME = {f.name: f for f in FIELDS}


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


_KIND_HINT = {int: " (a whole number)", float: " (a finite number)", str: ""}
_KIND_HINT[bool] = " (true/false, yes/no, on/off or 1/0)"


def _parse(f: Field, raw: Any, source: str) -> Any:
    """`raw` (text from the environment, or a value from config) as the field's kind."""
    hint = f"; its environment variable is {f.env}" if source == "config" else ""
    try:
        if f.kind is bool:
            value = _parse_bool(raw)
        elif f.kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)
        else:
            value = f.kind(raw)
        if f.kind is float and not math.isfinite(value):
            raise ValueError(raw)
    except (TypeError, ValueError, OverflowError):
        raise SettingsError(
            f"{f.name} ({source}) must be {f.kind.__name__}, got {raw!r}{_KIND_HINT[f.kind]}{hint}"
        ) from None
    if f.name in _STRIPPED:
        value = value.strip()
    if f.choices and value not in f.choices:
        raise SettingsError(
            f"{f.name} ({source}) must be one of {', '.join(f.choices)}, got {value!r}{hint}"
        )
    return value


def _origin(f: Field, source: str) -> str:
    if source == "config":
        return f"from config; its environment variable is {f.env}"
    return f"from {source}"


# Text settings that go to Docker as text are stripped: Docker does not read " 2g".
_STRIPPED = ("memory", "disk")
# An empty data_dir means the default, as in Lake (an empty path would be the working directory).
_EMPTY_IS_DEFAULT = ("data_dir",)


def settings_table() -> str:
    """Markdown table of every setting, for docs/settings.md."""
    rows = ["| setting | environment variable | default | meaning |", "|---|---|---|---|"]
    for f in FIELDS:
        default = f"`{f.default}`" if f.default != "" else "(empty)"
        choices = f" ({' / '.join(f.choices)})" if f.choices else ""
        env = f"`{f.env}`" + (f" (else `{f.fallback_env}`)" if f.fallback_env else "")
        rows.append(f"| `{f.name}` | {env} | {default} | {f.help}{choices} |")
    return "\n".join(rows)
