"""Decontamination in the pipeline (real Dagster runs, real Docker, a real lake): tasks copied into
a benchmark are rejected right after the describe stage, naming the benchmark task and the field,
and never built; unrelated benchmarks flag nothing; an imported batch is checked too; a batch kept
earlier is checked again against a benchmark added later, nothing regenerated, and the export leaves
the contaminated tasks out and says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from batches import materialize_batch
from conventions import BOILERPLATE, harbor, source_tasks
from project import ROOT

from endless_assets.defs.imports import imported_task_decontamination, imported_task_descriptions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.partitions import imported_batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.interop import export_dataset
from endless_assets.interop.harbor import write_task
from endless_assets.models import task_seed
from endless_assets.report.html import build_report
from endless_assets.report.tables import stats_tables
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake

BATCH = "2026-05-20"
TASKS = 6
COPIED = (0, 1, 2)
UP_TO_II = ["base_image", "task_descriptions", "task_decontamination", "task_environments"]
WHOLE = [*UP_TO_II, "completion_tests", "task_soundness", "solver_rollouts", "filtered_dataset"]


def benchmark_of(sandbox, directory: Path, batch: str, indices) -> list[str]:
    """Harbor task directories holding the tasks the procedural generator writes for `batch` at
    `indices`, verbatim (what a benchmark copied into the training set looks like)."""
    generator = ProceduralGenerator(sandbox.base.tag)
    names = []
    for index in indices:
        draft, _ = generator.describe(batch, index, task_seed(batch, index, 0))
        write_task(directory / f"bench-{index}", draft, sandbox.base.tag)
        names.append(f"bench-{index}")
    return names


def materialize(data_dir: Path, assets: list[str], batch: str = BATCH, **config):
    return materialize_batch(data_dir, assets, batch, tasks=TASKS, **config)


def test_copied_tasks_are_rejected_after_stage_i_and_never_built(tmp_path, sandbox):
    refs = tmp_path / "refs"
    names = benchmark_of(sandbox, refs, BATCH, COPIED)
    result = materialize(tmp_path / "lake", UP_TO_II, decontamination_references=f"tb={refs}")
    assert result.success
    lake = Lake(tmp_path / "lake")
    checked = {r["task_id"]: r for r in lake.read("task_decontamination", BATCH).to_dicts()}
    rejected = [r for r in checked.values() if r["status"] == "rejected"]
    assert len(checked) == TASKS and len(rejected) == len(COPIED)
    for row in rejected:
        reason = row["reject_reason"]
        assert reason.startswith("contaminated: tb/bench-"), reason
        assert reason.split(" (")[0].removeprefix("contaminated: tb/") in names
        assert "(instruction, " in reason or "(completion_test, " in reason, reason
    built = set(lake.read("task_environments", BATCH)["task_id"].to_list())
    assert built == {t for t, r in checked.items() if r["status"] == "ok"}
    funnel = query(lake, "select stage, entered, survived, rejected from funnel").rows()
    assert ("decontamination", TASKS, TASKS - len(COPIED), len(COPIED)) in funnel
    reasons = dict(query(lake, "select reason, tasks from funnel_reasons").rows())
    assert reasons["contaminated"] == len(COPIED)
    hits = query(lake, "select distinct task_id, reference_set from contamination")
    assert len(hits) == len(COPIED) and set(hits["reference_set"]) == {"tb"}


def test_a_benchmark_that_shares_nothing_flags_nothing(tmp_path, sandbox):
    source_tasks(tmp_path / "conventions")  # a peer task set: other tasks, the same conventions
    result = materialize(
        tmp_path / "lake",
        ["base_image", "task_descriptions", "task_decontamination"],
        decontamination_references=f"peers={tmp_path / 'conventions'}",
    )
    assert result.success
    rows = Lake(tmp_path / "lake").read("task_decontamination", BATCH)
    assert rows["status"].to_list() == ["ok"] * TASKS
    assert rows["reference_sets"][0].startswith("peers:")


INSTRUCTIONS = [
    "Compute the checksum of every file in the archive and write the list sorted by name.",
    "Fix the cron schedule so the backup runs nightly at two, then reload the daemon.",
    "Rename the hosts in the inventory to their new domain and keep the order of lines.",
    "Count the failed logins per user in the auth log and report the top five.",
    "Make the build script executable by its owner only and record the old mode.",
    "Convert the measurements from Fahrenheit to Celsius with one decimal place.",
    "Merge the two CSV exports on the order id and drop the duplicated rows.",
    "Write the greeting the environment variable names into a file in the workdir.",
    "Sum a list of large and small floats the way the newer interpreter does.",
    "List the services that listen on a port and write their names one per line.",
    "Find the largest directories under the data tree and print their sizes.",
    "Extract the users of the admin group and write them as a JSON array.",
]


def test_an_imported_batch_is_checked_against_the_benchmark(tmp_path):
    source_tasks(tmp_path / "tasks")
    dirs = sorted(p for p in (tmp_path / "tasks").iterdir() if (p / "instruction.md").exists())
    for directory, text in zip(dirs, INSTRUCTIONS, strict=False):  # (each task its own words)
        (directory / "instruction.md").write_text(text + "\n")
    refs = tmp_path / "refs"
    shutil.copytree(tmp_path / "tasks" / "root_app", refs / "copied_task")
    for name, words in (("other_a", "rotate the web logs"), ("other_b", "index the mail spool")):
        # (a benchmark's tasks share their test runner: the set's boilerplate, never a hit)
        harbor(
            refs / name,
            dockerfile=f"FROM ubuntu:22.04\nRUN echo {name}\n",
            test=f"def test_{name}():\n    assert open('/srv/{name}.txt').read() == '{words}'\n",
            solve=f"echo '{words}' > /srv/{name}.txt\n",
            script=BOILERPLATE,
        )
    batch = "imported-decon"
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(imported_batches.name, [batch])
    config = {"source_dir": str(tmp_path / "tasks"), "format": "auto"}
    data_dir = tmp_path / "lake"
    result = dg.materialize(
        [imported_task_descriptions, imported_task_decontamination],
        partition_key=batch,
        instance=instance,
        resources={
            "pipeline": PipelineSettings(
                data_dir=str(data_dir), decontamination_references=f"bench={refs}"
            ),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        run_config={"ops": {"imported__task_descriptions": {"config": config}}},
    )
    assert result.success
    rows = Lake(data_dir).read("task_decontamination", batch)
    rejected = rows.filter(rows["status"] == "rejected")["reject_reason"].to_list()
    assert len(rejected) == 1 and rejected[0].startswith("contaminated: bench/copied_task ("), (
        rejected
    )


@pytest.fixture(scope="module")
def kept_batch(tmp_path_factory, sandbox):
    """A batch made and kept with no reference set (yesterday)."""
    work = tmp_path_factory.mktemp("kept")
    result = materialize(work / "lake", WHOLE, soundness="off")
    assert result.success
    return work


def test_a_kept_batch_is_checked_again_against_a_benchmark_added_later(kept_batch, sandbox):
    work = kept_batch
    lake = Lake(work / "lake")
    kept_before = lake.read("filtered_dataset", BATCH)
    assert kept_before["kept"].all()
    described = lake.read("task_descriptions", BATCH)
    refs = work / "refs"  # today: a benchmark appears that holds two of the kept tasks
    benchmark_of(sandbox, refs, BATCH, (3, 4))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")},
        "DAGSTER_HOME": str(work / "dagster_home"),
        "ENDLESS_DATA_DIR": str(work / "lake"),
    }
    command = ["decontaminate", "--batch", BATCH, "--references", f"tb={refs}", "--quiet"]
    proc = subprocess.run(
        [sys.executable, "-m", "endless_assets.cli", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"batch {BATCH}: {TASKS} kept task(s) checked against tb:2: 2 contaminated" in (
        proc.stdout
    ), proc.stdout
    recheck = lake.read("contamination_recheck", BATCH)
    assert sorted(recheck["status"].to_list()) == ["ok"] * (TASKS - 2) + ["rejected"] * 2
    # Nothing was regenerated or re-run: the earlier partitions are as they were.
    assert lake.read("task_descriptions", BATCH)["created_at"].equals(described["created_at"])
    assert lake.read("filtered_dataset", BATCH)["created_at"].equals(kept_before["created_at"])

    page = build_report(lake, [BATCH])  # the report's section names the benchmark tasks
    assert "<h2>Decontamination</h2>" in page and "bench-3" in page and "bench-4" in page
    decon = next(t for t in stats_tables(lake, [BATCH]) if t.name == "decontamination")
    # (the pipeline's own check had no reference set: it is not a row of the view)
    assert dict(zip(decon.frame["checked"], decon.frame["contaminated"], strict=True)) == {
        "recheck": 2
    }

    summary = export_dataset(lake, "harbor", work / "out", batches=[BATCH])
    assert (summary.tasks, summary.contaminated_left_out) == (TASKS - 2, 2)
    everything = export_dataset(
        lake, "harbor", work / "out-all", batches=[BATCH], include_contaminated=True
    )
    assert (everything.tasks, everything.contaminated_left_out) == (TASKS, 0)
