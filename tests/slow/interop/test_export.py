"""Exports of a materialized batch: Harbor, Terminal-Bench, RL and SFT rows; validation on the
way out; an exported Harbor task graded offline in a real container."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

import endless_assets.definitions as definitions
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
from endless_assets.interop import MARKER, ExportError, OutputError, export_dataset
from endless_assets.interop.harbor_import import read_harbor_dir
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.settings import Settings
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake

BATCH = "2026-06-01"
TASKS = 5
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
def lake(tmp_path_factory, sandbox) -> Lake:
    data_dir = tmp_path_factory.mktemp("export-lake")
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
    return Lake(data_dir)


@pytest.fixture(scope="module")
def kept(lake) -> dict[str, dict]:
    rows = query(lake, "select * from filtered_dataset where kept").to_dicts()
    assert len(rows) == TASKS
    return {r["task_id"]: r for r in rows}


@pytest.fixture(scope="module")
def harbor_dir(lake, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harbor") / "tasks"
    summary = export_dataset(lake, "harbor", out, batches=[BATCH])
    assert summary.tasks == TASKS and summary.rows == {"task_dirs": TASKS}
    return out


def test_harbor_export_writes_one_complete_task_directory_per_kept_task(harbor_dir, kept):
    assert sorted(p.name for p in harbor_dir.iterdir() if p.is_dir()) == sorted(kept)
    assert (harbor_dir / MARKER).is_file()
    for task_id, row in kept.items():
        task = harbor_dir / task_id
        for rel in (
            "instruction.md",
            "task.toml",
            "environment/Dockerfile",
            "tests/test.sh",
            "tests/test_final_state.py",
            "tests/test_initial_state.py",
            "solution/solve.sh",
        ):
            assert (task / rel).is_file(), (task_id, rel)
        assert (task / "tests/test.sh").stat().st_mode & 0o111
        assert (task / "solution/solve.sh").stat().st_mode & 0o111
        config = tomllib.loads((task / "task.toml").read_text())
        meta = config["metadata"]
        assert meta["task_id"] == task_id and meta["source_batch"] == BATCH
        for key in ("category", "complexity", "scenario", "family", "generator", "pass_rate"):
            assert meta[key] == row[key], key
        assert meta["difficulty"] == "easy"  # the oracle solves every kept task
        assert json.loads(meta["truth"]) == json.loads(row["truth"])
        assert config["agent"]["user"] == "user" and config["verifier"]["user"] == "root"
        assert (task / "tests/test_final_state.py").read_text() == row["completion_test"]
        assert (
            (task / "environment/Dockerfile").read_text().startswith(f"FROM {base_image_tag()}\n")
        )
        for rel, text in json.loads(row["context_files"]).items():
            assert (task / "environment" / rel).read_text() == text
        grader = (task / "tests/test.sh").read_text()
        assert "/logs/verifier/reward.txt" in grader
        for network_step in ("curl", "pip", "uv ", "apt-get", "wget"):
            assert network_step not in grader


def test_the_base_image_is_a_parameter(lake, tmp_path):
    out = tmp_path / "pushed"
    export_dataset(lake, "harbor", out, base_image="registry.example.com/endless-base:v1")
    for task in (p for p in out.iterdir() if p.is_dir()):
        assert (
            (task / "environment/Dockerfile")
            .read_text()
            .startswith("FROM registry.example.com/endless-base:v1\n")
        )
        meta = tomllib.loads((task / "task.toml").read_text())["metadata"]
        assert meta["base_image"] == "registry.example.com/endless-base:v1"
    with pytest.raises(ExportError, match="not an image reference"):
        export_dataset(lake, "harbor", tmp_path / "bad", base_image="two words")


def test_an_exported_harbor_task_grades_offline_as_harbor_would(harbor_dir, sandbox):
    """Build the exported environment, then do what Harbor does: grade the untouched state
    (reward 0), run solution/solve.sh as the agent user, grade again (reward 1). The container
    has no network, so grading needs none."""
    task = read_harbor_dir(next(p for p in sorted(harbor_dir.iterdir()) if p.is_dir()))
    build = sandbox.build(task.dockerfile, task.context_files)
    assert build.ok, build.log
    tests = {p.name: p.read_text() for p in (task.directory / "tests").iterdir()}
    solve = (task.directory / "solution/solve.sh").read_text()
    with sandbox.container(build.tag, labels={"role": "harbor-export-test"}) as box:
        box.exec_root(["mkdir", "-p", "/tests", "/logs/verifier", "/solution"])
        box.put_files("/tests", tests, mode=0o755)
        box.put_files("/solution", {"solve.sh": solve}, mode=0o755)

        def reward() -> str:
            # Harbor uploads the tests for each grading; the grader removes its test file.
            box.put_files("/tests", tests, mode=0o755)
            run = box.exec_root(["bash", "/tests/test.sh"], workdir="/home/user")
            assert run.exit_code == 0, run.output
            return box.exec_root(["cat", "/logs/verifier/reward.txt"]).output.strip()

        assert reward() == "0"
        solved = box.exec_root(
            ["bash", "/solution/solve.sh"],
            user="1000",
            workdir="/home/user",
            environment={"HOME": "/home/user"},
        )
        assert solved.exit_code == 0, solved.output
        assert reward() == "1"
        network = box.exec_root(["cat", "/sys/class/net/eth0/operstate"])
        assert network.exit_code != 0  # no network interface but loopback


def test_terminal_bench_export(lake, kept, tmp_path):
    out = tmp_path / "tb"
    export_dataset(lake, "terminal-bench", out, batches=[BATCH])
    for task_id, row in kept.items():
        task = out / task_id
        config = yaml.safe_load((task / "task.yaml").read_text())
        assert config["instruction"] == row["instruction"].rstrip("\n")
        assert config["parser_name"] == "pytest" and config["difficulty"] == "easy"
        assert config["category"] == row["category"]
        assert config["endless"]["task_id"] == task_id
        compose = yaml.safe_load((task / "docker-compose.yaml").read_text())
        assert compose["services"]["client"]["build"]["dockerfile"] == "Dockerfile"
        assert (task / "tests/test_outputs.py").read_text() == row["completion_test"]
        assert (task / "Dockerfile").read_text().startswith(f"FROM {base_image_tag()}\n")
        run_tests = (task / "run-tests.sh").read_text()
        assert "curl" not in run_tests and "uv " not in run_tests
        # our grader, whose pytest prints the -rA summary Terminal-Bench's parser reads
        assert "endless_grader.py --once" in run_tests.replace('"', "").replace("$tests/", "")
        assert '"-rA"' in (task / "tests/endless_grader.py").read_text()
        assert "setpriv --reuid=1000" in (task / "solution.sh").read_text()
        for rel in json.loads(row["context_files"]):
            assert (task / rel).is_file()


def test_rl_rows_carry_the_prompt_and_everything_to_rebuild_and_grade(lake, kept, tmp_path):
    out = tmp_path / "rl"
    summary = export_dataset(lake, "rl", out, val_fraction=0.5)
    assert sum(summary.rows.values()) == TASKS
    frames = [pl.read_parquet(p) for p in sorted(out.glob("*.parquet"))]
    rows = pl.concat(frames).to_dicts()
    jsonl = [json.loads(line) for p in sorted(out.glob("*.jsonl")) for line in p.open()]
    assert sorted(r["task_id"] for r in jsonl) == sorted(r["task_id"] for r in rows)
    settings = Settings.resolve()
    for row in rows:
        source = kept[row["task_id"]]
        prompt = row["prompt"]
        assert [m["role"] for m in prompt] == ["system", "user"]
        assert source["instruction"].strip() in prompt[1]["content"]
        assert f"at most {settings.solver.max_turns} turns" in prompt[0]["content"]
        assert row["reward_spec"]["ground_truth"] == source["completion_test"]
        assert row["reward_model"]["ground_truth"] == source["completion_test"]
        assert row["extra_info"]["task_id"] == row["task_id"]
        assert row["extra_info"]["split"] == row["split"]
        assert json.loads(row["context_files"]) == json.loads(source["context_files"])
        for key in ("initial_test", "completion_test", "reference_solution", "category"):
            assert row[key] == source[key]
        assert row["dockerfile"].startswith(f"FROM {base_image_tag()}\n")
        assert row["agent_user"] == "user" and row["env_class"] == "endless_terminal"
    # The split is a function of the task id: exporting again changes nothing.
    again = tmp_path / "rl2"
    export_dataset(lake, "rl", again, val_fraction=0.5)
    for name in ("train.parquet", "validation.parquet"):
        if (out / name).exists():
            assert (
                pl.read_parquet(out / name)["task_id"].to_list()
                == pl.read_parquet(again / name)["task_id"].to_list()
            )


def _add_chat_rollout(lake: Lake, task_id: str, messages: list) -> None:
    rollouts = lake.read("solver_rollouts", BATCH)
    template = rollouts.filter(pl.col("task_id") == task_id).head(1)
    chat = template.with_columns(
        policy=pl.lit("chat"),
        model=pl.lit("test-model"),
        messages=pl.lit(json.dumps(messages)),
        reward=pl.lit(1, dtype=pl.Int64),
    )
    lake.write("solver_rollouts", BATCH, pl.concat([rollouts, chat]))


def test_sft_rows_are_successful_chat_trajectories(lake, kept, tmp_path):
    copy = Lake(tmp_path / "lake-copy")
    shutil.copytree(lake.data_dir, copy.data_dir)
    task_id = sorted(kept)[0]
    messages = [
        {"role": "system", "content": "You are in a terminal."},
        {"role": "user", "content": "Task: ..."},
        {"role": "assistant", "content": "<command>ls</command>"},
        {"role": "user", "content": "out.txt\nexit code 0"},
        {"role": "assistant", "content": "<action>done</action>"},
    ]
    _add_chat_rollout(copy, task_id, messages)
    out = tmp_path / "sft"
    summary = export_dataset(copy, "sft", out)
    # The oracle rollouts talk to no model: they are counted, not exported.
    assert summary.rows == {"train": 1, "skipped_without_messages": TASKS}
    row = pl.read_parquet(out / "train.parquet").row(0, named=True)
    assert row["messages"] == messages
    assert (row["task_id"], row["solver"]) == (task_id, "chat/test-model")
    assert json.loads((out / "train.jsonl").read_text())["messages"] == messages
    # A malformed conversation fails the export, naming the task and the rollout.
    _add_chat_rollout(copy, task_id, [{"role": "robot", "content": "beep"}])
    with pytest.raises(ExportError, match=f"task {task_id} rollout 0 \\(chat/test-model\\)"):
        export_dataset(copy, "sft", tmp_path / "sft2")
    assert not (tmp_path / "sft2").exists()


def test_a_malformed_task_fails_the_export_by_id_and_keeps_the_previous_export(
    lake, kept, tmp_path
):
    copy = Lake(tmp_path / "lake-copy")
    shutil.copytree(lake.data_dir, copy.data_dir)
    out = tmp_path / "harbor"
    export_dataset(copy, "harbor", out)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    bad_id = sorted(kept)[1]
    edit_stored_task(copy, bad_id, completion_test="def test_(:\n")
    for fmt in ("harbor", "terminal-bench", "rl"):
        with pytest.raises(ExportError, match=f"task {bad_id} .*completion test does not parse"):
            export_dataset(copy, fmt, out, overwrite=True)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".harbor.")]


def edit_stored_task(lake: Lake, task_id: str, **changes: str) -> None:
    """Change a kept task as stored (its column and the task JSON the row carries)."""
    frame = lake.read("filtered_dataset", BATCH)
    stored = frame.filter(pl.col("task_id") == task_id)["task"][0]
    task = json.dumps(json.loads(stored) | changes)
    frame = frame.with_columns(
        *(
            pl.when(pl.col("task_id") == task_id).then(pl.lit(v)).otherwise(pl.col(k)).alias(k)
            for k, v in {**changes, "task": task}.items()
        )
    )
    lake.write("filtered_dataset", BATCH, frame)


def test_a_stored_row_that_disagrees_with_its_task_fails_the_export_by_id(lake, kept, tmp_path):
    copy = Lake(tmp_path / "lake-copy")
    shutil.copytree(lake.data_dir, copy.data_dir)
    task_id = sorted(kept)[0]
    frame = copy.read("filtered_dataset", BATCH).with_columns(
        instruction=pl.when(pl.col("task_id") == task_id)
        .then(pl.lit("Do something else."))
        .otherwise(pl.col("instruction"))
    )
    copy.write("filtered_dataset", BATCH, frame)
    with pytest.raises(ExportError, match=f"task {task_id} .*instruction disagree"):
        export_dataset(copy, "harbor", tmp_path / "harbor")


def test_export_refuses_a_non_empty_destination_and_unknown_batches(lake, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputError, match="not empty"):
        export_dataset(lake, "rl", out)
    assert (out / "keep.txt").read_text() == "mine"
    with pytest.raises(ExportError, match="no filtered_dataset partition for batch"):
        export_dataset(lake, "rl", tmp_path / "x", batches=["1999-01-01"])


def test_the_dataset_exports_asset_writes_every_format_and_reports_headline_figures(lake):
    from endless_assets.defs.exports import dataset_exports

    result = dg.materialize(
        [dataset_exports],
        instance=dg.DagsterInstance.ephemeral(),
        resources={"pipeline": PipelineSettings(data_dir=str(lake.data_dir))},
        run_config={"ops": {"dataset_exports": {"config": {"val_fraction": 0.0}}}},
    )
    assert result.success
    meta = result.asset_materializations_for_node("dataset_exports")[0].metadata
    exports = lake.data_dir / "exports"
    assert sorted(p.name for p in (exports / "harbor").iterdir() if p.is_dir()) == sorted(
        query(lake, "select task_id from filtered_dataset where kept")["task_id"]
    )
    assert (exports / "terminal-bench").is_dir() and (exports / "report.html").is_file()
    assert pl.read_parquet(exports / "rl/train.parquet").height == TASKS
    assert meta["tasks_kept"].value == TASKS and meta["tasks_sampled"].value == TASKS
    assert meta["keep_rate"].value == 1.0
    assert {r.data["part"]: r.data["rows"] for r in meta["rl_rows"].records} == {"train": TASKS}
    assert "solver filter" in [r.data["stage"] for r in meta["funnel"].records]
    assert meta["report"].value == str(exports / "report.html")


def test_a_task_kept_without_a_reference_solution_ships_without_one(lake, kept, tmp_path):
    copy = Lake(tmp_path / "lake-copy")
    shutil.copytree(lake.data_dir, copy.data_dir)
    bare = sorted(kept)[2]
    edit_stored_task(copy, bare, reference_solution="")
    export_dataset(copy, "harbor", tmp_path / "harbor")
    assert not (tmp_path / "harbor" / bare / "solution").exists()
    others = [t for t in kept if t != bare]
    assert all((tmp_path / "harbor" / t / "solution/solve.sh").is_file() for t in others)
    export_dataset(copy, "terminal-bench", tmp_path / "tb")
    assert "exit 1" in (tmp_path / "tb" / bare / "solution.sh").read_text()


def test_the_exported_harbor_grader_gives_no_reward_for_skipped_tests(sandbox):
    """Exit status 0 is not enough: a test that skips itself (say, because the agent deleted the
    file its condition looks at) must not earn the reward."""
    from endless_assets.interop.harbor import COMPLETION_TEST, GRADER_FILE, grader_script
    from endless_assets.sandbox.grading.verdict import GRADER_SOURCE

    skipping = "import pytest\n\ndef test_x():\n    pytest.skip('nothing to check')\n"
    passing = "def test_x():\n    assert True\n"
    with sandbox.container(sandbox.base.tag, labels={"role": "harbor-grader-test"}) as box:
        box.exec_root(["mkdir", "-p", "/tests", "/logs/verifier"])
        rewards = []
        for test in (skipping, passing):
            files = {"test.sh": grader_script(), GRADER_FILE: GRADER_SOURCE, COMPLETION_TEST: test}
            box.put_files("/tests", files, mode=0o755)
            assert box.exec_root(["bash", "/tests/test.sh"]).exit_code == 0
            rewards.append(box.exec_root(["cat", "/logs/verifier/reward.txt"]).output.strip())
    assert rewards == ["0", "1"]
