"""A batch launched by dagster-docker's run launcher runs in a container of the local engine,
against a PostgreSQL instance (deploy/dagster-docker.yaml's shape): `endless run --submit`
creates the run, the launcher starts its container, the run's steps execute in it and drive the
sandboxes through the engine's socket, and the lake on the host holds the batch.

The code-location image is the base image with this checkout, its virtualenv and its Python
mounted at their own paths (deploy/Dockerfile installs the same code instead). The run container
shares the host's network (PostgreSQL listens on 127.0.0.1) and process namespace (the owner
labels of the sandboxes it starts name live host processes, so no sweeper mistakes them for a
dead run's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster_daemon import start_daemon, stop, wait_for
from project import ROOT

from endless_assets.store.lake import Lake

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
BATCH = "2026-05-01"


def launcher_yaml(image: str, home: Path, data: Path) -> dict:
    mounts = sorted({str(ROOT), sys.prefix, sys.base_prefix, str(home), str(data)})
    return {
        "telemetry": {"enabled": False},
        "storage": {"postgres": {"postgres_url": {"env": "DAGSTER_PG_URL"}}},
        "run_launcher": {
            "module": "dagster_docker",
            "class": "DockerRunLauncher",
            "config": {
                "image": image,
                "network": "host",
                "env_vars": [
                    "DAGSTER_PG_URL",
                    f"DAGSTER_HOME={home}",
                    f"ENDLESS_DATA_DIR={data}",
                    "DOCKER_HOST=unix:///var/run/docker.sock",
                    "ENDLESS_DISK=0",
                    # The launcher's command is `dagster api execute_run`: the virtualenv's.
                    f"PATH={Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",
                ],
                "container_kwargs": {
                    "pid_mode": "host",
                    "working_dir": str(ROOT),
                    "volumes": [
                        "/var/run/docker.sock:/var/run/docker.sock",
                        *(f"{path}:{path}" for path in mounts),
                    ],
                },
            },
        },
    }


def test_a_batch_launched_by_dagster_dockers_run_launcher_runs_in_a_container(
    postgres, sandbox, tmp_path, monkeypatch
):
    if os.environ.get("DOCKER_HOST", "unix://").split("://")[0] != "unix":
        pytest.skip("the run container reaches the engine through its local socket")
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    data.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(launcher_yaml(sandbox.base.tag, home, data)))
    url = postgres.database(
        "launcher", scheme="postgresql+psycopg2"
    )  # its own yaml: dagster-postgres as is
    env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_PG_URL": url}
    env["ENDLESS_DATA_DIR"] = str(data)
    submit = subprocess.run(
        [*ENDLESS, "run", "--submit", "--date", BATCH, "--tasks", "2"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert submit.returncode == 0, submit.stderr[-3000:]
    run_id = re.search(r"submitted as run (\S+) \(QUEUED\)", submit.stdout).group(1)

    monkeypatch.setenv("DAGSTER_PG_URL", url)  # (the instance's yaml reads it)
    daemon = start_daemon(env, tmp_path / "daemon.log")
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            (run,) = wait_for(instance, [run_id], daemon)
            events = [str(e.message) for e in instance.all_logs(run_id)]
    finally:
        stop(daemon)
    daemon_log = (tmp_path / "daemon.log").read_text()
    # The run's container (whatever became of the run), read and removed.
    launched = sandbox.client.containers.list(
        all=True, filters={"label": f"dagster/run_id={run_id}"}
    )
    logs = "".join(c.logs().decode("utf-8", "replace") for c in launched)
    attrs = [c.attrs for c in launched]
    for container in launched:
        container.remove(force=True)
    container_id = run.tags.get("docker/container_id", "")
    assert container_id and [a["Id"] for a in attrs] == [container_id], daemon_log[-3000:]
    (attrs,) = attrs
    assert run.status == dg.DagsterRunStatus.SUCCESS, "\n".join([*events[-30:], logs[-3000:]])
    assert any(f"new container {container_id}" in e for e in events)
    # The run executed in that container of the local engine: its steps logged there.
    assert attrs["Config"]["Image"] == sandbox.base.tag
    assert attrs["State"]["ExitCode"] == 0
    assert "execute_run" in attrs["Config"]["Cmd"]
    assert all(f"{step}" in logs for step in ("task_environments", "solver_rollouts"))
    lake = Lake(data)
    assert len(lake.read("task_descriptions", BATCH)) == 2
    assert len(lake.read("filtered_dataset", BATCH)) == 2
