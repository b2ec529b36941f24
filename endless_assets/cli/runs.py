"""Runs whose process is gone, seen from the command line: `endless run` (before it launches),
`endless sweep` and `endless check --fix` mark them failed and free their Dagster pool slots
(runs/dead_runs.py); `endless check` lists them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from endless_assets.cli.app import err


@contextmanager
def _instance() -> Iterator[Any]:
    """The DAGSTER_HOME instance as it is, or None if there is none yet (`endless run` makes it;
    the other commands leave a missing one alone)."""
    import dagster as dg

    from endless_assets.launch import dagster_home

    home = dagster_home()
    if not (home / "dagster.yaml").exists():
        yield None
        return
    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        yield instance


def reap_dead_runs() -> int:
    """Mark failed the runs whose process is gone and free their Dagster pool slots, one line
    each on stderr; how many."""
    from endless_assets.runs import dead_runs

    with _instance() as instance:
        reaped = dead_runs.reap(instance) if instance is not None else []
    for one in reaped:
        err.print(
            f"run {one.run_id}: its process ({one.owner}) is gone: marked failed, its pool "
            "slots freed",
            highlight=False,
        )
    return len(reaped)


def dead_runs_found() -> list[tuple[str, str]]:
    """(run id, owner) of the in-progress runs whose process is gone, without changing them."""
    from dagster._core.storage.dagster_run import RunsFilter

    from endless_assets import processes
    from endless_assets.runs import dead_runs

    found = []
    with _instance() as instance:
        in_progress = RunsFilter(statuses=dead_runs.IN_PROGRESS)
        for record in instance.get_run_records(in_progress) if instance is not None else []:
            owner = dead_runs.owner_of(instance, record.dagster_run)
            if processes.alive(owner) is False:
                found.append((record.dagster_run.run_id, owner))
    return found
