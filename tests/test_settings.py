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


def test_the_readme_documents_every_setting():
    with open("README.md") as fh:
        readme = fh.read()
    assert settings_table() in readme
