"""Reading Harbor task directories: what imports, what is refused and why (no Docker needed)."""

from __future__ import annotations

import json
import os

import pytest

from endless_assets.interop.dockerfile import (
    DockerfileError,
    base_images,
    parse_image_map,
    replace_base_images,
)
from endless_assets.interop.harbor_import import read_harbor_dir, solution_body
from endless_assets.interop.imports import import_tasks

BASE = "endless-base:test"
FINAL_TEST = "def test_done():\n    assert open('/home/user/out.txt').read() == 'ok\\n'\n"


def write(root, rel: str, text: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def good_task(root, *, dockerfile: str = "FROM ubuntu:22.04\nRUN mkdir -p /home/user\n") -> None:
    write(root, "instruction.md", "Write ok to /home/user/out.txt\n")
    write(root, "environment/Dockerfile", dockerfile)
    write(root, "tests/test.sh", "#!/bin/bash\npytest /tests/test_final_state.py\n")
    write(root, "tests/test_final_state.py", FINAL_TEST)
    write(root, "solution/solve.sh", "#!/bin/bash\necho ok > /home/user/out.txt\n")


@pytest.fixture
def source(tmp_path):
    """A directory of task dirs: good ones in two layouts and one of every way to be broken."""
    src = tmp_path / "tasks"
    # The paper's public layout: truth and initial test in environment/, no solution.
    paper = src / "task_000001_paper"
    write(paper, "instruction.md", "# Task\n\nCount the lines of /home/user/log.txt\n")
    write(
        paper,
        "task.toml",
        'version = "0.1"\n[metadata]\ncategory = "log analysis"\n'
        'difficulty = "hard"\ntags = ["log analysis"]\n',
    )
    write(
        paper,
        "environment/Dockerfile",
        "# syntax=docker/dockerfile:1\nFROM ubuntu:22.04\n"
        "RUN mkdir -p /home/user && chmod 0777 /home/user\n",
    )
    write(paper, "environment/task.json", json.dumps({"description": "x", "truth": "42 lines"}))
    write(paper, "environment/test_initial_state.py", "def test_home():\n    assert True\n")
    write(paper, "tests/test_final_state.py", FINAL_TEST)
    (paper / "solution").mkdir()
    # Ours-like: initial test in tests/, metadata in task.toml, bash solution.
    ours = src / "task_000002_ours"
    good_task(ours, dockerfile="FROM ubuntu:22.04 AS base\nWORKDIR /srv/app\nFROM base\n")
    write(
        ours,
        "task.toml",
        '[metadata]\ncategory = "file and directory management"\n'
        'complexity = "medium"\nscenario = "a tidy-up"\nfamily = "file_organize"\n'
        'generator = "procedural"\ntruth = "{\\"answer\\": 3}"\n',
    )
    write(ours, "environment/home/data.csv", "a,b\n1,2\n")
    # Broken ones.
    write(src / "no_instruction", "environment/Dockerfile", "FROM ubuntu:22.04\n")
    good_task(src / "no_dockerfile")
    os.remove(src / "no_dockerfile/environment/Dockerfile")
    good_task(src / "compose")
    write(src / "compose", "environment/docker-compose.yaml", COMPOSE_HOST)
    good_task(src / "binary_too_big")
    write(src / "binary_too_big", "environment/blob.bin", b"\x00\xff\xfe" * 400_000)
    good_task(src / "two_tests")
    os.rename(src / "two_tests/tests/test_final_state.py", src / "two_tests/tests/test_a.py")
    write(src / "two_tests", "tests/test_b.py", FINAL_TEST)
    good_task(src / "no_script_no_pytest")
    os.remove(src / "no_script_no_pytest/tests/test_final_state.py")
    os.remove(src / "no_script_no_pytest/tests/test.sh")
    good_task(src / "bad_toml")
    write(src / "bad_toml", "task.toml", "[metadata\ncategory = \n")
    good_task(src / "symlink")
    os.symlink("/etc/passwd", src / "symlink/environment/passwd")
    good_task(src / "support_files_without_script")
    os.remove(src / "support_files_without_script/tests/test.sh")
    write(src / "support_files_without_script", "tests/expected.json", "{}")
    good_task(src / "no_from", dockerfile="RUN echo hi\n")
    return src


MIB = 2**20
COMPOSE_HOST = "services:\n  web:\n    image: nginx\n    privileged: true\n"


def by_dir(outcomes):
    return {o.directory: o for o in outcomes}


def test_good_directories_import_and_each_broken_one_says_why(source):
    outcomes = by_dir(
        import_tasks(
            source,
            "imp-1",
            base_image_map={"ubuntu:22.04": BASE},
            base_image=BASE,
            max_binary_bytes=MIB,
        )
    )
    assert len(outcomes) == 12
    reasons = {name: o.reason for name, o in outcomes.items() if o.draft is None}
    expected = {
        "no_instruction": "no instruction.md",
        "no_dockerfile": "no environment/Dockerfile",
        "compose": "service web: `privileged` is refused (imported tasks get no access to the "
        "host)",
        "binary_too_big": "environment/blob.bin is a binary file of 1.1 MiB, over the 1 MiB "
        "limit (setting max_binary_file_mb)",
        "two_tests": "2 pytest files",
        "no_script_no_pytest": "no pytest file",
        "bad_toml": "task.toml does not parse",
        "symlink": "symbolic link",
        "support_files_without_script": "expected.json",
        "no_from": "no FROM line",
    }
    assert set(reasons) == set(expected)
    for name, fragment in expected.items():
        assert fragment in reasons[name], (name, reasons[name])
    assert {name for name, o in outcomes.items() if o.draft} == {
        "task_000001_paper",
        "task_000002_ours",
    }


def test_the_papers_layout_imports_with_its_truth_and_initial_test(source):
    outcome = by_dir(
        import_tasks(source, "imp-1", base_image_map={"ubuntu:22.04": BASE}, base_image=BASE)
    )["task_000001_paper"]
    draft = outcome.draft
    assert draft.instruction.startswith("# Task\n\nCount the lines")
    assert draft.category == "log analysis" and draft.complexity == "hard"
    assert draft.truth == {"text": "42 lines"}
    assert draft.initial_test == "def test_home():\n    assert True\n"
    assert draft.completion_test == FINAL_TEST
    assert draft.reference_solution == ""
    assert base_images(draft.dockerfile) == [BASE]
    assert draft.dockerfile.startswith("# syntax=docker/dockerfile:1\nFROM endless-base:test\n")
    assert "task.json" in draft.context_files
    assert set(outcome.notes) == {"no reference solution", "base image mapped"}
    assert draft.batch == "imp-1" and draft.task_id.startswith("et-")


def test_metadata_of_our_own_exports_is_kept_and_a_missing_initial_test_is_generated(source):
    outcome = by_dir(import_tasks(source, "imp-1", base_image=BASE))["task_000002_ours"]
    draft = outcome.draft
    assert (draft.category, draft.complexity, draft.scenario, draft.family, draft.generator) == (
        "file and directory management",
        "medium",
        "a tidy-up",
        "file_organize",
        "procedural",
    )
    assert draft.truth == {"answer": 3}
    assert draft.context_files == {"home/data.csv": "a,b\n1,2\n"}
    assert draft.reference_solution == "echo ok > /home/user/out.txt\n"
    # No map given: the foreign image stays (the build stage will say it cannot be pulled).
    assert base_images(draft.dockerfile) == ["ubuntu:22.04"]
    assert "initial-state test generated (the task has none)" in outcome.notes
    assert "/srv/app" in draft.initial_test  # the last WORKDIR of the Dockerfile
    namespace: dict = {}
    exec(compile(draft.initial_test, "initial", "exec"), namespace)
    assert "test_working_directory_exists" in namespace


def test_endless_base_in_a_map_means_our_base_image(source):
    outcome = by_dir(
        import_tasks(
            source, "imp-2", base_image_map={"ubuntu:22.04": "endless-base"}, base_image=BASE
        )
    )["task_000002_ours"]
    assert base_images(outcome.draft.dockerfile) == [BASE]
    # A stage name is not an image: `FROM base` is left alone.
    assert "FROM base\n" in outcome.draft.dockerfile


def test_a_single_task_directory_is_a_source_too(source):
    outcomes = import_tasks(source / "task_000002_ours", "imp-3", base_image=BASE)
    assert len(outcomes) == 1 and outcomes[0].directory == "." and outcomes[0].draft


def test_an_unknown_format_or_a_missing_source_is_a_clear_error(tmp_path):
    from endless_assets.interop.harbor_import import ImportProblem

    with pytest.raises(ImportProblem, match="not supported"):
        import_tasks(tmp_path, "imp", fmt="swebench", base_image=BASE)
    with pytest.raises(ImportProblem, match="is not a directory"):
        import_tasks(tmp_path / "nowhere", "imp", base_image=BASE)


def test_dockerfile_base_images_and_maps():
    text = "FROM --platform=linux/amd64 python:3.12 AS build\nRUN x\nFROM build\nFROM alpine\n"
    assert base_images(text) == ["python:3.12", "alpine"]
    mapped = replace_base_images(text, {"python:3.12": "endless-base:1", "build": "nope"})
    assert mapped.splitlines()[0] == "FROM --platform=linux/amd64 endless-base:1 AS build"
    assert mapped.splitlines()[2] == "FROM build"
    assert parse_image_map(["ubuntu:22.04=endless-base"]) == {"ubuntu:22.04": "endless-base"}
    for bad in ("ubuntu:22.04", "=x", "a= ", "a b=c"):
        with pytest.raises(DockerfileError, match="IMAGE=REPLACEMENT"):
            parse_image_map([bad])


def test_solution_shebangs():
    assert solution_body("#!/bin/bash\necho hi\n") == "echo hi\n"
    assert solution_body("#!/usr/bin/env bash\nset -e\n") == "set -e\n"
    assert solution_body("echo hi\n") == "echo hi\n"
    wrapped = solution_body("#!/usr/bin/env python3\nprint('hi')\n")
    assert "print('hi')" in wrapped and wrapped.endswith("/tmp/endless-solve\n")


def test_read_harbor_dir_reports_the_first_problem(tmp_path):
    from endless_assets.interop.harbor_import import ImportProblem

    good_task(tmp_path / "t")
    write(tmp_path / "t", "instruction.md", "   \n")
    with pytest.raises(ImportProblem, match=r"instruction\.md is empty"):
        read_harbor_dir(tmp_path / "t")


def test_a_task_graded_by_its_pytest_file_alone_with_its_own_agent_exports(tmp_path):
    from endless_assets.interop.harbor import export_harbor

    good_task(tmp_path / "t")
    os.remove(tmp_path / "t/tests/test.sh")  # no test.sh: graded by the pytest file alone
    (outcome,) = import_tasks(
        tmp_path / "t", "b", base_image_map={"ubuntu:22.04": BASE}, base_image=BASE
    )
    assert outcome.draft is not None and outcome.draft.agent_user == ""  # the image's USER
    (written,) = export_harbor([outcome.draft], tmp_path / "out", base_image=BASE)
    assert "pytest" in (written / "tests/test.sh").read_text()
