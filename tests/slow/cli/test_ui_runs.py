"""A batch made with `endless run` (or brought in with `endless import`) is a first-class run in
the Dagster UI, on SQLite and on a PostgreSQL instance at a standard postgresql:// URL: the
webserver lists it on its job's page (the Runs tab, the timeline and the sparkline filter on the
same repository tag), its origin and job snapshot are the code location's (so Re-execute has no
warning), the resource page shows the values the run used, and the batch is 1 of 1 partitions.
In a real headless browser too, where Python playwright and Debian's chromium are installed
(scripts/ui_check.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster_daemon import start_daemon, stop
from dagster_webserver import reexecutable_without_warning, webserver
from project import ROOT

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
BROWSER = Path("/usr/bin/chromium").exists() and importlib.util.find_spec("playwright")
RESOURCE = """
query Resource {
  topLevelResourceDetailsOrError(resourceSelector: {
    repositoryLocationName: "endless", repositoryName: "__repository__", resourceName: "pipeline"
  }) { __typename ... on ResourceDetails { configuredValues { key value type } } }
}
"""
STATS = """
query Stats {
  assetNodes(assetKeys: [{path: ["task_descriptions"]}, {path: ["filtered_dataset"]}]) {
    partitionStats { numMaterialized numPartitions numFailed }
  }
}
"""
POOL = '{ instance { concurrencyLimit(concurrencyKey: "docker") { limit slotCount } } }'
RUN = "query Run($id: ID!) { runOrError(runId: $id) { ... on Run { status pipelineName } } }"
POLLS = 900  # one a second at most: a bound on waiting for the re-executed run


def endless_run(env: dict[str, str]) -> str:
    """`endless run` of one task, today's batch (the default); the run id it prints."""
    proc = subprocess.run(
        [*ENDLESS, "run", "--tasks", "1", "--quiet"],
        env={**env, "COLUMNS": "200"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return re.search(r"\(run\s+([0-9a-f-]{36})\)", proc.stdout).group(1)


def check_ui(env: dict[str, str], tmp_path: Path) -> list[str]:
    run_id = endless_run(env)
    with webserver(env, tmp_path / "webserver.log") as server:
        return check_ui_on(server, env, tmp_path, run_id)


def check_ui_on(server, env: dict[str, str], tmp_path: Path, run_id: str) -> list[str]:
    said: list[str] = []
    snapshot_id, runs = server.job_runs("daily_batch")
    [run] = [r for r in runs if r["runId"] == run_id]  # on its job's page
    assert run["status"] == "SUCCESS"
    assert reexecutable_without_warning(run, snapshot_id)
    details = server.graphql(RESOURCE)["topLevelResourceDetailsOrError"]
    values = {v["key"]: v for v in details["configuredValues"]}
    assert values["tasks"]["value"] == "24" and values["solver"]["value"] == '"oracle"'
    # A fresh project with one batch: its partitions are the days since its first batch.
    stats = [n["partitionStats"] for n in server.graphql(STATS)["assetNodes"]]
    assert stats == [{"numMaterialized": 1, "numPartitions": 1, "numFailed": 0}] * 2
    # The docker pool has slots (a limit of None reads "does not have any slots configured").
    pool = server.graphql(POOL)["instance"]["concurrencyLimit"]
    assert pool == {"limit": 1, "slotCount": 1}
    if BROWSER:
        sys.path.insert(0, str(ROOT / "scripts"))
        from ui_check import check

        new_run = check(server.url, "daily_batch", run_id, said.append)
        # The re-executed run waits in the queue; a daemon (as `dg dev` runs one) launches
        # it, and it succeeds as the job's run.
        daemon = start_daemon(env, tmp_path / "daemon.log")
        try:
            for _ in range(POLLS):
                status = server.graphql(RUN, id=new_run)["runOrError"]
                if status["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
                    break
                assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
                time.sleep(1)
        finally:
            stop(daemon)
        assert status == {"status": "SUCCESS", "pipelineName": "daily_batch"}
        said.append(f"re-executed run {new_run[:8]}: {status['status']}")
    return said


@pytest.fixture(scope="module")
def sqlite_project(sandbox, tmp_path_factory):
    """One SQLite instance with a batch made by `endless run` and one brought in by `endless
    import` (of that batch's export), and a webserver over it."""
    tmp_path = tmp_path_factory.mktemp("ui-sqlite")
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_PG_URL"}
    env |= {"DAGSTER_HOME": str(tmp_path / "home"), "ENDLESS_DATA_DIR": str(tmp_path / "data")}
    run_id = endless_run(env)
    for command in (
        ["export", "--format", "harbor", "--out", str(tmp_path / "harbor")],
        ["import", "harbor", str(tmp_path / "harbor"), "--batch", "brought-in", "--quiet"],
    ):
        proc = subprocess.run(
            [*ENDLESS, *command],
            env={**env, "COLUMNS": "200"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    import_run_id = re.search(r"\(run\s+([0-9a-f-]{36})\)", proc.stdout).group(1)
    with webserver(env, tmp_path / "webserver.log") as server:
        yield env, tmp_path, server, run_id, import_run_id


def test_a_batch_made_by_endless_run_is_first_class_in_the_ui_on_sqlite(sqlite_project):
    env, tmp_path, server, run_id, _ = sqlite_project
    said = check_ui_on(server, env, tmp_path, run_id)
    print("\n".join(said))


def test_a_batch_made_by_endless_run_is_first_class_in_the_ui_on_postgres(
    postgres, sandbox, tmp_path
):
    env = {
        **os.environ,
        "DAGSTER_PG_URL": postgres.database("ui"),  # the standard postgresql:// form
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ENDLESS_DATA_DIR": str(tmp_path / "data"),
    }
    said = check_ui(env, tmp_path)
    print("\n".join(said))


def test_a_batch_brought_in_by_endless_import_is_on_its_jobs_page_without_a_warning(
    sqlite_project,
):
    _, _, server, _, run_id = sqlite_project
    snapshot_id, runs = server.job_runs("imported_batch")
    [run] = [r for r in runs if r["runId"] == run_id]
    assert run["status"] == "SUCCESS"
    assert {"key": "dagster/partition", "value": "brought-in"} in run["tags"]
    assert reexecutable_without_warning(run, snapshot_id)
