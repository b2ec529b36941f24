"""Runs whose process is gone (runs/dead_runs.py), on real SQLite and PostgreSQL instances: such a
run is marked failed with the reason and its pool slots are freed; a live run, a run of another
host and a run that has recorded no process are left alone; two processes reaping at once agree;
the daemon's run monitoring gets the same answer from the run launcher; `endless check` lists a
dead run and `--fix` frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.launcher.base import WorkerStatus
from dagster._core.test_utils import create_run_for_test
from project import ROOT

from endless_assets import processes
from endless_assets.launch import ensure_dagster_home
from endless_assets.runs import dead_runs

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
POOL = "docker"


@pytest.fixture(params=["sqlite", "postgres"])
def home(request, tmp_path, monkeypatch) -> Path:
    """A fresh instance written by endless: SQLite, or PostgreSQL (a real server)."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENDLESS_DATA_DIR", str(tmp_path / "data"))
    if request.param == "postgres":
        server = request.getfixturevalue("postgres")
        monkeypatch.setenv("DAGSTER_PG_URL", server.database(f"dead_{uuid.uuid4().hex[:12]}"))
    else:
        monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    return ensure_dagster_home()


def _dead_owner() -> str:
    """The owner of a process that was killed with SIGKILL."""
    proc = subprocess.Popen(["sleep", "600"])
    owner = str(processes.Owner(processes.me().host, proc.pid, processes.start_of(proc.pid)))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return owner


def _run(instance, owner: str | None, *, step: str | None = "task_environments") -> str:
    """A run in progress recorded as executed by `owner`, holding a slot of the pool at `step`."""
    tags = {dead_runs.LAUNCHED_BY_TAG: "a test"}
    if owner is not None:
        tags[dead_runs.OWNER_TAG] = owner
    run = create_run_for_test(
        instance, job_name="daily_batch", status=dg.DagsterRunStatus.STARTED, tags=tags
    )
    if step:
        storage = instance.event_log_storage
        if POOL not in {p.name for p in storage.get_pool_limits()}:  # (as a run's first claim)
            storage.initialize_concurrency_limit_to_default(POOL)
        storage.claim_concurrency_slot(POOL, run.run_id, step)
    return run.run_id


def _holding(instance) -> set[str]:
    info = instance.event_log_storage.get_concurrency_info(POOL)
    return {s.run_id for s in info.claimed_slots} | {p.run_id for p in info.pending_steps}


def _failure_message(instance, run_id: str) -> str:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
    return " ".join(r.event_log_entry.dagster_event.message or "" for r in records)


def test_a_run_whose_process_was_killed_is_failed_with_the_reason_and_its_slot_freed(home):
    with dg.DagsterInstance.get() as instance:
        dead = _run(instance, _dead_owner())
        waiting_dead = _run(instance, _dead_owner(), step="completion_tests")  # queued behind
        live = _run(instance, str(processes.me()), step=None)
        elsewhere = _run(instance, "another-host:12345:x.y.1", step=None)
        unrecorded = _run(instance, None, step=None)
        assert _holding(instance) == {dead, waiting_dead}

        reaped = dead_runs.reap(instance)

        assert {r.run_id for r in reaped} == {dead, waiting_dead}
        status = {r: instance.get_run_by_id(r).status for r in (dead, live, elsewhere, unrecorded)}
        assert status == {
            dead: dg.DagsterRunStatus.FAILURE,
            live: dg.DagsterRunStatus.STARTED,
            elsewhere: dg.DagsterRunStatus.STARTED,
            unrecorded: dg.DagsterRunStatus.STARTED,
        }
        assert "is gone" in _failure_message(instance, dead)
        assert _holding(instance) == set()  # the slot, and the queued claim, are free
        assert dead_runs.reap(instance) == []  # once is enough


def test_two_processes_reaping_at_once_both_finish_and_the_run_is_failed(home):
    with dg.DagsterInstance.get() as instance:
        dead = _run(instance, _dead_owner())
    script = (
        "import dagster as dg\nfrom endless_assets.runs import dead_runs\n"
        "with dg.DagsterInstance.get() as i:\n    dead_runs.reap(i)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT) for _ in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
        assert _holding(instance) == set()


def test_the_run_launcher_tells_the_daemon_a_dead_run_worker_failed(home):
    with dg.DagsterInstance.get() as instance:
        launcher = instance.run_launcher
        assert launcher.supports_check_run_worker_health
        dead = instance.get_run_by_id(_run(instance, _dead_owner()))
        live = instance.get_run_by_id(_run(instance, str(processes.me()), step=None))
        unknown = instance.get_run_by_id(_run(instance, None, step=None))
        assert launcher.check_run_worker_health(dead).status == WorkerStatus.FAILED
        assert launcher.check_run_worker_health(live).status == WorkerStatus.RUNNING
        assert launcher.check_run_worker_health(unknown).status == WorkerStatus.RUNNING


def test_endless_check_lists_a_dead_run_and_fix_marks_it_failed(home, tmp_path):
    with dg.DagsterInstance.get() as instance:
        dead = _run(instance, _dead_owner())
    env = {**os.environ}
    listed = subprocess.run(
        [*ENDLESS, "check", "--format", "csv"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert listed.returncode == 1, listed.stderr
    assert dead in listed.stdout and "dead run" in listed.stdout
    fixed = subprocess.run(
        [*ENDLESS, "check", "--fix", "--format", "csv"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert fixed.returncode == 0, fixed.stderr
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
        assert _holding(instance) == set()
