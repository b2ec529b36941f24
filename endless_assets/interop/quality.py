"""The quality record: the evidence the lake holds for one task, written with the task by every
export under one name, `quality`, with the same keys everywhere (Harbor `[metadata.quality]`,
Terminal-Bench `quality:`, the `quality` field of RL and SFT rows), and read back on import.

Where each value comes from (the task's row of each table; no row: null, and "not checked"):

- `task_soundness`: `soundness` ("checked"; "off" when it ran with soundness off, whose counts are
  then null; "not checked": no row), `soundness_repeats`, `reference_runs` and `reference_passes`
  (the validation stage's run of the reference included), `noop_runs`, `noop_passes`,
  `shortcuts_run`, `shortcuts_passed`, `hackable`, `ablations_run`, `ablations_rejected`,
  `mutation_score`, and the model probes where they ran: `audit`, `audit_model`, `aligned`,
  `cheat_passed`, `cheat_judged_done`;
- `completion_tests`: `fails_with_noop` (the validation stage's do-nothing run);
- `filtered_dataset` (the task's score): `solver_model`, `scored_attempts`, `successes`,
  `pass_rate`, `pass_at_n`, `difficulty`;
- the latest `contamination_recheck` row of the task, else its `task_decontamination` row:
  `contamination` ("clean", "contaminated", or "not checked": no row, no reference set
  configured, or the check failed), `contamination_table` (which of the two), and for a checked
  task `contamination_reference_sets` (name:tasks, comma-separated), `contamination_thresholds`
  and, when contaminated, `contamination_hit` (the strongest hit, as its reject reason says);
- the task itself: `services`, the names of its services (null for a one-container task).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from endless_assets.models import Task, TaskScore
from endless_assets.store.lake import Lake

KEY = "quality"
NOT_CHECKED = "not checked"
CHECKED, OFF = "checked", "off"
CLEAN, CONTAMINATED = "clean", "contaminated"
SOUNDNESS_STATES = (CHECKED, OFF, NOT_CHECKED)
CONTAMINATION_STATES = (CLEAN, CONTAMINATED, NOT_CHECKED)
DECONTAMINATION, RECHECK = "task_decontamination", "contamination_recheck"

# task_soundness columns carried as they are (null when soundness was off).
_COUNTS = (
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
)
_AUDIT = ("audit", "audit_model", "aligned", "cheat_passed", "cheat_judged_done")


@dataclass(frozen=True)
class QualityRecord:
    """One task's quality record; every value but the two states may be null (not measured)."""

    soundness: str = NOT_CHECKED
    soundness_repeats: int | None = None
    reference_runs: int | None = None
    reference_passes: int | None = None
    noop_runs: int | None = None
    noop_passes: int | None = None
    fails_with_noop: bool | None = None
    shortcuts_run: int | None = None
    shortcuts_passed: int | None = None
    hackable: str | None = None
    ablations_run: int | None = None
    ablations_rejected: int | None = None
    mutation_score: float | None = None
    audit: str | None = None
    audit_model: str | None = None
    aligned: bool | None = None
    cheat_passed: bool | None = None
    cheat_judged_done: bool | None = None
    solver_model: str | None = None
    scored_attempts: int | None = None
    successes: int | None = None
    pass_rate: float | None = None
    pass_at_n: float | None = None
    difficulty: str | None = None
    contamination: str = NOT_CHECKED
    contamination_table: str | None = None
    contamination_reference_sets: str | None = None
    contamination_thresholds: str | None = None
    contamination_hit: str | None = None
    services: str | None = None  # the task's services' names, comma-separated; null: none

    @classmethod
    def from_tables(
        cls,
        *,
        score: TaskScore | None,
        soundness: Mapping[str, Any] | None,
        completion: Mapping[str, Any] | None,
        decontamination: Mapping[str, Any] | None,
        recheck: Mapping[str, Any] | None,
        services: Iterable[str] = (),
    ) -> QualityRecord:
        """The record of one task from its rows (None: the table has no row for it), naming
        its `services`."""
        values: dict[str, Any] = {"services": ",".join(services) or None}
        if soundness is not None:
            repeats = soundness.get("repeats")
            values["soundness"] = CHECKED if repeats else OFF
            values["soundness_repeats"] = repeats
            if repeats:
                values |= {name: soundness.get(name) for name in _COUNTS}
            values |= {name: soundness.get(name) for name in _AUDIT}
        if completion is not None:
            values["fails_with_noop"] = completion.get("fails_with_noop")
        if score is not None:
            values |= {
                "solver_model": str(score.solver),
                "scored_attempts": score.scored_attempts,
                "successes": score.successes,
                "pass_rate": score.pass_rate,
                "pass_at_n": score.pass_at_n,
                "difficulty": score.difficulty,
            }
        if recheck is not None:
            values |= _contamination(recheck, RECHECK)
        elif decontamination is not None:
            values |= _contamination(decontamination, DECONTAMINATION)
        return cls.from_dict(values)

    def as_dict(self) -> dict[str, Any]:
        """Every key, in order, nulls included (TOML, which has no null, leaves them out)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QualityRecord:
        """A record as written (a missing key is null); ValueError naming a value of the wrong
        type or state. Keys it does not know are ignored (a later version's)."""
        values = {}
        for name, kind in _TYPES.items():
            value = data.get(name)
            if value is None:
                continue
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ValueError(f"{KEY}.{name} is {value!r}, not a {kind.__name__}")
            values[name] = value
        record = cls(**values)
        if record.soundness not in SOUNDNESS_STATES:
            raise ValueError(f"{KEY}.soundness is {record.soundness!r}")
        if record.contamination not in CONTAMINATION_STATES:
            raise ValueError(f"{KEY}.contamination is {record.contamination!r}")
        return record

    @staticmethod
    def polars_dtype() -> pl.Struct:
        """The record as a Parquet struct column (rows)."""
        kinds = {int: pl.Int64, float: pl.Float64, bool: pl.Boolean, str: pl.String}
        return pl.Struct({name: kinds[kind] for name, kind in _TYPES.items()})


def _value_type(annotation: Any) -> type:
    if isinstance(annotation, types.UnionType):
        (kind,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return kind
    return annotation


_TYPES: dict[str, type] = {
    name: _value_type(hint) for name, hint in typing.get_type_hints(QualityRecord).items()
}


def _contamination(row: Mapping[str, Any], table: str) -> dict[str, Any]:
    status, sets = row.get("status"), row.get("reference_sets") or ""
    values: dict[str, Any] = {"contamination_table": table}
    if status not in ("ok", "rejected") or not sets:
        return values  # none configured, or the check itself failed: not checked
    values |= {
        "contamination": CLEAN if status == "ok" else CONTAMINATED,
        "contamination_reference_sets": sets,
        "contamination_thresholds": row.get("thresholds") or "",
    }
    if status == "rejected":
        values["contamination_hit"] = row.get("reject_reason") or ""
    return values


def quality_records(lake: Lake, tasks: Iterable[Task]) -> dict[str, QualityRecord]:
    """Task id -> record, for tasks read from `filtered_dataset` (their score attached)."""
    tasks = list(tasks)
    batches = sorted({t.batch for t in tasks})
    tables = ("task_soundness", "completion_tests", DECONTAMINATION, RECHECK)
    rows = {table: _latest_rows(lake, table, batches) for table in tables}
    return {
        t.task_id: QualityRecord.from_tables(
            score=t.score,
            soundness=rows["task_soundness"].get(t.task_id),
            completion=rows["completion_tests"].get(t.task_id),
            decontamination=rows[DECONTAMINATION].get(t.task_id),
            recheck=rows[RECHECK].get(t.task_id),
            services=[s.name for s in t.services],
        )
        for t in tasks
    }


def _latest_rows(lake: Lake, table: str, batches: list[str]) -> dict[str, dict[str, Any]]:
    """Task id -> its latest row in `table` (by created_at) among the batches' partitions."""
    found: dict[str, dict[str, Any]] = {}
    for batch in batches:
        for row in lake.read_or_empty(table, batch).sort("created_at").to_dicts():
            found[row["task_id"]] = row
    return found


def carried(metadata: Mapping[str, Any]) -> QualityRecord | None:
    """The record a task's metadata carries under `quality` (None: none, or not a table);
    ValueError for one with a value of the wrong type."""
    value = metadata.get(KEY)
    return QualityRecord.from_dict(value) if isinstance(value, Mapping) else None


def record_of(records: Mapping[str, QualityRecord] | None, task: Task) -> QualityRecord:
    """The task's record (none given, or none for this task: every value not checked)."""
    return (records or {}).get(task.task_id) or QualityRecord()
