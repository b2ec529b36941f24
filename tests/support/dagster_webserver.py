"""A Dagster webserver for tests: `dagster-webserver` on a free port over this checkout's code
location (workspace.yaml) and the instance `env` names, in its own process group; its GraphQL API,
and the questions the UI asks of a run before it shows it on its job's page or offers to
re-execute it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from postgres_server import free_port
from project import ROOT

POLLS = 600  # a tenth of a second each at most: a bound on the start, not a timing assertion

JOB_RUNS = """
query JobRuns($job: String!) {
  pipelineOrError(params: {
    repositoryLocationName: "endless", repositoryName: "__repository__", pipelineName: $job
  }) {
    __typename
    ... on Pipeline {
      pipelineSnapshotId
      runs { runId status pipelineSnapshotId parentPipelineSnapshotId
             repositoryOrigin { repositoryLocationName repositoryName }
             hasReExecutePermission tags { key value } }
    }
  }
}
"""


@dataclass(frozen=True)
class Webserver:
    url: str

    def graphql(self, query: str, **variables: object) -> dict:
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(response.read())
        assert "errors" not in answer, answer["errors"]
        return answer["data"]

    def job_runs(self, job: str) -> tuple[str, list[dict]]:
        """The job's snapshot id as the code location has it, and the runs its Runs tab lists."""
        found = self.graphql(JOB_RUNS, job=job)["pipelineOrError"]
        assert found["__typename"] == "Pipeline", found
        return found["pipelineSnapshotId"], found["runs"]


def reexecutable_without_warning(run: dict, snapshot_id: str) -> bool:
    """What the UI checks before it offers Re-execute with no warning: the run's origin names a
    loaded location and repository that has its job, and its job snapshot is the one loaded
    there (else: "may be different" or "loaded ... from a different code location")."""
    origin = run["repositoryOrigin"] or {}
    return (
        origin.get("repositoryLocationName") == "endless"
        and origin.get("repositoryName") == "__repository__"
        and snapshot_id in (run["pipelineSnapshotId"], run["parentPipelineSnapshotId"])
        and run["hasReExecutePermission"]
    )


@contextmanager
def webserver(env: dict[str, str], log: Path) -> Iterator[Webserver]:
    port = free_port()
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("dagster-webserver")),
                *("-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)),
            ],
            env=env,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Webserver(f"http://127.0.0.1:{port}")
    try:
        for _ in range(POLLS):
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{server.url}/server_info", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        yield server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
