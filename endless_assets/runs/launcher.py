"""The instance's run launcher: Dagster's default one (a run worker process beside the code
server), which the daemon's run monitoring can ask whether a run's process still runs.

Dagster's default launcher cannot say, so without this a run worker killed with `kill -9` (or by
the OOM killer) leaves its run `STARTED` for ever, holding its `docker` pool slot and its place
under `max_concurrent_runs`. Here the answer is the process the run recorded (runs/dead_runs.py):
gone on this host -> the run worker failed, and run monitoring marks the run failed with that
reason; the instance frees its slots a few seconds later (`free_slots_after_run_end_seconds`,
instance.py). A run on another host, or one that has recorded no process yet, is reported
running: this host cannot tell (its start timeout still applies).
"""

from __future__ import annotations

from dagster import DefaultRunLauncher
from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus

from endless_assets.runs import dead_runs


class OwnedRunLauncher(DefaultRunLauncher):
    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run) -> CheckRunHealthResult:
        owner = dead_runs.owner_of(self._instance, run)
        if dead_runs.owner_alive(self._instance, run) is False:
            return CheckRunHealthResult(
                WorkerStatus.FAILED, f"the process executing the run ({owner}) is gone"
            )
        return CheckRunHealthResult(WorkerStatus.RUNNING, owner or "no process recorded yet")
