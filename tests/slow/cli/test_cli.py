"""`endless run` end to end in a separate process (a real Dagster run), then `endless sql`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from project import ROOT

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]


@pytest.fixture(scope="module")
def ran(tmp_path_factory, sandbox):
    home = tmp_path_factory.mktemp("dagster_home")
    data = tmp_path_factory.mktemp("data")
    env = {**os.environ, "DAGSTER_HOME": str(home), "ENDLESS_DATA_DIR": str(data)}
    # Two tasks per shard: the batch runs as the describe stage, two shard runs and the finishing
    # run.
    env["ENDLESS_SHARD_TASKS"] = "2"
    proc = subprocess.run(
        [*ENDLESS, "run", "--date", "2026-04-01", "--tasks", "4", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    return proc, env, data, home


def test_run_materializes_a_batch_and_prints_its_funnel(ran):
    proc, _, _, home = ran
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "funnel of batch 2026-04-01" in proc.stdout
    assert "4 verified tasks kept" in proc.stdout
    assert "in 2 shard runs of about 2 tasks" in proc.stderr
    assert "shard run endless/shard=1/2: run" in proc.stderr  # (named as its tag)
    assert "does not answer" not in proc.stderr  # the one engine is not reported missing
    assert (home / "dagster.yaml").exists()  # created for a fresh DAGSTER_HOME


def test_the_runs_are_recorded_in_the_dagster_instance(ran):
    import dagster as dg

    _, _, _, home = ran
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = list(reversed(instance.get_runs()))  # oldest first
        assert [r.job_name for r in runs] == [
            "batch_stage_one",
            "batch_shard",
            "batch_shard",
            "batch_finish",
        ]
        assert [r.tags.get("endless/shard") for r in runs] == [None, "0/2", "1/2", None]
        assert all(r.tags["dagster/partition"] == "2026-04-01" and r.is_success for r in runs)


def test_sql_formats(ran):
    _, env, _, _ = ran
    query = "select category, count(*) n from filtered_dataset where kept group by 1 order by 1"
    as_json = subprocess.run(
        [*ENDLESS, "sql", query, "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    rows = json.loads(as_json.stdout)
    assert sum(r["n"] for r in rows) == 4
    as_csv = subprocess.run(
        [*ENDLESS, "sql", query, "-f", "csv"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    assert as_csv.stdout.splitlines()[0] == "category,n"


def test_sql_errors_are_reported_cleanly(ran):
    _, env, _, _ = ran
    proc = subprocess.run(
        [*ENDLESS, "sql", "select * from no_such_table"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2
    assert "query failed" in proc.stderr and "no_such_table" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_duckdb_cli_reads_the_catalog_from_inside_the_data_directory(ran):
    _, _, data, _ = ran
    duckdb_cli = Path(sys.executable).with_name("duckdb")
    proc = subprocess.run(
        [
            str(duckdb_cli),
            "endless.duckdb",
            "-csv",
            "-c",
            "select count(*) as n from filtered_dataset where kept",
        ],
        cwd=data,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["n", "4"]


def test_bad_options_are_refused_before_anything_runs(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "ENDLESS_DATA_DIR": str(tmp_path)}
    proc = subprocess.run(
        [*ENDLESS, "run", "--date", "yesterday"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2 and "--date must be YYYY-MM-DD" in proc.stderr
    proc = subprocess.run(
        [*ENDLESS, "run", "--solver", "gpt"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2 and "solver (config) must be one of" in proc.stderr
    proc = subprocess.run(
        [*ENDLESS, "run", "--solver", "chat"],
        capture_output=True,
        text=True,
        env={**env, "ENDLESS_SOLVER_MODEL": ""},
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2 and "set ENDLESS_SOLVER_MODEL" in proc.stderr
    assert not (tmp_path / "lake").exists()


def test_an_unreachable_docker_engine_is_reported_before_the_run(tmp_path):
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path),
        "ENDLESS_DATA_DIR": str(tmp_path / "data"),
        "DOCKER_HOST": "tcp://127.0.0.1:1",
    }
    proc = subprocess.run(
        [*ENDLESS, "run", "--tasks", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2
    assert "cannot reach a Docker engine at tcp://127.0.0.1:1" in proc.stderr
    assert not (tmp_path / "data").exists()


def test_a_flag_wins_over_a_bad_value_of_its_setting_in_the_environment(tmp_path, sandbox):
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ENDLESS_DATA_DIR": str(tmp_path / "data"),
        "ENDLESS_TASKS": "0",
        "ENDLESS_K": "-1",
    }
    proc = subprocess.run(
        [*ENDLESS, "run", "--date", "2026-04-02", "--tasks", "1", "--k", "1", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 verified tasks kept" in proc.stdout


def test_ctrl_c_while_a_sharded_submit_waits_names_the_runs_it_leaves_queued(tmp_path):
    """No daemon runs here: the queued describe-stage run never starts, so `--submit` waits on
    it."""
    import signal

    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ENDLESS_DATA_DIR": str(tmp_path / "data"),
        "ENDLESS_SHARD_TASKS": "1",
    }
    proc = subprocess.Popen(
        [*ENDLESS, "run", "--date", "2026-04-03", "--tasks", "2", "--submit"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    for line in proc.stdout:  # the run is queued once this is said
        if "submitted as run" in line:
            run_id = line.split("submitted as run ")[1].split()[0]
            break
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate()
    assert proc.returncode == 130, stderr[-2000:]
    assert f"stopped waiting: run(s) {run_id} stay queued" in " ".join(stderr.split())
    assert "Traceback" not in stderr
