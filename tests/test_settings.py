"""Settings: explicit values over environment variables over defaults, with clear errors."""

from __future__ import annotations

import pytest

from endless_assets.settings import FIELDS, Settings, SettingsError, settings_table


def test_defaults(monkeypatch):
    for field in FIELDS:
        monkeypatch.delenv(field.env, raising=False)
    s = Settings.resolve()
    assert (s.tasks, s.generator, s.solver, s.attempts, s.data_dir) == (
        24,
        "procedural",
        "oracle",
        1,
        "data",
    )


def test_environment_then_explicit(monkeypatch):
    monkeypatch.setenv("ENDLESS_TASKS", "7")
    monkeypatch.setenv("ENDLESS_SOLVER", "chat")
    assert Settings.resolve().tasks == 7
    assert Settings.resolve().attempts == 16  # the paper's k for a model solver
    assert Settings.resolve(tasks=3).tasks == 3


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
    assert Settings.resolve().solver_base_url == "http://gen:8000/v1"
    monkeypatch.setenv("ENDLESS_SOLVER_BASE_URL", "http://solver:8000/v1")
    assert Settings.resolve().solver_base_url == "http://solver:8000/v1"


def test_booleans_from_the_environment(monkeypatch):
    monkeypatch.setenv("ENDLESS_LLM_CACHE", "off")
    assert Settings.resolve().llm_cache is False
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
