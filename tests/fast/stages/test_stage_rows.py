"""Each stage's outcome makes its table's row: every row below is held to its table's model
(store/schemas/), and a stage's plain metadata becomes the values the Dagster UI shows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from endless_assets.agent.episode import Rollout
from endless_assets.defs.metadata import ui_metadata
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.models import HARNESS_ERROR, OK, REJECTED, KeepRule, Task, score_task
from endless_assets.solver_id import SolverId
from endless_assets.stages.completion import CompletionOutcome
from endless_assets.stages.decontamination import DecontaminationOutcome
from endless_assets.stages.describe import Description
from endless_assets.stages.drift import DRIFTED, DriftOutcome
from endless_assets.stages.environment import EnvironmentOutcome
from endless_assets.stages.filter import Scored
from endless_assets.stages.rollouts import Attempt
from endless_assets.stages.soundness.stage import SoundnessOutcome
from endless_assets.stages.stage_run import Counts, Markdown, status_metadata
from endless_assets.store.columns import frame
from endless_assets.store.schemas import TABLES

BATCH = "2026-06-02"


@pytest.fixture(scope="module")
def task() -> Task:
    return ProceduralGenerator("base").describe(BATCH, 0, 7)[0]


def rows(task: Task) -> dict[str, dict]:
    attempts = [{"reward": 1, "n_turns": 2}, {"reward": 0, "n_turns": 5}]
    score = score_task(attempts, KeepRule(), solver=SolverId("oracle", ""))
    rollout = Rollout(task.task_id, "oracle", "", None, HARNESS_ERROR, error="engine gone")
    environment = EnvironmentOutcome(task.task_id, OK, context_files={"a.txt": "x"})
    return {
        "task_descriptions": Description(task).row(),
        "task_decontamination": DecontaminationOutcome(task.task_id, BATCH).row(),
        "task_environments": environment.row(task),
        "completion_tests": CompletionOutcome(task.task_id, REJECTED, reject_reason="r").row(task),
        "task_soundness": SoundnessOutcome(task.task_id, OK).row(task),
        "solver_rollouts": Attempt(BATCH, 0, rollout).row(),
        "filtered_dataset": Scored(task.model_copy(update={"score": score}), "tag").row(),
        "drift_revalidation": DriftOutcome(task.task_id, DRIFTED, reason="build_failed").row(BATCH),
    }


def test_every_stage_outcome_makes_a_row_its_table_accepts(task):
    made = rows(task)
    assert set(made) <= set(TABLES)
    for table, row in made.items():
        assert set(row) == set(TABLES[table].to_schema().columns), table
        TABLES[table].validate(frame(table, [row]), lazy=True)
        assert row["task_id"] == task.task_id and row["batch"] == BATCH, table


def test_a_row_the_model_refuses_is_caught(task):
    row = {**rows(task)["task_soundness"], "status": "maybe"}
    with pytest.raises(Exception, match="status"):
        TABLES["task_soundness"].validate(frame("task_soundness", [row]), lazy=True)


def test_plain_metadata_becomes_what_the_ui_shows():
    plain = {
        **status_metadata([{"status": REJECTED, "reject_reason": "flaky: 1 of 3"}]),
        "cells": Counts(Counter({"a": 2, "b": 1}), "cell"),
        "seen": pl.DataFrame({"cell": ["a"], "score": [0.5]}),
        "sample": Markdown("**x**"),
        "source": Path("/tmp/x"),
        "mean": None,
    }
    shown = ui_metadata(plain)
    assert shown["rejected"] == 1 and shown["mean"] is None
    reasons = shown["reject_reasons"]
    assert [(r.data["reason"], r.data["tasks"]) for r in reasons.records] == [("flaky", 1)]
    assert [r.data["cell"] for r in shown["cells"].records] == ["a", "b"]
    assert [c.type for c in shown["seen"].schema.columns] == ["string", "float"]
    assert isinstance(shown["sample"], dg.MarkdownMetadataValue)
    assert isinstance(shown["source"], dg.PathMetadataValue)
