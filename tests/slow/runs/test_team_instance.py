"""A team's Dagster instance: with DAGSTER_PG_URL, PostgreSQL (a real server from Debian, started
here as the `postgres` user) keeps runs, events and schedules, every run waits in the queued run
coordinator, and Docker steps share the `docker` pool; without it, SQLite as before. The URL's
password appears in no file, log or message."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster_daemon import start_daemon, stop, wait_for
from postgres_server import PASSWORD, free_port
from project import ROOT

from endless_assets.instance import LEGACY, MARK, InstanceError
from endless_assets.launch import ensure_dagster_home
from endless_assets.store.lake import Lake

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
BATCHES = ["2026-04-01", "2026-04-02", "2026-04-03"]
# What endless wrote before it marked its files: launch.INSTANCE_YAML, and the repository's
# dagster_home/dagster.yaml (same settings, with comments).
OLD_INSTANCE_YAML = (
    "telemetry:\n  enabled: false\nconcurrency:\n  runs:\n    max_concurrent_runs: 1\n"
)
OLD_REPO_YAML = (
    "# Dagster instance for `dagster dev` and `endless run` (DAGSTER_HOME=dagster_home, made "
    "absolute by\n# the CLI). SQLite storage, the default, lives beside this file and is "
    "git-ignored.\ntelemetry:\n  enabled: false\n\nconcurrency:\n  runs:\n    # A 2-core machine "
    "builds and runs containers for one batch at a time; backfills queue.\n"
    "    max_concurrent_runs: 1\n"
)


def _files_holding(text: str, *roots: Path) -> list[str]:
    needle = text.encode()
    return [
        str(p)
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    ]


# Three batches at once -------------------------------------------------------------------------


def test_three_batches_submitted_at_once_to_a_postgres_instance_at_a_standard_url_all_succeed(
    postgres, sandbox, tmp_path, monkeypatch
):
    url = postgres.database("team")
    assert url.startswith("postgresql://")  # the form psql and managed databases give
    home, data = tmp_path / "home", tmp_path / "data"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_URL": url,
        "ENDLESS_DATA_DIR": str(data),
    }
    # Submitted at once, from three processes on a fresh home and a fresh database, before any
    # daemon runs: each queues its run.
    submits = [
        subprocess.Popen(
            [*ENDLESS, "run", "--submit", "--date", batch, "--tasks", "1"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for batch in BATCHES
    ]
    outputs = [p.communicate(timeout=600) for p in submits]
    assert [p.returncode for p in submits] == [0, 0, 0], [o[1][-2000:] for o in outputs]
    run_ids = [re.search(r"submitted as run (\S+) \(QUEUED\)", o[0]).group(1) for o in outputs]
    assert all("no daemon has reported" in o[1] for o in outputs)
    monkeypatch.setenv("DAGSTER_PG_URL", url)

    log = tmp_path / "daemon.log"
    daemon = start_daemon(env, log)
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = wait_for(instance, run_ids, daemon)
            records = [instance.get_run_record_by_id(r) for r in run_ids]
            pools = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
            events = " ".join(str(e) for r in run_ids for e in instance.all_logs(r))
    finally:
        stop(daemon)
    daemon_log = log.read_text()

    assert [r.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * 3, daemon_log[-3000:]
    assert [r.tags["dagster/partition"] for r in runs] == BATCHES
    assert {r.tags["endless/launched_by"] for r in runs} == {"endless run --submit"}
    lake = Lake(data)
    assert set(BATCHES) <= set(lake.batches("filtered_dataset"))
    assert all(len(lake.read("filtered_dataset", b)) == 1 for b in BATCHES)
    assert pools == {"docker": 1}  # the Docker steps claimed the pool, sized from the yaml
    # At most two runs at once (max_concurrent_runs): the last to start began after one ended.
    first, second, third = sorted(records, key=lambda r: r.start_time)
    assert third.start_time >= min(first.end_time, second.end_time)
    # The secret: in no file endless or Dagster wrote, no log, no message, no event.
    assert PASSWORD not in events
    assert PASSWORD not in daemon_log
    assert all(PASSWORD not in out + err for out, err in outputs)
    assert "env: DAGSTER_PG_URL" in (home / "dagster.yaml").read_text()
    assert _files_holding(PASSWORD, home, data) == []


# The instance's yaml ---------------------------------------------------------------------------


def test_without_dagster_pg_url_the_instance_is_sqlite_with_slots_in_the_docker_pool(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    ensure_dagster_home()
    text = (tmp_path / "dagster.yaml").read_text()
    assert text.startswith(MARK)
    config = yaml.safe_load(text)
    assert config["concurrency"]["runs"] == LEGACY["concurrency"]["runs"]  # one run at a time
    # The pool has slots, so no step shows "docker pool has no slots".
    assert config["concurrency"]["pools"] == {"granularity": "op", "default_limit": 1}
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"
        assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
        assert instance.event_log_storage.get_pool_config().default_pool_limit == 1
    # The repository's own dagster_home/dagster.yaml is what endless writes with the defaults.
    assert (ROOT / "dagster_home" / "dagster.yaml").read_text() == text


@pytest.mark.parametrize("old", [OLD_INSTANCE_YAML, OLD_REPO_YAML], ids=["launch", "repository"])
def test_an_older_endless_yaml_becomes_a_postgres_one_and_is_left_alone_without_the_url(
    postgres, tmp_path, monkeypatch, capsys, old
):
    url = postgres.database(f"old_{secrets.token_hex(4)}", scheme="postgresql+psycopg2")
    (tmp_path / "dagster.yaml").write_text(old)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    ensure_dagster_home()  # SQLite wanted: endless's own, given the docker pool's slots
    assert yaml.safe_load((tmp_path / "dagster.yaml").read_text())["concurrency"]["pools"]

    monkeypatch.setenv("DAGSTER_PG_URL", url)
    ensure_dagster_home()
    text = (tmp_path / "dagster.yaml").read_text()
    assert text.startswith(MARK) and PASSWORD not in text
    config = yaml.safe_load(text)
    assert config["storage"] == {
        "custom": {
            "module": "endless_assets.defs.postgres_storage",
            "class": "PostgresStorage",
            "config": {"postgres_url": {"env": "DAGSTER_PG_URL"}},
        }
    }
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert config["concurrency"]["pools"] == {"granularity": "op", "default_limit": 1}
    note = capsys.readouterr().err
    assert "now keeps runs in PostgreSQL" in note and len(note.strip().splitlines()) == 1
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"

    monkeypatch.delenv("DAGSTER_PG_URL")  # a PostgreSQL instance does not quietly become SQLite
    with pytest.raises(InstanceError, match="is a PostgreSQL instance but DAGSTER_PG_URL is unset"):
        ensure_dagster_home()


def test_a_yaml_a_user_wrote_is_left_alone_with_a_one_line_note(
    postgres, tmp_path, monkeypatch, capsys
):
    mine = "# my instance\ntelemetry:\n  enabled: true\n"
    (tmp_path / "dagster.yaml").write_text(mine)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_PG_URL", postgres.database(f"user_{secrets.token_hex(4)}"))
    ensure_dagster_home()
    assert (tmp_path / "dagster.yaml").read_text() == mine
    note = capsys.readouterr().err.strip()
    assert len(note.splitlines()) == 1
    assert "was not written by endless and is left as is" in note and PASSWORD not in note


def test_a_pg_url_that_does_not_parse_or_answer_is_refused_in_one_line_before_any_work(
    postgres, tmp_path
):
    closed = free_port()
    bad = {
        "does not parse": f"mysql://u:{PASSWORD}@127.0.0.1/x",
        "port is not a number": f"postgresql+psycopg2://u:{PASSWORD}@127.0.0.1:notaport/x",
        "more than one '@' before its host": f"postgresql+psycopg2://u:{PASSWORD}@@127.0.0.1/x",
        "names the driver 'asyncpg'": (
            f"postgresql+asyncpg://u:{PASSWORD}@127.0.0.1:{postgres.port}/x"
        ),
        "Connection refused": f"postgresql+psycopg2://u:{PASSWORD}@127.0.0.1:{closed}/x",
        "password authentication failed": (
            f"postgresql+psycopg2://postgres:{PASSWORD}x@127.0.0.1:{postgres.port}/postgres"
        ),
    }
    procs = {
        reason: subprocess.Popen(
            [*ENDLESS, "run", "--tasks", "1"],
            env={
                **os.environ,
                "DAGSTER_PG_URL": url,
                "DAGSTER_HOME": str(tmp_path / reason),
                "ENDLESS_DATA_DIR": str(tmp_path / "data"),
            },
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for reason, url in bad.items()
    }
    for reason, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, err[-2000:]
        assert err.startswith("error: DAGSTER_PG_URL") and reason in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert PASSWORD not in err
        assert not (tmp_path / reason).exists()  # not even the home was made
    assert not (tmp_path / "data").exists()


# The deployment files --------------------------------------------------------------------------


def test_the_deployment_files_parse_and_name_files_that_exist(monkeypatch):
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster_docker import DockerRunLauncher

    values = yaml.safe_load((ROOT / "deploy/helm/values.yaml").read_text())
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    [location] = values["dagster-user-deployments"]["deployments"]
    assert location["name"] == "endless"  # the location name every submitted run names
    workspace = yaml.safe_load((ROOT / "deploy/workspace-grpc.yaml").read_text())
    assert workspace["load_from"][0]["grpc_server"]["location_name"] == "endless"

    # The dagster-docker example is a valid instance config for this Dagster, and its launcher's
    # config is one dagster-docker takes (test_docker_run_launcher.py launches a run with
    # the same shape).
    monkeypatch.setenv("DAGSTER_PG_URL", "postgresql+psycopg2://u:p@h/d")
    with tempfile.TemporaryDirectory() as home:
        shutil.copy(ROOT / "deploy/dagster-docker.yaml", Path(home) / "dagster.yaml")
        config, _ = dagster_instance_config(home)
    assert config["run_launcher"]["class"] == "DockerRunLauncher"
    launcher = process_config(DockerRunLauncher.config_type(), config["run_launcher"]["config"])
    assert launcher.success, launcher.errors
    assert DockerRunLauncher(**launcher.value).networks == ["endless"]

    dockerfile = (ROOT / "deploy/Dockerfile").read_text().splitlines()
    assert [ln for ln in dockerfile if ln.startswith("FROM ")] == ["FROM python:3.11-slim-bookworm"]
    copied = [ln.split()[1:-1] for ln in dockerfile if ln.startswith("COPY ")]
    assert copied and all((ROOT / src).exists() for sources in copied for src in sources)
