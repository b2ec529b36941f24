"""Round trip through Harbor's format: export a materialized batch, import it back with
`endless import harbor` (a real Dagster run, real Docker) next
to foreign and malformed task directories, and find the same tasks, validated and kept again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from project import ROOT

import endless_assets.definitions as definitions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
from endless_assets.interop import export_dataset
from endless_assets.interop.quality import quality_records
from endless_assets.interop.tasks import load_tasks
from endless_assets.models import Task
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]
SOURCE_BATCH = "2026-08-01"
IMPORTED = "roundtrip-1"
TASKS = 4
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
FOREIGN_TEST = "def test_doubled():\n    assert open('/home/user/out.txt').read().strip() == '6'\n"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def foreign_task(root: Path, image: str) -> None:
    """A task written elsewhere: Ubuntu base, no initial-state test, pytest-graded."""
    write(root, "instruction.md", "Double the number in /home/user/data/n.txt into out.txt.\n")
    write(
        root,
        "environment/Dockerfile",
        f"FROM {image}\nRUN mkdir -p /home/user/data && echo 3 > /home/user/data/n.txt "
        "&& chmod -R 0777 /home/user\n",
    )
    write(
        root,
        "tests/test.sh",
        "#!/bin/bash\nuvx pytest /tests/test_outputs.py\n"
        "if [ $? -eq 0 ]; then r=1; else r=0; fi; echo $r > /logs/verifier/reward.txt\n",
    )
    write(root, "tests/test_outputs.py", FOREIGN_TEST)
    write(
        root,
        "solution/solve.sh",
        "#!/bin/bash\necho $(( $(cat /home/user/data/n.txt) * 2 )) > /home/user/out.txt\n",
    )


@pytest.fixture(scope="module")
def roundtrip(tmp_path_factory, sandbox):
    data_dir = tmp_path_factory.mktemp("roundtrip-lake")
    result = dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        partition_key=SOURCE_BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), tasks=TASKS, soundness_repeats=1),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
    )
    assert result.success
    lake = Lake(data_dir)
    source = tmp_path_factory.mktemp("harbor-source") / "tasks"
    export_dataset(lake, "harbor", source, batches=[SOURCE_BATCH])
    foreign_task(source / "zz_foreign_mapped", "ubuntu:22.04")
    foreign_task(source / "zz_foreign_unpullable", "example.invalid/nobody/image:1")
    write(source / "zz_broken", "instruction.md", "A task without environment or tests.\n")
    home = tmp_path_factory.mktemp("dagster-home")
    env = {**os.environ, "DAGSTER_HOME": str(home), "ENDLESS_DATA_DIR": str(data_dir)}
    proc = subprocess.run(
        [
            *ENDLESS,
            "import",
            "harbor",
            str(source),
            "--batch",
            IMPORTED,
            "--base-image-map",
            "ubuntu:22.04=endless-base",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    return lake, proc, home


def test_the_import_runs_through_dagster_and_reports_what_it_could_not_import(roundtrip):
    _, proc, home = roundtrip
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    assert f"{TASKS + 2} task(s) imported, 1 not imported" in proc.stdout
    assert "zz_broken" in proc.stdout and "no environment/Dockerfile" in proc.stdout
    assert "example.invalid/nobody/image:1 is not on this Docker engine" in proc.stderr
    assert f"imported batch {IMPORTED} done" in proc.stdout
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert IMPORTED in instance.get_dynamic_partitions("imported_batches")
        runs = instance.get_runs()
        assert len(runs) == 1 and runs[0].is_success
        assert runs[0].tags["dagster/partition"] == IMPORTED


def test_imported_tasks_have_the_same_instructions_tests_and_solutions(roundtrip):
    lake, _, _ = roundtrip
    fields = "instruction, completion_test, initial_test, reference_solution, category, family"
    original = query(
        lake, f"select {fields} from filtered_dataset where batch = '{SOURCE_BATCH}' and kept"
    )
    back = query(
        lake,
        f"select {fields} from filtered_dataset where batch = '{IMPORTED}' and family <> ''",
    )
    assert len(original) == TASKS
    assert sorted(back.rows()) == sorted(original.rows())


def test_imported_tasks_keep_the_quality_record_their_export_carried(roundtrip):
    lake, _, _ = roundtrip
    records = quality_records(lake, load_tasks(lake, [SOURCE_BATCH]))
    drafts = query(
        lake, f"select draft from task_descriptions where batch = '{IMPORTED}' and draft <> ''"
    )
    carried = {}
    for (draft,) in drafts.rows():
        task = Task.model_validate_json(draft)
        if "quality" in task.source_metadata:  # ours; the foreign tasks carry none
            carried[task.source_name.rsplit("/", 1)[-1]] = task.source_metadata["quality"]
    assert carried == {task_id: record.as_dict() for task_id, record in records.items()}
    assert {r["soundness"] for r in carried.values()} == {"checked"}


def test_imported_tasks_are_revalidated_and_kept_and_foreign_ones_judged(roundtrip):
    lake, _, _ = roundtrip
    funnel = query(
        lake,
        "select stage, entered, survived, rejected from funnel "
        f"where batch = '{IMPORTED}' order by stage_order",
    ).rows()
    assert funnel == [
        ("describe", TASKS + 3, TASKS + 2, 1),
        ("environment", TASKS + 2, TASKS + 1, 1),
        ("completion test", TASKS + 1, TASKS + 1, 0),
        ("soundness", TASKS + 1, TASKS + 1, 0),
        ("solver filter", TASKS + 1, TASKS + 1, 0),
    ]
    reasons = dict(
        query(
            lake,
            f"select reason, example from funnel_reasons where batch = '{IMPORTED}'",
        ).rows()
    )
    assert set(reasons) == {"import_failed", "build_failed"}
    assert reasons["import_failed"].startswith("import_failed: zz_broken: no environment")
    # The mapped foreign task built on our base image, got a generated initial-state test,
    # and its own solution passes its own test.
    mapped = query(
        lake,
        f"select e.dockerfile, e.initial_test, f.kept from task_environments e "
        f"join filtered_dataset f using (task_id) where e.batch = '{IMPORTED}' "
        "and f.completion_test like '%test_doubled%'",
    ).row(0, named=True)
    assert mapped["kept"] and "endless-base:" in mapped["dockerfile"].splitlines()[0]
    assert "test_working_directory_exists" in mapped["initial_test"]
