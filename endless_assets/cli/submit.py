"""`endless run --submit`: queue a batch on the DAGSTER_HOME instance (e.g. a team's PostgreSQL
one) for the daemon to launch, instead of running it in this process.

The run is created the way `dagster job launch` creates it (that command does it, with a run id
chosen here): through the instance's run coordinator, so it waits in the queue with the UI's runs,
backfills and schedules, under the same run and pool limits, and runs wherever the instance's run
launcher puts it (a process beside the daemon, a container, a Kubernetes pod).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from endless_assets.cli.app import _fail, err, out
from endless_assets.store.shards import TAG as SHARD_TAG

LAUNCHED_BY = "endless run --submit"
_RAISED = re.compile(r"^(Error: |[A-Za-z_][\w.]*(Error|Exception)\b.*: )")


def open_instance(overrides: dict[str, Any] | None = None) -> Path:
    """DAGSTER_HOME's instance, made and opened before any work; a DAGSTER_PG_URL that does not
    parse or answer, or a dagster.yaml that does not load: one line and exit 2. `overrides`:
    the command's settings (None: unset), over the environment's."""
    from endless_assets.instance import InstanceError
    from endless_assets.launch import ensure_dagster_home
    from endless_assets.settings import SettingsError

    try:
        return ensure_dagster_home(overrides)
    except (InstanceError, SettingsError) as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits


def submit_batch(
    batch: str,
    overrides: dict[str, Any],
    *,
    job: str = "daily_batch",
    extra_tags: dict[str, str] | None = None,
    queued: list[str] | None = None,
) -> str:
    """Queue `job` (the daily batch job) for `batch`; print and return the run id (appended to
    `queued` as soon as the run is queued)."""
    import dagster as dg

    from endless_assets.instance import hidden, pg_url, shown
    from endless_assets.launch import batch_run_config, record_batch, workspace_file

    record_batch(open_instance(overrides), batch, overrides)
    run_id = str(uuid.uuid4())
    tags = {"dagster/partition": batch, "endless/launched_by": LAUNCHED_BY, **(extra_tags or {})}
    with workspace_file() as workspace:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "dagster", "job", "launch"),
                *("-w", str(workspace), "-j", job, "--run-id", run_id),
                *("--config-json", json.dumps(batch_run_config(overrides, "INFO"))),
                *("--tags", json.dumps(tags)),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    url = pg_url()
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()] or ["(no output)"]
        raised = [ln for ln in lines if _RAISED.match(ln)]  # a traceback's last line says why
        reason = (raised or lines)[-1][:300]
        if url:
            reason = hidden(reason, url)
        _fail(f"dagster job launch did not queue batch {batch}: {reason}", code=1)
    if queued is not None:
        queued.append(run_id)
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        status = run.status.value if run else "missing"
        daemon = instance.get_daemon_statuses(["QUEUED_RUN_COORDINATOR"])
        healthy = daemon["QUEUED_RUN_COORDINATOR"].healthy
    where = f"PostgreSQL {shown(url)}" if url else "this machine's SQLite instance"
    what = f"{job} {extra_tags.get(SHARD_TAG, '')}".strip() if extra_tags else job
    out.print(
        f"batch {batch} ({what}) submitted as run {run_id} ({status}) on {where}",
        soft_wrap=True,
        highlight=False,
    )
    if healthy is False:
        err.print(
            "[yellow]note:[/] no daemon has reported on this instance lately: the run waits in "
            "the queue until one runs (`dg dev`, or `dagster-daemon run` beside the code)"
        )
    return run_id


def submit_sharded(batch: str, overrides: dict[str, Any], shards: int) -> None:
    """A sharded batch on the instance: the describe stage, then every shard run at once (the queue
    and the instance's pools decide how many run together, on which machines), then the whole job.
    Each wave waits for the one before it; a failed run stops here, naming it."""
    queued: list[str] = []  # (Ctrl-C names those not done)
    done: set[str] = set()
    try:
        submit_batch(batch, overrides, job="batch_stage_one", queued=queued)
        _wait(queued[-1:], done)
        for i in range(shards):
            tags = {SHARD_TAG: f"{i}/{shards}"}
            submit_batch(batch, overrides, job="batch_shard", extra_tags=tags, queued=queued)
        _wait(queued[1:], done)
        submit_batch(batch, overrides, job="batch_finish", queued=queued)
    except KeyboardInterrupt:
        left = [run_id for run_id in queued if run_id not in done]
        _fail(
            f"stopped waiting: run(s) {', '.join(left) or '(none)'} stay queued or running on the "
            "instance (terminate them in the UI, or let them finish); later runs of the batch "
            "were not queued",
            code=130,
        )


WAIT_POLL_SECONDS = 5.0


def _wait(run_ids: list[str], done: set[str]) -> None:
    """Until every run succeeded (each added to `done`); one that failed stops here, naming it."""
    import dagster as dg

    pending = set(run_ids)
    total = len(run_ids)
    with dg.DagsterInstance.get() as instance:
        while pending:
            for run_id in sorted(pending):
                run = instance.get_run_by_id(run_id)
                if run is None or run.status in (
                    dg.DagsterRunStatus.FAILURE,
                    dg.DagsterRunStatus.CANCELED,
                ):
                    state = run.status.value if run else "missing"
                    _fail(
                        f"run {run_id} ended {state}: later runs of the batch were not queued",
                        code=1,
                    )
                if run.status == dg.DagsterRunStatus.SUCCESS:
                    pending.discard(run_id)
                    done.add(run_id)
                    err.print(f"run {run_id} done; {len(pending)} of {total} to go")
            if pending:
                time.sleep(WAIT_POLL_SECONDS)
