"""The skeleton every per-task stage shares (no Dagster here): `StageRun` holds a run's
settings, sandbox and generator and works its tasks in parallel, journaled; `StageResult` is
what the run made: its rows, the invariants they broke and its metadata as plain values
(`Counts`, `Markdown`, frames) that defs/ turns into the UI's values."""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from endless_assets.generation.carried import CarriedGenerator
from endless_assets.generation.factory import make_generator, task_parallelism
from endless_assets.models import HARNESS_ERROR, Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.stages.costs import StageMeter
from endless_assets.stages.runner import Log, resumable, run_parallel
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake


@dataclass(frozen=True)
class Counts:
    """A count per key, shown as a table (most common first)."""

    counts: Counter
    key: str
    count: str = "tasks"


class Markdown(str):
    """Text the UI renders as markdown."""


@dataclass
class StageResult:
    """What one run of a stage made: its rows (the table's), the invariants they broke, and its
    metadata as plain values."""

    table: str
    rows: list[dict[str, Any]]
    violations: list[str] | None = None  # None: the table has no invariants check
    metadata: dict[str, Any] = field(default_factory=dict)

    def frame(self) -> pl.DataFrame:
        return frame(self.table, self.rows)


class StageRun:
    """One run of a per-task stage over a batch: its settings, sandbox and generator, its tasks
    worked on in parallel and journaled, and the figures every stage reports."""

    def __init__(
        self,
        settings: Settings,
        sandbox: Sandbox,
        lake: Lake,
        table: str,
        batch: str,
        *,
        log: Log,
        imported: bool = False,
    ) -> None:
        self.settings, self.sandbox, self.lake, self.table = settings, sandbox, lake, table
        self.batch, self.log, self.imported = batch, log, imported
        # The generator it repairs with: the configured one, none for imported tasks.
        self.generator = (
            CarriedGenerator() if imported else make_generator(settings, sandbox.base.tag)
        )
        self.started = time.monotonic()
        self.meter = StageMeter(sandbox)
        self.entered = self.recovered = 0

    def image(self, task: Task) -> str:
        """The tag of the task's image as the build stage built it (a cache hit, or rebuilt)."""
        build = self.sandbox.build(
            task.dockerfile or "", task.context_files, services=task.services
        )
        if not build.ok:
            raise SandboxError(f"the build stage image no longer builds: {build.log[-500:]}")
        return build.tag

    def each(
        self,
        tasks: Sequence[Task],
        work: Callable[[Task], Any],
        outcome: Callable[..., Any],
        *,
        label: str,
        workers: int | None = None,
    ) -> list[dict[str, Any]]:
        """Each task's `work(task).row(task)`, `workers` tasks at a time (default: as many as
        the generator asks for); rows a run under the same settings finished already come from
        the journal. An exception in one task becomes its `outcome(task_id, HARNESS_ERROR, ...)`
        row: one bad task never loses the batch."""

        def failed(task: Task, exc: BaseException) -> dict[str, Any]:
            return outcome(task.task_id, HARNESS_ERROR, reject_reason=f"harness: {exc!r}").row(task)

        resume = resumable(
            self.lake.data_dir, self.settings, self.table, self.batch, self.generator
        )
        self.entered, self.recovered = len(tasks), len(resume.recovered)

        def made(task: Task) -> dict[str, Any]:
            self.meter.made(task.task_id)
            return work(task).row(task)

        if workers is None:
            workers = task_parallelism(self.generator, self.settings)
        with self.meter.items():
            return run_parallel(
                tasks,
                resume.wrap(made),
                failed,
                log=self.log,
                workers=workers,
                label=label,
                recover=self.sandbox.recover,
            )

    def result(
        self, rows: list[dict[str, Any]], violations: list[str], *, funnel_step: str, **metadata
    ) -> StageResult:
        """The rows with the stage's metadata after the common figures."""
        return StageResult(
            self.table,
            rows,
            violations,
            {
                "funnel_step": funnel_step,
                "entered": self.entered,
                "recovered_from_journal": self.recovered,
                **status_metadata(rows),
                **metadata,
                **self.meter.metadata(),
                **timing_metadata([r["seconds"] for r in rows], time.monotonic() - self.started),
            },
        )


def status_metadata(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Row counts by status and the top rejection reasons."""
    statuses = Counter(r["status"] for r in rows)
    meta: dict[str, Any] = {
        "rows": len(rows),
        "ok": statuses.get("ok", 0),
        "rejected": statuses.get("rejected", 0),
        "harness_errors": statuses.get("harness_error", 0),
    }
    reasons = Counter(r["reject_reason"].split(": ", 1)[0] for r in rows if r.get("reject_reason"))
    if reasons:
        meta["reject_reasons"] = Counts(reasons, "reason")
    return meta


def timing_metadata(seconds: list[float], wall: float) -> dict[str, Any]:
    meta: dict[str, Any] = {"wall_seconds": round(wall, 2)}
    if seconds:
        meta["median_task_seconds"] = round(statistics.median(seconds), 3)
        meta["max_task_seconds"] = round(max(seconds), 3)
        if wall > 0:
            meta["tasks_per_minute"] = round(len(seconds) / wall * 60, 1)
    return meta


def usage_metadata(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows or "requests" not in rows[0]:
        return {}
    return {
        "llm_requests": sum(r["requests"] or 0 for r in rows),
        "tokens_in": sum(r["tokens_in"] or 0 for r in rows),
        "tokens_out": sum(r["tokens_out"] or 0 for r in rows),
    }


def task_markdown(row: dict[str, Any]) -> Markdown:
    """A task rendered for the UI: instruction, truth, tests, solution."""
    truth = row.get("truth") or "{}"
    with contextlib.suppress(TypeError, ValueError):
        truth = json.dumps(json.loads(truth), indent=2, ensure_ascii=False)
    parts = [
        f"### {row.get('task_id', '')} — {row.get('category', '')} ({row.get('complexity', '')})",
        f"*{row.get('scenario', '')}* · family `{row.get('family', '')}`",
        "",
        "**Instruction**",
        "",
        str(row.get("instruction", "")),
        "",
        "**Truth (privileged)**",
        f"```json\n{truth[:3000]}\n```",
    ]
    for title, key, lang in (
        ("Dockerfile", "dockerfile", "dockerfile"),
        ("Completion test", "completion_test", "python"),
        ("Reference solution", "reference_solution", "bash"),
    ):
        if row.get(key):
            parts += [f"**{title}**", f"```{lang}\n{str(row[key])[:3000]}\n```"]
    return Markdown("\n".join(parts))
