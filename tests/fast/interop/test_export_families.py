"""Every procedural family's task exports to Harbor and reads back as it was written (no Docker),
the service families' with their services (a batch that deals them); the build context of a
family may hold any file a project holds, `__pycache__` included."""

from __future__ import annotations

from endless_assets.generation.procedural import SERVICES_SINCE, ProceduralGenerator
from endless_assets.interop.harbor import export_harbor
from endless_assets.interop.harbor_import import read_harbor_dir

BASE = "endless-base:export-test"


def one_task_per_family():
    generator = ProceduralGenerator(BASE)
    every = [family.name for family in generator.families]  # with the service families
    tasks = {}
    for index in range(len(every)):
        task, _ = generator.describe(SERVICES_SINCE, index, seed=1000 + index)
        tasks[task.family] = task
    assert sorted(tasks) == sorted(every)
    return tasks


def test_every_familys_task_exports_to_harbor_and_reads_back_unchanged(tmp_path):
    tasks = one_task_per_family()
    written = export_harbor(list(tasks.values()), tmp_path / "harbor", base_image=BASE)
    assert len(written) == len(tasks)  # export_harbor reads each back and compares


def test_a_pycache_directory_of_a_build_context_is_kept_and_one_of_tests_is_not(tmp_path):
    task = one_task_per_family()["archive_backup"]
    cached = [name for name in task.context_files if "__pycache__" in name.split("/")]
    assert cached, "the archive family's project holds __pycache__ files"
    (directory,) = export_harbor([task], tmp_path / "harbor", base_image=BASE)
    leftover = directory / "tests" / "__pycache__" / "test_outputs.cpython-311.pyc"
    leftover.parent.mkdir()
    leftover.write_bytes(b"\x00junk a local pytest run left")
    back = read_harbor_dir(directory)
    assert set(cached) <= set(back.context_files) | set(back.binary_files)
    assert back.completion_test == task.completion_test
