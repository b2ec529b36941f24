"""A Dagster daemon for tests: started beside this checkout's code location (workspace.yaml) in
its own process group, and stopped with everything it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
from project import ROOT

POLLS = 1200  # one a second at most: a bound on waiting for the runs, not a timing assertion


def start_daemon(env: dict[str, str], log: Path) -> subprocess.Popen:
    """`dagster-daemon run` on the instance `env` names (DAGSTER_HOME), its output in `log`."""
    with open(log, "w") as sink:
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w", "workspace.yaml"],
            env=env,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_for(instance, run_ids, daemon) -> list[dg.DagsterRun]:
    """Poll the instance until every run has finished (or the daemon has died)."""
    for _ in range(POLLS):
        runs = [instance.get_run_by_id(r) for r in run_ids]
        if all(r.is_finished for r in runs) or daemon.poll() is not None:
            return runs
        time.sleep(1)
    return runs


def stop(proc: subprocess.Popen) -> None:
    """Stop the daemon and what it started (its process group)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with_group = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True)
    for pid in with_group.stdout.split():
        os.kill(int(pid), signal.SIGKILL)
