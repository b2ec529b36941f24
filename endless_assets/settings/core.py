"""`Settings`: every group's settings in one frozen value, resolved (explicit over environment over
default) and checked before anything runs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from endless_assets.sandbox.engine.engines import EngineSpec
from endless_assets.sandbox.sandbox import SandboxConfig
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

# Each group's name (its attribute of Settings), in the order its settings are listed (the docs'
# table, `endless settings`, the launchpad). A new group: its class here and a field below.
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
class Settings:
    """Every setting, declared once in its group: type, default, environment variable, meaning.
    A setting's value is `settings.<group>.<attribute>` (`settings.solver.model`); its public
    name (`solver_model`) is what config, flags, `endless settings` and the docs use. FIELDS,
    the Dagster resource (defs/resources.py, with these meanings on the launchpad) and
    docs/settings.md's table are derived from it. A lower layer may take just the group it
    reads (a `SolverSettings`)."""

    run: RunSettings = field(default_factory=RunSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    generator: GeneratorSettings = field(default_factory=GeneratorSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    decontamination: DecontaminationSettings = field(default_factory=DecontaminationSettings)
    solver: SolverSettings = field(default_factory=SolverSettings)
    keep: KeepSettings = field(default_factory=KeepSettings)
    soundness: SoundnessSettings = field(default_factory=SoundnessSettings)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    imports: ImportSettings = field(default_factory=ImportSettings)

    @classmethod
    def of(cls, values: dict[str, Any]) -> Settings:
        """The settings with these values (by public name; the rest their defaults), unchecked."""
        grouped: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
        for name, value in values.items():
            f = BY_NAME[name]
            grouped[f.group][f.attr] = value
        return cls(**{group: GROUPS[group](**kw) for group, kw in grouped.items()})

    @classmethod
    def resolve(cls, **explicit: Any) -> Settings:
        """Explicit values (by public name; None means unset) over environment variables over
        defaults.

        Every value is checked here, so nothing runs on a bad one: a SettingsError names the
        setting, where its value came from (its environment variable), the value and what is
        expected, in one line."""
        unknown = set(explicit) - set(BY_NAME)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        sources: dict[str, tuple[str, Any]] = {}
        for f in FIELDS:
            raw, source = _raw(f, explicit.get(f.name))
            if is_unset(f, raw):
                continue
            values[f.name] = parse(f, raw, source)
            sources[f.name] = (source, raw)
        settings = cls.of(values)
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
                values[f.name] = cls.resolve_field(f.name).value(f.name)
            except SettingsError:
                values[f.name] = None
        return values

    @classmethod
    def resolve_field(cls, name: str) -> Settings:
        """The settings with only `name` read from the environment (the rest defaults)."""
        f = BY_NAME[name]
        raw, source = _raw(f)
        if is_unset(f, raw):
            return cls()
        value = parse(f, raw, source)
        if name in RULES and not RULES[name][0](value):
            raise SettingsError(f"{name} is out of range")
        return cls.of({name: value})

    def value(self, name: str) -> Any:
        """The value of the setting with this public name (`solver_model`)."""
        f = BY_NAME[name]
        return getattr(getattr(self, f.group), f.attr)

    def check(self, sources: dict[str, tuple[str, Any]] | None = None) -> None:
        """Every rule of `rules.RULES` and the rules between settings; `sources` (setting ->
        where its value came from, and the value as given) only makes the messages precise."""
        sources = sources or {}

        def bad(name: str, expected: str) -> SettingsError:
            source, raw = sources.get(name, (BY_NAME[name].env, self.value(name)))
            return SettingsError(
                f"{name} must be {expected}, got {raw!r} ({origin(BY_NAME[name], source)})"
            )

        for name, (ok, expected) in RULES.items():
            if not ok(self.value(name)):
                raise bad(name, expected)
        keep, solver = self.keep, self.solver
        if keep.min_pass_rate > keep.max_pass_rate:
            raise bad("min_pass_rate", f"at most max_pass_rate ({keep.max_pass_rate})")
        if solver.policy == "chat" and solver.context_tokens <= solver.turn_tokens:
            raise bad(
                "context_tokens",
                f"larger than turn_tokens ({solver.turn_tokens}, ENDLESS_TURN_TOKENS): the "
                "chat solver's reply has to fit in its context",
            )
        cores = os.cpu_count() or 1  # an engine on this machine has no more
        hosts = [s.url for s in self.engine_specs]
        local = all(not url or url.startswith("unix://") for url in hosts)
        if local and self.sandbox.cpus > cores:
            raise bad("cpus", f"at most {cores} (the cores of this machine, which runs Docker)")

    @property
    def episode_workers(self) -> int:
        """Episodes in parallel in the solver stage: a chat model waits on the network, so more."""
        return self.solver.episode_workers(self.run.workers)

    @property
    def engine_specs(self) -> tuple[EngineSpec, ...]:
        """The sandbox engines, each of capacity `workers` unless `docker_hosts` says."""
        return self.sandbox.engine_specs(self.run.workers)

    def sandbox_config(self) -> SandboxConfig:
        """The one SandboxConfig of these settings (the pipeline's resource, the CLI and
        `endless serve` alike): the sandbox group's, bounded by the run's `workers`."""
        return self.sandbox.config(workers=self.run.workers)

    def as_dict(self) -> dict[str, Any]:
        """Every setting's value by its public name."""
        return {f.name: self.value(f.name) for f in FIELDS}

    def made(self) -> dict[str, Any]:
        """The settings that say what the stages make (every one not operational): what a
        journal's rows are valid for."""
        return {f.name: self.value(f.name) for f in FIELDS if not f.operational}


def _raw(f: Field, raw: Any = None, source: str = "config") -> tuple[Any, str]:
    """A setting's raw value: `raw` as given, else its variable's, else (empty) its fallback's;
    and where it came from."""
    if raw is None:
        raw, source = os.environ.get(f.env), f.env
    if (raw is None or raw == "") and f.fallback_env:
        raw, source = os.environ.get(f.fallback_env), f.fallback_env
    return raw, source


def _field(group: str, f: Any) -> Field:
    declared = {**f.metadata, "name": f.metadata["name"] or f.name}
    return Field(**declared, default=f.default, kind=KINDS[f.type], group=group, attr=f.name)


FIELDS: tuple[Field, ...] = tuple(
    _field(group, f) for group, cls in GROUPS.items() for f in fields(cls)
)
BY_NAME = {f.name: f for f in FIELDS}
assert len(BY_NAME) == len(FIELDS), "two settings share a public name"
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
