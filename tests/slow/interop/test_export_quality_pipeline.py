"""A batch made with soundness on and checked against a reference set (a real Dagster run, real
Docker): every export carries each kept task's quality record with the lake's values, and
importing the Harbor and Terminal-Bench exports back keeps it in the task's draft."""

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
from endless_assets.interop import export_dataset
from endless_assets.interop.imports import import_tasks
from endless_assets.interop.quality import QualityRecord
from endless_assets.models import Task
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.store.lake import Lake

BATCH = "2026-06-12"
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
KEYS = list(QualityRecord().as_dict())
SOUNDNESS = (
    "reference_runs",
    "reference_passes",
    "noop_runs",
    "noop_passes",
    "shortcuts_run",
    "shortcuts_passed",
    "hackable",
    "ablations_run",
    "ablations_rejected",
    "mutation_score",
    "audit",
    "audit_model",
    "aligned",
    "cheat_passed",
    "cheat_judged_done",
)
SCORE = ("solver_model", "scored_attempts", "successes", "pass_rate", "pass_at_n")


def reference_set(root: Path) -> None:
    """Two benchmark tasks that share nothing with the procedural families."""
    for name, words in (("rotate", "rotate the web logs"), ("spool", "index the mail spool")):
        files = {
            "instruction.md": f"Please {words} and report when finished.\n",
            "environment/Dockerfile": f"FROM ubuntu:22.04\nRUN echo {name}\n",
            "tests/test_outputs.py": (
                f"def test_{name}():\n    assert open('/srv/{name}').read() == '{words}\\n'\n"
            ),
            "solution/solve.sh": f"#!/bin/bash\necho '{words}' > /srv/{name}\n",
        }
        for rel, text in files.items():
            (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / name / rel).write_text(text)


@pytest.fixture(scope="module")
def lake(tmp_path_factory, sandbox) -> Lake:
    work = tmp_path_factory.mktemp("quality")
    reference_set(work / "refs")
    settings = PipelineSettings(
        data_dir=str(work / "lake"),
        tasks=TASKS,
        soundness_repeats=1,
        decontamination_references=f"peers={work / 'refs'}",
    )
    result = dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        partition_key=BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": settings,
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(work / "lake")),
        },
    )
    assert result.success
    return Lake(work / "lake")


@pytest.fixture(scope="module")
def expected(lake) -> dict[str, dict]:
    """Each kept task's record, read from the lake's tables column by column."""

    def by_id(table: str) -> dict[str, dict]:
        return {r["task_id"]: r for r in lake.read(table, BATCH).to_dicts()}

    sound, tests = by_id("task_soundness"), by_id("completion_tests")
    checks = by_id("task_decontamination")
    kept = {t: r for t, r in by_id("filtered_dataset").items() if r["kept"]}
    assert len(kept) == TASKS
    records = {}
    for task_id, row in kept.items():
        soundness, check = sound[task_id], checks[task_id]
        assert (
            soundness["reference_runs"] == soundness["repeats"] + 1
        )  # the validation stage's run too
        assert check["status"] == "ok" and check["reference_sets"].startswith("peers:")
        records[task_id] = {
            "soundness": "checked",
            "soundness_repeats": soundness["repeats"],
            **{k: soundness[k] for k in SOUNDNESS},
            "fails_with_noop": tests[task_id]["fails_with_noop"],
            **{k: row[k] for k in SCORE},
            "difficulty": "easy",  # the oracle solves every kept task
            "contamination": "clean",
            "contamination_table": "task_decontamination",
            "contamination_reference_sets": check["reference_sets"],
            "contamination_thresholds": check["thresholds"],
            "contamination_hit": None,
            "services": None,  # one-container tasks
        }
    assert all(r["shortcuts_run"] and r["fails_with_noop"] for r in records.values())
    return records


@pytest.fixture(scope="module")
def exports(lake, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("exports")
    for fmt in ("harbor", "terminal-bench", "rl"):
        export_dataset(lake, fmt, out / fmt, batches=[BATCH])
    return out


def test_harbor_and_terminal_bench_tasks_carry_the_lakes_record(exports, expected):
    for task_id, record in expected.items():
        config = tomllib.loads((exports / "harbor" / task_id / "task.toml").read_text())
        written = config["metadata"]["quality"]  # a value not measured is absent from TOML
        assert {k: written.get(k) for k in KEYS} == record, task_id
        tb = yaml.safe_load((exports / "terminal-bench" / task_id / "task.yaml").read_text())
        assert tb["quality"] == record and list(tb["quality"]) == KEYS


def test_rl_and_sft_rows_carry_the_lakes_record(lake, exports, expected, tmp_path):
    rows = pl.read_parquet(exports / "rl" / "train.parquet").to_dicts()
    lines = [json.loads(line) for line in (exports / "rl" / "train.jsonl").open()]
    assert len(rows) == len(lines) == TASKS
    for row, line in zip(rows, lines, strict=True):
        assert row["quality"] == line["quality"] == expected[row["task_id"]]
    copy = Lake(tmp_path / "lake")  # one successful chat rollout, so that SFT has a row
    shutil.copytree(lake.data_dir, copy.data_dir)
    rollouts = copy.read("solver_rollouts", BATCH)
    chat = rollouts.head(1).with_columns(
        policy=pl.lit("chat"),
        model=pl.lit("test-model"),
        messages=pl.lit(json.dumps([{"role": "user", "content": "go"}, _reply()])),
        reward=pl.lit(1, dtype=pl.Int64),
    )
    copy.write("solver_rollouts", BATCH, pl.concat([rollouts, chat]))
    export_dataset(copy, "sft", tmp_path / "sft")
    (row,) = pl.read_parquet(tmp_path / "sft" / "train.parquet").to_dicts()
    line = json.loads((tmp_path / "sft" / "train.jsonl").read_text())
    assert row["quality"] == line["quality"] == expected[row["task_id"]]


def _reply() -> dict[str, str]:
    return {"role": "assistant", "content": "<action>done</action>"}


def test_importing_the_exports_back_keeps_the_record_in_the_draft(exports, expected):
    for fmt in ("harbor", "terminal-bench"):
        outcomes = import_tasks(exports / fmt, "back", fmt=fmt, base_image=base_image_tag())
        assert sorted(o.directory for o in outcomes) == sorted(expected)
        for outcome in outcomes:
            assert outcome.draft is not None, outcome.reason
            stored = Task.model_validate_json(outcome.draft.stored_json())
            assert stored.source_metadata["quality"] == expected[outcome.directory], fmt
