"""Runs whose process is gone, seen from the command line: `endless run` (before it launches),
`endless sweep` and `endless check --fix` mark them failed and free their Dagster pool slots
(runs/dead_runs.py); `endless check` lists them."""

from __future__ import annotations

import os
from pathlib import Path

from endless_assets.cli.app import err


def _home() -> Path | None:
    """The DAGSTER_HOME instance's directory, if there is one yet."""
    from endless_assets.launch import DEFAULT_DAGSTER_HOME

    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).expanduser().resolve()
    return home if (home / "dagster.yaml").exists() else None


def reap_dead_runs() -> int:
    """Mark failed the runs of the DAGSTER_HOME instance whose process is gone and free their
    Dagster pool slots, one line each on stderr; how many. (The instance is opened as it is:
    `endless run` has made it; the other commands leave a missing one alone.)"""
    import dagster as dg

    from endless_assets.runs import dead_runs

    home = _home()
    if home is None:
        return 0
    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        reaped = dead_runs.reap(instance)
    for one in reaped:
        err.print(
            f"run {one.run_id}: its process ({one.owner}) is gone: marked failed, its pool "
            "slots freed",
            highlight=False,
        )
    return len(reaped)


def dead_runs_found() -> list[tuple[str, str]]:
    """(run id, owner) of the in-progress runs whose process is gone, without changing them."""
    import dagster as dg
    from dagster._core.storage.dagster_run import RunsFilter

    from endless_assets import processes
    from endless_assets.runs import dead_runs

    home = _home()
    if home is None:
        return []
    os.environ["DAGSTER_HOME"] = str(home)
    found = []
    with dg.DagsterInstance.get() as instance:
        for record in instance.get_run_records(RunsFilter(statuses=dead_runs.IN_PROGRESS)):
            owner = dead_runs.owner_of(instance, record.dagster_run)
            if processes.alive(owner) is False:
                found.append((record.dagster_run.run_id, owner))
    return found
