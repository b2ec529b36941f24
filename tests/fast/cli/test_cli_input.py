"""Bad input to `endless run` gets one line and exit 2, before any Docker or Dagster work, and
writes nothing: no lake, no Dagster instance, no run.

Every test points DOCKER_HOST at a socket that does not exist, so a value that slipped through
validation would end at the Docker preflight ("cannot reach a Docker engine", not the line the
test expects) instead of starting a batch."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from project import ROOT

from endless_assets.defs.base_image import base_image
from endless_assets.defs.partitions import BATCH_START
from endless_assets.defs.resources import PipelineSettings
from endless_assets.sandbox.engine.disk import parse_size
from endless_assets.settings import FIELDS, Settings, SettingsError

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
NO_ENGINE = "unix:///nonexistent/endless-test/docker.sock"


def run_endless(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_") and k != "DOCKER_HOST"
    }
    environ.update(
        DAGSTER_HOME=str(tmp_path / "dagster_home"),
        ENDLESS_DATA_DIR=str(tmp_path / "data"),
        DOCKER_HOST=NO_ENGINE,
        COLUMNS="60",  # a narrow terminal must not fold the error line
    )
    environ.update(env)
    return subprocess.run(
        [*ENDLESS, *args], capture_output=True, text=True, env=environ, cwd=ROOT, check=False
    )


def assert_refused(proc: subprocess.CompletedProcess, tmp_path: Path, *needles: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1, proc.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not (tmp_path / "data").exists()  # no lake, no catalog
    assert not (tmp_path / "dagster_home").exists()  # no instance, so no run
    return lines[0]


@pytest.mark.parametrize("date", ["20260105", "2026-1-5", "2026-W02-1", "2026-01-05T00:00"])
def test_a_date_not_written_yyyy_mm_dd_is_refused_with_one_line(tmp_path, date):
    proc = run_endless(tmp_path, "run", "--date", date)
    assert_refused(proc, tmp_path, "--date must be YYYY-MM-DD", repr(date))


def test_a_date_before_the_first_batch_names_the_valid_range(tmp_path):
    proc = run_endless(tmp_path, "run", "--date", "1999-12-31")
    assert_refused(proc, tmp_path, "1999-12-31", f"from {BATCH_START} to ", "(today UTC)")


def test_a_date_in_the_future_is_refused_before_any_partition_is_written(tmp_path):
    # two days ahead: still not a batch if the day changes while the test runs
    in_two_days = (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=2)).isoformat()
    for date in ("2099-01-01", in_two_days):
        proc = run_endless(tmp_path, "run", "--date", date)
        assert_refused(proc, tmp_path, date, BATCH_START)


BAD_SETTINGS = [
    ("ENDLESS_MEMORY", "lots", "a size like"),
    ("ENDLESS_MEMORY", "2t", "a size like"),  # parse_size reads it, Docker does not
    ("ENDLESS_MEMORY", "2gib", "a size like"),
    ("ENDLESS_MEMORY", "1k", "at least 6m"),
    ("ENDLESS_DISK", "plenty", "a size like"),
    ("ENDLESS_CPUS", "nan", "float"),
    ("ENDLESS_CPUS", "0.001", "at least 0.01"),
    ("ENDLESS_CPUS", str(10 * (os.cpu_count() or 1)), "at most"),
    ("ENDLESS_EPISODE_SECONDS", "inf", "float"),
    ("ENDLESS_PIDS", "-5", "at least 1"),
    ("ENDLESS_PIDS", "99999999999999999999999", "at most 4194304"),  # Docker: a 500 at start
    ("ENDLESS_DOCKER_HOSTS", "unix:///a.sock,unix://a.sock", "are one engine, listed twice"),
    ("ENDLESS_DOCKER_HOSTS", "=4", "no engine URL before its '='"),
    ("ENDLESS_DOCKER_HOSTS", "unix:///a.sock=4=5", "more than one '='"),
    ("ENDLESS_DOCKER_HOSTS", "unix:///a.sock=99999999999999999999", "from 1 to 1024"),
    ("ENDLESS_TASKS", "2.5", "int"),
    ("ENDLESS_LLM_RETRIES", "-1", "0 or more"),
    ("ENDLESS_TASK_TEMPERATURE", "-0.5", "0 or more"),
    ("ENDLESS_SOLVER_TEMPERATURE", "hot", "float"),
    ("ENDLESS_LLM_CACHE", "maybe", "bool"),
    ("ENDLESS_GENERATOR", "gpt", "one of procedural, llm"),
    ("OPENAI_BASE_URL", "localhost:8000/v1", "http(s)://"),
    ("ENDLESS_SOLVER_BASE_URL", "ftp://models.example/v1", "http(s)://"),
    ("ENDLESS_MAX_PASS_RATE", "1.5", "between 0 and 1"),
    ("DOCKER_HOST", "tcp://docker-box", "Docker engine URL"),
]


@pytest.mark.parametrize(("env", "value", "expected"), BAD_SETTINGS)
def test_a_bad_setting_names_itself_its_variable_its_value_and_what_is_expected(
    monkeypatch, env, value, expected
):
    for field in FIELDS:
        monkeypatch.delenv(field.env, raising=False)
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError) as caught:
        Settings.resolve()
    message = str(caught.value)
    assert "\n" not in message
    name = next(f.name for f in FIELDS if env in (f.env, f.fallback_env))
    for needle in (name, env, repr(value), expected):
        assert needle in message, (needle, message)


def test_a_bad_value_given_as_config_names_the_environment_variable_too():
    with pytest.raises(SettingsError) as caught:
        Settings.resolve(memory="2t")
    assert "memory" in str(caught.value) and "ENDLESS_MEMORY" in str(caught.value)
    assert "'2t'" in str(caught.value) and "config" in str(caught.value)


def test_memory_is_accepted_exactly_in_the_forms_docker_reads():
    from docker.utils import parse_bytes

    for good in ("1g", "1.5g", "512m", "512MB", "6m", "2G", " 768m ", "1073741824"):
        memory = Settings.resolve(memory=good).sandbox.memory
        assert parse_bytes(memory) == parse_size(memory) >= 6 * 2**20, good
    for bad in ("2t", "2gib", "1e9", "2 g", "-1g", "0", "none"):
        with pytest.raises(SettingsError, match="memory"):
            Settings.resolve(memory=bad)


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("ENDLESS_MEMORY", "lots"),
        ("ENDLESS_MEMORY", "2t"),
        ("ENDLESS_CPUS", "nan"),
        ("ENDLESS_PIDS", "99999999999999999999999"),
        ("ENDLESS_DOCKER_HOSTS", "unix:///var/run/docker.sock,unix://var/run/docker.sock"),
    ],
)
def test_endless_run_refuses_a_bad_setting_in_one_line_before_docker_or_dagster(
    tmp_path, env, value
):
    proc = run_endless(tmp_path, "run", "--tasks", "1", **{env: value})
    assert_refused(proc, tmp_path, env, repr(value))


def test_a_bad_docker_host_is_refused_before_connecting(tmp_path):
    proc = run_endless(tmp_path, "run", DOCKER_HOST="tcp://docker-box")  # no port
    assert_refused(proc, tmp_path, "docker_host", "DOCKER_HOST", "'tcp://docker-box'")


def test_a_data_dir_that_is_a_file_is_refused_and_left_alone(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("not a directory")
    proc = run_endless(tmp_path, "run")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "data_dir" in proc.stderr and "ENDLESS_DATA_DIR" in proc.stderr
    assert blocker.read_text() == "not a directory"
    assert not (tmp_path / "dagster_home").exists()


def test_chat_solver_budgets_that_cannot_fit_a_reply_are_refused_up_front(tmp_path):
    proc = run_endless(
        tmp_path,
        "run",
        "--solver",
        "chat",
        ENDLESS_SOLVER_MODEL="m",
        ENDLESS_CONTEXT_TOKENS="100",
        ENDLESS_TURN_TOKENS="100",
    )
    assert_refused(proc, tmp_path, "ENDLESS_CONTEXT_TOKENS", "must be larger than turn_tokens")


def test_the_dagster_resource_refuses_a_bad_value_before_any_docker_work(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    result = dg.materialize(
        [base_image],
        instance=dg.DagsterInstance.ephemeral(),
        resources={"pipeline": PipelineSettings(data_dir=str(tmp_path / "data"), memory="2t")},
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.step_failure_data.error.to_string()
    assert "memory" in message and "ENDLESS_MEMORY" in message and "'2t'" in message
    assert "Docker engine" not in message
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "args, env, needles",
    [
        (["--date", "2026-13-01"], {}, ["--date must be YYYY-MM-DD"]),
        (["--tasks", "0"], {}, ["tasks must be at least 1", "ENDLESS_TASKS"]),
        (["--k", "-1"], {}, ["k must be", "ENDLESS_K"]),
        (["--solver", "nobody"], {}, ["solver", "nobody"]),
        (["--generator", "llm"], {}, ["needs a model", "ENDLESS_GENERATOR_MODEL"]),
        ([], {"ENDLESS_SOUNDNESS": "sometimes"}, ["soundness", "sometimes"]),
    ],
)
def test_a_plan_with_bad_input_is_one_line_and_exit_two_and_writes_nothing(
    tmp_path, args, env, needles
):
    proc = run_endless(tmp_path, "run", "--plan", *args, **env)
    assert_refused(proc, tmp_path, *needles)


def test_a_plan_without_history_says_so_exits_zero_and_writes_nothing(tmp_path):
    proc = run_endless(tmp_path, "run", "--plan", "--tasks", "8", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = json.loads(proc.stdout)
    assert not plan["from_history"] and plan["history_batches"] == []
    assert all(s["basis"].startswith("prior") for s in plan["stages"] if s["stage"] != "total")
    assert not (tmp_path / "data").exists() and not (tmp_path / "dagster_home").exists()
