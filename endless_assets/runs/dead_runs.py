"""Runs whose process is gone: found by the owner every run records, marked failed with the
reason, their concurrency slots freed.

Every run of the code location records the process that executes it (the `endless/owner` tag,
`host:pid:start`: processes.py), written by the executor before its first step (executor.py),
whoever launched it: `endless run`, the daemon, the UI. A run still `STARTED` (or `STARTING`,
`CANCELING`) whose owner is a process of this host that no longer runs (killed with `kill -9`, by
the OOM killer, with its machine) holds nothing any more: it is marked failed, and the slots it
held in the instance's pools (the `docker` pool) are freed, so that the next run proceeds. A run
of another host is never judged here (its host's processes, or its daemon, do). Runs of an older
endless, without the tag, are judged by the process id of their "Executing steps in process"
event when the instance is this host's own (SQLite in DAGSTER_HOME).

Who looks: `endless run` and `endless run --submit` before they launch, `endless sweep` and
`endless check --fix`, a run waiting for a slot (every few seconds, for the runs that hold the
pool: executor.py), and the daemon's run monitoring (launcher.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._core.storage.dagster_run import FINISHED_STATUSES, RunsFilter

from endless_assets import processes

OWNER_TAG = "endless/owner"
LAUNCHED_BY_TAG = "endless/launched_by"
IN_PROGRESS = [
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


@dataclass(frozen=True)
class Reaped:
    run_id: str
    owner: str
    reason: str  # what the run's failure says


@dataclass(frozen=True)
class Holder:
    """A run holding a slot of a pool."""

    run_id: str
    step_key: str
    owner: str  # "" when the run recorded none
    launched_by: str  # "endless run", "daemon", ...
    since: dt.datetime | None
    alive: bool | None  # None: this host cannot tell

    def describe(self) -> str:
        where = processes.parse(self.owner)
        process = f"pid {where.pid} on {where.host}" if where else "process unknown"
        since = f", since {self.since:%Y-%m-%d %H:%M:%S} UTC" if self.since else ""
        return f"run {self.run_id} ({self.launched_by}, {process}, step {self.step_key}{since})"


def owner_of(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The process that executes `run` ("" if unknown)."""
    if run.tags.get(OWNER_TAG):
        return run.tags[OWNER_TAG]
    if not _local_instance(instance):
        return ""
    records = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=20
    ).records
    for record in records:
        event = record.event_log_entry.dagster_event
        data = event.engine_event_data if event else None
        pid = (data.metadata or {}).get("pid") if data else None
        if pid is not None and str(pid.value).isdigit() and "in process" in (event.message or ""):
            return f"{processes.me().host}:{pid.value}"
    return ""


def _local_instance(instance: dg.DagsterInstance) -> bool:
    """The instance is this host's alone (SQLite files in DAGSTER_HOME), so a run recorded
    without a host ran here."""
    from dagster._core.storage.runs.sqlite import SqliteRunStorage

    return isinstance(instance.run_storage, SqliteRunStorage)


def owner_alive(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool | None:
    """Whether the process executing `run` runs: None when this host cannot tell."""
    return processes.alive(owner_of(instance, run))


def reap(instance: dg.DagsterInstance, run_ids: list[str] | None = None) -> list[Reaped]:
    """Mark failed the in-progress runs (of `run_ids`, or all) whose process is gone, and free
    every slot held by a run that is over (those just marked, and runs that ended holding
    slots). What was marked."""
    reaped = []
    for record in instance.get_run_records(RunsFilter(run_ids=run_ids, statuses=IN_PROGRESS)):
        run = record.dagster_run
        owner = owner_of(instance, run)
        if processes.alive(owner) is not False:
            continue
        fresh = instance.get_run_by_id(run.run_id)  # (another process may have marked it)
        if fresh is None or fresh.status not in IN_PROGRESS:
            continue
        reason = (
            f"endless: the process executing this run ({owner}) is gone (killed, or its machine "
            "stopped); run marked failed and its concurrency slots freed"
        )
        instance.report_run_failed(fresh, reason)
        reaped.append(Reaped(run.run_id, owner, reason))
    free_ended(instance)
    return reaped


def free_ended(instance: dg.DagsterInstance) -> int:
    """Free the slots (and queued claims) of runs that are over: how many runs had some."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return 0
    holding = list(storage.get_concurrency_run_ids())
    if not holding:
        return 0
    ended = instance.get_run_records(RunsFilter(run_ids=holding, statuses=FINISHED_STATUSES))
    known = {r.dagster_run.run_id for r in instance.get_run_records(RunsFilter(run_ids=holding))}
    gone = [r.dagster_run.run_id for r in ended] + [i for i in holding if i not in known]
    for run_id in gone:  # (a run deleted from the instance holds nothing either)
        storage.free_concurrency_slots_for_run(run_id)
    return len(gone)


def queued(instance: dg.DagsterInstance, pool: str) -> set[str]:
    """The runs holding slots of `pool` or waiting for one (a slot freed goes to the run that
    has waited longest, even if its process is gone)."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    return {s.run_id for s in info.claimed_slots} | {p.run_id for p in info.pending_steps}


def holders(instance: dg.DagsterInstance, pool: str) -> list[Holder]:
    """The runs holding slots of `pool` now."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    since = {
        (p.run_id, p.step_key): p.assigned_timestamp
        for p in info.pending_steps
        if p.assigned_timestamp
    }
    found = []
    for slot in info.claimed_slots:
        run = instance.get_run_by_id(slot.run_id)
        owner = owner_of(instance, run) if run else ""
        found.append(
            Holder(
                run_id=slot.run_id,
                step_key=slot.step_key,
                owner=owner,
                launched_by=_launcher(run),
                since=since.get((slot.run_id, slot.step_key)),
                alive=processes.alive(owner) if run else False,
            )
        )
    return found


def _launcher(run: Any) -> str:
    if run is None:
        return "a run no longer in the instance"
    return run.tags.get(LAUNCHED_BY_TAG) or (
        "daemon" if run.tags.get("dagster/schedule_name") else "the UI or the daemon"
    )
