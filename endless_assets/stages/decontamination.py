"""Decontamination as a stage: each task against the benchmarks of `decontamination_references`,
field by field; a task sharing a field with one is rejected `contaminated`."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from endless_assets.decontamination import (
    Decontaminator,
    Hit,
    References,
    Thresholds,
    field_texts,
    parse_references,
    read_references,
    rejection_reason,
)
from endless_assets.models import OK, REJECTED, Task
from endless_assets.settings import Settings
from endless_assets.stages.runner import Log, now
from endless_assets.stages.stage_run import Counts, StageResult, status_metadata

LOG = logging.getLogger(__name__)
CACHE = "cache/decontamination"  # under the data directory: reference tasks' words, by content


@dataclass
class DecontaminationOutcome:
    """One task's check: what it was held against, and what it shares with which task."""

    task_id: str
    batch: str
    status: str = OK
    reject_reason: str = ""
    reference_sets: str = ""
    thresholds: str = ""
    fields: list[str] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    seconds: float = 0.0

    def row(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "batch": self.batch,
            "status": self.status,
            "reject_reason": self.reject_reason,
            "reference_sets": self.reference_sets,
            "thresholds": self.thresholds,
            "fields": ",".join(self.fields),
            "hits": json.dumps([asdict(h) for h in self.hits], ensure_ascii=False),
            "seconds": self.seconds,
            "created_at": now(),
        }


class Checker:
    """The reference sets read and indexed once per process and settings; `check` is then one
    task at a time, from any thread."""

    def __init__(self, references: References, thresholds: Thresholds, sets: str) -> None:
        self.references = references
        self.thresholds = thresholds
        self.sets = sets  # name:tasks, comma-separated
        self.decontaminator = Decontaminator(references.tasks, thresholds)

    @property
    def active(self) -> bool:
        return bool(self.references.tasks)

    def describe_thresholds(self) -> str:
        t = self.thresholds
        sizes = ",".join(str(n) for n in t.ngram_sizes)
        return f"ngrams {sizes}, fuzzy {t.fuzzy_ratio:g}"

    def check(self, task: Task) -> DecontaminationOutcome:
        started = time.monotonic()
        outcome = DecontaminationOutcome(task.task_id, task.batch)
        outcome.reference_sets, outcome.thresholds = self.sets, self.describe_thresholds()
        outcome.fields = [name for name, texts in field_texts(task).items() if texts]
        if self.active:
            outcome.hits = self.decontaminator.check(task)
        if outcome.hits:
            outcome.status, outcome.reject_reason = REJECTED, rejection_reason(outcome.hits)
        outcome.seconds = time.monotonic() - started
        return outcome


_CHECKERS: dict[tuple[str, str, float, str], Checker] = {}
_LOCK = threading.Lock()


def checker(references: str, ngrams: str, fuzzy: float, data_dir: str) -> Checker:
    """The checker of these settings, made once per process (ValueError: one does not parse)."""
    key = (references, ngrams, fuzzy, data_dir)
    with _LOCK:
        found = _CHECKERS.get(key)
        if found is None:
            sizes = tuple(int(part) for part in ngrams.split(",") if part.strip())
            thresholds = Thresholds(ngram_sizes=sizes, fuzzy_ratio=fuzzy)
            sources = parse_references(references)
            read = read_references(sources, Path(data_dir) / CACHE)
            counts: dict[str, int] = {}
            for task in read.tasks:
                counts[task.reference_set] = counts.get(task.reference_set, 0) + 1
            sets = ",".join(f"{s.name}:{counts.get(s.name, 0)}" for s in sources)
            found = Checker(read, thresholds, sets)
            _CHECKERS.clear()  # (one configuration at a time is what a process uses)
            _CHECKERS[key] = found
        return found


def run_decontamination(
    settings: Settings, tasks: list[Task], table: str, *, log: Log, **metadata: Any
) -> StageResult:
    """Check `tasks` into `table` (`task_decontamination`, or `contamination_recheck`)."""
    found = checker(
        settings.decontamination.references,
        settings.decontamination.ngrams,
        settings.decontamination.fuzzy,
        settings.run.data_dir,
    )
    if not found.references.tasks:
        log.info("no reference set to check against (decontamination_references)")
    else:
        log.info(
            f"checking against {found.sets} ({len(found.references.tasks)} benchmark tasks; "
            f"{found.decontaminator.index.summary()})"
        )
    rows = [found.check(task).row() for task in tasks]
    rejected = [r for r in rows if r["status"] == REJECTED]
    violations = [
        f"{r['task_id']}: rejected without a contaminated: reason"
        for r in rejected
        if not r["reject_reason"].startswith("contaminated: ")
    ]
    sources = Counter(
        r["reject_reason"].split(" (", 1)[0].removeprefix("contaminated: ") for r in rejected
    )
    metadata.update(
        entered=len(rows),
        **status_metadata(rows),
        reference_sets=found.sets or "none",
        thresholds=found.describe_thresholds(),
        contaminated=len(rejected),
        unreadable_reference_tasks=len(found.references.unreadable),
    )
    if rejected:
        metadata["benchmark_tasks"] = Counts(sources, "benchmark task")
    return StageResult(table, rows, violations, metadata)
