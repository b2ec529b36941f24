"""A run killed in the solver stage loses only the attempts in flight: each scored attempt is
persisted as it finishes, and the rerun sends the model only the requests of unfinished attempts.

Real parts throughout: the killed run is a separate Python process running a real Dagster
materialization (real Docker, real lake) against the scripted OpenAI-compatible server, which
SIGKILLs it when 70% of the batch's requests have arrived; the rerun is a real Dagster run on the
same data directory; the result is compared with a clean run's partition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import broken_families as bf
import dagster as dg
import golden_rows
import polars as pl
import pytest
from batches import materialize_batch
from project import SUPPORT

import endless_assets.definitions as definitions
import endless_assets.generation.procedural as procedural
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.jobs import asset_selection
from endless_assets.defs.resources import PipelineSettings
from endless_assets.store.journal import journal_dir
from endless_assets.store.lake import Lake
from endless_assets.testing.scripted_server import Reply, ScriptedServer

BATCH = "2026-05-17"
TASKS = 2
K = 4
EPISODES_AT_ONCE = 2
REQUESTS_PER_ATTEMPT = 2  # the command, then "done"
TOTAL_REQUESTS = TASKS * K * REQUESTS_PER_ATTEMPT
MODEL = "model-a"
SOLVE = "<command>tr a-z A-Z < /home/user/in.txt > /home/user/out.txt</command>"
DONE = "<action>done</action>"
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

CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import dagster as dg
import broken_families as bf
import endless_assets.generation.procedural as procedural
procedural.ALL_FAMILIES = [bf.Good]
import endless_assets.definitions as definitions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
settings = json.loads(sys.argv[2])
dg.materialize(
    [getattr(definitions, name) for name in json.loads(sys.argv[3])],
    partition_key=sys.argv[4],
    instance=dg.DagsterInstance.ephemeral(),
    resources={
        "pipeline": PipelineSettings(**settings),
        "lake_io_manager": ParquetLakeIOManager(data_dir=settings["data_dir"]),
    },
)
"""


class Solver:
    """Solves every attempt in two replies; can SIGKILL a process at the n-th request."""

    def __init__(self, kill_at: int | None = None) -> None:
        self.kill_at = kill_at
        self.victim: int | None = None
        self.served = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> Reply:
        with self._lock:
            self.served += 1
            if self.kill_at is not None and self.served == self.kill_at and self.victim:
                os.kill(self.victim, signal.SIGKILL)
        return Reply(DONE if len(request["messages"]) > 2 else SOLVE)


def settings(data_dir: Path, server: ScriptedServer) -> dict:
    return {
        "data_dir": str(data_dir),
        "tasks": TASKS,
        "workers": 2,
        "solver": "chat",
        "sampler": "uniform",  # the generator's deal, as the plan below expects
        "solver_model": MODEL,
        "solver_base_url": server.base_url,
        "llm_retries": 0,
        "k": K,
        "rollout_workers": EPISODES_AT_ONCE,
        "soundness_repeats": 1,
    }


def materialize(data_dir: Path, server: ScriptedServer, selection=None, **changed):
    config = {**settings(data_dir, server), **changed}
    return materialize_batch(config.pop("data_dir"), ASSETS, BATCH, selection=selection, **config)


def remove_orphans(sandbox) -> None:
    """Containers of the killed process (it could not remove them itself)."""
    for c in sandbox.client.containers.list(
        all=True, filters={"label": [f"endless.batch={BATCH}"]}
    ):
        c.remove(force=True, v=True)


def test_a_run_killed_in_stage_four_resumes_with_only_the_attempts_in_flight(tmp_path, sandbox):
    killed_dir = tmp_path / "killed"
    solver = Solver(kill_at=int(TOTAL_REQUESTS * 0.7))
    with ScriptedServer(solver, model=MODEL) as server:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                str(SUPPORT),
                json.dumps(settings(killed_dir, server)),
                json.dumps(ASSETS),
                BATCH,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        solver.victim = child.pid
        assert child.wait() == -signal.SIGKILL
    remove_orphans(sandbox)
    lake = Lake(killed_dir)
    assert not lake.has_data("solver_rollouts")  # the stage never got to write its partition
    journaled = len(list(journal_dir(killed_dir, "solver_rollouts", BATCH).glob("*.parquet")))
    assert journaled >= 1

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(procedural, "ALL_FAMILIES", [bf.Good])
        again = Solver()
        with ScriptedServer(again, model=MODEL) as server:
            # The whole batch again, with one worker (as after losing a machine): what the
            # stages before the solver finished is in their journals, and none of it is redone.
            rerun = materialize(killed_dir, server, workers=1)
        assert rerun.success
        for stage in (
            "task_descriptions",
            "task_environments",
            "completion_tests",
            "task_soundness",
        ):
            meta = rerun.asset_materializations_for_node(stage)[0].metadata
            assert meta["recovered_from_journal"].value == TASKS, stage
        assert not (killed_dir / "journal").exists() or not any(
            (killed_dir / "journal").rglob(f"batch={BATCH}")
        )  # the rerun ended well: the partitions hold its work, the journals are gone
        # Every attempt the journal holds is reused; the others run now. The requests sent twice
        # are those of attempts in flight when the process died (or still being graded).
        assert again.served == TOTAL_REQUESTS - journaled * REQUESTS_PER_ATTEMPT
        sent_twice = solver.served + again.served - TOTAL_REQUESTS
        assert 0 <= sent_twice <= EPISODES_AT_ONCE * REQUESTS_PER_ATTEMPT
        meta = rerun.asset_materializations_for_node("solver_rollouts")[0].metadata
        assert meta["recovered_from_journal"].value == journaled
        assert not journal_dir(killed_dir, "solver_rollouts", BATCH).exists()

        clean_dir = tmp_path / "clean"
        with ScriptedServer(Solver(), model=MODEL) as server:
            assert materialize(clean_dir, server).success
    for table in ("solver_rollouts", "filtered_dataset"):
        resumed = golden_rows.digest(table, Lake(killed_dir).read(table, BATCH))
        clean = golden_rows.digest(table, Lake(clean_dir).read(table, BATCH))
        assert resumed == clean, table


def test_stage_two_rows_journaled_before_a_failed_write_are_reused_not_rebuilt(tmp_path, sandbox):
    """A run that dies after finishing its tasks but before writing the partition (here: the
    partition's directory is blocked by a file) leaves its rows in the journal; the rerun under
    the same settings takes them from there and builds nothing."""
    batch = "2026-05-18"
    data_dir = tmp_path / "lake"
    resources = {
        "pipeline": PipelineSettings(data_dir=str(data_dir), tasks=3, workers=2),
        "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
    }

    def run(*names: str):
        assets = ("base_image", "task_descriptions", "task_decontamination", "task_environments")
        return dg.materialize(
            [getattr(definitions, name) for name in assets],
            selection=asset_selection(names),
            partition_key=batch,
            instance=dg.DagsterInstance.ephemeral(),
            resources=resources,
            raise_on_error=False,
        )

    assert run("base_image", "task_descriptions", "task_decontamination").success
    lake = Lake(data_dir)
    blocker = lake.partition_path("task_environments", batch).parent
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a directory")
    assert not run("task_environments").success
    files = list(journal_dir(data_dir, "task_environments", batch).rglob("*.parquet"))
    assert len(files) == 3
    from_journal = pl.read_parquet(files).sort("task_id")

    blocker.unlink()
    rerun = run("task_environments")
    assert rerun.success
    meta = rerun.asset_materializations_for_node("task_environments")[0].metadata
    assert meta["recovered_from_journal"].value == 3
    stored = lake.read("task_environments", batch).sort("task_id")
    assert stored.equals(from_journal)  # the very rows, build times and timestamps included
    assert not journal_dir(data_dir, "task_environments", batch).exists()  # the run ended well
