"""Launch a batch through Dagster from Python: the same job, code location, executor and instance
as the UI."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

DEFAULT_DAGSTER_HOME = "dagster_home"

# The code location every process of the instance knows the jobs by (workspace.yaml's, and the
# Helm chart's in deploy/helm/values.yaml): a run names it, and the UI and the daemon find its job
# by that name.
LOCATION = "endless"
DEFS_ATTRIBUTE = "defs"  # the Definitions object of the module the location loads
WORKSPACE_YAML = f"""\
load_from:
  - python_module:
      module_name: endless_assets.definitions
      location_name: {LOCATION}
"""
PROJECT_WORKSPACE = Path(__file__).resolve().parents[1] / "workspace.yaml"

INIT_LOCK = ".endless-init.lock"


def dagster_home() -> Path:
    """DAGSTER_HOME if set, else ./dagster_home, made absolute."""
    return Path(os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).expanduser().resolve()


@contextmanager
def home_lock(home: Path) -> Iterator[None]:
    """One process at a time in what Dagster does without a lock of its own."""
    with open(home / INIT_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        yield


def ensure_dagster_home(overrides: dict[str, Any] | None = None) -> Path:
    """Use DAGSTER_HOME if set, else ./dagster_home (made absolute; created with our yaml), with
    the instance's storage created: SQLite there, or PostgreSQL when DAGSTER_PG_URL is set
    (instance.py writes the yaml, its pools sized by the settings with `overrides` (None: unset)
    over the environment; InstanceError, in one line, if the URL does not parse or answer).

    Dagster creates its schemas when an instance first opens, without a lock of its own: two
    `endless run` started at once on a fresh home both try, and one fails ("table ... already
    exists"). So the yaml and the schemas are made here, one process at a time (an exclusive lock
    on a file in the home, and for PostgreSQL an advisory lock in the database, which processes on
    other machines also take); after that every process only opens what exists."""
    from endless_assets.instance import (
        InstanceError,
        pg_url,
        postgres_session,
        sync_instance_yaml,
    )
    from endless_assets.settings import Settings

    home = dagster_home()
    url = pg_url()
    with postgres_session(url) if url else nullcontext():  # the URL answers, before any work
        home.mkdir(parents=True, exist_ok=True)
        os.environ["DAGSTER_HOME"] = str(home)
        with home_lock(home):
            note = sync_instance_yaml(home, url, Settings.resolve(**(overrides or {})))
            if note:
                print(f"endless: {note}", file=sys.stderr)
            try:
                with dg.DagsterInstance.get() as instance:
                    # Opening makes the run and schedule storages; these make the event log's
                    # index.
                    instance.get_runs(limit=1)
                    instance.get_asset_keys()
            except dg.DagsterInvalidConfigError as exc:
                first = exc.errors[0].message if exc.errors else str(exc)
                reason = " ".join(first.split())[:300]
                raise InstanceError(f"{home / 'dagster.yaml'} does not load: {reason}") from None
    return home


def record_batch(home: Path, batch: str, overrides: dict[str, Any]) -> None:
    """Make `batch` a daily partition on this instance before anything loads the definitions:
    their partitions start at the earliest of it, the day already recorded and the days in the
    lake (batch_calendar.py)."""
    from endless_assets.batch_calendar import record_batch_day
    from endless_assets.settings import Settings
    from endless_assets.store.lake import Lake

    lake = Lake(Settings.resolve(**overrides).run.data_dir)
    with home_lock(home):
        record_batch_day(home, batch, lake.batches("task_descriptions"))


@dataclass(frozen=True)
class LaunchResult:
    success: bool
    run_id: str
    failed_steps: list[str]
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM (the run is marked failed)


def batch_run_config(
    overrides: dict[str, Any], log_level: str, extra_run_config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The run config of a launch: the console log level, and the pipeline settings set
    (`overrides`, None: unset) as the `pipeline` resource's config."""
    config = {k: v for k, v in overrides.items() if v is not None}
    run_config: dict[str, Any] = {
        "loggers": {"console": {"config": {"log_level": log_level}}},
        **(extra_run_config or {}),
    }
    if config:
        run_config["resources"] = {"pipeline": {"config": config}}
    return run_config


def launch_batch(
    batch: str,
    overrides: dict[str, Any],
    *,
    log_level: str = "INFO",
    shards: int = 1,
    progress: Callable[[str], None] = lambda _: None,
) -> LaunchResult:
    """Materialize one partition of the daily batch job, as the UI would, on this instance. With
    `shards` > 1: the describe stage, then one run per shard, then the whole job (store/shards.py);
    the first failing run's result is returned."""
    from endless_assets.store.shards import TAG

    run = functools.partial(
        launch_job, batch=batch, overrides=overrides, launched_by="endless run", log_level=log_level
    )
    if shards <= 1:
        return run("daily_batch")
    result = run("batch_stage_one")
    progress(f"the describe stage: run {result.run_id} {'done' if result.success else 'failed'}")
    if not result.success:
        return result
    for index in range(shards):
        result = run("batch_shard", extra_tags={TAG: f"{index}/{shards}"})
        state = "done" if result.success else "failed"
        progress(f"shard run {TAG}={index}/{shards}: run {result.run_id} {state}")
        if not result.success:
            return result
    return run("batch_finish")


@contextmanager
def workspace_file() -> Iterator[Path]:
    """The workspace every process of the instance knows the code by: the checkout's
    workspace.yaml, or (an installed package, no checkout) the same location in a file of its
    own for as long as the caller needs it."""
    if PROJECT_WORKSPACE.exists():
        yield PROJECT_WORKSPACE
        return
    with tempfile.TemporaryDirectory(prefix="endless-workspace-") as tmp:
        path = Path(tmp) / "workspace.yaml"
        path.write_text(WORKSPACE_YAML)
        yield path


@dataclass(frozen=True)
class LocatedJob:
    """A job of the `endless` code location as the UI and the daemon know it: the remote origin
    (location and repository names: what the UI matches a run to its job by, and the hidden
    repository tag its Runs tab, the timeline and re-execution filter on) and the Python origin
    its steps are rebuilt from (the module workspace.yaml loads, its `defs`)."""

    job: Any  # ReconstructableJob
    remote_origin: Any  # RemoteJobOrigin


def locate(job_name: str) -> LocatedJob:
    from dagster._core.code_pointer import ModuleCodePointer
    from dagster._core.definitions.reconstruct import ReconstructableRepository
    from dagster._core.remote_origin import RemoteRepositoryOrigin
    from dagster._core.workspace.load import location_origins_from_yaml_paths

    from endless_assets.definitions import defs

    with workspace_file() as workspace:
        origins = {o.location_name: o for o in location_origins_from_yaml_paths([str(workspace)])}
    location = origins[LOCATION]
    target = location.loadable_target_origin
    repository = ReconstructableRepository(
        ModuleCodePointer(target.module_name, DEFS_ATTRIBUTE, target.working_directory),
        executable_path=target.executable_path,
    )
    origin = RemoteRepositoryOrigin(location, defs.get_repository_def().name)
    return LocatedJob(repository.get_reconstructable_job(job_name), origin.get_job_origin(job_name))


def launch_job(
    job_name: str,
    batch: str,
    overrides: dict[str, Any],
    *,
    launched_by: str,
    log_level: str = "INFO",
    extra_run_config: dict[str, Any] | None = None,
    dynamic_partitions: str | None = None,
    extra_tags: dict[str, str] | None = None,
) -> LaunchResult:
    """Run the job `job_name` of the `endless` code location for one partition, in this process,
    on the DAGSTER_HOME instance: the run names the location (locate), so it is the UI's like any
    other (its job's Runs tab, the timeline, re-execution). `overrides` are pipeline settings
    (None: unset); `dynamic_partitions` names a dynamic partitions definition to add the batch to
    first."""
    from dagster._core.execution.api import execute_run

    home = ensure_dagster_home(overrides)
    if dynamic_partitions is None:  # a daily batch
        record_batch(home, batch, overrides)
    # The run's own loggers follow the run config; the engine's events about step processes go
    # through the "dagster" Python logger of this process.
    logging.getLogger("dagster").setLevel(log_level)
    run_config = batch_run_config(overrides, log_level, extra_run_config)
    located = locate(job_name)
    job_def = located.job.get_definition()
    with dg.DagsterInstance.get() as instance:
        if dynamic_partitions:  # two imports of one new batch at once: one adds it
            with home_lock(home):
                if not instance.has_dynamic_partition(dynamic_partitions, batch):
                    instance.add_dynamic_partitions(dynamic_partitions, [batch])
        run = instance.create_run_for_job(
            job_def=job_def,
            run_config=run_config,
            tags={
                **job_def.run_tags,
                "dagster/partition": batch,
                "endless/launched_by": launched_by,
                **(extra_tags or {}),
            },
            remote_job_origin=located.remote_origin,
            job_code_origin=located.job.get_python_origin(),
        )
        result = execute_run(located.job, run, instance, raise_on_error=False)
        failed = [
            event.step_key or ""
            for event in result.all_events
            if event.event_type_value == "STEP_FAILURE"
        ]
        interrupted = any(
            event.is_run_failure and "interrupted" in (event.message or "")
            for event in result.all_events
        )
        return LaunchResult(result.success, result.run_id, failed, interrupted)
