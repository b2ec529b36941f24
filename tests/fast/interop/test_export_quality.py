"""The quality record travels with every exported task (no Docker: rows written to a real lake
through the stages' own row builders): where each value comes from, what a task without rows
gets, the same keys in every format, and our own export imported back keeps it."""

from __future__ import annotations

import json
import tomllib

import polars as pl
import pytest
import yaml

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.interop.harbor import export_harbor
from endless_assets.interop.imports import import_tasks
from endless_assets.interop.quality import QualityRecord, quality_records
from endless_assets.interop.terminal_bench import export_terminal_bench
from endless_assets.interop.trainer import export_rl
from endless_assets.models import OK, REJECTED, Task, TaskScore
from endless_assets.settings import Settings
from endless_assets.solver_id import SolverId
from endless_assets.stages.completion import CompletionOutcome
from endless_assets.stages.decontamination import DecontaminationOutcome
from endless_assets.stages.soundness.audit import AuditOutcome, Judgement
from endless_assets.stages.soundness.stage import ProbeOutcome, SoundnessOutcome
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake

BASE = "endless-base:quality-test"
BATCH = "2026-12-03"
KEYS = list(QualityRecord().as_dict())
SETS, THRESHOLDS = "tb:12,peers:3", "ngrams 13,8, fuzzy 0.9"


def scored_tasks(n: int = 2) -> list[Task]:
    generator = ProceduralGenerator(BASE)
    tasks = []
    for index in range(n):
        task, _ = generator.describe(BATCH, index, seed=500 + index)
        score = TaskScore(
            attempts=4,
            harness_errors=1,
            scored_attempts=3,
            successes=2,
            pass_at_n=1.0,
            curve=[2 / 3, 1.0, 1.0],
            pass_rate=2 / 3,
            mean_turns_solved=3.0,
            solver=SolverId("chat", "test-model"),
            kept=True,
        )
        tasks.append(task.model_copy(update={"score": score}))
    return tasks


def sound(task: Task) -> SoundnessOutcome:
    """Two repeats, the validation stage's run counted, three shortcuts, four ablations, an
    audit."""
    probes = [
        ProbeOutcome("reference#1", "control", True),
        ProbeOutcome("reference#2", "control", True),
        ProbeOutcome("noop#1", "control", False),
        ProbeOutcome("noop#2", "control", False),
        *(ProbeOutcome(f"stub:{i}", "shortcut", False) for i in range(3)),
        *(ProbeOutcome(f"ablation:{i}/4", "ablation", i == 0) for i in range(4)),
    ]
    audit = AuditOutcome(
        "ran",
        model="judge-model",
        judgements=[Judgement("alignment", "aligned"), Judgement("cheat", "failed")],
    )
    outcome = SoundnessOutcome(
        task.task_id, OK, repeats=2, probes=probes, audit=audit, earlier_reference=True
    )
    outcome.decide()
    assert outcome.status == OK, outcome.reject_reason
    return outcome


def write_rows(lake: Lake, table: str, rows: list[dict]) -> None:
    lake.write(table, BATCH, frame(table, rows))


def checked(task: Task, status: str = OK, reason: str = "", sets: str = SETS) -> dict:
    outcome = DecontaminationOutcome(task.task_id, task.batch, status, reason, sets, THRESHOLDS)
    return outcome.row()


def test_the_record_takes_each_value_from_its_table_and_a_recheck_over_the_pipelines_check(
    tmp_path,
):
    lake = Lake(tmp_path / "lake")
    first, second = tasks = scored_tasks()
    off = SoundnessOutcome(second.task_id, OK, audit=AuditOutcome.skipped("soundness is off"))
    write_rows(lake, "task_soundness", [sound(first).row(first), off.row(second)])
    stage_iii = CompletionOutcome(first.task_id, OK, fails_with_noop=True)
    write_rows(lake, "completion_tests", [stage_iii.row(first)])
    write_rows(lake, "task_decontamination", [checked(first), checked(second, sets="")])
    records = quality_records(lake, tasks)
    record = records[first.task_id].as_dict()
    assert record == {
        "soundness": "checked",
        "soundness_repeats": 2,
        "reference_runs": 3,  # the validation stage's run of the reference is one of them
        "reference_passes": 3,
        "noop_runs": 2,
        "noop_passes": 0,
        "fails_with_noop": True,
        "shortcuts_run": 3,
        "shortcuts_passed": 0,
        "hackable": "",
        "ablations_run": 4,
        "ablations_rejected": 3,
        "mutation_score": 0.75,
        "audit": "ran",
        "audit_model": "judge-model",
        "aligned": True,
        "cheat_passed": False,
        "cheat_judged_done": None,
        "solver_model": "chat/test-model",
        "scored_attempts": 3,
        "successes": 2,
        "pass_rate": 2 / 3,
        "pass_at_n": 1.0,
        "difficulty": first.difficulty,
        "contamination": "clean",
        "contamination_table": "task_decontamination",
        "contamination_reference_sets": SETS,
        "contamination_thresholds": THRESHOLDS,
        "contamination_hit": None,
        "services": None,
    }
    # Soundness off: a row, but no evidence; no reference set configured: not checked.
    other = records[second.task_id].as_dict()
    assert other["soundness"] == "off" and other["soundness_repeats"] == 0
    assert other["audit"] == "skipped: soundness is off"
    assert [other[k] for k in ("reference_runs", "noop_passes", "mutation_score")] == [None] * 3
    assert other["fails_with_noop"] is None  # no completion_tests row
    assert other["contamination"] == "not checked"
    assert other["contamination_reference_sets"] is None
    # A later recheck of the batch is what the record says, hit named.
    hit = "contaminated: tb/bench-3 (instruction, ngram13 0.82)"
    write_rows(lake, "contamination_recheck", [checked(first, REJECTED, hit)])
    again = quality_records(lake, tasks)[first.task_id]
    assert (again.contamination, again.contamination_hit) == ("contaminated", hit)
    assert again.contamination_table == "contamination_recheck"


def test_a_task_no_table_has_a_row_for_is_exported_as_not_checked_in_every_format(tmp_path):
    lake = Lake(tmp_path / "lake")  # an older batch: nothing but the task and its score
    tasks = scored_tasks()
    records = quality_records(lake, tasks)
    expected = QualityRecord(
        solver_model="chat/test-model",
        scored_attempts=3,
        successes=2,
        pass_rate=2 / 3,
        pass_at_n=1.0,
        difficulty=tasks[0].difficulty,
    ).as_dict()
    assert records[tasks[0].task_id].as_dict() == expected
    export_harbor(tasks, tmp_path / "harbor", base_image=BASE, quality=records)
    export_terminal_bench(tasks, tmp_path / "tb", base_image=BASE, quality=records)
    settings = Settings.resolve()
    export_rl(tasks, tmp_path / "rl", base_image=BASE, settings=settings, quality=records)
    task_id = tasks[0].task_id
    toml = tomllib.loads((tmp_path / "harbor" / task_id / "task.toml").read_text())
    written = toml["metadata"]["quality"]  # TOML has no null: what was not measured is absent
    assert written == {k: v for k, v in expected.items() if v is not None}
    assert written["soundness"] == written["contamination"] == "not checked"
    tb = yaml.safe_load((tmp_path / "tb" / task_id / "task.yaml").read_text())["quality"]
    assert tb == expected and list(tb) == KEYS  # explicit nulls, the same keys in order
    row = pl.read_parquet(tmp_path / "rl" / "train.parquet").row(0, named=True)
    line = json.loads((tmp_path / "rl" / "train.jsonl").read_text().splitlines()[0])
    assert row["quality"] == line["quality"] == expected


def test_our_own_export_imported_again_keeps_its_record_in_the_draft(tmp_path):
    lake = Lake(tmp_path / "lake")
    tasks = scored_tasks()
    write_rows(lake, "task_soundness", [sound(t).row(t) for t in tasks])
    write_rows(lake, "task_decontamination", [checked(t) for t in tasks])
    records = quality_records(lake, tasks)
    export_harbor(tasks, tmp_path / "harbor", base_image=BASE, quality=records)
    export_terminal_bench(tasks, tmp_path / "tb", base_image=BASE, quality=records)
    for fmt, source in (("harbor", tmp_path / "harbor"), ("terminal-bench", tmp_path / "tb")):
        outcomes = import_tasks(source, "back", fmt=fmt, base_image=BASE)
        assert [o.reason for o in outcomes] == ["", ""]
        for outcome in outcomes:
            draft = outcome.draft
            assert draft is not None
            original = outcome.directory  # the task id: its directory's name
            assert draft.source_metadata["quality"] == records[original].as_dict(), fmt
            stored = Task.model_validate_json(draft.stored_json())  # task_descriptions.draft
            assert stored.source_metadata["quality"] == records[original].as_dict()
    # Exported again from a lake of its own, an imported task carries that lake's record.
    back = import_tasks(tmp_path / "harbor", "back", fmt="harbor", base_image=BASE)[0].draft
    assert back is not None
    export_harbor([back], tmp_path / "again", base_image=BASE)
    toml = tomllib.loads((tmp_path / "again" / back.task_id / "task.toml").read_text())
    assert toml["metadata"]["quality"] == {
        "soundness": "not checked",
        "contamination": "not checked",
    }


def test_a_record_of_the_wrong_shape_is_refused_by_name_and_later_keys_are_ignored(tmp_path):
    record = QualityRecord.from_dict({"reference_runs": 3, "pass_rate": 1, "added_later": "x"})
    assert (record.reference_runs, record.pass_rate) == (3, 1.0)
    for bad, name in (
        ({"reference_runs": "3"}, "quality.reference_runs"),
        ({"aligned": 1}, "quality.aligned"),
        ({"noop_runs": True}, "quality.noop_runs"),
        ({"contamination": "probably fine"}, "quality.contamination"),
    ):
        with pytest.raises(ValueError, match=name):
            QualityRecord.from_dict(bad)
    # An import does not fail for it: the record is left out, with a note.
    (task,) = scored_tasks(1)
    export_harbor([task], tmp_path / "harbor", base_image=BASE)
    toml = tmp_path / "harbor" / task.task_id / "task.toml"
    toml.write_text(toml.read_text().replace('soundness = "not checked"', "soundness = 3"))
    (outcome,) = import_tasks(tmp_path / "harbor", "back", fmt="harbor", base_image=BASE)
    assert outcome.draft is not None and "quality" not in outcome.draft.source_metadata
    assert any(note.startswith("quality record not read") for note in outcome.notes)


def test_the_parquet_struct_holds_every_key_with_its_type():
    dtype = QualityRecord.polars_dtype()
    assert [f.name for f in dtype.fields] == KEYS
    assert dict((f.name, f.dtype) for f in dtype.fields)["mutation_score"] == pl.Float64
    frame = pl.DataFrame([{"quality": QualityRecord().as_dict()}], schema={"quality": dtype})
    assert frame.row(0, named=True)["quality"] == QualityRecord().as_dict()
