"""One import of a directory that mixes the conventions real task sets use, written here for the
purpose (real Docker, a real Dagster run): a root agent in the image's WORKDIR, a task.toml
`[agent] user`, an image's USER, the image's ENV at grading, a tests/test.sh that builds a log
its pytest file reads, Terminal-Bench 2's test.sh verbatim, binary files, Terminal-Bench 1.x
with a compose service, a base image mapped to the trixie recipe. Every sound one validates and
is kept; a test that needs the network, a reference solution that is refused by the file system
and a service whose image is not mapped are rejected with the cause. The kept tasks export back
with their files, bytes and metadata."""

from __future__ import annotations

import base64
import json
import os
import tomllib

import pytest
import yaml
from conventions import (
    BINARY,
    BOILERPLATE,
    TB2_TEST_SH,
    TB_RUN_TESTS,
)
from conventions_import import BATCH, import_conventions

from endless_assets.defs.imports import IMPORTED_ASSETS
from endless_assets.defs.soundness import imported_task_soundness
from endless_assets.interop import export_dataset
from endless_assets.sandbox.grading import bundle
from endless_assets.store.lake import Lake


@pytest.fixture(scope="module")
def imported(tmp_path_factory, sandbox):
    work = tmp_path_factory.mktemp("conventions")
    result = import_conventions(
        work, [*IMPORTED_ASSETS, imported_task_soundness], soundness_repeats=1
    )
    data_dir = work / "lake"
    assert result.success
    return work, Lake(data_dir)


def rows(lake: Lake, table: str) -> dict[str, dict]:
    drafts = {r["task_id"]: r["draft"] for r in lake.read("task_descriptions", BATCH).to_dicts()}
    found = {}
    for row in lake.read(table, BATCH).to_dicts():
        draft = drafts.get(row["task_id"]) or ""
        name = json.loads(draft)["source_name"] if draft else row["reject_reason"]
        found[name] = row
    return found


SOUND = {
    "root_app",
    "tb2_verbatim",
    "root_installs",
    "agent_user",
    "image_user",
    "image_env",
    "script_log",
    "binary_files",
    "python_313",
    "tb_compose",
}


def test_every_sound_task_of_every_convention_validates_and_is_kept(imported):
    _, lake = imported
    kept = rows(lake, "filtered_dataset")
    assert {name.removeprefix("tasks/") for name, r in kept.items() if r["kept"]} == SOUND


def test_the_rejected_ones_say_why_with_the_failing_steps_own_words(imported):
    _, lake = imported
    descriptions = [r["reject_reason"] for r in lake.read("task_descriptions", BATCH).to_dicts()]
    assert any(
        "zz_two_services: service db: image postgres:16 is not mapped" in reason
        for reason in descriptions
    )
    tests = rows(lake, "completion_tests")
    assert tests["tasks/zz_needs_network"]["reject_reason"].startswith(
        "needs_network: pip install endless-absent-package: not installed in the image"
    )
    denied = tests["tasks/zz_permission_denied"]["reject_reason"]
    assert denied.startswith("reference_fails: ")
    assert "the reference solution exited 1" in denied and "Permission denied" in denied


def test_kept_tasks_export_back_with_their_tests_bytes_and_metadata(imported):
    work, lake = imported
    out = work / "harbor"
    export_dataset(lake, "harbor", out, batches=[BATCH])
    by_source = {}
    for task_dir in out.iterdir():
        if task_dir.is_dir():
            config = tomllib.loads((task_dir / "task.toml").read_text())
            by_source[config["metadata"]["source_name"]] = (task_dir, config)
    assert set(by_source) == {f"tasks/{name}" for name in SOUND}
    binary_dir, _ = by_source["tasks/binary_files"]
    assert (binary_dir / "environment/data.bin").read_bytes() == BINARY
    assert (binary_dir / "tests/data.bin").read_bytes() == BINARY
    root_dir, root_config = by_source["tasks/root_app"]
    assert (root_dir / "tests/test.sh").read_text() == BOILERPLATE
    tb2_dir, _ = by_source["tasks/tb2_verbatim"]
    assert (tb2_dir / "tests/test.sh").read_text() == TB2_TEST_SH
    assert root_config["metadata"]["author_name"] == "Conventions Test"
    assert root_config["metadata"]["tags"] == ["python", "identity"]
    assert root_config["agent"] == {"timeout_sec": 600.0}  # no user: the image's, as it came
    assert root_config["verifier"]["timeout_sec"] == 120.0
    assert root_config["environment"]["build_timeout_sec"] == 300.0
    assert "endless.agent" not in (root_dir / "environment/Dockerfile").read_text()
    _, worker_config = by_source["tasks/agent_user"]
    assert worker_config["agent"]["user"] == "worker"
    checks_dir, _ = by_source["tasks/script_log"]
    assert os.access(checks_dir / "environment/run-checks", os.X_OK)
    env_dir, _ = by_source["tasks/image_env"]
    assert (env_dir / "tests/expected.json").read_text() == '{"out": "tool-ok\\n"}'
    py_dir, _ = by_source["tasks/python_313"]
    assert "FROM endless-base:" in (py_dir / "environment/Dockerfile").read_text()

    tb_out = work / "terminal-bench"
    export_dataset(lake, "terminal-bench", tb_out, batches=[BATCH])
    (tb_dir,) = [
        d
        for d in tb_out.iterdir()
        if d.is_dir() and (d / "task.yaml").read_text().find("TB Test") >= 0
    ]
    assert (tb_dir / "run-tests.sh").read_text() == TB_RUN_TESTS
    config = yaml.safe_load((tb_dir / "task.yaml").read_text())
    assert (config["author_name"], config["max_test_timeout_sec"]) == ("TB Test", 90)


def test_a_kept_task_carries_its_source_name_and_a_verifier_of_its_own(imported):
    _, lake = imported
    kept = rows(lake, "filtered_dataset")
    spec = bundle.unpack(kept["tasks/binary_files"]["completion_test"])
    assert spec is not None and spec.script == "test.sh"
    assert base64.b64decode(spec.binary["data.bin"]) == BINARY
