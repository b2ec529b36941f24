"""The rows of the tables that look at a made batch again (drift_revalidation,
contamination_recheck) and of served episodes (served_episodes), made the way their producing
code makes them and held to their table's model (store/schemas/); a wrong row is refused."""

from __future__ import annotations

import logging

import pandera.polars as pa
import pytest

from endless_assets.agent.episode import Turn
from endless_assets.decontamination import Hit, rejection_reason
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.models import REJECTED, EpisodeLimits, Task
from endless_assets.serve.episode import ServedEpisode
from endless_assets.serve.record import episode_row
from endless_assets.settings import Settings
from endless_assets.stages.decontamination import DecontaminationOutcome, run_decontamination
from endless_assets.stages.drift import DRIFTED, HARNESS_ERROR, VALID, DriftOutcome
from endless_assets.store.columns import frame
from endless_assets.store.schemas import TABLES

BATCH = "2026-06-09"


@pytest.fixture(scope="module")
def task() -> Task:
    return ProceduralGenerator("base").describe(BATCH, 0, 11)[0]


def drift_rows(task: Task) -> list[dict]:
    ids = [f"{task.task_id}{i}" for i in range(3)]  # (a task's row is one per partition)
    checked = DriftOutcome(ids[0], VALID, image_tag="endless-task:abc", repeats=3)
    checked.reference_passes, checked.noop_passes, checked.cpu_seconds = 3, 0, 1.5
    drifted = DriftOutcome(ids[1], DRIFTED, reason="reference_fails: 1 of 3", repeats=3)
    broken = DriftOutcome(ids[2], HARNESS_ERROR, reason="engine gone")
    return [outcome.row(BATCH) for outcome in (checked, drifted, broken)]


def recheck_rows(task: Task, tmp_path) -> list[dict]:
    """An unset reference set (what the stage writes then), and a task that shares a field with
    a benchmark task, as the checker marks it."""
    settings = Settings.of({"data_dir": str(tmp_path)})
    log = logging.getLogger("test")
    clean = run_decontamination(settings, [task], "contamination_recheck", log=log).rows
    hits = [Hit("tb", "hello-world", "instruction", "ngram13", 0.9)]
    found = DecontaminationOutcome(f"{task.task_id}0", BATCH, REJECTED, rejection_reason(hits))
    found.reference_sets, found.fields, found.hits = "tb=/refs/tb", ["instruction"], hits
    return [*clean, found.row()]


def served_rows(task: Task) -> list[dict]:
    """A graded episode, one the engine failed, one the client left before it ended."""
    made = []
    for ending in ((1, "done", ""), (None, "done", "engine gone"), None):
        episode = ServedEpisode(
            None,  # ty: ignore[invalid-argument-type] (never started: no container)
            "endless-task:abc",
            task,
            EpisodeLimits(),
            session_id="s1",
            episode_id=f"e{len(made)}",
            model="m",
            seed=7,
        )
        episode.record.turns = [Turn(0, "command", command="ls", output="a\n"), Turn(1, "done")]
        if ending is not None:  # (graded; else the episode was abandoned while it ran)
            episode.record.reward, episode.record.termination, episode.record.error = ending
            episode.graded.set()
        made.append(episode_row(episode))
    return made


def made_rows(task: Task, tmp_path) -> dict[str, list[dict]]:
    return {
        "drift_revalidation": drift_rows(task),
        "contamination_recheck": recheck_rows(task, tmp_path),
        "served_episodes": served_rows(task),
    }


def test_each_table_accepts_the_rows_its_code_makes(task, tmp_path):
    for table, rows in made_rows(task, tmp_path).items():
        assert set(rows[0]) == set(TABLES[table].to_schema().columns), table
        TABLES[table].validate(frame(table, rows), lazy=True)
        assert {row["batch"] for row in rows} == {BATCH}, table
    served = made_rows(task, tmp_path)["served_episodes"]
    assert [(r["reward"], r["termination"]) for r in served] == [
        (1, "done"),
        (None, "infra_error"),
        (None, "abandoned"),
    ]


WRONG = {  # a value each table's model refuses, in the column named
    "drift_revalidation": ("status", "maybe"),
    "contamination_recheck": ("status", "dirty"),
    "served_episodes": ("steps", -1),
}


@pytest.mark.parametrize("table", sorted(WRONG))
def test_a_wrong_row_is_refused(task, tmp_path, table):
    column, value = WRONG[table]
    row = {**made_rows(task, tmp_path)[table][0], column: value}
    with pytest.raises(pa.errors.SchemaErrors, match=column):
        TABLES[table].validate(frame(table, [row]), lazy=True)


def test_a_served_episode_is_one_row(task):
    row = served_rows(task)[0]
    with pytest.raises(pa.errors.SchemaErrors, match="episode_id"):
        TABLES["served_episodes"].validate(frame("served_episodes", [row, row]), lazy=True)
