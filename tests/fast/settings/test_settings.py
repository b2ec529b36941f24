"""Settings: explicit values over environment variables over defaults, with clear errors."""

from __future__ import annotations

import pytest

from endless_assets.settings import FIELDS, Settings, SettingsError, settings_table


def test_defaults(monkeypatch):
    for field in FIELDS:
        monkeypatch.delenv(field.env, raising=False)
    s = Settings.resolve()
    assert (s.run.tasks, s.generator.kind, s.solver.policy, s.solver.attempts) == (
        24,
        "procedural",
        "oracle",
        1,
    )
    assert s.run.data_dir == "data"


def test_environment_then_explicit(monkeypatch):
    monkeypatch.setenv("ENDLESS_TASKS", "7")
    monkeypatch.setenv("ENDLESS_SOLVER", "chat")
    assert Settings.resolve().run.tasks == 7
    assert Settings.resolve().solver.attempts == 16  # the paper's k for a model solver
    assert Settings.resolve(tasks=3).run.tasks == 3


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("ENDLESS_TASKS", "many", "tasks (ENDLESS_TASKS) must be int, got 'many'"),
        ("ENDLESS_TASKS", "0", "tasks must be at least 1"),
        (
            "ENDLESS_GENERATOR",
            "gpt",
            "generator (ENDLESS_GENERATOR) must be one of procedural, llm",
        ),
        ("ENDLESS_COMMAND_TIMEOUT", "-1", "command_timeout must be positive"),
    ],
)
def test_bad_values_name_the_setting_and_its_source(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Settings.resolve()


def test_unknown_settings_are_refused():
    with pytest.raises(SettingsError, match="unknown setting"):
        Settings.resolve(taks=3)


def test_the_settings_page_documents_every_setting():
    with open("docs/settings.md") as fh:
        page = fh.read()
    assert settings_table() in page


def test_the_dagster_resource_exposes_every_setting():
    from endless_assets.defs.resources import PipelineSettings

    assert set(PipelineSettings.model_fields) == {f.name for f in FIELDS}


def test_solver_endpoint_falls_back_to_the_generators(monkeypatch):
    monkeypatch.delenv("ENDLESS_SOLVER_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gen:8000/v1")
    assert Settings.resolve().solver.base_url == "http://gen:8000/v1"
    monkeypatch.setenv("ENDLESS_SOLVER_BASE_URL", "http://solver:8000/v1")
    assert Settings.resolve().solver.base_url == "http://solver:8000/v1"


def test_booleans_from_the_environment(monkeypatch):
    monkeypatch.setenv("ENDLESS_LLM_CACHE", "off")
    assert Settings.resolve().llm.cache is False
    monkeypatch.setenv("ENDLESS_LLM_CACHE", "perhaps")
    with pytest.raises(SettingsError, match="llm_cache"):
        Settings.resolve()


def test_the_launchpad_describes_every_setting_from_its_one_declaration():
    from endless_assets.defs.resources import PipelineSettings
    from endless_assets.settings import FIELDS

    config = PipelineSettings.to_config_schema().as_field().config_type.fields
    assert list(config) == [f.name for f in FIELDS]
    for f in FIELDS:
        assert not config[f.name].is_required
        assert f.help in config[f.name].description and f.env in config[f.name].description


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("pids", 99999999999999999999999, "at most 4194304"),
        ("pids", 4194305, "at most 4194304"),
        ("memory", "9000000000g", "at most 1048576g"),
        ("disk", "17t", "at most 16t"),
        ("disk", "99999999999999999999", "at most 16t"),
        ("cpus", 1e300, "at most 8192"),
    ],
)
def test_a_limit_docker_would_refuse_at_every_container_start_is_refused_up_front(
    name, value, expected
):
    remote = "tcp://node:2376"  # (a local engine caps cpus at this machine's cores already)
    with pytest.raises(SettingsError, match=f"{name} must be .*{expected}"):
        Settings.resolve(**{name: value}, docker_hosts=remote)


def test_the_largest_limits_docker_takes_are_accepted():
    settings = Settings.resolve(
        pids=4194304, memory="1048576g", disk="16t", cpus=8192, docker_hosts="tcp://node:2376"
    )
    box = settings.sandbox
    assert (box.pids, box.memory, box.disk, box.cpus) == (4194304, "1048576g", "16t", 8192)


def test_a_wrong_engine_pool_names_the_reason_and_where_it_came_from(monkeypatch):
    hosts = "unix:///a.sock=4,unix://a.sock"
    monkeypatch.setenv("ENDLESS_DOCKER_HOSTS", hosts)
    with pytest.raises(SettingsError) as caught:
        Settings.resolve()
    message = str(caught.value)
    assert f"got {hosts!r} (from ENDLESS_DOCKER_HOSTS)" in message
    assert message.endswith("'unix:///a.sock' and 'unix://a.sock' are one engine, listed twice")
    monkeypatch.delenv("ENDLESS_DOCKER_HOSTS")
    with pytest.raises(SettingsError, match="from config; its environment variable is ENDLESS_"):
        Settings.resolve(docker_hosts="=4")
