"""A real `endless run` killed with SIGKILL (its whole process group) while a task's service
runs: its service and agent containers and the episode's network stay behind until `endless
sweep`, which removes every one of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date, timedelta

from project import ROOT

from endless_assets.batch_calendar import today
from endless_assets.generation.procedural import SERVICES_SINCE, ProceduralGenerator
from endless_assets.generation.procedural.families import SERVICE_FAMILIES

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
POLLS = 6000  # a bound on waiting for a condition (10 minutes at 0.1 s), not a timing assertion


def service_batch() -> tuple[str, int]:
    """The first day from SERVICES_SINCE to today (a later one is no batch yet) and the number
    of tasks that reaches its first task of a family with services."""
    generator = ProceduralGenerator("endless-base:any")
    names = {f.name for f in SERVICE_FAMILIES}
    day = date.fromisoformat(SERVICES_SINCE)
    while day.isoformat() <= today():
        for index in range(len(generator.families)):
            if generator._family_for(day.isoformat(), index).name in names:
                return day.isoformat(), index + 1
        day += timedelta(days=1)
    raise AssertionError("no batch deals a family with services")


def left(client, batch: str) -> tuple[list, list]:
    label = f"endless.batch={batch}"
    containers = client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
    return containers, client.api.networks(filters={"label": [label]})


def test_a_killed_endless_run_leaves_its_services_to_endless_sweep(sandbox, tmp_path):
    batch, tasks = service_batch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENDLESS_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(tmp_path / "home"), ENDLESS_DATA_DIR=str(tmp_path / "data"))
    os.makedirs(env["DAGSTER_HOME"])
    with open(tmp_path / "run.log", "w") as log:
        run = subprocess.Popen(
            [*ENDLESS, "run", "--tasks", str(tasks), "--date", batch],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        for _ in range(POLLS):
            containers, _ = left(sandbox.client, batch)
            if any("endless.service" in c.labels for c in containers) or run.poll() is not None:
                break
            time.sleep(0.1)
        assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    containers, networks = left(sandbox.client, batch)
    assert any("endless.service" in c.labels for c in containers) and networks
    swept = subprocess.run(
        [*ENDLESS, "sweep"], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert swept.returncode == 0, swept.stderr
    assert "episode network" in swept.stdout
    assert left(sandbox.client, batch) == ([], [])
