"""How Harbor's and Terminal-Bench's conventions are read into a task (no Docker needed): the
agent's identity, the task's own verifier, binary files, metadata, Terminal-Bench 1.x layouts."""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path

import pytest

from endless_assets.interop.imports import import_tasks, resolve_image_map
from endless_assets.interop.tb_import import REWARD_ENDING, read_tb_dir
from endless_assets.models import AGENT_HOME, AGENT_USER
from endless_assets.sandbox.containers.identity import (
    identity_dockerfile,
    identity_of_dockerfile,
    strip_identity,
)
from endless_assets.sandbox.grading import bundle

BASE = "endless-base:test"
TEST = "def test_done():\n    assert open('/app/out.txt').read() == 'ok\\n'\n"
REWARDED = "#!/bin/bash\npytest /tests/test_outputs.py\necho $? > /logs/verifier/reward.txt\n"


def write(root: Path, rel: str, content: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


def harbor_task(root: Path, toml: str = "") -> None:
    write(root, "instruction.md", "Write ok to out.txt in the working directory.\n")
    write(root, "environment/Dockerfile", "FROM ubuntu:22.04\nWORKDIR /app\n")
    write(root, "tests/test.sh", REWARDED)
    write(root, "tests/test_outputs.py", TEST)
    write(root, "solution/solve.sh", "#!/bin/bash\necho ok > out.txt\n")
    if toml:
        write(root, "task.toml", toml)


def only(source: Path, **kwargs):
    (outcome,) = import_tasks(source, "conv", base_image=BASE, **kwargs)
    assert outcome.draft is not None, outcome.reason
    return outcome


def test_a_foreign_task_runs_its_agent_as_the_images_user_in_the_images_workdir(tmp_path):
    harbor_task(tmp_path / "t")
    draft = only(tmp_path / "t").draft
    assert (draft.agent_user, draft.workdir) == ("", "")


def test_task_toml_names_the_agent_and_its_working_directory(tmp_path):
    harbor_task(tmp_path / "t", '[agent]\nuser = "worker"\n[environment]\nworkdir = "/srv"\n')
    draft = only(tmp_path / "t").draft
    assert (draft.agent_user, draft.workdir) == ("worker", "/srv")


def test_our_own_export_keeps_our_agent_explicitly(tmp_path):
    task = tmp_path / "t"
    write(task, "instruction.md", "x\n")
    write(task, "environment/Dockerfile", "FROM endless-base:x\n")
    write(task, "tests/test_final_state.py", TEST)
    write(task, "tests/endless_grader.py", "# ours\n")
    write(task, "tests/test.sh", "python3 /tests/endless_grader.py --once x\n")
    write(task, "task.toml", 'source = "endless"\n[agent]\nuser = "user"\n')
    draft = only(task).draft
    assert (draft.agent_user, draft.workdir) == (AGENT_USER, AGENT_HOME)
    assert draft.completion_test == TEST  # graded by our grader, alone


def test_test_sh_and_the_whole_tests_directory_become_the_tasks_verifier(tmp_path):
    harbor_task(
        tmp_path / "t",
        '[verifier]\ntimeout_sec = 42.0\nuser = "root"\n[verifier.env]\nMODE = "strict"\n',
    )
    write(tmp_path / "t", "tests/data/expected.json", '{"a": 1}')
    write(tmp_path / "t", "tests/data/blob.bin", b"\x00\x01\x02")
    draft = only(tmp_path / "t").draft
    spec = bundle.unpack(draft.completion_test)
    assert spec is not None and spec.script == "test.sh"
    assert spec.test == TEST and spec.test_name == "test_outputs.py"
    assert spec.files == {"test.sh": REWARDED, "data/expected.json": '{"a": 1}'}
    assert base64.b64decode(spec.binary["data/blob.bin"]) == b"\x00\x01\x02"
    assert (spec.timeout, spec.user, spec.env) == (42.0, "root", {"MODE": "strict"})
    ast.parse(draft.completion_test)  # still a valid Python file, defining the same test
    assert bundle.pytest_source(draft.completion_test) == TEST


def test_a_test_sh_without_any_pytest_file_grades_alone(tmp_path):
    harbor_task(tmp_path / "t")
    (tmp_path / "t/tests/test_outputs.py").unlink()
    spec = bundle.unpack(only(tmp_path / "t").draft.completion_test)
    assert spec is not None and spec.test == "" and spec.files == {"test.sh": REWARDED}


def test_binary_build_context_files_are_kept_as_bytes(tmp_path):
    harbor_task(tmp_path / "t")
    data = bytes(range(256)) * 10
    write(tmp_path / "t", "environment/book.xlsx", data)
    write(tmp_path / "t", "environment/gradle/wrapper.jar", b"PK\x03\x04\x00jar")
    outcome = only(tmp_path / "t")
    assert base64.b64decode(outcome.draft.binary_files["book.xlsx"]) == data
    assert set(outcome.draft.binary_files) == {"book.xlsx", "gradle/wrapper.jar"}
    assert "book.xlsx" not in outcome.draft.context_files
    assert "binary files kept as bytes" in outcome.notes


def test_executable_build_context_files_keep_their_mode(tmp_path):
    harbor_task(tmp_path / "t")
    write(tmp_path / "t", "environment/gradlew", "#!/bin/sh\necho gradle\n")
    (tmp_path / "t/environment/gradlew").chmod(0o755)
    draft = only(tmp_path / "t").draft
    assert draft.executable_files == ["gradlew"]
    assert draft.context_files["gradlew"] == "#!/bin/sh\necho gradle\n"


def test_metadata_and_the_source_directory_are_kept(tmp_path):
    toml = (
        'version = "1.0"\n[metadata]\nauthor_name = "Ada"\ndifficulty = "hard"\n'
        'tags = ["a", "b"]\ncategory = "math"\n[agent]\ntimeout_sec = 300.0\n'
        "[verifier]\ntimeout_sec = 99.0\n"
    )
    harbor_task(tmp_path / "evoeval" / "10", toml)
    draft = only(tmp_path / "evoeval").draft
    assert draft.source_name == "evoeval/10"
    config = draft.source_metadata["config"]
    assert draft.source_metadata["format"] == "harbor"
    assert config["metadata"] == {
        "author_name": "Ada",
        "difficulty": "hard",
        "tags": ["a", "b"],
        "category": "math",
    }
    assert config["agent"] == {"timeout_sec": 300.0} and config["verifier"]["timeout_sec"] == 99.0
    assert (draft.category, draft.complexity) == ("math", "hard")


def test_a_map_can_name_either_base_recipe():
    recipes = {"trixie": "endless-base:t", "bookworm": "endless-base:b"}.__getitem__
    mapping = {"python:3.13": "endless-base-trixie", "ubuntu:22.04": "endless-base", "x": "y:1"}
    assert resolve_image_map(mapping, BASE, recipes) == {
        "python:3.13": "endless-base:t",
        "ubuntu:22.04": BASE,
        "x": "y:1",
    }


def test_the_identity_labels_are_added_once_and_come_off_again():
    base = "FROM x\nWORKDIR /app\n"
    assert identity_dockerfile(base, AGENT_USER, AGENT_HOME) == base  # ours: no labels
    labelled = identity_dockerfile(base, "", "")
    assert labelled.startswith(base) and 'endless.agent.user=""' in labelled
    assert identity_dockerfile(labelled, "worker", "/srv") == identity_dockerfile(
        base, "worker", "/srv"
    )
    assert identity_of_dockerfile(identity_dockerfile(base, "wo rk", "/s")) == ("wo rk", "/s")
    assert strip_identity(labelled) == base and identity_of_dockerfile(base) is None


# Terminal-Bench 1.x -----------------------------------------------------------------------------

COMPOSE = """services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
      - GREETING=hello
    working_dir: /work
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
"""
RUN_TESTS = "#!/bin/bash\nuv run pytest $TEST_DIR/test_outputs.py -rA\n"


def tb_task(root: Path, compose: str = COMPOSE) -> None:
    write(
        root,
        "task.yaml",
        "instruction: |-\n  Write ok.\nauthor_name: Bo\ndifficulty: easy\ncategory: games\n"
        "tags: [x]\nmax_agent_timeout_sec: 300\nmax_test_timeout_sec: 45\n",
    )
    write(root, "Dockerfile", "FROM python:3.13\nCOPY data.csv /work/data.csv\n")
    write(root, "docker-compose.yaml", compose)
    write(root, "data.csv", "a,b\n")
    write(root, "run-tests.sh", RUN_TESTS)
    write(root, "solution.sh", "#!/bin/bash\necho ok > out.txt\n")
    write(root, "tests/test_outputs.py", TEST)


def test_a_terminal_bench_task_reads_as_harbors_mapper_converts_it(tmp_path):
    tb_task(tmp_path / "t")
    task = read_tb_dir(tmp_path / "t")
    assert task.instruction == "Write ok."
    assert task.dockerfile.endswith(
        "# Mapped from docker-compose.yaml\nENV TEST_DIR=/tests\nENV GREETING=hello\n"
        "WORKDIR /work\n"
    )
    assert task.context_files == {"data.csv": "a,b\n"}
    spec = bundle.unpack(task.completion_test)
    assert spec.script == "test.sh" and spec.files["test.sh"] == RUN_TESTS + REWARD_ENDING
    assert spec.test == TEST and spec.timeout == 45.0
    assert task.reference_solution == "echo ok > out.txt\n"
    assert (task.agent_user, task.workdir, task.source_format) == ("", "", "terminal-bench")
    assert task.config["author_name"] == "Bo" and "instruction" not in task.config


def test_terminal_bench_tasks_import_in_auto_mode_next_to_harbor_ones(tmp_path):
    tb_task(tmp_path / "src" / "tb")
    harbor_task(tmp_path / "src" / "hb")
    outcomes = {
        o.directory: o for o in import_tasks(tmp_path / "src", "b", fmt="auto", base_image=BASE)
    }
    assert outcomes["tb"].draft.source_metadata["format"] == "terminal-bench"
    assert outcomes["hb"].draft.source_metadata["format"] == "harbor"
    assert outcomes["tb"].draft.complexity == "easy"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda t: write(t, "docker-compose.yaml", COMPOSE + "  db:\n    image: postgres\n"),
            "service db: image postgres is not mapped (add --base-image-map postgres=IMAGE",
        ),
        (
            lambda t: write(
                t,
                "docker-compose.yaml",
                COMPOSE.replace("/work\n", "/work\n")
                + "      - /var/run/docker.sock:/var/run/docker.sock\n",
            ),
            "host volumes are not supported",
        ),
        (lambda t: write(t, "solution.yaml", "- command: x\n"), "solution.yaml is not supported"),
        (lambda t: (t / "run-tests.sh").unlink(), "no run-tests.sh"),
        (lambda t: write(t, "task.yaml", "author_name: x\n"), "task.yaml has no instruction"),
    ],
)
def test_terminal_bench_tasks_that_cannot_run_here_are_refused_with_the_reason(
    tmp_path, change, reason
):
    tb_task(tmp_path / "t")
    change(tmp_path / "t")
    (outcome,) = import_tasks(tmp_path / "t", "b", fmt="terminal-bench", base_image=BASE)
    assert outcome.draft is None and reason in outcome.reason


def test_a_plain_pytest_file_is_not_a_verifier_and_a_packed_one_round_trips():
    assert bundle.unpack(TEST) is None
    spec = bundle.Verifier(test=TEST, script="test.sh", files={"test.sh": "x"}, env={"A": "b"})
    text = bundle.pack(spec)
    assert bundle.unpack(text) == spec
    assert json.loads(text.splitlines()[-1].removeprefix(bundle.MARK))["env"] == {"A": "b"}
