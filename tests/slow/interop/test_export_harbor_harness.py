"""Exported Harbor tasks under Harbor's own harness (harbor 0.25, its local Docker environment):
its oracle agent scores 1.0 on every task and its do-nothing agent 0; tasks with services too
(environment/docker-compose.yaml, service_tasks.py: one service; two, one of them read by the
completion test). The service families' tasks install Debian packages as they build, which
Harbor's own builds cannot here (no network but the pipeline's registry proxy).

Harbor needs Python >= 3.12 and Docker Compose v2, which this machine kind lacks, so it runs in
a runner image that scripts/harbor-runner.sh builds once (Debian trixie + harbor from PyPI; a
few minutes the first time). Deselect with `-m "not harbor"`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import dagster as dg
import pytest
from project import ROOT
from service_tasks import fetch_task, store_task

import endless_assets.definitions as definitions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
from endless_assets.interop import export_dataset
from endless_assets.interop.harbor import export_harbor
from endless_assets.store.lake import Lake

pytestmark = pytest.mark.harbor

RUNNER = ROOT / "scripts" / "harbor-runner.sh"
BATCH = "2026-09-01"
TASKS = 3
ASSETS = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
    "task_soundness",
    "solver_rollouts",
    "filtered_dataset",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, sandbox) -> Path:
    work = tmp_path_factory.mktemp("harbor-harness")
    data_dir = work / "data"
    result = dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        partition_key=BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), tasks=TASKS, soundness_repeats=1),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
    )
    assert result.success
    export_dataset(Lake(data_dir), "harbor", work / "tasks")
    build = subprocess.run([str(RUNNER), "--build"], capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    return work


@pytest.fixture(scope="module")
def exported_services(tmp_path_factory, sandbox) -> Path:
    """Tasks with services (service_tasks.py) exported to Harbor."""
    work = tmp_path_factory.mktemp("harbor-services")
    base = sandbox.base.tag
    tasks = [fetch_task(base), store_task(base)]
    export_harbor(tasks, work / "tasks", base_image=base)
    build = subprocess.run([str(RUNNER), "--build"], capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    return work


def run_harbor(work: Path, agent: str) -> dict:
    proc = subprocess.run(
        [
            str(RUNNER),
            str(work),
            "harbor",
            "run",
            "-p",
            str(work / "tasks"),
            "-a",
            agent,
            "-e",
            "docker",
            "-o",
            str(work / "jobs"),
            "--job-name",
            agent,
            "-n",
            "2",
            "-y",
            "-q",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((work / "jobs" / agent / "result.json").read_text())
    (evaluation,) = result["stats"]["evals"].values()
    return {
        "trials": result["n_total_trials"],
        "errors": evaluation["n_errors"],
        "mean": evaluation["metrics"][0]["mean"],
        "rewards": evaluation["reward_stats"]["reward"],
    }


def test_harbor_oracle_solves_every_exported_task(exported):
    outcome = run_harbor(exported, "oracle")
    assert (outcome["trials"], outcome["errors"], outcome["mean"]) == (TASKS, 0, 1.0)
    assert len(outcome["rewards"]["1.0"]) == TASKS


def test_harbor_do_nothing_agent_scores_zero(exported):
    outcome = run_harbor(exported, "nop")
    assert (outcome["trials"], outcome["errors"], outcome["mean"]) == (TASKS, 0, 0.0)
    assert len(outcome["rewards"]["0.0"]) == TASKS


def test_harbor_oracle_solves_every_exported_task_with_services(exported_services):
    outcome = run_harbor(exported_services, "oracle")
    assert (outcome["trials"], outcome["errors"], outcome["mean"]) == (2, 0, 1.0)


def test_harbor_do_nothing_agent_scores_zero_on_tasks_with_services(exported_services):
    outcome = run_harbor(exported_services, "nop")
    assert (outcome["trials"], outcome["errors"], outcome["mean"]) == (2, 0, 0.0)
