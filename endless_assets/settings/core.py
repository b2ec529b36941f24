"""`Settings`: every group's settings in one frozen value, resolved (explicit over environment over
default) and checked before anything runs."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from endless_assets.sandbox.engine.engines import EngineSpec, parse_hosts
from endless_assets.settings.checks import (
    DecontaminationSettings,
    ImportSettings,
    SoundnessSettings,
)
from endless_assets.settings.declare import KINDS, Field, SettingsError, is_unset, origin, parse
from endless_assets.settings.generator import GeneratorSettings, LLMSettings
from endless_assets.settings.rules import RULES
from endless_assets.settings.run import RunSettings
from endless_assets.settings.sampling import SamplingSettings
from endless_assets.settings.sandbox import SandboxSettings
from endless_assets.settings.solver import KeepSettings, SolverSettings

# Each group's name, in the order its settings are listed (the docs' table, `endless settings`,
# the launchpad). A new group: its module here, its class below (bases go in reverse order).
GROUPS: dict[str, type] = {
    "run": RunSettings,
    "sandbox": SandboxSettings,
    "generator": GeneratorSettings,
    "llm": LLMSettings,
    "decontamination": DecontaminationSettings,
    "solver": SolverSettings,
    "keep": KeepSettings,
    "soundness": SoundnessSettings,
    "sampling": SamplingSettings,
    "imports": ImportSettings,
}


@dataclass(frozen=True)
class Settings(
    ImportSettings,
    SamplingSettings,
    SoundnessSettings,
    KeepSettings,
    SolverSettings,
    DecontaminationSettings,
    LLMSettings,
    GeneratorSettings,
    SandboxSettings,
    RunSettings,
):
    """Every setting, declared once in its group: type, default, environment variable, meaning.
    FIELDS, the Dagster resource (defs/resources.py, with these meanings on the launchpad) and
    docs/settings.md's table are derived from it. A lower layer takes the group it reads (a
    `SolverSettings`), which a `Settings` is."""

    @classmethod
    def resolve(cls, **explicit: Any) -> Settings:
        """Explicit values (None means unset) over environment variables over defaults.

        Every value is checked here, so nothing runs on a bad one: a SettingsError names the
        setting, where its value came from (its environment variable), the value and what is
        expected, in one line."""
        unknown = set(explicit) - set(BY_NAME)
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
            if is_unset(f, raw):
                values[f.name] = f.default
                continue
            values[f.name] = parse(f, raw, source)
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
        f = BY_NAME[name]
        raw, source = os.environ.get(f.env), f.env
        if (raw is None or raw == "") and f.fallback_env:
            raw, source = os.environ.get(f.fallback_env), f.fallback_env
        if is_unset(f, raw):
            return cls()
        value = parse(f, raw, source)
        if name in RULES and not RULES[name][0](value):
            raise SettingsError(f"{name} is out of range")
        return cls(**{name: value})

    def check(self, sources: dict[str, tuple[str, Any]] | None = None) -> None:
        """Every rule of `rules.RULES` and the rules between settings; `sources` (setting ->
        where its value came from, and the value as given) only makes the messages precise."""
        sources = sources or {}

        def bad(name: str, expected: str) -> SettingsError:
            source, raw = sources.get(name, (BY_NAME[name].env, getattr(self, name)))
            return SettingsError(
                f"{name} must be {expected}, got {raw!r} ({origin(BY_NAME[name], source)})"
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

    def made(self) -> dict[str, Any]:
        """The settings that say what the stages make (every one not operational): what a
        journal's rows are valid for."""
        return {f.name: getattr(self, f.name) for f in FIELDS if not f.operational}


_GROUP_OF = {f.name: group for group, cls in GROUPS.items() for f in fields(cls)}
FIELDS: tuple[Field, ...] = tuple(
    Field(
        f.name,
        f.metadata["env"],
        f.default,
        KINDS[f.type],
        f.metadata["help"],
        f.metadata["choices"],
        f.metadata["fallback_env"],
        _GROUP_OF[f.name],
        f.metadata["operational"],
    )
    for f in fields(Settings)
)
BY_NAME = {f.name: f for f in FIELDS}
OPERATIONAL = frozenset(f.name for f in FIELDS if f.operational)


def settings_table() -> str:
    """Markdown table of every setting, by group, for docs/settings.md."""
    rows = [
        "| group | setting | environment variable | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for f in FIELDS:
        default = f"`{f.default}`" if f.default != "" else "(empty)"
        choices = f" ({' / '.join(f.choices)})" if f.choices else ""
        env = f"`{f.env}`" + (f" (else `{f.fallback_env}`)" if f.fallback_env else "")
        rows.append(f"| {f.group} | `{f.name}` | {env} | {default} | {f.help}{choices} |")
    return "\n".join(rows)
