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
import tempfile
import uuid
from pathlib import Path
from typing import Any

from endless_assets.cli.app import _fail, err, out

# The code location every process of the instance knows the job by (workspace.yaml's, and the
# Helm chart's in deploy/helm/values.yaml): a queued run names it, and the daemon loads it by name.
WORKSPACE_YAML = """\
load_from:
  - python_module:
      module_name: endless_assets.definitions
      location_name: endless
"""
PROJECT_WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"
LAUNCHED_BY = "endless run --submit"
_RAISED = re.compile(r"^(Error: |[A-Za-z_][\w.]*(Error|Exception)\b.*: )")


def open_instance() -> Path:
    """DAGSTER_HOME's instance, made and opened before any work; a DAGSTER_PG_URL that does not
    parse or answer, or a dagster.yaml that does not load: one line and exit 2."""
    from endless_assets.instance import InstanceError
    from endless_assets.launch import ensure_dagster_home

    try:
        return ensure_dagster_home()
    except InstanceError as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits


def submit_batch(batch: str, overrides: dict[str, Any]) -> str:
    """Queue the daily batch job for `batch`; print and return the run id."""
    import dagster as dg

    from endless_assets.instance import hidden, pg_url, shown
    from endless_assets.launch import batch_run_config

    open_instance()
    run_id = str(uuid.uuid4())
    tags = {"dagster/partition": batch, "endless/launched_by": LAUNCHED_BY}
    with tempfile.TemporaryDirectory(prefix="endless-submit-") as tmp:
        workspace = PROJECT_WORKSPACE
        if not workspace.exists():  # an installed package, no checkout: the same location
            workspace = Path(tmp) / "workspace.yaml"
            workspace.write_text(WORKSPACE_YAML)
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "dagster", "job", "launch"),
                *("-w", str(workspace), "-j", "daily_batch", "--run-id", run_id),
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
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        status = run.status.value if run else "missing"
        daemon = instance.get_daemon_statuses(["QUEUED_RUN_COORDINATOR"])
        healthy = daemon["QUEUED_RUN_COORDINATOR"].healthy
    where = f"PostgreSQL {shown(url)}" if url else "this machine's SQLite instance"
    out.print(
        f"batch {batch} submitted as run {run_id} ({status}) on {where}",
        soft_wrap=True,
        highlight=False,
    )
    if healthy is False:
        err.print(
            "[yellow]note:[/] no daemon has reported on this instance lately: the run waits in "
            "the queue until one runs (`dg dev`, or `dagster-daemon run` beside the code)"
        )
    return run_id
