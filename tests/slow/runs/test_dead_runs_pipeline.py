"""Nothing holds a batch hostage, with real `endless run`s, real Docker and real SQLite and
PostgreSQL instances: a run killed with SIGKILL in the middle of a Docker stage is marked failed
with the reason and the rerun completes the batch by itself; a run launched by the daemon whose
worker is killed is failed by the daemon and a resubmitted run completes; a run that waits for a
slot of the `docker` pool names the run that holds it and stops at once on Ctrl-C, and goes on
by itself when that run's process dies."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.test_utils import create_run_for_test
from dagster_daemon import start_daemon, stop
from project import ROOT

from endless_assets import processes
from endless_assets.launch import ensure_dagster_home
from endless_assets.runs import dead_runs
from endless_assets.store.lake import Lake

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
POOL = "docker"
POLLS = 3000  # a bound on waiting for a condition (5 minutes at 0.1 s), not a timing assertion
TASKS = "2"


@pytest.fixture
def env(request, tmp_path, monkeypatch) -> dict[str, str]:
    """The environment of a fresh instance (SQLite, or PostgreSQL with `postgres` in the test's
    parameters) and data directory, also set in this process."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENDLESS_DATA_DIR", str(tmp_path / "data"))
    if "postgres" in request.node.name:
        server = request.getfixturevalue("postgres")
        monkeypatch.setenv("DAGSTER_PG_URL", server.database(f"hostage_{uuid.uuid4().hex[:12]}"))
    else:
        monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    ensure_dagster_home()
    return dict(os.environ)


def _start(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen:
    with open(log, "w") as sink:
        return subprocess.Popen(
            [*ENDLESS, "run", "--tasks", TASKS, *args],
            env=env,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


def _poll(condition, what: str):
    started = time.monotonic()
    for _ in range(POLLS):
        found = condition()
        if found:
            print(f"{what}: {time.monotonic() - started:.1f} s")
            return found
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def _claimed(instance, step: str) -> str | None:
    """The run id holding a slot of the pool at `step`, if any."""
    info = instance.event_log_storage.get_concurrency_info(POOL)
    return next((s.run_id for s in info.claimed_slots if s.step_key == step), None)


def _holding(instance) -> set[str]:
    info = instance.event_log_storage.get_concurrency_info(POOL)
    return {s.run_id for s in info.claimed_slots} | {p.run_id for p in info.pending_steps}


def _failure(instance, run_id: str) -> str:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    return " ".join(r.event_log_entry.dagster_event.message or "" for r in records.records)


def _every_task_kept(data: str, batch: str) -> None:
    lake = Lake(data)
    described = set(lake.read("task_descriptions", batch)["task_id"].to_list())
    dataset = lake.read("filtered_dataset", batch)
    assert len(described) == int(TASKS)
    assert set(dataset.filter(dataset["kept"])["task_id"].to_list()) == described


def _live_holder(instance) -> tuple[str, subprocess.Popen]:
    """A run in progress whose process (a `sleep`) runs, holding the pool's only slot."""
    proc = subprocess.Popen(["sleep", "3600"])
    owner = processes.Owner(processes.me().host, proc.pid, processes.start_of(proc.pid))
    run = create_run_for_test(
        instance,
        job_name="daily_batch",
        status=dg.DagsterRunStatus.STARTED,
        tags={dead_runs.OWNER_TAG: str(owner), dead_runs.LAUNCHED_BY_TAG: "a test"},
    )
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default(POOL)
    assert storage.claim_concurrency_slot(POOL, run.run_id, "task_environments").is_claimed
    return run.run_id, proc


@pytest.mark.parametrize(
    "storage, step", [("sqlite", "task_environments"), ("postgres", "solver_rollouts")]
)
def test_endless_run_killed_mid_stage_is_failed_and_the_rerun_keeps_every_task(
    storage, step, env, tmp_path, sandbox
):
    batch = "2026-11-02"
    first = _start(env, tmp_path / "first.log", "--date", batch)
    with dg.DagsterInstance.get() as instance:
        dead = _poll(lambda: _claimed(instance, step), f"a run holding the pool at {step}")
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert dead in _holding(instance)  # what a killed run left: its slot

    rerun = subprocess.run(
        [*ENDLESS, "run", "--tasks", TASKS, "--date", batch],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"run {dead}: its process" in rerun.stderr and "marked failed" in rerun.stderr
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
        assert "is gone" in _failure(instance, dead)
        assert _holding(instance) == set()
    _every_task_kept(env["ENDLESS_DATA_DIR"], batch)


@pytest.mark.parametrize("storage", ["sqlite", "postgres"])
def test_a_run_waiting_for_a_slot_held_by_a_live_run_names_it_and_stops_on_ctrl_c(
    storage, env, tmp_path, sandbox
):
    with dg.DagsterInstance.get() as instance:
        holder, owner = _live_holder(instance)
    log = tmp_path / "waiting.log"
    try:
        waiting = _start(env, log, "--date", "2026-11-03")
        said = _poll(
            lambda: re.search(r"waits for a slot of pool docker.*", log.read_text()),
            "the waiting run saying so",
        ).group(0)
        assert f"held by run {holder} (a test, pid {owner.pid} on" in said
        assert "Ctrl-C" in said

        started = time.monotonic()
        waiting.send_signal(signal.SIGINT)
        code = waiting.wait(timeout=300)  # (a hang guard: it stops in a few seconds)
        print(f"stopped {time.monotonic() - started:.1f} s after SIGINT")
        assert code == 130, log.read_text()[-3000:]
        assert "interrupted" in log.read_text()
        with dg.DagsterInstance.get() as instance:
            runs = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": "2026-11-03"}))
            assert [r.status for r in runs] == [dg.DagsterRunStatus.FAILURE]
            assert _holding(instance) == {holder}  # the live run keeps its slot
            assert instance.get_run_by_id(holder).status == dg.DagsterRunStatus.STARTED
    finally:
        owner.kill()
        owner.wait()


def test_a_run_waiting_behind_a_run_whose_process_dies_goes_on_by_itself(env, tmp_path, sandbox):
    with dg.DagsterInstance.get() as instance:
        holder, owner = _live_holder(instance)
    log = tmp_path / "waiting.log"
    batch = "2026-11-04"
    waiting = _start(env, log, "--date", batch)
    _poll(lambda: "waits for a slot of pool docker" in log.read_text(), "the run waiting")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert waiting.wait(timeout=1800) == 0, log.read_text()[-3000:]
    assert f"run {holder}: the process executing this run" in log.read_text()
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(holder).status == dg.DagsterRunStatus.FAILURE
    _every_task_kept(env["ENDLESS_DATA_DIR"], batch)


def _submit(env: dict[str, str], batch: str) -> str:
    submitted = subprocess.run(
        [*ENDLESS, "run", "--submit", "--tasks", TASKS, "--date", batch],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    return re.search(r"submitted as run (\S+)", submitted.stdout).group(1)


@pytest.mark.parametrize("storage", ["postgres"])
def test_a_daemon_launched_run_killed_with_its_daemon_is_failed_by_the_next_daemon(
    storage, env, tmp_path, sandbox
):
    """The daemon, its code server and the run worker all killed at once (a lost session, the
    machine stopping): the next daemon's run monitoring finds the run's process gone."""
    batch = "2026-11-05"
    daemon = start_daemon(env, tmp_path / "daemon.log")
    with dg.DagsterInstance.get() as instance:
        try:
            dead = _submit(env, batch)
            _poll(lambda: _claimed(instance, "task_environments") == dead, "the run's build stage")
            worker = processes.parse(instance.get_run_by_id(dead).tags[dead_runs.OWNER_TAG])
            os.killpg(daemon.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
            daemon.wait()
        finally:
            stop(daemon)
        assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.STARTED
        assert dead in _holding(instance)

        daemon = start_daemon(env, tmp_path / "daemon-again.log")
        try:
            _poll(lambda: instance.get_run_by_id(dead).is_finished, "the daemon failing it")
            assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
            assert "is gone" in _failure(instance, dead)
            _poll(lambda: not _holding(instance), "its slot freed")
            rerun = _submit(env, batch)
            _poll(lambda: instance.get_run_by_id(rerun).is_finished, "the resubmitted run")
            assert instance.get_run_by_id(rerun).status == dg.DagsterRunStatus.SUCCESS
        finally:
            stop(daemon)
    _every_task_kept(env["ENDLESS_DATA_DIR"], batch)
