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
            if raw is None or (raw == "" and f.kind is not str):
                values[f.name] = f.default
                continue
            try:
                value = f.kind(raw)
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
        positive = ("tasks", "workers", "max_turns", "output_cap", "pids")
        for name in positive:
            if getattr(self, name) < 1:
                raise SettingsError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.k < 0:
            raise SettingsError(f"k must be 0 (automatic) or more, got {self.k}")
        for name in ("command_timeout", "episode_seconds", "cpus"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def attempts(self) -> int:
        """k, with 0 meaning the policy's default: 1 for deterministic policies, 16 for chat."""
        if self.k:
            return self.k
        return 16 if self.solver == "chat" else 1

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def settings_table() -> str:
    """Markdown table of every setting, for the README."""
    rows = ["| setting | environment variable | default | meaning |", "|---|---|---|---|"]
    for f in FIELDS:
        default = f"`{f.default}`" if f.default != "" else "(empty)"
        choices = f" ({' / '.join(f.choices)})" if f.choices else ""
        rows.append(f"| `{f.name}` | `{f.env}` | {default} | {f.help}{choices} |")
    return "\n".join(rows)
