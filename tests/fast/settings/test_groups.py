"""Settings compose their groups: each value is read as `settings.<group>.<attribute>`, each
setting keeps its public name and environment variable, and each group builds what its settings
make (the one SandboxConfig, the episode limits, the LLM clients' limits, the keep rule)."""

from __future__ import annotations

import pytest

from endless_assets.models import EpisodeLimits, KeepRule
from endless_assets.settings import FIELDS, GROUPS, Settings


def test_every_setting_is_read_through_its_group_and_listed_under_its_public_name():
    settings = Settings()
    for f in FIELDS:
        group = getattr(settings, f.group)
        assert isinstance(group, GROUPS[f.group])
        assert getattr(group, f.attr) == f.default == settings.as_dict()[f.name]
    assert len({f.name for f in FIELDS}) == len(FIELDS)
    for flat in ("solver_model", "generator_model", "llm_timeout", "workers", "memory"):
        assert not hasattr(settings, flat)  # the one way to read it is through its group


@pytest.mark.parametrize(
    ("env", "raw", "read", "value"),
    [
        ("ENDLESS_SOLVER_MODEL", "qwen3-8b", lambda s: s.solver.model, "qwen3-8b"),
        ("ENDLESS_SOLVER", "noop", lambda s: s.solver.policy, "noop"),
        ("ENDLESS_GENERATOR", "llm", lambda s: s.generator.kind, "llm"),
        ("OPENAI_BASE_URL", "http://gen:8000/v1", lambda s: s.generator.base_url, None),
        ("ENDLESS_LLM_TIMEOUT", "7", lambda s: s.llm.timeout, 7.0),
        ("ENDLESS_SOUNDNESS", "off", lambda s: s.soundness.mode, "off"),
        ("ENDLESS_SOUNDNESS_REPEATS", "5", lambda s: s.soundness.repeats, 5),
        ("ENDLESS_SAMPLER_WINDOW", "3", lambda s: s.sampling.window, 3),
        ("ENDLESS_DECONTAMINATION_FUZZY", "0.5", lambda s: s.decontamination.fuzzy, 0.5),
        ("ENDLESS_WORKERS", "2", lambda s: s.run.workers, 2),
    ],
)
def test_a_grouped_setting_still_comes_from_its_old_environment_variable(
    monkeypatch, env, raw, read, value
):
    monkeypatch.setenv(env, raw)
    assert read(Settings.resolve()) == (raw if value is None else value)


def test_explicit_values_keep_their_public_names():
    settings = Settings.resolve(solver="chat", solver_model="m", llm_retries=1, min_pass_rate=0.25)
    assert (settings.solver.policy, settings.solver.model) == ("chat", "m")
    assert (settings.llm.retries, settings.keep.min_pass_rate) == (1, 0.25)
    assert settings.as_dict()["solver_model"] == "m" and settings.made()["solver_model"] == "m"


def test_the_cli_and_the_pipeline_build_the_same_sandbox(monkeypatch):
    """`endless serve`, `endless sweep` and the pipeline's resource used to build two different
    SandboxConfigs: the CLI's had no warm spares and always let builds reach the network."""
    from endless_assets.cli.engines import _sandbox
    from endless_assets.defs.resources import PipelineSettings

    monkeypatch.setenv("ENDLESS_WARM_CONTAINERS", "2")
    monkeypatch.setenv("ENDLESS_BUILD_NETWORK", "false")
    monkeypatch.setenv("ENDLESS_BUILD_NETWORK_ALLOW", "mirror.lan:3128")
    monkeypatch.setenv("ENDLESS_MEMORY", "768m")
    monkeypatch.setenv("ENDLESS_WORKERS", "3")
    pipeline = PipelineSettings().sandbox().config
    cli = _sandbox(Settings.resolve()).config
    assert cli == pipeline
    assert (cli.warm, cli.build_network, cli.build_network_allow) == (
        2,
        False,
        ("mirror.lan:3128",),
    )
    assert (cli.limits.memory, cli.cpu_slots) == ("768m", 3)


def test_the_solver_group_builds_the_episode_limits():
    settings = Settings.resolve(max_turns=5, command_timeout=7, episode_seconds=30, output_cap=99)
    assert settings.solver.limits() == EpisodeLimits(
        max_turns=5, command_timeout=7.0, episode_seconds=30.0, output_cap=99
    )
    assert Settings.resolve(solver="chat", solver_model="m").episode_workers == 16
    assert Settings.resolve(workers=3).episode_workers == 3


def test_every_llm_client_gets_the_llm_groups_limits():
    from endless_assets.llm.preflight import endpoint_for

    settings = Settings.resolve(
        solver="chat", solver_model="m", llm_timeout=7, llm_retries=1, llm_backoff=0.25
    )
    endpoint = endpoint_for(settings, "solver")
    assert (endpoint.timeout, endpoint.retries, endpoint.backoff) == (7.0, 1, 0.25)
    assert endpoint.concurrency == settings.llm.concurrency == 32


def test_the_keep_group_builds_the_keep_rule():
    rule = Settings.resolve(min_pass_rate=0.2, max_pass_rate=0.8).keep.rule()
    assert rule == KeepRule(0.2, 0.8)
    assert rule.decide(10, 10)[1].startswith("too_easy")
